#!/usr/bin/env bash
# Tests of what deploys the gateway, as CI runs them (scripts/test.sh calls it):
#
# 1. The image: built with buildah (Debian's package, installed when missing;
#    vfs storage and chroot isolation: no daemon, no registry, no base image)
#    for linux/amd64 and linux/arm64 into one manifest list, then its user,
#    entrypoint, command, port, volume, environment, labels, health check and
#    size are checked, and the binary is run in a chroot of the image's own
#    filesystem as user 65532 (gateway version; gateway run with the chart's
#    default configuration: /healthz, SIGTERM), and its files' owners are
#    checked. The image is removed after.
# 2. The Helm chart: the Go tests in charts/test, a module of its own (helm
#    lint --strict, helm template for every ci/*-values.yaml decoded strictly
#    into k8s.io/api types, the refusals, check-config on the rendered
#    configuration with the image's binary, the README's values table). helm
#    is built once from helm.sh/helm/v3 into $UAGATE_TOOLS (default
#    ~/.cache/uagate-tools/bin), outside the repository, and reused after.
#
#   scripts/test-deploy.sh            both
#   SKIP_IMAGE=1 scripts/test-deploy.sh   only the chart (e.g. without root)
#
# Needs root for buildah with vfs storage (CI is root); as another user it
# runs the mount step inside "buildah unshare".
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

HELM_VERSION=v3.22.0
MAX_IMAGE_BYTES=$((40 * 1000 * 1000))
tools="${UAGATE_TOOLS:-$HOME/.cache/uagate-tools/bin}"
image=localhost/uagate/gateway:test-deploy

