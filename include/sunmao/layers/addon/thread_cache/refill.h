/* thread_cache's refills and overflows: how a list grows, and how it fills and empties in batches.
 * A malloc that finds its list empty refills it with one N_alloc_batch call (an aligned request:
 * the list of its aligned class); a free that finds its list full first sends a batch back with
 * N_free_batch. Slow start (TCMalloc's): a list's limit starts at 0 and grows by one on each miss
 * or overflow up to its batch (about SM_OPT_BATCH_BYTES, within [2, SM_OPT_BATCH_MAX] objects),
 * then by a batch per miss up to SM_OPT_LIST_MAX: a class used once costs one object, a class used
 * in bursts gets room for the burst. A list whose limit passed 4 batches moves a quarter of its
 * limit at a time, up to about SM_OPT_BATCH_BYTES_MAX (batch_for). Except that a thread's first
 * objects of a small class fill four cache lines of their own, so that objects handed out one at a
 * time to different threads do not share lines. Growth is paid from the byte budget (grow), which
 * asks the reclaim policy for a collection under pressure when it runs out (with SM_SYNC, after
 * asking the pool for more: pool.h). A free's slow path also catches double frees of objects some
 * cache freed (their mark; any thread's) and hands back a block of another CPU's slab instead of
 * caching it (owner_local). Figures: docs/layers.md, thread_cache. A part of layers/addon/thread_cache.h,
 * which includes it after its other parts (no include guard).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake */
#ifndef SM_THREAD_CACHE_PARTS
#include "../thread_cache.h"
#else

/* Raises list cls's limit toward `want`, as far as the budget allows after a collection under
 * pressure, if the reclaim policy runs one. */
SM_INLINE void SM_FN(grow)(struct SM_FN(cache) *cache, unsigned cls, unsigned want)
{
    struct SM_FN(list) *l = &cache->list[cls];
    size_t size = SM_FN(obj).class_bytes[cls];
    if (want > SM_FN(list_max))
        want = SM_FN(list_max);
    if (want <= l->limit || !size || size > SM_FN(conf_max)) /* above tcache_max: never any room */
        return;
    size_t need = cache->capacity + (want - l->limit) * size;
    if (need > SM_FN(budget_now)(cache)) {
        SM_FN(pool_claim)(cache, need - SM_FN(budget_now)(cache));
        if (need > SM_FN(budget_now)(cache) && SM_RECLAIM_FN(gc_pressed)(cache->events, SM_OPT_GC_EVENTS))
            SM_FN(gc)(cache, cls, true);
        size_t budget = SM_FN(budget_now)(cache);
        size_t room = cache->capacity < budget ? (budget - cache->capacity) / size : 0; /* slow path */
        if (want > l->limit + room)
            want = l->limit + (unsigned)room;
    }
    cache->capacity += (want - l->limit) * size;
    l->limit = (uint16_t)want;
}

/* May the head of list l (class cls), which the hit path did not take, be handed out? If not (a
 * broken pair, or with harden=2 not an object of the class), the damage is reported here, once,
 * and the list dropped: false. */
SM_SLOWPATH bool SM_FN(head_poppable)(const struct SM_FN(cache) *cache, struct SM_FN(list) *l, unsigned cls)
{
    if (SM_FN(may_pop)(cache, l->head, cls << 4))
        return true;
    SM_FN(list_corrupt)(cache, l, l->head);
    return false;
}

/* malloc missed the list of `size`: refill it with one batch from the next layer and return the
 * first object, or NULL to send the request to the next layer. c: the request (its CPU). */
