#!/bin/sh
# bench/run_gate3.sh [BUILD_DIR] [bench_gate3 options...] - THE command to run the gate-3
# benchmark (bench/gate3_bench.c). BUILD_DIR defaults to build-rel, configured as a release build
# when missing: the numbers are meant for the optimized product. For example
#   bench/run_gate3.sh build-rel --seconds 2
set -eu
. "$(dirname "$0")/common.sh"
dir=${1:-build-rel}
top=$(cd "$(dirname "$0")/.." && pwd)
case $dir in /*) ;; *) dir=$top/$dir ;; esac
if [ ! -f "$dir/build.ninja" ]; then
	meson setup "$dir" "$top" -Dbuildtype=release >/dev/null
fi
bench_build "$dir" bench/bench_gate3
[ $# -gt 0 ] && shift
exec "$build/bench/bench_gate3" "$@"