log() { printf 'test-deploy: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
now() { date +%s; }

# --- 0. helm (the image step renders the chart's configuration with it) -----
helm="${HELM:-$tools/helm}"
# A helm built by go install reports only major.minor (no version is stamped
# in); an older one in the cache is replaced.
if [ -z "${HELM:-}" ] && [ -x "$helm" ] && ! "$helm" version --short 2>/dev/null | grep -q "^${HELM_VERSION%.*}"; then
	log "replacing $helm ($("$helm" version --short 2>/dev/null)): want $HELM_VERSION"
	rm -f "$helm"
fi
if [ ! -x "$helm" ]; then
	log "building helm $HELM_VERSION into $tools (once; it takes a few minutes)"
	t0=$(now)
	mkdir -p "$tools"
	GOBIN="$tools" GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	log "helm built in $(($(now) - t0))s"
	helm="$tools/helm"
fi
log "$("$helm" version --short 2>/dev/null || "$helm" version)"


# --- 1. the image -----------------------------------------------------------
gateway_bin="${UAGATE_GATEWAY:-}" # the image step sets it to the image's binary
if [ -z "${SKIP_IMAGE:-}" ]; then
	t0=$(now)
	if ! command -v buildah >/dev/null 2>&1; then
		[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 ||
			fail "buildah is missing (apt-get install buildah), or run with SKIP_IMAGE=1"
		log "installing Debian's buildah"
		apt-get update -qq
		# No recommends: the image has no RUN step, so no OCI runtime,
		# fuse-overlayfs or slirp4netns is needed.
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah >/dev/null
	fi
	bah=(buildah --storage-driver vfs)
	run_unshared=()
	[ "$(id -u)" = 0 ] || run_unshared=(buildah unshare)

	container=""
	arch="$(go env GOARCH)" # the platform whose image runs here
	cleanup() {
		if [ -n "$container" ]; then "${bah[@]}" rm "$container" >/dev/null 2>&1 || true; fi
		"${bah[@]}" manifest rm "$image" >/dev/null 2>&1 || true
		"${bah[@]}" rmi -f "$image-amd64" "$image-arm64" "$image" >/dev/null 2>&1 || true
	}
	trap cleanup EXIT
	cleanup # a run that was killed may have left them

	version="test-$(git rev-parse --short HEAD 2>/dev/null || echo nogit)"
	log "building the image $image ($version)"
	t1=$(now)
	VERSION="$version" IMAGE="$image" BUILDER=buildah BUILDAH_FLAGS="--storage-driver vfs" \
		scripts/build-image.sh
	t2=$(now)
	gateway_bin="$root/bin/image/$arch/rootfs/gateway"

	# One manifest list, an image per platform, each with its own binary.
	list="$("${bah[@]}" manifest inspect "$image")"
	for a in amd64 arm64; do
		grep -q "\"architecture\": *\"$a\"" <<<"$list" || fail "the manifest list lacks linux/$a: $list"
		go version -m "$root/bin/image/$a/rootfs/gateway" | grep -q "GOARCH=$a" || fail "bin/image/$a/rootfs/gateway is not a $a binary"
	done
	log "image: a manifest list of linux/amd64 and linux/arm64, each with its own static binary"

	inspect() { "${bah[@]}" inspect --type image --format "$1" "$image-$arch"; }
	want() { # want WHAT GOT EXPECTED
		[ "$2" = "$3" ] || fail "image $1: got '$2', want '$3'"
		log "image $1: $2"
	}
	want user "$(inspect '{{.OCIv1.Config.User}}')" "65532:65532"
	# buildah 1.28's --format has no json: each element is written as <…>.
	want entrypoint "$(inspect '{{range .OCIv1.Config.Entrypoint}}<{{.}}>{{end}}')" "</gateway>"
	want cmd "$(inspect '{{range .OCIv1.Config.Cmd}}<{{.}}>{{end}}')" "<run>"
	want "exposed ports" "$(inspect '{{range $k, $v := .OCIv1.Config.ExposedPorts}}<{{$k}}>{{end}}')" "<8080/tcp>"
	want volumes "$(inspect '{{range $k, $v := .OCIv1.Config.Volumes}}<{{$k}}>{{end}}')" "</var/lib/uagate>"
	env="$(inspect '{{range .OCIv1.Config.Env}}<{{.}}>{{end}}')"
	for e in UAGATE_STATE_DIR=/var/lib/uagate UAGATE_HTTP_LISTEN=0.0.0.0:8080; do
		case "$env" in *"<$e>"*) log "image env: $e" ;; *) fail "image env $env lacks $e" ;; esac
	done
	want "version label" "$(inspect '{{index .OCIv1.Config.Labels "org.opencontainers.image.version"}}')" "$version"
	want "license label" "$(inspect '{{index .OCIv1.Config.Labels "org.opencontainers.image.licenses"}}')" "Apache-2.0"
	want healthcheck "$(inspect '{{range .Docker.Config.Healthcheck.Test}}<{{.}}>{{end}}')" "<CMD></gateway><healthcheck>"
	# The image's size: its layers as stored (uncompressed tar).
	size=0
	for s in $(inspect '{{.Manifest}}' | grep -o '"layers":\[.*\]' | grep -o '"size":[0-9]*' | cut -d: -f2); do
		size=$((size + s))
	done
	[ "$size" -gt 1000000 ] || fail "image size $size bytes: the layers were not found in the manifest"
	[ "$size" -lt "$MAX_IMAGE_BYTES" ] || fail "image size $size bytes, more than $MAX_IMAGE_BYTES"
	log "image size: $size bytes ($((size / 1000 / 1000)) MB, limit $((MAX_IMAGE_BYTES / 1000 / 1000)) MB)"

	# The chart's default configuration, as its ConfigMap holds it.
	cfg="$(mktemp)"
	"$helm" template test charts/gateway --kube-version v1.33.0 --show-only templates/configmap.yaml |
		sed -n '/^  config.yaml: |$/,$p' | tail -n +2 | sed 's/^    //' >"$cfg"
	grep -q "websocket" "$cfg" || fail "no config.yaml in the chart's ConfigMap: $(cat "$cfg")"

	# Run the binary from the image's own filesystem, and look at its files.
	container="$("${bah[@]}" from --pull-never --name uagate-test-deploy "$image-$arch")"
	# shellcheck disable=SC2016 # expanded by the inner shell
	"${run_unshared[@]}" env BAH="${bah[*]}" C="$container" V="$version" CFG="$cfg" bash -euc '
		m="$($BAH mount "$C")"
		pid=""
		out="$(mktemp)"
		cleanup() {
			if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
			$BAH umount "$C" >/dev/null
			rm -f "$out"
		}
		trap cleanup EXIT
		fail() { echo "test-deploy: FAIL: $*" >&2; exit 1; }
		# As in a container: the image as the root directory, its user.
		v="$(chroot --userspec=65532:65532 "$m" /gateway version)"
		[ "$v" = "gateway $V" ] || fail "gateway version in the image: got \"$v\", want \"gateway $V\""
		echo "test-deploy: chroot <image> as 65532: /gateway version: $v" >&2
		[ "$(stat -c %u:%g:%a "$m/var/lib/uagate")" = "65532:65532:700" ] ||
			fail "/var/lib/uagate: $(stat -c %u:%g:%a "$m/var/lib/uagate"), want 65532:65532:700"
		[ "$(stat -c %u:%g "$m/var/lib")" = "0:0" ] || fail "/var/lib is not root-owned"
		[ "$(stat -c %a "$m/tmp")" = "1777" ] || fail "/tmp mode $(stat -c %a "$m/tmp")"
		grep -q "^uagate:x:65532:65532:" "$m/etc/passwd" || fail "/etc/passwd has no uagate 65532"
		grep -q "^uagate:x:65532:" "$m/etc/group" || fail "/etc/group has no uagate 65532"
		[ -s "$m/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle"
		grep -q "BEGIN CERTIFICATE" "$m/etc/ssl/certs/ca-certificates.crt" || fail "the CA bundle holds no certificate"
		grep -q "Apache License" "$m/LICENSE" || fail "no /LICENSE in the image"
		n=$(find "$m" -mindepth 1 -not -path "$m/etc*" -not -path "$m/var*" -not -path "$m/tmp" -not -path "$m/gateway" -not -path "$m/LICENSE" | wc -l)
		[ "$n" = 0 ] || fail "unexpected files in the image: $(find "$m" -mindepth 1 | head -20)"
		echo "test-deploy: image files: /gateway, /LICENSE, /etc/{passwd,group,ssl/certs/ca-certificates.crt}, /tmp (1777), /var/lib/uagate (65532, 0700)" >&2

		# The gateway runs in the image as the chart runs it (its default
		# configuration, its environment; the listener on loopback here):
		# /healthz answers, the process is user 65532, SIGTERM ends it
		# cleanly, and what it wrote to the state directory is the user'"'"'s.
		cp "$CFG" "$m/tmp/config.yaml"
		chmod 0644 "$m/tmp/config.yaml"
		env -i UAGATE_STATE_DIR=/var/lib/uagate UAGATE_HTTP_LISTEN=127.0.0.1:0 \
			"$(command -v chroot)" --userspec=65532:65532 "$m" /gateway run -config /tmp/config.yaml >/dev/null 2>"$out" &
		pid=$!
		addr=""
		deadline=$((SECONDS + 30))
		while [ -z "$addr" ]; do
			addr="$(sed -n "s/.*msg=\"api: listening\".*addr=\([0-9.]*:[0-9]*\).*/\1/p" "$out" | head -1)"
			[ -n "$addr" ] && break
			kill -0 "$pid" 2>/dev/null || fail "the gateway in the image exited: $(cat "$out")"
			[ "$SECONDS" -lt "$deadline" ] || fail "the gateway in the image did not listen within 30s: $(cat "$out")"
			sleep 0.1
		done
		exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}"
		printf "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n" >&3
		resp="$(timeout 10 cat <&3 | tr -d "\r")"
		exec 3<&-
		case "$resp" in "HTTP/1."?" 200"*) ;; *) fail "GET /healthz: $resp" ;; esac
		# The HEALTHCHECK command of the image, as the runtime runs it.
		hc="$(env -i UAGATE_HTTP_LISTEN="$addr" "$(command -v chroot)" --userspec=65532:65532 "$m" /gateway healthcheck 2>&1)" ||
			fail "gateway healthcheck in the image: $hc"
		echo "test-deploy: chroot <image>: gateway healthcheck: ${hc:0:60}" >&2
		uid="$(awk "/^Uid:/ {print \$2}" "/proc/$pid/status")"
		[ "$uid" = 65532 ] || fail "the gateway runs as uid $uid"
		echo "test-deploy: chroot <image> as 65532: gateway run -config <chart default>: GET http://$addr/healthz: ${resp%%$'"'"'\n'"'"'*}" >&2
		kill -TERM "$pid"
		deadline=$((SECONDS + 20))
		while kill -0 "$pid" 2>/dev/null; do
			[ "$SECONDS" -lt "$deadline" ] || fail "the gateway did not stop within 20s of SIGTERM: $(tail -5 "$out")"
			sleep 0.1
		done
		rc=0
		wait "$pid" || rc=$?
		pid=""
		[ "$rc" = 0 ] || fail "the gateway exited $rc on SIGTERM: $(tail -5 "$out")"
		bad="$(find "$m/var/lib/uagate" ! -uid 65532)"
		[ -z "$bad" ] || fail "files in the state directory not owned by 65532: $bad"
		echo "test-deploy: SIGTERM: exit 0; state directory: $(find "$m/var/lib/uagate" -mindepth 1 | wc -l) entries, all 65532'"'"'s" >&2
	'
	rm -f "$cfg"
	# The binary is static (CGO off: no interpreter, no shared library on an
	# empty base) and reproducible (-trimpath); its build information says so.
	buildinfo="$(go version -m "$gateway_bin")"
	for s in "CGO_ENABLED=0" "-trimpath=true"; do
		grep -q -- "build[[:space:]]*$s" <<<"$buildinfo" || fail "the gateway was not built with $s:
$buildinfo"
	done
	if command -v file >/dev/null 2>&1; then
		file -L "$gateway_bin" | grep -q "statically linked" || fail "the gateway is not statically linked: $(file -L "$gateway_bin")"
	fi
	log "image /gateway: CGO_ENABLED=0, -trimpath, statically linked"
	t3=$(now)
	log "image: buildah install $((t1 - t0))s, build (binary + image) $((t2 - t1))s, checks $((t3 - t2))s"
fi

# --- 2. the chart -------------------------------------------------------------
t0=$(now)
(
	cd charts/test
	go vet ./...
	# The root module's staticcheck ./... does not reach this module either;
	# scripts/test.sh has installed it (make tools) before calling us.
	if [ -x "$root/.tools/bin/staticcheck" ]; then
		"$root/.tools/bin/staticcheck" ./...
	elif command -v staticcheck >/dev/null 2>&1; then
		staticcheck ./...
	else
		log "staticcheck not installed (make tools): charts/test not checked by it"
	fi
	HELM="$helm" UAGATE_GATEWAY="$gateway_bin" go test -count=1 -timeout 10m ./...
)
log "chart tests: $(($(now) - t0))s"
