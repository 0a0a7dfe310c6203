#!/usr/bin/env bash
# The option matrix: every option of every layer and OS layer (docs/options.md) built at a
# non-default legal value in a small composition, and a round trip through it
# (tests/build/options_matrix.c: blocks of varied sizes and alignments filled with patterns and
# verified, getmeta's usable size >= the request, frees, release passes, -Wall -Wextra -Werror).
# One line per case:
#   ok options_matrix: <layer>/<OPTION>=<value>[ (with <OPTION>=<value>, ...)]
#   not ok options_matrix: <layer>/<OPTION>=<value>: <why>
#   not ok options_matrix: coverage/<layer>/<OPTION>: ...   an option of docs/options.md with no case
# Env: CC (default gcc), BUILD (default build), MATRIX_JOBS (default: the number of CPUs).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/options_matrix.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Builds every option of every layer and OS layer (docs/options.md) at a non-default value in a
small composition and runs a round trip through it (tests/build/options_matrix.c).
Prints `ok options_matrix: <layer>/<OPTION>=<value>` or `not ok ...: <why>`.

Environment: CC (default gcc), BUILD (default build), MATRIX_JOBS (parallel builds, default: the
number of CPUs), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/options_matrix.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok options_matrix: setup: cannot cd to the repository root"; exit 1; }
CC="${CC:-gcc}"
out="${BUILD:-build}/options_matrix"
mkdir -p "$out" && out=$(cd "$out" && pwd) || { echo "not ok options_matrix: setup: cannot create $out"; exit 1; }
command -v "$CC" >/dev/null || { echo "skip options_matrix: all: $CC not installed"; exit 0; }
# The other compiler checks each case for warnings too (syntax only: its warnings come from the front end).
CC2=clang
[ "$(basename "$CC")" != clang ] || CC2=gcc
command -v "$CC2" >/dev/null || CC2=""

