#!/usr/bin/env bash
# vgpu_check.sh - checks libtessera-vgpu.so (src/vgpu/) on a real NVIDIA GPU: the memory limit
# (CUDA_DEVICE_MEMORY_LIMIT) through the CUDA runtime and driver APIs, one budget shared by two
# processes (CUDA_DEVICE_MEMORY_SHARED_CACHE), and the compute share (CUDA_DEVICE_SM_LIMIT) of
# two slices at 30 % and 70 % running the same kernel. docs/vgpu-gpu-check.md explains every
# number; the measured ones are recorded in docs/vgpu.md, "Measured" / "On a GPU".
#
# Run it once, from a session lent a device machine, with the device tool's run verb:
#   command:   bash tools/gpu/vgpu_check.sh
#   timeout_s: 420
# (kind left out: an H100 or an H200 both do). It needs nvcc, nvidia-smi, the driver and a C
# compiler there, nothing from a network; it builds the interposer with meson when the whole
# project configures there, else with plain cc. Results: $OUT/vgpu-check.txt (readable),
# $OUT/vgpu-check.tsv (step, check, value, expected, verdict), $OUT/vgpu-check-stdout.log and
# $OUT/vgpu-check-stderr.log (every program's output), $OUT/vgpu-check-build.log.
#
# It only reads the GPU's state: it never changes MIG mode, clocks or persistence, and never
# resets the GPU. Every step runs under its own timeout and the script goes on past a failed
# step; no step starts that could run past VGPU_CHECK_DEADLINE seconds (default 330).
# Exit 0: every hard check passed; 1: some failed or could not run; 2: no GPU toolchain here
# (no nvcc, no nvidia-smi, no GPU visible), found within seconds.
#
# Knobs (environment): VGPU_CHECK_LIMIT_MIB (memory limit, default 4096, a multiple of 64),
# VGPU_CHECK_SECONDS (each compute run, default 20), VGPU_CHECK_DEADLINE (default 330),
# VGPU_CHECK_BUILD (auto: meson when it configures, else cc; cc: cc only), VGPU_LIB (a prebuilt
# interposer: skip the build), OUT (default: a new folder under /tmp).
set -eu
set -o pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC="$ROOT/tools/gpu"
OUT=${OUT:-$(mktemp -d /tmp/vgpu-check-out.XXXXXX)}
LIMIT_MIB=${VGPU_CHECK_LIMIT_MIB:-4096}
SECONDS_RUN=${VGPU_CHECK_SECONDS:-20}
DEADLINE=${VGPU_CHECK_DEADLINE:-330}
BUILD=${VGPU_CHECK_BUILD:-auto}
T0=$(date +%s)
mkdir -p "$OUT"
W=$(mktemp -d /tmp/vgpu-check.XXXXXX)
TXT="$OUT/vgpu-check.txt"
TSV="$OUT/vgpu-check.tsv"
LOG_OUT="$OUT/vgpu-check-stdout.log"
LOG_ERR="$OUT/vgpu-check-stderr.log"
LOG_BUILD="$OUT/vgpu-check-build.log"
: >"$TXT"
: >"$LOG_OUT"
: >"$LOG_ERR"
: >"$LOG_BUILD"
printf 'step\tcheck\tvalue\texpected\tverdict\n' >"$TSV"
HARD_FAIL=0

# say TEXT: one line to the report and to stdout (the run tool's output_tail).
say() {
        printf '%s\n' "$*" | tee -a "$TXT"
}

# rec STEP CHECK VALUE EXPECTED VERDICT: one machine-readable row. A FAIL, TIMEOUT or ERROR
# verdict makes the exit status 1.
rec() {
        printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$TSV"
        case $5 in
        FAIL | TIMEOUT | ERROR) HARD_FAIL=1 ;;
        esac
}

elapsed() {
        echo $(($(date +%s) - T0))
}

