#!/usr/bin/env bash
# Every public header compiles on its own and opens with a comment saying what it is
# (tools/check-headers.sh: one `ok headers: <path>` / `not ok headers: <path>: <why>` per header).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/headers.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Every public header compiles on its own and opens with a comment saying what it is: runs
tools/check-headers.sh, which prints `ok headers: <path>` or `not ok headers: <path>: <why>`.

Environment: SM_ROOT (repository root), CC, HEADER_CFLAGS (see tools/check-headers.sh --help).
USAGE
            exit 0 ;;
        -*) echo "tests/build/headers.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok headers: setup: cannot cd to the repository root"; exit 1; }
exec tools/check-headers.sh
