/* decay_cache/chores.h: the cache's chores, work found under the lock and done after it is
 * released. evict_locked empties a slot whose block goes back to the next layer; collect_due_locked
 * marks what is due at `now` (dirty slots idle DECAY_MS become busy, to be purged; slots idle twice
 * that are evicted) and recomputes the next deadline, batched to 1/16 of the decay; do_chores gives
 * blocks back and purges with no lock held, then records the purged slots' states and deadlines;
 * due and decay are the cheap check and the pass the slow paths and L_release run. A part of
 * decay_cache.h; defines struct L_chores, L_evict_locked, L_collect_due_locked, L_give_back,
 * L_do_chores, L_due and L_decay. Included alone, as tools/check-headers.sh does, it instantiates
 * the whole layer.
 * @check: <sunmao/policies/err/warn.h> SM_LAYER=m SM_ERR=warn <sunmao/os/mmap_heap.h> SM_LAYER=t SM_NEXT=m <sunmao/policies/sync/mutex.h> SM_SYNC=mutex SM_ERR=warn */
#ifndef SM_DECAY_CACHE_PARTS
#include "../decay_cache.h"
#else

/* Work found under the lock and done after it is released. */
struct SM_FN(chores) {
    unsigned purge_count, return_count;
    struct SM_FN(slot) *purge[SM_OPT_MAX_BLOCKS];
    struct { char *ptr; size_t size; } give_back[SM_OPT_MAX_BLOCKS + 1];
};

/* Empty a slot whose block goes back to the next layer. Caller holds the lock. */
SM_INLINE void SM_FN(evict_locked)(struct SM_FN(slot) *s, struct SM_FN(chores) *w)
{
    w->give_back[w->return_count].ptr = s->ptr;
    w->give_back[w->return_count].size = s->size;
    w->return_count++;
    SM_FN(set_blocks_locked)(SM_FN(obj).blocks - 1);
    SM_FN(obj).bytes -= s->size;
    s->ptr = NULL, s->size = 0, s->state = SM_FN(s_empty);
}

/* Mark what is due at `now` and recompute the next deadline. Caller holds the lock. */
static void SM_FN(collect_due_locked)(uint64_t now, struct SM_FN(chores) *w)
{
    const uint64_t decay = SM_FN(decay_ms);
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
        struct SM_FN(slot) *s = &SM_FN(slots)[i];
        if (s->state != SM_FN(s_dirty) && s->state != SM_FN(s_purged))
            continue; /* empty, or busy: its purger records its deadline when it is done */
        uint64_t due = s->since_ms + 2 * decay;
        if (due <= now) { /* idle twice the decay (or a purge failed): back to the next layer */
            SM_FN(evict_locked)(s, w);
            continue;
        }
        if (s->state == SM_FN(s_dirty)) {
            if (s->since_ms + decay <= now) {
                s->state = SM_FN(s_busy);
                w->purge[w->purge_count++] = s;
            } else {
                due = s->since_ms + decay;
            }
        }
        if (due < next)
            next = due;
    }
    /* Batch: wake at most every 1/16 of the decay, so a stream of frees does not scan each time. */
    if (next != UINT64_MAX && next < now + decay / 16)
        next = now + decay / 16;
    __atomic_store_n(&SM_FN(obj).next_deadline, next, __ATOMIC_RELAXED);
}

/* Return blocks to the next layer (unmapped there). The only free call site besides L_free. */
SM_SLOWPATH void SM_FN(give_back)(char *p, size_t size)
{
    sm_mctx_t c = sm_mctx_block(p, size, SM_F_SIZED);
    SM_NEXT_FN(free)(&c);
}

/* Do what collect_due_locked and eviction found, without the lock. Returns the bytes returned to
 * the next layer or purged. */
SM_SLOWPATH size_t SM_FN(do_chores)(struct SM_FN(chores) *w)
{
    size_t bytes = 0;
    for (unsigned i = 0; i < w->return_count; i++) {
        SM_FN(give_back)(w->give_back[i].ptr, w->give_back[i].size);
        bytes += w->give_back[i].size;
    }
    const unsigned n = w->purge_count; /* one load: the loops below pair up, as the compiler can see */
    if (!n)
        return bytes;
    bool purged[SM_OPT_MAX_BLOCKS];
    for (unsigned i = 0; i < n; i++) {
        /* Busy slots keep ptr and size: only their purger changes them. */
        sm_mctx_t c = sm_mctx_block(w->purge[i]->ptr, w->purge[i]->size, SM_OPT_PURGE_LAZY ? 0 : SM_F_ZERO);
        purged[i] = SM_NEXT_FN(purge)(&c);
        bytes += purged[i] ? w->purge[i]->size : 0;
    }
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (unsigned i = 0; i < n; i++)
        /* A block that could not be purged stays dirty; it is returned at 2x decay like the rest. */
        w->purge[i]->state = purged[i] ? SM_FN(s_purged) : SM_FN(s_dirty);
    /* Purged or not, they go back to the next layer at 2x decay; a failed purge is not retried. */
    uint64_t next = __atomic_load_n(&SM_FN(obj).next_deadline, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < n; i++) {
        uint64_t due = w->purge[i]->since_ms + 2 * SM_FN(decay_ms);
        if (due < next)
            next = due;
    }
    __atomic_store_n(&SM_FN(obj).next_deadline, next, __ATOMIC_RELAXED);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return bytes;
}

/* Cheap check on the slow paths: one load, and the vDSO clock when something is cached. */
SM_INLINE bool SM_FN(due)(uint64_t now)
{
    return now >= __atomic_load_n(&SM_FN(obj).next_deadline, __ATOMIC_RELAXED);
}

SM_SLOWPATH size_t SM_FN(decay)(uint64_t now)
{
    struct SM_FN(chores) w;
    w.purge_count = w.return_count = 0;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    SM_FN(collect_due_locked)(now, &w);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return SM_FN(do_chores)(&w);
}

#endif /* SM_DECAY_CACHE_PARTS */
