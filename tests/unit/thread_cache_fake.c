/* Unit test of the thread_cache add-on layer over a fake next layer offering BATCH and OWNER
 * (tests/support/fake_batch.h) instead of a real slab_lk: the fake records every batch crossing,
 * runs out of memory and calls blocks "not local" on demand, and counts the contract violations
 * that reach it. tests/unit/thread_cache.c tests the same layer over the real slab_lk.
 *     cache :: fb (fake_batch, sizeclass tc)
 * Each case runs in a fresh thread (a new, empty cache); the thread's exit returns its cache. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

/* fake_batch over another layer (SM_NEXT), for the check of the fake itself at the end */
#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER fbn
#define SM_NEXT fk
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

#define SM_LAYER cache
#define SM_NEXT fb
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>

_Static_assert(cache_thread_safe == 1 && cache_min_align == 16 && cache_zeroed == 0, "properties");
_Static_assert(cache_caps == (SM_CAP_HIT | SM_CAP_MOVE) && fb_caps == (SM_CAP_BATCH | SM_CAP_OWNER), "capabilities");

#define FB(field) FAKE_BATCH_GET(fb, field)

/* ---- error policy recorder ---- */
#include "tests/support/err_record.h"

/* ---- the API as a socket would call it ---- */
static void *t_malloc(size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n ? n : 1, 0, 0);
    return cache_alloc(&c);
}
static void *t_aligned(size_t n, size_t align)
{
    sm_mctx_t c = sm_mctx_alloc(n ? n : 1, align, 0);
    return cache_alloc(&c);
}
static void t_free(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    cache_free(&c);
}
static void t_free_sized(void *p, size_t n)
{
    sm_mctx_t c = sm_mctx_block(p, n, SM_F_SIZED);
    cache_free(&c);
}
static size_t t_usable(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    return cache_getmeta(&c) ? c.usable : 0;
}
static unsigned cls_of(size_t size) { return sm_sizeclass_tc_size_to_class(size); }
static const struct cache_list *my_list(size_t size) { return &cache_tls->list[cls_of(size)]; }
static bool on_my_list(size_t size, const void *p)
{
    const struct cache_list *l = my_list(size);
    const void *q = l->head;
    for (uint32_t i = 0; q && i < l->count; i++, q = cache_link_load(cache_tls, q)) /* links are encoded */
        if (q == p)
            return true;
    return false;
}

static void *thread_trampoline(void *fn)
{
    ((void (*)(void))fn)();
    return NULL;
}
/* Runs fn in a new thread (a fresh cache) and waits for it; then nothing may be left below but what
 * the main thread holds and the spare caches (exited threads' cache structs kept for the next
 * threads: lifecycle.h), and nothing may have reached the fake that breaks the contract. */
static size_t live_before, spares_before;
static void in_thread(void (*fn)(void))
{
    live_before = FB(live_blocks);
    spares_before = cache_spares.n;
    unsigned long bad = FB(bad_frees);
    pthread_t t;
    pthread_create(&t, NULL, thread_trampoline, (void *)fn);
    pthread_join(t, NULL);
    CHECKF(FB(live_blocks) - cache_spares.n == live_before - spares_before,
           "the thread's exit left %ld blocks below (spares %u, %zu before)",
           (long)(FB(live_blocks) - cache_spares.n) - (long)(live_before - spares_before), cache_spares.n,
           spares_before);
    CHECKF(FB(bad_frees) == bad, "%lu contract violations reached the fake", FB(bad_frees) - bad);
}

/* ---- cases ---- */

/* A new thread's first malloc misses: one batch for the list (four cache lines of 64-byte objects)
 * and the cache struct itself from the next layer; then the class hits, below is never asked, and
 * each unsized free looks its owner up exactly once. */
