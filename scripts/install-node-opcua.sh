#!/usr/bin/env bash
# Installs the node-opcua test peer's npm packages (testpeer/node_modules, git-ignored)
# from testpeer/package-lock.json. Idempotent: when node_modules already matches the
# lock file it returns at once.
#
#   scripts/install-node-opcua.sh          install if needed
#   FORCE=1 scripts/install-node-opcua.sh  reinstall from scratch
#
# Needs Node.js >= 18 and npm. When they are missing and apt-get is usable (root on
# Debian), it installs Debian's nodejs and npm packages first.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="$root/testpeer"
stamp="$peer/node_modules/.uagate-install-stamp"

log() { printf 'install-node-opcua: %s\n' "$*" >&2; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "node/npm not found; installing Debian's nodejs and npm"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
	else
		log "node and npm are required (Node.js >= 18); install them first"
		exit 1
	fi
fi

major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 18 ]; then
	log "Node.js >= 18 required, found $(node --version)"
	exit 1
fi

# The stamp records the lock file and the node version node_modules was built for.
want="$(sha256sum "$peer/package-lock.json" | cut -d' ' -f1) node-$major"
if [ "${FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -f "$peer/node_modules/node-opcua/package.json" ]; then
	exit 0
fi

log "installing testpeer npm packages (node $(node --version), npm $(npm --version))"
cd "$peer"
# node-opcua declares engines node >= 22.13 but runs on 20; keep the EBADENGINE
# warnings out of the log. npm ci starts from an empty node_modules and installs
# exactly what package-lock.json says.
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
log "done: $(node -p 'require("./node_modules/node-opcua/package.json").version' 2>/dev/null || echo '?')"
