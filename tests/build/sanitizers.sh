#!/usr/bin/env bash
# ASan + UBSan: builds the unit tests and the prefixed static libraries into $BUILD/asan with
#   SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
# runs every unit test binary under the sanitizers (their case lines come back as `asan/<prog>`),
# then, per instance in $INSTANCES, links tests/build/asan_prefixed.c against libsm_<inst>.a and
# runs it (malloc/free/realloc/calloc/posix_memalign with fill patterns, 4 threads).
# The prefixed libraries (custom_socket) live beside the sanitizer's malloc; the lib<inst>.so
# drop-ins replace malloc and are never loaded here. LeakSanitizer is used when it works on this
# machine (it cannot run under ptrace or some container sandboxes; then detect_leaks=0).
# Logs: $BUILD/asan.log (build) and $BUILD/asan/logs/<name>.log (runs).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/sanitizers.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

ASan + UBSan: builds the unit tests and the prefixed libraries into $BUILD/asan, runs every unit
test under the sanitizers and, per instance, tests/build/asan_prefixed.c linked against
libsm_<inst>.a. Prints `ok asan/<name>: <case>` or `not ok asan/...: <why>`.

Environment: BUILD (default build), INSTANCES, SM_ROOT, SAN_CC / SAN_CXX (default gcc / g++),
SAN_TIMEOUT (seconds per run, default 600).
USAGE
            exit 0 ;;
        -*) echo "tests/build/sanitizers.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok asan/build: setup: cannot cd to the repository root"; exit 1; }
BUILD="${BUILD:-build}" INSTANCES="${INSTANCES:-}"
CC="${SAN_CC:-gcc}" CXX="${SAN_CXX:-g++}"
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
out="$BUILD/asan" logs="$BUILD/asan/logs" blog="$BUILD/asan.log"
TIMEOUT="${SAN_TIMEOUT:-600}"
unset MAKEFLAGS MFLAGS MAKELEVEL LD_PRELOAD
mkdir -p "$logs" || { echo "not ok asan/build: setup: cannot create $logs"; exit 1; }

first_error() { # log: the first compiler/linker/make error
    local e
    e=$(grep -m1 -E ': (fatal )?error:|undefined reference|: \*\*\* ' "$1")
    printf '%s' "${e:-$(tail -1 "$1")}"
}

# Can LeakSanitizer run here? Probe with a program that does not leak.
probe="$out/lsan-probe"
printf '#include <stdlib.h>\nint main(void){ void *volatile p = malloc(8); free(p); return 0; }\n' >"$out/lsan-probe.c"
leaks=0
if $CC $SAN -o "$probe" "$out/lsan-probe.c" >"$logs/lsan-probe.log" 2>&1; then
    ASAN_OPTIONS=detect_leaks=1 "$probe" >>"$logs/lsan-probe.log" 2>&1 && leaks=1
else
    echo "not ok asan/build: the compiler cannot build with $SAN: $(first_error "$logs/lsan-probe.log")"
    exit 1
fi
[ "$leaks" = 1 ] || echo "# LeakSanitizer does not work here; running with detect_leaks=0"
export ASAN_OPTIONS="detect_leaks=$leaks:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# Build; -k so one broken target does not hide the others' results.
if make -k -j"$(nproc 2>/dev/null || echo 2)" BUILD="$out" CC="$CC" CXX="$CXX" SAN="$SAN" tests libs >"$blog" 2>&1; then
    echo "ok asan/build: unit tests and prefixed libraries with $CC $SAN"
else
    echo "not ok asan/build: $(first_error "$blog") (log: $blog)"
fi

# Runs one program, re-emits its case lines under asan/, and adds a failed case for a sanitizer
# report or a non-zero exit that the program did not report itself.
run_san() { # name, command...
    local name="$1"; shift
    local log="$logs/${name//\//_}.log"
    timeout "$TIMEOUT" "$@" >"$log" 2>&1
    local rc=$?
    sed -nE 's/^(ok|not ok|skip) (asan\/)?/\1 asan\//p' "$log"
    local san
    san=$(grep -m1 -E 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:' "$log")
    if [ -n "$san" ]; then
        echo "not ok asan/$name: sanitizer report: $san (log: $log)"
    elif [ "$rc" -eq 124 ]; then
        echo "not ok asan/$name: timed out after ${TIMEOUT}s (log: $log)"
    elif [ "$rc" -ne 0 ] && ! grep -q '^not ok ' "$log"; then
        echo "not ok asan/$name: exited with status $rc (log: $log)"
    fi
}

# True when a target is up to date, i.e. this build made it: a binary left over from an earlier
# build whose source no longer compiles must not be run as if it were current.
current() { make -q BUILD="$out" CC="$CC" CXX="$CXX" SAN="$SAN" "$1" >/dev/null 2>&1; }

ran=0
for src in tests/unit/*.c; do
    [ -f "$src" ] || continue
    t="$out/tests/unit/$(basename "$src" .c)"
    ran=1
    if [ ! -x "$t" ] || ! current "$t"; then
        echo "not ok asan/$(basename "$t"): build: not built under the sanitizers (compile error, or its source changed during the build; log: $blog)"
        continue
    fi
    run_san "$(basename "$t")" "$t"
done
[ "$ran" = 1 ] || echo "skip asan/unit: none: no unit tests in tests/unit"

[ -n "$INSTANCES" ] || echo "skip asan/libsm: none: INSTANCES is empty"
for inst in $INSTANCES; do
    lib="$out/libsm_$inst.a" bin="$out/tests/asan_prefixed_$inst"
    if [ ! -f "$lib" ] || ! current "$lib"; then
        echo "not ok asan/libsm_$inst: build: $lib was not built (log: $blog)"
        continue
    fi
    mkdir -p "$out/tests"
    if ! $CC -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -Wall -Wextra $SAN \
        -DSM_TEST_PREFIX="sm_${inst//-/_}_" -DSM_TEST_NAME="\"$inst\"" \
        tests/build/asan_prefixed.c "$lib" -lpthread -o "$bin" >"$logs/libsm_$inst.build.log" 2>&1; then
        echo "not ok asan/libsm_$inst: build: $(first_error "$logs/libsm_$inst.build.log")"
        continue
    fi
    run_san "libsm_$inst" "$bin"
done
exit 0