# run_step NAME LIMIT_S CMD...: runs CMD under timeout with stdout to $W/NAME.out and stderr to
# $W/NAME.err, both appended to the logs; returns CMD's status (124: timed out, 125: skipped
# because the deadline is near).
run_step() {
        local name=$1 limit=$2 rc=0
        shift 2
        if [ $(($(elapsed) + limit)) -gt "$DEADLINE" ] && [ "$limit" -gt 15 ]; then
                say "  $name: skipped, $(elapsed) s of the ${DEADLINE} s deadline spent"
                rec "$name" run skipped "run" TIMEOUT
                return 125
        fi
        printf '==== %s (%s s): %s\n' "$name" "$limit" "$*" | tee -a "$LOG_OUT" >>"$LOG_ERR"
        timeout -k 5 "$limit" "$@" >"$W/$name.out" 2>"$W/$name.err" || rc=$?
        cat "$W/$name.out" >>"$LOG_OUT"
        head -c 1048576 "$W/$name.err" >>"$LOG_ERR"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                say "  $name: TIMED OUT after $limit s"
                rec "$name" run "timeout ${limit}s" "exit" TIMEOUT
        fi
        return "$rc"
}

# kv FILE PREFIX KEY: KEY's value on the first line of FILE starting with PREFIX ("" if none).
kv() {
        awk -v p="$2" -v k="$3" 'index($0, p) == 1 {
                for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit }
        }' "$1" 2>/dev/null || true
}

# calc EXPR: floating-point arithmetic through awk, 3 decimals; "-" when an operand is missing.
calc() {
        awk "BEGIN { printf \"%.3f\", $1 }" 2>/dev/null || echo "-"
}

# finish STATUS: the summary, then exit.
finish() {
        local st=$1 fails
        fails=$(awk -F'\t' 'NR > 1 && ($5 == "FAIL" || $5 == "TIMEOUT" || $5 == "ERROR")' "$TSV" | wc -l)
        say ""
        say "== summary: $(awk -F'\t' 'NR > 1 && $5 == "pass"' "$TSV" | wc -l) pass, $fails FAIL/TIMEOUT/ERROR, $(elapsed) s"
        if [ "$fails" -gt 0 ]; then
                awk -F'\t' 'NR > 1 && ($5 == "FAIL" || $5 == "TIMEOUT" || $5 == "ERROR") { print "  " $0 }' "$TSV" | tee -a "$TXT"
        fi
        say "results: $TXT, $TSV, $LOG_OUT, $LOG_ERR, $LOG_BUILD"
        rm -rf "$W"
        exit "$st"
}

say "== vgpu check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), limit ${LIMIT_MIB} MiB, compute runs ${SECONDS_RUN} s"
case $LIMIT_MIB in
*[!0-9]* | '') say "VGPU_CHECK_LIMIT_MIB=$LIMIT_MIB is not a number"; finish 2 ;;
esac
if [ $((LIMIT_MIB % 64)) -ne 0 ] || [ "$LIMIT_MIB" -lt 1024 ]; then
        say "VGPU_CHECK_LIMIT_MIB=$LIMIT_MIB must be a multiple of 64, at least 1024"
        finish 2
fi

# ---- 0. the toolchain and the GPU (read only) ----------------------------------------------
say ""
say "== 0. machine"
NVCC=$(command -v nvcc || true)
for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc /opt/cuda/bin/nvcc; do
        if [ -z "$NVCC" ] && [ -x "$c" ]; then
                NVCC=$c
        fi
done
SMI=$(command -v nvidia-smi || true)
for c in /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi; do
        if [ -z "$SMI" ] && [ -x "$c" ]; then
                SMI=$c
        fi
done
CC_BIN=${CC:-$(command -v cc || command -v gcc || true)}
missing=""
if [ -z "$NVCC" ]; then
        say "no nvcc: not on PATH, nor under /usr/local/cuda*/bin or /opt/cuda/bin; the CUDA programs cannot be built"
        rec machine nvcc absent "present" ERROR
        missing="$missing nvcc"
fi
if [ -z "$SMI" ]; then
        say "no nvidia-smi: not on PATH nor under /usr/local/nvidia/bin; no NVIDIA driver here"
        rec machine nvidia-smi absent "present" ERROR
        missing="$missing nvidia-smi"
fi
if [ -z "$CC_BIN" ]; then
        say "no C compiler (cc, gcc): the interposer cannot be built"
        rec machine cc absent "present" ERROR
        missing="$missing cc"
fi
if [ -n "$missing" ]; then
        say "cannot check the interposer on a GPU here (missing:$missing); run this on the device machine (docs/vgpu-gpu-check.md)"
        finish 2
