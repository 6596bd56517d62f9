#!/usr/bin/env bash
# Installs node-opcua-json for jsonenc's cross-check test into
# jsonenc/testdata/node/node_modules (git-ignored) from package-lock.json.
# Idempotent: returns at once when node_modules matches the lock file.
#
#   jsonenc/testdata/install-node.sh
#
# Needs Node.js >= 18 and npm; when they are missing and apt-get is usable
# (root on Debian) it installs Debian's nodejs and npm first. node-opcua
# declares engines node >= 22.13 but the JSON packages run on Node 20.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/node" && pwd)"
stamp="$dir/node_modules/.jsonenc-install-stamp"
log() { printf 'jsonenc/install-node: %s\n' "$*" >&2; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "node/npm not found; installing Debian's nodejs and npm"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
	else
		log "node and npm are required (Node.js >= 18)"
		exit 1
	fi
fi

major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 18 ]; then
	log "Node.js >= 18 required, found $(node --version)"
	exit 1
fi

want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1) node-$major"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/node_modules/node-opcua-json/package.json" ]; then
	exit 0
fi
log "installing node-opcua-json (node $(node --version))"
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
