#!/usr/bin/env bash
# Layers need no OS: over the freestanding platform (platform/freestanding.h) every layer but
# malloc_heap builds -ffreestanding -nostdlib, and the objects need nothing a C library provides.
#   freestanding_sheap.c  a static pool and a TLSF heap (the bare-metal allocator)
#   freestanding_all.c    every other layer, policy and the prefixed socket, in compositions
# Allowed undefined symbols: what compilers emit calls to even freestanding (memcpy, memset,
# memmove, memcmp), the program's diagnostics hook sm_diag_write, and the linker-made
# _GLOBAL_OFFSET_TABLE_ (initial-exec TLS of the thread cache).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/freestanding.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Builds the layers over the freestanding platform (-ffreestanding -nostdlib) with gcc and clang
and checks the objects need no C library symbol beyond memcpy/memset/memmove/memcmp.
Prints `ok freestanding: <cc>/<src>/<case>` or `not ok ...: <why>`.

Environment: BUILD (default build; objects in $BUILD/freestanding), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/freestanding.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}"
out="${BUILD:-build}/freestanding"
mkdir -p "$out"
allowed='^(memcpy|memset|memmove|memcmp|sm_diag_write|_GLOBAL_OFFSET_TABLE_)$'
for cc in gcc clang; do
    command -v "$cc" >/dev/null || { echo "skip freestanding: $cc: not installed"; continue; }
    for src in sheap all; do
        name="$cc/$src"
        obj="$out/$src-$cc.o"
        if ! $cc -std=c11 -O2 -Wall -Wextra -Werror -ffreestanding -nostdlib -fno-stack-protector -DSM_FREESTANDING=1 \
            -Iinclude -c "tests/build/freestanding_$src.c" -o "$obj" 2>"$out/$src-$cc.log"; then
            echo "not ok freestanding: $name/builds: $(grep -m1 'error' "$out/$src-$cc.log")"
            continue
        fi
        echo "ok freestanding: $name/builds"
        extra=$(nm -u "$obj" | awk '{print $2}' | grep -Ev "$allowed" | tr '\n' ' ')
        if [ -z "$extra" ]; then
            echo "ok freestanding: $name/no_libc_symbols"
        else
            echo "not ok freestanding: $name/no_libc_symbols: needs $extra"
        fi
    done
done