fi
if ! timeout 30 "$SMI" -L >"$W/smi-L" 2>&1 || ! grep -q '^GPU ' "$W/smi-L"; then
        say "no GPU visible: nvidia-smi -L says: $(head -c 400 "$W/smi-L" | tr '\n' ' ')"
        rec machine gpu none "a GPU" ERROR
        finish 2
fi
tee -a "$TXT" <"$W/smi-L"
QUERY=index,name,driver_version,memory.total,memory.used,compute_cap,mig.mode.current,compute_mode
timeout 30 "$SMI" --query-gpu="$QUERY" --format=csv 2>&1 | tee -a "$TXT" || true
NVCC_VERSION=$("$NVCC" --version 2>&1 | grep -i release | head -1 || true)
say "nvcc: $NVCC ($NVCC_VERSION)"
say "cc: $CC_BIN ($("$CC_BIN" --version 2>&1 | head -1))"
say "kernel: $(uname -r); meson: $(command -v meson || echo none); ninja: $(command -v ninja || echo none)"
CAP=$(timeout 30 "$SMI" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
MIG=$(timeout 30 "$SMI" --query-gpu=mig.mode.current --format=csv,noheader 2>/dev/null | head -1 || true)
rec machine gpu "$(head -1 "$W/smi-L")" "a GPU" info
rec machine driver "$(timeout 30 "$SMI" --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)" "-" info
rec machine nvcc "$NVCC_VERSION" "-" info
rec machine mig_mode "$MIG" "read only" info
if [ "$MIG" = "Enabled" ]; then
        say "MIG mode is Enabled: the check runs on whatever instance CUDA shows first; the mode is left as it is"
fi
ARCH=()
case $CAP in
[0-9][0-9] | [0-9][0-9][0-9]) ARCH=(-arch="sm_$CAP") ;;
esac
CUDA_ROOT=$(cd "$(dirname "$NVCC")/.." && pwd)

# ---- 1. builds ------------------------------------------------------------------------------
say ""
say "== 1. build"
LIB=${VGPU_LIB:-}
if [ -n "$LIB" ]; then
        say "interposer: $LIB (VGPU_LIB, not built here)"
elif ! ls "$ROOT"/src/vgpu/*.c >/dev/null 2>&1; then
        say "interposer: no sources in src/vgpu/*.c; only the bare baselines can run"
        rec build interposer "no sources" "built" ERROR
else
        if [ "$BUILD" != cc ] && command -v meson >/dev/null && command -v ninja >/dev/null &&
                timeout 120 meson setup "$W/mbuild" "$ROOT" -Dtests=false >>"$LOG_BUILD" 2>&1 &&
                timeout 180 meson compile -C "$W/mbuild" tessera-vgpu >>"$LOG_BUILD" 2>&1; then
                LIB=$(find "$W/mbuild" -name 'libtessera-vgpu.so*' -type f | head -1)
                if [ -n "$LIB" ]; then
                        say "interposer: built with meson: $LIB"
                fi
        fi
        if [ -z "$LIB" ]; then
                # The flags of src/vgpu/meson.build: hooks exported, the rest hidden.
                echo "meson unavailable, not chosen or failed (above); plain cc:" >>"$LOG_BUILD"
                LIB="$W/libtessera-vgpu.so"
                if ! timeout 180 "$CC_BIN" -shared -fPIC -O2 -std=c17 -D_POSIX_C_SOURCE=200809L \
                        -fvisibility=hidden -I"$ROOT/src" -I"$ROOT/src/vgpu" "$ROOT"/src/vgpu/*.c \
                        -o "$LIB" -Wl,-Bsymbolic-functions -Wl,-z,nodelete -ldl -lpthread \
                        >>"$LOG_BUILD" 2>&1; then
                        LIB=""
                else
                        say "interposer: built with cc: $LIB"
                fi
        fi
        if [ -z "$LIB" ]; then
                say "interposer: build FAILED (vgpu-check-build.log); only the bare baselines can run"
                rec build interposer failed "built" FAIL
        fi
fi
if [ -n "$LIB" ]; then
        case $LIB in /*) ;; *) LIB="$PWD/$LIB" ;; esac
        rec build interposer "$LIB" "built" pass
        {
                echo "exported cu*/nvml*/dl* symbols of $LIB:"
                nm -D --defined-only "$LIB" 2>&1 | awk '{ print $NF }' | grep -E '^(cu|nvml|dl)' | tr '\n' ' '
                echo
        } >>"$LOG_BUILD" 2>&1 || true
        if LD_PRELOAD="$LIB" timeout 20 /bin/true >>"$LOG_BUILD" 2>&1; then
                rec build preload_true ok "loads into a non-CUDA process" pass
        else
                say "interposer: LD_PRELOAD of it breaks /bin/true (vgpu-check-build.log)"
                rec build preload_true failed "loads into a non-CUDA process" FAIL
        fi
