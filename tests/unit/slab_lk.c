/* Unit test of the slab_lk core layer over the fake next layer (tests/support/fake_next.h):
 * every class serves, objects never overlap, aligned requests, fullness hysteresis, error policy on
 * double and interior frees, OOM and recovery, pass-through above max, cross-thread frees. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/prime.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/none.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/cpus.h"

#define SM_SIZECLASS_NAME ivc
#define SM_SIZECLASS_INTERVALS (128, 16), (1024, 64), (8192, 512)
#include <sunmao/policies/sizeclass/interval.h>

/* Instances: sl_<x> over its own fake fk_<x>. */
#define SM_LAYER fk_tc
#include "tests/support/fake_next.h"
#define SM_LAYER sl_tc
#define SM_NEXT fk_tc
#define SM_SYNC mutex
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER fk_lb
#include "tests/support/fake_next.h"
#define SM_LAYER sl_lb
#define SM_NEXT fk_lb
#define SM_SYNC spinlock
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER fk_iv
#include "tests/support/fake_next.h"
#define SM_LAYER sl_iv
#define SM_NEXT fk_iv
#define SM_SYNC mutex
#define SM_SIZECLASS ivc
#define SM_ERR callback
#define SM_OPT_SLAB_SIZE 16384
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER fk_oom
#include "tests/support/fake_next.h"
#define SM_LAYER sl_oom
#define SM_NEXT fk_oom
#define SM_SYNC none
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX 4096
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER fk_mx
#include "tests/support/fake_next.h"
#define SM_LAYER sl_mx
#define SM_NEXT fk_mx
#define SM_SYNC mutex
#define SM_SIZECLASS prime
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER fk_sp
#include "tests/support/fake_next.h"
#define SM_LAYER sl_sp
#define SM_NEXT fk_sp
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

/* At most 2 empty slabs kept across classes */
#define SM_LAYER fk_em
#include "tests/support/fake_next.h"
#define SM_LAYER sl_em
#define SM_NEXT fk_em
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_EMPTY_MAX 2
#include <sunmao/layers/core/slab_lk.h>

/* Two shards: threads on CPUs of different parity take objects from different slabs */
#define SM_LAYER fk_sh
#include "tests/support/fake_next.h"
#define SM_LAYER sl_sh
#define SM_NEXT fk_sh
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SHARDS 2
#include <sunmao/layers/core/slab_lk.h>

/* The same, with classes above 512 B left unsharded */
#define SM_LAYER fk_sm
#include "tests/support/fake_next.h"
#define SM_LAYER sl_sm
#define SM_NEXT fk_sm
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SHARDS 2
#define SM_OPT_SHARD_MAX 512
#include <sunmao/layers/core/slab_lk.h>

_Static_assert(sl_tc_thread_safe == 1 && sl_sp_thread_safe == 1 && sl_oom_thread_safe == 0, "thread_safe property");
_Static_assert(sl_tc_min_align == 16 && sl_tc_zeroed == 0, "alignment and zeroing properties");

/* ---- error policy recorder ---- */
static unsigned long err_counts[SM_ERR_KIND_COUNT];
static const char *err_layer;
static const void *err_ptr;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)detail;
    __atomic_add_fetch(&err_counts[kind], 1, __ATOMIC_RELAXED);
    err_layer = layer;
    err_ptr = ptr;
}
static void err_reset(void) { memset(err_counts, 0, sizeof err_counts); err_layer = NULL; err_ptr = NULL; }
static unsigned long err_total(void)
{
    unsigned long n = 0;
    for (int k = 0; k < SM_ERR_KIND_COUNT; k++)
        n += err_counts[k];
    return n;
}

/* ---- one table of function pointers per instance, so the cases are written once ---- */
typedef struct {
    const char *name, *fake_name;
    unsigned classes;
    size_t max, slab;
    size_t (*class_size)(unsigned);
    void *(*alloc)(size_t size, size_t align);
    void (*free)(void *p);
    void (*free_sized)(void *p, size_t n);
    bool (*getmeta)(void *p, size_t *usable, const char **owner);
    bool (*resize)(void *p, size_t n);
    size_t (*fake_blocks_sized)(size_t bytes);
    unsigned long (*fake_allocs)(void);
    unsigned long (*fake_frees)(void);
    unsigned long (*fake_bad_frees)(void);
} inst_t;

