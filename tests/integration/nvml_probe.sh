#!/bin/sh
# `tessera nvml probe` against the fake NVML library (tests/support/fake_libnvml.c) and the fake
# backend, TAP output. usage: nvml_probe.sh TESSERA FAKE_LIBNVML
set -u
T=$1
LIB=$2
SPEC="NVIDIA H100 80GB HBM3:2:10:11"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
n=0
failed=0
check() {
        desc=$1
        shift
        n=$((n + 1))
        if "$@" >/dev/null 2>&1; then
                echo "ok $n - $desc"
        else
                echo "not ok $n - $desc"
                failed=1
        fi
}
has() { grep -qxF -- "$1" "$2"; }

echo "1..14"
TSR_FAKE_NVML="$SPEC" "$T" nvml probe --library "$LIB" >"$TMP/nvml.txt" 2>"$TMP/err"
check "probe over the fake library exits 0" [ $? -eq 0 ]
check "driver version" has "driver:  570.133.20-fake" "$TMP/nvml.txt"
check "GPU 0 identity" has "GPU 0: NVIDIA H100 80GB HBM3" "$TMP/nvml.txt"
check "GPU 0 MIG mode" has "  MIG:    current on, pending on" "$TMP/nvml.txt"
check "GPU 1 MIG mode pending" has "  MIG:    current off, pending on" "$TMP/nvml.txt"
check "1g profile with its placements" \
        has "    0x00  19 1g.10gb           1    9984 MiB  7  0:1 1:1 2:1 3:1 4:1 5:1 6:1" \
        "$TMP/nvml.txt"
check "advertised capability" \
        has "  advertises: partitioned, 1g.10gb x7 1g.20gb x4 2g.20gb x3 3g.40gb x2 4g.40gb x1 7g.80gb x1" \
        "$TMP/nvml.txt"
check "pending mode note" grep -q "^note: GPU 1: MIG mode on is pending (current: off)" "$TMP/nvml.txt"

"$T" nvml probe --fake "$SPEC" >"$TMP/fake.txt" 2>&1
tail -n +3 "$TMP/nvml.txt" >"$TMP/a"
tail -n +3 "$TMP/fake.txt" >"$TMP/b"
check "the fake backend shows the same GPUs" cmp "$TMP/a" "$TMP/b"

TSR_FAKE_NVML="$SPEC" "$T" nvml probe --library "$LIB" -o json >"$TMP/out.json"
check "json output parses" python3 -c \
        "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['gpus'])==2 and d['gpus'][1]['mig']=={'capable':True,'current':False,'pending':True}" \
        "$TMP/out.json"

# A live, hand-subdivided 2g.12gb on an A30.
cat >"$TMP/state.json" <<'JSON'
{"node": "fake-node", "product": "NVIDIA A30", "seq": 2, "driver_starts": [15, 15, 5, 5, 1],
 "gpus": [{"mig": true, "pending": true, "instances": [
   {"id": 1, "profile": 5, "start": 2, "size": 2, "slices": 2, "cis": [
     {"id": 0, "slices": 1, "uuid": "MIG-11111111-2222-3333-4444-555555555555"},
     {"id": 1, "slices": 1, "uuid": "MIG-66666666-7777-8888-9999-000000000000"}]}]}]}
JSON
TSR_FAKE_NVML_STATE="$TMP/state.json" "$T" nvml probe --library "$LIB" >"$TMP/live.txt" 2>&1
check "live instance with its MIG UUID, flagged subdivided" \
        has "      1   5 2:2 2 2 0 MIG-11111111-2222-3333-4444-555555555555 (subdivided by hand: refused)" \
        "$TMP/live.txt"

"$T" nvml probe --library "$TMP/none/libnvidia-ml.so.1" >/dev/null 2>"$TMP/err"
check "missing library exits 1" [ $? -eq 1 ]
check "missing library message" grep -qF \
        "NVML library $TMP/none/libnvidia-ml.so.1 not found: is the NVIDIA driver installed?" "$TMP/err"
"$T" nvml probe --fake "NVIDIA A30:0" >/dev/null 2>&1
check "bad --fake spec exits 2" [ $? -eq 2 ]
exit $failed