fi

B="$W/bin"
mkdir -p "$B"
if timeout 60 "$CC_BIN" -std=gnu17 -O2 "$SRC/nvml_query.c" -o "$B/nvml_query" -ldl >>"$LOG_BUILD" 2>&1; then
        rec build nvml_query ok "built" pass
else
        rec build nvml_query failed "built" FAIL
fi
# The four CUDA programs build at once; the runtime ones link cudart statically (nvcc's default,
# as most frameworks ship), the driver one links libcuda through the toolkit's stub.
for p in alloc_limit share_budget core_share drv_alloc; do
        extra=()
        if [ "$p" = drv_alloc ]; then
                extra=(-L"$CUDA_ROOT/lib64/stubs" -L"$CUDA_ROOT/targets/x86_64-linux/lib/stubs" -lcuda)
        fi
        timeout 240 "$NVCC" -O2 -std=c++17 "${ARCH[@]}" -I"$SRC" "$SRC/$p.cu" -o "$B/$p" \
                "${extra[@]}" -ldl >"$W/nvcc-$p.log" 2>&1 &
        echo $! >"$W/nvcc-$p.pid"
done
for p in alloc_limit share_budget core_share drv_alloc; do
        rc=0
        wait "$(cat "$W/nvcc-$p.pid")" || rc=$?
        { echo "== nvcc $p (status $rc)"; cat "$W/nvcc-$p.log"; } >>"$LOG_BUILD"
        if [ "$rc" -eq 0 ] && [ -x "$B/$p" ]; then
                rec build "$p" ok "built" pass
        else
                say "  nvcc $p FAILED (status $rc, vgpu-check-build.log)"
                rec build "$p" "failed $rc" "built" FAIL
        fi
done
say "builds done at $(elapsed) s"

# slice NAME=VALUE...: sets PRE to the command prefix of a slice's process: the interposer
# preloaded, warnings and info from it on stderr, the variables given.
PRE=()
slice() {
        PRE=(env LD_PRELOAD="$LIB" LIBCUDA_LOG_LEVEL=3 "$@")
}

# alloc_report STEP FILE: records alloc_limit's or drv_alloc's RESULT lines.
alloc_report() {
        local step=$1 file=$2
        awk -v s="$step" '/^RESULT / {
                for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = substr($i, length(kv[1]) + 2) }
                val = v["got"] " (" v["err"] ", " v["bytes"] " B)"
                printf "%s\t%s:%s\t%s\t%s\t%s\n", s, v["path"], v["step"], val, v["expect"], v["verdict"]
        }' "$file" >>"$TSV"
        if grep -q 'verdict=FAIL' "$file"; then
                HARD_FAIL=1
        fi
        grep -E '^(MEMINFO|FILL|NVML|SUMMARY)' "$file" | sed 's/^/  /' | tee -a "$TXT" || true
        grep -E 'verdict=FAIL' "$file" | sed 's/^/  FAIL: /' | tee -a "$TXT" || true
        if ! grep -q '^SUMMARY' "$file"; then
                say "  $step: no SUMMARY line (crashed or timed out; see the logs)"
                rec "$step" summary absent "SUMMARY line" FAIL
        fi
}

