#!/usr/bin/env bash
# Builds the gateway's container image. The Dockerfile is FROM scratch and
# compiles nothing: this script builds the static binary here (CGO off), lays
# out its root filesystem under bin/image/ (binary, CA bundle, passwd/group
# with the unprivileged user 65532 "uagate", an empty state directory) and
# then builds the image from the repository root, whose .dockerignore lets
# only bin/image/ into the build context. So no base image and no registry
# are needed.
#
#   scripts/build-image.sh                  context + image uagate/gateway:<version>:
#                                           one manifest list for every platform
#   CONTEXT_ONLY=1 scripts/build-image.sh   only the context (then: docker buildx build --platform … .)
#   IMAGE=name:tag scripts/build-image.sh   another name
#   PLATFORMS=linux/amd64,linux/arm64       the platforms (default both): the binary is
#                                           pure Go, cross-compiled; nothing runs emulated
#   BUILDER=docker|podman|buildah           default: buildah, else podman, else docker
#                                           (docker: the first platform only, one image)
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

platforms="${PLATFORMS:-linux/amd64,linux/arm64}"
IFS=, read -r -a plats <<<"$platforms"

ctx="$root/bin/image"
rm -rf "$ctx"
# One root filesystem per architecture (bin/image/<arch>/rootfs: the
# Dockerfile copies the one of its TARGETARCH); the state directory is shared.
# var/lib is in rootfs so that it stays root-owned: COPY --chown would also
# give the parent directories it creates to the user.
mkdir -p "$ctx/state/uagate"
for plat in "${plats[@]}"; do
	os="${plat%%/*}" arch="${plat#*/}"
	[ "$os" = linux ] || { log "platform $plat: only linux/<arch>"; exit 1; }
	rootfs="$ctx/$arch/rootfs"
	mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs/var/lib"
	log "building the static binary for $plat ($version)"
	CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -buildvcs=false \
		-ldflags "-s -w -X main.version=$version" \
		-o "$rootfs/gateway" ./cmd/gateway
done

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
for plat in "${plats[@]}"; do
	rootfs="$ctx/${plat#*/}/rootfs"
	cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
	cp LICENSE "$rootfs/LICENSE"

	# A passwd entry gives the uid a name and a home (the state directory), which
	# tools such as "id" inside debug containers and Go's os/user expect.
	cat >"$rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
uagate:x:$uid:$uid:uagate gateway:/var/lib/uagate:/sbin/nologin
EOF
	cat >"$rootfs/etc/group" <<EOF
root:x:0:
uagate:x:$uid:
EOF
	chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group" "$rootfs/etc/ssl/certs/ca-certificates.crt" "$rootfs/LICENSE"
	chmod 0755 "$rootfs/gateway"
	# /tmp for anything that needs a scratch file; world-writable with the sticky
	# bit as usual. (The chart mounts an emptyDir there: its root is read-only.)
	chmod 1777 "$rootfs/tmp"
done
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

args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "CREATED=$created" -f Dockerfile)
case "$builder" in
buildah | podman)
	# One image per platform (no RUN step: nothing is emulated), gathered in
	# a manifest list under the image's name. The docker format keeps the
	# HEALTHCHECK (OCI has none).
	if [ "$builder" = buildah ]; then
		# shellcheck disable=SC2206 # BUILDAH_FLAGS is a list of flags
		b=(buildah ${BUILDAH_FLAGS---storage-driver vfs})
		bud=("${b[@]}" bud --isolation chroot --layers=false --format docker)
	else
		b=(podman)
		bud=(podman build --format docker)
	fi
	"${b[@]}" manifest rm "$image" >/dev/null 2>&1 || "${b[@]}" rmi -f "$image" >/dev/null 2>&1 || true
	"${b[@]}" manifest create "$image" >/dev/null
	for plat in "${plats[@]}"; do
		log "building $image for $plat with $builder"
		"${bud[@]}" --platform "$plat" "${args[@]}" -t "$image-${plat#*/}" .
		"${b[@]}" manifest add "$image" "$image-${plat#*/}" >/dev/null
	done
	log "built $image: a manifest list of ${platforms}"
	if [ "$builder" = buildah ]; then
		log "push it with: ${b[*]} manifest push --all $image docker://<registry>/uagate/gateway:$version"
	fi
	;;
*)
	log "building $image for ${plats[0]} with $builder (docker buildx build --platform $platforms for all)"
	"$builder" build --platform "${plats[0]}" "${args[@]}" -t "$image" .
	log "built $image"
	;;
esac
