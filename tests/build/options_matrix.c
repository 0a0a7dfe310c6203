/* The option matrix's driver (tests/build/options_matrix.sh): one small composition with one layer
 * option (or a few that go together) at a non-default value, and a round trip through it.
 * Built once per case with
 *   -DMX_COMP=<n>          the composition (MX_TLSF ... below); the layer under test is `ut`
 *   -DMX_OPTS='"file.h"'   the case's #defines, included just before the layer under test
 *   -DMX_EFFECT='expr'     optional: a C expression, true when the option took effect
 * Layers with a next layer sit on tests/support/fake_next.h (fk), except where the option needs
 * another one: decay_cache's SM_OPT_GROW over mmap_heap (capability MAPPING), thread_cache and the
 * array caches (tarrcache, slab_arrcache, carrcache_lk) over slab_lk over fk (capabilities BATCH and
 * OWNER), prof over thread_cache (capability HIT), with profiling on (MX_SETUP), cond_bypass over
 * slab_lk, its predicate's requests bypassing to fk. OS layers are tested alone.
 * The round trip: a few hundred blocks of varied sizes (some with alignments up to 4 KiB), each
 * filled with its own pattern; every block checked for its alignment and, through getmeta, for a
 * usable size >= its request; half of them freed (sized and unsized frees alternate) and allocated
 * again, everything verified, everything freed in a scattered order; three such rounds, the second
 * after release passes of the decayed memory (at now, then long after every decay time), the third
 * after a release of everything; then thread_exit and the case's MX_EFFECT. No error may reach
 * the err policy, and the fake next layer must have seen no bad free or purge. Exits 0, or prints
 * why not and exits 1 (the script makes the report line). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/retain/none.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>

#define MX_TLSF        1
#define MX_BUDDY       2
#define MX_SLAB        3
#define MX_THREAD      4 /* thread_cache :: slab_lk :: fk (MX_RSEQ: carrcache_rseq in its place) */
#define MX_DECAY       5 /* decay_cache :: fk */
#define MX_DECAY_MMAP  6 /* decay_cache :: mmap_heap */
#define MX_MMAP        7
#define MX_BRK         8
#define MX_SHEAP       9
#define MX_MALLOC_HEAP 10
#define MX_SEGFIT      11
#define MX_WCET        12 /* wcet_stat :: fk */
#define MX_SEGFIT_LF   13
#define MX_SLAB_WF     14 /* slab_wf :: segfit_lf :: fk */
#define MX_TAIL        15 /* tail_chksum :: fk (chksum crc32c unless the case names one) */
#define MX_GUARD       16 /* guard :: fk */
#define MX_DELAYED     17 /* delayed_free :: fk */
#define MX_ALIGNED     18 /* aligned :: fk */
#define MX_BATCHED     19 /* batched_free :: fk */
#define MX_CARR        20 /* carrcache_lk :: slab_lk :: fk */
#define MX_COND        21 /* cond_bypass :: slab_lk :: fk, bypassing to fk */
#define MX_PROF        22 /* prof :: thread_cache :: slab_lk :: fk (profiling on, small samples) */
#define MX_SLAB_ARR    23 /* slab_arrcache :: slab_lk :: fk */
#define MX_TARR        24 /* tarrcache :: slab_lk :: fk */
#define MX_SZCLS       25 /* szcls_stat :: fk (sizeclass tc unless the case names one) */
#define MX_PERF        26 /* perf_stat :: fk */
#define MX_RSEQ        27 /* carrcache_rseq :: slab_lk :: fk */
#define MX_HUGEPAGE    28 /* hugepage_glk :: fk */
#define MX_SLAB_SHARDED 29 /* slab_sharded :: fk */

#ifndef MX_COMP
#error "options_matrix: build with -DMX_COMP=<composition> (see tests/build/options_matrix.sh)"
#endif
#ifndef MX_OPTS
#error "options_matrix: build with -DMX_OPTS='\"case.h\"'"
#endif
#ifndef MX_EFFECT
#define MX_EFFECT 1
#endif
#define MX_EFFECT_TEXT SM_STR(MX_EFFECT)