# layer | composition (options_matrix.c) | options, `;`-separated, the first the one under test |
# a C expression true when the option took effect (optional)
cases=$(cat <<'LIST'
tlsf_glk|MX_TLSF|SM_OPT_SL_BITS=2|
tlsf_glk|MX_TLSF|SM_OPT_SL_BITS=6|
tlsf_glk|MX_TLSF|SM_OPT_REGION_SIZE=(64u << 10)|
tlsf_glk|MX_TLSF|SM_OPT_DECAY_MS=5|
tlsf_glk|MX_TLSF|SM_OPT_PURGE_MIN=4096|
hugepage_glk|MX_HUGEPAGE|SM_OPT_SPAN_MAX=(256u << 10)|mx_in_hugepage(256u << 10) && !mx_in_hugepage((256u << 10) + 1)
hugepage_glk|MX_HUGEPAGE|SM_OPT_REGION_SIZE=(2u << 20)|ut_obj.hugepages == ut_obj.region_count
hugepage_glk|MX_HUGEPAGE|SM_OPT_DECAY_MS=5|ut_decay_ms == 5
hugepage_glk|MX_HUGEPAGE|SM_OPT_SPARSE_PAGES=512|
hugepage_glk|MX_HUGEPAGE|SM_OPT_PURGE_MIN=4096|
hugepage_glk|MX_HUGEPAGE|SM_OPT_HUGE_AFTER=0|ut_obj.hinted_count > 0
hugepage_glk|MX_HUGEPAGE|SM_OPT_LIFETIME_SETS=0|ut_sets == 1
buddy_glk|MX_BUDDY|SM_OPT_MIN_BLOCK=64|mx_usable_of(1) == 64 && ut_min_order == 6
buddy_glk|MX_BUDDY|SM_OPT_CHUNK_SIZE=(256u << 10)|ut_max_order == 18
buddy_glk|MX_BUDDY|SM_OPT_KEEP_SPARE=0|
buddy_glk|MX_BUDDY|SM_OPT_DECAY_MS=5|
buddy_glk|MX_BUDDY|SM_OPT_PURGE_MIN=(16u << 10)|
buddy_glk|MX_BUDDY|SM_OPT_STABLE=1|SM_HAS_CAP(ut, SM_CAP_STABLE) && ut_stable_max == (1ul << ut_max_order)
buddy_glk|MX_BUDDY|SM_SIZECLASS=tc|mx_usable_of(40u << 10) == (40u << 10)
segfit_lk|MX_SEGFIT|SM_OPT_MIN_BLOCK=(16u << 10)|mx_usable_of(1) == (16u << 10) && ut_shift == 14
segfit_lk|MX_SEGFIT|SM_OPT_CHUNK_SIZE=(256u << 10)|
segfit_lf|MX_SEGFIT_LF|SM_OPT_MIN_BLOCK=(16u << 10)|mx_usable_of(1) == (16u << 10) && ut_shift == 14
segfit_lf|MX_SEGFIT_LF|SM_OPT_CHUNK_SIZE=(256u << 10)|ut_stable_max == (128u << 10)
segfit_lf|MX_SEGFIT_LF|SM_OPT_DECAY_MS=5|
slab_wf|MX_SLAB_WF|SM_OPT_SLAB_SIZE=(16u << 10)|ut_shift == 14
slab_wf|MX_SLAB_WF|SM_OPT_TLLABS=1|(mx_usable_of(16), mx_usable_of(32), ut_tls->owned == 1)
slab_wf|MX_SLAB_WF|SM_OPT_MIN_OBJECTS=64|ut_obj.max_size < 1024
slab_wf|MX_SLAB_WF|SM_OPT_DECAY_MS=5|
slab_sharded|MX_SLAB_SHARDED|SM_OPT_SLAB_SIZE=(16u << 10)|ut_shift == 14
slab_sharded|MX_SLAB_SHARDED|SM_OPT_MIN_OBJECTS=64|ut_obj.max_size <= 1024
slab_sharded|MX_SLAB_SHARDED|SM_OPT_CARVE_BYTES=64|ut_obj.info[0].carve == 4
slab_sharded|MX_SLAB_SHARDED|SM_OPT_SCAN_FULL=0|
slab_sharded|MX_SLAB_SHARDED|SM_OPT_KEEP_EMPTY=0|
slab_sharded|MX_SLAB_SHARDED|SM_OPT_DECAY_MS=5|
wcet_stat|MX_WCET|SM_OPT_SAMPLE_EVERY=1|(ut_wcet_flush(), ut_wcet_samples(0) > 0)
wcet_stat|MX_WCET|SM_OPT_REPORT_AT_EXIT=0|
szcls_stat|MX_SZCLS|SM_OPT_PRINT_AT_EXIT=1|mx_szcls_mallocs() > 0
szcls_stat|MX_SZCLS|SM_SIZECLASS=log2b|ut_classes == 17 && mx_szcls_mallocs() > 0
perf_stat|MX_PERF|SM_OPT_PRINT_AT_EXIT=1|mx_perf_allocs() > 0
delayed_free|MX_DELAYED|SM_OPT_DELAYED_SIZE=(4u << 10)|(mx_usable_of(100), mx_usable_of(8000), ut_quarantine_bytes() == 116)
delayed_free|MX_DELAYED|SM_OPT_DELAYED_SIZE=0|(mx_usable_of(100), ut_quarantine_bytes() == 0 && ut_quarantine_blocks() == 0)
delayed_free|MX_DELAYED|SM_OPT_NODE_XOR=0|ut_node_xor == 0
delayed_free|MX_DELAYED|SM_OPT_FILL=1|ut_fill == 1
delayed_free|MX_DELAYED|SM_CHKSUM=magic|
guard|MX_GUARD|SM_OPT_SAMPLE_EVERY=1|ut_obj.served > 200
guard|MX_GUARD|SM_OPT_SLOTS=2;SM_OPT_SAMPLE_EVERY=1|sizeof ut_obj.slots / sizeof ut_obj.slots[0] == 2 && ut_obj.served > 2 && ut_obj.served < 50
guard|MX_GUARD|SM_OPT_MAX_SIZE=(64u << 10);SM_OPT_SAMPLE_EVERY=1|ut_obj.data >= (64u << 10) && ut_guard_owns(ut_alloc(&(sm_mctx_t){ 40000, 16, 0, -1, NULL, 0, NULL, 0 }))
tail_chksum|MX_TAIL|SM_OPT_CHECK_REALLOC=0|!mx_tail_getmeta_checks()
tail_chksum|MX_TAIL|SM_CHKSUM=magic|mx_tail_getmeta_checks()
tail_chksum|MX_TAIL|SM_CHKSUM=xor|mx_tail_getmeta_checks()
slab_lk|MX_SLAB|SM_OPT_SLAB_SIZE=4096|ut_map_shift == 12
slab_lk|MX_SLAB|SM_OPT_EMPTY_MAX=1|
slab_lk|MX_SLAB|SM_OPT_COLOURS=1|
slab_lk|MX_SLAB|SM_OPT_COLOURS=16|
slab_lk|MX_SLAB|SM_OPT_SHARDS=4|ut_shards == 4
slab_lk|MX_SLAB|SM_OPT_SHARD_MAX=256;SM_OPT_SHARDS=4|
slab_lk|MX_SLAB|SM_RETAIN=none|
thread_cache|MX_THREAD|SM_OPT_CACHE_BYTES=(16u << 10)|
thread_cache|MX_THREAD|SM_OPT_BATCH_MAX=2|ut_batch_max == 2
thread_cache|MX_THREAD|SM_OPT_BATCH_BYTES=1024|ut_batch_bytes == 1024
thread_cache|MX_THREAD|SM_OPT_BATCH_BYTES=1024;SM_OPT_BATCH_BYTES_MAX=(256u << 10)|ut_batch_bytes_max == (256u << 10)
thread_cache|MX_THREAD|SM_OPT_LIST_MAX=32|ut_list_max == 32
thread_cache|MX_THREAD|SM_OPT_GC_EVENTS=1|
thread_cache|MX_THREAD|SM_OPT_IDLE_SCAN_REFILLS=1|ut_idle_scan_refills == 1
thread_cache|MX_THREAD|SM_OPT_DOUBLE_FREE_CHECK=0;SM_OPT_HARDEN=0|
thread_cache|MX_THREAD|SM_OPT_HARDEN=0|
thread_cache|MX_THREAD|SM_OPT_HARDEN=2|sizeof ut_tls->check == sizeof(uintptr_t)
thread_cache|MX_THREAD|SM_OPT_CORE_AWARE=1|sizeof ut_obj.core_kib > sizeof(uint32_t)
thread_cache|MX_THREAD|SM_OPT_LINK_AT=16|ut_words((void *)0) == (uintptr_t *)16
thread_cache|MX_THREAD|SM_OPT_HOLD_BYTES=4096|sizeof ut_tls->tail == sizeof(void *) * ut_class_count
thread_cache|MX_THREAD|SM_SYNC=spinlock;SM_OPT_TOTAL_BYTES=(4u << 20)|ut_pooled == 1
thread_cache|MX_THREAD|SM_RECLAIM=none;SM_OPT_CACHE_BYTES=(16u << 10)|sizeof ut_tls->mark[0] == 1
tarrcache|MX_TARR|SM_OPT_CAP=4|ut_cap == 4
tarrcache|MX_TARR|SM_OPT_CLASS_BYTES=(16u << 10)|
tarrcache|MX_TARR|SM_OPT_DOUBLE_FREE_CHECK=0|
slab_arrcache|MX_SLAB_ARR|SM_OPT_CAP=8|ut_cap == 8
slab_arrcache|MX_SLAB_ARR|SM_OPT_PAGE_SHIFT=16|
slab_arrcache|MX_SLAB_ARR|SM_OPT_CLASS_BYTES=(16u << 10)|
carrcache_lk|MX_CARR|SM_OPT_CPUS=2|ut_cpus == 2
carrcache_rseq|MX_RSEQ|SM_OPT_CPU_BYTES=(64u << 10)|mx_rseq_room() <= (64u << 10)
carrcache_rseq|MX_RSEQ|SM_OPT_CLASS_BYTES=(4u << 10)|ut_obj.cap[sm_sizeclass_tc_size_to_class(512)] == 8
carrcache_rseq|MX_RSEQ|SM_OPT_CAP_MAX=8|ut_obj.cap[sm_sizeclass_tc_size_to_class(16)] == 8
carrcache_rseq|MX_RSEQ|SM_OPT_SLAB_SHIFT=16|ut_shift == 16 && ut_obj.begin[sm_sizeclass_tc_size_to_class(8192)] + ut_obj.cap[sm_sizeclass_tc_size_to_class(8192)] <= 8192
carrcache_rseq|MX_RSEQ|SM_OPT_BATCH_MAX=2|ut_obj.batch[sm_sizeclass_tc_size_to_class(16)] == 2
carrcache_rseq|MX_RSEQ|SM_OPT_BATCH_BYTES=1024|ut_obj.batch[sm_sizeclass_tc_size_to_class(512)] == 2
carrcache_rseq|MX_RSEQ|SM_OPT_IDLE_MS=0|mx_rseq_idle_released() == 0
carrcache_rseq|MX_RSEQ|SM_OPT_IDLE_MS=50|sm_rseq.mode == SM_RSEQ_THREAD || mx_rseq_idle_released() > 0
carrcache_lk|MX_CARR|SM_OPT_CAP=4|ut_cap == 4 && ut_limit(sm_sizeclass_tc_size_to_class(16)) == 4
carrcache_lk|MX_CARR|SM_OPT_CLASS_BYTES=(16u << 10)|ut_limit(sm_sizeclass_tc_size_to_class(4096)) == 4
batched_free|MX_BATCHED|SM_OPT_BATCH=4|ut_batch == 4
aligned|MX_ALIGNED|SM_OPT_GRANULE=64|mx_usable_of(1) == 64 && ut_min_align == 64
cond_bypass|MX_COND|SM_OPT_PREDICATE=mx_pick|mx_picked > 0
prof|MX_PROF|SM_OPT_LG_RANGE=30|ut_obj.nrecs > 0
prof|MX_PROF|SM_OPT_DEPTH=8|ut_obj.nrecs > 0
decay_cache|MX_DECAY|SM_OPT_MIN_CACHED=4096|
decay_cache|MX_DECAY|SM_OPT_MAX_WASTE=0|
decay_cache|MX_DECAY|SM_OPT_DECAY_MS=5|
decay_cache|MX_DECAY|SM_OPT_PURGE_LAZY=1|
decay_cache|MX_DECAY_MMAP|SM_OPT_GROW=1|
decay_cache|MX_DECAY|SM_OPT_MAX_BLOCKS=1|sizeof ut_slots / sizeof ut_slots[0] == 1
decay_cache|MX_DECAY|SM_OPT_MAX_BYTES=(1u << 20)|
decay_cache|MX_DECAY|SM_OPT_MAX_BLOCK=(1u << 20)|
mmap_heap|MX_MMAP|SM_OPT_GROWTH=(64u << 10)|mx_usable_of(1) == (64u << 10)
mmap_heap|MX_MMAP|SM_OPT_THREAD_HEAP_SIZE=(4u << 20)|
mmap_heap|MX_MMAP|SM_OPT_THREAD_HEAP_MAX_BLOCK=(64u << 10);SM_OPT_THREAD_HEAP_SIZE=(8u << 20)|
mmap_heap|MX_MMAP|SM_OPT_HUGE_PAGES=1|
mmap_heap|MX_MMAP|SM_OPT_FAA_GROWTH=1;SM_OPT_THREAD_HEAP_SIZE=(4u << 20)|ut_obj.arenas >= 1
mmap_heap|MX_MMAP|SM_OPT_FAA_ARENA_REGIONS=2;SM_OPT_FAA_GROWTH=1;SM_OPT_THREAD_HEAP_SIZE=(1u << 20);SM_OPT_HUGE_PAGES=1|ut_obj.arenas >= 2
brk_heap|MX_BRK|SM_OPT_GROWTH=(1u << 20)|
sheap|MX_SHEAP|SM_OPT_POOL_SIZE=(2u << 20)|sizeof ut_pool == (2u << 20)
sheap|MX_SHEAP|SM_OPT_POOL=(mx_pool + 5);SM_OPT_POOL_SIZE=MX_POOL_BYTES|MX_IN_ARRAY(mx_pool)
malloc_heap|MX_MALLOC_HEAP|SM_OPT_MALLOC_FN=mx_malloc;SM_OPT_FREE_FN=mx_free;SM_OPT_MEMALIGN_FN=mx_memalign|mx_fn_calls > 0
LIST
)