static void first_miss_then_hits_body(void)
{
    CHECK(cache_tls == (struct cache_cache *)&cache_empty_cache);
    unsigned long batches = FB(alloc_batch_calls), larges = FB(large_allocs), frees = FB(frees);
    fb_log_reset();
    void *p = t_malloc(64);
    CHECK(p != NULL && !cache_is_static(cache_tls));
    CHECKF(FB(alloc_batch_calls) == batches + 1, "%lu batch calls on the first malloc", FB(alloc_batch_calls) - batches);
    CHECKF(FB(large_allocs) == larges + 1, "cache struct: %lu blocks from the next layer", FB(large_allocs) - larges);
    CHECKF(fb_obj.log_n == 1 && fb_obj.log[0].size == 64 && fb_obj.log[0].want == 4 && fb_obj.log[0].got == 4,
           "first refill asked %u objects of %zu", fb_obj.log[0].want, fb_obj.log[0].size);
    CHECK(fb_is_live(cache_tls) && fb_is_live(p));
    check_fill(p, 64, 1);
    CHECK(check_verify(p, 64, 1));
    unsigned long slots = FB(owner_lookups);
    t_free(p);
    for (unsigned i = 0; i < 1000; i++) {
        void *q = t_malloc(64);
        CHECKF(q == p, "round %u: got %p, want the cached %p", i, q, p);
        check_fill(q, 64, i);
        CHECKF(check_verify(q, 64, i), "round %u: object overwritten", i);
        t_free(q);
    }
    CHECKF(FB(owner_lookups) == slots + 1001, "%lu owner lookups for 1001 unsized frees", FB(owner_lookups) - slots);
    CHECKF(FB(alloc_batch_calls) == batches + 1 && FB(frees) == frees && FB(free_batch_calls) == 0,
           "hits went below");
    CHECK(fb_is_live(p)); /* cached: still the cache's object as far as the next layer knows */
}
static void first_miss_then_hits(void) { in_thread(first_miss_then_hits_body); }

/* Slow start: a class's refills ask for 1, 2, 3, ... objects (of the size asked), up to its batch
 * size (64 KiB / 256 B, at most 32), never more and never fewer than the refill before. */
static void refill_batch_sizes_body(void)
{
    enum { N = 700 };
    static __thread void *objs[N];
    fb_log_reset();
    for (int i = 0; i < N; i++) {
        objs[i] = t_malloc(256);
        CHECK(objs[i] != NULL);
        check_fill(objs[i], 256, (unsigned)i);
    }
    unsigned batch = cache_batch_of(cls_of(256)), n = fb_obj.log_n, most = 0, objs_below = 0;
    CHECKF(batch == 32, "batch of the 256-byte class is %u", batch);
    CHECKF(n >= 30, "%u refills for %d mallocs", n, N);
    for (unsigned i = 0; i < 5 && i < n; i++)
        CHECKF(fb_obj.log[i].want == i + 1, "refill %u asked for %u, want %u", i, fb_obj.log[i].want, i + 1);
    for (unsigned i = 0; i < n; i++) {
        CHECKF(fb_obj.log[i].size == 256, "refill %u asked for size %zu", i, fb_obj.log[i].size);
        CHECKF(fb_obj.log[i].want <= batch, "refill %u asked for %u > batch %u", i, fb_obj.log[i].want, batch);
        CHECKF(fb_obj.log[i].got == fb_obj.log[i].want, "refill %u got %u of %u", i, fb_obj.log[i].got,
               fb_obj.log[i].want);
        CHECKF(!i || fb_obj.log[i].want >= fb_obj.log[i - 1].want, "refill %u asked for fewer (%u) than before (%u)", i,
               fb_obj.log[i].want, fb_obj.log[i - 1].want);
        most = fb_obj.log[i].want > most ? fb_obj.log[i].want : most;
        objs_below += fb_obj.log[i].got;
    }
    CHECKF(most == batch, "the batch grew to %u, want %u", most, batch);
    CHECKF(objs_below == N + my_list(256)->count, "%u objects fetched, %d handed out, %u cached", objs_below, N,
           my_list(256)->count);
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(objs[i], 256, (unsigned)i), "object %d overwritten", i);
        t_free(objs[i]);
    }
    /* a large class: a batch is 64 KiB worth, 8 objects of 8 KiB */
    fb_log_reset();
    for (int i = 0; i < 100; i++)
        objs[i] = t_malloc(8192);
    for (unsigned i = 0; i < fb_obj.log_n; i++)
        CHECKF(fb_obj.log[i].want <= 8 && fb_obj.log[i].size == 8192, "refill %u of 8 KiB asked for %u", i,
               fb_obj.log[i].want);
    CHECK(fb_obj.log_n > 0 && fb_obj.log[fb_obj.log_n - 1].want == 8);
    for (int i = 0; i < 100; i++)
        t_free(objs[i]);
}
static void refill_batch_sizes(void) { in_thread(refill_batch_sizes_body); }

