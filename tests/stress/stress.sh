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
    if sm_lib "$inst"; then
        sm_run "$inst/preload" 120 "$SM_LIB" "$bin" "${args[@]}"
    fi
    linked="$SM_BUILD/tests/stress/stress_linked_$inst"
    if sm_build_linked "$inst" tests/stress/stress.c "$linked"; then
        sm_run "$inst/linked" 120 "" "$linked" "${args[@]}"
    fi
    if sm_lib "$inst"; then
        sm_run "$inst/preload-large" 120 "$SM_LIB" "$large_bin" "${large_args[@]}"
    fi
    linked="$SM_BUILD/tests/stress/large_race_linked_$inst"
    if sm_build_linked "$inst" tests/stress/large_race.c "$linked"; then
        sm_run "$inst/linked-large" 120 "" "$linked" "${large_args[@]}"
    fi
done
exit "$SM_FAILED"