#define INSTANCE(SL, FK, POLICY, MAX, SLAB)                                                         \
    static size_t SL##_t_cs(unsigned c) { return sm_sizeclass_##POLICY##_class_to_size(c); }        \
    static void *SL##_t_alloc(size_t n, size_t a)                                                  \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_alloc(n, a, 0);                                                      \
        return SL##_alloc(&c);                                                                     \
    }                                                                                              \
    static void SL##_t_free(void *p)                                                               \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                      \
        SL##_free(&c);                                                                             \
    }                                                                                              \
    static void SL##_t_free_sized(void *p, size_t n)                                               \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, n, SM_F_SIZED);                                             \
        SL##_free(&c);                                                                             \
    }                                                                                              \
    static bool SL##_t_getmeta(void *p, size_t *usable, const char **owner)                        \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                      \
        bool ok = SL##_getmeta(&c);                                                                \
        *usable = c.usable;                                                                        \
        *owner = c.owner;                                                                          \
        return ok;                                                                                 \
    }                                                                                              \
    static bool SL##_t_resize(void *p, size_t n)                                                   \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                      \
        return SL##_resize(&c, n);                                                                 \
    }                                                                                              \
    static size_t SL##_t_blocks(size_t bytes)                                                      \
    {                                                                                              \
        size_t n = 0;                                                                              \
        pthread_mutex_lock(&FK##_obj.lock);                                                        \
        for (size_t i = 0; i < FK##_obj.live_blocks; i++)                                          \
            n += FK##_obj.blocks[i].size == bytes;                                                 \
        pthread_mutex_unlock(&FK##_obj.lock);                                                      \
        return n;                                                                                  \
    }                                                                                              \
    static unsigned long SL##_t_allocs(void) { return FK##_obj.allocs; }                          \
    static unsigned long SL##_t_frees(void) { return FK##_obj.frees; }                            \
    static unsigned long SL##_t_bad(void) { return FK##_obj.bad_frees; }                          \
    static const inst_t SL##_inst = { #SL,          #FK,           sm_sizeclass_##POLICY##_count, \
                                      MAX,          SLAB,          SL##_t_cs,                     \
                                      SL##_t_alloc, SL##_t_free,   SL##_t_free_sized,             \
                                      SL##_t_getmeta, SL##_t_resize, SL##_t_blocks,               \
                                      SL##_t_allocs, SL##_t_frees, SL##_t_bad };

INSTANCE(sl_tc, fk_tc, tc, sm_sizeclass_tc_max_size, 65536)
INSTANCE(sl_lb, fk_lb, log2b, sm_sizeclass_log2b_max_size, 65536)
INSTANCE(sl_iv, fk_iv, ivc, sm_sizeclass_ivc_max_size, 16384)
INSTANCE(sl_mx, fk_mx, prime, sm_sizeclass_prime_max_size, 65536)
INSTANCE(sl_sp, fk_sp, tc, sm_sizeclass_tc_max_size, 65536)
INSTANCE(sl_em, fk_em, tc, sm_sizeclass_tc_max_size, 65536)
INSTANCE(sl_sh, fk_sh, tc, sm_sizeclass_tc_max_size, 65536)

static const inst_t *const policy_insts[] = { &sl_tc_inst, &sl_lb_inst, &sl_iv_inst };

static size_t low_bit(size_t x) { return x & -x; }
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Each class serves a request of exactly its size and one just above the class below. */
static void every_class_one(const inst_t *t)
{
    for (unsigned cls = 0; cls < t->classes; cls++) {
        size_t size = t->class_size(cls), below = cls ? t->class_size(cls - 1) + 1 : 1;
        void *a = t->alloc(size, 0), *b = t->alloc(below, 0);
        CHECKF(a && b, "%s: class %u (%zu B) failed", t->name, cls, size);
        if (!a || !b)
            return;
        size_t ua, ub;
        const char *oa, *ob;
        CHECKF(t->getmeta(a, &ua, &oa) && t->getmeta(b, &ub, &ob), "%s: getmeta", t->name);
        CHECKF(!strcmp(oa, t->name) && !strcmp(ob, t->name), "%s: class %u owned by %s", t->name, cls, oa);
        CHECKF(ua == size && ub == size, "%s: class %u usable %zu/%zu, want %zu", t->name, cls, ua, ub, size);
        /* objects are aligned to the class size's power-of-two factor, up to a page */
        size_t want = min_size(low_bit(size), 4096);
        CHECKF(sm_ptr_aligned(a, want) && sm_ptr_aligned(b, want), "%s: class %u objects not %zu-aligned",
               t->name, cls, want);
        check_fill(a, size, 1);
        check_fill(b, size, 2);
        CHECKF(check_verify(a, size, 1) && check_verify(b, size, 2), "%s: class %u objects overlap", t->name, cls);
        t->free(a);
        t->free(b);
    }
}
static void every_class(void)
{
    err_reset();
    for (size_t i = 0; i < sizeof policy_insts / sizeof *policy_insts; i++)
        every_class_one(policy_insts[i]);
    CHECK(err_total() == 0);
}

/* Thousands of live objects across classes: patterns survive, address ranges are disjoint. */
typedef struct { unsigned char *p; size_t size, usable; } live_t;
static int by_address(const void *x, const void *y)
{
    const live_t *a = x, *b = y;
    return a->p < b->p ? -1 : a->p > b->p;
}
static size_t random_size(unsigned *seed, size_t max)
{
    unsigned r = (unsigned)rand_r(seed);
    size_t cap = (r & 7) == 0 ? max : (r & 7) < 3 ? 2048 : 256; /* mostly small, some large */
    return (size_t)rand_r(seed) % (cap + 1);
}
static void no_overlap_one(const inst_t *t, size_t n)
{
    live_t *v = calloc(n, sizeof *v);
    unsigned seed = 12345;
    size_t max = t->max > 65536 ? 65536 : t->max; /* keep the fake's table and the test fast */
    for (size_t i = 0; i < n; i++) {
        v[i].size = random_size(&seed, max);
        v[i].p = t->alloc(v[i].size, 0);
        const char *owner = "";
        CHECKF(v[i].p && t->getmeta(v[i].p, &v[i].usable, &owner), "%s: alloc %zu", t->name, v[i].size);
        if (!v[i].p)
            return;
        CHECKF(v[i].usable >= v[i].size && sm_ptr_aligned(v[i].p, 16), "%s: usable %zu for %zu", t->name,
               v[i].usable, v[i].size);
        check_fill(v[i].p, v[i].usable, (unsigned)i);
    }
    for (size_t i = 0; i < n; i++)
        CHECKF(check_verify(v[i].p, v[i].usable, (unsigned)i), "%s: object %zu (%zu B) overwritten", t->name, i,
               v[i].usable);
    live_t *sorted = malloc(n * sizeof *v);
    memcpy(sorted, v, n * sizeof *v);
    qsort(sorted, n, sizeof *v, by_address);
    for (size_t i = 1; i < n; i++)
        CHECKF(sorted[i - 1].p + sorted[i - 1].usable <= sorted[i].p, "%s: %p+%zu overlaps %p", t->name,
               (void *)sorted[i - 1].p, sorted[i - 1].usable, (void *)sorted[i].p);
    free(sorted);
    /* free in a shuffled order, verifying each object just before */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rand_r(&seed) % i;
        live_t tmp = v[i - 1];
        v[i - 1] = v[j];
        v[j] = tmp;
    }
    for (size_t i = 0; i < n; i++)
        t->free(v[i].p);
    free(v);
    /* what stays below: at most one empty slab per class (and the page-map leaves) */
    CHECKF(t->fake_blocks_sized(t->slab) <= t->classes, "%s: %zu slabs kept for %u classes", t->name,
           t->fake_blocks_sized(t->slab), t->classes);
    CHECKF(t->fake_bad_frees() == 0, "%s: bad frees reached the next layer", t->name);
}
static void no_overlap(void)
{
    err_reset();
    for (size_t i = 0; i < sizeof policy_insts / sizeof *policy_insts; i++)
        no_overlap_one(policy_insts[i], 4000);
    CHECK(err_total() == 0);
}

static void aligned_one(const inst_t *t)
{
    static const size_t sizes[] = { 0, 1, 24, 100, 1000, 5000 };
    for (size_t align = 32; align <= 16384; align <<= 1) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t size = sizes[i];
            void *p = t->alloc(size, align);
            size_t usable = 0;
            const char *owner = "";
            CHECKF(p && sm_ptr_aligned(p, align), "%s: %zu B aligned %zu: %p", t->name, size, align, p);
            if (!p)
                continue;
            CHECKF(t->getmeta(p, &usable, &owner) && usable >= size, "%s: getmeta", t->name);
            const char *want = align <= 4096 ? t->name : t->fake_name;
            CHECKF(!strcmp(owner, want), "%s: %zu B aligned %zu served by %s, want %s", t->name, size, align, owner,
                   want);
            check_fill(p, usable, 7);
            CHECK(check_verify(p, usable, 7));
            t->free(p);
        }
    }
}
static void aligned(void)
{
    err_reset();
    for (size_t i = 0; i < sizeof policy_insts / sizeof *policy_insts; i++)
        aligned_one(policy_insts[i]);
    CHECK(err_total() == 0);
}

/* Free every object of a class: one empty slab stays, the others go back to the next layer;
 * alloc/free across a slab boundary does not reach the next layer. */
/* Classes whose objects fill a slab exactly (4 KiB: 16 in 64 KiB) keep their descriptors outside
 * it: every object of a slab is usable, the first at the slab's start; objects keep their
 * contents; a double free is caught by the bitmap of the outside descriptor; an emptied slab goes
 * back to the next layer and its descriptor is reused by the next slab, from the same block. */
static void offslab(void)
{
    const inst_t *t = &sl_tc_inst;
    const size_t size = 4096;
    enum { N = 48 };
    static char *objs[N];
    err_reset();
    size_t base = t->fake_blocks_sized(t->slab);
    for (int i = 0; i < N; i++) {
        objs[i] = t->alloc(size, 0);
        CHECK(objs[i] != NULL);
        check_fill(objs[i], size, (unsigned)i);
    }
    /* 16 a slab, with no room lost: three slabs, the first objects at their starts */
    unsigned at_start = 0, slabs = 0;
    for (int i = 0; i < N; i++) {
        at_start += sm_ptr_aligned(objs[i], 65536);
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= ((uintptr_t)objs[j] >> 16) == ((uintptr_t)objs[i] >> 16);
        slabs += !seen;
    }
    CHECKF(slabs == 3 && at_start == 3, "%u slabs for %d objects of 4 KiB, %u at a slab's start", slabs, N, at_start);
    size_t pages = sl_tc_obj.desc_pages;
    CHECKF(pages >= 1, "descriptor blocks %zu", pages);
    t->free(objs[5]);
    t->free(objs[5]);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1, "double free of an object of an outside-descriptor slab: %lu reports",
           err_counts[SM_ERR_DOUBLE_FREE]);
    objs[5] = t->alloc(size, 0);
    check_fill(objs[5], size, 5);
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(objs[i], size, (unsigned)i), "object %d overwritten", i);
        t->free(objs[i]);
    }
    /* one slab kept empty (keep_last), the others back below */
    CHECKF(t->fake_blocks_sized(t->slab) - base <= 1, "after freeing all: %zu slabs held",
           t->fake_blocks_sized(t->slab) - base);
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++)
            objs[i] = t->alloc(size, 0);
        for (int i = 0; i < N; i++)
            t->free(objs[i]);
    }
    CHECKF(sl_tc_obj.desc_pages == pages, "descriptor blocks grew from %zu to %zu: released ones not reused", pages,
           sl_tc_obj.desc_pages);
    CHECK(err_total() == 1);
    err_reset();
}

