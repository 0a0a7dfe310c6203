#!/usr/bin/env bash
# Composition costs nothing: the same allocator with and without passthrough layers compiles to the
# same instructions (see zero_cost_compose.c). One case per exported function, per compiler.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/zero_cost.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Composition costs nothing: the same allocator with and without passthrough layers
(tests/build/zero_cost_compose.c) must compile to identical instructions, with gcc and clang.
Prints `ok zero_cost: <cc>/<fn> (<n> lines identical)` or `not ok zero_cost: ...: <why>`.

Environment: BUILD (default build; objects in $BUILD/zero_cost), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/zero_cost.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}"
. tests/support/objdump_label.bash
out="${BUILD:-build}/zero_cost"
# The instructions, without what depends on where other code lies in the object: symbol names, the
# disassembler's comments, and the displacements of %rip-relative operands (a function pointer or a
# static's address moves when an unrelated cold function is inlined in one build and not the other).
normalize() { sed -E 's/<[^>]*>//g; s/#.*$//; s/-?0x[0-9a-f]+\(%rip\)/(%rip)/g'; }
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
                sed -n '/^<z_/,$p' | normalize >"$out/$cc-$v-$fn.s"
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

# The paper's own check (§4.4 question 1): wfslabfl is wfslab with a `fake` layer above every
# non-OS layer. Its exported functions must be wfslab's instructions, and the only function
# symbol it has beyond wfslab's is its top layer's thread-exit hook, whose address the socket
# takes (the fake's, which calls slab_wf's): no layer function is left standing in between.
for cc in gcc clang; do
    command -v "$cc" >/dev/null || continue
    ok=1
    for inst in wfslab wfslabfl; do
        if ! $cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -fPIC -fvisibility=hidden -c "instances/$inst.c" \
            -o "$out/$cc-$inst.o" 2>"$out/$cc-$inst.err"; then
            echo "not ok zero_cost: $cc/$inst: build failed: $(head -1 "$out/$cc-$inst.err")"; ok=0
        fi
    done
    [ $ok = 1 ] || continue
    for fn in malloc free calloc realloc posix_memalign aligned_alloc malloc_usable_size free_sized; do
        for inst in wfslab wfslabfl; do
            label=$(sm_objdump_label "$out/$cc-$inst.o" "$fn")
            objdump -d --no-show-raw-insn --no-addresses --disassemble="$label" "$out/$cc-$inst.o" 2>/dev/null |
                sed -n "/^<$label>/,\$p" | normalize >"$out/$cc-$inst-$fn.s"
        done
        n=$(grep -c . "$out/$cc-wfslab-$fn.s")
        if [ "$n" -lt 2 ]; then
            echo "not ok zero_cost: $cc/wfslabfl/$fn: function not found in the object"
        elif cmp -s "$out/$cc-wfslab-$fn.s" "$out/$cc-wfslabfl-$fn.s"; then
            echo "ok zero_cost: $cc/wfslabfl/$fn ($n lines identical to wfslab)"
        else
            echo "not ok zero_cost: $cc/wfslabfl/$fn: code differs from wfslab ($(diff "$out/$cc-wfslab-$fn.s" "$out/$cc-wfslabfl-$fn.s" | grep -c '^[<>]') lines)"
        fi
    done
    for inst in wfslab wfslabfl; do
        nm "$out/$cc-$inst.o" | awk '$2 ~ /^[tT]$/ { print $3 }' | sed -E "s/^${inst}_//; s/\\.(cold|part\\.[0-9]+|constprop\\.[0-9]+|isra\\.[0-9]+)+\$//" |
            sort -u >"$out/$cc-$inst.syms"
    done
    extra=$(comm -13 "$out/$cc-wfslab.syms" "$out/$cc-wfslabfl.syms" | grep -v '^fake_small_thread_exit$' | tr '\n' ' ')
    if [ -z "$extra" ]; then
        echo "ok zero_cost: $cc/wfslabfl/symbols (no fake layer function left but the exit hook)"
    else
        echo "not ok zero_cost: $cc/wfslabfl/symbols: functions left by the fake layers: $extra"
    fi
done
