#!/usr/bin/env bash
# The heap-exploitation probes (tests/security/probes.c) against every instance in $INSTANCES,
# preloaded. Whatever the instance, no probe may make it hand out a bad pointer (misaligned, the
# probe's target, inside a live block), hand a block out twice, or crash the program; and each
# instance reports exactly the number of damages docs/security.md says it detects (the table below:
# a new instance needs its row, measured and written down there).
# Case names: probes/<inst>/<probe>.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/security/probes.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs the heap-exploitation probes (tests/security/probes.c) against every instance, preloaded:
no probe may get a bad pointer out of it or crash it, and each instance must report exactly the
damages docs/security.md says it detects. Prints `ok probes: <inst>/<probe>` or `not ok ...`.

Environment: BUILD (default build), INSTANCES (empty: one skip line), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/security/probes.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=probes
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances
P="$SM_BUILD/tests/security/probes"
sm_need_bin "$P" || exit 1

# <instance> <uaf_link> <overflow_1> <tag_then_dup> <xthread_dup> <xthread_exited>: reports expected; a trailing ! means the
# instance's err policy is fatal there: the report, then abort (SIGABRT), still with no bad pointer.
# 1 1 1: a hardened thread cache (thread_cache's SM_OPT_HARDEN) notices each damage when it pops the
# object. 0 0 1: no free list in the objects (bitmaps, headers): the writes damage nothing the
# allocator follows, and the second free is a double free of the layer below. tail_chksum reports
# the overflow when the block is freed; delayed reports a write after free into a held block when it
# leaves the quarantine, a double free at once (sunmao-secure's tag_then_dup is both: 2).
# sunmao-percpu: its per-CPU stacks keep no link in the objects (0 0), and a cached object's tag
# written over is seen when the object is popped (tag_then_dup: 1). sunmao-hugepage is sunmao with
# another page heap under the same thread cache and slabs: sunmao's row. sunmao-sharded's slabs keep
# their free lists in the objects, linked and tagged as a hardened thread cache's: 1 1 1 as well.
# xthread_dup, xthread_exited: a cross-thread double free, reported once by every instance; except
# that tlsf's first-fit heap hands the block freed first to the C library's own allocation in
# pthread_create, so the second free frees that live block (nothing any allocator can see).
declare -A expect=(
    [sunmao]="1 1 1 1 1" [hslab]="1 1 1 1 1" [slabbuddy]="0 0 1 1 1" [tlsf]="0 0 1 0 1" [tlsfcc]="0 0 1 0 1"
    [wfslab]="0 0 1 1 1" [wfslabfl]="0 0 1 1 1" [wfslabm]="0 0 1 1 1" [wfslabs]="0 1 1 1 1"
    [hslabd]="1! 1! 1! 1! 1!" [tlsfccsd]="1! 1 1! 1! 1!" [sunmao-secure]="1 1 2 1 1"
    [sunmao-percpu]="0 0 1 1 1" [sunmao-hugepage]="1 1 1 1 1" [sunmao-sharded]="1 1 1 1 1"
)
names=(uaf_link overflow_1 tag_then_dup xthread_dup xthread_exited)

for inst in $INSTANCES; do
    sm_lib "$inst" || continue
    out=$(LD_PRELOAD="$SM_LIB" timeout -k 5 60 "$P" 2>&1)
    want=(${expect[$inst]:-})
    for i in 0 1 2 3 4; do
        probe=${names[$i]}
        line=$(grep "^probe $probe:" <<<"$out")
        if [ -z "$line" ]; then
            sm_fail "$inst/$probe" "no result (output: $(head -c 300 <<<"$out"))"
            continue
        fi
        read -r reports bad dup crashed < <(sed -E 's/.*reports=([0-9]+) bad=([0-9]+) dup=([0-9]+) crashed=(-?[0-9]+).*/\1 \2 \3 \4/' <<<"$line")
        w=${want[$i]:-}
        want_crash=0
        [ "${w%!}" != "$w" ] && want_crash=6 # SIGABRT
        if [ "$bad" != 0 ] || [ "$dup" != 0 ] || [ "$crashed" != "$want_crash" ]; then
            sm_fail "$inst/$probe" "$line (expected bad=0 dup=0 crashed=$want_crash)"
        elif [ -z "$w" ]; then
            sm_fail "$inst/$probe" "no expected report count for $inst (add its row here and in docs/security.md): $line"
        elif [ "$reports" != "${w%!}" ]; then
            sm_fail "$inst/$probe" "$reports reports, docs/security.md says $inst makes ${w%!}: $line"
        else
            sm_ok "$inst/$probe"
        fi
    done
done
exit "$SM_FAILED"