static void hysteresis(void)
{
    const inst_t *t = &sl_tc_inst;
    const size_t size = 256; /* 64 KiB slabs, unlike the 8 MiB page-map leaves */
    enum { N = 2000 };       /* about eight slabs */
    static void *objs[N];
    objs[0] = t->alloc(size, 0);
    t->free(objs[0]); /* now the class keeps its one empty slab */
    size_t base = t->fake_blocks_sized(t->slab);
    unsigned long allocs_before = t->fake_allocs();
    for (int i = 0; i < N; i++) {
        objs[i] = t->alloc(size, 0);
        CHECK(objs[i] != NULL);
        check_fill(objs[i], size, (unsigned)i);
    }
    /* the kept slab plus new slabs (the fake's other allocations are page-map leaves) */
    size_t grown = t->fake_blocks_sized(t->slab) - base;
    CHECKF(grown >= 6 && grown <= t->fake_allocs() - allocs_before, "slabs grew by %zu, base %zu", grown, base);
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(objs[i], size, (unsigned)i), "object %d overwritten", i);
        t->free(objs[i]);
    }
    CHECKF(t->fake_blocks_sized(t->slab) == base, "after freeing all: %zu slabs below, want %zu (one kept empty)",
           t->fake_blocks_sized(t->slab), base);

    /* fill slabs until the next one is needed, then thrash the boundary */
    unsigned long a0 = t->fake_allocs();
    int n = 0;
    while (n < N && t->fake_allocs() <= a0 + 1)
        objs[n++] = t->alloc(size, 0); /* the kept slab, then one new slab */
    unsigned long a1 = t->fake_allocs(), f1 = t->fake_frees();
    for (int i = 0; i < 1000; i++) {
        t->free(objs[n - 1]);
        objs[n - 1] = t->alloc(size, 0);
        CHECK(objs[n - 1] != NULL);
    }
    CHECKF(t->fake_allocs() == a1 && t->fake_frees() == f1, "boundary alloc/free reached the next layer: %lu allocs %lu frees",
           t->fake_allocs() - a1, t->fake_frees() - f1);
    for (int i = 0; i < n; i++)
        t->free(objs[i]);
    CHECK(t->fake_blocks_sized(t->slab) == base);
    CHECK(err_total() == 0 && t->fake_bad_frees() == 0);
}

/* SM_OPT_EMPTY_MAX: one object of each of four classes, freed in turn, leaves each class an empty
 * slab; with the bound at 2 only the two emptied last stay (their next allocation reaches nothing
 * below), the two oldest went back. Without a bound (sl_sp) all four stay. */
static void empty_bound_one(const inst_t *t, unsigned want_kept)
{
    static const size_t sizes[] = { 64, 128, 256, 512 }; /* 64 KiB slabs, unlike the page-map leaves */
    void *objs[4];
    size_t base = t->fake_blocks_sized(t->slab);
    for (int i = 0; i < 4; i++) {
        objs[i] = t->alloc(sizes[i], 0);
        CHECK(objs[i] != NULL);
    }
    CHECKF(t->fake_blocks_sized(t->slab) == base + 4, "%s: four classes took %zu slabs", t->name,
           t->fake_blocks_sized(t->slab) - base);
    for (int i = 0; i < 4; i++)
        t->free(objs[i]);
    CHECKF(t->fake_blocks_sized(t->slab) == base + want_kept, "%s: %zu empty slabs kept, want %u", t->name,
           t->fake_blocks_sized(t->slab) - base, want_kept);
    /* the classes emptied last kept theirs: allocating from them takes nothing from below */
    unsigned long allocs = t->fake_allocs();
    for (int i = 3; i >= 4 - (int)want_kept; i--)
        objs[i] = t->alloc(sizes[i], 0);
    CHECKF(t->fake_allocs() == allocs, "%s: a kept slab was not reused", t->name);
    for (int i = 3; i >= 4 - (int)want_kept; i--)
        t->free(objs[i]);
    CHECK(err_total() == 0 && t->fake_bad_frees() == 0);
}
static void empty_bound(void)
{
    err_reset();
    empty_bound_one(&sl_em_inst, 2);
    empty_bound_one(&sl_sp_inst, 4); /* fresh: the stress case, which uses it, runs later */
}

static void errors_one(const inst_t *t)
{
    err_reset();
    unsigned char *keep = t->alloc(64, 0), *p = t->alloc(64, 0);
    CHECK(keep && p);
    check_fill(keep, 64, 3);
    t->free(p);
    t->free(p);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%s: double free raised %lu", t->name, err_total());
    CHECKF(err_layer && !strcmp(err_layer, t->name) && err_ptr == p, "%s: error from %s", t->name, err_layer);

    err_reset();
    t->free(keep + 16);
    CHECKF(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 1, "%s: interior free raised %lu", t->name,
           err_total());
    err_reset();
    t->free((void *)((uintptr_t)keep & ~(uintptr_t)(t->slab - 1))); /* the slab's descriptor */
    CHECKF(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 1, "%s: descriptor free raised %lu", t->name,
           err_total());
    err_reset();
    t->free_sized(keep, 65);
    CHECKF(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 1, "%s: oversized sized free raised %lu", t->name,
           err_total());
    size_t usable = 0;
    const char *owner = "";
    CHECKF(!t->getmeta(keep + 16, &usable, &owner), "%s: getmeta of an interior pointer", t->name);
    CHECKF(check_verify(keep, 64, 3), "%s: the ignored frees damaged the object", t->name);
    err_reset();
    t->free_sized(keep, 64);
    CHECK(err_total() == 0 && t->fake_bad_frees() == 0);
}
static void errors(void)
{
    for (size_t i = 0; i < sizeof policy_insts / sizeof *policy_insts; i++)
        errors_one(policy_insts[i]);
}

static void resize_and_above_max_one(const inst_t *t)
{
    void *p = t->alloc(100, 0);
    size_t usable = 0;
    const char *owner = "";
    CHECK(p && t->getmeta(p, &usable, &owner));
    CHECKF(t->resize(p, usable) && t->resize(p, 1) && !t->resize(p, usable + 1), "%s: resize in class %zu", t->name,
           usable);
    t->free(p);

    unsigned long allocs = t->fake_allocs(), frees = t->fake_frees();
    void *big = t->alloc(t->max + 1, 0);
    CHECKF(big && t->fake_allocs() == allocs + 1, "%s: %zu B not passed to next", t->name, t->max + 1);
    CHECKF(t->getmeta(big, &usable, &owner) && !strcmp(owner, t->fake_name) && usable == t->max + 1,
           "%s: big block owner %s", t->name, owner);
    CHECK(t->resize(big, t->max) && !t->resize(big, t->max + 2)); /* answered by the fake */
    t->free(big);
    CHECKF(t->fake_frees() == frees + 1 && t->fake_bad_frees() == 0, "%s: big free not passed on", t->name);
}
static void resize_and_above_max(void)
{
    err_reset();
    for (size_t i = 0; i < sizeof policy_insts / sizeof *policy_insts; i++)
        resize_and_above_max_one(policy_insts[i]);
    CHECK(err_total() == 0);
}

