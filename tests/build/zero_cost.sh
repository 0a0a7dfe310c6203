#!/usr/bin/env bash
# Composition costs nothing: the same allocator with and without passthrough layers compiles to the
# same instructions (see zero_cost_compose.c). One case per exported function, per compiler.
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}"
out="${BUILD:-build}/zero_cost"
mkdir -p "$out"
for cc in gcc clang; do
    if ! command -v "$cc" >/dev/null; then echo "skip zero_cost: $cc: not installed"; continue; fi
    ok=1
    for v in 0 1; do
        if ! $cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -DWITH_PASSTHROUGH=$v -c tests/build/zero_cost_compose.c \
            -o "$out/$cc-$v.o" 2>"$out/$cc-$v.err"; then
            echo "not ok zero_cost: $cc: build failed: $(head -1 "$out/$cc-$v.err")"; ok=0
        fi
    done
    [ $ok = 1 ] || continue
    for fn in malloc free calloc realloc posix_memalign aligned_alloc malloc_usable_size free_sized; do
        for v in 0 1; do
            objdump -d --no-show-raw-insn --no-addresses --disassemble="z_$fn" "$out/$cc-$v.o" 2>/dev/null |
                sed -n '/^<z_/,$p' | sed -E 's/<[^>]*>//g; s/#.*$//' >"$out/$cc-$v-$fn.s"
        done
        n=$(grep -c . "$out/$cc-0-$fn.s")
        if [ "$n" -lt 2 ]; then
            echo "not ok zero_cost: $cc/$fn: function not found in the object"
        elif cmp -s "$out/$cc-0-$fn.s" "$out/$cc-1-$fn.s"; then
            echo "ok zero_cost: $cc/$fn ($n lines identical)"
        else
            echo "not ok zero_cost: $cc/$fn: code differs with passthrough layers ($(diff "$out/$cc-0-$fn.s" "$out/$cc-1-$fn.s" | grep -c '^[<>]') lines)"
        fi
    done
done
