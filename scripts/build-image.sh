#!/usr/bin/env bash
# Builds the gateway's container image. The Dockerfile is FROM scratch and
# compiles nothing: this script builds the static binary here (CGO off), lays
# out its root filesystem under bin/image/ (binary, CA bundle, passwd/group
# with the unprivileged user 65532 "uagate", an empty state directory) and
# then builds the image from the repository root, whose .dockerignore lets
# only bin/image/ into the build context. So no base image and no registry
# are needed.
#
#   scripts/build-image.sh                  context + image uagate/gateway:<version>
#   CONTEXT_ONLY=1 scripts/build-image.sh   only the context (then: docker build .)
#   IMAGE=name:tag scripts/build-image.sh   another name
#   BUILDER=docker|podman|buildah           default: buildah, else podman, else docker
#   BUILDAH_FLAGS=…                         global flags for buildah; default
#                                           "--storage-driver vfs" (no kernel overlay or
#                                           fuse needed; the image is one small layer)
#
# VERSION (default: git describe) is stamped into the binary (gateway version)
# and the image's OCI labels.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf 'build-image: %s\n' "$*" >&2; }

version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# The commit's time, not the wall clock: the same commit gives the same labels.
created="$(git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)"
image="${IMAGE:-uagate/gateway:$version}"
uid=65532

ctx="$root/bin/image"
rm -rf "$ctx"
# var/lib is in rootfs so that it stays root-owned: COPY --chown would also
# give the parent directories it creates to the user.
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/rootfs/var/lib" "$ctx/state/uagate"

log "building the static binary ($version)"
CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X main.version=$version" \
	-o "$ctx/rootfs/gateway" ./cmd/gateway

# The CA bundle lets the gateway verify TLS brokers and HTTPS peers; Debian's
# ca-certificates package provides it (installed when missing and we are root).
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$ca" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "no CA bundle at $ca; installing Debian's ca-certificates"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates >/dev/null
	else
		log "no CA bundle at $ca: install ca-certificates first"
		exit 1
	fi
fi
cp "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"

# A passwd entry gives the uid a name and a home (the state directory), which
# tools such as "id" inside debug containers and Go's os/user expect.
cat >"$ctx/rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
uagate:x:$uid:$uid:uagate gateway:/var/lib/uagate:/sbin/nologin
EOF
cat >"$ctx/rootfs/etc/group" <<EOF
root:x:0:
uagate:x:$uid:
EOF
chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 0755 "$ctx/rootfs/gateway"
# /tmp for anything that needs a scratch file; world-writable with the sticky
# bit as usual. (The chart mounts an emptyDir there: its root is read-only.)
chmod 1777 "$ctx/rootfs/tmp"
# The state directory is COPY --chown'ed to the user; 0700 because it holds the
# application certificate's private key. It is copied as state/uagate into
# /var/lib: COPY keeps the mode of a directory it copies, not of the one it
# copies the contents of.
chmod 0700 "$ctx/state/uagate"

if [ -n "${CONTEXT_ONLY:-}" ]; then
	log "context ready in $ctx (docker build --build-arg VERSION=$version -t $image .)"
	exit 0
fi

builder="${BUILDER:-}"
if [ -z "$builder" ]; then
	for b in buildah podman docker; do
		if command -v "$b" >/dev/null 2>&1; then builder=$b; break; fi
	done
fi
[ -n "$builder" ] || { log "no buildah, podman or docker found"; exit 1; }

args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "CREATED=$created" -t "$image" -f Dockerfile .)
log "building $image with $builder"
case "$builder" in
buildah)
	# shellcheck disable=SC2086 # BUILDAH_FLAGS is a list of flags
	buildah ${BUILDAH_FLAGS---storage-driver vfs} bud --isolation chroot --layers=false "${args[@]}"
	;;
*)
	"$builder" build "${args[@]}"
	;;
esac
log "built $image"
if [ "$builder" = buildah ]; then
	# shellcheck disable=SC2086
	log "push it with: buildah ${BUILDAH_FLAGS---storage-driver vfs} push $image docker://<registry>/uagate/gateway:$version"
fi
