#!/bin/sh
# Generates sparkplug_b.pb.go from sparkplug_b.proto into the directory $1
# (default: here): protoc from Debian's protobuf-compiler package, and
# protoc-gen-go built from the google.golang.org/protobuf version go.mod
# names. go generate runs it; TestGeneratedUpToDate runs it into a
# temporary directory and compares.
set -eu
cd "$(dirname "$0")"
out=${1:-.}
command -v protoc >/dev/null || {
	echo "gen.sh: protoc not found (apt-get install -y protobuf-compiler)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
protoc --plugin=protoc-gen-go="$tmp/protoc-gen-go" --proto_path=. \
	--go_out="$out" --go_opt=paths=source_relative \
	--go_opt=Msparkplug_b.proto=github.com/uagate/gateway/bridge/sink/sparkplug/sparkplugpb \
	sparkplug_b.proto
