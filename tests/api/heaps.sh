#!/usr/bin/env bash
# First-class heaps (sunmao_heap_*) through every instance, preloaded: tests/api/heaps.c's cases,
# then the reports of a double free and an interior free of heap blocks, one line each, exactly.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            echo "usage: tests/api/heaps.sh   (run by tests/run.sh; env BUILD, INSTANCES, SM_ROOT)"
            exit 0 ;;
        -*) echo "tests/api/heaps.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=heaps
. "$(dirname "$0")/driver_lib.bash"
sm_require_instances

T="$SM_BUILD/tests/api/heaps"
sm_need_bin "$T" || exit 1
err="$(mktemp)"
trap 'rm -f "$err"; [ -z "$SM_OUT" ] || rm -f "$SM_OUT"' EXIT

for inst in $INSTANCES; do
    if [ "$inst" = wfslabm ]; then
        sm_skip "$inst/preload/all" "no framework socket (the hand-written control)"
        continue
    fi
    sm_lib "$inst" || continue
    lib="$SM_LIB"
    sm_run "$inst/preload" 120 "$lib" "$T"
    # the err policy's lines: one per bad free, the kind and the address named
    LD_PRELOAD="$lib" timeout 30 "$T" bad_frees_reported_once >/dev/null 2>"$err"
    rc=$?
    doubles=$(grep -c '^sunmao: free: double free (0x[0-9a-f]*): ' "$err")
    invalid=$(grep -c '^sunmao: sunmao_heap_free: invalid free (0x[0-9a-f]*): not the start of a block' "$err")
    lines=$(grep -c . "$err")
    # a fatal err policy (hslabd's socket) aborts at the first report; warn goes on to the second
    if [ "$rc" -eq 134 ] && [ "$doubles" -eq 1 ] && [ "$lines" -eq 1 ]; then
        sm_ok "$inst/preload/bad_frees_reported_once"
    elif [ "$rc" -eq 0 ] && [ "$doubles" -eq 1 ] && [ "$invalid" -eq 1 ] && [ "$lines" -eq 2 ]; then
        sm_ok "$inst/preload/bad_frees_reported_once"
    else
        sm_fail "$inst/preload/bad_frees_reported_once" "status $rc, $doubles double, $invalid invalid, $lines lines: $(head -c 300 "$err" | tr '\n' '|')"
    fi
    LD_PRELOAD="$lib" timeout 30 "$T" stale_handle_reported >"$err.out" 2>"$err"
    rc=$?
    stale=$(grep -c '^sunmao: sunmao_heap_malloc: bad request (0x[0-9a-f]*): not a live heap$' "$err")
    lines=$(grep -c . "$err")
    if { [ "$rc" -eq 0 ] && grep -q '^ok heaps: stale_handle_reported' "$err.out"; } || [ "$rc" -eq 134 ]; then
        if [ "$stale" -eq 1 ] && [ "$lines" -eq 1 ]; then
            sm_ok "$inst/preload/stale_handle_reported"
        else
            sm_fail "$inst/preload/stale_handle_reported" "$stale reports, $lines lines: $(head -c 300 "$err" | tr '\n' '|')"
        fi
    else
        sm_fail "$inst/preload/stale_handle_reported" "status $rc: $(grep -m1 '^not ok' "$err.out")"
    fi
    rm -f "$err.out"
done
exit "${SM_FAILED:-0}"
