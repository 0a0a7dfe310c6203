/* Unit test of the thread_cache add-on layer over a real slab_lk (sync=spinlock, sizeclass=tc) over
 * the fake next layer, with a counting layer in between that sees every batch crossing:
 *     tcache :: cnt (this file) :: slab_lk :: fake          and, for the byte budget,
 *     tbudget(16 KiB) :: slab_lk :: fake,      and, for the reclaim policy none,
 *     tnone(reclaim=none, 32 KiB) :: slab_lk :: fake
 * Most cases run in a fresh thread, so they start from a new, empty cache. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/cpus.h"
#include "tests/support/layer_calls.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

/* ---- cnt: a pass-through layer that counts what crosses it (atomics: tests only) ---- */
static struct {
    unsigned long alloc_batch_calls, alloc_batch_objs, free_batch_calls, free_batch_objs;
    unsigned long allocs, frees, getmetas, block_classes, thread_exits, meta_allocs, meta_frees;
    long outstanding;                     /* objects taken below and not given back */
    long outstanding_by_class[sm_sizeclass_tc_count];
} cnt_obj;
static bool cnt_mark_fresh; /* cnt_alloc reports SM_F_FRESH, as an OS layer with zeroed memory would */
static __thread unsigned cnt_wants[256]; /* this thread's alloc_batch requests, in order */
static __thread unsigned cnt_nwants;

#define CNT_ADD(field, n) __atomic_add_fetch(&cnt_obj.field, (n), __ATOMIC_RELAXED)
#define CNT_GET(field)    __atomic_load_n(&cnt_obj.field, __ATOMIC_RELAXED)

enum {
    cnt_thread_safe = sl_thread_safe, cnt_min_align = sl_min_align, cnt_zeroed = sl_zeroed,
    cnt_caps = SM_CAP_BATCH | SM_CAP_OWNER, cnt_batch_classes = sl_batch_classes, cnt_batch_max_size = sl_batch_max_size,
};

static inline void cnt_track(void *p, long delta)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    if (sl_getmeta(&m) && m.usable <= sm_sizeclass_tc_max_size) {
        unsigned cls = sm_sizeclass_tc_size_to_class(m.usable);
        CNT_ADD(outstanding_by_class[cls], delta);
    }
    CNT_ADD(outstanding, delta);
}
static inline int cnt_create(void) { return sl_create(); }
static inline void *cnt_alloc(sm_mctx_t *c)
{
    CNT_ADD(allocs, 1);
    void *p = sl_alloc(c);
    if (p)
        cnt_track(p, 1);
    if (p && __atomic_load_n(&cnt_mark_fresh, __ATOMIC_RELAXED))
        c->flags |= SM_F_FRESH;
    return p;
}
static inline void cnt_free(sm_mctx_t *c)
{
    CNT_ADD(frees, 1);
    cnt_track(c->ptr, -1);
    sl_free(c);
}
/* cnt's metadata route is sl's (to fk, the bottom), counted */
static inline void *cnt_meta_alloc(sm_mctx_t *c)
{
    CNT_ADD(meta_allocs, 1);
    return sl_meta_alloc(c);
}
static inline void cnt_meta_free(sm_mctx_t *c)
{
    CNT_ADD(meta_frees, 1);
    sl_meta_free(c);
}
static inline bool cnt_getmeta(sm_mctx_t *c)
{
    CNT_ADD(getmetas, 1);
    return sl_getmeta(c);
}
static inline bool cnt_resize(sm_mctx_t *c, size_t n) { return sl_resize(c, n); }
static inline bool cnt_owner_local(const void *p, uintptr_t w, sm_mctx_t *c) { return sl_owner_local(p, w, c); }
static inline uintptr_t cnt_owner_foreign(sm_mctx_t *c) { return sl_owner_foreign(c); }
static inline unsigned cnt_owner_slot(const void *p, uintptr_t w) { return sl_owner_slot(p, w); }
static inline uintptr_t cnt_block_owner(const void *p)
{
    CNT_ADD(block_classes, 1);
    return sl_block_owner(p);
}
static inline bool cnt_purge(sm_mctx_t *c) { return sl_purge(c); }
static inline bool cnt_move(sm_mctx_t *c, size_t n) { return sl_move(c, n); }
static inline void cnt_stats(sm_stats_t *s) { sl_stats(s); }
static inline void cnt_release(sm_release_t *r) { sl_release(r); }
static inline void cnt_thread_exit(void)
{
    CNT_ADD(thread_exits, 1);
    sl_thread_exit();
}
static inline void cnt_fork_prepare(void) { sl_fork_prepare(); }
static inline void cnt_fork_parent(void) { sl_fork_parent(); }
static inline void cnt_fork_child(void) { sl_fork_child(); }
static inline unsigned cnt_alloc_batch(sm_mctx_t *c, void **out, unsigned n)
{
    CNT_ADD(alloc_batch_calls, 1);
    if (cnt_nwants < sizeof cnt_wants / sizeof *cnt_wants)
        cnt_wants[cnt_nwants++] = n;
    unsigned got = sl_alloc_batch(c, out, n);
    CNT_ADD(alloc_batch_objs, got);
    for (unsigned i = 0; i < got; i++)
        cnt_track(out[i], 1);
    return got;
}
static inline void cnt_free_batch(void **blocks, unsigned n)
{
    CNT_ADD(free_batch_calls, 1);
    CNT_ADD(free_batch_objs, n);
    for (unsigned i = 0; i < n; i++)
        cnt_track(blocks[i], -1);
    sl_free_batch(blocks, n);
}

#define SM_LAYER tcache
#define SM_NEXT cnt
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>

/* the byte budget instance */
#define SM_LAYER fkb
#include "tests/support/fake_next.h"
#define SM_LAYER slb
#define SM_NEXT fkb
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tbudget
#define SM_NEXT slb
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#define SM_OPT_CACHE_BYTES (16u << 10)
#include <sunmao/layers/addon/thread_cache.h>

/* the CPU-sharded instance: tshard :: slab_lk(2 shards) :: fake */
#define SM_LAYER fks
#include "tests/support/fake_next.h"
#define SM_LAYER sls
#define SM_NEXT fks
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SHARDS 2
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tshard
#define SM_NEXT sls
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/addon/thread_cache.h>

/* the reclaim policy `none` (no collection, no scan; a 32 KiB budget): tnone :: slab_lk :: fake */
#define SM_LAYER fkn
#include "tests/support/fake_next.h"
#define SM_LAYER sln
#define SM_NEXT fkn
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#include <sunmao/policies/reclaim/none.h>
#define SM_LAYER tnone
#define SM_NEXT sln
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_RECLAIM none
#define SM_SIZE_MAX (8u << 10)
#define SM_OPT_CACHE_BYTES (32u << 10)
#include <sunmao/layers/addon/thread_cache.h>

/* batches of 16 KiB that grow to 64 KiB for a list in heavy use: tgrow :: slab_lk :: fake */
#define SM_LAYER fkg
#include "tests/support/fake_next.h"
#define SM_LAYER slg
#define SM_NEXT fkg
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tgrow
#define SM_NEXT slg
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#define SM_OPT_BATCH_BYTES (16u << 10)
#define SM_OPT_BATCH_BYTES_MAX (64u << 10)
#include <sunmao/layers/addon/thread_cache.h>