/* ---- the compositions: sizes requested [MX_MIN, MX_MAX], MX_BIG_EVERY-th request up to MX_BIG ---- */
#if MX_COMP == MX_TLSF || MX_COMP == MX_BUDDY || MX_COMP == MX_SLAB || MX_COMP == MX_THREAD || MX_COMP == MX_DECAY || \
    MX_COMP == MX_SEGFIT || MX_COMP == MX_WCET || MX_COMP == MX_SEGFIT_LF || MX_COMP == MX_SLAB_WF || \
    MX_COMP == MX_TAIL || MX_COMP == MX_GUARD || MX_COMP == MX_DELAYED || MX_COMP == MX_ALIGNED || \
    MX_COMP == MX_BATCHED || MX_COMP == MX_CARR || MX_COMP == MX_COND || MX_COMP == MX_PROF || \
    MX_COMP == MX_SLAB_ARR || MX_COMP == MX_TARR || MX_COMP == MX_SZCLS || MX_COMP == MX_PERF || MX_COMP == MX_RSEQ || \
    MX_COMP == MX_HUGEPAGE || MX_COMP == MX_SLAB_SHARDED
#define MX_HAS_FAKE 1
#define SM_LAYER fk
#include "tests/support/fake_next.h"
#endif

#if MX_COMP == MX_TLSF
#define MX_MIN 1
#define MX_MAX ((size_t)256 << 10)
#define MX_BIG ((size_t)3 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/tlsf_glk.h>

#elif MX_COMP == MX_BUDDY
#define MX_MIN 1
#define MX_MAX ((size_t)512 << 10)
#define MX_BIG ((size_t)6 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/buddy_glk.h>

#elif MX_COMP == MX_HUGEPAGE
#define MX_MIN 1
#define MX_MAX ((size_t)512 << 10)
#define MX_BIG ((size_t)6 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/hugepage_glk.h>

#elif MX_COMP == MX_SEGFIT
#include <sunmao/policies/sizeclass/log2b.h>
#define MX_MIN 1
#define MX_MAX ((size_t)512 << 10)
#define MX_BIG ((size_t)6 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/segfit_lk.h>

#elif MX_COMP == MX_SEGFIT_LF
#include <sunmao/policies/sizeclass/log2b.h>
#define MX_MIN 1
#define MX_MAX ((size_t)512 << 10)
#define MX_BIG ((size_t)6 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/segfit_lf.h>

#elif MX_COMP == MX_SLAB_WF
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/prime.h>
#define MX_MIN 1
#define MX_MAX ((size_t)4 << 10)
#define MX_BIG ((size_t)32 << 10)
#define SM_LAYER lf
#define SM_NEXT fk
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include <sunmao/layers/core/segfit_lf.h>
#define SM_LAYER ut
#define SM_NEXT lf
#define SM_SIZECLASS prime
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/slab_wf.h>

#elif MX_COMP == MX_SLAB_SHARDED
#define MX_MIN 1
#define MX_MAX ((size_t)4 << 10)
#define MX_BIG ((size_t)32 << 10)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/slab_sharded.h>

#elif MX_COMP == MX_WCET
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#include MX_OPTS
#include <sunmao/layers/addon/wcet_stat.h>

#elif MX_COMP == MX_SZCLS
#include <sunmao/policies/sizeclass/log2b.h>
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#include MX_OPTS
#ifndef SM_SIZECLASS
#define SM_SIZECLASS tc
#endif
#include <sunmao/layers/addon/szcls_stat.h>
/* For MX_EFFECT: allocations counted over every bucket. */
SM_UNUSED static uint64_t mx_szcls_mallocs(void)
{
    static struct ut_counts k;
    uint64_t n = 0;
    ut_szcls_read(&k);
    for (unsigned b = 0; b <= (unsigned)ut_buckets; b++)
        n += k.n[0][b];
    return n;
}

