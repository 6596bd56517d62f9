#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what it needs, then vet, staticcheck,
# race-enabled tests and short bounded fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian installs the brokers' daemons to /usr/sbin, which a non-root PATH may lack.
export PATH="$PWD/.tools/bin:$PATH:/usr/sbin"

step() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

step "tools"
make -s tools
step "brokers for the sink tests (Debian's mosquitto, its mosquitto_sub client, and nats-server), chromium for the dashboard's, protoc for the Sparkplug B code's freshness"
need=()
command -v mosquitto >/dev/null || need+=(mosquitto)
command -v mosquitto_sub >/dev/null || need+=(mosquitto-clients)
command -v nats-server >/dev/null || need+=(nats-server)
command -v chromium >/dev/null || need+=(chromium)
command -v protoc >/dev/null || need+=(protobuf-compiler)
if [ ${#need[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
fi

step "node-opcua peer and JSON cross-check packages"
./scripts/install-node-opcua.sh

step "go vet"
go vet ./...

step "staticcheck"
staticcheck ./...

step "go test -race"
go test -race -count=1 -timeout 20m ./...

# The race detector allocates, so the zero-allocation tests live in
# *_norace_test.go files (//go:build !race) and the -race run above does not
# build them; this step runs them, so the hot-path guarantees are checked in CI
# (and TestStopNATSSampler, whose store the race detector would report).
step "allocation tests without -race"
go test -count=1 -run 'Allocs|TestDecodePublishResponse1000|TestVariantAccessors|TestStopNATSSampler' ./... && go test -count=1 -run 'TestSubscriptionNodeOPCUA/SteadyStateAllocs' ./uastack/client/

# The image (buildah) and the Helm chart (charts/test, a module of its own that
# the ./... above does not reach).
step "image and Helm chart"
./scripts/test-deploy.sh

step "fuzz (${FUZZTIME:-10s} per target)"
FUZZTIME="${FUZZTIME:-10s}" ./scripts/fuzz.sh

step "done"
