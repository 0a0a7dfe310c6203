#!/usr/bin/env bash
# kernel_socket with no C library at all (sockets/kernel_socket.h): tests/build/kernel_socket.c
# composes sheap :: buddy_glk :: slab_lk :: kernel_socket over the freestanding platform and brings
# its own runtime (_start, memset/memcpy/memmove/memcmp, system calls). For gcc and clang:
#   builds                -ffreestanding -DSM_FREESTANDING=1, -Wall -Wextra -Werror
#   object_needs_nothing  the object has no undefined symbol (nm -u)
#   links_without_libc    -nostdlib -static links it
#   no_libc_symbols       the program has no undefined symbol, no dynamic section, and none of a
#                         C library's names (malloc, printf, __libc_start_main, errno, ...)
#   runs                  it exits 0; its own cases follow as `<cc>/<case>` (fill patterns, kzalloc,
#                         pages by order, reuse and krealloc, bad flags, exhaustion)
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/kernel_socket.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Builds the kernel_socket test program freestanding with gcc and clang, links it with no C library
(-nostdlib -static), checks with nm that no C library symbol is in it, and runs it.
Prints `ok kernel_socket: <cc>/<case>` or `not ok kernel_socket: <cc>/<case>: <why>`.

Environment: BUILD (default build; files in $BUILD/kernel_socket), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/kernel_socket.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}"
out="${BUILD:-build}/kernel_socket"
mkdir -p "$out"
case "$(uname -m)" in
    x86_64 | aarch64) ;;
    *) echo "skip kernel_socket: all: the test's _start and system calls are for x86-64 and AArch64 Linux"; exit 0 ;;
esac
libc_names='^(malloc|free|calloc|realloc|printf|puts|write|_exit|exit|abort|__libc_start_main|__libc_csu_init|errno|__errno_location|__stack_chk_fail|__cxa_atexit|_IO_.*|__assert_fail)$'
for cc in gcc clang; do
    command -v "$cc" >/dev/null || { echo "skip kernel_socket: $cc: not installed"; continue; }
    obj="$out/kernel-$cc.o" bin="$out/kernel-$cc" log="$out/kernel-$cc.log"
    if ! $cc -std=c11 -O2 -Wall -Wextra -Werror -ffreestanding -fno-stack-protector -DSM_FREESTANDING=1 \
        -Iinclude -c tests/build/kernel_socket.c -o "$obj" 2>"$log"; then
        echo "not ok kernel_socket: $cc/builds: $(grep -m1 'error' "$log")"
        continue
    fi
    echo "ok kernel_socket: $cc/builds"
    undef=$(nm -u "$obj" | awk '{print $2}' | tr '\n' ' ')
    if [ -z "$undef" ]; then echo "ok kernel_socket: $cc/object_needs_nothing"
    else echo "not ok kernel_socket: $cc/object_needs_nothing: needs $undef"; fi
    if ! $cc -nostdlib -static -o "$bin" "$obj" 2>>"$log"; then
        echo "not ok kernel_socket: $cc/links_without_libc: $(grep -m1 -E 'error|undefined' "$log")"
        continue
    fi
    echo "ok kernel_socket: $cc/links_without_libc"
    why=""
    bundef=$(nm -u "$bin" | awk '{print $2}' | tr '\n' ' ')
    [ -z "$bundef" ] || why="undefined: $bundef"
    found=$(nm "$bin" | awk '{print $3}' | grep -E "$libc_names" | tr '\n' ' ')
    [ -z "$found" ] || why="${why:+$why; }C library names: $found"
    readelf -d "$bin" 2>/dev/null | grep -q 'NEEDED\|INTERP' && why="${why:+$why; }dynamic dependencies"
    readelf -l "$bin" 2>/dev/null | grep -q 'INTERP' && why="${why:+$why; }a program interpreter"
    if [ -z "$why" ]; then echo "ok kernel_socket: $cc/no_libc_symbols"
    else echo "not ok kernel_socket: $cc/no_libc_symbols: $why"; fi
    # Its own cases, named after the compiler; its diagnostics (stderr) go to the log.
    timeout 60 "$bin" 2>>"$log" | sed -E "s#^(ok|not ok) kernel_socket: #\1 kernel_socket: $cc/#"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then echo "ok kernel_socket: $cc/runs"
    else echo "not ok kernel_socket: $cc/runs: exit status $rc (failed cases, or a crash: $log)"; fi
done
