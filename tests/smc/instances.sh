#!/usr/bin/env bash
# smc emit of each hand-written instance (tests/smc/instances.txt: the instance as a model line)
# compiles to what the instance file compiles to: the same exported symbols, and the same machine
# code in .text once addresses are taken out and the file's layers carry smc's C names. A line that
# differs anywhere from its file (an option, a policy, a layer, their order) shows up as different
# code.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/smc/instances.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Builds each line of tests/smc/instances.txt with smc and compares the library with the
hand-written instance's $BUILD/lib<name>.so: exported symbols, and .text disassembled with
addresses and internal names normalised. Prints `ok smc-instances: <name>/<case>` or
`not ok smc-instances: <name>/<case>: <why>`.

Environment: BUILD (default build: $BUILD/smc and the instances' libraries), SM_ROOT, CC.
USAGE
            exit 0 ;;
        -*) echo "tests/smc/instances.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc-instances: setup: cannot cd to the repository root"; exit 1; }
build="${BUILD:-build}"
smc="$build/smc" work="$build/smc-instances"
mkdir -p "$work"
[ -x "$smc" ] || { echo "not ok smc-instances: setup: $smc missing (not built)"; exit 1; }
command -v objdump >/dev/null || { echo "skip smc-instances: all: objdump missing (binutils)"; exit 0; }

# .text as instructions only: no addresses, no symbol names, no rip-relative offsets.
text() {
    objdump -d --no-show-raw-insn -j .text "$1" | sed -E '/file format|^$|^Disassembly/d
        s/^[0-9a-f]+ <[^>]*>:/FUNCTION/; s/^ *[0-9a-f]+:[[:space:]]*//; s/[0-9a-f]+ <[^>]*>/ADDR/g
        s/#.*//; s/-?0x[0-9a-f]+\(%rip\)/OFF(%rip)/g; s/[[:space:]]+$//'
}
exports() { nm -D --defined-only "$1" | awk '{ print $2, $3 }' | sort; }
# The layers' C names in the order a file defines them (an instance may include its base first).
layer_names() {
    local f="$1" inc
    inc=$(sed -n 's/^#include "\([a-z0-9_-]*\.c\)".*/\1/p' "$f")
    [ -z "$inc" ] || layer_names "instances/$inc"
    sed -n 's/^#define SM_LAYER[[:space:]]\{1,\}\([A-Za-z0-9_]*\).*/\1/p' "$f"
}
cc="${CC:-cc}"
case "$cc" in *clang*) branch=-mbranches-within-32B-boundaries ;; *) branch=-Wa,-mbranches-within-32B-boundaries ;; esac
[ "$(uname -m)" = x86_64 ] || branch=
compile() { # source, output: as the Makefile and smc build compile an instance
    $cc -std=c11 -O2 -g -Wall -Wextra -fPIC -fvisibility=hidden -D_GNU_SOURCE $branch -Iinclude -I"$work/src" \
        -shared -static-libgcc -o "$2" "$1" "$build/obj/new_delete.o" -lpthread -ldl
}

# GCC's code for a function depends a little on the names around it (the order of its symbol
# tables), so the hand-written file is compared under the layer names smc gives: its copy has each
# of its own names replaced by the one smc gives the layer in the same place.
mkdir -p "$work/src"
n=0
while IFS='|' read -r name line; do
    name="${name// /}"
    case "$name" in '' | \#*) continue ;; esac
    n=$((n + 1))
    line="${line# }"
    hand="$build/lib$name.so" mine="$work/lib$name.so"
    [ -f "$hand" ] || { echo "not ok smc-instances: $name/hand_written: $hand missing (not built)"; continue; }
    if ! out=$("$smc" build -o "$mine" --name "$name" "$line" 2>&1) || [ ! -f "$mine" ]; then
        echo "not ok smc-instances: $name/build: $(echo "$out" | head -3 | tr '\n' ' ')"
        continue
    fi
    echo "ok smc-instances: $name/build"
    if diff <(exports "$hand") <(exports "$mine") >"$work/$name.exports.diff"; then
        echo "ok smc-instances: $name/same_exports"
    else
        echo "not ok smc-instances: $name/same_exports: $(grep -c '^[<>]' "$work/$name.exports.diff") symbols differ ($work/$name.exports.diff)"
    fi
    "$smc" emit --name "$name" "$line" >"$work/$name.smc.c"
    mapfile -t theirs < <(layer_names "instances/$name.c")
    mapfile -t ours < <(sed -n 's/^#define SM_LAYER \([A-Za-z0-9_]*\)$/\1/p' "$work/$name.smc.c")
    if [ "${#theirs[@]}" != "${#ours[@]}" ]; then
        echo "not ok smc-instances: $name/same_layers: instances/$name.c has ${#theirs[@]} layers (${theirs[*]}), the line ${#ours[@]}"
        continue
    fi
    rename=()
    for i in "${!theirs[@]}"; do rename+=(-e "s/\\<${theirs[$i]}\\>/${ours[$i]}/g"); done
    for f in instances/*.c; do sed "${rename[@]}" "$f" >"$work/src/${f##*/}"; done
    if ! compile "$work/src/$name.c" "$work/lib$name.hand.so" 2>"$work/$name.hand.log" ||
        ! compile "$work/$name.smc.c" "$work/lib$name.emit.so" 2>"$work/$name.emit.log"; then
        echo "not ok smc-instances: $name/compile: $(cat "$work/$name.hand.log" "$work/$name.emit.log" | grep -m2 error | tr '\n' ' ')"
        continue
    fi
    text "$work/lib$name.hand.so" >"$work/$name.hand.s"
    text "$work/lib$name.emit.so" >"$work/$name.smc.s"
    if cmp -s "$work/$name.hand.s" "$work/$name.smc.s"; then
        echo "ok smc-instances: $name/same_code ($(grep -c FUNCTION "$work/$name.smc.s") functions, $(wc -l <"$work/$name.smc.s") instructions)"
    else
        echo "not ok smc-instances: $name/same_code: .text differs from instances/$name.c's ($(diff "$work/$name.hand.s" "$work/$name.smc.s" | grep -c '^[<>]') lines; diff $work/$name.hand.s $work/$name.smc.s)"
    fi
    # smc build compiles as above: its library is the emitted file's.
    text "$mine" >"$work/$name.build.s"
    cmp -s "$work/$name.build.s" "$work/$name.smc.s" && echo "ok smc-instances: $name/build_flags" ||
        echo "not ok smc-instances: $name/build_flags: smc build's library differs from the emitted file compiled with the Makefile's flags"
done <tests/smc/instances.txt
[ "$n" -ge 5 ] && echo "ok smc-instances: entries ($n)" || echo "not ok smc-instances: entries: only $n in tests/smc/instances.txt"
exit 0
