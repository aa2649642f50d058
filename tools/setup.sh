#!/usr/bin/env bash
# Install every Debian package that tessera's build, tests and CI need (libjson-c-dev and
# libcjson-dev only for bench/decode_bench.c, the parsers it measures against jansson).
# Idempotent: when everything is already installed it only runs dpkg-query and exits.
# Works as root on a fresh Debian 12 machine (apt-get update may never have run).
set -euo pipefail

PACKAGES=(
	meson ninja-build pkg-config gcc
	clang-14 libclang-rt-14-dev
	libcmocka-dev libjansson-dev libyaml-dev libjq-dev nettle-dev
	libmicrohttpd-dev libgnutls28-dev libcurl4-gnutls-dev
	openssl python3-kubernetes
	clang-format
	python3 python3-yaml jq
	libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
	python3-grpcio python3-protobuf
	mmdebstrap umoci skopeo
	libjson-c-dev libcjson-dev
)

# The fake kubelet's second gRPC stack (tests/peers/grpc-js: @grpc/grpc-js, @grpc/proto-loader), from the
# npm registry with the committed lock file. Only when npm exists; never fails the setup.
npm_peers() {
	local dir lock
	dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/peers/grpc-js"
	lock="$dir/package-lock.json"
	if ! command -v npm >/dev/null 2>&1; then
		echo "setup: npm not found: skipping npm ci for tests/peers/grpc-js (its checks will SKIP)"
	elif [ ! -f "$lock" ]; then
		echo "setup: $lock missing: skipping npm ci"
	elif [ -d "$dir/node_modules" ] && [ "$dir/node_modules" -nt "$lock" ]; then
		echo "setup: tests/peers/grpc-js/node_modules is up to date"
	elif npm ci --prefix "$dir" --no-audit --no-fund; then
		touch "$dir/node_modules"
		echo "setup: npm ci --prefix tests/peers/grpc-js done"
	else
		echo "setup: warning: npm ci --prefix tests/peers/grpc-js failed; the grpc-js checks will SKIP" >&2
	fi
}

missing=()
for pkg in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	if [ "$status" != "install ok installed" ]; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	echo "setup: all ${#PACKAGES[@]} packages already installed"
	npm_peers
	exit 0
fi

echo "setup: missing packages: ${missing[*]}"

if [ "$(id -u)" -ne 0 ]; then
	echo "setup: error: these packages must be installed as root:" >&2
	echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# Refresh the package lists only when they have never been fetched, or when the install
# fails with the current ones (stale lists point at package versions that are gone).
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
	echo "setup: apt-get update (no package lists yet)"
	apt-get update
	apt-get install "${APT_OPTS[@]}" "${missing[@]}"
elif ! apt-get install "${APT_OPTS[@]}" "${missing[@]}"; then
	echo "setup: install failed with the current package lists; running apt-get update and retrying"
	apt-get update
	apt-get install "${APT_OPTS[@]}" "${missing[@]}"
fi

echo "setup: installed ${missing[*]}"
npm_peers