SM_SLOWPATH void *SM_FN(refill)(size_t size, sm_mctx_t *c)
{
    struct SM_FN(cache) *cache = SM_FN(cache_get)();
    if (!cache)
        return NULL;
    unsigned cls = SM_FN(class_of)(size); /* again: the fast path may have read an unbuilt table */
    struct SM_FN(list) *l = &cache->list[cls];
    unsigned hold = SM_FN(hold_of)(l);
    if (SM_FN(holding) && sm_unlikely(l->count && !l->head)) /* a chain cut short: see list_append */
        SM_FN(list_corrupt)(cache, l, cache->tail[cls]);
    /* The hit path ran before the tables existed, or found a head it may not hand out. */
    if (sm_unlikely(l->head != NULL) && l->count > hold && SM_FN(head_poppable)(cache, l, cls))
        return SM_FN(pop)(cache, l, l->head);
    unsigned batch = SM_FN(batch_for)(l->limit, cls);
    /* Slow start, but the first objects fill four cache lines: with two, the hot object (the run's
     * first) could share a 128-byte pair, which the adjacent-line prefetcher moves as one, with
     * another thread's objects. */
    size_t obj_size = SM_SIZECLASS_FN(class_to_size)(cls);
    unsigned own_lines = obj_size >= 4 * SM_CACHELINE ? 1u : (unsigned)((4 * SM_CACHELINE + obj_size - 1) / obj_size);
    unsigned step = l->limit + 1u > own_lines ? l->limit + 1u : own_lines;
    unsigned target = l->limit < batch ? (step < batch ? step : batch) : l->limit + batch;
    SM_FN(grow)(cache, cls, SM_FN(holding) && target < hold + batch ? hold + batch : target);
    if (SM_RECLAIM_FN(scan_due)(&cache->refills, SM_FN(idle_scan_refills)))
        SM_FN(scan)(cache); /* first: what it frees may make room for this refill */
    unsigned room = l->limit > l->count ? l->limit - l->count : 0; /* the whole limit but with a hold */
    unsigned want = room < batch ? room : batch;
    void *out[SM_FN(batch_max)];
    sm_mctx_t r = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    r.cpu = c->cpu;
    unsigned got = SM_NEXT_FN(alloc_batch)(&r, out, want ? want : 1);
    c->cpu = r.cpu; /* what the next layer learned, for the rest of the request */
    cache->batches++;
    SM_FN(follow_partition)(cache, c);
    if (!got)
        return NULL;
    sm_stats_thread_bytes[0] += (uint64_t)got * SM_FN(obj).class_bytes[SM_SIZECLASS_FN(size_to_class)(size)];
    /* out[0] goes to the caller; out[1..] become the list, in the order the next layer gave them:
     * the whole list (it was empty: that is why we are here), or with a hold, in front of the
     * objects held back, to be handed out before them. */
    void *head = SM_FN(holding) && l->count ? l->head : NULL;
    if (SM_FN(holding) && !l->count && got > 1)
        cache->tail[SM_FN(holding) ? cls : 0] = out[got - 1];
    for (unsigned i = got; i-- > 1;) {
        SM_FN(link_store)(cache, out[i], head);
        head = out[i];
    }
    l->head = head;
    l->count = (SM_FN(holding) ? l->count : 0) + got - 1;
    if (SM_OPT_DOUBLE_FREE_CHECK)
        SM_FN(words)(out[0])[1] = 0; /* a stale tag would make its free look like a double free */
    SM_FN(event)(cache);
    return out[0];
}

/* An aligned request that missed its list (see aligned_class): refill that class's list and return
 * its first object, or NULL to send the request to the next layer. */
SM_SLOWPATH void *SM_FN(refill_aligned)(size_t size, size_t align, sm_mctx_t *c)
{
    struct SM_FN(cache) *cache = SM_FN(cache_get)(); /* builds the tables on a thread's first call */
    if (!cache)
        return NULL;
    unsigned cls = SM_FN(aligned_class)(size, align);
    if (!cls)
        return NULL;
    struct SM_FN(list) *l = &cache->list[cls];
    /* The hit path ran before the tables existed, or found the head misaligned or broken. */
    if (l->head && l->count > SM_FN(hold_of)(l) && SM_FN(head_poppable)(cache, l, cls))
        return SM_FN(aligned_hit)(size, align);
    void *p = SM_FN(refill)(SM_FN(obj).class_bytes[cls], c);
    if (p && ((uintptr_t)p & (align - 1))) {
        /* The next layer does not align this class's objects naturally: keep the object for
         * plain requests and pass this one down. */
        if (l->count < l->limit) {
            SM_FN(list_push)(cache, l, p);
        } else {
            SM_FN(give_blocks)(&p, 1);
        }
        return NULL;
    }
    return p;
}

