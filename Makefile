# The two commands a newcomer needs: `make run` and `make test`.
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
STATICCHECK_VERSION ?= v0.7.0
FUZZTIME ?= 10s

.PHONY: run build test vet staticcheck unit fuzz bench bench-e2e generate tools

run:
	$(GO) run ./cmd/gateway

build:
	$(GO) build -o bin/gateway ./cmd/gateway

## test: everything CI runs (installs its own tools and peers first).
test:
	./scripts/test.sh

tools: $(TOOLS)/staticcheck

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

vet:
	$(GO) vet ./...

staticcheck: tools
	$(TOOLS)/staticcheck ./...

unit:
	$(GO) test -race -count=1 ./...

fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## bench-e2e: the end-to-end benchmark at full size, gateway and gopcua baseline
## (gateway bench -h; a few minutes). Override with BENCH_E2E_FLAGS=….
BENCH_E2E_FLAGS ?= -items 1000000 -rate 1s -duration 30s -bridge both
bench-e2e: build
	./bin/gateway bench $(BENCH_E2E_FLAGS)

generate:
	$(GO) generate ./...
