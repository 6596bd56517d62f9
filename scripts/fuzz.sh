#!/usr/bin/env bash
# Runs every Fuzz target in the module for a bounded time (FUZZTIME, default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
t="${FUZZTIME:-10s}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
  for f in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $f"
    go test -run='^$' -fuzz="^${f}\$" -fuzztime="$t" "$pkg" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; exit 1; }
  done
done