# ---- 2. memory limit: runtime API, driver API, and the bare baselines ----------------------
say ""
say "== 2. memory limit ${LIMIT_MIB} MiB (alloc_limit: cudart; drv_alloc: driver API)"
for mode in limited bare; do
        if [ "$mode" = limited ] && [ -z "$LIB" ]; then
                continue
        fi
        for p in alloc_limit drv_alloc; do
                [ -x "$B/$p" ] || continue
                step="${p}_$mode"
                rm -f "$W/$step.cache"
                cmd=("$B/$p" --mode "$mode" --limit-mib "$LIMIT_MIB")
                if [ "$p" = alloc_limit ]; then
                        cmd+=(--nvml-query "$B/nvml_query")
                fi
                say "-- $step"
                rc=0
                if [ "$mode" = limited ]; then
                        slice CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" \
                                CUDA_DEVICE_MEMORY_SHARED_CACHE="$W/$step.cache"
                        run_step "$step" 90 "${PRE[@]}" "${cmd[@]}" || rc=$?
                else
                        run_step "$step" 90 env -u LD_PRELOAD "${cmd[@]}" || rc=$?
                fi
                if [ "$rc" -eq 125 ]; then
                        continue
                fi
                alloc_report "$step" "$W/$step.out"
                if [ "$step" = alloc_limit_limited ]; then
                        # NVML in the limited process and in a preloaded child: total is the limit,
                        # used what the container holds (docs/vgpu.md, "What is counted").
                        nt=$(kv "$W/$step.out" "NVML tag=filled index=0 " total_mib)
                        nu=$(kv "$W/$step.out" "NVML tag=filled index=0 " used_mib)
                        cu=$(kv "$W/$step.out" "NVML tag=filled-child-preloaded index=0 " used_mib)
                        if [ "$nt" = "$LIMIT_MIB" ]; then v=pass; else v=FAIL; fi
                        rec "$step" nvml_total_mib "${nt:-none}" "$LIMIT_MIB" "$v"
                        rec "$step" nvml_used_mib "${nu:-none}" "what the process holds" info
                        rec "$step" nvml_child_used_mib "${cu:-none}" "what the container holds" info
                fi
                if grep -q '^VIEW tag=filled begin' "$W/$step.out"; then
                        sed -n '/^VIEW tag=filled begin/,/^VIEW tag=filled end/p' "$W/$step.out" | sed 's/^/  /' >>"$TXT"
                fi
        done
done

# ---- 3. one budget, two processes ---------------------------------------------------------
say ""
say "== 3. shared budget: two processes on one CUDA_DEVICE_MEMORY_SHARED_CACHE, each asking 60 % of ${LIMIT_MIB} MiB"
SIXTY=$((LIMIT_MIB * 6 / 10))
# wait_file FILE SECONDS: 0 once FILE exists.
wait_file() {
        local i=0
        while [ ! -e "$1" ] && [ "$i" -lt $(($2 * 5)) ]; do
                sleep 0.2
                i=$((i + 1))
        done
        [ -e "$1" ]
}
# share_try STEP EXPECT(0 granted, 3 refused) WHY: a try process on the shared cache.
share_try() {
        local step=$1 want=$2 why=$3 rc=0 got
        slice CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$W/share.cache"
        run_step "$step" 60 "${PRE[@]}" "$B/share_budget" try --mib "$SIXTY" || rc=$?
        got=$(kv "$W/$step.out" RESULT got)
        say "  $step: $(grep '^RESULT' "$W/$step.out" || echo 'no RESULT') ($why)"
        if [ "$rc" -eq "$want" ]; then
                rec share "$step" "${got:-none} (exit $rc)" "$why" pass
        else
                rec share "$step" "${got:-none} (exit $rc)" "$why" FAIL
        fi
}
# share_hold STEP: starts a holder of 60 % in the background; sets HOLD_PID.
share_hold() {
        local step=$1
        rm -f "$W/$step.ready" "$W/$step.release"
        printf '==== %s (background)\n' "$step" >>"$LOG_ERR"
        slice CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$W/share.cache"
        timeout -k 5 90 "${PRE[@]}" "$B/share_budget" hold --mib "$SIXTY" --ready "$W/$step.ready" \
                --release "$W/$step.release" --max-wait 70 >"$W/$step.out" 2>"$W/$step.err" &
        HOLD_PID=$!
}
if [ -z "$LIB" ] || [ ! -x "$B/share_budget" ]; then
        say "  skipped: no interposer or no share_budget"
        rec share all skipped "ran" FAIL
elif [ $(($(elapsed) + 150)) -gt "$DEADLINE" ]; then
        say "  skipped: deadline"
        rec share all skipped "ran" TIMEOUT
