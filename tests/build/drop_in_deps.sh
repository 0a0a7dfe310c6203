#!/usr/bin/env bash
# A drop-in library must load into any program: no dependency on the C++ runtime (libstdc++
# costs every preloaded C process ~1.4 MiB of RSS) and no undefined strong symbol outside libc.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/drop_in_deps.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks that each drop-in library $BUILD/lib<inst>.so needs no C++ runtime and loads into a
plain C program (/bin/true) without a word of output.
Prints `ok drop_in: <inst>/<case>` or `not ok drop_in: <inst>/<case>: <why>`.

Environment: BUILD (default build), INSTANCES (empty: one skip line), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/drop_in_deps.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}"
BUILD="${BUILD:-build}"
[ -n "${INSTANCES:-}" ] || { echo "skip drop_in: no instances"; exit 0; }
for inst in $INSTANCES; do
    lib="$BUILD/lib$inst.so"
    if [ ! -f "$lib" ]; then echo "not ok drop_in: $inst: $lib not built"; continue; fi
    needed=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
    case " $needed" in
        *libstdc++*|*libgcc_s*) echo "not ok drop_in: $inst/no_cxx_runtime: needs $needed" ;;
        *) echo "ok drop_in: $inst/no_cxx_runtime ($needed)" ;;
    esac
    if out=$(LD_PRELOAD="$PWD/$lib" /bin/true 2>&1) && [ -z "$out" ]; then
        echo "ok drop_in: $inst/loads_into_c_program"
    else
        echo "not ok drop_in: $inst/loads_into_c_program: $out"
    fi
done