/* Is p on list l (of cache)? For a tagged block: a double free, or a block that left the cache
 * since. The walk stops at an object whose pair is broken (its pop will report it). */
SM_SLOWPATH bool SM_FN(on_list)(const struct SM_FN(cache) *cache, const struct SM_FN(list) *l, const void *p)
{
    const void *q = l->head;
    for (uint32_t i = 0; q && i < l->count; i++, q = SM_FN(link_load)(cache, q)) {
        if (q == p)
            return true;
        if (SM_OPT_HARDEN && !SM_FN(is_cached)(cache, q))
            return false;
    }
    return false;
}

/* A free that missed its list (full, or the cache missing, or p tagged, or p of no cached class).
 * True if p was taken care of; false sends it to the next layer. */
SM_SLOWPATH bool SM_FN(overflow)(sm_mctx_t *c)
{
    void *p = c->ptr;
    struct SM_FN(cache) *cache = SM_FN(cache_get)();
    if (!cache)
        return false;
    unsigned cls = SM_FN(free_class)(c); /* again: the hit path may have read an unbuilt table */
    if (cls >= SM_FN(class_count) || !SM_FN(obj).class_bytes[cls])
        return false;
    struct SM_FN(list) *l = &cache->list[cls];
    if (SM_OPT_DOUBLE_FREE_CHECK && SM_FN(is_cached)(cache, p)) {
        /* Marked, so a cache freed it and nothing handed it out since (every hand-out of a cached
         * class clears the mark: pop, refill, alloc_miss): on this list, on another thread's, or
         * given back below; a live object carries the mark only if the program wrote it there. */
        SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, p,
                         SM_FN(on_list)(cache, l, p) || SM_FN(on_list)(cache, &cache->remote[cls], p)
                             ? "object is already in the thread cache; ignored"
                                                     : "object was freed before (by another thread, or it left a thread cache since); ignored");
        return true;
    }
    SM_FN(follow_partition)(cache, c);
    if (cache->foreign && (SM_FN(owner_word)(c) & cache->foreign)) {
        /* Another partition's object: onto its remote list, which a full one leaves first
         * (reclaim.h, remote_overflow); the hit path came here with the list full or no cache */
        struct SM_FN(list) *r = &cache->remote[cls];
        if (r->count >= r->limit)
            SM_FN(remote_overflow)(cache, cls);
        if (r->count < r->limit) {
            SM_FN(list_push)(cache, r, p);
            SM_FN(event)(cache);
            return true;
        }
    }
    unsigned batch = SM_FN(batch_for)(l->limit, cls), hold = SM_FN(hold_of)(l);
    if (SM_FN(holding) && l->limit < hold + batch)
        SM_FN(grow)(cache, cls, hold + batch); /* room to hold, or frees would go down at once */
    else if (l->limit < batch)
        SM_FN(grow)(cache, cls, l->limit + 1u); /* slow start on the freeing side too */
    if (l->count >= l->limit && l->count) {
        struct SM_FN(sink) sink;
        sink.n = 0;
        SM_FN(drain)(cache, l, l->count < batch ? l->count : batch, &sink);
        SM_FN(give_blocks)(sink.blocks, sink.n);
        if (SM_RECLAIM_FN(low_water) && l->low > l->count)
            l->low = (uint16_t)l->count;
    }
    if (!SM_NEXT_FN(owner_local)(p, SM_FN(owner_word)(c), c)) {
        /* Another CPU's slab: kept here, p would be this thread's next object of its class while
         * its neighbours are in use on that CPU (passive false sharing). Asked only here, after a
         * full list made room (else every free of the class would come here while it is full):
         * hit-path frees of remote blocks are still cached. Marked as a cache's free object
         * first, so a second free of it from any thread is seen as one. */
        SM_FN(link_store)(cache, p, NULL);
        SM_FN(event)(cache);
        return false;
    }
    bool cached = l->count < l->limit;
    if (cached)
        SM_FN(list_push)(cache, l, p);
    else
        SM_FN(link_store)(cache, p, NULL); /* goes down marked, as above */
    SM_FN(event)(cache);
    return cached;
}

#endif /* SM_THREAD_CACHE_PARTS */