#elif MX_COMP == MX_PERF
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#include MX_OPTS
#include <sunmao/layers/addon/perf_stat.h>
/* For MX_EFFECT: alloc calls timed. */
SM_UNUSED static uint64_t mx_perf_allocs(void)
{
    struct ut_perf r;
    ut_perf_read(&r);
    return r.calls[0];
}

#elif MX_COMP == MX_GUARD
#define MX_MIN 1
#define MX_MAX ((size_t)8 << 10)
#define MX_BIG ((size_t)256 << 10)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/addon/guard.h>

#elif MX_COMP == MX_TAIL
#include <sunmao/policies/chksum/crc32c.h>
#include <sunmao/policies/chksum/magic.h>
#include <sunmao/policies/chksum/xor.h>
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_ERR callback
#include MX_OPTS
#ifndef SM_CHKSUM
#define SM_CHKSUM crc32c
#endif
#include <sunmao/layers/addon/tail_chksum.h>

#elif MX_COMP == MX_DELAYED
#include <sunmao/policies/chksum/magic.h> /* for the case SM_CHKSUM=magic */
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/addon/delayed_free.h>

#elif MX_COMP == MX_SLAB
#define MX_MIN 1
#define MX_MAX ((size_t)8 << 10)
#define MX_BIG ((size_t)64 << 10)
#define SM_LAYER ut
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/core/slab_lk.h>

#elif MX_COMP == MX_THREAD || MX_COMP == MX_RSEQ
#define MX_MIN 1
#define MX_MAX ((size_t)4 << 10)
#define MX_BIG ((size_t)32 << 10)
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#include <sunmao/policies/reclaim/none.h> /* for the case SM_RECLAIM=none */
#define SM_LAYER ut
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#include MX_OPTS
#if MX_COMP == MX_THREAD
#include <sunmao/layers/addon/thread_cache.h>
#else
#include <sunmao/layers/addon/carrcache_rseq.h>
/* The room granted on the calling thread's CPU, in bytes (after a round trip). */
SM_UNUSED static size_t mx_rseq_room(void)
{
    long cpu = sm_rseq_cpu();
    return ut_obj.ready && cpu >= 0 && cpu < (long)ut_obj.slots ? ut_obj.cpu[cpu].room : 0;
}
/* Bytes two passes of the release clock (may_move), an hour apart, give back after objects were
 * cached on this CPU: the idle drain's. */
SM_UNUSED static size_t mx_rseq_idle_released(void)
{
    void *v[16];
    for (int i = 0; i < 16; i++) {
        sm_mctx_t c = sm_mctx_alloc(64, 0, SM_F_USER);
        v[i] = ut_alloc(&c);
    }
    for (int i = 0; i < 16; i++) {
        sm_mctx_t c = sm_mctx_block(v[i], 0, 0);
        if (v[i])
            ut_free(&c);
    }
    sm_release_t r = sm_release_request(1000, SM_RELEASE_DECAYED);
    r.may_move = 1;
    ut_release(&r);
    r = sm_release_request(1000 + 3600000, SM_RELEASE_DECAYED);
    r.may_move = 1;
    ut_release(&r);
    return r.released;
}
#endif

#elif MX_COMP == MX_ALIGNED
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#include MX_OPTS
#include <sunmao/layers/addon/aligned.h>

#elif MX_COMP == MX_BATCHED
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
#define SM_LAYER ut
#define SM_NEXT fk
#include MX_OPTS
#include <sunmao/layers/addon/batched_free.h>