_Static_assert(tcache_thread_safe == 1 && tcache_min_align == 16 && tcache_zeroed == 0, "properties");

/* ---- error policy recorder ---- */
#include "tests/support/err_record.h"

/* ---- the API as a socket would call it ---- */
static void *t_malloc(size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n ? n : 1, 0, 0);
    return tcache_alloc(&c);
}
static void *t_aligned(size_t n, size_t align)
{
    sm_mctx_t c = sm_mctx_alloc(n ? n : 1, align, 0);
    return tcache_alloc(&c);
}
static void *t_calloc(size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n ? n : 1, 0, SM_F_ZERO);
    void *p = tcache_alloc(&c);
    if (p && !(c.flags & SM_F_FRESH))
        memset(p, 0, n);
    return p;
}
static void t_free(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    tcache_free(&c);
}
static void t_free_sized(void *p, size_t n)
{
    sm_mctx_t c = sm_mctx_block(p, n, SM_F_SIZED);
    tcache_free(&c);
}
static size_t t_usable(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    return tcache_getmeta(&c) ? c.usable : 0;
}

static unsigned cls_of(size_t size) { return sm_sizeclass_tc_size_to_class(size); }
static const struct tcache_list *my_list(size_t size) { return &tcache_tls->list[cls_of(size)]; }

/* Runs fn in a new thread (a fresh cache) and waits for it: the thread's exit returns its cache. */
static void *thread_trampoline(void *fn)
{
    ((void (*)(void))fn)();
    return NULL;
}
static void in_thread(void (*fn)(void))
{
    pthread_t t;
    pthread_create(&t, NULL, thread_trampoline, (void *)fn);
    pthread_join(t, NULL);
}

/* ---- cases ---- */

/* A new thread starts on the constant empty cache; its first malloc misses exactly once, creating
 * the cache from the next layer (not libc); after that the class hits. */
static void first_miss_then_hit_body(void)
{
    CHECK(tcache_tls == (struct tcache_cache *)&tcache_empty_cache);
    unsigned long calls = CNT_GET(alloc_batch_calls), allocs = CNT_GET(allocs), metas = CNT_GET(meta_allocs);
    void *p = t_malloc(64);
    CHECK(p != NULL);
    CHECKF(CNT_GET(alloc_batch_calls) == calls + 1, "%lu batch calls on the first malloc",
           CNT_GET(alloc_batch_calls) - calls);
    CHECK(!tcache_is_static(tcache_tls));
    /* the cache struct is the allocator's own metadata: it took the metadata route, past the slab
     * layer's size range to the bottom, and no user-chain allocation */
    CHECKF(CNT_GET(meta_allocs) == metas + 1, "cache struct: %lu metadata allocs", CNT_GET(meta_allocs) - metas);
    CHECKF(CNT_GET(allocs) == allocs, "cache struct: %lu allocs on the user chain", CNT_GET(allocs) - allocs);
    sm_mctx_t m = sm_mctx_block(tcache_tls, 0, 0);
    CHECKF(fk_getmeta(&m) && !strcmp(m.owner, "fk") && m.usable >= sizeof(struct tcache_cache),
           "cache struct owned by %s", m.owner ? m.owner : "nobody");
    t_free(p);
    for (int i = 0; i < 1000; i++) {
        void *q = t_malloc(64);
        CHECKF(q == p, "round %d: got %p, want the cached %p", i, q, p);
        check_fill(q, 64, (unsigned)i);
        t_free(q);
    }
    CHECKF(CNT_GET(alloc_batch_calls) == calls + 1, "hits went below: %lu batch calls",
           CNT_GET(alloc_batch_calls) - calls);
}
static void first_miss_then_hit(void) { in_thread(first_miss_then_hit_body); }

/* LIFO: the last freed object of a class is the next one handed out. */
static void lifo_reuse_body(void)
{
    void *a = t_malloc(200), *b = t_malloc(200), *c = t_malloc(200), *d = t_malloc(300);
    t_free(a);
    t_free(b);
    t_free(d);
    t_free(c);
    void *x = t_malloc(200), *y = t_malloc(200), *z = t_malloc(300), *w = t_malloc(210); /* 200 and 210: class 224 */
    CHECKF(x == c && y == b && z == d && w == a, "reuse order broken");
    t_free(x), t_free(y), t_free(z), t_free(w);
}
static void lifo_reuse(void) { in_thread(lifo_reuse_body); }

/* Thousands of objects of every size (and some the cache passes on): patterns survive, usable
 * sizes are right, nothing overlaps; freed in a shuffled order, then reused. */
typedef struct { unsigned char *p; size_t size; } obj_t;
static size_t random_size(unsigned *seed)
{
    unsigned r = (unsigned)rand_r(seed);
    size_t cap = (r & 15) == 0 ? 20000 : (r & 7) < 2 ? 8192 : (r & 7) < 5 ? 512 : 128;
    return (size_t)rand_r(seed) % (cap + 1);
}
static void fill_patterns_body(void)
{
    enum { N = 6000 };
    obj_t *v = calloc(N, sizeof *v);
    unsigned seed = 99;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            v[i].size = random_size(&seed);
            v[i].p = i % 97 == 0 ? t_aligned(v[i].size, 64) : t_malloc(v[i].size);
            CHECKF(v[i].p != NULL, "alloc %zu", v[i].size);
            if (!v[i].p)
                return;
            size_t usable = t_usable(v[i].p);
            CHECKF(usable >= v[i].size && sm_ptr_aligned(v[i].p, i % 97 == 0 ? 64 : 16), "usable %zu for %zu",
                   usable, v[i].size);
            check_fill(v[i].p, v[i].size, (unsigned)i + round);
        }
        for (int i = 0; i < N; i++)
            CHECKF(check_verify(v[i].p, v[i].size, (unsigned)i + round), "object %d (%zu B) overwritten", i,
                   v[i].size);
        for (int i = N; i > 1; i--) {
            int j = rand_r(&seed) % i;
            obj_t t = v[i - 1];
            v[i - 1] = v[j];
            v[j] = t;
        }
        for (int i = 0; i < N; i++)
            t_free(v[i].p);
    }
    free(v);
}
static void fill_patterns(void)
{
    err_reset();
    in_thread(fill_patterns_body);
    CHECK(err_total() == 0 && fk_obj.bad_frees == 0);
}

