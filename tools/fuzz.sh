#!/usr/bin/env bash
# tools/fuzz.sh BUILD_DIR: runs every libFuzzer target built in BUILD_DIR/fuzz (a build configured
# with -Dfuzz=true) for FUZZ_SECONDS each (default 10: CI's smoke run; FUZZ_SECONDS=3600 is the
# long campaign), FUZZ_JOBS targets at a time (default: the CPU count). Each target fuzzes a copy
# of its committed corpus (fuzz/corpus/TARGET) under BUILD_DIR/fuzz-run/TARGET, so the committed
# corpus never changes; a crash input is kept in that directory's artifacts/.
#
# Leak checking is on, with no suppressions (libjq, whose 1.6 leaks its own allocations on some
# filters, runs only in a child process that exits without a leak check: src/sim/jq_pipe.c).
#
# Prints one line per target, in name order: `fuzz: ok: NAME: N runs in Ss` or
# `fuzz: FAILED: NAME exited RC` followed by the end of its log. Exit status: 0 when every target
# ran clean, 1 otherwise (also when no target was built).
set -uo pipefail
cd "$(dirname "$0")/.."

build=${1:?usage: tools/fuzz.sh BUILD_DIR}
seconds=${FUZZ_SECONDS:-10}
jobs=${FUZZ_JOBS:-$(nproc)}

if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
	echo "fuzz: FUZZ_SECONDS must be a positive whole number of seconds, not '$seconds'" >&2
	exit 1
fi
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
	echo "fuzz: FUZZ_JOBS must be a positive whole number, not '$jobs'" >&2
	exit 1
fi

# run_target EXE WORKDIR: one target's run; its exit status goes to WORKDIR/rc.
run_target() {
	local fz=$1 work=$2 rc=0
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		timeout $((seconds * 6 + 60)) "$fz" -max_total_time="$seconds" \
		-timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
	echo "$rc" >"$work/rc"
}

targets=()
for fz in "$build"/fuzz/fuzz_*; do
	if [ -f "$fz" ] && [ -x "$fz" ]; then
		targets+=("$fz")
	fi
done
if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz: FAILED: no $build/fuzz/fuzz_* executable was built"
	exit 1
fi

for fz in "${targets[@]}"; do
	name=$(basename "$fz")
	work=$build/fuzz-run/${name#fuzz_}
	rm -rf "$work"
	mkdir -p "$work/corpus" "$work/artifacts"
	if [ -d "fuzz/corpus/${name#fuzz_}" ]; then
		cp -R "fuzz/corpus/${name#fuzz_}/." "$work/corpus/"
	else
		echo "fuzz: warning: no corpus dir fuzz/corpus/${name#fuzz_}; fuzzing from an empty corpus"
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n || true
	done
	run_target "$fz" "$work" &
done
wait

status=0
for fz in "${targets[@]}"; do
	name=$(basename "$fz")
	work=$build/fuzz-run/${name#fuzz_}
	rc=$(cat "$work/rc" 2>/dev/null || echo "?")
	if [ "$rc" = 0 ]; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
		echo "fuzz: ok: $name: ${runs:-?} runs in ${seconds}s"
		continue
	fi
	status=1
	echo "fuzz: FAILED: $name exited $rc"
	echo "---- last lines of $work/log ----"
	tail -n 60 "$work/log"
	for a in "$work"/artifacts/*; do
		if [ -f "$a" ]; then
			echo "crash input kept at $a (replay: $fz $a); first bytes:"
			od -A d -c "$a" | head -n 8 || true
		fi
	done
done
exit "$status"
