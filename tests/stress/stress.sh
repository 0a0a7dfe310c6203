#!/usr/bin/env bash
# Multi-threaded stress for every instance in $INSTANCES: tests/stress/stress.c run under
# LD_PRELOAD=lib<inst>.so (<inst>/preload/<case>) and built against libsm_<inst>.a with the
# prefixed API (<inst>/linked/<case>). Size of a run: SM_STRESS_ARGS="threads ops lives"
# (default 32 threads x 3 lives x 4000 operations: a couple of seconds on 2 cores).
# Then tests/stress/large_race.c the same two ways (<inst>/preload-large/<case>, <inst>/linked-large/):
# medium and large blocks, realloc across the layers' boundaries, many threads, the allocator's own
# reports counted. Size: SM_LARGE_RACE_ARGS="threads ms seed mode" (default 32 2000 1 both).
# Then tests/stress/thread_churn.c preloaded (<inst>/preload-churn/<case>): threads created and
# exiting by the ten thousand, RSS bounded. Size: SM_THREAD_CHURN_ARGS="threads concurrent"
# (default 20000 8; make stress runs 200000).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/stress/stress.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Multi-threaded stress of every instance: tests/stress/stress.c and tests/stress/large_race.c,
each preloaded (LD_PRELOAD=lib<inst>.so) and linked against libsm_<inst>.a, and
tests/stress/thread_churn.c preloaded (threads by the ten thousand, RSS bounded).
Prints `ok stress: <inst>/<mode>/<case>` or `not ok stress: ...: <why>`.

Environment: BUILD (default build), INSTANCES (empty: one skip line), SM_ROOT, CC (linked builds),
SM_STRESS_ARGS ("threads ops lives", default "32 4000 3"),
SM_LARGE_RACE_ARGS ("threads ms seed mode", default "32 2000 1 both"),
SM_THREAD_CHURN_ARGS ("threads concurrent", default "20000 8").
USAGE
            exit 0 ;;
        -*) echo "tests/stress/stress.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=stress
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances

args=(${SM_STRESS_ARGS:-32 4000 3})
large_args=(${SM_LARGE_RACE_ARGS:-32 2000 1 both})
bin="$SM_BUILD/tests/stress/stress"
large_bin="$SM_BUILD/tests/stress/large_race"
sm_need_bin "$bin" || exit 1
sm_need_bin "$large_bin" || exit 1

churn_args=(${SM_THREAD_CHURN_ARGS:-20000 8})
churn_bin="$SM_BUILD/tests/stress/thread_churn"
sm_need_bin "$churn_bin" || exit 1

for inst in $INSTANCES; do
    sm_run_each_way "$inst" "" "$bin" tests/stress/stress.c 120 "${args[@]}"
    sm_run_each_way "$inst" "-large" "$large_bin" tests/stress/large_race.c 120 "${large_args[@]}"
    sm_lib "$inst" && sm_run "$inst/preload-churn" 300 "$SM_LIB" "$churn_bin" "${churn_args[@]}"
done
exit "$SM_FAILED"
