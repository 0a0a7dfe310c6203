/* thread_cache's way back to the next layer: objects leave a list in batches (the sink, drained
 * from the list's head), and the two passes of the reclaim policy (slot SM_RECLAIM:
 * policies/reclaim/lowwater.h states what a policy answers) run here — a collection, every so many
 * slow-path events or when a list cannot grow within the budget, and a scan, before a refill. The
 * policy says how many objects each list gives back; this part moves them and lowers the list's
 * limit by as many, so count <= limit and the byte budget keep holding. A part of
 * layers/addon/thread_cache.h, which includes it after its types, lists and tables (no include
 * guard).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake */
#ifndef SM_THREAD_CACHE_PARTS
#include "../thread_cache.h"
#else

/* The one place objects go back to the next layer (so its free_batch is inlined once). */
SM_SLOWPATH void SM_FN(give_blocks)(void **blocks, unsigned n)
{
    if (n)
        SM_NEXT_FN(free_batch)(blocks, n);
}

/* Which partitions are another's, from request c's CPU; none while the process has had one thread
 * cache (a lone thread that moves between CPUs shares no cache line with anyone), nor with a hold
 * (its FIFO lists are the quarantine every free must join). */
SM_INLINE void SM_FN(follow_partition)(struct SM_FN(cache) *cache, sm_mctx_t *c)
{
    if (SM_FN(holding) || __atomic_load_n(&SM_FN(obj).caches_made, __ATOMIC_RELAXED) < 2 ||
        (int)(cache->batches - cache->trust_until) < 0)
        cache->foreign = 0;
    else
        cache->foreign = SM_NEXT_FN(owner_foreign)(c);
}

/* Collects objects to release and hands them to the next layer a batch at a time. */
struct SM_FN(sink) {
    unsigned n;
    void *blocks[SM_FN(batch_max)];
};

/* Object p of list l failed its check (thread_cache.h, SM_OPT_HARDEN): the program wrote into an
 * object it had freed, or overflowed into one, or a signal handler's malloc or free ran inside this
 * thread's own pop or push (the lists are not reentrant: tests/api/signal_alloc.c). Reported once; the list is dropped, not followed,
 * and its objects are lost to the program (a link that was written over leads anywhere). */
SM_SLOWPATH void SM_FN(list_corrupt)(const struct SM_FN(cache) *cache, struct SM_FN(list) *l, const void *p)
{
    char detail[208];
    sm_msg_format(detail, sizeof detail,
                  "free object of %zu bytes overwritten (write after free or overflow, or malloc/free from a signal "
                  "handler that interrupted this thread's own); %u cached objects dropped",
                  (size_t)SM_FN(obj).class_bytes[SM_FN(list_class)(cache, l)], (unsigned)l->count);
    l->head = NULL;
    l->count = 0;
    if (SM_RECLAIM_FN(low_water))
        l->low = 0;
    SM_ERR_FN(raise)(SM_ERR_CORRUPTION, SM_LAYER_NAME, p, detail);
}

/* Moves the first n objects of list l (of cache) into the sink; a failed check stops it there.
 * As many at a time as the sink has room for, so the walk keeps its count in a register and tests
 * for a full sink once per stretch, not per object. */
SM_INLINE void SM_FN(drain)(const struct SM_FN(cache) *cache, struct SM_FN(list) *l, unsigned n, struct SM_FN(sink) *sink)
{
    void *p = l->head, *last = NULL;
    for (unsigned left = n; left;) {
        unsigned room = SM_FN(batch_max) - sink->n, m = left < room ? left : room;
        void **out = sink->blocks + sink->n;
        for (unsigned i = 0; i < m; i++) {
            /* NULL before count: the chain was cut (with a hold, an object appended twice) */
            if (!p || (SM_OPT_HARDEN && !SM_FN(is_cached)(cache, p))) {
                sink->n += i;
                l->head = p;
                l->count -= n - left + i;
                SM_FN(list_corrupt)(cache, l, p ? p : last);
                return;
            }
            last = p;
            out[i] = p;
            p = SM_FN(link_load)(cache, p);
        }
        left -= m;
        if ((sink->n += m) == SM_FN(batch_max)) {
            SM_FN(give_blocks)(sink->blocks, sink->n);
            sink->n = 0;
        }
    }
    l->head = p;
    l->count -= n;
    sm_stats_thread_bytes[1] += (uint64_t)n * SM_FN(obj).class_bytes[SM_FN(list_class)(cache, l)]; /* thread.deallocated */
}