/* Frees beyond a list's limit release batches to the next layer; a list never exceeds its limit; every
 * object freed is either cached or back below. */
static void overflow_releases_body(void)
{
    enum { N = 1000 };
    static __thread void *objs[N];
    unsigned cls = cls_of(256);
    for (int i = 0; i < N; i++) {
        objs[i] = t_malloc(256);
        check_fill(objs[i], 256, (unsigned)i + 7);
    }
    unsigned long calls = FB(free_batch_calls), released = FB(free_batch_objs);
    size_t below = FB(live_by_class[cls]);
    const struct cache_list *l = my_list(256);
    unsigned cached_before = l->count;
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(objs[i], 256, (unsigned)i + 7), "object %d overwritten", i);
        t_free(objs[i]);
        CHECKF(l->count <= l->limit && l->limit <= cache_list_max, "count %u limit %u", l->count, l->limit);
    }
    unsigned long ncalls = FB(free_batch_calls) - calls, nobjs = FB(free_batch_objs) - released;
    CHECKF(ncalls > 0, "no batch released");
    CHECKF(nobjs <= ncalls * cache_batch_of(cls), "%lu objects in %lu batches of at most %u", nobjs, ncalls,
           cache_batch_of(cls));
    CHECKF(nobjs + l->count == N + cached_before, "%lu released + %u cached != %d freed + %u cached before", nobjs,
           l->count, N, cached_before);
    CHECKF(FB(live_by_class[cls]) == below - nobjs, "the fake holds %zu live 256 B objects, want %zu",
           FB(live_by_class[cls]), below - nobjs);
    CHECK(l->count > 0);
}
static void overflow_releases(void) { in_thread(overflow_releases_body); }

/* GC by low-water mark: a burst's list, left idle while another class's slow paths run GCs, goes
 * back to the next layer entirely. */
static void gc_returns_idle_lists_body(void)
{
    enum { BURST = 2000, OTHER = 6000 };
    static __thread void *objs[OTHER];
    unsigned hot = cls_of(64);
    for (int i = 0; i < BURST; i++)
        objs[i] = t_malloc(64);
    for (int i = 0; i < BURST; i++)
        t_free(objs[i]);
    const struct cache_list *l = my_list(64);
    unsigned cached = l->count;
    size_t below = FB(live_by_class[hot]);
    CHECKF(cached > cache_batch_of(hot), "only %u cached after the burst", cached);
    CHECKF(below == cached, "the fake holds %zu live 64 B objects, the cache %u", below, cached);
    unsigned gcs = 0, events = cache_tls->events;
    for (int i = 0; i < OTHER; i++) {
        objs[i] = t_malloc(32);
        check_fill(objs[i], 32, (unsigned)i);
        gcs += cache_tls->events < events;
        events = cache_tls->events;
    }
    CHECKF(gcs >= 3, "only %u GCs", gcs);
    CHECKF(l->count == 0, "class 64, idle for whole GC periods, still caches %u of %u", l->count, cached);
    CHECKF(FB(live_by_class[hot]) == 0, "the fake still counts %zu live 64 B objects", FB(live_by_class[hot]));
    for (int i = 0; i < OTHER; i++) {
        CHECKF(check_verify(objs[i], 32, (unsigned)i), "object %d overwritten", i);
        t_free(objs[i]);
    }
}
static void gc_returns_idle_lists(void) { in_thread(gc_returns_idle_lists_body); }