else
        rm -f "$W/share.cache"
        share_hold share_first
        if wait_file "$W/share_first.ready" 45 && grep -q ok "$W/share_first.ready"; then
                say "  share_first: holds ${SIXTY} MiB (pid $(kv "$W/share_first.out" RESULT pid))"
                rec share share_first "granted ${SIXTY} MiB" "granted" pass
                share_try share_second 3 "second 60 % while the first holds its 60 %: refused"
        else
                say "  share_first: did not get its ${SIXTY} MiB: $(cat "$W/share_first.out" 2>/dev/null)"
                rec share share_first "$(kv "$W/share_first.out" RESULT got)" "granted" FAIL
        fi
        touch "$W/share_first.release"
        rc=0
        wait "$HOLD_PID" || rc=$?
        cat "$W/share_first.out" >>"$LOG_OUT"
        head -c 262144 "$W/share_first.err" >>"$LOG_ERR"
        share_try share_after_exit 0 "60 % once the first has exited: granted"

        # A holder killed with SIGKILL frees nothing itself; the budget must come back all the same.
        share_hold share_killed
        if wait_file "$W/share_killed.ready" 45 && grep -q ok "$W/share_killed.ready"; then
                # the holder itself (its RESULT line names it), not the timeout above it
                victim=$(kv "$W/share_killed.out" RESULT pid)
                say "  share_killed: holds ${SIXTY} MiB; kill -KILL ${victim:-?}"
                if [ -n "$victim" ]; then
                        kill -KILL "$victim" 2>/dev/null || true
                fi
                touch "$W/share_killed.release"
                wait "$HOLD_PID" 2>/dev/null || true
                share_try share_after_kill 0 "60 % after a holder was killed with SIGKILL: granted"
        else
                touch "$W/share_killed.release"
                wait "$HOLD_PID" 2>/dev/null || true
                rec share share_killed "$(kv "$W/share_killed.out" RESULT got)" "granted" FAIL
        fi
        cat "$W/share_killed.out" >>"$LOG_OUT" 2>/dev/null || true
fi

# ---- 4. compute share ---------------------------------------------------------------------
say ""
say "== 4. compute share: core_share, ${SECONDS_RUN} s a run, the same kernel everywhere"
core_rate() {
        kv "$W/$1.out" "RESULT core_share" "$2"
}
CORE_T=$((SECONDS_RUN + 60))
ITERS=""
BASE=""
if [ ! -x "$B/core_share" ]; then
        say "  skipped: core_share did not build"
        rec core all skipped "ran" FAIL
else
        # 4a. the unthrottled baseline, alone, no interposer: calibrates a launch to ~2 ms.
        if run_step core_base "$CORE_T" env -u LD_PRELOAD "$B/core_share" --label base \
                --seconds "$SECONDS_RUN" --calibrate-ms 2; then
                ITERS=$(kv "$W/core_base.out" CALIBRATED iters)
                BASE=$(core_rate core_base rate_2nd_half)
                say "  base (alone, no interposer): $(grep -E '^(CALIBRATED|RESULT)' "$W/core_base.out" | tr '\n' ' ')"
                rec core base_rate "$BASE" "kernels/s, 100 %" info
        else
                say "  base: failed ($(tail -3 "$W/core_base.err" | tr '\n' ' '))"
                rec core base_rate failed "kernels/s" FAIL
        fi
        ITERS=${ITERS:-200000}