/* Passive false sharing: an object of another partition's slab (another CPU's), freed here and
 * then handed out here, would be this thread's next object of its class while its neighbours are
 * in use on that CPU, every write a cache-line transfer (cache-scratch1: 63% of the worker's
 * objects on the main thread's lines, 2.4 s against mimalloc's 1.2). So such frees go on the
 * class's remote list, which malloc never takes from, and a full one goes home in one free_batch
 * (a run of one class: one critical section), unless the thread took two or more batches from
 * below since the list last filled: then it allocates from below while others' objects reach it (threads
 * that trade blocks: sh8bench, wcet), where reusing them saves the next layer's locks on both
 * sides, and they join its list as they did before remote lists. */
SM_SLOWPATH void SM_FN(remote_overflow)(struct SM_FN(cache) *cache, unsigned cls)
{
    struct SM_FN(list) *r = &cache->remote[cls], *l = &cache->list[cls];
    /* a remote list's low field: batches at its last overflow */
    bool reuse = (uint16_t)((uint16_t)cache->batches - r->low) >= 2;
    r->low = (uint16_t)cache->batches;
    if (reuse) {
        cache->trust_until = cache->batches + 64;
        cache->foreign = 0;
    }
    struct SM_FN(sink) sink;
    sink.n = 0;
    while (reuse && r->count && l->count < l->limit) {
        void *p = r->head;
        if (SM_OPT_HARDEN && !SM_FN(is_cached)(cache, p)) {
            SM_FN(list_corrupt)(cache, r, p);
            return;
        }
        r->head = SM_FN(link_load)(cache, p);
        r->count--;
        SM_FN(list_push)(cache, l, p);
    }
    SM_FN(drain)(cache, r, r->count, &sink);
    SM_FN(give_blocks)(sink.blocks, sink.n);
}
/* Every remote list goes home (a collection, the thread's exit, malloc_trim). */
SM_INLINE void SM_FN(remote_home)(struct SM_FN(cache) *cache, struct SM_FN(sink) *sink)
{
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++)
        if (cache->remote[cls].count)
            SM_FN(drain)(cache, &cache->remote[cls], cache->remote[cls].count, sink);
}

/* What the reclaim policy is shown of list l: the objects beyond its hold (SM_OPT_HOLD_BYTES), the
 * only ones a malloc may take, so the held ones never look idle (they wait by design; an idle list
 * keeps its hold until its thread exits or malloc_trim). The policy's answers (drops) then come off
 * the head, the oldest held objects first, and the hold refills from later frees. */
SM_INLINE unsigned SM_FN(count_beyond)(const struct SM_FN(list) *l, unsigned hold)
{
    return l->count > hold ? l->count - hold : 0;
}
SM_INLINE uint16_t SM_FN(low_beyond)(const struct SM_FN(list) *l, unsigned hold)
{
    return (uint16_t)(l->low > hold ? l->low - hold : 0);
}

/* A collection: each list gives back what the policy says. With `pressure`, every list other than
 * keep_cls also gives up half of its unused room, because keep_cls needs budget now. */
