# The two commands a newcomer needs: `make run` and `make test`.
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
STATICCHECK_VERSION ?= v0.7.0
FUZZTIME ?= 10s

.PHONY: run build test vet staticcheck unit fuzz bench generate tools

run:
	$(GO) run ./cmd/gateway

build:
	$(GO) build -o bin/gateway ./cmd/gateway

## image: the container image uagate/gateway:<git describe> (FROM scratch; the
## binary is built here; buildah, podman or docker; IMAGE=name:tag to rename).
.PHONY: image
image:
	./scripts/build-image.sh

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

generate:
	$(GO) generate ./...