/* Slow start: a class's refills ask for 1, 2, 3, ... objects, up to its batch size, never more. */
static void slow_start_body(void)
{
    enum { N = 600 };
    static __thread void *objs[N];
    cnt_nwants = 0;
    for (int i = 0; i < N; i++)
        objs[i] = t_malloc(256);
    unsigned batch = tcache_batch_of(cls_of(256)); /* 32; 256 B: no own cache lines to fill first */
    CHECKF(cnt_nwants >= 10, "%u refills", cnt_nwants);
    /* the first refill also made the cache: it is the first request with a want */
    for (unsigned i = 0; i < 5 && i < cnt_nwants; i++)
        CHECKF(cnt_wants[i] == i + 1, "refill %u asked for %u, want %u", i, cnt_wants[i], i + 1);
    unsigned most = 0;
    for (unsigned i = 0; i < cnt_nwants; i++) {
        CHECKF(cnt_wants[i] <= batch, "refill %u asked for %u > batch %u", i, cnt_wants[i], batch);
        if (i && cnt_wants[i] < cnt_wants[i - 1])
            CHECKF(0, "refill %u asked for fewer (%u) than the one before (%u)", i, cnt_wants[i], cnt_wants[i - 1]);
        most = cnt_wants[i] > most ? cnt_wants[i] : most;
    }
    CHECKF(most == batch, "the batch grew to %u, want %u", most, batch);
    for (int i = 0; i < N; i++)
        t_free(objs[i]);
}
static void slow_start(void) { in_thread(slow_start_body); }

/* SM_OPT_BATCH_BYTES_MAX: a thread that allocates and frees thousands of 4 KiB objects moves them
 * in batches that grow past the 16 KiB ones (4 objects) as its list's limit grows, up to 64 KiB
 * (16): about half the refills and releases it took with 16 KiB. A class used lightly keeps its
 * small batches: its objects all come from one refill. Contents checked throughout. */
static void batches_grow_body(void)
{
    enum { N = 2000, SIZE = 4096 };
    static __thread void *objs[N];
    unsigned cls = cls_of(SIZE);
    for (int round = 0; round < 3; round++) {
        uint64_t batches = 0;
        for (int i = 0; i < N; i++) {
            sm_mctx_t c = sm_mctx_alloc(SIZE, 0, 0);
            objs[i] = tgrow_alloc(&c);
            CHECK(objs[i] != NULL);
            check_fill(objs[i], SIZE, (unsigned)i);
            if (i == 0) {
                batches = tgrow_tls->batches;
                CHECKF(tgrow_batch_of(cls) == 4, "batch of 4 KiB objects %u, want 4", tgrow_batch_of(cls));
            }
        }
        const struct tgrow_list *l = &tgrow_tls->list[cls];
        unsigned refills = (unsigned)(tgrow_tls->batches - batches), limit = l->limit;
        CHECKF(tgrow_batch_for(limit, cls) == 16, "a list of limit %u moves %u, want 16", limit,
               tgrow_batch_for(limit, cls));
        CHECKF(refills * 3 <= N / 4 * 2, "round %d: %u refills for %d objects (%d in batches of 4)", round,
               refills, N, N / 4);
        for (int i = 0; i < N; i++) {
            CHECKF(check_verify(objs[i], SIZE, (unsigned)i), "object %d damaged", i);
            sm_mctx_t c = sm_mctx_block(objs[i], 0, 0);
            tgrow_free(&c);
        }
    }
    /* a light class: 3 objects, one refill that asks for no more than its batch */
    void *few[3];
    uint64_t batches = tgrow_tls->batches;
    for (int i = 0; i < 3; i++) {
        sm_mctx_t c = sm_mctx_alloc(2048, 0, 0);
        few[i] = tgrow_alloc(&c);
        CHECK(few[i] != NULL);
    }
    CHECKF(tgrow_tls->batches - batches <= 3 && tgrow_tls->list[cls_of(2048)].limit <= tgrow_batch_of(cls_of(2048)),
           "a light list grew to %u", tgrow_tls->list[cls_of(2048)].limit);
    for (int i = 0; i < 3; i++) {
        sm_mctx_t c = sm_mctx_block(few[i], 0, 0);
        tgrow_free(&c);
    }
}
static void batches_grow(void) { in_thread(batches_grow_body); }

/* Frees beyond a list's limit release a batch to the next layer; a list never exceeds its limit. */
static void overflow_body(void)
{
    enum { N = 1000 };
    static __thread void *objs[N];
    for (int i = 0; i < N; i++)
        objs[i] = t_malloc(256);
    unsigned long calls = CNT_GET(free_batch_calls), released = CNT_GET(free_batch_objs);
    const struct tcache_list *l = my_list(256);
    for (int i = 0; i < N; i++) {
        t_free(objs[i]);
        CHECKF(l->count <= l->limit && l->limit <= tcache_list_max, "count %u limit %u", l->count, l->limit);
    }
    CHECKF(CNT_GET(free_batch_calls) > calls, "no batch released");
    CHECKF(CNT_GET(free_batch_objs) - released + l->count >= N, "%lu released + %u cached < %d freed",
           CNT_GET(free_batch_objs) - released, l->count, N);
    CHECKF(l->count > 0, "nothing kept cached");
}
static void overflow(void) { in_thread(overflow_body); }

/* GC by low-water mark: after a burst, a class left alone gives back half of its low-water mark at a
 * GC, which other classes' slow-path events trigger, and all it holds once a whole period passed
 * with the list idle (and longer than a batch): a finished burst does not pin its slabs. */
static void gc_low_water_body(void)
{
    enum { BURST = 2000, OTHER = 6000 }; /* a burst long enough to grow the list past a batch */
    static __thread void *objs[OTHER];
    unsigned hot = cls_of(64);
    for (int i = 0; i < BURST; i++)
        objs[i] = t_malloc(64);
    for (int i = 0; i < BURST; i++)
        t_free(objs[i]);
    const struct tcache_list *l = my_list(64);
    unsigned cached = l->count;
    long below_before = CNT_GET(outstanding_by_class[hot]);
    CHECKF(cached > 64, "only %u cached after the burst", cached);
    /* idle for class 64; slow-path events in class 32: misses every batch, a GC every 64 of them */
    unsigned gcs = 0, events = tcache_tls->events;
    for (int i = 0; i < OTHER; i++) {
        objs[i] = t_malloc(32);
        gcs += tcache_tls->events < events;
        events = tcache_tls->events;
    }
    CHECKF(gcs >= 3, "only %u GCs", gcs);
    CHECKF(l->count == 0, "class 64, idle for whole GC periods, still caches %u of %u", l->count, cached);
    long below_after = CNT_GET(outstanding_by_class[hot]);
    CHECKF(below_after <= below_before - (long)cached, "the slab's live 64 B objects went %ld -> %ld",
           below_before, below_after);
    CHECKF(l->count <= l->limit, "count %u limit %u", l->count, l->limit);
    for (int i = 0; i < OTHER; i++)
        t_free(objs[i]);
}
static void gc_low_water(void) { in_thread(gc_low_water_body); }

/* The idle scan: every few refills, a list that no malloc used since the last scan and that holds
 * more than a batch goes back whole, well before a GC; a list popped in between keeps its objects. */
