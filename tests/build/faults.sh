#!/usr/bin/env bash
# OS failures: builds each instance in $INSTANCES as a prefixed object with the platform's failure
# injection (-DSM_PLAT_FAULTS), links tests/build/faults.c to it and runs it (cases in that file's
# header): requests the OS cannot back answer NULL + ENOMEM, live blocks stay intact, and the
# allocator serves again once the OS does. wfslabm is written without the framework's platform
# layer, so nothing can inject its failures: skipped, saying so.
# Environment: BUILD (build dir, default build), INSTANCES (names under instances/), SM_ROOT.
# Output: ok|not ok|skip faults/<instance>: <case>[: <why>]; logs in $BUILD/faults/.
set -u
case "${1:-}" in
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; echo "usage: tests/build/faults.sh (no arguments)"; exit 0 ;;
    "") ;;
    *) echo "tests/build/faults.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok faults: setup: cannot cd to the repository root"; exit 1; }
out="${BUILD:-build}/faults"
mkdir -p "$out" || { echo "not ok faults: setup: cannot create $out"; exit 1; }
[ -n "${INSTANCES:-}" ] || { echo "skip faults: none: INSTANCES is empty"; exit 0; }
for inst in $INSTANCES; do
    if [ "$inst" = wfslabm ]; then
        echo "skip faults/$inst: all: hand-written without the platform layer, no failure can be injected"
        continue
    fi
    p="sm_${inst//-/_}_"
    if ! gcc -std=c11 -O2 -g -D_GNU_SOURCE -Iinclude -fvisibility=hidden -DSM_PLAT_FAULTS -DSM_PREFIX="$p" \
        -c "instances/$inst.c" -o "$out/$inst.o" >"$out/$inst.build.log" 2>&1 ||
        ! gcc -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -Wall -Wextra -DSM_TEST_PREFIX="$p" \
            -DSM_TEST_NAME="\"$inst\"" tests/build/faults.c "$out/$inst.o" -lpthread -o "$out/faults_$inst" \
            >>"$out/$inst.build.log" 2>&1; then
        echo "not ok faults/$inst: build: $(grep -m1 -E 'error|undefined' "$out/$inst.build.log")"
        continue
    fi
    timeout 300 "$out/faults_$inst" >"$out/$inst.log" 2>"$out/$inst.err"
    rc=$?
    grep -E '^(ok|not ok|skip|#) ' "$out/$inst.log"
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok ' "$out/$inst.log"; then
        echo "not ok faults/$inst: exited with status $rc: $(tail -1 "$out/$inst.err")"
    fi
done
exit 0
