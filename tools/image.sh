#!/usr/bin/env bash
# Build tessera's container image without a Docker engine (docs/image.md):
#   1. the tessera binary from BUILD_DIR (default build/, compiled here when stale), stripped, and
#      the slice interposer libtessera-vgpu.so at /usr/lib/tessera/libtessera-vgpu.so (the
#      device manager's --vgpu-library default), stripped;
#   2. a Debian 12 root filesystem (mmdebstrap --variant=extract) holding exactly the packages that
#      own the binary's ldd libraries (derived with dpkg -S, not a hand list) and their dependencies,
#      without docs, man pages, locales or apt/dpkg state;
#   3. an OCI layout (umoci): entrypoint /usr/bin/tessera, user 65532:65532, OCI labels;
#   4. a docker-archive tarball (skopeo) tagged tessera:<version>, loadable with `docker load -i`.
# Output: build/image/oci (OCI layout, tag <version>) and build/image/tessera-<version>.tar.
# Runs as root on Debian 12; installs mmdebstrap, umoci, skopeo through tools/setup.sh's list.
# SOURCE_DATE_EPOCH defaults to the HEAD commit's time so rebuilds of one commit are reproducible-ish.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
OUT="${IMAGE_OUT:-build/image}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
T0=$(date +%s)
step() { echo "image: [$(( $(date +%s) - T0 ))s] $*"; }

if [ "$(id -u)" -ne 0 ]; then
	echo "image: error: run as root (mmdebstrap, chown to 65532 and umoci need it)" >&2
	exit 1
fi

step "setup (Debian packages)"
bash tools/setup.sh >/dev/null
for tool in mmdebstrap umoci skopeo; do
	command -v "$tool" >/dev/null || { echo "image: error: $tool missing after tools/setup.sh" >&2; exit 1; }
done

step "compile $BUILD_DIR"
if [ ! -f "$BUILD_DIR/meson-private/coredata.dat" ]; then
	meson setup "$BUILD_DIR"
fi
meson compile -C "$BUILD_DIR" src/cli/tessera src/vgpu/tessera-vgpu >/dev/null
BIN="$BUILD_DIR/src/cli/tessera"
# The logical slice's interposer, which the device manager installs on its node (docs/vgpu.md).
VGPU="$BUILD_DIR/src/vgpu/libtessera-vgpu.so"
VERSION=$(meson introspect --projectinfo "$BUILD_DIR" | jq -r .version)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
step "tessera $VERSION, revision $REVISION, SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH ($CREATED)"

# The packages owning every library the dynamic loader maps (ldd) for the binary and the
# interposer, resolved through symlinks.
mapfile -t LIBS < <({ ldd "$BIN"; ldd "$VGPU"; } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
PKGS=()
for lib in "${LIBS[@]}"; do
	owner=$( { dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")"; } | head -1 | cut -d: -f1)
	[ -n "$owner" ] || { echo "image: error: no Debian package owns $lib" >&2; exit 1; }
	PKGS+=("$owner")
done
mapfile -t PKGS < <(printf '%s\n' "${PKGS[@]}" | sort -u)
step "library packages (${#PKGS[@]}): ${PKGS[*]}"

WORK="$OUT/work"
rm -rf "$WORK" "$OUT/oci" "$OUT"/tessera-*.tar
mkdir -p "$WORK"
ROOTFS="$WORK/rootfs"

step "mmdebstrap bookworm (extract)"
INCLUDE=$(IFS=,; echo "${PKGS[*]}")
mmdebstrap --quiet --mode=root --variant=extract --include="$INCLUDE" \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
	bookworm "$ROOTFS" "$MIRROR"

step "root filesystem: binary, users, cleanup"
rm -rf "$ROOTFS"/usr/share/doc "$ROOTFS"/usr/share/man "$ROOTFS"/usr/share/locale \
	"$ROOTFS"/usr/share/lintian "$ROOTFS"/usr/share/info "$ROOTFS"/var/lib/apt "$ROOTFS"/var/cache \
	"$ROOTFS"/var/lib/dpkg "$ROOTFS"/var/log "$ROOTFS"/etc/apt "$ROOTFS"/etc/dpkg "$ROOTFS"/dev/* \
	"$ROOTFS"/etc/hostname "$ROOTFS"/etc/resolv.conf
mkdir -p "$ROOTFS"/usr/bin "$ROOTFS"/etc "$ROOTFS"/tmp "$ROOTFS"/home/nonroot "$ROOTFS"/dev "$ROOTFS"/proc
chmod 1777 "$ROOTFS"/tmp
strip --strip-unneeded -o "$ROOTFS"/usr/bin/tessera "$BIN"
chmod 0755 "$ROOTFS"/usr/bin/tessera
mkdir -p "$ROOTFS"/usr/lib/tessera
strip --strip-unneeded -o "$ROOTFS"/usr/lib/tessera/libtessera-vgpu.so "$VGPU"
chmod 0644 "$ROOTFS"/usr/lib/tessera/libtessera-vgpu.so
cat >"$ROOTFS"/etc/passwd <<'PASSWD'
root:x:0:0:root:/root:/usr/sbin/nologin
nonroot:x:65532:65532:tessera webhook and controller:/home/nonroot:/usr/sbin/nologin
PASSWD
cat >"$ROOTFS"/etc/group <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
mkdir -p "$ROOTFS"/root && chmod 0700 "$ROOTFS"/root
chown 65532:65532 "$ROOTFS"/home/nonroot
# The loader finds the multiarch directories through ld.so.cache (Debian's ld.so.conf.d).
ldconfig -r "$ROOTFS" 2>/dev/null || true
find "$ROOTFS" -newermt "@$SOURCE_DATE_EPOCH" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
du -sh "$ROOTFS" | sed 's/^/image: root filesystem /'

step "OCI layout (umoci)"
TAG="$VERSION"
umoci init --layout "$OUT/oci"
umoci new --image "$OUT/oci:$TAG"
umoci insert --image "$OUT/oci:$TAG" --history.created "$CREATED" \
	--history.created_by "tools/image.sh (mmdebstrap bookworm extract + tessera $VERSION)" "$ROOTFS" /
umoci config --image "$OUT/oci:$TAG" --created "$CREATED" --os linux --architecture amd64 \
	--author "tessera" \
	--config.entrypoint /usr/bin/tessera \
	--config.user 65532:65532 --config.workingdir /home/nonroot \
	--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--config.label org.opencontainers.image.title=tessera \
	--config.label "org.opencontainers.image.description=GPU partition scheduler: webhook, controller, device-manager and simulator in one binary" \
	--config.label "org.opencontainers.image.version=$VERSION" \
	--config.label "org.opencontainers.image.revision=$REVISION" \
	--config.label "org.opencontainers.image.source=${IMAGE_SOURCE:-https://github.com/tessera/tessera}" \
	--config.label "org.opencontainers.image.created=$CREATED" \
	--config.label org.opencontainers.image.licenses=Apache-2.0 \
	--history.created "$CREATED" --history.created_by "umoci config"
umoci gc --layout "$OUT/oci"

step "docker-archive (skopeo)"
TAR="$OUT/tessera-$VERSION.tar"
skopeo --insecure-policy copy --quiet "oci:$OUT/oci:$TAG" "docker-archive:$TAR:tessera:$VERSION"
rm -rf "$WORK"

step "done: $OUT/oci (tag $TAG), $TAR ($(du -h "$TAR" | cut -f1)), tessera:$VERSION"
