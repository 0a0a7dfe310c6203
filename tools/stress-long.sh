#!/usr/bin/env bash
# The long tier of the stress tests (make stress): tests/stress/stress.sh over every instance, again
# and again with a new seed each round and bigger runs than make test's (64 threads x 5 lives x
# 20,000 operations; large_race 32 threads for 10 s; 200,000 threads through thread_churn), until
# the time is up. Prints each round's failures and, last, `N passed, N failed` over all rounds.
# Usage: tools/stress-long.sh [minutes=10]   Environment: BUILD, INSTANCES (default: every instance).
set -u
case "${1:-}" in
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    ""|*[!0-9]*) [ -z "${1:-}" ] || { echo "tools/stress-long.sh: '$1' is not a number of minutes (see --help)" >&2; exit 2; } ;;
esac
cd "$(dirname "$0")/.." || exit 2
minutes="${1:-10}"
export BUILD="${BUILD:-build}" SM_ROOT="$PWD"
export INSTANCES="${INSTANCES:-$(ls instances/*.c | sed 's#instances/##; s#\.c$##' | tr '\n' ' ')}"
end=$((SECONDS + minutes * 60)) round=0 passed=0 failed=0
while [ $SECONDS -lt $end ]; do
    round=$((round + 1))
    seed=$(( (round * 7919 + $$) % 100000 + 1 ))
    log="$BUILD/stress-long-$round.log"
    SM_STRESS_ARGS="64 20000 5 $seed" SM_LARGE_RACE_ARGS="32 10000 $seed both" SM_THREAD_CHURN_ARGS="200000 16" \
        tests/stress/stress.sh >"$log" 2>&1
    ok=$(grep -c '^ok ' "$log") bad=$(grep -c '^not ok ' "$log")
    passed=$((passed + ok)) failed=$((failed + bad))
    echo "round $round (seed $seed): $ok ok, $bad failed (log: $log)"
    grep '^not ok ' "$log" | head -10 | sed 's/^/    /'
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