static void out_of_memory(void)
{
    err_reset();
    errno = 0;
    fk_oom_obj.limit_bytes = 1;
    sm_mctx_t c = sm_mctx_alloc(64, 0, 0);
    CHECK(sl_oom_alloc(&c) == NULL && c.ptr == NULL && errno == ENOMEM);

    /* room for a slab but not for the page-map leaf: the slab must go back */
    errno = 0;
    fk_oom_obj.limit_bytes = 65536;
    c = sm_mctx_alloc(64, 0, 0);
    CHECK(sl_oom_alloc(&c) == NULL && errno == ENOMEM);
    CHECKF(fk_oom_obj.live_blocks == 0 && fk_oom_obj.allocs == fk_oom_obj.frees, "%zu blocks leaked",
           fk_oom_obj.live_blocks);

    /* Two slabs of 1 KiB objects (64 each: their descriptors live outside them) with no limit,
     * then the next layer gives nothing more: the third slab fails. The limit is set from what the
     * fake holds rather than from a sum of map nodes, because how many nodes the owner and
     * descriptor maps need depends on where the slabs land (two slabs 256 MiB apart under ASan's
     * allocator need a second descriptor-map leaf). */
    fk_oom_obj.limit_bytes = 0;
    enum { MAX = 1000, PER_SLAB = 64 };
    static void *objs[MAX + 2];
    int n = 0;
    errno = 0;
    for (; n < MAX; n++) {
        if (n == 2 * PER_SLAB)
            fk_oom_obj.limit_bytes = fk_oom_obj.live_bytes;
        c = sm_mctx_alloc(1024, 0, 0);
        if (!(objs[n] = sl_oom_alloc(&c)))
            break;
        check_fill(objs[n], 1024, (unsigned)n);
    }
    CHECKF(n == 2 * PER_SLAB && errno == ENOMEM, "%d objects before OOM (expected %d), errno %d", n,
           2 * PER_SLAB, errno);
    /* a free makes room again without the next layer */
    sm_mctx_t f = sm_mctx_block(objs[n - 1], 0, 0);
    sl_oom_free(&f);
    c = sm_mctx_alloc(1000, 0, 0);
    CHECK((objs[n - 1] = sl_oom_alloc(&c)) != NULL);
    check_fill(objs[n - 1], 1024, (unsigned)(n - 1));
    /* and more memory below makes it grow again */
    fk_oom_obj.limit_bytes = 0;
    c = sm_mctx_alloc(1024, 0, 0);
    CHECK((objs[n] = sl_oom_alloc(&c)) != NULL);
    check_fill(objs[n], 1024, (unsigned)n);
    for (int i = 0; i <= n; i++) {
        CHECKF(check_verify(objs[i], 1024, (unsigned)i), "object %d overwritten", i);
        f = sm_mctx_block(objs[i], 0, 0);
        sl_oom_free(&f);
    }
    CHECK(err_total() == 0 && fk_oom_obj.bad_frees == 0);
}

/* Cross-thread frees: two producer/consumer pairs; producers allocate, consumers verify and free. */
enum { RING = 256, PER_PRODUCER = 60000 };
typedef struct {
    const inst_t *t;
    void *slot[RING];
    size_t size[RING];
    unsigned head, tail; /* producer writes head, consumer writes tail */
    unsigned long bad;
} pair_t;

