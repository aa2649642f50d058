#!/bin/sh
# bench/run_dm.sh [BUILD_DIR] [bench_dm options...] - THE command to run the device-manager
# benchmark.
#
# Builds BUILD_DIR (default: build; set up with meson when missing) and runs bench_dm, which needs
# nothing else: the GPUs are the fake backend, the Pods are in memory and the plugins' sockets
# live in a temporary directory it removes. Further arguments go to bench_dm, for example
#   bench/run_dm.sh build --iterations 1000 --updates 2000 --seed 7
set -eu
. "$(dirname "$0")/common.sh"
bench_build "${1:-build}" bench/bench_dm
[ $# -gt 0 ] && shift
exec "$build/bench/bench_dm" "$@"
