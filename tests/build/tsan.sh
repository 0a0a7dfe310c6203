#!/usr/bin/env bash
# ThreadSanitizer over the sync policies, segfit_lk, the first-class heaps (their unit tests) and the
# prefixed libraries:
# builds libsm_<inst>.a with -fsanitize=thread into
# $BUILD/tsan, links tests/stress/large_race.c against each and runs it (large blocks from many
# threads through the decay cache, mremap and the OS layer's registry: the paths of the remap race,
# docs/reliability.md) and, in the other half of the threads, every size near the layers'
# boundaries with realloc across them (mode "both"). Any ThreadSanitizer report fails the run
# (<inst>/<mode>/tsan_reports).
# Logs: $BUILD/tsan.log (build) and $BUILD/tsan/logs/ (runs and reports).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/tsan.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

ThreadSanitizer: builds the sync-policy, segfit_lk and heaps unit tests and the prefixed libraries with
-fsanitize=thread into $BUILD/tsan and runs them, each instance under tests/stress/large_race.c;
any ThreadSanitizer report fails. A machine where TSan cannot run gives one skip line.
Prints `ok tsan/...` or `not ok tsan/...: <why>`.

Environment: BUILD (default build), INSTANCES (empty: one skip line), SM_ROOT, TSAN_CC (default
gcc), SM_TSAN_ARGS (large_race's "threads ms seed mode", default "16 1500 1 both").
USAGE
            exit 0 ;;
        -*) echo "tests/build/tsan.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok tsan/build: setup: cannot cd to the repository root"; exit 1; }
BUILD="${BUILD:-build}" INSTANCES="${INSTANCES:-}"
CC="${TSAN_CC:-gcc}"
SAN="-fsanitize=thread"
out="$BUILD/tsan" logs="$BUILD/tsan/logs" blog="$BUILD/tsan.log"
args=(${SM_TSAN_ARGS:-16 1500 1 both})
mode="${args[3]:-both}"
unset MAKEFLAGS MFLAGS MAKELEVEL LD_PRELOAD
mkdir -p "$logs" || { echo "not ok tsan/build: setup: cannot create $logs"; exit 1; }
[ -n "${INSTANCES// /}" ] || { echo "skip tsan/all: none: INSTANCES is empty"; exit 0; }

probe="$out/probe"
printf '#include <pthread.h>\nstatic void *f(void *a){return a;}\nint main(void){pthread_t t; pthread_create(&t,0,f,0); return pthread_join(t,0);}\n' >"$probe.c"
if ! $CC $SAN -o "$probe" "$probe.c" -lpthread >"$logs/probe.log" 2>&1 || ! "$probe" >>"$logs/probe.log" 2>&1; then
    echo "skip tsan/all: ThreadSanitizer does not build or run here: $(grep -m1 -iE 'error|fatal' "$logs/probe.log")"
    exit 0
fi

# Unit tests whose layers and policies must be race-free: the sync policies' lock-free parts (queue
# and combining policies included), segfit_lk's lists, page map and chunk growth, and the lock-free
# and wait-free layers (segfit_lf, slab_wf; their 16-byte CAS is the compiler's builtin under
# ThreadSanitizer, which needs libatomic), and the thread cache (its tables, read by hit paths
# while the first slow path builds them; its shared budget pool), and the first-class heaps (their
# registry read without a lock while other threads map, unmap and make heaps).
for unit in sync_policies segfit_lk segfit_lf slab_wf thread_cache thread_cache_pool heaps; do
    ub="$out/$unit"
    if ! $CC -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -Wall -Wextra $SAN "tests/unit/$unit.c" -lpthread -latomic \
        -o "$ub" >"$logs/$unit.build.log" 2>&1; then
        echo "not ok tsan/$unit/build: $(grep -m1 -E 'error' "$logs/$unit.build.log")"
        continue
    fi
    rm -f "$logs/$unit.report".*
    TSAN_OPTIONS="log_path=$logs/$unit.report halt_on_error=0" timeout -k 5 300 "$ub" >"$logs/$unit.log" 2>&1
    sed -nE "s#^(ok|not ok|skip) [^:]+: #\\1 tsan/$unit/#p" "$logs/$unit.log"
    reports=$(cat "$logs/$unit.report".* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer')
    if [ "$reports" -gt 0 ]; then
        echo "not ok tsan/$unit/tsan_reports: $reports reports, the first: $(cat "$logs/$unit.report".* | grep -m1 'SUMMARY')"
    else
        echo "ok tsan/$unit/tsan_reports"
    fi
done

if ! make -k -j"$(nproc 2>/dev/null || echo 2)" BUILD="$out" CC="$CC" SAN="$SAN" static-libs >"$blog" 2>&1; then
    echo "not ok tsan/build: $(grep -m1 -E ': (fatal )?error:|: \*\*\* ' "$blog") (log: $blog)"
fi
for inst in $INSTANCES; do
    lib="$out/libsm_$inst.a" bin="$out/large_race_$inst"
    if [ ! -f "$lib" ]; then
        echo "not ok tsan/$inst/build: $lib was not built (log: $blog)"
        continue
    fi
    if ! $CC -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -Wall -Wextra $SAN -DSM_TEST_PREFIX="sm_${inst//-/_}_" \
        tests/stress/large_race.c "$lib" -lpthread -latomic -o "$bin" >"$logs/$inst.build.log" 2>&1; then
        echo "not ok tsan/$inst/build: $(grep -m1 -E 'error' "$logs/$inst.build.log")"
        continue
    fi
    rm -f "$logs/$inst.report".*
    TSAN_OPTIONS="log_path=$logs/$inst.report halt_on_error=0" timeout -k 5 300 "$bin" "${args[@]}" >"$logs/$inst.log" 2>&1
    rc=$?
    sed -nE "s#^(ok|not ok|skip) [^:]+: #\\1 tsan/$inst/$mode/#p" "$logs/$inst.log"
    reports=$(cat "$logs/$inst.report".* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer')
    if [ "$reports" -gt 0 ]; then
        first=$(cat "$logs/$inst.report".* | grep -m1 'SUMMARY')
        echo "not ok tsan/$inst/$mode/tsan_reports: $reports reports, the first: $first (logs: $logs/$inst.report.*)"
    elif [ "$rc" -ne 0 ] && ! grep -q '^not ok ' "$logs/$inst.log"; then
        echo "not ok tsan/$inst/$mode/run: exited with status $rc (log: $logs/$inst.log)"
    else
        echo "ok tsan/$inst/$mode/tsan_reports"
    fi
done
exit 0