static void *producer(void *arg)
{
    pair_t *q = arg;
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < PER_PRODUCER; i++) {
        size_t size = random_size(&seed, 4096);
        unsigned char *p = q->t->alloc(size, 0);
        if (!p) {
            __atomic_add_fetch(&q->bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        size_t n = size < 64 ? size : 64;
        check_fill(p, n, (unsigned)size);
        if (i % 4 == 0) { /* some objects die where they were born */
            if (!check_verify(p, n, (unsigned)size))
                __atomic_add_fetch(&q->bad, 1, __ATOMIC_RELAXED);
            q->t->free(p);
            continue;
        }
        unsigned h = q->head;
        while (h - __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE) == RING)
            sched_yield();
        q->slot[h % RING] = p;
        q->size[h % RING] = size;
        __atomic_store_n(&q->head, h + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pair_t *q = arg;
    unsigned expected = PER_PRODUCER - (PER_PRODUCER + 3) / 4;
    for (unsigned got = 0; got < expected;) {
        unsigned t = q->tail;
        unsigned h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        if (t == h) {
            sched_yield();
            continue;
        }
        for (; t != h; t++, got++) {
            unsigned char *p = q->slot[t % RING];
            size_t size = q->size[t % RING];
            if (!check_verify(p, size < 64 ? size : 64, (unsigned)size))
                __atomic_add_fetch(&q->bad, 1, __ATOMIC_RELAXED);
            q->t->free(p);
        }
        __atomic_store_n(&q->tail, t, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void stress(const inst_t *t, unsigned shards)
{
    err_reset();
    static pair_t pairs[2];
    pthread_t th[4];
    for (int i = 0; i < 2; i++) {
        memset(&pairs[i], 0, sizeof pairs[i]);
        pairs[i].t = t;
        pthread_create(&th[2 * i], NULL, producer, &pairs[i]);
        pthread_create(&th[2 * i + 1], NULL, consumer, &pairs[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECKF(pairs[0].bad + pairs[1].bad == 0, "%s: %lu failed allocations or damaged objects", t->name,
           pairs[0].bad + pairs[1].bad);
    CHECKF(err_total() == 0 && t->fake_bad_frees() == 0, "%s: %lu errors raised", t->name, err_total());
    /* everything was freed: at most one empty slab per class (per shard) is left (64 KiB slabs here) */
    CHECKF(t->fake_blocks_sized(t->slab) <= t->classes * shards, "%s: %zu slabs left below", t->name,
           t->fake_blocks_sized(t->slab));
}
static void stress_mutex(void) { stress(&sl_mx_inst, 1); }
static void stress_spinlock(void) { stress(&sl_sp_inst, 1); }

/* ---- batch interface (for a thread cache above) ---- */

/* alloc_batch: distinct, aligned objects of the right class, across several slabs (new slabs
 * taken within the one call); partial results on OOM; refusals for what is not a class request. */
static void batch_alloc(void)
{
    err_reset();
    enum { N = 2500 }; /* 64 B objects: more than two 64 KiB slabs hold */
    static void *objs[N];
    sm_mctx_t c = sm_mctx_alloc(60, 0, 0);
    unsigned long allocs = fk_sp_obj.allocs;
    unsigned got = sl_sp_alloc_batch(&c, objs, N);
    CHECKF(got == N, "got %u of %u", got, (unsigned)N);
    CHECKF(fk_sp_obj.allocs - allocs >= 2, "no slab taken from the next layer");
    for (unsigned i = 0; i < got; i++) {
        size_t usable = 0;
        const char *owner = "";
        CHECKF(sl_sp_inst.getmeta(objs[i], &usable, &owner) && usable == 64 && !strcmp(owner, "sl_sp"),
               "object %u: usable %zu owner %s", i, usable, owner);
        CHECK(sm_ptr_aligned(objs[i], 16));
        check_fill(objs[i], 64, i);
    }
    /* distinct and non-overlapping */
    live_t *v = calloc(got, sizeof *v);
    for (unsigned i = 0; i < got; i++)
        v[i] = (live_t){ objs[i], 64, 64 };
    qsort(v, got, sizeof *v, by_address);
    for (unsigned i = 1; i < got; i++)
        CHECKF(v[i - 1].p + 64 <= v[i].p, "objects %p and %p overlap", (void *)v[i - 1].p, (void *)v[i].p);
    free(v);
    for (unsigned i = 0; i < got; i++)
        CHECKF(check_verify(objs[i], 64, i), "object %u overwritten", i);
    sl_sp_free_batch(objs, got);
    CHECK(err_total() == 0 && fk_sp_obj.bad_frees == 0);

    /* not a class request: refused with EINVAL, nothing taken */
    errno = 0;
    c = sm_mctx_alloc(64, 64, 0);
    CHECK(sl_sp_alloc_batch(&c, objs, 4) == 0 && errno == EINVAL);
    errno = 0;
    c = sm_mctx_alloc(sl_sp_inst.max + 1, 0, 0);
    CHECK(sl_sp_alloc_batch(&c, objs, 4) == 0 && errno == EINVAL);

    /* out of memory: a partial batch, then 0 with ENOMEM; then recovery */
    size_t limit_before = fk_oom_obj.limit_bytes;
    fk_oom_obj.limit_bytes = fk_oom_obj.live_bytes + 65536 + SM_PAGEMAP2_LEAF_BYTES; /* a slab (and a map leaf) */
    c = sm_mctx_alloc(2048, 0, 0);
    void *first = NULL;
    if (sl_oom_alloc(&c)) /* make sure the map leaf exists, then give the object back */
        first = c.ptr;
    if (first) {
        sm_mctx_t f = sm_mctx_block(first, 0, 0);
        sl_oom_free(&f);
    }
    fk_oom_obj.limit_bytes = fk_oom_obj.live_bytes; /* the kept slab only */
    c = sm_mctx_alloc(2048, 0, 0);
    errno = 0;
    got = sl_oom_alloc_batch(&c, objs, N);
    CHECKF(got > 0 && got < N, "partial batch: got %u", got);
    errno = 0;
    CHECKF(sl_oom_alloc_batch(&c, objs + got, N - got) == 0 && errno == ENOMEM, "exhausted: errno %d", errno);
    fk_oom_obj.limit_bytes = limit_before;
    unsigned more = sl_oom_alloc_batch(&c, objs + got, 8);
    CHECKF(more == 8, "after more memory: got %u", more);
    sl_oom_free_batch(objs, got + more);
    CHECK(err_total() == 0 && fk_oom_obj.bad_frees == 0);
}

/* alloc_batch takes a bitmap word's objects at a time: batches that start and end inside words,
 * and holes left by single frees, still give distinct objects of the class, every one of which
 * frees cleanly (a miscount of a slab's free objects would show up as a double free or a slab
 * released under a live object). */
static void batch_alloc_words(void)
{
    err_reset();
    enum { N = 1500 };
    static void *objs[N];
    sm_mctx_t c = sm_mctx_alloc(48, 0, 0);
    unsigned n = 0;
    for (unsigned chunk = 1; n < N; chunk = chunk % 13 + 1) {
        unsigned want = chunk < N - n ? chunk : N - n;
        unsigned got = sl_sp_alloc_batch(&c, objs + n, want);
        CHECKF(got == want, "got %u of %u", got, want);
        n += got;
    }
    for (unsigned i = 0; i < n; i += 3) { /* holes in every word */
        sm_mctx_t f = sm_mctx_block(objs[i], 0, 0);
        sl_sp_free(&f);
    }
    for (unsigned i = 0; i < n; i += 3) /* the holes, taken back one batch of one at a time */
        CHECK(sl_sp_alloc_batch(&c, objs + i, 1) == 1);
    for (unsigned i = 0; i < n; i++)
        check_fill(objs[i], 48, i);
    live_t *v = calloc(n, sizeof *v);
    for (unsigned i = 0; i < n; i++)
        v[i] = (live_t){ objs[i], 48, 48 };
    qsort(v, n, sizeof *v, by_address);
    for (unsigned i = 1; i < n; i++)
        CHECKF(v[i - 1].p + 48 <= v[i].p, "objects %p and %p overlap", (void *)v[i - 1].p, (void *)v[i].p);
    free(v);
    for (unsigned i = 0; i < n; i++)
        CHECKF(check_verify(objs[i], 48, i), "object %u overwritten", i);
    sl_sp_free_batch(objs, n);
    CHECKF(err_total() == 0, "%lu errors", err_total());
}

/* free_batch: runs of one class, mixed classes, foreign blocks passed on, every block validated
 * (double and interior frees reported once each and ignored), emptied slabs go back. */
static void batch_free(void)
{
    err_reset();
    const inst_t *t = &sl_tc_inst;
    size_t base = t->fake_blocks_sized(t->slab);
    enum { N = 3000 };
    static void *objs[N + 8];
    static const size_t sizes[] = { 16, 100, 256, 3000 };
    unsigned n = 0;
    for (unsigned round = 0; round < N / 4; round++)
        for (unsigned k = 0; k < 4; k++) {
            objs[n] = t->alloc(sizes[k], 0);
            check_fill(objs[n], sizes[k], n);
            n++;
        }
    /* a foreign block (served by the fake) in the middle */
    void *big = t->alloc(t->max + 1, 0);
    CHECK(big != NULL);
    objs[n++] = big;
    for (unsigned i = 0; i + 1 < n; i++)
        CHECKF(check_verify(objs[i], sizes[i % 4], i), "object %u overwritten", i);
    unsigned long fake_frees = t->fake_frees();
    /* first half interleaved (runs of one), second half sorted by class (long runs) */
    unsigned half = n / 2;
    sl_tc_free_batch(objs, half);
    static void *sorted[N + 8];
    unsigned m = 0;
    for (unsigned k = 0; k < 4; k++)
        for (unsigned i = half; i < n; i++)
            if (objs[i] == big ? k == 3 : i % 4 == k)
                sorted[m++] = objs[i];
    sl_tc_free_batch(sorted, m);
    CHECKF(err_total() == 0, "%lu errors on valid frees", err_total());
    CHECKF(t->fake_frees() > fake_frees, "the foreign block was not passed on");
    CHECKF(t->fake_blocks_sized(t->slab) <= base + 4, "%zu slabs left, base %zu", t->fake_blocks_sized(t->slab),
           base);
    CHECK(t->fake_bad_frees() == 0);

    /* invalid blocks inside a run: each reported once, the valid ones around them freed */
    void *a = t->alloc(48, 0), *b = t->alloc(48, 0), *d = t->alloc(48, 0), *e = t->alloc(48, 0);
    t->free(b);
    void *bad[] = { a, b, (char *)d + 16, d, b, e };
    err_reset();
    sl_tc_free_batch(bad, 6);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 2 && err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 3,
           "double %lu invalid %lu", err_counts[SM_ERR_DOUBLE_FREE], err_counts[SM_ERR_INVALID_FREE]);
    err_reset();
    t->free(a); /* all four are free now: each of these is a double free */
    t->free(d);
    t->free(e);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 3, "a, d, e were not freed by the batch");
}

/* The page-map word carries the class and the slab's first object, so block_class and getmeta (a
 * thread cache's free) answer without loading the descriptor. For every class: the word of an
 * object's first and last byte (another granule in the larger slabs) names the class, a first
 * object at or below the object, a whole number of objects before it, and the slab (aligned, below
 * the first object); getmeta's usable size is the class size; block_class names the class for the
 * object start and class_count for every other byte of the object (the exact divisibility test),
 * for the byte before the first object and for an address 2^48 above a valid one. */
#define MAP_WORD_CASE(SL, SLAB)                                                                      \
    static void SL##_map_word(void)                                                                \
    {                                                                                              \
        const inst_t *t = &SL##_inst;                                                              \
        for (unsigned cls = 0; cls < t->classes && t->class_size(cls) <= t->max; cls++) {          \
            size_t size = t->class_size(cls), usable = 0;                                          \
            const char *owner = NULL;                                                              \
            char *a = t->alloc(size, 0);                                                           \
            CHECKF(a != NULL, "%s: class %u", t->name, cls);                                       \
            if (!a)                                                                                \
                return;                                                                            \
            uintptr_t w = SL##_lookup(a), last = SL##_lookup(a + size - 1);                        \
            const struct SL##_geo *g = &SL##_geometry[cls];                                         \
            char *slab = (char *)SL##_word_base(w, g), *first = (char *)SL##_word_first(w);         \
            const struct SL##_slab *desc = SL##_word_slab(w, g);                                    \
            CHECKF(w == last, "%s: class %u: words %#lx and %#lx", t->name, cls, (unsigned long)w,   \
                   (unsigned long)last);                                                           \
            CHECKF(SL##_word_cls(w) == cls, "%s: class %u: word names class %u", t->name, cls,       \
                   SL##_word_cls(w));                                                              \
            CHECKF(first <= a && (size_t)(a - first) % size == 0, "%s: class %u: first %p, object %p", \
                   t->name, cls, (void *)first, (void *)a);                                        \
            CHECKF(sm_ptr_aligned(slab, SLAB) && (g->offslab ? slab == first : slab < first),     \
                   "%s: class %u: slab %p, object %p", t->name, cls, (void *)slab, (void *)a);      \
            /* the descriptor: at the slab's start, or (a class whose objects fill the slab, at     \
             * least 1 KiB: the powers of two) outside it, naming the slab's objects */             \
            CHECKF(desc && desc->objects == first && desc->size == size &&                          \
                       (g->offslab ? (char *)desc < slab || (char *)desc >= slab + ((size_t)1 << g->slab_shift) \
                                   : (char *)desc == slab) &&                                       \
                       g->offslab == (size >= 1024 && ((size_t)1 << g->slab_shift) % size == 0 &&   \
                                      ((size_t)1 << g->slab_shift) / size <= 64),                   \
                   "%s: class %u: descriptor %p, slab %p, offslab %u", t->name, cls, (const void *)desc, \
                   (void *)slab, (unsigned)g->offslab);                                            \
            CHECKF(!g->offslab || (size_t)g->nobjs * size == ((size_t)1 << g->slab_shift),         \
                   "%s: class %u: %u objects of %zu in a slab of %zu", t->name, cls, (unsigned)g->nobjs, \
                   size, (size_t)1 << g->slab_shift);                                              \
            /* the slab's colour: 0-7 lines by its address for classes aligned to <= 64 B, else 0; \
             * objects keep their alignment and the last one still fits */                         \
            size_t colour = (size_t)(first - slab) - g->offset;                                    \
            size_t want_colour = g->coloured ? (((uintptr_t)slab >> g->slab_shift) & 7) * 64 : 0;     \
            CHECKF(colour == want_colour && (g->coloured == ((size & -size) <= 64)) &&              \
                       sm_ptr_aligned(first, min_size(size & -size, 4096)) &&                       \
                       first + (size_t)g->nobjs * size <= slab + ((size_t)1 << g->slab_shift),      \
                   "%s: class %u: colour %zu, want %zu, %u objects", t->name, cls, colour,          \
                   want_colour, (unsigned)g->nobjs);                                               \
            CHECKF(t->getmeta(a, &usable, &owner) && usable == size && !strcmp(owner, t->name),    \
                   "%s: class %u: getmeta usable %zu, want %zu", t->name, cls, usable, size);      \
            CHECKF(!t->getmeta(a + 8, &usable, &owner), "%s: class %u: interior pointer accepted",  \
                   t->name, cls);                                                                  \
            CHECKF(SL##_block_class(a) == cls, "%s: class %u: block_class %u", t->name, cls,         \
                   SL##_block_class(a));                                                           \
            CHECKF(SL##_block_slot(a) == cls * 16, "%s: class %u: block_slot %u", t->name, cls,      \
                   SL##_block_slot(a));                                                            \
            unsigned wrong = 0;                                                                    \
            for (size_t off = 1; off < size; off++)                                                \
                wrong += SL##_block_class(a + off) != SL##_class_count;                            \
            wrong += SL##_block_class(first - 1) != SL##_class_count;                              \
            wrong += SL##_block_class((char *)((uintptr_t)a + ((uintptr_t)1 << 48))) != SL##_class_count; \
            wrong += SL##_block_slot(a + 16) != SL##_class_count * 16 && size > 16;                \
            CHECKF(wrong == 0, "%s: class %u: block_class accepted %u non-starts", t->name, cls, wrong); \
            t->free(a);                                                                            \
        }                                                                                          \
    }
MAP_WORD_CASE(sl_tc, 65536)
MAP_WORD_CASE(sl_lb, 65536)
MAP_WORD_CASE(sl_iv, 16384)
/* free_batch's runs are segments of one slab each, their words taken from the map once per granule:
 * a batch that alternates between two slabs (a segment per block, in sl_iv's classes a slab of
 * several granules), then runs of one slab, frees every object exactly once and gives both slabs
 * back; and a double free right after the block that emptied a slab stops the run there, the
 * emptied slab still going back. SIZE, SIZE2: two classes of the instance not used before. */
#define SEGMENTS_CASE(SL, SIZE, SIZE2)                                                               \
    /* Allocates objects of `size` until two slabs are full of them: objs[0..*n), the first slab's  \
     * in a[], the second's in b[]; returns the objects a slab holds (0: not reached). */           \
    static unsigned SL##_two_slabs(size_t size, void **objs, unsigned *n, void **a, void **b)       \
    {                                                                                              \
        enum { MAX = 512 };                                                                        \
        unsigned na = 0, nb = 0, nobjs = 0;                                                        \
        uintptr_t wa = 0, wb = 0;                                                                  \
        for (*n = 0; *n < MAX && (!nobjs || na < nobjs || nb < nobjs);) {                          \
            void *p = objs[(*n)++] = SL##_inst.alloc(size, 0);                                     \
            CHECK(p != NULL);                                                                      \
            if (!p)                                                                                \
                return 0;                                                                          \
            check_fill(p, size, *n);                                                               \
            uintptr_t w = SL##_lookup(p);                                                          \
            nobjs = SL##_geometry[SL##_word_cls(w)].nobjs;                                         \
            if (!wa || w == wa)                                                                    \
                wa = w, a[na++] = p;                                                               \
            else if (!wb || w == wb)                                                               \
                wb = w, b[nb++] = p;                                                               \
        }                                                                                          \
        CHECKF(na == nobjs && nb == nobjs, "%s: %u and %u objects of two slabs of %u", SL##_inst.name, na, \
               nb, nobjs);                                                                         \
        return na == nobjs && nb == nobjs ? nobjs : 0;                                             \
    }                                                                                              \
    static void SL##_batch_segments(void)                                                          \
    {                                                                                              \
        const inst_t *t = &SL##_inst;                                                              \
        static void *objs[512], *a[512], *b[512], *batch[512];                                     \
        unsigned n, m = 0;                                                                         \
        size_t base = t->fake_blocks_sized(t->slab);                                               \
        unsigned nobjs = SL##_two_slabs(SIZE, objs, &n, a, b);                                     \
        if (!nobjs)                                                                                \
            return;                                                                                \
        for (unsigned i = 0; i < nobjs / 2; i++)                                                   \
            batch[m++] = a[i], batch[m++] = b[nobjs - 1 - i];                                      \
        for (unsigned i = nobjs / 2; i < nobjs; i++)                                               \
            batch[m++] = a[i];                                                                     \
        for (unsigned i = nobjs / 2; i < nobjs; i++)                                               \
            batch[m++] = b[nobjs - 1 - i];                                                         \
        for (unsigned i = 0; i < n; i++) { /* objects of a third slab */                           \
            uintptr_t w = SL##_lookup(objs[i]);                                                    \
            if (w != SL##_lookup(a[0]) && w != SL##_lookup(b[0]))                                  \
                t->free(objs[i]);                                                                  \
        }                                                                                          \
        err_reset();                                                                               \
        SL##_free_batch(batch, m);                                                                 \
        CHECKF(err_total() == 0, "%s: %lu errors freeing two slabs in segments", t->name, err_total()); \
        /* both slabs empty (one may be kept): every object of both was freed */                   \
        CHECKF(t->fake_blocks_sized(t->slab) <= base + 1, "%s: %zu slabs left, base %zu", t->name,    \
               t->fake_blocks_sized(t->slab), base);                                               \
        /* SIZE2: slab a emptied (the class keeps it), slab b down to one live object; then b's     \
         * last object and one of its free ones in one batch */                                    \
        if (!(nobjs = SL##_two_slabs(SIZE2, objs, &n, a, b)))                                      \
            return;                                                                                \
        for (unsigned i = 0; i < n; i++)                                                           \
            if (objs[i] != b[nobjs - 1])                                                           \
                t->free(objs[i]);                                                                  \
        size_t before = t->fake_blocks_sized(t->slab);                                             \
        void *last[2] = { b[nobjs - 1], b[0] };                                                    \
        err_reset();                                                                               \
        SL##_free_batch(last, 2);                                                                  \
        CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%s: %lu double frees, %lu errors", \
               t->name, err_counts[SM_ERR_DOUBLE_FREE], err_total());                              \
        CHECKF(t->fake_blocks_sized(t->slab) + 1 == before, "%s: the slab emptied before a double free " \
               "was not given back (%zu slabs, %zu before)", t->name, t->fake_blocks_sized(t->slab), before); \
    }
SEGMENTS_CASE(sl_tc, 256, 512)
SEGMENTS_CASE(sl_iv, 3000, 1000)
static void batch_free_segments(void)
{
    sl_tc_batch_segments();
    sl_iv_batch_segments();
}

static int ptr_order(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t)*(void *const *)x, b = (uintptr_t)*(void *const *)y;
    return a < b ? -1 : a > b;
}

/* A run keeps its slab's bitmap word in a register from one object to the next: a batch of one
 * slab's objects in address order, up and then down, each run crossing words, into a slab that stays
 * in use (its first object live). Allocating as many again hands out exactly the objects freed. */
static void batch_free_words(void)
{
    const inst_t *t = &sl_tc_inst;
    static void *objs[512], *a[512], *b[512], *batch[512], *again[512];
    unsigned n, m = 0, nobjs = sl_tc_two_slabs(384, objs, &n, a, b);
    if (!nobjs)
        return;
    CHECKF(nobjs > 128, "%u objects a slab: the runs cross fewer than three words", nobjs);
    unsigned top = nobjs - 1 < 240 ? nobjs - 1 : 240, mid = top / 2;
    for (unsigned i = 1; i <= mid; i++)
        batch[m++] = a[i];
    for (unsigned i = top; i > mid; i--)
        batch[m++] = a[i];
    err_reset();
    sl_tc_free_batch(batch, m);
    CHECKF(err_total() == 0, "%lu errors on valid frees", err_total());
    for (unsigned i = 0; i < m; i++)
        CHECK((again[i] = t->alloc(384, 0)) != NULL);
    qsort(batch, m, sizeof *batch, ptr_order);
    qsort(again, m, sizeof *again, ptr_order);
    unsigned same = 0;
    for (unsigned i = 0; i < m; i++)
        same += batch[i] == again[i];
    CHECKF(same == m, "%u of the %u objects freed were handed out again", same, m);
    for (unsigned i = 0; i < n; i++)
        t->free(objs[i]);
    CHECKF(err_total() == 0, "%lu errors freeing the two slabs", err_total());
}

/* Slabs of a coloured class take different colours: many slabs of 48 B objects, at least two. */
static void colours_vary(void)
{
    enum { N = 12000 }; /* 48 B objects: about 1350 per 64 KiB slab, so about 9 slabs */
    static void *objs[N];
    unsigned seen = 0;
    for (int i = 0; i < N; i++) {
        objs[i] = sl_tc_inst.alloc(48, 0);
        CHECK(objs[i] != NULL);
        uintptr_t w = sl_tc_lookup(objs[i]);
        const struct sl_tc_geo *g = &sl_tc_geometry[sl_tc_word_cls(w)];
        char *slab = (char *)sl_tc_word_slab(w, g), *first = (char *)sl_tc_word_first(w);
        seen |= 1u << (((size_t)(first - slab) - g->offset) / 64);
    }
    CHECKF(__builtin_popcount(seen) >= 2, "one colour for every slab (mask %#x)", seen);
    for (int i = 0; i < N; i++)
        sl_tc_inst.free(objs[i]);
}

static void map_word(void)
{
    err_reset();
    sl_tc_map_word();
    sl_lb_map_word();
    sl_iv_map_word();
    CHECK(err_total() == 0);
}

/* ---- shards (SM_OPT_SHARDS 2: the shard is the CPU's parity) ---- */

/* Runs body(arg) on a thread pinned to cpu and waits for it. */
static void on_cpu(int cpu, void (*body)(void *), void *arg)
{
    CHECKF(run_on_cpu(cpu, body, arg), "could not run on CPU %d", cpu);
}

typedef struct {
    unsigned from, n; /* sh_take fills objs[from..n) */
    size_t size; /* each case its own class, so none starts with slabs another case left */
    void *objs[4096];
} sh_batch_t;
static void sh_take(void *arg)
{
    sh_batch_t *b = arg;
    for (unsigned i = b->from; i < b->n; i++) {
        sm_mctx_t c = sm_mctx_alloc(b->size, 0, 0);
        b->objs[i] = sl_sh_alloc(&c);
        if (b->objs[i])
            check_fill(b->objs[i], b->size, i);
    }
}
static void sh_give(void *arg)
{
    sh_batch_t *b = arg;
    for (unsigned i = 0; i < b->n; i++)
        if (b->objs[i]) {
            CHECKF(check_verify(b->objs[i], b->size, i), "object %u damaged", i);
            sm_mctx_t c = sm_mctx_block(b->objs[i], 0, 0);
            sl_sh_free(&c);
        }
}
static uintptr_t slab_of(const void *p) { return (uintptr_t)p & ~(uintptr_t)0xffff; }
/* Whether p's owner word names the shard of `mine`'s CPU (no foreign bit for it) and not that of
 * `other`'s (a foreign bit for a cache there): what a thread cache's free tests (slab_lk/map.h). */
static bool word_names_shard(const void *p, int mine, int other)
{
    sm_mctx_t here = sm_mctx_alloc(64, 0, 0), there = sm_mctx_alloc(64, 0, 0);
    here.cpu = mine;
    there.cpu = other;
    uintptr_t w = sl_sh_block_owner(p);
    return w && !(w & sl_sh_owner_foreign(&here)) && (w & sl_sh_owner_foreign(&there)) &&
           sl_sh_owner_slot(p, w) < ((unsigned)sl_sh_class_count << 4);
}
static unsigned sh_nobjs(size_t size) { return sl_sh_geometry[sm_sizeclass_tc_size_to_class(size)].nobjs; }

/* Threads on CPUs of the two shards, both holding their objects, never share a slab; objects
 * freed by the other shard's thread go back to their own slabs, intact. */
static void shards_by_cpu(void)
{
    int cpu[2];
    if (!cpus_of_both_parities(cpu)) {
        check_skip("shards_by_cpu", "needs two CPUs of different parity");
        return;
    }
    err_reset();
    static sh_batch_t a, b;
    a.n = b.n = 300;
    a.size = b.size = 64;
    on_cpu(cpu[0], sh_take, &a);
    on_cpu(cpu[1], sh_take, &b);
    for (unsigned i = 0; i < a.n; i++)
        for (unsigned j = 0; j < b.n; j++)
            if (a.objs[i] && b.objs[j] && slab_of(a.objs[i]) == slab_of(b.objs[j])) {
                CHECKF(0, "object %u of CPU %d and %u of CPU %d share a slab", i, cpu[0], j, cpu[1]);
                i = a.n;
                break;
            }
    unsigned unnamed = 0;
    for (unsigned i = 0; i < a.n; i++)
        unnamed += a.objs[i] && !word_names_shard(a.objs[i], cpu[0], cpu[1]);
    for (unsigned i = 0; i < b.n; i++)
        unnamed += b.objs[i] && !word_names_shard(b.objs[i], cpu[1], cpu[0]);
    CHECKF(unnamed == 0, "%u objects' owner words do not name their shard", unnamed);
    on_cpu(cpu[1], sh_give, &a); /* each frees the other's */
    on_cpu(cpu[0], sh_give, &b);
    CHECK(err_total() == 0 && fk_sh_obj.bad_frees == 0);
}

/* A shard out of slabs takes another shard's second partial slab instead of mapping one, and
 * frees of that slab's objects, from either shard, then land under its new shard. A shard whose
 * only partial slab is the one it allocates from is left alone. */
static void shard_steal(void)
{
    int cpu[2];
    if (!cpus_of_both_parities(cpu)) {
        check_skip("shard_steal", "needs two CPUs of different parity");
        return;
    }
    err_reset();
    static sh_batch_t a, b, one;
    a.size = b.size = one.size = 96;
    /* shard 0: exactly three full slabs, then one object freed in each of the first two, so it has
     * two partial slabs (the class's geometry exists once its first slab does) */
    a.n = 1;
    on_cpu(cpu[0], sh_take, &a);
    unsigned per = sh_nobjs(96);
    CHECK(per > 0 && 3 * per <= sizeof a.objs / sizeof *a.objs);
    a.from = 1;
    a.n = 3 * per;
    on_cpu(cpu[0], sh_take, &a);
    a.from = 0;
    uintptr_t s0 = slab_of(a.objs[0]), s1 = slab_of(a.objs[per]), s2 = slab_of(a.objs[2 * per]);
    CHECK(s0 != s1 && s1 != s2 && s0 != s2);
    sh_batch_t *holes = &one;
    holes->n = 2;
    holes->objs[0] = a.objs[0];
    holes->objs[1] = a.objs[per];
    check_fill(holes->objs[0], 96, 0);
    check_fill(holes->objs[1], 96, 1);
    on_cpu(cpu[0], sh_give, holes);
    a.objs[0] = a.objs[per] = NULL;
    /* shard 1 has nothing: its first object comes from shard 0's second partial slab */
    unsigned long maps = fk_sh_obj.allocs;
    b.n = 1;
    on_cpu(cpu[1], sh_take, &b);
    CHECKF(fk_sh_obj.allocs == maps, "shard 1 mapped %lu new blocks instead of stealing", fk_sh_obj.allocs - maps);
    CHECKF(slab_of(b.objs[0]) == s0 || slab_of(b.objs[0]) == s1, "shard 1's object %p is in no slab of shard 0", b.objs[0]);
    CHECKF(word_names_shard(b.objs[0], cpu[1], cpu[0]), "the stolen slab's owner word still names shard 0");
    /* shard 0 keeps allocating from the slab it had as its head; that slab was not taken */
    static sh_batch_t a2;
    a2.n = 1;
    a2.size = 96;
    on_cpu(cpu[0], sh_take, &a2);
    CHECKF(fk_sh_obj.allocs == maps, "shard 0 lost its last partial slab (%lu new blocks)", fk_sh_obj.allocs - maps);
    CHECKF(slab_of(a2.objs[0]) != slab_of(b.objs[0]), "both shards allocate from slab %p", (void *)slab_of(b.objs[0]));
    /* shard 1, now with one partial slab (full after this) and shard 0 with one: the next slab
     * shard 1 needs is new */
    static sh_batch_t b2;
    b2.n = 2;
    b2.size = 96;
    on_cpu(cpu[1], sh_take, &b2);
    CHECKF(fk_sh_obj.allocs == maps + 1, "shard 1 mapped %lu slabs, want 1 (nothing left to steal)", fk_sh_obj.allocs - maps);
    /* frees of the stolen slab's objects from both CPUs; everything verified on the way */
    on_cpu(cpu[0], sh_give, &b);
    on_cpu(cpu[1], sh_give, &a);
    on_cpu(cpu[1], sh_give, &a2);
    on_cpu(cpu[0], sh_give, &b2);
    CHECK(err_total() == 0 && fk_sh_obj.bad_frees == 0);
    CHECKF(sl_sh_t_blocks(65536) <= 2 * sm_sizeclass_tc_count, "%zu slabs left", sl_sh_t_blocks(65536));
}

static void stress_shards(void) { stress(&sl_sh_inst, 2); }

/* SM_OPT_SHARD_MAX: objects of a class above it come from the same slab on both CPUs, those of a
 * class below it do not. */
typedef struct { size_t size; void *objs[2]; } sm_pair_t;
static void sm_take(void *arg)
{
    sm_pair_t *t = arg;
    for (int i = 0; i < 2; i++) {
        sm_mctx_t c = sm_mctx_alloc(t->size, 0, 0);
        t->objs[i] = sl_sm_alloc(&c);
    }
}
static void shard_max(void)
{
    int cpu[2];
    if (!cpus_of_both_parities(cpu)) {
        check_skip("shard_max", "needs two CPUs of different parity");
        return;
    }
    err_reset();
    static const size_t sizes[] = { 1024, 64 };
    for (int k = 0; k < 2; k++) {
        sm_pair_t a = { sizes[k], { 0 } }, b = { sizes[k], { 0 } };
        on_cpu(cpu[0], sm_take, &a);
        on_cpu(cpu[1], sm_take, &b);
        CHECK(a.objs[0] && a.objs[1] && b.objs[0] && b.objs[1]);
        bool shared = slab_of(a.objs[0]) == slab_of(b.objs[0]);
        CHECKF(shared == (sizes[k] > 512), "%zu B objects of CPUs %d and %d: slabs %p and %p", sizes[k], cpu[0],
               cpu[1], (void *)slab_of(a.objs[0]), (void *)slab_of(b.objs[0]));
        for (int i = 0; i < 2; i++) {
            sm_mctx_t f = sm_mctx_block(a.objs[i], 0, 0), g = sm_mctx_block(b.objs[i], 0, 0);
            sl_sm_free(&f);
            sl_sm_free(&g);
        }
    }
    CHECK(err_total() == 0 && fk_sm_obj.bad_frees == 0);
}

/* The owner map's leaves and the descriptor map's nodes come from the next layer and are counted
 * (core/pagemap.h's SM_PAGEMAP_NODE_ALLOC): a leaf per non-empty root entry, each an 8 MiB block of
 * the fake (which may hold 8 MiB blocks passed through as well), and 32 KiB nodes. */
#define MAP_NODES_ONE(SL, FK)                                                                       \
    do {                                                                                            \
        size_t leaves = 0, held = 0;                                                                \
        for (size_t i = 0; i < sizeof SL##_obj.map / sizeof *SL##_obj.map; i++)                     \
            leaves += SL##_obj.map[i] != NULL;                                                      \
        for (size_t i = 0; i < sizeof SL##_obj.desc_map.root / sizeof *SL##_obj.desc_map.root; i++) \
            if (SL##_obj.desc_map.root[i]) {                                                        \
                leaves++;                                                                           \
                for (size_t j = 0; j < (1u << SM_PAGEMAP_NODE_BITS); j++)                           \
                    leaves += SL##_obj.desc_map.root[i][j] != NULL;                                 \
            }                                                                                       \
        for (size_t i = 0; i < FK##_obj.live_blocks; i++)                                           \
            held += FK##_obj.blocks[i].size == SM_PAGEMAP2_LEAF_BYTES ||                            \
                    FK##_obj.blocks[i].size == SM_PAGEMAP_NODE_BYTES;                               \
        CHECKF(leaves >= 1 && SL##_obj.map_nodes == leaves && held >= leaves,                       \
               #SL ": %zu leaves in the map, %zu counted, %zu held below", leaves, SL##_obj.map_nodes, \
               held);                                                                               \
    } while (0)
static void map_nodes_counted(void)
{
    MAP_NODES_ONE(sl_tc, fk_tc);
    MAP_NODES_ONE(sl_lb, fk_lb);
    MAP_NODES_ONE(sl_iv, fk_iv);
}

static void fork_hooks(void)
{
    /* prepare takes every lock and the fake's; parent releases them all, so allocation works after */
    sl_tc_fork_prepare();
    sl_tc_fork_parent();
    sl_tc_fork_prepare();
    sl_tc_fork_child();
    void *p = sl_tc_inst.alloc(48, 0);
    CHECK(p != NULL && fk_tc_obj.forks == 2);
    sl_tc_inst.free(p);
}

int main(void)
{
    check_begin("slab_lk");
    sm_err_callback_set(on_error);
    CHECK(sl_tc_create() == 0 && sl_lb_create() == 0 && sl_iv_create() == 0);
    RUN_CASE(every_class);
    RUN_CASE(map_word);
    RUN_CASE(colours_vary);
    RUN_CASE(no_overlap);
    RUN_CASE(aligned);
    RUN_CASE(offslab);
    RUN_CASE(hysteresis);
    RUN_CASE(empty_bound);
    RUN_CASE(errors);
    RUN_CASE(resize_and_above_max);
    RUN_CASE(out_of_memory);
    RUN_CASE(stress_mutex);
    RUN_CASE(stress_spinlock);
    RUN_CASE(batch_alloc);
    RUN_CASE(batch_alloc_words);
    RUN_CASE(batch_free);
    RUN_CASE(batch_free_segments);
    RUN_CASE(batch_free_words);
    RUN_CASE(shards_by_cpu);
    RUN_CASE(shard_steal);
    RUN_CASE(stress_shards);
    RUN_CASE(shard_max);
    RUN_CASE(map_nodes_counted);
    RUN_CASE(fork_hooks);
    return check_end();
}