#elif MX_COMP == MX_CARR || MX_COMP == MX_COND || MX_COMP == MX_PROF || MX_COMP == MX_SLAB_ARR || MX_COMP == MX_TARR
#define MX_MIN 1
#define MX_MAX ((size_t)4 << 10)
#define MX_BIG ((size_t)32 << 10)
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#if MX_COMP == MX_CARR
#define SM_LAYER ut
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_SYNC spinlock
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/addon/carrcache_lk.h>
#elif MX_COMP == MX_COND
/* A predicate a case may name through SM_OPT_PREDICATE: requests of 1 KiB to 2 KiB go to fk. */
static unsigned long mx_picked;
SM_UNUSED static bool mx_pick(sm_mctx_t *c)
{
    bool pick = c->size >= 1024 && c->size <= 2048;
    mx_picked += pick;
    return pick;
}
#define SM_LAYER ut
#define SM_NEXT sl
#define SM_BYPASS_TO fk
#include MX_OPTS
#include <sunmao/layers/addon/cond_bypass.h>
#elif MX_COMP == MX_PROF
#define SM_LAYER tcache
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/addon/thread_cache.h>
#define SM_LAYER ut
#define SM_NEXT tcache
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/addon/prof.h>
/* Profiling on, a sample about every 4 KiB, no dump files. */
#define MX_SETUP() (sm_conf.prof = true, sm_conf.lg_prof_sample = 12, sm_conf.prof_prefix[0] = '\0')
#else
#define SM_LAYER ut
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#include MX_OPTS
#if MX_COMP == MX_SLAB_ARR
#include <sunmao/layers/addon/slab_arrcache.h>
#else
#include <sunmao/layers/addon/tarrcache.h>
#endif
#endif

#elif MX_COMP == MX_DECAY || MX_COMP == MX_DECAY_MMAP
#define MX_MIN ((size_t)1 << 10)
#define MX_MAX ((size_t)512 << 10)
#define MX_BIG ((size_t)4 << 20)
#if MX_COMP == MX_DECAY_MMAP
#define SM_LAYER mm
#define SM_ERR callback
#include <sunmao/os/mmap_heap.h>
#define SM_NEXT mm
#else
#define SM_NEXT fk
#endif
#define SM_LAYER ut
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/layers/addon/decay_cache.h>

#elif MX_COMP == MX_MMAP
#define MX_MIN 1
#define MX_MAX ((size_t)256 << 10)
#define MX_BIG ((size_t)5 << 20)
#define SM_LAYER ut
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/os/mmap_heap.h>

#elif MX_COMP == MX_BRK
#define MX_MIN 1
#define MX_MAX ((size_t)128 << 10)
#define MX_BIG ((size_t)2 << 20)
#define SM_LAYER ut
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/os/brk_heap.h>

#elif MX_COMP == MX_SHEAP
#define MX_MIN 1
#define MX_MAX ((size_t)2 << 10)
#define MX_BIG ((size_t)16 << 10)
#define MX_POOL_BYTES ((size_t)1 << 20)
SM_UNUSED static unsigned char mx_pool[MX_POOL_BYTES + 5]; /* a case may hand it to sheap (SM_OPT_POOL) */
#define SM_LAYER ut
#define SM_SYNC mutex
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/os/sheap.h>

#elif MX_COMP == MX_MALLOC_HEAP
#define MX_MIN 1
#define MX_MAX ((size_t)64 << 10)
#define MX_BIG ((size_t)1 << 20)
/* Functions a case may name through SM_OPT_MALLOC_FN, SM_OPT_FREE_FN, SM_OPT_MEMALIGN_FN. */
static long mx_fn_calls;
SM_UNUSED static void *mx_malloc(size_t n) { mx_fn_calls++; return malloc(n); }
SM_UNUSED static void mx_free(void *p) { mx_fn_calls++; free(p); }
SM_UNUSED static void *mx_memalign(size_t a, size_t n) { mx_fn_calls++; return memalign(a, n); }
#define SM_LAYER ut
#define SM_ERR callback
#include MX_OPTS
#include <sunmao/os/malloc_heap.h>

#else
#error "options_matrix: unknown MX_COMP"
#endif

#ifndef MX_HAS_FAKE
#define MX_HAS_FAKE 0
#endif
#ifndef MX_SETUP
#define MX_SETUP() ((void)0) /* what a composition needs done before create */
#endif
#define MX_BIG_EVERY 23
#define MX_BLOCKS 320