/* A thread's exit returns every cached object and the cache struct itself (through the layer's own
 * exit key), and calls the next layer's thread_exit once. in_thread checks what is left below. */
static void *exit_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { N = 400 };
    void *objs[N];
    size_t size[N];
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < N; i++) {
            size[i] = (size_t)rand_r(&seed) % 9000;
            objs[i] = t_malloc(size[i]);
            if (objs[i])
                check_fill(objs[i], size[i], (unsigned)i);
        }
        for (int i = 0; i < N; i++) {
            if (!objs[i] || !check_verify(objs[i], size[i], (unsigned)i))
                return (void *)1;
            t_free(objs[i]);
        }
    }
    return NULL;
}
static void thread_exit_returns_everything(void)
{
    size_t live = FB(live_blocks);
    unsigned spares = cache_spares.n;
    unsigned long exits = FB(thread_exits), larges = FB(large_allocs);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, exit_worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECKF(r == NULL, "thread %d: an object failed or was overwritten", i);
    }
    /* each thread's cache struct is a new one or a spare an earlier thread left */
    CHECKF(FB(large_allocs) - larges <= 4, "%lu cache structs made for 4 threads", FB(large_allocs) - larges);
    CHECKF(FB(live_blocks) - cache_spares.n == live - spares, "%ld blocks not returned",
           (long)(FB(live_blocks) - cache_spares.n) - (long)(live - spares));
    CHECKF(FB(live_large) == cache_spares.n, "%zu cache structs held below, %u of them spares", FB(live_large),
           cache_spares.n);
    /* a release of everything gives the spares back */
    sm_release_t all = sm_release_request(sm_plat_now_ms(), SM_RELEASE_ALL);
    cache_release(&all);
    CHECKF(FB(live_large) == 0 && cache_spares.n == 0, "after a release of everything %zu cache structs held below",
           FB(live_large));
    CHECKF(FB(thread_exits) == exits + 4, "%lu next-layer thread exits for 4 threads", FB(thread_exits) - exits);
    CHECK(FB(bad_frees) == 0 && err_total() == 0);
}

/* A double free of an object still in the cache is caught there and ignored (reported once, never
 * passed down); once the object went back below (a release of everything), a second free is the
 * next layer's to catch: passed down, where the fake counts it. */
static void double_free_caught_body(void)
{
    err_reset();
    void *keep = t_malloc(64), *p = t_malloc(64);
    t_free(keep);
    t_free(p);
    unsigned long frees = FB(frees), doubles = FB(double_frees);
    t_free(p);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu errors, %lu double frees", err_total(),
           err_counts[SM_ERR_DOUBLE_FREE]);
    CHECKF(FB(frees) == frees && FB(double_frees) == doubles, "the double free went below");
    void *x = t_malloc(64), *y = t_malloc(64), *z = t_malloc(64);
    CHECKF(x == p && y == keep && z != p && z != keep, "a double-freed object was handed out twice");
    check_fill(x, 64, 1), check_fill(y, 64, 2), check_fill(z, 64, 3);
    CHECK(check_verify(x, 64, 1) && check_verify(y, 64, 2) && check_verify(z, 64, 3));
    t_free(x), t_free(y), t_free(z);
    sm_release_t r = sm_release_request(sm_plat_now_ms(), SM_RELEASE_ALL);
    cache_release(&r);
    CHECK(my_list(64)->count == 0 && !fb_is_live(p));
    t_free(p); /* marked, not on the list: a cache gave it back, so a double free, reported here */
    CHECKF(FB(double_frees) == doubles, "the next layer saw %lu double frees", FB(double_frees) - doubles);
    CHECKF(err_total() == 2 && err_counts[SM_ERR_DOUBLE_FREE] == 2 && my_list(64)->count == 0,
           "%lu errors: the cache took the freed object back or missed it", err_total());
    err_reset();
}
static void double_free_caught(void) { in_thread(double_free_caught_body); }

