#!/usr/bin/env bash
# The whole project builds warning-free (-Wall -Wextra -Werror) with gcc and with clang, each into
# its own build dir ($BUILD/werror-<cc>). One case per compiler; a compiler that is not installed
# is skipped. The build output goes to $BUILD/werror-<cc>.log; a failure shows its first error.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/compilers.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Builds the whole project with -Wall -Wextra -Werror, once with gcc and once with clang, each
into $BUILD/werror-<cc> (log $BUILD/werror-<cc>.log); a compiler not installed is a skip.
Prints `ok build: <cc> -Wall -Wextra -Werror` or `not ok ...: <first error>`.

Environment: BUILD (default build), SM_ROOT (repository root).
USAGE
            exit 0 ;;
        -*) echo "tests/build/compilers.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok build: setup: cannot cd to the repository root"; exit 1; }
BUILD="${BUILD:-build}"
# A make started by `make test` must not inherit the parent's jobserver (it would warn and run -j1).
unset MAKEFLAGS MFLAGS MAKELEVEL
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p "$BUILD"
for pair in gcc:g++ clang:clang++; do
    cc="${pair%%:*}" cxx="${pair#*:}"
    name="build: $cc -Wall -Wextra -Werror"
    missing=""
    for t in "$cc" "$cxx"; do command -v "$t" >/dev/null 2>&1 || missing="$missing $t"; done
    if [ -n "$missing" ]; then
        echo "skip $name: not installed:$missing"
        continue
    fi
    out="$BUILD/werror-$cc" log="$BUILD/werror-$cc.log"
    if make -j"$jobs" BUILD="$out" CC="$cc" CXX="$cxx" WERROR=1 all >"$log" 2>&1; then
        echo "ok $name"
    else
        err=$(grep -m1 -E ': (fatal )?error:|undefined reference|: \*\*\* ' "$log")
        [ -n "$err" ] || err=$(tail -1 "$log")
        echo "not ok $name: $err (log: $log)"
    fi
done
