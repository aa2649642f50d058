#!/bin/sh
# replay-errors.sh TESSERA - `tessera replay` on bad input: each case exits 2 with one line
# on stderr naming the file or option at fault and what is wrong (an empty node list once named the pods
# file instead). Prints TAP.
set -u
tessera=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pods=$dir/pods.csv # never read: the node list is judged first
: >"$pods"
printf 'sn,cpu_milli,memory_mib,gpu,model\n' >"$dir/header-only.csv"
: >"$dir/empty.csv"
printf 'sn,cpu_milli,memory_mib\nn1,1000,1024\n' >"$dir/no-gpu.csv"
n=0
failed=0
check() { # NAME EXPECTED-STDERR ARGS...
        name=$1
        want=$2
        shift 2
        n=$((n + 1))
        got=$("$tessera" replay "$@" --seeds 1 2>&1 >/dev/null)
        rc=$?
        if [ "$rc" -eq 2 ] && [ "$got" = "$want" ]; then
                echo "ok $n - $name"
        else
                echo "not ok $n - $name"
                echo "#   rc $rc, stderr: $got"
                echo "#   want: $want"
                failed=1
        fi
}
check "a node list with a header and no rows names the node list" \
        "$dir/header-only.csv: the node list is empty (a header and no rows)" \
        --nodes "$dir/header-only.csv" --pods "$pods"
check "an empty node file names the node list" \
        "$dir/empty.csv:1: no header line (sn,...)" --nodes "$dir/empty.csv" --pods "$pods"
check "a node list without the gpu column names it" \
        "$dir/no-gpu.csv:1: the header has no column \"gpu\"" \
        --nodes "$dir/no-gpu.csv" --pods "$pods"
check "a label lag that is not a number names the option" \
        "tessera replay: --label-lag \"soon\" is not a number in 0..1000000" \
        --label-lag soon --nodes "$dir/no-gpu.csv" --pods "$pods"
check "a label lag with the MIG variant is refused" \
        "tessera replay: --label-lag is not for the MIG variant (its partitions carry no fit pin)" \
        --label-lag 4 --mig-product "NVIDIA H100 80GB HBM3" --nodes "$dir/no-gpu.csv" --pods "$pods"
echo "1..$n"
exit $failed
