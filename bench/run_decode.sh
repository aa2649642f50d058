#!/bin/sh
# bench/run_decode.sh [BUILD_DIR] [bench_decode options...] - THE command to run the decode
# benchmark (bench/decode_bench.c). BUILD_DIR defaults to build-rel, configured as a release build
# when missing. Debian's libjson-c-dev and libcjson-dev are installed with apt-get when missing
# (as root), and BUILD_DIR is configured again so that meson finds them. For example
#   bench/run_decode.sh build-rel --iterations 50000 --rounds 7
set -eu
dir=${1:-build-rel}
top=$(cd "$(dirname "$0")/.." && pwd)
case $dir in /*) ;; *) dir=$top/$dir ;; esac
[ $# -gt 0 ] && shift
if ! pkg-config --exists json-c libcjson; then
	[ "$(id -u)" = 0 ] || { echo "bench: needs libjson-c-dev and libcjson-dev (apt-get install)" >&2; exit 1; }
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q libjson-c-dev libcjson-dev >/dev/null
fi
if [ ! -f "$dir/build.ninja" ]; then
	meson setup "$dir" "$top" -Dbuildtype=release >/dev/null
elif ! ninja -C "$dir" -t targets all 2>/dev/null | grep -q '^bench/bench_decode:'; then
	meson setup --reconfigure "$dir" "$top" >/dev/null
fi
if ! log=$(ninja -C "$dir" bench/bench_decode 2>&1); then
	printf '%s\n' "$log" >&2
	exit 1
fi
exec "$dir/bench/bench_decode" "$@"
