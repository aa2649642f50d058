#!/usr/bin/env bash
# The container image's test (docs/image.md): unpack the docker-archive tarball (skopeo -> OCI ->
# umoci unpack) and the OCI layout, check the config (non-root user, entrypoint, labels), then run
# /usr/bin/tessera --version and `tessera sim` on the walkthrough inside the root filesystem with
# chroot as uid 65532, comparing with the host binary byte for byte, and find the slice interposer
# the device manager installs. A missing library fails the exec.
# Usage (root): tests/image/test_image.sh [IMAGE_DIR (build/image)] [HOST_BIN (build/src/cli/tessera)]
# Prints TAP; exits non-zero on any failure. KEEP=1 keeps the unpacked tree for inspection.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
IMG="${1:-build/image}"
HOST_BIN="${2:-build/src/cli/tessera}"
SCENARIO=examples/h100-mig-walkthrough.yaml
N=0; FAIL=0
ok() { N=$((N + 1)); echo "ok $N - $1"; }
notok() { N=$((N + 1)); FAIL=$((FAIL + 1)); echo "not ok $N - $1"; [ -n "${2:-}" ] && sed 's/^/# /' <<<"$2"; }
check() { local d=$1; shift; local out; if out=$("$@" 2>&1); then ok "$d"; else notok "$d" "$out"; fi; }

echo "1..13"
[ "$(id -u)" -eq 0 ] || { echo "Bail out! chroot needs root"; exit 1; }
HOST_VERSION_LINE=$("$HOST_BIN" --version 2>/dev/null)
VERSION=$(awk '{print $2}' <<<"$HOST_VERSION_LINE")
[ -n "$VERSION" ] || { echo "Bail out! $HOST_BIN --version printed no version"; exit 1; }
TAR="$IMG/tessera-$VERSION.tar"
TMP=$(mktemp -d /tmp/tessera-image-test.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$TMP"' EXIT

check "docker-archive $TAR is tagged tessera:$VERSION" \
	bash -c "tar -xOf '$TAR' manifest.json | jq -e '.[0].RepoTags | . == [\"tessera:$VERSION\"] or . == [\"docker.io/library/tessera:$VERSION\"]'"
check "docker-archive converts back to OCI (skopeo)" \
	skopeo --insecure-policy copy --quiet "docker-archive:$TAR" "oci:$TMP/oci:$VERSION"
CONFIG=$(skopeo inspect --config "oci:$TMP/oci:$VERSION" 2>&1)
LAYOUT_CONFIG=$(skopeo inspect --config "oci:$IMG/oci:$VERSION" 2>&1)
check "OCI layout $IMG/oci and the tarball carry the same config" \
	test "$(jq -S .config <<<"$CONFIG")" = "$(jq -S .config <<<"$LAYOUT_CONFIG")"
check "user is 65532:65532 (non-root)" jq -e '.config.User == "65532:65532"' <<<"$CONFIG"
check "entrypoint is /usr/bin/tessera" jq -e '.config.Entrypoint == ["/usr/bin/tessera"]' <<<"$CONFIG"
check "labels: version $VERSION, revision, source, title, description, licenses Apache-2.0" \
	jq -e --arg v "$VERSION" '.config.Labels as $l | $l["org.opencontainers.image.version"] == $v
		and ($l["org.opencontainers.image.revision"] | length) == 40
		and ($l["org.opencontainers.image.source"] | length) > 0
		and $l["org.opencontainers.image.title"] == "tessera"
		and ($l["org.opencontainers.image.description"] | length) > 0
		and $l["org.opencontainers.image.licenses"] == "Apache-2.0"' <<<"$CONFIG"
check "umoci unpack" umoci unpack --image "$TMP/oci:$VERSION" "$TMP/bundle"
RFS="$TMP/bundle/rootfs"
check "rootfs: /etc/passwd names uid 65532, no shell, /usr/bin/tessera executable" \
	bash -c "grep -q '^nonroot:x:65532:65532:' '$RFS/etc/passwd' && test -x '$RFS/usr/bin/tessera' && ! test -e '$RFS/bin/sh'"

IN_VERSION=$(chroot --userspec=65532:65532 "$RFS" /usr/bin/tessera --version 2>&1)
if [ "$IN_VERSION" = "$HOST_VERSION_LINE" ]; then ok "tessera --version inside the image: $IN_VERSION"
else notok "tessera --version inside the image equals the host's ($HOST_VERSION_LINE)" "$IN_VERSION"; fi
check "label version equals tessera --version's" \
	test "$(jq -r '.config.Labels["org.opencontainers.image.version"]' <<<"$CONFIG")" = "$VERSION"

"$HOST_BIN" sim "$SCENARIO" >"$TMP/host.out" 2>&1; HOST_RC=$?
mkdir -p "$RFS/examples" && cp "$SCENARIO" "$RFS/$SCENARIO"
chroot --userspec=65532:65532 "$RFS" /usr/bin/tessera sim "$SCENARIO" >"$TMP/image.out" 2>&1; IMAGE_RC=$?
if [ "$IMAGE_RC" -eq 0 ] && [ "$HOST_RC" -eq 0 ]; then ok "tessera sim $SCENARIO exits 0 inside the image"
else notok "tessera sim $SCENARIO exits 0 inside the image (host $HOST_RC, image $IMAGE_RC)" "$(head -5 "$TMP/image.out")"; fi
check "tessera sim output is byte-identical to the host's" cmp "$TMP/host.out" "$TMP/image.out"
check "the slice interposer is /usr/lib/tessera/libtessera-vgpu.so (the device manager's --vgpu-library), a shared object exporting cuMemAlloc_v2" \
	bash -c "test -f '$RFS/usr/lib/tessera/libtessera-vgpu.so' && nm -D --defined-only '$RFS/usr/lib/tessera/libtessera-vgpu.so' | grep -qw cuMemAlloc_v2"

[ "$N" -eq 13 ] || { echo "# planned 13, ran $N"; FAIL=$((FAIL + 1)); }
echo "# image test: $((N - FAIL)) passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
