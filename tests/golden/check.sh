#!/bin/sh
# Runs one scenario and compares its transcript byte for byte with the golden file (TAP output).
# usage: check.sh TESSERA SCENARIO GOLDEN
out=$("$1" sim "$2" 2>&1; echo "exit=$?")
want=$(cat "$3"; echo "exit=0")
echo "1..1"
if [ "$out" = "$want" ]; then
        echo "ok 1 - $(basename "$2")"
else
        echo "not ok 1 - $(basename "$2") differs from $(basename "$3")"
        printf '%s\n' "$out" > "${TMPDIR:-/tmp}/tessera-golden.$$"
        diff -u "$3" "${TMPDIR:-/tmp}/tessera-golden.$$" | sed 's/^/# /' | head -80
        rm -f "${TMPDIR:-/tmp}/tessera-golden.$$"
        exit 1
fi
