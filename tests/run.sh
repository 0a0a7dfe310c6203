#!/usr/bin/env bash
# Runs every test and prints the summary line `N passed, N failed, N skipped` last.
# Unit test binaries and the scripts in tests/*/ report one line per case:
#   ok <prog>: <case> | not ok <prog>: <case>: <why> | skip <prog>: <case>: <why>
# A program that exits non-zero without reporting a failed case counts as one failed case.
# Environment: BUILD (build dir), INSTANCES (allocator instances built), TEST_FILTER (regex on names).
set -u
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
        tail -5 "$log" | grep -v '^ok ' | sed 's/^/    | /'
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