/* Sized free: nothing asked below, the block joins the list of the size named; a sized free of a
 * size the cache does not serve goes down with its size. */
static void sized_free_body(void)
{
    void *p = t_malloc(100), *q = t_malloc(100);
    check_fill(p, 100, 5);
    t_free(q); /* the list has room now */
    void *r = t_malloc(100);
    unsigned long slots = FB(owner_lookups), frees = FB(frees);
    CHECK(check_verify(p, 100, 5));
    t_free_sized(p, 100);
    CHECKF(FB(owner_lookups) == slots, "a sized free looked its owner up");
    CHECK(on_my_list(100, p) && FB(frees) == frees);
    CHECK(t_malloc(100) == p);
    t_free(p), t_free(r);
    void *big = t_malloc(9000); /* above the cached range: the next layer's object of its class */
    CHECK(big && t_usable(big) == sm_sizeclass_tc_class_to_size(cls_of(9000)));
    check_fill(big, 9000, 6);
    CHECK(check_verify(big, 9000, 6));
    t_free_sized(big, 9000);
    CHECKF(FB(frees) == frees + 1 && FB(last_free_size) == 9000 && (FB(last_free_flags) & SM_F_SIZED),
           "passed down as size %zu flags %#x", FB(last_free_size), FB(last_free_flags));
    CHECK(!fb_is_live(big));
}
static void sized_free(void) { in_thread(sized_free_body); }

/* A free that reaches the slow path asks owner_local and does not keep a block the next layer calls
 * not local (it goes down at once, with the owner word the hit path read); hit-path frees do not
 * ask (documented: only a free that finds its list full does). The same sequence with local blocks
 * keeps the block. Either way the free looks its owner up once, in the hit path. */
static void not_local_run(bool remote, bool *kept, bool *passed_down)
{
    enum { N = 64 };
    void *objs[N];
    for (int i = 0; i < N; i++) {
        objs[i] = t_malloc(64);
        check_fill(objs[i], 64, (unsigned)i);
    }
    const struct cache_list *l = my_list(64);
    __atomic_store_n(&fb_obj.not_local, remote, __ATOMIC_RELAXED);
    unsigned long asked = FB(owner_locals), frees = FB(frees), carried = FB(words_carried);
    int i = 0;
    while (i < N && l->count < l->limit) { /* hits: room on the list */
        CHECKF(check_verify(objs[i], 64, (unsigned)i), "object %d overwritten", i);
        t_free(objs[i++]);
    }
    CHECKF(FB(owner_locals) == asked, "%lu hit-path frees asked owner_local", FB(owner_locals) - asked);
    CHECK(i < N && l->count == l->limit);
    void *x = objs[i++];
    unsigned long lookups = FB(owner_lookups), locals = FB(owner_locals);
    t_free(x); /* the list is full: the slow path */
    CHECKF(FB(owner_locals) == locals + 1, "owner_local asked %lu times on the slow path", FB(owner_locals) - locals);
    CHECKF(FB(owner_lookups) == lookups + 1, "%lu owner lookups for one overflowing free", FB(owner_lookups) - lookups);
    CHECKF(FB(words_carried) == carried + (remote ? 1 : 0) && FB(wrong_words) == 0,
           "%lu frees passed down with an owner word, %lu wrong", FB(words_carried) - carried, FB(wrong_words));
    *kept = on_my_list(64, x);
    *passed_down = FB(frees) == frees + 1 && !fb_is_live(x);
    __atomic_store_n(&fb_obj.not_local, 0, __ATOMIC_RELAXED);
    while (i < N)
        t_free(objs[i++]);
}
static void not_local_body(void)
{
    bool kept, down;
    not_local_run(true, &kept, &down);
    CHECKF(!kept && down, "a block of another partition was %s", kept ? "kept" : "neither kept nor passed down");
    CHECKF(FB(not_local_answers) > 0, "the fake never answered 'not local'");
    CHECKF(FB(no_context) == 0, "owner_local was asked without the request's context");
}
static void local_body(void)
{
    bool kept, down;
    not_local_run(false, &kept, &down);
    CHECKF(kept && !down, "a local block was not kept");
}
static void not_local_blocks_are_not_kept(void)
{
    in_thread(not_local_body);
    in_thread(local_body);
}

