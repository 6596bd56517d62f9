#!/usr/bin/env bash
# Installs the npm packages the tests use, each project from its package-lock.json
# into its own git-ignored node_modules: the node-opcua test peer (testpeer/) and
# node-opcua-json for jsonenc's cross-check (jsonenc/testdata/node/). Idempotent:
# a project whose node_modules already matches its lock file is skipped at once.
#
#   scripts/install-node-opcua.sh          install if needed
#   FORCE=1 scripts/install-node-opcua.sh  reinstall from scratch
#
# Needs Node.js >= 18 and npm. When they are missing and apt-get is usable (root on
# Debian), it installs Debian's nodejs and npm packages first.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

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

# install DIR PACKAGE: npm ci in DIR unless its stamp (the lock file's hash and the
# node major version node_modules was built for) is current and PACKAGE is there.
install() {
	local dir="$root/$1" pkg="$2"
	local stamp="$dir/node_modules/.uagate-install-stamp"
	local want
	want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1) node-$major"
	if [ "${FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
		[ -f "$dir/node_modules/$pkg/package.json" ]; then
		return 0
	fi
	log "installing $1 npm packages (node $(node --version), npm $(npm --version))"
	# node-opcua declares engines node >= 22.13 but runs on 20; keep the EBADENGINE
	# warnings out of the log. npm ci starts from an empty node_modules and installs
	# exactly what package-lock.json says.
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	echo "$want" >"$stamp"
	log "done: $pkg $(cd "$dir" && node -p "require('./node_modules/$pkg/package.json').version" 2>/dev/null || echo '?')"
}

install testpeer node-opcua
install jsonenc/testdata/node node-opcua-json