/* ---- the round trip ---- */
static int mx_errors;
static char mx_first_error[200];
static void mx_on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    if (!mx_errors++)
        snprintf(mx_first_error, sizeof mx_first_error, "error %d from %s at %p: %s", (int)kind, layer, ptr, detail);
}

static char mx_why[300];
#define MX_FAIL(...) (snprintf(mx_why, sizeof mx_why, __VA_ARGS__), false)

static uint64_t mx_rng = 0x9e3779b97f4a7c15u;
static uint64_t mx_next(void)
{
    mx_rng ^= mx_rng << 13, mx_rng ^= mx_rng >> 7, mx_rng ^= mx_rng << 17;
    return mx_rng;
}
/* Sizes spread evenly over the powers of two in [MX_MIN, MX_MAX], now and then one up to MX_BIG. */
static size_t mx_size(unsigned i)
{
    size_t lo = MX_MIN, hi = (i % MX_BIG_EVERY == MX_BIG_EVERY - 1) ? MX_BIG : MX_MAX;
    unsigned bits = 0;
    while (((size_t)1 << bits) < hi)
        bits++;
    size_t top = (size_t)1 << (mx_next() % (bits + 1));
    size_t s = top / 2 + mx_next() % (top / 2 + 1);
    return s < lo ? lo : s > hi ? hi : s;
}
static size_t mx_align(unsigned i) { return i % 7 == 3 ? (size_t)32 << (mx_next() % 8) : SM_MIN_ALIGN; }

struct mx_block { unsigned char *p; size_t size, align; unsigned char seed; };
static struct mx_block mx_blocks[MX_BLOCKS];
static void *mx_last; /* the last block allocated */

static void mx_fill(const struct mx_block *b)
{
    for (size_t j = 0; j < b->size; j++)
        b->p[j] = (unsigned char)(b->seed + j * 7 + (j >> 8));
}
static bool mx_intact(const struct mx_block *b)
{
    for (size_t j = 0; j < b->size; j++)
        if (b->p[j] != (unsigned char)(b->seed + j * 7 + (j >> 8)))
            return MX_FAIL("block %p (%zu bytes) changed at byte %zu", (void *)b->p, b->size, j);
    return true;
}

static bool mx_get(unsigned i)
{
    struct mx_block *b = &mx_blocks[i];
    b->size = mx_size(i);
    b->align = mx_align(i);
    b->seed = (unsigned char)mx_next();
    sm_mctx_t c = sm_mctx_alloc(b->size, b->align, 0);
    b->p = ut_alloc(&c);
    if (!b->p)
        return MX_FAIL("alloc of %zu bytes aligned to %zu failed", b->size, b->align);
    if (c.ptr != b->p)
        return MX_FAIL("alloc returned %p but set c->ptr to %p", (void *)b->p, c.ptr);
    if ((uintptr_t)b->p % b->align)
        return MX_FAIL("block %p of %zu bytes is not aligned to %zu", (void *)b->p, b->size, b->align);
    sm_mctx_t m = sm_mctx_block(b->p, 0, 0);
    if (!ut_getmeta(&m))
        return MX_FAIL("getmeta does not know block %p of %zu bytes", (void *)b->p, b->size);
    if (m.usable < b->size)
        return MX_FAIL("getmeta: %zu usable bytes at %p, %zu requested", m.usable, (void *)b->p, b->size);
    mx_fill(b);
    mx_last = b->p;
    return true;
}
static void mx_put(unsigned i)
{
    struct mx_block *b = &mx_blocks[i];
    sm_mctx_t c = sm_mctx_block(b->p, i % 2 ? b->size : 0, i % 2 ? SM_F_SIZED : 0);
    ut_free(&c);
    b->p = NULL;
}
static bool mx_all_intact(void)
{
    for (unsigned i = 0; i < MX_BLOCKS; i++)
        if (mx_blocks[i].p && !mx_intact(&mx_blocks[i]))
            return false;
    return true;
}
/* For MX_EFFECT: the usable size the layer gives a request of n bytes; whether the last block
 * allocated lies in array a. */
