/* slab_lk/batch.h: the capabilities slab_lk offers a thread cache above it (core/capability.h).
 * BATCH: alloc_batch takes up to n objects of one class in one critical section of the class, a
 * bitmap word at a time; free_batch frees runs of blocks of one class (and one shard) in one
 * section each, with every block resolved to (slab, index) and validated before the section, so
 * the section covers the bitmap updates alone: it is what the threads of a burst-heavy
 * program wait on. Both validate as alloc and free do; blocks that are not this layer's go to the
 * next layer's free one by one. OWNER: block_owner, an object's owner-map word (one lookup);
 * owner_slot, from the word, the class of an object as the offset of its 16-byte table entry, after
 * the geometry check (the free hit path of a thread cache waits on both); owner_local, whether a
 * block belongs to the calling CPU's shard. A part of slab_lk.h (included after alloc and free);
 * defines L_alloc_batch, L_free_batch, L_block_owner, L_owner_slot, L_owner_local, L_block_slot,
 * L_block_class. Included alone, as tools/check-headers.sh does, it
 * instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_SLAB_LK_PARTS
#include "../slab_lk.h"
#else

struct SM_FN(cs_alloc_batch) { struct SM_FN(class) *k; unsigned cls, n, got; void **out; };
SM_INLINE void SM_FN(cs_alloc_batch)(void *arg)
{
    struct SM_FN(cs_alloc_batch) *a = (struct SM_FN(cs_alloc_batch) *)arg;
    struct SM_FN(class) *k = a->k;
    void **out = a->out;
    unsigned got = a->got, n = a->n;
    while (got < n) {
        struct SM_FN(slab) *s = k->partial;
        if (!s && !(s = SM_FN(refill)(k, a->cls)))
            break;
        /* take_locked's work, a bitmap word at a time: the bits taken from one word are cleared
         * with one store and counted once, so the section lasts about a ctz and an address per
         * object (in locals: the stores into out[] would make the compiler reload a's fields). */
        if (sm_unlikely(s == SM_FN(kept)(k)))
            SM_FN(unkeep)(k);
        uint32_t nfree = s->nfree;
        size_t size = s->size;
        unsigned start = got;
        do {
            unsigned w = (unsigned)__builtin_ctzll(s->nonempty_words);
            uint64_t bits = s->free_bits[w];
            char *base = s->objects + (size_t)w * 64 * size;
            unsigned before = got;
            do {
                out[got++] = base + (size_t)__builtin_ctzll(bits) * size;
                bits &= bits - 1;
            } while (bits && got < n);
            s->free_bits[w] = bits;
            if (!bits)
                s->nonempty_words &= ~((uint64_t)1 << w);
            nfree -= got - before;
        } while (nfree && got < n);
        s->nfree = nfree;
        k->nmalloc += got - start;
        if (!nfree) { /* full: off the list (it is the head) */
            k->partial = s->next;
            if (s->next)
                s->next->prev = NULL;
            SM_FN(count_partial)(k, -1);
        }
    }
    a->got = got;
}

/* Up to n objects of the class of c->size (c->align <= 16) in one critical section of the class,
 * walking the partial slabs and taking new slabs as needed. Objects come out in the order a slab
 * hands them out (ascending addresses within a slab). Returns how many were stored in out: fewer
 * than n when the next layer ran out of memory, 0 with errno = ENOMEM when none could be had, and 0
 * with errno = EINVAL for a request this layer does not serve as a class (size outside size_handle
 * or align > 16): the caller then sends it through alloc. */
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    if (sm_unlikely(!SM_FN(serves)(c) || c->align > SM_MIN_ALIGN)) {
        errno = EINVAL;
        return 0;
    }
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size);
    struct SM_FN(cs_alloc_batch) a = { SM_FN(class_here)(cls, c), cls, n, 0, out };
    SM_SYNC_FN(atomic_exec)(&a.k->lock, SM_FN(cs_alloc_batch), &a);
    if (sm_unlikely(a.got < n))
        SM_FN(report_bad_slab)();
    if (!a.got && n)
        errno = ENOMEM;
    return a.got;
}

enum {
    SM_FN(batch_release_max) = 8, /* emptied slabs one section may set aside */
    SM_FN(batch_run_max) = 64,    /* blocks one section frees */
};

