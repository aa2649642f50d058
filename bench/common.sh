# bench/common.sh - sourced by the bench/run*.sh scripts (POSIX sh).
#
# bench_build BUILD_DIR TARGET: sets $top (the source tree) and $build (BUILD_DIR, relative to the
# source tree unless absolute), sets BUILD_DIR up with meson when it has no build.ninja, and builds
# TARGET ("bench/bench_webhook") there, quietly unless the build fails (its output then goes to
# stderr and the script exits 1).
bench_build() {
	top=$(cd "$(dirname "$0")/.." && pwd)
	build=$1
	case $build in /*) ;; *) build=$top/$build ;; esac
	if [ ! -f "$build/build.ninja" ]; then
		meson setup "$build" "$top" >/dev/null
	fi
	if ! log=$(ninja -C "$build" "$2" 2>&1); then
		printf '%s\n' "$log" >&2
		exit 1
	fi
}