/* Out of memory below: with no cache yet, NULL + ENOMEM and no cache made (a later slow path tries
 * again); a short batch serves what it got; an empty one sends the request down, which fails too. */
static void out_of_memory_body(void)
{
    sm_release_t all = sm_release_request(sm_plat_now_ms(), SM_RELEASE_ALL);
    cache_release(&all); /* no spare cache either: a cache needs memory from below */
    pthread_mutex_lock(&fb_obj.lock);
    fb_obj.limit_bytes = 1;
    pthread_mutex_unlock(&fb_obj.lock);
    errno = 0;
    void *p = t_malloc(64);
    CHECKF(p == NULL && errno == ENOMEM, "got %p, errno %d", p, errno);
    CHECK(cache_is_static(cache_tls) && cache_tls != (struct cache_cache *)&cache_retired_cache);
    errno = 0;
    CHECK(t_malloc(100000) == NULL && errno == ENOMEM);
    pthread_mutex_lock(&fb_obj.lock);
    fb_obj.limit_bytes = 0;
    pthread_mutex_unlock(&fb_obj.lock);
    void *a = t_malloc(64); /* the cache now, and four objects */
    CHECK(a && !cache_is_static(cache_tls));
    const struct cache_list *l = my_list(64);
    void *held[8];
    unsigned n = 0;
    while (l->count && n < 8)
        held[n++] = t_malloc(64);
    CHECK(l->count == 0);
    pthread_mutex_lock(&fb_obj.lock);
    fb_obj.limit_bytes = fb_obj.live_bytes + 2 * 64; /* two objects more, whatever is asked */
    pthread_mutex_unlock(&fb_obj.lock);
    fb_log_reset();
    void *b = t_malloc(64);
    CHECKF(b && fb_obj.log_n == 1 && fb_obj.log[0].got == 2 && fb_obj.log[0].want > 2,
           "short batch: asked %u, got %u", fb_obj.log[0].want, fb_obj.log[0].got);
    void *c = t_malloc(64); /* the other one, cached */
    CHECK(c && c != b && l->count == 0 && fb_obj.log_n == 1);
    errno = 0;
    void *d = t_malloc(64); /* empty batch, then the pass-down fails as well */
    CHECKF(d == NULL && errno == ENOMEM, "got %p, errno %d", d, errno);
    CHECK(fb_obj.log_n == 2 && fb_obj.log[1].got == 0);
    pthread_mutex_lock(&fb_obj.lock);
    fb_obj.limit_bytes = 0;
    pthread_mutex_unlock(&fb_obj.lock);
    check_fill(b, 64, 1), check_fill(c, 64, 2);
    CHECK(check_verify(b, 64, 1) && check_verify(c, 64, 2));
    t_free(a), t_free(b), t_free(c);
    for (unsigned i = 0; i < n; i++)
        t_free(held[i]);
}
static void out_of_memory(void) { in_thread(out_of_memory_body); }

/* A release of everything empties the calling thread's lists into the next layer (bytes counted) and
 * then reaches the next layer's release; a decayed release leaves the lists alone. */