static void idle_scan_body(void)
{
    enum { BURST = 1000, OTHER = 4000 };
    static __thread void *objs[OTHER];
    unsigned idle_cls = cls_of(128);
    /* both bursts allocated before either is freed: refills for one would scan the other */
    for (int i = 0; i < 2 * BURST; i++)
        objs[i] = t_malloc(i < BURST ? 128 : 64);
    for (int i = 0; i < 2 * BURST; i++)
        t_free(objs[i]);
    const struct tcache_list *idle = my_list(128), *used = my_list(64);
    unsigned idle_cached = idle->count, used_cached = used->count;
    CHECKF(idle_cached > tcache_batch_of(idle_cls) && used_cached > tcache_batch_of(cls_of(64)),
           "only %u and %u cached after the bursts", idle_cached, used_cached);
    long below_before = CNT_GET(outstanding_by_class[idle_cls]);
    tcache_tls->events = 0; /* a fresh GC period, so that no GC can do the scan's work below */
    unsigned refills = tcache_tls->refills, events = 0;
    int n = 0;
    while (tcache_tls->refills - refills < 3 * tcache_idle_scan_refills && n < OTHER) {
        objs[n++] = t_malloc(32);
        if (n % 16 == 0) { /* class 64 in use, a little below its level, between the scans */
            void *p = t_malloc(64);
            CHECK(p != NULL);
            t_free(p);
        }
        CHECKF(tcache_tls->events >= events, "a GC ran (events %u -> %u): the test would not isolate the scan",
               events, tcache_tls->events);
        events = tcache_tls->events;
    }
    CHECKF(tcache_tls->refills - refills >= 3 * tcache_idle_scan_refills, "only %u refills in %d mallocs",
           tcache_tls->refills - refills, n);
    CHECKF(idle->count == 0, "class 128, idle for %u refills, still caches %u of %u", 3 * tcache_idle_scan_refills,
           idle->count, idle_cached);
    CHECKF(CNT_GET(outstanding_by_class[idle_cls]) <= below_before - (long)idle_cached,
           "the slab's live 128 B objects went %ld -> %ld", below_before, CNT_GET(outstanding_by_class[idle_cls]));
    CHECKF(used->count >= used_cached - 1, "class 64, in use, went %u -> %u", used_cached, used->count);
    CHECKF(idle->count <= idle->limit && used->count <= used->limit, "count above limit");
    for (int i = 0; i < n; i++)
        t_free(objs[i]);
}
static void idle_scan(void) { in_thread(idle_scan_body); }

/* The reclaim policy `none`: the scenario gc_low_water runs, under `none`. The idle list keeps all
 * it holds through any number of other classes' slow paths (no collection, no scan), the byte budget
 * alone bounds what is cached, and the pops keep no low-water mark. */
LAYER_CALLS(tn, tnone)
CACHE_BYTES(tn, tnone)
static void reclaim_none_body(void)
{
    enum { BURST = 2000, OTHER = 6000 };
    static __thread void *objs[OTHER];
    for (int i = 0; i < BURST; i++)
        objs[i] = tn_malloc(64);
    for (int i = 0; i < BURST; i++)
        tn_free(objs[i]);
    const struct tnone_list *l = &tnone_tls->list[cls_of(64)];
    unsigned cached = l->count;
    CHECKF(cached > 64 && tn_cached_bytes() <= (32u << 10) && tnone_tls->capacity <= (32u << 10),
           "%u cached after the burst, %zu bytes, capacity %zu", cached, tn_cached_bytes(), tnone_tls->capacity);
    CHECKF(cached * 64 > (16u << 10), "the burst filled only %u B of the 32 KiB budget", cached * 64);
    unsigned limit = l->limit;
    /* other classes' slow paths, more than enough for lowwater to collect class 64 entirely */
    for (int i = 0; i < OTHER; i++) {
        objs[i] = tn_malloc(i % 2 ? 32 : 48);
        CHECK(objs[i] != NULL);
    }
    CHECKF(l->count == cached && l->limit == limit, "class 64 went %u/%u -> %u/%u (count/limit) with no reclaim policy",
           cached, limit, l->count, l->limit);
    CHECKF(tnone_tls->events == 0 && tnone_tls->refills == 0, "counted %u events, %u refills", tnone_tls->events,
           tnone_tls->refills);
    for (int i = 0; i < OTHER; i++)
        tn_free(objs[i]);
    CHECKF(tn_cached_bytes() <= (32u << 10) && tnone_tls->capacity <= (32u << 10), "cached %zu, capacity %zu",
           tn_cached_bytes(), tnone_tls->capacity);
    /* pops keep no low-water mark */
    for (int i = 0; i < 10; i++)
        objs[i] = tn_malloc(64);
    CHECKF(l->low == 0 && l->count == cached - 10, "low %u, count %u", l->low, l->count);
    for (int i = 0; i < 10; i++)
        tn_free(objs[i]);
}
static void reclaim_none(void)
{
    tnone_create();
    in_thread(reclaim_none_body);
}

/* A free on the slow path (here a thread's first) keeps a block of its own CPU's slabs and hands a
 * block of another CPU's back to its slab: that thread's next object is then not a neighbour of
 * objects in use on the other CPU (passive false sharing). */
static int shard_cpu[2];
static void *shard_given, *shard_kept;
typedef struct { bool cached; void *next; } shard_probe_t;
static void shard_probe(void *arg)
{
    shard_probe_t *r = arg;
    sm_mctx_t f = sm_mctx_block(shard_given, 0, 0);
    tshard_free(&f);
    r->cached = tshard_tls->list[cls_of(16)].count == 1;
    sm_mctx_t a = sm_mctx_alloc(16, 0, 0);
    r->next = tshard_alloc(&a);
    shard_given = r->next; /* the next probe frees this one */
}
static void shard_give(void *arg)
{
    (void)arg;
    sm_mctx_t a = sm_mctx_alloc(16, 0, 0), b = a;
    shard_given = tshard_alloc(&a);
    shard_kept = tshard_alloc(&b); /* live until the end: the slab is not empty, so not stolen whole */
}
static void remote_block_not_kept(void)
{
    if (!cpus_of_both_parities(shard_cpu)) {
        check_skip("remote_block_not_kept", "needs two CPUs of different parity");
        return;
    }
    err_reset();
    CHECK(run_on_cpu(shard_cpu[0], shard_give, NULL) && shard_given);
    void *given = shard_given;
    shard_probe_t other = { false, NULL }, same = { false, NULL };
    CHECK(run_on_cpu(shard_cpu[1], shard_probe, &other));
    CHECKF(!other.cached, "a block of CPU %d's slab was kept by a thread on CPU %d", shard_cpu[0], shard_cpu[1]);
    CHECKF(other.next != given, "the thread on CPU %d got the other CPU's block back", shard_cpu[1]);
    CHECKF((uintptr_t)other.next / 65536 != (uintptr_t)given / 65536, "both CPUs' objects in slab %p",
           (void *)((uintptr_t)given & ~(uintptr_t)0xffff));
    /* the block the thread on CPU 1 took is its own CPU's: a thread there keeps it */
    CHECK(run_on_cpu(shard_cpu[1], shard_probe, &other));
    CHECKF(other.cached, "a thread on CPU %d did not keep a block of its own CPU's slab", shard_cpu[1]);
    /* and a thread on CPU 0 does not */
    CHECK(run_on_cpu(shard_cpu[0], shard_probe, &same));
    CHECKF(!same.cached, "a block of CPU %d's slab was kept by a thread on CPU %d", shard_cpu[1], shard_cpu[0]);
    sm_mctx_t f = sm_mctx_block(shard_given, 0, 0), k = sm_mctx_block(shard_kept, 0, 0);
    tshard_free(&f);
    tshard_free(&k);
    CHECK(err_total() == 0 && fks_obj.bad_frees == 0);
}