# label: layer/FIRST=value (with OTHER=value, ...)
label_of() { # layer opts
    local first="${2%%;*}" rest=""
    [ "$first" = "$2" ] || rest=" (with ${2#*;})"
    printf '%s/%s%s' "$1" "$first" "${rest//;/, }"
}

run_case() { # n layer comp opts effect
    local n="$1" layer="$2" comp="$3" opts="$4" effect="$5"
    local label hdr="$out/case$n.h" bin="$out/case$n" log="$out/case$n.log" why
    label=$(label_of "$layer" "$opts")
    {
        echo "/* options_matrix case $n: $label */"
        local IFS=';' o
        for o in $opts; do printf '#define %s %s\n' "${o%%=*}" "${o#*=}"; done
    } >"$hdr"
    local args=(-std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -I.
        "-DMX_COMP=$comp" "-DMX_OPTS=\"$hdr\"")
    [ -z "$effect" ] || args+=("-DMX_EFFECT=($effect)")
    if ! "$CC" "${args[@]}" tests/build/options_matrix.c -o "$bin" -lpthread >"$log" 2>&1; then
        echo "not ok options_matrix: $label: build with $CC: $(grep -m1 -E 'error|undefined' "$log")"
        return
    fi
    if [ -n "$CC2" ] && ! "$CC2" -fsyntax-only "${args[@]}" tests/build/options_matrix.c >"$log" 2>&1; then
        echo "not ok options_matrix: $label: build with $CC2: $(grep -m1 -E 'error' "$log")"
        return
    fi
    why=$(timeout 60 "$bin" 2>&1)
    local rc=$?
    case $rc in
    0) echo "ok options_matrix: $label" ;;
    124) echo "not ok options_matrix: $label: timed out after 60 s" ;;
    *) echo "not ok options_matrix: $label: ${why:-exited with status $rc}" ;;
    esac
}