fi
if [ -x "$B/core_share" ] && [ -n "$LIB" ]; then
        # 4b. alone at 30 %.
        rc=0
        slice CUDA_DEVICE_SM_LIMIT=30 CUDA_DEVICE_MEMORY_SHARED_CACHE="$W/alone30.cache"
        run_step core_alone30 "$CORE_T" "${PRE[@]}" "$B/core_share" --label alone30 --seconds "$SECONDS_RUN" --iters "$ITERS" || rc=$?
        A30=$(core_rate core_alone30 rate)
        A30H=$(core_rate core_alone30 rate_2nd_half)
        if [ -n "$A30" ] && [ -n "$BASE" ]; then
                S=$(calc "$A30H / $BASE")
                say "  alone at 30 %: $A30 kernels/s (2nd half $A30H) = $S of the baseline (target 0.30)"
                rec core alone30_share "$S" "0.30 (0.20-0.40)" \
                        "$(awk -v s="$S" 'BEGIN { print (s >= 0.20 && s <= 0.40) ? "pass" : "FAIL" }')"
        else
                say "  alone at 30 %: no result (status $rc)"
                rec core alone30_share none "0.30" FAIL
        fi

        # 4c. two slices at once, 30 % and 70 %, then 4d the same pair with no limit (control).
        for pair in limited unlimited; do
                if [ $(($(elapsed) + CORE_T)) -gt "$DEADLINE" ]; then
                        say "  pair $pair: skipped, deadline"
                        rec core "pair_$pair" skipped "ran" TIMEOUT
                        continue
                fi
                start=$(($(date +%s) + 10))
                pids=()
                for share in 30 70; do
                        step="core_${pair}_$share"
                        lim=$share
                        [ "$pair" = unlimited ] && lim=0
                        printf '==== %s (background)\n' "$step" >>"$LOG_ERR"
                        slice CUDA_DEVICE_SM_LIMIT="$lim" CUDA_DEVICE_MEMORY_SHARED_CACHE="$W/$step.cache"
                        timeout -k 5 "$CORE_T" "${PRE[@]}" "$B/core_share" --label "$step" --seconds "$SECONDS_RUN" \
                                --iters "$ITERS" --start-at "$start" >"$W/$step.out" 2>"$W/$step.err" &
                        pids+=($!)
                done
                for pid in "${pids[@]}"; do
                        wait "$pid" || true
                done
                for share in 30 70; do
                        cat "$W/core_${pair}_$share.out" >>"$LOG_OUT"
                        head -c 262144 "$W/core_${pair}_$share.err" >>"$LOG_ERR"
                done
                R30=$(core_rate "core_${pair}_30" rate_2nd_half)
                R70=$(core_rate "core_${pair}_70" rate_2nd_half)
                L30=$(core_rate "core_${pair}_30" late_start_s)
                L70=$(core_rate "core_${pair}_70" late_start_s)
                if [ -z "$R30" ] || [ -z "$R70" ] || [ -z "$BASE" ]; then
                        say "  pair $pair: incomplete (30: '${R30}', 70: '${R70}', base: '${BASE}')"
                        rec core "pair_${pair}" incomplete "two results" FAIL
                        continue
                fi
                RATIO=$(calc "$R30 / $R70")
                S30=$(calc "$R30 / $BASE")
                S70=$(calc "$R70 / $BASE")
                SUM=$(calc "($R30 + $R70) / $BASE")
                say "  pair $pair: 30-slot $R30 kernels/s, 70-slot $R70 kernels/s (2nd halves; late starts ${L30}/${L70} s)"
                say "    ratio 30/70 = $RATIO; shares of the baseline: $S30 and $S70 (sum $SUM)"
                if [ "$pair" = limited ]; then
                        rec core ratio_30_70 "$RATIO" "0.43 (0.30-0.60)" \
                                "$(awk -v r="$RATIO" 'BEGIN { print (r >= 0.30 && r <= 0.60) ? "pass" : "FAIL" }')"
                        rec core share30 "$S30" "0.30" info
                        rec core share70 "$S70" "0.70" info
                        rec core share_sum "$SUM" "<= 1.0" info
                else
                        rec core unlimited_ratio "$RATIO" "~1.0 (time slicing)" info
                        rec core unlimited_sum "$SUM" "~1.0" info
                fi
        done
fi

# The whole table goes to the report only; stdout (the run tool keeps its last 12,000
# characters) gets the verdicts counted per step.
{
        echo ""
        echo "== all checks ($TSV)"
        column -t -s "$(printf '\t')" "$TSV" 2>/dev/null || cat "$TSV"
} >>"$TXT"
say ""
say "== verdicts per step (pass / FAIL / info / other)"
awk -F'\t' 'NR > 1 {
        if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
        if ($5 == "pass") p[$1]++; else if ($5 == "FAIL") f[$1]++; else if ($5 == "info") i[$1]++; else o[$1]++
} END { for (k = 1; k <= n; k++) { s = order[k]; printf "  %-22s %3d / %3d / %3d / %3d\n", s, p[s], f[s], i[s], o[s] } }' "$TSV" | tee -a "$TXT"
finish "$HARD_FAIL"
