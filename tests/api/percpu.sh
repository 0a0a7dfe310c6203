#!/usr/bin/env bash
# Per-CPU caches (carrcache_rseq) through every instance, preloaded: tests/api/percpu.c's cases.
# An instance with a per-CPU layer runs them three ways: on glibc's rseq registration, with glibc's
# turned off (GLIBC_TUNABLES=glibc.pthread.rseq=0: the layer registers its own), and with rseq also
# refused by a seccomp filter (tests/api/no_rseq.c: per-thread mode); each way checks that the mode
# is the one the process must get, and a double free is reported exactly once. The other instances
# run the migration and fork cases once (threads re-pinned across CPUs, forks beside busy threads).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            echo "usage: tests/api/percpu.sh   (run by tests/run.sh; env BUILD, INSTANCES, SM_ROOT)"
            exit 0 ;;
        -*) echo "tests/api/percpu.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=percpu
. "$(dirname "$0")/driver_lib.bash"
sm_require_instances

T="$SM_BUILD/tests/api/percpu"
NO_RSEQ="$SM_BUILD/tests/api/no_rseq"
sm_need_bin "$T" || exit 1
sm_need_bin "$NO_RSEQ" || exit 1
err="$(mktemp)"
trap 'rm -f "$err"; [ -z "$SM_OUT" ] || rm -f "$SM_OUT"' EXIT

# The layer's unit test (tests/unit/carrcache_rseq.c, run plainly by tests/run.sh) in the two
# other modes: its own registration, and no rseq at all.
U="$SM_BUILD/tests/unit/carrcache_rseq"
if sm_need_bin "$U"; then
    sm_run "unit/own" 120 "" env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$U"
    if "$NO_RSEQ" true 2>/dev/null; then
        sm_run "unit/no-rseq" 120 "" env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$NO_RSEQ" "$U"
    else
        sm_skip "unit/no-rseq/all" "a seccomp filter cannot be installed here"
    fi
fi

for inst in $INSTANCES; do
    if [ "$inst" = wfslabm ]; then
        sm_skip "$inst/preload/all" "no framework socket (the hand-written control)"
        continue
    fi
    sm_lib "$inst" || continue
    lib="$SM_LIB"
    mode=$(LD_PRELOAD="$lib" timeout 30 "$T" probe 2>/dev/null)
    case "$mode" in
        rseq-glibc | rseq-own | per-thread) ;;
        *)
            if [[ "$inst" == *percpu* ]]; then
                sm_fail "$inst/preload/probe" "no per-CPU mode reported (got '$mode')"
                continue
            fi
            mode=off ;;
    esac
    if [ "$mode" = off ]; then
        sm_run "$inst/preload" 120 "$lib" "$T" migration
        sm_run "$inst/preload" 120 "$lib" "$T" fork
        continue
    fi
    if ! "$NO_RSEQ" true 2>/dev/null; then
        sm_skip "$inst/no-rseq/all" "a seccomp filter cannot be installed here"
        ways="glibc own"
    else
        ways="glibc own no-rseq"
    fi
    for way in $ways; do
        case "$way" in
            glibc) run=(env LD_PRELOAD="$lib") ;;
            own) run=(env GLIBC_TUNABLES=glibc.pthread.rseq=0 LD_PRELOAD="$lib") ;;
            no-rseq) run=(env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$NO_RSEQ" env LD_PRELOAD="$lib") ;;
        esac
        sm_run "$inst/$way" 180 "" "${run[@]}" "$T"
        "${run[@]}" timeout 30 "$T" double_free >/dev/null 2>"$err"
        rc=$?
        reports=$(grep -c '^sunmao: [a-z_]*: double free (0x[0-9a-f]*): ' "$err")
        lines=$(grep -c . "$err")
        if { [ "$rc" -eq 0 ] || [ "$rc" -eq 134 ]; } && [ "$reports" -eq 1 ] && [ "$lines" -eq 1 ]; then
            sm_ok "$inst/$way/double_free_reported_once"
        else
            sm_fail "$inst/$way/double_free_reported_once" "status $rc, $reports reports, $lines lines: $(head -c 300 "$err" | tr '\n' '|')"
        fi
    done
done
exit "${SM_FAILED:-0}"
