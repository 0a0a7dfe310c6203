#!/usr/bin/env bash
# Memory returned to the OS after phases of frees (tests/api/release.c), for every instance in
# $INSTANCES: under LD_PRELOAD=lib<inst>.so (<inst>/preload/<case>) and built against libsm_<inst>.a
# with the prefixed API (<inst>/linked/<case>). SM_RELEASE_WAIT_MS: how long RSS may take (2500: the layers decay in 0.25-1 s, and a loaded machine delays the clock).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/api/release.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks that every instance gives memory back to the OS after phases of frees
(tests/api/release.c), preloaded and linked against libsm_<inst>.a.
Prints `ok release: <inst>/<mode>/<case>` or `not ok release: ...: <why>` per case.

Environment: BUILD, INSTANCES (empty: one skip line), SM_ROOT, CC (linked builds),
SM_RELEASE_WAIT_MS (how long RSS may take to drop, default 2500).
USAGE
            exit 0 ;;
        -*) echo "tests/api/release.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=release
. "$(dirname "$0")/driver_lib.bash"
sm_require_instances

bin="$SM_BUILD/tests/api/release"
sm_need_bin "$bin" || exit 1
wait_ms="${SM_RELEASE_WAIT_MS:-2500}"
for inst in $INSTANCES; do
    # A quarantine (delayed_free) holds the last 64 KiB of each thread's frees: about 800 small
    # blocks freed in random order, each pinning its page until it leaves (docs/security.md).
    slack=4
    grep -q 'layers/addon/delayed' "$SM_ROOT/instances/$inst.c" 2>/dev/null && slack=8
    # segfit_lf's size classes never merge free blocks: a buffer grown by realloc leaves a freed
    # copy in each class it passes through, which only that class reuses (regrow_after_shrink
    # peaks near 2x the live bytes there, 1.3-1.4x on the coalescing heaps). The instance's file,
    # or the base instance file it includes, names the layer.
    regrow=1.6
    src="$SM_ROOT/instances/$inst.c"
    base=$(sed -n 's/^#include "\([a-z0-9_-]*\.c\)"$/\1/p' "$src" 2>/dev/null | head -1)
    grep -q 'layers/core/segfit_lf' "$src" ${base:+"$SM_ROOT/instances/$base"} 2>/dev/null && regrow=2.4
    # libsunmao and the instances built on it keep up to 1 GiB of freed chunks for their decay
    # time: a phase of 320 MiB (80 chunks) freed must be reused by the next one.
    reuse=0
    [ "$inst" = sunmao ] || [ "$base" = sunmao.c ] && reuse=320
    sm_run_each_way "$inst" "" "$bin" tests/api/release.c 120 "$wait_ms" "$slack" "$regrow" "$reuse"
done
exit "$SM_FAILED"
