#!/usr/bin/env bash
# Golden fast-path instruction counts: libsunmao's malloc, free, free_sized and calloc, built with
# each compiler, must have the hit-path length recorded in tests/build/fastpath.golden. The hit path
# is the fall-through path from the function's entry to its first `ret` or unconditional jump (a
# tail call: calloc's memset), as the layers mark the miss branches unlikely and the compiler lays
# the hit out straight; nops are not counted. A change of
# the count is a change of the fast path: measure it (bench/fastpath.sh), then update the golden
# line in the same commit. Compilers without a golden line (another major version) are skipped.
#   ok fastpath_golden: <cc>/<fn> (<n> instructions) | not ok ...: <n> instructions, golden <m>
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/fastpath_golden.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Counts the hit-path instructions of libsunmao's malloc, free, free_sized and calloc, built with
gcc and clang, and compares them with tests/build/fastpath.golden (a compiler version with no
golden line is a skip). After a measured change of the fast path, update the golden file.
Prints `ok fastpath_golden: <cc>/<fn> (<n> instructions)` or `not ok ...`.

Environment: BUILD (default build; objects in $BUILD/fastpath_golden), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/fastpath_golden.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok fastpath_golden: setup: cannot cd to the repository root"; exit 1; }
out="${BUILD:-build}/fastpath_golden"
golden=tests/build/fastpath.golden
mkdir -p "$out"

# Instructions on the fall-through path from <fn>'s entry to its first ret or jmp.
. tests/support/objdump_label.bash
hit_length() { # object fn
    objdump -d --no-show-raw-insn --no-addresses --disassemble="$(sm_objdump_label "$1" "$2")" "$1" 2>/dev/null |
        awk '/^<.*>:$/ { on = 1; next } on && NF { sub(/^[ \t]+/, ""); if ($1 ~ /^(nop|xchg|data16|cs)/ && $0 ~ /nop|xchg +%ax,%ax/) next;
                 n++; if ($1 ~ /^retq?$/ || $1 ~ /^jmpq?$/) { print n; exit } }'
}

for cc in gcc clang; do
    command -v "$cc" >/dev/null || { echo "skip fastpath_golden: $cc: not installed"; continue; }
    id="$cc-$($cc -dumpversion | cut -d. -f1)"
    if ! grep -q "^$id " "$golden"; then
        echo "skip fastpath_golden: $id: no golden counts for this compiler version"
        continue
    fi
    obj="$out/sunmao-$id.o"
    if ! $cc -std=c11 -O2 -g0 -fPIC -fvisibility=hidden -D_GNU_SOURCE -Iinclude -c instances/sunmao.c -o "$obj" \
        2>"$out/$id.log"; then
        echo "not ok fastpath_golden: $id/build: $(grep -m1 error "$out/$id.log")"
        continue
    fi
    while read -r gid fn want; do
        [ "$gid" = "$id" ] || continue
        got=$(hit_length "$obj" "$fn")
        if [ -z "$got" ]; then
            echo "not ok fastpath_golden: $id/$fn: no ret or jump found in the function"
        elif [ "$got" = "$want" ]; then
            echo "ok fastpath_golden: $id/$fn ($got instructions)"
        else
            echo "not ok fastpath_golden: $id/$fn: $got instructions on the hit path, golden $want ($golden)"
        fi
    done <"$golden"
done