/* The byte budget (16 KiB here): capacity and cached bytes never exceed it, whatever the mix. */
static size_t budget_cached_bytes(void)
{
    size_t bytes = 0;
    for (unsigned cls = 0; cls < tbudget_class_count; cls++)
        bytes += (size_t)tbudget_tls->list[cls].count * sm_sizeclass_tc_class_to_size(cls);
    return bytes;
}
static void budget_body(void)
{
    enum { N = 300 };
    static __thread void *objs[N];
    static const size_t sizes[] = { 16, 48, 100, 256, 640, 1024, 2048, 4096, 8192 };
    size_t most = 0;
    for (int round = 0; round < 20; round++) {
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            int n = (int)(N >> (k / 2));
            for (int i = 0; i < n; i++) {
                sm_mctx_t c = sm_mctx_alloc(sizes[k], 0, 0);
                objs[i] = tbudget_alloc(&c);
                CHECK(objs[i] != NULL);
                check_fill(objs[i], sizes[k], (unsigned)i);
            }
            for (int i = 0; i < n; i++) {
                CHECKF(check_verify(objs[i], sizes[k], (unsigned)i), "object damaged");
                sm_mctx_t c = sm_mctx_block(objs[i], 0, 0);
                tbudget_free(&c);
                size_t cached = budget_cached_bytes();
                most = cached > most ? cached : most;
                CHECKF(cached <= (16u << 10) && tbudget_tls->capacity <= (16u << 10),
                       "cached %zu, capacity %zu over 16 KiB", cached, tbudget_tls->capacity);
            }
        }
    }
    CHECKF(most >= (8u << 10), "the cache never used its budget (%zu B at most)", most);
}
static void budget(void)
{
    tbudget_create();
    in_thread(budget_body);
}

/* Thread exit returns every cached object and the cache itself: what was taken below comes back,
 * and the slabs that emptied go back to the fake. */
static void *exit_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { N = 500 };
    void *objs[N];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++)
            objs[i] = t_malloc(random_size(&seed) % 8193);
        for (int i = 0; i < N; i++)
            t_free(objs[i]);
    }
    return NULL;
}
static size_t fake_slabs(void)
{
    size_t n = 0;
    pthread_mutex_lock(&fk_obj.lock);
    for (size_t i = 0; i < fk_obj.live_blocks; i++)
        n += fk_obj.blocks[i].size == 65536;
    pthread_mutex_unlock(&fk_obj.lock);
    return n;
}
static void run_exit_workers(int n)
{
    pthread_t t[8];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, exit_worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}
static void thread_exit_returns_all(void)
{
    run_exit_workers(4); /* warm up: every class used gets its one kept empty slab */
    long outstanding = CNT_GET(outstanding);
    size_t slabs = fake_slabs();
    unsigned long exits = CNT_GET(thread_exits), metas = CNT_GET(meta_allocs), meta_frees = CNT_GET(meta_frees);
    unsigned spares = tcache_spares.n;
    run_exit_workers(4);
    /* the threads take the spares the warm-up left (how many depends on how its threads
     * overlapped) and make only what is missing; every cache ends as a spare, none goes back */
    unsigned long made = CNT_GET(meta_allocs) - metas;
    CHECKF(made <= (spares >= 4 ? 0u : 4u - spares) && made == tcache_spares.n - spares &&
               CNT_GET(meta_frees) - meta_frees == 0,
           "%lu caches made and %lu given back on the metadata route for 4 threads with %u spares (%u after)", made,
           CNT_GET(meta_frees) - meta_frees, spares, tcache_spares.n);
    CHECKF(CNT_GET(outstanding) == outstanding, "%ld objects not returned below",
           CNT_GET(outstanding) - outstanding);
    CHECKF(CNT_GET(thread_exits) == exits + 4, "%lu thread exits for 4 threads", CNT_GET(thread_exits) - exits);
    CHECKF(fake_slabs() <= slabs, "fake holds %zu slabs, %zu before", fake_slabs(), slabs);
    CHECK(fk_obj.bad_frees == 0 && err_total() == 0);
}

/* At most spares_max caches are kept: twelve threads that all hold a cache at once take the spares
 * there are and make the rest; at their exits eight are kept and the other four go back. */
static pthread_barrier_t spare_barrier;
static void *spare_worker(void *arg)
{
    (void)arg;
    t_free(t_malloc(64)); /* the thread's cache */
    pthread_barrier_wait(&spare_barrier);
    return NULL;
}
static void spare_caches_bounded(void)
{
    enum { T = 12 };
    pthread_t t[T];
    unsigned spares = tcache_spares.n;
    unsigned long metas = CNT_GET(meta_allocs), meta_frees = CNT_GET(meta_frees);
    pthread_barrier_init(&spare_barrier, NULL, T);
    for (int i = 0; i < T; i++)
        pthread_create(&t[i], NULL, spare_worker, NULL);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&spare_barrier);
    CHECKF(tcache_spares_max == 8 && tcache_spares.n == tcache_spares_max, "%u spares kept (want %d)",
           tcache_spares.n, (int)tcache_spares_max);
    CHECKF(CNT_GET(meta_allocs) - metas == T - spares && CNT_GET(meta_frees) - meta_frees == T - tcache_spares_max,
           "%lu caches made (want %u: %u spares were there), %lu given back (want %d)", CNT_GET(meta_allocs) - metas,
           T - spares, spares, CNT_GET(meta_frees) - meta_frees, T - (int)tcache_spares_max);
    CHECK(fk_obj.bad_frees == 0 && err_total() == 0);
}

/* A destructor that runs after the cache's (a later pthread key) may still allocate and free: the
 * retired thread bypasses the cache, no cache is re-created, nothing leaks, the rounds end. */
static pthread_key_t late_key;
static unsigned long late_cache_allocs;
static void late_destructor(void *arg)
{
    (void)arg;
    unsigned long allocs = CNT_GET(allocs), metas = CNT_GET(meta_allocs);
    void *p = t_malloc(64), *q = t_malloc(64);
    CHECK(p && q && p != q);
    CHECK(tcache_tls == (struct tcache_cache *)&tcache_retired_cache);
    t_free(p);
    t_free(q);
    late_cache_allocs = CNT_GET(allocs) - allocs + CNT_GET(meta_allocs) - metas; /* two objects, no cache */
}
static void *late_worker(void *arg)
{
    (void)arg;
    t_free(t_malloc(64)); /* creates the cache (and the layer's key, first) */
    pthread_setspecific(late_key, (void *)1);
    return NULL;
}
static void destructor_after_exit(void)
{
    in_thread(lifo_reuse_body); /* the layer's key exists from here on */
    pthread_key_create(&late_key, late_destructor);
    long outstanding = CNT_GET(outstanding);
    pthread_t t;
    pthread_create(&t, NULL, late_worker, NULL);
    pthread_join(t, NULL);
    CHECKF(late_cache_allocs == 2, "%lu allocations below in the late destructor, want 2", late_cache_allocs);
    CHECKF(CNT_GET(outstanding) == outstanding, "%ld objects leaked", CNT_GET(outstanding) - outstanding);
    pthread_key_delete(late_key);
}

