#!/usr/bin/env bash
# The heap-exploitation probes (tests/security/probes.c) against every instance in $INSTANCES,
# preloaded. Whatever the instance, no probe may make it hand out a bad pointer (misaligned, the
# probe's target, inside a live block), hand a block out twice, or crash the program; and each
# instance reports exactly the number of damages docs/security.md says it detects (the table below:
# a new instance needs its row, measured and written down there).
# Case names: probes/<inst>/<probe>.
SM_NS=probes
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances
P="$SM_BUILD/tests/security/probes"
sm_need_bin "$P" || exit 1

# <instance> <uaf_link> <overflow_1> <tag_then_dup>: reports expected. 1 1 1: a hardened thread
# cache (thread_cache's SM_OPT_HARDEN) or a quarantine/tail check notices each damage once. 0 0 1:
# no free list in the objects (bitmaps, headers): the writes damage nothing the allocator follows,
# and the second free is a double free of the layer below.
declare -A expect=(
    [sunmao]="1 1 1" [hslab]="1 1 1" [slabbuddy]="0 0 1" [tlsf]="0 0 1" [tlsfcc]="0 0 1"
    [wfslab]="0 0 1" [wfslabfl]="0 0 1" [wfslabm]="0 0 1"
)
names=(uaf_link overflow_1 tag_then_dup)

for inst in $INSTANCES; do
    sm_lib "$inst" || continue
    out=$(LD_PRELOAD="$SM_LIB" timeout -k 5 60 "$P" 2>&1)
    want=(${expect[$inst]:-})
    for i in 0 1 2; do
        probe=${names[$i]}
        line=$(grep "^probe $probe:" <<<"$out")
        if [ -z "$line" ]; then
            sm_fail "$inst/$probe" "no result (output: $(head -c 300 <<<"$out"))"
            continue
        fi
        read -r reports bad dup crashed < <(sed -E 's/.*reports=([0-9]+) bad=([0-9]+) dup=([0-9]+) crashed=(-?[0-9]+).*/\1 \2 \3 \4/' <<<"$line")
        if [ "$bad" != 0 ] || [ "$dup" != 0 ] || [ "$crashed" != 0 ]; then
            sm_fail "$inst/$probe" "$line"
        elif [ -z "${want[$i]:-}" ]; then
            sm_fail "$inst/$probe" "no expected report count for $inst (add its row here and in docs/security.md): $line"
        elif [ "$reports" != "${want[$i]}" ]; then
            sm_fail "$inst/$probe" "$reports reports, docs/security.md says $inst makes ${want[$i]}: $line"
        else
            sm_ok "$inst/$probe"
        fi
    done
done
exit "$SM_FAILED"
