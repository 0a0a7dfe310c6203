/* Unit test of the retain policies (policies/retain/, slot SM_RETAIN): keep_last and none on their
 * own (what a class keeps, the bound, the eviction order, the counts), then each as slab_lk's slot
 * over the fake next layer: keep_last keeps the last emptied slab of a class and, with
 * SM_OPT_EMPTY_MAX 2, evicts the one kept longest; none gives every empty slab back at once, also
 * under two threads; release(ALL) empties what keep_last kept. */
#include <stdint.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/retain/keep_last.h>
#include <sunmao/policies/retain/none.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"

/* keep_last with SM_OPT_EMPTY_MAX 2 (and the default policy: SM_RETAIN left undefined) */
#define SM_LAYER fk_kl
#include "tests/support/fake_next.h"
#define SM_LAYER sl_kl
#define SM_NEXT fk_kl
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_EMPTY_MAX 2
#include <sunmao/layers/core/slab_lk.h>

/* none */
#define SM_LAYER fk_no
#include "tests/support/fake_next.h"
#define SM_LAYER sl_no
#define SM_NEXT fk_no
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_RETAIN none
#include <sunmao/layers/core/slab_lk.h>

/* none, two shards: a shard out of slabs finds no kept slab to steal */
#define SM_LAYER fk_ns
#include "tests/support/fake_next.h"
#define SM_LAYER sl_ns
#define SM_NEXT fk_ns
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_RETAIN none
#define SM_OPT_SHARDS 2
#include <sunmao/layers/core/slab_lk.h>

static unsigned long errors;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)kind, (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
}

/* ---- the policies alone ---- */

static void keep_last_policy(void)
{
    static sm_retain_keep_last_t r; /* zero: the initial state */
    static sm_retain_keep_last_class_t c[4];
    char blocks[8];
    bool evict = false;
    CHECK(sm_retain_keep_last_count(&r) == 0 && !sm_retain_keep_last_kept(&c[0]));
    CHECK(sm_retain_keep_last_evict_rank(&c[0]) == UINT64_MAX);
    /* a class keeps the first block that empties, not a second */
    CHECK(sm_retain_keep_last_keep(&r, &c[0], &blocks[0], 2, &evict) && !evict);
    CHECK(sm_retain_keep_last_kept(&c[0]) == &blocks[0] && sm_retain_keep_last_peek(&c[0]) == &blocks[0]);
    CHECK(!sm_retain_keep_last_keep(&r, &c[0], &blocks[1], 2, &evict) && !evict);
    CHECK(sm_retain_keep_last_count(&r) == 1);
    /* the second class within the bound, the third over it: evict is asked for */
    CHECK(sm_retain_keep_last_keep(&r, &c[1], &blocks[2], 2, &evict) && !evict);
    CHECK(sm_retain_keep_last_keep(&r, &c[2], &blocks[3], 2, &evict) && evict);
    CHECK(sm_retain_keep_last_count(&r) == 3);
    /* the one kept longest ranks first */
    uint64_t r0 = sm_retain_keep_last_evict_rank(&c[0]), r1 = sm_retain_keep_last_evict_rank(&c[1]),
             r2 = sm_retain_keep_last_evict_rank(&c[2]);
    CHECKF(r0 < r1 && r1 < r2 && r2 < UINT64_MAX, "ranks %llu %llu %llu", (unsigned long long)r0,
           (unsigned long long)r1, (unsigned long long)r2);
    CHECK(sm_retain_keep_last_evict_rank(&c[3]) == UINT64_MAX);
    /* unkeep: the class keeps nothing, ranks last, and may keep again (now the newest) */
    sm_retain_keep_last_unkeep(&r, &c[0]);
    CHECK(!sm_retain_keep_last_kept(&c[0]) && sm_retain_keep_last_count(&r) == 2);
    CHECK(sm_retain_keep_last_evict_rank(&c[0]) == UINT64_MAX);
    evict = false;
    CHECK(sm_retain_keep_last_keep(&r, &c[0], &blocks[4], 2, &evict) && evict);
    CHECK(sm_retain_keep_last_evict_rank(&c[0]) > r2);
    for (int i = 0; i < 3; i++)
        sm_retain_keep_last_unkeep(&r, &c[i]);
    CHECK(sm_retain_keep_last_count(&r) == 0);
}

