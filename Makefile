# The two commands a newcomer needs: `make run` and `make test`.
GO ?= go
TOOLS := $(CURDIR)/.tools/bin
STATICCHECK_VERSION ?= v0.7.0
FUZZTIME ?= 10s

.PHONY: run run-commands run-sparkplug build test vet staticcheck unit fuzz bench bench-e2e bench-ordinary generate tools

run:
	$(GO) run ./cmd/gateway

## run-commands: the demo with commands on (examples/commands.yaml): it prints how to
## write Setpoint with mosquitto_pub and watch the value change.
run-commands:
	$(GO) run ./cmd/gateway run -config examples/commands.yaml

## run-sparkplug: the demo as a Sparkplug B Edge Node (examples/sparkplug.yaml) on the
## embedded MQTT broker: watch spBv1.0/# (see README, Sparkplug B).
run-sparkplug:
	$(GO) run ./cmd/gateway run -config examples/sparkplug.yaml

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

## bench-e2e: the end-to-end benchmark at full size (gateway bench -h; several minutes).
## Two runs: 1,000,000 notifications/s as 100,000 items at 100 ms, gateway and the gopcua
## baseline (throughput, CPU per notification, latency, loss, ratio); then 1,000,000 items
## at 1 s for the gateway's memory per item (sampling 250 ms: sampling a million items
## every 20 ms would cost the simulation server a core of the two; publishing 20 ms and the
## counters in lockstep, the heavier case for memory). The first run uses the bench's
## defaults: counters staggered over their period, sampling 20 ms, publishing 10 ms.
## Each run ends with a verdict: sustained, or which process was the limit.
BENCH_E2E_FLAGS ?= -items 100000 -rate 100ms -duration 30s -bridge both
BENCH_E2E_MEM_FLAGS ?= -items 1000000 -rate 1s -sampling 250ms -publishing 20ms -stagger=false -duration 20s -setup-timeout 10m -bridge gateway
bench-e2e: build
	./bin/gateway bench $(BENCH_E2E_FLAGS)
	./bin/gateway bench $(BENCH_E2E_MEM_FLAGS)

## bench-ordinary: the cost at ordinary rates and at rest (a few minutes): 10,000 changes/s
## from node-opcua (100 counters every 10 ms, publishing 100 ms; needs
## scripts/install-node-opcua.sh), the same rate from the simulation server, the gateway at
## rest (one group of four unchanging fields, 1 s publishing, 60 s), and -find-max: the
## highest rate the gateway sustains beside the harness, with the gopcua baseline's ratio
## at the highest rate both sustain.
BENCH_FINDMAX_FLAGS ?= -find-max -items 5000 -max-items 1000000 -duration 15s -bridge both
bench-ordinary: build
	./scripts/install-node-opcua.sh
	./bin/gateway bench -upstream nodeopcua -duration 30s
	./bin/gateway bench -items 1000 -rate 100ms -duration 30s -bridge gateway
	./bin/gateway bench -idle
	./bin/gateway bench $(BENCH_FINDMAX_FLAGS)

generate:
	$(GO) generate ./...