static void release_all_body(void)
{
    static const size_t sizes[] = { 16, 64, 256, 1024, 8192 };
    void *objs[5][20];
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 20; i++)
            objs[k][i] = t_malloc(sizes[k]);
    void *held = t_malloc(48);
    check_fill(held, 48, 9);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 20; i++)
            t_free(objs[k][i]);
    size_t cached = 0;
    for (unsigned cls = 0; cls < cache_class_count; cls++)
        cached += (size_t)cache_tls->list[cls].count * sm_sizeclass_tc_class_to_size(cls);
    CHECK(cached >= 5 * 20 * 16);
    unsigned long releases = FB(releases), alls = FB(release_alls);
    sm_release_t d = sm_release_request(sm_plat_now_ms() + 100000, SM_RELEASE_DECAYED);
    cache_release(&d);
    CHECKF(d.released == 0 && my_list(64)->count > 0, "a decayed release took %zu bytes", d.released);
    sm_release_t r = sm_release_request(sm_plat_now_ms(), SM_RELEASE_ALL);
    cache_release(&r);
    CHECKF(r.released == cached, "released %zu of %zu cached bytes", r.released, cached);
    for (unsigned cls = 0; cls < cache_class_count; cls++)
        CHECKF(cache_tls->list[cls].count == 0, "class %u still caches %u", cls, cache_tls->list[cls].count);
    CHECKF(FB(releases) == releases + 2 && FB(release_alls) == alls + 1, "the releases did not reach the fake");
    /* below: the cache struct and the one object the thread holds; the spares went back (the
     * thread's cache was one of those there before, or a new one) */
    size_t want = live_before - spares_before + 2;
    CHECKF(FB(live_blocks) == want && cache_spares.n == 0, "the fake holds %zu blocks, want %zu; %u spares",
           FB(live_blocks), want, cache_spares.n);
    CHECK(check_verify(held, 48, 9));
    t_free(held);
}
static void release_all(void) { in_thread(release_all_body); }

/* Aligned requests up to 4 KiB come from the lists (refilled in batches, objects of a class aligned
 * to the largest power of two dividing its size); larger alignments and sizes go down one by one. */
static void aligned_and_pass_down_body(void)
{
    t_free(t_malloc(64));
    unsigned long allocs = FB(allocs), larges = FB(large_allocs), frees = FB(frees);
    for (size_t align = 32; align <= 4096; align *= 2)
        for (size_t n = 1; n <= 8192; n = n * 3 + 1) {
            void *p[10];
            for (int i = 0; i < 10; i++) {
                p[i] = t_aligned(n, align);
                size_t usable = p[i] ? t_usable(p[i]) : 0;
                CHECKF(p[i] && sm_ptr_aligned(p[i], align) && usable >= n && usable % align == 0,
                       "aligned(%zu, %zu) = %p, usable %zu", n, align, p[i], usable);
                if (p[i])
                    check_fill(p[i], n, (unsigned)i);
            }
            for (int i = 0; i < 10; i++) {
                CHECKF(!p[i] || check_verify(p[i], n, (unsigned)i), "aligned(%zu, %zu) overwritten", n, align);
                t_free(p[i]);
            }
        }
    CHECKF(FB(allocs) == allocs && FB(large_allocs) == larges && FB(frees) == frees,
           "aligned requests went below one by one");
    void *a = t_aligned(100, 8192), *b = t_malloc(9000), *c = t_malloc(300000);
    CHECK(a && b && c && sm_ptr_aligned(a, 8192));
    CHECKF(FB(large_allocs) == larges + 2 && FB(allocs) == allocs + 1, "%lu large, %lu single allocations below",
           FB(large_allocs) - larges, FB(allocs) - allocs);
    check_fill(a, 100, 1), check_fill(b, 9000, 2), check_fill(c, 300000, 3);
    CHECK(check_verify(a, 100, 1) && check_verify(b, 9000, 2) && check_verify(c, 300000, 3));
    t_free(a), t_free(b), t_free(c);
    CHECKF(FB(frees) == frees + 3 && !fb_is_live(a) && !fb_is_live(b) && !fb_is_live(c), "%lu frees below",
           FB(frees) - frees);
    /* a pointer nobody owns: passed down, where the fake catches it */
    long on_stack[4];
    unsigned long foreign = FB(foreign_frees);
    t_free(&on_stack[2]);
    CHECK(FB(foreign_frees) == foreign + 1 && err_total() == 0);
    pthread_mutex_lock(&fb_obj.lock);
    fb_obj.bad_frees--, fb_obj.foreign_frees--;
    pthread_mutex_unlock(&fb_obj.lock);
}
static void aligned_and_pass_down(void) { in_thread(aligned_and_pass_down_body); }

