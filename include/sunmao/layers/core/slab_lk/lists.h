/* slab_lk/lists.h: a class's partial list and the objects of its slabs, all in the class's critical
 * section: take_locked and put_locked (one object out of or back into a slab's bitmap, the slab on
 * and off the list; put_run_locked, a run of one slab's objects back), retire (an empty slab off
 * the list, to go back), the retain policy's kept slab (kept, unkeep) and the list's length that
 * steals read without the lock (count_partial). A part of slab_lk.h; defines L_count_partial,
 * L_retire, L_kept, L_unkeep, L_take_locked, L_put_run_locked, L_put_locked.
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_SLAB_LK_PARTS
#include "../slab_lk.h"
#else

/* Class lock held (npartial is read without it, hence the atomic store). */
SM_INLINE void SM_FN(count_partial)(struct SM_FN(class) *k, int delta)
{
    __atomic_store_n(&k->npartial, k->npartial + (unsigned)delta, __ATOMIC_RELAXED);
}

/* Slab s is empty and is not to be kept: off the list, to be released after unlocking. Class
 * lock held. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(retire)(struct SM_FN(class) *k, struct SM_FN(slab) *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        k->partial = s->next;
    if (s->next)
        s->next->prev = s->prev;
    SM_FN(count_partial)(k, -1);
    return s;
}

/* Class k's kept empty slab (SM_RETAIN), or NULL; and its end as one: allocated from, stolen or
 * released. Class lock held. */
SM_INLINE struct SM_FN(slab) *SM_FN(kept)(struct SM_FN(class) *k) { return SM_RETAIN_FN(kept)(&k->retain); }
/* Class k's bit in kept_bits, on or off. */
SM_INLINE void SM_FN(kept_mark)(struct SM_FN(class) *k, bool on)
{
    unsigned i = (unsigned)(k - SM_FN(obj).cls);
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (on)
        __atomic_fetch_or(&SM_FN(obj).kept_bits[i / 64], bit, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(&SM_FN(obj).kept_bits[i / 64], ~bit, __ATOMIC_RELAXED);
}
SM_INLINE void SM_FN(unkeep)(struct SM_FN(class) *k)
{
    SM_RETAIN_FN(unkeep)(&SM_FN(obj).retain, &k->retain);
    SM_FN(kept_mark)(k, false);
}

/* Takes the lowest free object of slab s, the head of class k's partial list. Allocation only ever
 * takes from the head, so a kept slab stops being empty exactly when it is the head and is
 * allocated from: that one compare keeps the retain policy's count right. Class lock held. */
SM_INLINE void *SM_FN(take_locked)(struct SM_FN(class) *k, struct SM_FN(slab) *s)
{
    if (sm_unlikely(s == SM_FN(kept)(k)))
        SM_FN(unkeep)(k);
    unsigned w = (unsigned)__builtin_ctzll(s->nonempty_words);
    uint64_t bits = s->free_bits[w];
    size_t idx = (size_t)w * 64 + (unsigned)__builtin_ctzll(bits);
    bits &= bits - 1;
    s->free_bits[w] = bits;
    if (!bits)
        s->nonempty_words &= ~((uint64_t)1 << w);
    k->nmalloc++;
    if (sm_unlikely(--s->nfree == 0)) { /* full: off the list (it is the head) */
        k->partial = s->next;
        if (s->next)
            s->next->prev = NULL;
        SM_FN(count_partial)(k, -1);
    }
    return s->objects + idx * s->size;
}

/* Marks objects idx[0..n) of slab s (class k) free, in order, and returns how many it marked: n,
 * or the position of the first that already was free (a double free: it and the rest unchanged).
 * The slab's counts and word summary are updated once for the run, not per object: a drained
 * batch holds runs of one slab's objects. *release is set to the slab when it became empty and the
 * retain policy does not keep it: it goes back to the next layer once the lock is dropped; *evict
 * is set when evict() is to run then. Class lock held. */
SM_HOT unsigned SM_FN(put_run_locked)(struct SM_FN(class) *k, struct SM_FN(slab) *s, const uint16_t *idx,
                                      unsigned n, struct SM_FN(slab) **release, bool *evict)
{
    uint64_t nonempty = s->nonempty_words;
    unsigned put = 0;
    /* The bitmap word of the last object stays in a register until an object of another word: a
     * drained list hands a slab's objects over in address order (up or down), so neighbours in
     * the run mostly share a word. */
    unsigned w = ~0u;
    uint64_t bits = 0;
    if (n == 1) { /* a lone object (a scattered drain, or put_locked): no word to carry */
        uint64_t bit = (uint64_t)1 << (idx[0] % 64u), *word = &s->free_bits[idx[0] / 64u];
        if (sm_unlikely(*word & bit))
            return 0;
        *word |= bit;
        nonempty |= (uint64_t)1 << (idx[0] / 64u);
        put = 1;
    }
    for (; put < n; put++) {
        unsigned x = idx[put];
        if (x / 64u != w) {
            if (w != ~0u)
                s->free_bits[w] = bits;
            w = x / 64u;
            bits = s->free_bits[w];
            nonempty |= (uint64_t)1 << w;
        }
        uint64_t bit = (uint64_t)1 << (x % 64u);
        if (sm_unlikely(bits & bit))
            break;
        bits |= bit;
    }
    if (w != ~0u)
        s->free_bits[w] = bits;
    if (sm_unlikely(!put))
        return 0;
    s->nonempty_words = nonempty;
    k->nfree += put;
    uint32_t before = s->nfree, nfree = before + put;
    s->nfree = nfree;
    if (before == 0) { /* was full: back on the partial list */
        s->prev = NULL;
        s->next = k->partial;
        if (k->partial)
            k->partial->prev = s;
        k->partial = s;
        SM_FN(count_partial)(k, 1);
    }
    if (sm_unlikely(nfree == s->nobjs)) { /* empty: kept, or to go back */
        if (!SM_RETAIN_FN(keep)(&SM_FN(obj).retain, &k->retain, s, (size_t)(SM_OPT_EMPTY_MAX), evict))
            *release = SM_FN(retire)(k, s);
        else
            SM_FN(kept_mark)(k, true);
    }
    return put;
}

/* Marks object idx of slab s (class k) free: put_run_locked of one. False if it already was (a
 * double free: nothing changed). */
SM_INLINE bool SM_FN(put_locked)(struct SM_FN(class) *k, struct SM_FN(slab) *s, size_t idx,
                                 struct SM_FN(slab) **release, bool *evict)
{
    uint16_t one = (uint16_t)idx;
    return SM_FN(put_run_locked)(k, s, &one, 1, release, evict) == 1;
}

#endif /* SM_SLAB_LK_PARTS */