jobs="${MATRIX_JOBS:-$(nproc 2>/dev/null || echo 2)}"
n=0
while IFS='|' read -r layer comp opts effect; do
    [ -n "$layer" ] || continue
    n=$((n + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_case "$n" "$layer" "$comp" "$opts" "$effect" >"$out/case$n.result" &
done <<<"$cases"
wait
for ((i = 1; i <= n; i++)); do cat "$out/case$i.result"; done

# Every layer and OS-layer option in docs/options.md has a case, at a value that is not its default.
tools/options-table.sh --rows | awk -F'\t' -v cases="$cases" '
function norm(s) { gsub(/[` ]/, "", s); return s }
BEGIN {
    n = split(cases, lines, "\n")
    for (i = 1; i <= n; i++) {
        if (split(lines[i], f, "|") < 3) continue
        m = split(f[3], opts, ";")
        for (j = 1; j <= m; j++) {
            name = opts[j]; sub(/=.*/, "", name); val = opts[j]; sub(/^[^=]*=/, "", val)
            covered[f[1], name] = 1
            if (j == 1) { nc++; cl[nc] = f[1]; co[nc] = name; cv[nc] = val }
        }
    }
}
$1 == "opt" && $2 ~ /^(layers|os)\// {
    layer = $2; sub(/^.*\//, "", layer); sub(/\.h$/, "", layer)
    dflt[layer, $3] = $4
    if (!((layer, $3) in covered))
        print "not ok options_matrix: coverage/" layer "/" $3 ": no case builds it at a non-default value (add one to tests/build/options_matrix.sh)"
}
END {
    for (i = 1; i <= nc; i++)
        if ((cl[i], co[i]) in dflt && norm(cv[i]) == norm(dflt[cl[i], co[i]]))
            print "not ok options_matrix: coverage/" cl[i] "/" co[i] ": a case sets its default, " cv[i]
}'
