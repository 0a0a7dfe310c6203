#!/usr/bin/env bash
# Runs every test and prints the summary line `N passed, N failed, N skipped` last.
# Unit test binaries and the scripts in tests/*/ report one line per case:
#   ok <prog>: <case> | not ok <prog>: <case>: <why> | skip <prog>: <case>: <why>
# A program that exits non-zero without reporting a failed case counts as one failed case.
# Environment: BUILD (build dir), INSTANCES (allocator instances built), TEST_FILTER (regex on names).
set -u
usage() {
    cat <<'USAGE'
usage: tests/run.sh [-h|--help]        (or: make test)

Runs the unit test binaries ($BUILD/tests/unit/*) and every executable tests/*/*.sh script,
one line per test program with its counts (the full output goes to $BUILD/test-logs/), then
the summary line `N passed, N failed[, N skipped]` last. Exits 1 when anything failed.
`make test` builds first (going on past errors) and then runs this script.

Environment:
  BUILD        build directory (default build)
  INSTANCES    allocator instances to test, each $BUILD/lib<name>.so; empty (the default) skips
               the per-instance tests, make test passes every instances/*.c
  TEST_FILTER  regular expression on test names such as unit/tlsf_glk or build/headers (default: all)
  BUILD_RC     status of the build before (make test sets it; non-zero counts as a failed case)
The scripts get BUILD, INSTANCES and SM_ROOT (the repository root) in their environment.
USAGE
}
for arg in "$@"; do
    case "$arg" in
        -h | --help) usage; exit 0 ;;
        -*) echo "tests/run.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
export BUILD="${BUILD:-build}" INSTANCES="${INSTANCES:-}"
export SM_ROOT="$PWD"
filter="${TEST_FILTER:-.}"
passed=0 failed=0 skipped=0
failures=()
log_dir="$BUILD/test-logs"
mkdir -p "$log_dir"

run_one() { # name, command...
    local name="$1"; shift
    local log="$log_dir/${name//\//_}.log"
    local start=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local ok notok skip
    ok=$(grep -c '^ok ' "$log")
    notok=$(grep -c '^not ok ' "$log")
    skip=$(grep -c '^skip ' "$log")
    if [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then
        notok=1
        echo "not ok $name: exited with status $rc" >>"$log"
    fi
    passed=$((passed + ok)); failed=$((failed + notok)); skipped=$((skipped + skip))
    printf '%-44s %4d ok %3d failed %3d skipped  (%ds)\n' "$name" "$ok" "$notok" "$skip" $((SECONDS - start))
    if [ "$notok" -gt 0 ]; then
        failures+=("$name")
        grep '^not ok ' "$log" | head -20 | sed 's/^/    /'
        # the log's last lines for context, less those shown already (case lines)
        tail -5 "$log" | grep -Ev '^(ok|not ok) ' | sed 's/^/    | /'
    fi
}

if [ "${BUILD_RC:-0}" -ne 0 ]; then
    echo "not ok build: make all failed (status $BUILD_RC):"
    grep -E 'error|Error|undefined reference' "$BUILD/build.log" | head -10 | sed 's/^/    /'
    failed=$((failed + 1)); failures+=("build")
else
    passed=$((passed + 1))
fi

for t in "$BUILD"/tests/unit/*; do
    [ -x "$t" ] || continue
    name="unit/$(basename "$t")"
    [[ "$name" =~ $filter ]] && run_one "$name" "$t"
done
for s in tests/*/*.sh; do
    [ -x "$s" ] || continue
    name="${s#tests/}"; name="${name%.sh}"
    [[ "$name" =~ $filter ]] && run_one "$name" "$s"
done

[ ${#failures[@]} -eq 0 ] || echo "failed: ${failures[*]} (logs in $log_dir)"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