/* Sized free (free_sized, C++ sized delete): nothing asked below, the block is cached all the same. */
static void sized_free_body(void)
{
    void *p = t_malloc(100);
    t_free(t_malloc(100)); /* the list has room now */
    (void)t_malloc(100);
    unsigned long asked = CNT_GET(getmetas) + CNT_GET(block_classes);
    t_free_sized(p, 100);
    CHECKF(CNT_GET(getmetas) + CNT_GET(block_classes) == asked, "sized free asked the next layer what p is");
    CHECK(t_malloc(100) == p);
    /* above the cached range: passed on, and still sized */
    void *big = t_malloc(9000);
    unsigned long frees = CNT_GET(frees);
    t_free_sized(big, 9000);
    CHECK(CNT_GET(frees) == frees + 1);
    /* An aligned request no cached class serves goes below as its whole class (16 bytes for 8): a
     * sized free then caches it for malloc(16), which must find 16 bytes there (it found 8). */
    void *odd = t_aligned(8, 8192);
    sm_mctx_t m = sm_mctx_block(odd, 0, 0);
    CHECKF(odd && fk_getmeta(&m) && m.usable >= 16, "the block below holds %zu bytes", m.usable);
    t_free_sized(odd, 8);
}
static void sized_free(void) { in_thread(sized_free_body); }

/* Alignments above 4 KiB and sizes above the range go below; calloc is served from the cache
 * (zeroed). */
static void pass_through_body(void)
{
    t_free(t_malloc(64)); /* the cache exists: what follows is only the pass-through requests */
    unsigned long allocs = CNT_GET(allocs);
    void *a = t_aligned(100, 8192), *b = t_malloc(8193), *c = t_malloc(1 << 20);
    CHECKF(CNT_GET(allocs) - allocs == 3, "%lu allocations below for 3 pass-through requests",
           CNT_GET(allocs) - allocs);
    CHECK(a && b && c && sm_ptr_aligned(a, 8192));
    t_free(a), t_free(b), t_free(c);
    unsigned char *p = t_malloc(500);
    memset(p, 0xAB, 500);
    t_free(p);
    unsigned char *z = t_calloc(500);
    CHECKF(z == p, "calloc did not reuse the cached block");
    int zero = 1;
    for (int i = 0; i < 500; i++)
        zero &= z[i] == 0;
    CHECK(zero);
    t_free(z);
    /* an aligned block freed without a size is a class-size slab object: it joins the cache */
    void *al = t_aligned(128, 128);
    t_free(al);
    CHECK(t_malloc(128) == al);
}
static void pass_through(void) { in_thread(pass_through_body); }

/* Aligned requests up to 4 KiB are served from the list of the smallest class that is a multiple
 * of the alignment, without a plain allocation below; a misaligned head (a block a sized free put
 * on a list finer than its class) is never handed out for an aligned request. */
static void aligned_body(void)
{
    t_free(t_malloc(64));
    unsigned long allocs = CNT_GET(allocs);
    for (size_t align = 32; align <= 4096; align *= 2) {
        for (size_t n = 1; n <= 8192; n = n * 3 + 1) {
            void *p[40];
            for (int i = 0; i < 40; i++) {
                p[i] = t_aligned(n, align);
                size_t usable = p[i] ? t_usable(p[i]) : 0;
                CHECKF(p[i] && sm_ptr_aligned(p[i], align) && usable >= n && usable % align == 0,
                       "aligned(%zu, %zu) = %p, usable %zu", n, align, p[i], usable);
            }
            for (int i = 0; i < 40; i++)
                t_free(p[i]);
        }
    }
    CHECKF(CNT_GET(allocs) == allocs, "%lu aligned requests went below the cache", CNT_GET(allocs) - allocs);
    /* a freed aligned block is reused by the next request for its class, aligned or not */
    void *q = t_aligned(200, 256);
    CHECK(q && t_usable(q) == 256);
    t_free(q);
    CHECK(t_aligned(129, 128) == q); /* 129 with 128-byte alignment: the 256 class */
    t_free(q);
    /* a 48-byte object named as 32 bytes (realloc kept it in place) joins the 32-byte list */
    void *keep = t_malloc(32), *x[8], *m = NULL;
    for (int i = 0; i < 8; i++) { /* consecutive 48-byte objects: every other one is not 32-aligned */
        x[i] = t_malloc(48);
        if (!m && ((uintptr_t)x[i] & 31))
            m = x[i];
    }
    CHECK(m != NULL);
    for (int i = 0; i < 8; i++)
        if (x[i] != m)
            t_free(x[i]);
    t_free(keep);
    t_free_sized(m, 32);
    CHECK(my_list(32)->head == m);
    void *al = t_aligned(20, 32);
    CHECKF(al && al != m && sm_ptr_aligned(al, 32), "%p (misaligned head %p)", al, m);
    CHECK(t_malloc(32) == m); /* still there for a plain request */
    t_free(al);
    t_free(m);
}
static void aligned(void) { in_thread(aligned_body); }

/* The hit paths a socket calls first: before this thread's first slow path they miss and change
 * nothing (the stack may not even exist yet); after it they pop and push exactly as the full paths
 * do; whatever they do not serve they answer NULL / false for. */