/* A run of m blocks of one class whose slabs were under k when the run was built: the object
 * indices idx[0..m), in segments of one slab each (slab[g] owns idx[seg_end[g - 1] .. seg_end[g])).
 * Frees them in order until a segment's slab was stolen since (its home is no longer k), a block
 * is already free (double_freed: its position in the run), or release[] is full; done: how many it
 * dealt with. */
struct SM_FN(cs_free_run) {
    struct SM_FN(class) *k;
    struct SM_FN(slab) *const *slab;
    const uint8_t *seg_end;
    const uint16_t *idx;
    unsigned nseg, done, nrelease;
    int double_freed;
    bool evict;
    struct SM_FN(slab) *release[SM_FN(batch_release_max)];
};
SM_INLINE void SM_FN(cs_free_run)(void *arg)
{
    struct SM_FN(cs_free_run) *r = (struct SM_FN(cs_free_run) *)arg;
    unsigned j = 0;
    for (unsigned g = 0; g < r->nseg; g++) {
        struct SM_FN(slab) *s = r->slab[g];
        /* A slab found under k here stays there while k's lock is held (a steal takes both locks). */
        if (SM_FN(shards) > 1 && sm_unlikely(__atomic_load_n(&s->home, __ATOMIC_RELAXED) != r->k))
            break; /* stolen since the run was built: this segment and the rest go round again */
        unsigned len = r->seg_end[g] - j;
        struct SM_FN(slab) *emptied = NULL;
        unsigned put = SM_FN(put_run_locked)(r->k, s, r->idx + j, len, &emptied, &r->evict);
        j += put;
        if (emptied)
            r->release[r->nrelease++] = emptied;
        if (sm_unlikely(put < len)) {
            r->double_freed = (int)j++; /* reported after the section; the run ends here */
            break;
        }
        if (r->nrelease == SM_FN(batch_release_max))
            break; /* out of room: release these, then start a new run */
    }
    r->done = j;
}

/* Frees n blocks. A run of consecutive blocks of the same class (and slab home) is freed in one
 * critical section of the class; every block is validated as free() validates it (an interior
 * pointer or a double free reaches the err policy after the section, and is ignored). Blocks this
 * layer does not own go to the next layer's free one by one. The order of `blocks` is kept. */
SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n)
{
    unsigned i = 0;
    while (i < n) {
        void *p = blocks[i++];
        uintptr_t w = SM_FN(lookup)(p);
        if (!w) {
            sm_mctx_t r = sm_mctx_block(p, 0, 0);
            SM_NEXT_FN(free)(&r);
            continue;
        }
        unsigned cls = SM_FN(word_cls)(w);
        const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
        size_t idx = SM_FN(object_index)(g, w, p);
        if (sm_unlikely(idx >= g->nobjs)) {
            SM_FN(report)(SM_ERR_INVALID_FREE, p, "pointer into a slab is not the start of an object; ignored");
            continue;
        }
        /* The run: this block and the valid blocks of the same class that follow it; anything
         * else is left to the outer loop, which passes it on or reports it. */
        unsigned first = i - 1, m = 0, nseg = 0;
        struct SM_FN(slab) *seg_slab[SM_FN(batch_run_max)];
        uint8_t seg_end[SM_FN(batch_run_max)];
        uint16_t run_idx[SM_FN(batch_run_max)];
        seg_slab[0] = SM_FN(word_slab)(w, g);
        run_idx[m++] = (uint16_t)idx;
        struct SM_FN(class) *k = __atomic_load_n(&seg_slab[0]->home, __ATOMIC_RELAXED);
        /* A drained list hands over runs of one slab's objects: a block in the same map granule as
         * the block before it has its word (one word per slab), without the map's load. */
        uintptr_t run_w = w, granule = (uintptr_t)p >> SM_FN(map_shift);
        while (i < n && m < SM_FN(batch_run_max)) {
            p = blocks[i];
            if ((uintptr_t)p >> SM_FN(map_shift) != granule) {
                granule = (uintptr_t)p >> SM_FN(map_shift);
                w = SM_FN(lookup)(p);
                if (w != run_w) {
                    if (!w || SM_FN(word_cls)(w) != cls)
                        break;
                    struct SM_FN(slab) *s = SM_FN(word_slab)(w, g);
                    if (SM_FN(shards) > 1 && __atomic_load_n(&s->home, __ATOMIC_RELAXED) != k)
                        break;
                    seg_end[nseg++] = (uint8_t)m;
                    seg_slab[nseg] = s;
                    run_w = w;
                }
            }
            if ((idx = SM_FN(object_index)(g, run_w, p)) >= g->nobjs)
                break;
            run_idx[m++] = (uint16_t)idx;
            i++;
        }
        seg_end[nseg++] = (uint8_t)m;
        struct SM_FN(cs_free_run) r = { k, seg_slab, seg_end, run_idx, nseg, 0, 0, -1, false, { NULL } };
        SM_SYNC_FN(atomic_exec)(&k->lock, SM_FN(cs_free_run), &r);
        i = first + r.done; /* blocks of the run not freed yet go round again */
        if (r.double_freed >= 0)
            SM_FN(report)(SM_ERR_DOUBLE_FREE, blocks[first + (unsigned)r.double_freed], "object is already free; ignored");
        for (unsigned x = 0; x < r.nrelease; x++)
            SM_FN(slab_release)(r.release[x]);
        if (sm_unlikely(r.evict))
            SM_FN(evict)();
    }
}