SM_SLOWPATH void SM_FN(gc)(struct SM_FN(cache) *cache, unsigned keep_cls, bool pressure)
{
    struct SM_FN(sink) sink;
    sink.n = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        struct SM_FN(list) *l = &cache->list[cls];
        size_t size = SM_FN(obj).class_bytes[cls];
        unsigned hold = SM_FN(hold_of)(l);
        uint16_t low = SM_FN(low_beyond)(l, hold);
        unsigned drop = SM_RECLAIM_FN(gc)(&cache->mark[cls], &low, SM_FN(count_beyond)(l, hold), SM_FN(batch_of)(cls));
        l->low = (uint16_t)(low + hold);
        SM_FN(drain)(cache, l, drop, &sink);
        unsigned cut = drop; /* count - drop <= limit - drop: the invariant holds */
        if (pressure && cls != keep_cls)
            cut += (l->limit - cut - l->count + 1u) / 2;
        l->limit = (uint16_t)(l->limit - cut);
        cache->capacity -= cut * size;
    }
    SM_FN(remote_home)(cache, &sink);
    SM_FN(give_blocks)(sink.blocks, sink.n);
    cache->events = 0;
}

/* A scan: each list gives back what the policy says, and its limit shrinks by as much. */
SM_SLOWPATH void SM_FN(scan)(struct SM_FN(cache) *cache)
{
    struct SM_FN(sink) sink;
    sink.n = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        struct SM_FN(list) *l = &cache->list[cls];
        unsigned hold = SM_FN(hold_of)(l);
        uint16_t low = SM_FN(low_beyond)(l, hold);
        unsigned drop = SM_RECLAIM_FN(scan)(&cache->mark[cls], &low, SM_FN(count_beyond)(l, hold), SM_FN(batch_of)(cls));
        l->low = (uint16_t)(low + hold);
        if (drop) {
            SM_FN(drain)(cache, l, drop, &sink);
            l->limit = (uint16_t)(l->limit - drop);
            cache->capacity -= drop * SM_FN(obj).class_bytes[cls];
        }
    }
    SM_FN(give_blocks)(sink.blocks, sink.n);
}

/* Lowers every list's limit by the same share so that the capacity fits `budget`, and gives back
 * the objects above the new limits (SM_OPT_CORE_AWARE: the thread moved to a smaller core). */
SM_SLOWPATH void SM_FN(trim)(struct SM_FN(cache) *cache, size_t budget)
{
    struct SM_FN(sink) sink;
    sink.n = 0;
    size_t capacity = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        struct SM_FN(list) *l = &cache->list[cls];
        if (!l->limit)
            continue;
        unsigned limit = (unsigned)((uint64_t)l->limit * budget / cache->capacity); /* slow path */
        if (l->count > limit)
            SM_FN(drain)(cache, l, l->count - limit, &sink);
        if (SM_RECLAIM_FN(low_water) && l->low > l->count)
            l->low = (uint16_t)l->count;
        l->limit = (uint16_t)limit;
        capacity += (size_t)limit * SM_FN(obj).class_bytes[cls];
    }
    cache->capacity = capacity;
    SM_FN(give_blocks)(sink.blocks, sink.n);
}

/* Matches the budget to the core the thread runs on now (SM_OPT_CORE_AWARE). */
SM_SLOWPATH void SM_FN(follow_core)(struct SM_FN(cache) *cache)
{
    cache->core_events = 0;
    cache->want = SM_FN(budget_for)(sm_plat_cpu());
    SM_FN(pool_follow_want)(cache);
}

/* Counts a slow-path event (a refill, an overflow); the policy says when a collection is due, and
 * every SM_OPT_GC_EVENTS events a core-aware cache looks at its core again. */
SM_INLINE void SM_FN(event)(struct SM_FN(cache) *cache)
{
    if (SM_RECLAIM_FN(gc_due)(&cache->events, SM_OPT_GC_EVENTS))
        SM_FN(gc)(cache, SM_FN(class_count), false);
    if (SM_OPT_CORE_AWARE && ++cache->core_events >= (SM_OPT_GC_EVENTS))
        SM_FN(follow_core)(cache);
    /* A smaller core, or (SM_SYNC) another thread took part of the budget: give the excess back. */
    size_t budget = SM_FN(budget_now)(cache);
    if ((SM_OPT_CORE_AWARE || SM_FN(pooled)) && cache->capacity > budget)
        SM_FN(trim)(cache, budget);
}

#endif /* SM_THREAD_CACHE_PARTS */