static void hit_paths_body(void)
{
    struct tcache_cache *empty = (struct tcache_cache *)&tcache_empty_cache;
    uintptr_t word = SM_OWNER_UNKNOWN;
    unsigned long allocs = CNT_GET(allocs), batches = CNT_GET(alloc_batch_calls), metas = CNT_GET(block_classes);
    CHECK(tcache_tls == empty);
    CHECK(tcache_alloc_hit(64) == NULL && tcache_alloc_hit(0) == NULL && tcache_aligned_hit(64, 64) == NULL);
    sm_mctx_t r = sm_mctx_alloc(64, 0, 0);
    void *b = sl_alloc(&r); /* a cacheable block, made behind the cache's back */
    CHECK(b != NULL);
    CHECK(!tcache_free_hit(b, 0, 0, &word) && !tcache_free_hit(b, 64, SM_F_SIZED, &word));
    CHECKF(tcache_tls == empty && CNT_GET(allocs) == allocs && CNT_GET(alloc_batch_calls) == batches,
           "a missing hit path changed something");
    CHECK(CNT_GET(block_classes) > metas); /* the unsized free asked the next layer what b is */
    CHECK(word == sl_block_owner(b)); /* and kept the word for its miss */
    r = sm_mctx_block(b, 0, 0);
    sl_free(&r);

    t_free(t_malloc(64)); /* the first slow path: the cache exists and 64's list holds its first
                           * fetch, four cache lines of objects (4 of 64 bytes), the freed one among them */
    CHECKF(my_list(64)->count == 4, "count %u", (unsigned)my_list(64)->count);
    void *q = tcache_alloc_hit(64);
    void *p = tcache_alloc_hit(64);
    void *r1 = tcache_alloc_hit(64), *r2 = tcache_alloc_hit(64);
    CHECK(q != NULL && p != NULL && r1 != NULL && r2 != NULL && my_list(64)->count == 0);
    t_free(r1);
    t_free(r2);
    CHECK(tcache_alloc_hit(64) == r2 && tcache_alloc_hit(64) == r1); /* LIFO */
    CHECK(tcache_alloc_hit(64) == NULL); /* empty list: a miss, not a refill */
    CHECK(tcache_free_hit(p, 0, 0, &word) && my_list(64)->count == 1);
    CHECK(tcache_alloc_hit(60) == p); /* same class */
    CHECK(tcache_free_hit(p, 60, SM_F_SIZED, &word) && tcache_alloc_hit(64) == p);
    /* the aligned hit (the socket's first try for an aligned request): the head of the aligned
     * class's list when it is aligned, else a miss that changes nothing; a layer that defines none
     * has the default, which always misses */
    void *a = t_aligned(100, 128); /* the 128 class */
    CHECK(a != NULL && sm_ptr_aligned(a, 128));
    t_free(a);
    unsigned held = my_list(128)->count;
    CHECK(tcache_aligned_hit(100, 128) == a && my_list(128)->count == held - 1);
    CHECK(tcache_aligned_hit(100, 8192) == NULL && tcache_aligned_hit((8u << 10) + 1, 32) == NULL);
    t_free(a);
    CHECK(sl_aligned_hit(100, 128) == NULL);
    /* the usable hit (realloc's and malloc_usable_size's first try): a live object's class size,
     * what getmeta says; 0 where it cannot tell (not an object's start), and from a layer that
     * defines none */
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    CHECK(tcache_usable_hit(p) == 64 && tcache_getmeta(&m) && m.usable == 64);
    CHECK(tcache_usable_hit((char *)p + 16) == 0 && sl_usable_hit(p) == 0);
    t_free(p);
    t_free(q);
    /* malloc(0) on the hit path gets an object of the smallest class, as malloc(1) would */
    void *one = t_malloc(1);
    t_free(one);
    CHECK(tcache_alloc_hit(0) == one);
    t_free(one);
    /* sizes outside the range miss; blocks that are not class-size objects are not taken */
    CHECK(tcache_alloc_hit((8u << 10) + 1) == NULL && tcache_alloc_hit(SIZE_MAX) == NULL);
    void *big = t_malloc(100000);
    CHECK(big != NULL && !tcache_free_hit(big, 0, 0, &word) && !tcache_free_hit(big, 100000, SM_F_SIZED, &word));
    CHECK(tcache_usable_hit(big) == 0); /* a block of the next layer's next layer: getmeta's */
    t_free(big);
}
static void hit_paths(void) { in_thread(hit_paths_body); }

/* Two threads that each take their first small object must not get neighbours in one cache line:
 * a line written by two cores ping-pongs between them (Hoard's cache-thrash). Both threads are
 * alive when the second takes its object: once the first has exited, its cache's objects are back
 * in the slab and a neighbour of its object is no one's concern. */
static pthread_barrier_t first_taken, both_compared;
static void *first_object(void *unused)
{
    (void)unused;
    void *p = t_malloc(8);
    pthread_barrier_wait(&first_taken);
    pthread_barrier_wait(&both_compared);
    return p;
}
static void first_objects_do_not_share_lines(void)
{
    pthread_t a, b;
    void *pa, *pb;
    pthread_barrier_init(&first_taken, NULL, 2);
    pthread_barrier_init(&both_compared, NULL, 3);
    pthread_create(&a, NULL, first_object, NULL);
    pthread_barrier_wait(&first_taken); /* a has its object, and b starts only now */
    pthread_create(&b, NULL, first_object, NULL);
    pthread_barrier_wait(&first_taken);
    pthread_barrier_wait(&both_compared);
    pthread_join(a, &pa);
    pthread_join(b, &pb);
    pthread_barrier_destroy(&first_taken);
    pthread_barrier_destroy(&both_compared);
    CHECK(pa && pb);
    uintptr_t la = (uintptr_t)pa / 64, lb = (uintptr_t)pb / 64;
    CHECKF(la != lb, "%p and %p share a cache line", pa, pb);
    t_free(pa);
    t_free(pb);
}

/* What the next layer says about a block (SM_F_FRESH) reaches the caller through the miss path,
 * so a calloc above can skip its memset; a cached object never claims it. */
static void fresh_flag_body(void)
{
    __atomic_store_n(&cnt_mark_fresh, true, __ATOMIC_RELAXED);
    sm_mctx_t c = sm_mctx_alloc(100000, 0, SM_F_ZERO);
    void *big = tcache_alloc(&c);
    CHECKF(big && (c.flags & SM_F_FRESH) && (c.flags & SM_F_ZERO), "flags 0x%x", c.flags);
    c = sm_mctx_alloc(100, 8192, SM_F_ZERO); /* aligned above 4 KiB: passed down as well */
    void *al = tcache_alloc(&c);
    CHECKF(al && sm_ptr_aligned(al, 8192) && (c.flags & SM_F_FRESH), "flags 0x%x", c.flags);
    __atomic_store_n(&cnt_mark_fresh, false, __ATOMIC_RELAXED);
    t_free(t_malloc(64));
    c = sm_mctx_alloc(64, 0, SM_F_ZERO);
    void *hit = tcache_alloc(&c);
    CHECKF(hit && !(c.flags & SM_F_FRESH), "a cached object claimed to be fresh");
    t_free(big), t_free(al), t_free(hit);
}
static void fresh_flag(void) { in_thread(fresh_flag_body); }

/* A double free of an object still in the cache is caught and ignored. */
static void double_free_body(void)
{
    void *keep = t_malloc(64), *p = t_malloc(64);
    t_free(keep);
    t_free(p);
    err_reset();
    t_free(p);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu errors", err_total());
    void *x = t_malloc(64), *y = t_malloc(64), *z = t_malloc(64);
    CHECKF(x == p && y == keep && z != p && z != keep, "a double-freed object was handed out twice");
    /* an object whose second word happens to hold garbage is still freed normally */
    ((uintptr_t *)y)[1] = 0x1234;
    t_free(x), t_free(y), t_free(z);
    CHECK(err_total() == 1);
    err_reset();
}
static void double_free(void) { in_thread(double_free_body); }

/* Cross-thread frees: A allocates, B frees into its own cache, B's next allocations reuse them. */
enum { XN = 300 };
static void *xobjs[XN];
static void cross_alloc_body(void)
{
    for (int i = 0; i < XN; i++) {
        xobjs[i] = t_malloc(48);
        check_fill(xobjs[i], 48, (unsigned)i);
    }
}
static void cross_free_body(void)
{
    for (int i = 0; i < XN; i++) {
        CHECKF(check_verify(xobjs[i], 48, (unsigned)i), "object %d damaged", i);
        t_free(xobjs[i]);
    }
    const struct tcache_list *l = my_list(48);
    CHECKF(l->count > 0, "B cached none of A's objects");
    unsigned long calls = CNT_GET(alloc_batch_calls);
    unsigned cached = l->count, reused = 0;
    for (unsigned i = 0; i < cached; i++) {
        void *p = t_malloc(48);
        for (int j = 0; j < XN; j++)
            reused += p == xobjs[j];
    }
    CHECKF(reused == cached && CNT_GET(alloc_batch_calls) == calls, "%u of %u reused, %lu refills", reused, cached,
           CNT_GET(alloc_batch_calls) - calls);
    CHECK(t_malloc(48) != NULL); /* and the thread goes on (leaking these to its exit is fine) */
}
static void cross_thread(void)
{
    in_thread(cross_alloc_body);
    in_thread(cross_free_body);
}