/* OWNER's lookup: p's word in the owner map (0: not this layer's). One load through the window. */
SM_HOT uintptr_t SM_FN(block_owner)(const void *p) { return SM_FN(lookup)(p); }

/* A thread cache's unsized free: which list p goes on, given its word w, as the class's slot, 16 x
 * the class: the byte offset of the class's entry in a table of 16-byte entries (the geometry here,
 * a thread cache's lists), so neither side multiplies. The geometry check and nothing else (no
 * size, no descriptor): the free's chain from the pointer to its list's address is the map's load
 * and one zero-extension. 16 x class_count means "not one of my objects": not owned, or not an
 * object start. */
SM_HOT unsigned SM_FN(owner_slot)(const void *p, uintptr_t w)
{
    unsigned slot = SM_FN(word_slot)(w);
    const struct SM_FN(geo) *g = (const struct SM_FN(geo) *)((const char *)SM_FN(geometry) + slot);
    _Static_assert(sizeof(struct SM_FN(geo)) == 16, "slab_lk: a slot is the offset of a 16-byte geometry entry");
    if (sm_likely(w != 0) && sm_likely(SM_FN(object_index)(g, w, p) < g->nobjs))
        return slot;
    /* A branch the CPU predicts and runs past, not a select (cmov) of the sentinel, which would make
     * a thread cache's list address wait for the check's multiply and rotate (docs/architecture.md,
     * the free walk). A volatile asm cannot be executed speculatively: this stays a branch. */
    unsigned none = SM_FN(class_count) << 4;
    __asm__ volatile("" : "+r"(none));
    return none;
}

/* The slot and the class of the object starting at p (owner_slot after a lookup). */
SM_INLINE unsigned SM_FN(block_slot)(const void *p) { return SM_FN(owner_slot)(p, SM_FN(lookup)(p)); }
SM_INLINE unsigned SM_FN(block_class)(const void *p) { return SM_FN(block_slot)(p) >> 4; }

/* False for a block of a slab under another CPU's shard than c's (slab_lk/shards.h), given its word
 * w: a slow path's question (the CPU, and a descriptor load). */
SM_INLINE bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c)
{
    (void)p;
    if (SM_FN(shards) == 1 || !w)
        return true; /* one shard, or not a slab's: nothing to say */
    const struct SM_FN(slab) *s = SM_FN(word_slab)(w, &SM_FN(geometry)[SM_FN(word_cls)(w)]);
    return SM_FN(home_is_here)(__atomic_load_n(&s->home, __ATOMIC_RELAXED), c);
}

/* The owner-word bits of every shard but the one request c allocates from (its CPU's): a word with
 * one of them set is a block of a slab another shard owns, as of the slab's last move; 0 with one
 * shard, or where the words carry no shard (slab_lk/map.h). For a cache's hit path. */
SM_INLINE uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c)
{
    if (!SM_FN(word_shards) || SM_FN(shards_live) == 1)
        return 0;
    uintptr_t all = 0;
    for (unsigned k = 0; k < SM_FN(shards_live); k++)
        all |= SM_FN(shard_bit)(k);
    return all & ~SM_FN(shard_bit)((unsigned)sm_mctx_cpu(c) & (SM_FN(shards_live) - 1));
}

#endif /* SM_SLAB_LK_PARTS */
