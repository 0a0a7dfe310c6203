/* slab_lk/shards.h: CPU partitions (the paper's per-CPU partitioning). With SM_OPT_SHARDS > 1 every
 * class has that many class structs (obj.cls is shard-major: shard x class_count + class), each with
 * its own lock, partial list and kept slab, and a request takes objects from the one of its CPU:
 * sm_mctx_cpu(c), the context's cpu, which a cpu-aware socket may have set and which is otherwise
 * asked of the platform once per request (on Linux, glibc's rseq area: no system call), modulo the
 * shards in use (shards_live: narenas may lower it at create, core/conf.h). So threads
 * running at the same time take objects from different slabs: no cache line written by two cores,
 * no class lock shared by all. Classes above SM_OPT_SHARD_MAX use shard 0 from every CPU. A slab
 * stays under the class struct that made or stole it (s->home) and frees go there from any CPU
 * (home read before the section, checked in it, tried again if the slab moved). A shard with no slab to allocate from steals before it maps a new one: another
 * shard's kept empty slab, or the second slab of a shard with two or more partial ones, trying that
 * shard's lock with trylock from inside a section, never waiting (two shards stealing from each other
 * cannot deadlock, whatever thread runs their sections); so the shards
 * together keep about as many partly used slabs as one would, plus one per shard. owner_local
 * (slab_lk/batch.h) asks home_is_here. With SM_OPT_SHARDS 1 all of this folds to shard 0.
 * A part of slab_lk.h; defines L_shard_here, L_class_here, L_steal, L_home_is_here.
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_SLAB_LK_PARTS
#include "../slab_lk.h"
#else

/* The shard of class cls for request c: its CPU's; shard 0 for a class above SM_OPT_SHARD_MAX. */
SM_INLINE unsigned SM_FN(shard_here)(unsigned cls, sm_mctx_t *c)
{
    if (SM_FN(shards) == 1 || SM_SIZECLASS_FN(class_to_size)(cls) > (size_t)(SM_OPT_SHARD_MAX))
        return 0;
    return (unsigned)sm_mctx_cpu(c) & (SM_FN(shards_live) - 1);
}

/* The class struct request c allocates objects of class cls from. */
SM_INLINE struct SM_FN(class) *SM_FN(class_here)(unsigned cls, sm_mctx_t *c)
{
    return &SM_FN(obj).cls[SM_FN(shard_here)(cls, c) * SM_FN(class_count) + cls];
}

/* The bit of the owner word (slab_lk/map.h) that names shard `shard` as a slab's home: bits 0-3 for
 * shards 0-3, 10-13 for 4-7, around the slot's bits 4-9. */
SM_INLINE uintptr_t SM_FN(shard_bit)(unsigned shard)
{
    return (uintptr_t)1 << (shard < 4 ? shard : shard + 6);
}

/* A slab that moved to shard k's class struct: its granules' words name its new home. Class lock
 * of k held (class lock -> map lock). A cache's free that read the old word meanwhile only picks
 * the wrong one of its lists, a matter of speed: frees go by the descriptor's home. */
SM_SLOWPATH void SM_FN(rehome_word)(struct SM_FN(slab) *s, unsigned cls)
{
    if (!SM_FN(word_shards) || SM_SIZECLASS_FN(class_to_size)(cls) > (size_t)(SM_OPT_SHARD_MAX))
        return;
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    void *base = g->offslab ? (void *)s->objects : (void *)s;
    SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
    sm_pagemap2_set(SM_FN(obj).map, SM_FN(map_shift), base, s->bytes, SM_FN(make_word)(s, cls), SM_FN(map_node_alloc));
    SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
}

/* Whether a slab under class struct home belongs to the shard request c would allocate from. */
SM_INLINE bool SM_FN(home_is_here)(const struct SM_FN(class) *home, sm_mctx_t *c)
{
    unsigned i = (unsigned)(home - SM_FN(obj).cls);
    return i / SM_FN(class_count) == SM_FN(shard_here)(i % SM_FN(class_count), c);
}

/* Shard k has no slab of class cls with a free object: another shard's kept empty slab, or a slab of
 * one that has two or more with free objects (its head, the one it allocates from, is left to it),
 * moves over, or NULL. Class lock of k held. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(steal)(struct SM_FN(class) *k, unsigned cls)
{
    unsigned me = (unsigned)(k - SM_FN(obj).cls) / SM_FN(class_count);
    for (unsigned d = 1; d < SM_FN(shards_live); d++) {
        struct SM_FN(class) *v = &SM_FN(obj).cls[((me + d) & (SM_FN(shards_live) - 1)) * SM_FN(class_count) + cls];
        if (!SM_RETAIN_FN(peek)(&v->retain) && __atomic_load_n(&v->npartial, __ATOMIC_RELAXED) < 2)
            continue;
        if (!SM_SYNC_FN(trylock)(&v->lock))
            continue;
        struct SM_FN(slab) *s = SM_FN(kept)(v);
        if (s)
            SM_FN(unkeep)(v);
        else if (v->npartial >= 2)
            s = v->partial->next;
        if (s) {
            SM_FN(retire)(v, s);
            __atomic_store_n(&s->home, k, __ATOMIC_RELAXED);
            SM_FN(rehome_word)(s, cls);
        }
        SM_SYNC_FN(unlock)(&v->lock);
        if (s)
            return s;
    }
    return NULL;
}

#endif /* SM_SLAB_LK_PARTS */
