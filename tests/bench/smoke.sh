#!/usr/bin/env bash
# Smoke test of the benchmark harness: one tiny workload (a small larson run) per
# allocator (glibc, the Debian peers that are installed, every instance in $INSTANCES)
# through bench/run.sh --smoke. Prints `ok bench: smoke/<alloc>` or
# `not ok bench: smoke/<alloc>: <why>` per allocator. Env: BUILD, INSTANCES, SM_ROOT.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/bench/smoke.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Smoke test of the benchmark harness: one small larson run per allocator (glibc, the installed
Debian peers, every instance) through `bench/run.sh --smoke`.
Prints `ok bench: smoke/<alloc>` or `not ok bench: smoke/<alloc>: <why>` per allocator.

Environment: BUILD (default build), INSTANCES, SM_ROOT (repository root).
USAGE
            exit 0 ;;
        -*) echo "tests/bench/smoke.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok bench: smoke/setup: cannot cd to SM_ROOT"; exit 1; }
export BUILD="${BUILD:-build}" INSTANCES="${INSTANCES:-}"
out=$(SMOKE=1 TIMEOUT=20 timeout 55 bench/run.sh --smoke 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^not ok '; then
    echo "not ok bench: smoke/harness: bench/run.sh --smoke exited with status $rc"
fi
exit "$rc"