SM_UNUSED static size_t mx_usable_of(size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n, SM_MIN_ALIGN, 0);
    if (!ut_alloc(&c))
        return 0;
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    size_t usable = ut_getmeta(&m) ? m.usable : 0;
    ut_free(&m);
    return usable;
}
#if MX_COMP == MX_HUGEPAGE
/* For MX_EFFECT: whether a request of n bytes is served by the layer itself (a span). */
SM_UNUSED static bool mx_in_hugepage(size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n, SM_MIN_ALIGN, 0);
    if (!ut_alloc(&c))
        return false;
    bool in = ut_hp_of(c.ptr) != NULL;
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    ut_free(&m);
    return in;
}
#endif
#if MX_COMP == MX_TAIL
/* For MX_EFFECT: whether getmeta sees a one-byte overflow. Unseen, the byte is put back and the
 * block freed; seen (and so reported, once), the free leaks it without a second report. */
SM_UNUSED static bool mx_tail_getmeta_checks(void)
{
    sm_mctx_t c = sm_mctx_alloc(40, SM_MIN_ALIGN, 0);
    unsigned char *p = ut_alloc(&c);
    if (!p)
        return false;
    int before = mx_errors;
    p[40] ^= 1;
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    (void)ut_getmeta(&m);
    bool seen = mx_errors != before;
    mx_errors = before;
    if (!seen)
        p[40] ^= 1;
    ut_free(&m);
    return seen;
}
#endif
#define MX_IN_ARRAY(a) ((unsigned char *)mx_last >= (a) && (unsigned char *)mx_last < (a) + sizeof(a))

static uint64_t mx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool mx_round(void)
{
    for (unsigned i = 0; i < MX_BLOCKS; i++)
        if (!mx_get(i))
            return false;
    if (!mx_all_intact())
        return false;
    for (unsigned i = 0; i < MX_BLOCKS; i += 2)
        mx_put(i);
    if (!mx_all_intact())
        return false;
    for (unsigned i = 0; i < MX_BLOCKS; i += 2)
        if (!mx_get(i))
            return false;
    if (!mx_all_intact())
        return false;
    for (unsigned i = 0; i < MX_BLOCKS; i++)
        mx_put((i * 37) % MX_BLOCKS); /* 37 is prime to MX_BLOCKS: every block once, scattered */
    return true;
}

static bool mx_run(void)
{
    MX_SETUP();
    if (ut_create() != 0)
        return MX_FAIL("create failed");
    if (!mx_round())
        return false;
    /* Release passes: stamp, then long after every decay time, then everything. */
    uint64_t now = mx_now_ms();
    sm_release_t r = sm_release_request(now, SM_RELEASE_DECAYED);
    ut_release(&r);
    r = sm_release_request(now + 100000, SM_RELEASE_DECAYED);
    ut_release(&r);
    r = sm_release_request(now + 200000, SM_RELEASE_DECAYED);
    ut_release(&r);
    if (!mx_round())
        return false;
    r = sm_release_request(mx_now_ms(), SM_RELEASE_ALL);
    ut_release(&r);
    if (!mx_round()) /* and once more after everything went back */
        return false;
    ut_thread_exit();
    if (!(MX_EFFECT))
        return MX_FAIL("the option did not take effect: %s is false", MX_EFFECT_TEXT);
    if (mx_errors)
        return MX_FAIL("%s", mx_first_error);
#if MX_HAS_FAKE
    if (fk_obj.bad_frees || fk_obj.bad_purges)
        return MX_FAIL("the fake next layer saw %lu bad frees and %lu bad purges", fk_obj.bad_frees, fk_obj.bad_purges);
#endif
    return true;
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    sm_err_callback_set(mx_on_error);
    if (mx_run())
        return 0;
    printf("%s\n", mx_why);
    return 1;
}