/* 8 threads: random sizes, fill patterns verified before every free, objects handed to neighbours. */
enum { STRESS_THREADS = 8, SLOTS = 256, OPS = 60000 };
static struct { pthread_mutex_t lock; void *p; size_t size; unsigned seed; } mailbox[STRESS_THREADS];
static unsigned long stress_bad;
static void *stress_worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, seed = id * 7919u + 1;
    obj_t v[SLOTS] = { { 0, 0 } };
    unsigned seeds[SLOTS] = { 0 };
    for (unsigned op = 0; op < OPS; op++) {
        unsigned s = (unsigned)rand_r(&seed) % SLOTS;
        if (v[s].p) {
            if (!check_verify(v[s].p, v[s].size < 256 ? v[s].size : 256, seeds[s]))
                __atomic_add_fetch(&stress_bad, 1, __ATOMIC_RELAXED);
            if (op % 16 == 0) { /* swap with the neighbour's mailbox: it frees ours, we free theirs */
                unsigned to = (id + 1) % STRESS_THREADS;
                pthread_mutex_lock(&mailbox[to].lock);
                void *old = mailbox[to].p;
                size_t old_size = mailbox[to].size;
                unsigned old_seed = mailbox[to].seed;
                mailbox[to].p = v[s].p, mailbox[to].size = v[s].size, mailbox[to].seed = seeds[s];
                pthread_mutex_unlock(&mailbox[to].lock);
                if (old && !check_verify(old, old_size < 256 ? old_size : 256, old_seed))
                    __atomic_add_fetch(&stress_bad, 1, __ATOMIC_RELAXED);
                if (old)
                    t_free(old);
            } else if (op % 5 == 0) {
                t_free_sized(v[s].p, v[s].size);
            } else {
                t_free(v[s].p);
            }
            v[s].p = NULL;
        } else {
            size_t size = random_size(&seed);
            v[s].p = t_malloc(size);
            v[s].size = size;
            seeds[s] = op;
            if (!v[s].p) {
                __atomic_add_fetch(&stress_bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            check_fill(v[s].p, size < 256 ? size : 256, op);
        }
    }
    for (unsigned s = 0; s < SLOTS; s++)
        if (v[s].p)
            t_free(v[s].p);
    return NULL;
}
static void stress8(void)
{
    err_reset();
    long outstanding = CNT_GET(outstanding);
    pthread_t t[STRESS_THREADS];
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        pthread_mutex_init(&mailbox[i].lock, NULL);
        mailbox[i].p = NULL;
    }
    for (unsigned i = 0; i < STRESS_THREADS; i++)
        pthread_create(&t[i], NULL, stress_worker, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < STRESS_THREADS; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        if (mailbox[i].p && !check_verify(mailbox[i].p, mailbox[i].size < 256 ? mailbox[i].size : 256, mailbox[i].seed))
            stress_bad++;
        if (mailbox[i].p) {
            sm_mctx_t c = sm_mctx_block(mailbox[i].p, 0, 0);
            cnt_free(&c); /* the main thread stays off the cache */
        }
    }
    CHECKF(stress_bad == 0, "%lu damaged objects or failed allocations", stress_bad);
    CHECKF(err_total() == 0 && fk_obj.bad_frees == 0, "%lu errors", err_total());
    CHECKF(CNT_GET(outstanding) == outstanding, "%ld objects not returned after the threads exited",
           CNT_GET(outstanding) - outstanding);
}

/* fork from a worker thread while other threads allocate: the child keeps the forking thread's
 * cache and allocates (the other caches are simply lost there). */
static volatile int fork_stop;
static void *fork_busy(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *objs[64] = { 0 };
    while (!__atomic_load_n(&fork_stop, __ATOMIC_RELAXED)) {
        unsigned s = (unsigned)rand_r(&seed) % 64;
        if (objs[s])
            t_free(objs[s]);
        objs[s] = t_malloc(random_size(&seed));
    }
    for (int s = 0; s < 64; s++)
        if (objs[s])
            t_free(objs[s]);
    return NULL;
}
static int fork_failures;
static void fork_body(void)
{
    void *mine = t_malloc(64);
    t_free(mine); /* this thread's cache holds it */
    for (int round = 0; round < 10; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            int bad = t_malloc(64) != mine; /* the cache survived */
            enum { N = 2000 };
            static void *objs[N];
            unsigned seed = 5;
            for (int i = 0; i < N; i++) {
                size_t size = random_size(&seed);
                if (!(objs[i] = t_malloc(size)))
                    bad = 1;
                else
                    check_fill(objs[i], size < 64 ? size : 64, (unsigned)i);
            }
            seed = 5;
            for (int i = 0; i < N; i++) {
                size_t size = random_size(&seed);
                bad |= objs[i] && !check_verify(objs[i], size < 64 ? size : 64, (unsigned)i);
                t_free(objs[i]);
            }
            _exit(bad);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fork_failures++;
    }
}
static void fork_hooks_prepare(void) { tcache_fork_prepare(); }
static void fork_hooks_parent(void) { tcache_fork_parent(); }
static void fork_hooks_child(void) { tcache_fork_child(); }
static void fork_threads(void)
{
    pthread_atfork(fork_hooks_prepare, fork_hooks_parent, fork_hooks_child);
    pthread_t busy[3];
    fork_stop = 0;
    for (int i = 0; i < 3; i++)
        pthread_create(&busy[i], NULL, fork_busy, (void *)(uintptr_t)(i + 11));
    in_thread(fork_body);
    __atomic_store_n(&fork_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++)
        pthread_join(busy[i], NULL);
    CHECKF(fork_failures == 0, "%d of 10 children failed", fork_failures);
}

int main(void)
{
    check_begin("thread_cache");
    sm_err_callback_set(on_error);
    CHECK(tcache_create() == 0);
    RUN_CASE(first_miss_then_hit);
    RUN_CASE(lifo_reuse);
    RUN_CASE(fill_patterns);
    RUN_CASE(slow_start);
    RUN_CASE(first_objects_do_not_share_lines);
    RUN_CASE(overflow);
    RUN_CASE(batches_grow);
    RUN_CASE(gc_low_water);
    RUN_CASE(idle_scan);
    RUN_CASE(reclaim_none);
    RUN_CASE(remote_block_not_kept);
    RUN_CASE(budget);
    RUN_CASE(thread_exit_returns_all);
    RUN_CASE(spare_caches_bounded);
    RUN_CASE(destructor_after_exit);
    RUN_CASE(sized_free);
    RUN_CASE(pass_through);
    RUN_CASE(aligned);
    RUN_CASE(hit_paths);
    RUN_CASE(fresh_flag);
    RUN_CASE(double_free);
    RUN_CASE(cross_thread);
    RUN_CASE(stress8);
    RUN_CASE(fork_threads);
    return check_end();
}
