#!/bin/sh
# Malformed scenarios stop with "FILE:LINE: message" on stderr and exit status 2 (TAP output).
# usage: check-errors.sh TESSERA DIR; DIR/expect-errors.txt lists "FILE:LINE: message" per file.
tessera=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") dir=$2
n=$(wc -l < "$dir/expect-errors.txt")
echo "1..$n"
i=0 rc=0
while IFS= read -r want; do
        i=$((i + 1))
        file=${want%%:*}
        got=$(cd "$dir" && "$tessera" sim "$file" 2>&1 >/dev/null)
        status=$?
        if [ "$status" -eq 2 ] && [ "$got" = "$want" ]; then
                echo "ok $i - $file"
        else
                echo "not ok $i - $file: exit $status, stderr: $got"
                rc=1
        fi
done < "$dir/expect-errors.txt"
exit $rc
