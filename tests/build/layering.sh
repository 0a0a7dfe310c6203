#!/usr/bin/env bash
# The include graph is one-way: core <- platform <- policies <- os/layers/sockets <- instances, and
# only the platform layer includes system headers beyond the freestanding ones
# (tools/check-layering.sh: one `ok layering: <path>` / `not ok layering: <path>: <why>` per file).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/layering.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

The include graph is one-way (core <- platform <- policies <- layers <- instances): runs
tools/check-layering.sh, which prints `ok layering: <path>` or `not ok layering: <path>: <why>`.

Environment: SM_ROOT (repository root).
USAGE
            exit 0 ;;
        -*) echo "tests/build/layering.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok layering: setup: cannot cd to the repository root"; exit 1; }
exec tools/check-layering.sh
