#!/bin/sh
# bench/run_vgpu.sh [BUILD_DIR] [bench_vgpu options...] - THE command to run the slice
# interposer's benchmark.
#
# Builds BUILD_DIR (default: build; set up with meson when missing): bench_vgpu, the interposer
# (src/vgpu/libtessera-vgpu.so) and the fake CUDA driver and NVML (tests/vgpu/libcuda.so.1,
# libnvidia-ml.so.1, built with the tests), and runs bench_vgpu with the fakes on
# LD_LIBRARY_PATH. Further arguments go to bench_vgpu, for example
#   bench/run_vgpu.sh build --iterations 500000 --launches 500000
set -eu
. "$(dirname "$0")/common.sh"
bench_build "${1:-build}" bench/bench_vgpu
[ $# -gt 0 ] && shift
bench_build "$build" src/vgpu/libtessera-vgpu.so
bench_build "$build" tests/vgpu/libcuda.so.1
bench_build "$build" tests/vgpu/libnvidia-ml.so.1
LD_LIBRARY_PATH=$build/tests/vgpu exec "$build/bench/bench_vgpu" --lib "$build/src/vgpu/libtessera-vgpu.so" "$@"
