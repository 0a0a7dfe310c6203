#!/usr/bin/env bash
# Multi-threaded stress for every instance in $INSTANCES: tests/stress/stress.c run under
# LD_PRELOAD=lib<inst>.so (<inst>/preload/<case>) and built against libsm_<inst>.a with the
# prefixed API (<inst>/linked/<case>). Size of a run: SM_STRESS_ARGS="threads ops lives"
# (default 32 threads x 3 lives x 4000 operations: a couple of seconds on 2 cores).
# Then tests/stress/large_race.c the same two ways (<inst>/preload-large/<case>, <inst>/linked-large/):
# medium and large blocks, realloc across the layers' boundaries, many threads, the allocator's own
# reports counted. Size: SM_LARGE_RACE_ARGS="threads ms seed mode" (default 32 2000 1 both).
SM_NS=stress
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances

args=(${SM_STRESS_ARGS:-32 4000 3})
large_args=(${SM_LARGE_RACE_ARGS:-32 2000 1 both})
bin="$SM_BUILD/tests/stress/stress"
large_bin="$SM_BUILD/tests/stress/large_race"
sm_need_bin "$bin" || exit 1
sm_need_bin "$large_bin" || exit 1

for inst in $INSTANCES; do
    sm_run_each_way "$inst" "" "$bin" tests/stress/stress.c 120 "${args[@]}"
    sm_run_each_way "$inst" "-large" "$large_bin" tests/stress/large_race.c 120 "${large_args[@]}"
done
exit "$SM_FAILED"
