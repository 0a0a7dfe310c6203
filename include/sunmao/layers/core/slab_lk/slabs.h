/* slab_lk/slabs.h: slabs from the next layer and back. A new slab is one request to the next layer,
 * aligned to the class's slab size (refused, and reported, if it comes back misaligned); it is
 * carved in place: the descriptor at its start, the bitmap all free, the objects from the class's
 * offset plus the slab's colour (slab_lk/geometry.h); or, for a class whose objects fill the slab
 * exactly (offslab), the descriptor is a record of the map's (slab_lk/map.h) and the objects start
 * at the slab's start. The owner map publishes the slab last (slab_lk/map.h). A slab goes back, with no lock held, once it is empty and the retain policy
 * (SM_RETAIN) does not keep it, or when the policy lets one more kept slab exceed
 * SM_OPT_EMPTY_MAX: evict then gives back the one the policy ranks first, rechecked in its class's
 * critical section. A class out of slabs steals one from another shard (slab_lk/shards.h) before it maps a new
 * one. A part of slab_lk.h; defines L_first_slab_of_shard, L_slab_new, L_slab_release, L_refill,
 * L_evict. Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_SLAB_LK_PARTS
#include "../slab_lk.h"
#else

/* The class's geometry is computed once, by the first slab of any shard, under the map lock (the
 * class lock -> map lock order), so a shard's first slab writes nothing of another shard's. */
SM_SLOWPATH void SM_FN(first_slab_of_shard)(struct SM_FN(class) *k, unsigned cls)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
    if (!SM_FN(geometry)[cls].nobjs)
        SM_FN(compute_geometry)(cls);
    k->slab_bytes = (uint32_t)1 << SM_FN(geometry)[cls].slab_shift;
    SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
}

/* Called in the class's critical section, so the class's slabs come one at a time. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(slab_new)(struct SM_FN(class) *k, unsigned cls)
{
    if (!k->slab_bytes)
        SM_FN(first_slab_of_shard)(k, cls);
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    sm_mctx_t r = sm_mctx_alloc(k->slab_bytes, k->slab_bytes, 0);
    char *base = (char *)SM_NEXT_FN(alloc)(&r);
    if (!base)
        return NULL;
    if (sm_ptr_aligned(base, k->slab_bytes)) {
        struct SM_FN(slab) *s = (struct SM_FN(slab) *)base, *desc = NULL;
        if (g->offslab) {
            SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
            s = desc = SM_FN(desc_take)();
            SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
        }
        /* The descriptor is complete before the map publishes it. */
        if (s) {
            s->prev = s->next = NULL;
            s->objects = base + g->offset + SM_FN(slab_colour)(g, base);
            s->home = k;
            s->size = (uint32_t)SM_SIZECLASS_FN(class_to_size)(cls);
            s->nobjs = s->nfree = g->nobjs;
            s->bytes = k->slab_bytes;
            unsigned full_words = g->nobjs / 64u, tail = g->nobjs % 64u, words = full_words + (tail != 0);
            for (unsigned w = 0; w < full_words; w++)
                s->free_bits[w] = ~(uint64_t)0;
            if (tail)
                s->free_bits[full_words] = ((uint64_t)1 << tail) - 1;
            s->nonempty_words = words == 64 ? ~(uint64_t)0 : ((uint64_t)1 << words) - 1;
            if (SM_FN(map_slab)(SM_FN(make_word)(s, cls), base, k->slab_bytes, desc)) {
                __atomic_add_fetch(&SM_FN(obj).slabs[cls], 1, __ATOMIC_RELAXED);
                return s;
            }
        }
    } else {
        __atomic_store_n(&SM_FN(obj).bad_slab, base, __ATOMIC_RELAXED); /* raised after the section */
    }
    sm_mctx_t back = sm_mctx_block(base, k->slab_bytes, SM_F_SIZED);
    SM_NEXT_FN(free)(&back);
    return NULL;
}

/* Called without any lock held. */
SM_SLOWPATH void SM_FN(slab_release)(struct SM_FN(slab) *s)
{
    size_t bytes = s->bytes;
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(s->size);
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    void *base = g->offslab ? (void *)s->objects : (void *)s;
    __atomic_sub_fetch(&SM_FN(obj).slabs[cls], 1, __ATOMIC_RELAXED);
    SM_FN(map_slab)(0, base, bytes, g->offslab ? s : NULL); /* clearing allocates nothing, so it cannot fail */
    sm_mctx_t r = sm_mctx_block(base, bytes, SM_F_SIZED);
    SM_NEXT_FN(free)(&r);
}

/* Class k (of a shard) has no slab with a free object: take one from another shard, or get a new
 * one. In k's critical section. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(refill)(struct SM_FN(class) *k, unsigned cls)
{
    struct SM_FN(slab) *s = SM_FN(shards) > 1 ? SM_FN(steal)(k, cls) : NULL;
    if (!s && !(s = SM_FN(slab_new)(k, cls)))
        return NULL;
    s->prev = s->next = NULL;
    k->partial = s;
    SM_FN(count_partial)(k, 1);
    return s;
}

/* More slabs are kept than SM_OPT_EMPTY_MAX: release the one the retain policy ranks first (for
 * keep_last, the one kept longest). Called with no lock held. The victim is chosen from unlocked
 * reads, then checked in its class's critical section: a slab that was allocated from or released
 * meanwhile is left alone (the next eviction sees the new count). */
struct SM_FN(cs_evict) { struct SM_FN(class) *victim; struct SM_FN(slab) *s; };
SM_INLINE void SM_FN(cs_evict)(void *arg)
{
    struct SM_FN(cs_evict) *e = (struct SM_FN(cs_evict) *)arg;
    e->s = SM_FN(kept)(e->victim);
    if (e->s && SM_RETAIN_FN(count)(&SM_FN(obj).retain) > (SM_OPT_EMPTY_MAX)) {
        SM_FN(unkeep)(e->victim);
        SM_FN(retire)(e->victim, e->s);
    } else {
        e->s = NULL;
    }
}

SM_SLOWPATH void SM_FN(evict)(void)
{
    struct SM_FN(class) *victim = NULL;
    uint64_t first = UINT64_MAX;
    /* Only the classes that keep a slab (a few: SM_OPT_EMPTY_MAX and the one over it), not every
     * class of every shard (wcet: 440 class structs, 4,000 instructions an eviction). */
    for (unsigned w = 0; w < sizeof SM_FN(obj).kept_bits / sizeof SM_FN(obj).kept_bits[0]; w++) {
        for (uint64_t bits = __atomic_load_n(&SM_FN(obj).kept_bits[w], __ATOMIC_RELAXED); bits; bits &= bits - 1) {
            struct SM_FN(class) *k = &SM_FN(obj).cls[w * 64 + (unsigned)__builtin_ctzll(bits)];
            uint64_t rank = SM_RETAIN_FN(evict_rank)(&k->retain);
            if (rank < first) {
                first = rank;
                victim = k;
            }
        }
    }
    if (!victim)
        return;
    struct SM_FN(cs_evict) e = { victim, NULL };
    SM_SYNC_FN(atomic_exec)(&victim->lock, SM_FN(cs_evict), &e);
    if (e.s)
        SM_FN(slab_release)(e.s);
}

#endif /* SM_SLAB_LK_PARTS */
