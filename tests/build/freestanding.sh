#!/usr/bin/env bash
# sheap works with no OS: a composition over it builds freestanding and needs no C library.
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}"
out="${BUILD:-build}/freestanding"
mkdir -p "$out"
allowed='^(memcpy|memset|memmove|memcmp|sm_diag_write)$'
for cc in gcc clang; do
    command -v "$cc" >/dev/null || { echo "skip freestanding: $cc: not installed"; continue; }
    obj="$out/sheap-$cc.o"
    if ! $cc -std=c11 -O2 -Wall -Wextra -Werror -ffreestanding -nostdlib -fno-stack-protector -DSM_FREESTANDING=1 \
        -Iinclude -c tests/build/freestanding_sheap.c -o "$obj" 2>"$out/$cc.log"; then
        echo "not ok freestanding: $cc/builds: $(grep -m1 'error' "$out/$cc.log")"
        continue
    fi
    echo "ok freestanding: $cc/builds"
    extra=$(nm -u "$obj" | awk '{print $2}' | grep -Ev "$allowed" | tr '\n' ' ')
    if [ -z "$extra" ]; then
        echo "ok freestanding: $cc/no_libc_symbols"
    else
        echo "not ok freestanding: $cc/no_libc_symbols: needs $extra"
    fi
done
