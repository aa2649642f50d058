#!/bin/sh
# check_rtld_next.sh LIB SHIM MAIN - dlsym(RTLD_NEXT) keeps its meaning under libtessera-vgpu.so,
# which interposes dlsym: asked from the program and from another preloaded shim, before and
# after the interposer in LD_PRELOAD, the answer is the next object's definition. TAP.
set -u
lib=$1 shim=$2 main=$3
shim_name=$(basename "$shim")
n=0 failed=0
check() { # NAME EXPECTED LD_PRELOAD
	n=$((n + 1))
	got=$(LD_PRELOAD=$3 "$main" 2>&1)
	if [ "$got" = "$2" ]; then
		echo "ok $n - $1"
	else
		failed=$((failed + 1))
		echo "not ok $n - $1"
		echo "# expected: $2" | sed 's/$/ /'
		echo "# got: $got"
	fi
}
check "interposer alone: the program's next puts is libc's" \
	"$(printf 'next puts: libc.so.6\nhello')" "$lib"
check "interposer, then a shim: the program's next puts is the shim's, the shim reaches libc's" \
	"$(printf 'next puts: %s\n[shim] hello' "$shim_name")" "$lib $shim"
check "a shim, then the interposer: the same" \
	"$(printf 'next puts: %s\n[shim] hello' "$shim_name")" "$shim $lib"
echo "1..$n"
[ "$failed" -eq 0 ]