/* The fake itself, over a next layer: objects of the classes are its own, everything else (large or
 * aligned requests, blocks it never gave out) goes below, and contract violations inside its slabs
 * are still its to count. */
static void fake_batch_over_a_next_layer(void)
{
    sm_mctx_t c = sm_mctx_alloc(100, 16, 0), big = sm_mctx_alloc(300000, 16, 0), al = sm_mctx_alloc(100, 4096, 0);
    void *objs[8];
    void *p = fbn_alloc(&c);
    unsigned got = fbn_alloc_batch(&c, objs, 8);
    CHECK(p && got == 8 && fk_obj.live_blocks == 0 && fbn_obj.live_objs == 9);
    CHECK(fbn_owner_slot(p, fbn_block_owner(p)) == cls_of(100) << 4 &&
          fbn_owner_slot((char *)p + 16, fbn_block_owner((char *)p + 16)) == (unsigned)fbn_batch_classes << 4);
    void *b = fbn_alloc(&big), *a = fbn_alloc(&al);
    CHECK(b && a && sm_ptr_aligned(a, 4096) && fk_obj.live_blocks == 2 && fbn_obj.passed_down == 2);
    sm_mctx_t m = sm_mctx_block(b, 0, 0);
    CHECK(fbn_getmeta(&m) && m.usable >= 300000 && !strcmp(m.owner, "fk"));
    CHECK(fbn_resize(&m, 1000) && fbn_owner_slot(b, fbn_block_owner(b)) == (unsigned)fbn_batch_classes << 4 &&
          fbn_owner_local(b, fbn_block_owner(b), &m));
    void *back[3] = { b, a, p };
    fbn_free_batch(back, 3); /* two go below */
    CHECK(fk_obj.live_blocks == 0 && fk_obj.frees == 2 && fbn_obj.live_objs == 8);
    sm_mctx_t inner = sm_mctx_block((char *)objs[0] + 16, 0, 0), twice = sm_mctx_block(p, 0, 0);
    fbn_free(&inner);
    fbn_free(&twice);
    CHECK(fbn_obj.interior_frees == 1 && fbn_obj.double_frees == 1 && fk_obj.bad_frees == 0);
    fbn_free_batch(objs, got);
    CHECK(fbn_obj.live_blocks == 0 && fk_obj.live_blocks == 0 && fk_obj.bad_frees == 0);
}

int main(void)
{
    check_begin("thread_cache_fake");
    sm_err_callback_set(on_error);
    CHECK(cache_create() == 0 && fb_obj.creates == 1);
    RUN_CASE(first_miss_then_hits);
    RUN_CASE(refill_batch_sizes);
    RUN_CASE(overflow_releases);
    RUN_CASE(gc_returns_idle_lists);
    RUN_CASE(thread_exit_returns_everything);
    RUN_CASE(double_free_caught);
    RUN_CASE(sized_free);
    RUN_CASE(not_local_blocks_are_not_kept);
    RUN_CASE(out_of_memory);
    RUN_CASE(release_all);
    RUN_CASE(aligned_and_pass_down);
    RUN_CASE(fake_batch_over_a_next_layer);
    return check_end();
}
