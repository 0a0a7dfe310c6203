#!/usr/bin/env bash
# Multi-threaded stress for every instance in $INSTANCES: tests/stress/stress.c run under
# LD_PRELOAD=lib<inst>.so (<inst>/preload/<case>) and built against libsm_<inst>.a with the
# prefixed API (<inst>/linked/<case>). Size of a run: SM_STRESS_ARGS="threads ops lives"
# (default 32 threads x 3 lives x 4000 operations: a couple of seconds on 2 cores).
SM_NS=stress
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances

args=(${SM_STRESS_ARGS:-32 4000 3})
bin="$SM_BUILD/tests/stress/stress"
sm_need_bin "$bin" || exit 1

for inst in $INSTANCES; do
    if sm_lib "$inst"; then
        sm_run "$inst/preload" 120 "$SM_LIB" "$bin" "${args[@]}"
    fi
    linked="$SM_BUILD/tests/stress/stress_linked_$inst"
    if sm_build_linked "$inst" tests/stress/stress.c "$linked"; then
        sm_run "$inst/linked" 120 "" "$linked" "${args[@]}"
    fi
done
exit "$SM_FAILED"
