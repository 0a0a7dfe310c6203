/* thread_cache's per-thread lifecycle: a thread's cache is made on its first slow path and given
 * back when the thread exits. Every thread starts at the constant empty cache; its first miss
 * builds the shared tables (once per process), attaches the thread to the composition's lifecycle
 * service (platform/lifecycle.h: no thread-exit key or static TLS of this layer's own) and takes
 * the cache from the metadata route (core/meta_route.h), never from libc, or one an exited thread
 * left (spares, below). At exit the cache returns every object to the next layer and itself to
 * the spares or the route (a release of everything returns the spares), and the thread points at
 * the constant retired cache, which passes every request down and never makes a cache again:
 * destructors that run after ours (glibc runs key destructors for up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds) may still allocate and free, and the rounds end. A thread
 * that cannot have a cache (no tables, no exit hook to be had) is retired at once; one whose cache
 * could not be allocated tries again on its next slow path. A part of layers/addon/thread_cache.h,
 * which includes it after its types and reclaim part (no include guard).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake */
#ifndef SM_THREAD_CACHE_PARTS
#include "../thread_cache.h"
#else

/* Caches of exited threads kept for the next threads, up to spares_max: taking one from the
 * metadata route and giving it back at each thread's end cost a mapping and an unmapping per
 * thread, and the unmapping's TLB shootdown interrupts every CPU the process runs on (a program
 * starting and joining 4 threads at a time, 512 requests each: 2x glibc's time; docs/layers.md,
 * thread_cache). Linked through their first word, under their own platform lock (taken once per
 * thread start and end; fork: held across it). */
enum { SM_FN(spares_max) = 8 };
static struct {
    sm_plat_lock_t lock;
    void *head;
    unsigned n;
} SM_FN(spares) = { SM_PLAT_LOCK_INIT, NULL, 0 };

SM_SLOWPATH void *SM_FN(spare_take)(void)
{
    sm_plat_lock(&SM_FN(spares).lock);
    void *c = SM_FN(spares).head;
    if (c) {
        SM_FN(spares).head = *(void **)c;
        SM_FN(spares).n--;
    }
    sm_plat_unlock(&SM_FN(spares).lock);
    return c;
}

/* Keeps cache for a later thread; false when spares_max are kept already. */
SM_SLOWPATH bool SM_FN(spare_keep)(void *cache)
{
    sm_plat_lock(&SM_FN(spares).lock);
    bool kept = SM_FN(spares).n < SM_FN(spares_max);
    if (kept) {
        *(void **)cache = SM_FN(spares).head;
        SM_FN(spares).head = cache;
        SM_FN(spares).n++;
    }
    sm_plat_unlock(&SM_FN(spares).lock);
    return kept;
}

/* A cache struct back to the metadata route. */
SM_SLOWPATH void SM_FN(cache_free)(void *cache)
{
    sm_mctx_t f = sm_mctx_block(cache, sizeof(struct SM_FN(cache)), SM_F_SIZED);
    SM_FN(meta_free)(&f);
}

/* Gives every spare back to the metadata route (a release of everything: malloc_trim). */
SM_SLOWPATH void SM_FN(spares_free)(void)
{
    sm_plat_lock(&SM_FN(spares).lock);
    void *c = SM_FN(spares).head;
    SM_FN(spares).head = NULL;
    SM_FN(spares).n = 0;
    sm_plat_unlock(&SM_FN(spares).lock);
    while (c) {
        void *next = *(void **)c;
        SM_FN(cache_free)(c);
        c = next;
    }
}

/* The calling thread's cache, created on its first slow path; NULL when the thread is to bypass
 * the cache (retired, or no memory for a cache, or no thread-exit hook could be had). */
SM_SLOWPATH struct SM_FN(cache) *SM_FN(cache_get)(void)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    if (!SM_FN(is_static)(cache))
        return cache;
    if (cache == &SM_FN(retired_cache))
        return NULL;
    if (!sm_conf.tcache_on)
        return NULL; /* tcache:false, or junk/zero (core/conf.h): the thread stays on the empty cache */
    sm_plat_once(&SM_FN(obj).once, SM_FN(init_once));
    if (!SM_FN(obj).ready || !sm_thread_attach(SM_FN(thread_exit))) {
        /* no tables, or no exit hook (a cache would leak when the thread ends) */
        SM_FN(tls) = (struct SM_FN(cache) *)&SM_FN(retired_cache);
        return NULL;
    }
    /* The cache is the allocator's own metadata: it comes from the metadata route, never libc. */
    cache = (struct SM_FN(cache) *)SM_FN(spare_take)();
    if (!cache) {
        sm_mctx_t r = sm_mctx_alloc(sizeof(struct SM_FN(cache)), SM_CACHELINE, 0);
        cache = (struct SM_FN(cache) *)SM_FN(meta_alloc)(&r);
    }
    if (!cache)
        return NULL; /* this request bypasses the cache; a later slow path tries again */
    memset(cache, 0, sizeof *cache);
    if (SM_OPT_HARDEN) {
        /* A link key no other cache shares, from the process's secret and this cache's address
         * (which differs per thread and per run); the process's check (tables.h). */
        cache->key = (uintptr_t)sm_mix64(sm_secret() ^ (uintptr_t)cache ^ sm_plat_cycles());
        cache->check = SM_FN(obj).check;
    }
#if SM_OPT_HOLD_BYTES
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        uint32_t size = SM_FN(obj).class_bytes[cls], n = size ? (uint32_t)(SM_OPT_HOLD_BYTES) / size : 0;
        cache->list[cls].hold = (uint16_t)(!size ? 0 : n < 1 ? 1 : n > SM_FN(list_max) / 2 ? SM_FN(list_max) / 2 : n);
    }
#endif
    /* A remote list holds at most a batch (reclaim.h, remote_overflow): outside the budget, and
     * only for the classes the next layer partitions (its words name no other partition's slab). */
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        uint32_t size = SM_FN(obj).class_bytes[cls];
        cache->remote[cls].limit = size && size <= SM_FN(conf_max) ? SM_FN(batch_of)(cls) : 0;
    }
    cache->want = SM_FN(budget_for)(sm_plat_cpu());
    __atomic_add_fetch(&SM_FN(obj).caches_made, 1, __ATOMIC_RELAXED);
    SM_FN(pool_join)(cache);
    SM_FN(tls) = cache;
    return cache;
}

/* Returns every cached object and the cache itself to the next layer; the thread is retired. A
 * second call (a destructor that ran after ours) finds the retired cache and does nothing. */
SM_SLOWPATH void SM_FN(cache_destroy)(void)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    SM_FN(tls) = (struct SM_FN(cache) *)&SM_FN(retired_cache);
    if (SM_FN(is_static)(cache))
        return;
    struct SM_FN(sink) sink;
    sink.n = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++)
        SM_FN(drain)(cache, &cache->list[cls], cache->list[cls].count, &sink);
    SM_FN(remote_home)(cache, &sink);
    SM_FN(give_blocks)(sink.blocks, sink.n);
    SM_FN(pool_leave)(cache);
    if (!SM_FN(spare_keep)(cache))
        SM_FN(cache_free)(cache);
}

#endif /* SM_THREAD_CACHE_PARTS */