static void none_policy(void)
{
    static sm_retain_none_t r;
    static sm_retain_none_class_t c;
    char block;
    bool evict = false;
    CHECK(!sm_retain_none_keep(&r, &c, &block, 2, &evict) && !evict);
    CHECK(!sm_retain_none_kept(&c) && !sm_retain_none_peek(&c));
    CHECK(sm_retain_none_count(&r) == 0 && sm_retain_none_evict_rank(&c) == UINT64_MAX);
    sm_retain_none_unkeep(&r, &c);
    CHECK(sm_retain_none_count(&r) == 0);
}

/* ---- as slab_lk's slot ---- */

#define SLAB ((size_t)64 << 10) /* the slab size of these classes; page-map leaves are 8 MiB */
/* FK_slabs(): slabs the fake next layer FK holds; FK_holds(slab): whether it holds that one. */
#define FAKE_HELPERS(FK)                                                                           \
    static size_t FK##_slabs(void)                                                                 \
    {                                                                                              \
        size_t n = 0;                                                                              \
        pthread_mutex_lock(&FK##_obj.lock);                                                        \
        for (size_t i = 0; i < FK##_obj.live_blocks; i++)                                          \
            n += FK##_obj.blocks[i].size == SLAB;                                                  \
        pthread_mutex_unlock(&FK##_obj.lock);                                                      \
        return n;                                                                                  \
    }                                                                                              \
    static SM_UNUSED bool FK##_holds(const void *slab)                                             \
    {                                                                                              \
        bool found = false;                                                                        \
        pthread_mutex_lock(&FK##_obj.lock);                                                        \
        for (size_t i = 0; i < FK##_obj.live_blocks; i++)                                          \
            found |= FK##_obj.blocks[i].ptr == slab;                                               \
        pthread_mutex_unlock(&FK##_obj.lock);                                                      \
        return found;                                                                              \
    }
FAKE_HELPERS(fk_kl)
FAKE_HELPERS(fk_no)
FAKE_HELPERS(fk_ns)
#define SLAB_OF(p) ((void *)((uintptr_t)(p) & ~(uintptr_t)(SLAB - 1)))

#define ALLOC(SL, n) SL##_alloc(&(sm_mctx_t){ (n), SM_MIN_ALIGN, 0, -1, NULL, 0, NULL, 0 })
#define FREE(SL, p)  SL##_free(&(sm_mctx_t){ 0, SM_MIN_ALIGN, 0, -1, (p), 0, NULL, 0 })

/* keep_last, bound 2: four classes emptied in turn keep the two emptied last, the two kept longest
 * went back, first the oldest; a boundary alloc/free pair reaches nothing below; release(ALL) gives
 * the kept ones back. */
static void keep_last_in_slab_lk(void)
{
    static const size_t sizes[] = { 64, 128, 256, 512 };
    void *objs[4], *slabs[4];
    size_t base = fk_kl_slabs();
    for (int i = 0; i < 4; i++) {
        objs[i] = ALLOC(sl_kl, sizes[i]);
        slabs[i] = SLAB_OF(objs[i]);
    }
    CHECK(fk_kl_slabs() == base + 4);
    FREE(sl_kl, objs[0]);
    FREE(sl_kl, objs[1]);
    CHECK(fk_kl_slabs() == base + 4 && sl_kl_obj.retain.count == 2);
    FREE(sl_kl, objs[2]); /* a third kept: the oldest, class 64's, goes */
    CHECK(!fk_kl_holds(slabs[0]) && fk_kl_holds(slabs[1]) && fk_kl_holds(slabs[2]));
    FREE(sl_kl, objs[3]);
    CHECK(!fk_kl_holds(slabs[1]) && fk_kl_holds(slabs[2]) && fk_kl_holds(slabs[3]));
    CHECKF(fk_kl_slabs() == base + 2 && sl_kl_obj.retain.count == 2, "%zu slabs kept",
           fk_kl_slabs() - base);
    /* the kept slab is reused: alloc/free at its boundary takes and gives back nothing */
    unsigned long allocs = fk_kl_obj.allocs, frees = fk_kl_obj.frees;
    for (int i = 0; i < 100; i++) {
        void *p = ALLOC(sl_kl, 512);
        CHECK(SLAB_OF(p) == slabs[3]);
        FREE(sl_kl, p);
    }
    CHECK(fk_kl_obj.allocs == allocs && fk_kl_obj.frees == frees && sl_kl_obj.retain.count == 2);
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    sl_kl_release(&r);
    CHECKF(fk_kl_slabs() == base && r.released == 2 * SLAB && sl_kl_obj.retain.count == 0,
           "after release(ALL): %zu slabs, %zu bytes released", fk_kl_slabs() - base, r.released);
    CHECK(errors == 0 && fk_kl_obj.bad_frees == 0);
}

/* none: a slab goes back the moment its last object is freed, so the boundary pair maps and
 * returns a slab every time; nothing is left to release(ALL). */
static void none_in_slab_lk(void)
{
    size_t base = fk_no_slabs();
    void *a = ALLOC(sl_no, 64), *b = ALLOC(sl_no, 64);
    CHECK(a && b && SLAB_OF(a) == SLAB_OF(b) && fk_no_slabs() == base + 1);
    FREE(sl_no, a);
    CHECK(fk_no_slabs() == base + 1);
    FREE(sl_no, b);
    CHECK(fk_no_slabs() == base);
    unsigned long allocs = fk_no_obj.allocs, frees = fk_no_obj.frees;
    for (int i = 0; i < 10; i++)
        FREE(sl_no, ALLOC(sl_no, 128));
    CHECKF(fk_no_obj.allocs == allocs + 10 && fk_no_obj.frees == frees + 10, "%lu allocs, %lu frees below",
           fk_no_obj.allocs - allocs, fk_no_obj.frees - frees);
    /* batches too: a batch freed whole leaves no slab */
    void *objs[64];
    sm_mctx_t c = sm_mctx_alloc(256, SM_MIN_ALIGN, 0);
    unsigned got = sl_no_alloc_batch(&c, objs, 64);
    CHECK(got == 64 && fk_no_slabs() > base);
    sl_no_free_batch(objs, got);
    CHECK(fk_no_slabs() == base);
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    sl_no_release(&r);
    CHECK(r.released == 0 && errors == 0 && fk_no_obj.bad_frees == 0);
}

/* none under two threads and two shards: after every object is freed, no slab is held. */
static void *none_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    static __thread void *live[512];
    intptr_t bad = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 512; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t n = 16 + (seed >> 16) % 1024;
            live[i] = ALLOC(sl_ns, n);
            if (!live[i])
                bad++;
            else
                *(volatile char *)live[i] = (char)i;
        }
        for (int i = 0; i < 512; i++)
            FREE(sl_ns, live[i]);
    }
    return (void *)bad;
}
static void none_threads(void)
{
    pthread_t th[2];
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, none_worker, (void *)i);
    for (int i = 0; i < 2; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        CHECK(bad == NULL);
    }
    CHECKF(fk_ns_slabs() == 0, "%zu slabs held after every object was freed", fk_ns_slabs());
    CHECK(errors == 0 && fk_ns_obj.bad_frees == 0);
}

int main(void)
{
    check_begin("retain");
    sm_err_callback_set(on_error);
    CHECK(sl_kl_create() == 0 && sl_no_create() == 0 && sl_ns_create() == 0);
    RUN_CASE(keep_last_policy);
    RUN_CASE(none_policy);
    RUN_CASE(keep_last_in_slab_lk);
    RUN_CASE(none_in_slab_lk);
    RUN_CASE(none_threads);
    return check_end();
}
