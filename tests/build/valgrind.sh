#!/usr/bin/env bash
# valgrind memcheck over each instance's prefixed build (libsm_<inst>.a, custom_socket): the
# allocator's own code must read no uninitialised memory, touch no memory outside its mappings and
# make no bad system call argument while tests/build/asan_prefixed.c (fill-checked malloc, calloc,
# realloc, posix_memalign, 4 threads with cross-thread frees; 4,000 operations a thread here, as
# valgrind runs it some 30x slower) drives it. A memcheck error fails the instance's case; valgrind.supp
# holds the known false reports, each explained there.
# Environment: BUILD (default build), INSTANCES, SM_ROOT. Output: ok|not ok|skip valgrind: <inst>[: why]
set -u
case "${1:-}" in
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; echo "usage: tests/build/valgrind.sh (no arguments)"; exit 0 ;;
    "") ;;
    *) echo "tests/build/valgrind.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok valgrind: setup: cannot cd to the repository root"; exit 1; }
BUILD="${BUILD:-build}" out="${BUILD:-build}/valgrind"
command -v valgrind >/dev/null || { echo "skip valgrind: all: valgrind not installed"; exit 0; }
[ -n "${INSTANCES:-}" ] || { echo "skip valgrind: none: INSTANCES is empty"; exit 0; }
mkdir -p "$out"
unset LD_PRELOAD
for inst in $INSTANCES; do
    lib="$BUILD/libsm_$inst.a" bin="$out/prefixed_$inst"
    [ -f "$lib" ] || { echo "not ok valgrind: $inst: $lib not built"; continue; }
    if ! gcc -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -DOPS=4000 -DSM_TEST_PREFIX="sm_${inst//-/_}_" \
        -DSM_TEST_NAME="\"$inst\"" tests/build/asan_prefixed.c "$lib" -lpthread -o "$bin" >"$out/$inst.build.log" 2>&1; then
        echo "not ok valgrind: $inst: build: $(grep -m1 -E 'error|undefined' "$out/$inst.build.log")"
        continue
    fi
    timeout 300 valgrind -q --error-exitcode=99 --track-origins=yes --suppressions=tests/build/valgrind.supp "$bin" >"$out/$inst.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q '^not ok' "$out/$inst.log"; then
        echo "ok valgrind: $inst ($(grep -c '^ok' "$out/$inst.log") cases clean under memcheck)"
    elif [ $rc -eq 99 ]; then
        echo "not ok valgrind: $inst: memcheck: $(grep -E '==[0-9]+== [A-Z]' "$out/$inst.log" | grep -v '== Thread ' | head -1 | sed 's/^==[0-9]*== //') (log: $out/$inst.log)"
    else
        echo "not ok valgrind: $inst: status $rc: $(grep -m1 '^not ok' "$out/$inst.log") (log: $out/$inst.log)"
    fi
done
exit 0
