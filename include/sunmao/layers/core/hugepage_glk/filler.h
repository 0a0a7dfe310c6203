/* hugepage_glk/filler.h: the page bitmaps of a hugepage, the lists a hugepage is on, and regions
 * from the next layer. Every function here is called with the layer's lock held.
 * A part of hugepage_glk.h. Included alone, as tools/check-headers.sh does, it instantiates the
 * whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_HUGEPAGE_GLK_PARTS
#include "../hugepage_glk.h"
#else

SM_INLINE struct SM_FN(hp) *SM_FN(hp_of)(const void *p)
{
    return (struct SM_FN(hp) *)sm_pagemap2_get(SM_FN(obj).map, SM_FN(huge_shift), p);
}

SM_INLINE bool SM_FN(bit)(const uint64_t *bits, unsigned i) { return (bits[i >> 6] >> (i & 63)) & 1; }

/* Mask of bits [lo, hi) of word w (0 <= lo < hi <= 64 within it). */
SM_INLINE uint64_t SM_FN(mask)(unsigned lo, unsigned hi)
{
    uint64_t upto = hi >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi) - 1;
    return upto & ~(((uint64_t)1 << lo) - 1);
}

/* Sets (on) or clears bits [from, to). Returns how many of them were set before. */
SM_INLINE unsigned SM_FN(set_range)(uint64_t *bits, unsigned from, unsigned to, bool on)
{
    unsigned was = 0;
    while (from < to) {
        unsigned w = from >> 6, end = (to - (from & ~63u)) > 64 ? 64 : to - (from & ~63u);
        uint64_t m = SM_FN(mask)(from & 63, end);
        was += sm_popcount64(bits[w] & m);
        bits[w] = on ? bits[w] | m : bits[w] & ~m;
        from = (from & ~63u) + end;
    }
    return was;
}

/* The first set bit in [from, to), or to if none. */
SM_INLINE unsigned SM_FN(first_taken)(const uint64_t *bits, unsigned from, unsigned to)
{
    while (from < to) {
        uint64_t word = bits[from >> 6] & ~(((uint64_t)1 << (from & 63)) - 1);
        if (word) {
            unsigned i = (from & ~63u) + (unsigned)__builtin_ctzll(word);
            return i < to ? i : to;
        }
        from = (from & ~63u) + 64;
    }
    return to;
}

/* The first clear bit at or after from, or 512. */
SM_INLINE unsigned SM_FN(first_free)(const uint64_t *bits, unsigned from)
{
    while (from < SM_FN(pages)) {
        uint64_t word = ~bits[from >> 6] & ~(((uint64_t)1 << (from & 63)) - 1);
        if (word)
            return (from & ~63u) + (unsigned)__builtin_ctzll(word);
        from = (from & ~63u) + 64;
    }
    return SM_FN(pages);
}

/* One past the last set bit before `before`, or 0 if none: where the free run ending there starts. */
SM_INLINE unsigned SM_FN(run_start)(const uint64_t *bits, unsigned before)
{
    while (before > 0) {
        unsigned w = (before - 1) >> 6, top = before - (w << 6); /* bits [0, top) of word w */
        uint64_t word = bits[w] & SM_FN(mask)(0, top);
        if (word)
            return (w << 6) + 64 - (unsigned)__builtin_clzll(word);
        before = w << 6;
    }
    return 0;
}

SM_INLINE unsigned SM_FN(longest_run)(const uint64_t *bits)
{
    unsigned best = 0;
    for (unsigned at = SM_FN(first_free)(bits, 0); at < SM_FN(pages);) {
        unsigned end = SM_FN(first_taken)(bits, at, SM_FN(pages));
        if (end - at > best)
            best = end - at;
        at = SM_FN(first_free)(bits, end);
    }
    return best;
}

/* The lowest start, a multiple of align (pages, a power of two), of n free pages; 512 if none. */
SM_INLINE unsigned SM_FN(find_run)(const uint64_t *bits, unsigned n, unsigned align)
{
    for (unsigned at = (unsigned)sm_align_up(SM_FN(first_free)(bits, 0), align); at + n <= SM_FN(pages);) {
        unsigned hit = SM_FN(first_taken)(bits, at, at + n);
        if (hit == at + n)
            return at;
        at = (unsigned)sm_align_up(SM_FN(first_free)(bits, hit + 1), align); /* past the taken pages */
    }
    return SM_FN(pages);
}

/* Partial list index: longest free run class (its log2), then fullness, fullest last. */
SM_INLINE unsigned SM_FN(bucket_of)(const struct SM_FN(hp) *hp)
{
    return sm_log2_floor(hp->longest) * SM_FN(tiers) + (unsigned)hp->used / (SM_FN(pages) / SM_FN(tiers));
}

SM_INLINE struct SM_FN(hp) **SM_FN(head_of)(struct SM_FN(hp) *hp)
{
    switch (hp->list) {
    case SM_FN(on_partial): return &SM_FN(obj).partial[hp->set][hp->bucket];
    case SM_FN(on_dirty): return &SM_FN(obj).dirty;
    default: return &SM_FN(obj).clean;
    }
}

SM_INLINE void SM_FN(unlist)(struct SM_FN(hp) *hp)
{
    if (hp->list == SM_FN(on_none))
        return;
    struct SM_FN(hp) **head = SM_FN(head_of)(hp);
    if (hp->prev)
        hp->prev->next = hp->next;
    else
        *head = hp->next;
    if (hp->next)
        hp->next->prev = hp->prev;
    if (hp->list == SM_FN(on_partial) && !*head)
        SM_FN(obj).nonempty[hp->set] &= ~((uint64_t)1 << hp->bucket);
    hp->list = SM_FN(on_none);
    hp->next = hp->prev = NULL;
}

/* Lists hp where its bitmaps say it belongs (it is on no list). A free hugepage goes on the
 * free lists' head (LIFO: the one freed last is the most likely to be still backed). */
SM_INLINE void SM_FN(relist)(struct SM_FN(hp) *hp)
{
    if (hp->longest == 0)
        return; /* full: on no list */
    if (hp->longest == SM_FN(pages))
        hp->list = hp->npurged == SM_FN(pages) ? SM_FN(on_clean) : SM_FN(on_dirty);
    else {
        hp->list = SM_FN(on_partial);
        hp->bucket = (uint8_t)SM_FN(bucket_of)(hp);
        SM_FN(obj).nonempty[hp->set] |= (uint64_t)1 << hp->bucket;
    }
    struct SM_FN(hp) **head = SM_FN(head_of)(hp);
    hp->prev = NULL;
    hp->next = *head;
    if (*head)
        (*head)->prev = hp;
    *head = hp;
}

/* Lists hp again after its longest run or its pages in use changed, unless it stays where it is. */
SM_INLINE void SM_FN(relist_if_moved)(struct SM_FN(hp) *hp, unsigned longest)
{
    bool stays = hp->list == SM_FN(on_partial) && longest == hp->longest && longest > 0 && longest < SM_FN(pages) &&
                 SM_FN(bucket_of)(hp) == hp->bucket;
    if (stays)
        return;
    SM_FN(unlist)(hp);
    hp->longest = (uint16_t)longest;
    SM_FN(relist)(hp);
}

/* After its bitmaps changed in any way: its longest free run, and its list. */
SM_INLINE void SM_FN(refresh)(struct SM_FN(hp) *hp)
{
    SM_FN(unlist)(hp);
    hp->longest = (uint16_t)SM_FN(longest_run)(hp->taken);
    SM_FN(relist)(hp);
}

/* The partial hugepage of set for n pages aligned to align pages: the smallest longest-free-run
 * class that can hold them, fullest first; *start gets the span's first page. */
SM_INLINE struct SM_FN(hp) *SM_FN(find_partial)(unsigned set, unsigned n, unsigned align, unsigned *start)
{
    if (n >= SM_FN(pages))
        return NULL;
    const unsigned first = sm_log2_floor(n);
    uint64_t lists = SM_FN(obj).nonempty[set] & ~(((uint64_t)1 << (first * SM_FN(tiers))) - 1);
    while (lists) {
        unsigned cls = (unsigned)__builtin_ctzll(lists) / SM_FN(tiers);
        for (unsigned t = SM_FN(tiers); t-- > 0;) {
            for (struct SM_FN(hp) *hp = SM_FN(obj).partial[set][cls * SM_FN(tiers) + t]; hp; hp = hp->next) {
                if (hp->longest < n)
                    continue; /* only in the first class */
                unsigned at = SM_FN(find_run)(hp->taken, n, align);
                if (at < SM_FN(pages)) {
                    *start = at;
                    return hp;
                }
            }
        }
        lists &= ~SM_FN(mask)(0, (cls + 1) * SM_FN(tiers));
    }
    return NULL;
}

/* Marks pages [i, i + n) of hp a span. */
SM_INLINE void SM_FN(take)(struct SM_FN(hp) *hp, unsigned i, unsigned n)
{
    /* Only taking from a longest run can shorten the longest run: the scan is needed then only. */
    unsigned run = SM_FN(first_taken)(hp->taken, i + n, SM_FN(pages)) - SM_FN(run_start)(hp->taken, i);
    SM_FN(set_range)(hp->taken, i, i + n, true);
    hp->npurged = (uint16_t)(hp->npurged - SM_FN(set_range)(hp->purged, i, i + n, false));
    hp->span[i] = (uint16_t)n;
    hp->used = (uint16_t)(hp->used + n);
    SM_FN(obj).used_pages += n;
    hp->stamp = 0; /* in use again: not idle */
    SM_FN(relist_if_moved)(hp, run == hp->longest ? SM_FN(longest_run)(hp->taken) : hp->longest);
}

/* Frees the span of n pages at page i of hp. */
SM_INLINE void SM_FN(give)(struct SM_FN(hp) *hp, unsigned i, unsigned n)
{
    SM_FN(set_range)(hp->taken, i, i + n, false);
    hp->span[i] = 0;
    hp->used = (uint16_t)(hp->used - n);
    SM_FN(obj).used_pages -= n;
    /* The freed pages and the free runs on either side are one run now: the longest, or not. */
    unsigned run = SM_FN(first_taken)(hp->taken, i + n, SM_FN(pages)) - SM_FN(run_start)(hp->taken, i);
    SM_FN(relist_if_moved)(hp, run > hp->longest ? run : hp->longest);
}

/* Whether a hugepage taken into use now is to be hinted huge (see SM_OPT_HUGE_AFTER). */
SM_INLINE bool SM_FN(want_huge)(void)
{
    /* x + 1 > t, not x >= t: with a threshold of 0, gcc flags the latter as always true (-Wtype-limits). */
    return sm_conf.thp == SM_CONF_THP_DEFAULT &&
           (SM_FN(obj).used_pages << SM_FN(page_shift)) + 1 > (size_t)(SM_OPT_HUGE_AFTER);
}

/* Page-map leaves: zero-filled, from the metadata route, counted in map_nodes (core/pagemap.h). */
SM_PAGEMAP_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).map_nodes)

/* Adds a region of clean free hugepages. The next layer is called under the lock, so two threads
 * that miss at once do not both take one. thp:always hints the region huge at once, thp:never
 * forbids it (over a system setting of always). */
SM_SLOWPATH bool SM_FN(grow)(void)
{
    const size_t huge = (size_t)1 << SM_FN(huge_shift), count = (SM_OPT_REGION_SIZE) / huge;
    sm_mctx_t r = sm_mctx_alloc(SM_OPT_REGION_SIZE, huge, 0);
    char *base = (char *)SM_NEXT_FN(alloc)(&r);
    if (!base)
        return false;
    const size_t bytes = sizeof(struct SM_FN(region)) + count * sizeof(struct SM_FN(hp));
    sm_mctx_t d = sm_mctx_alloc(bytes, SM_MIN_ALIGN, 0);
    struct SM_FN(region) *g = (struct SM_FN(region) *)SM_FN(meta_alloc)(&d);
    bool ok = g && sm_ptr_aligned(base, huge); /* a misaligned region would break every lookup */
    size_t mapped = 0;
    for (; ok && mapped < count; mapped++)
        ok = sm_pagemap2_set(SM_FN(obj).map, SM_FN(huge_shift), base + mapped * huge, huge,
                             (uintptr_t)&g->hp[mapped], SM_FN(map_node_alloc));
    if (!ok) {
        sm_pagemap2_set(SM_FN(obj).map, SM_FN(huge_shift), base, mapped * huge, 0, SM_FN(map_node_alloc));
        if (g) {
            sm_mctx_t f = sm_mctx_block(g, bytes, SM_F_SIZED);
            SM_FN(meta_free)(&f);
        }
        sm_mctx_t f = sm_mctx_block(base, SM_OPT_REGION_SIZE, SM_F_SIZED);
        SM_NEXT_FN(free)(&f);
        return false;
    }
    memset(g, 0, bytes);
    g->base = base;
    g->count = count;
    g->next = SM_FN(obj).regions;
    SM_FN(obj).regions = g;
    SM_FN(obj).region_count++;
    SM_FN(obj).hugepages += count;
    if (sm_conf.thp == SM_CONF_THP_NEVER)
        sm_plat_hint_nohuge(base, SM_OPT_REGION_SIZE);
    else if (sm_conf.thp == SM_CONF_THP_ALWAYS)
        sm_plat_hint_huge(base, SM_OPT_REGION_SIZE);
    for (size_t k = count; k-- > 0;) { /* the lowest address ends up first on the clean list */
        struct SM_FN(hp) *hp = &g->hp[k];
        hp->base = base + k * huge;
        hp->longest = SM_FN(pages);
        hp->npurged = SM_FN(pages); /* fresh: nothing backed */
        SM_FN(set_range)(hp->purged, 0, SM_FN(pages), true);
        hp->hinted = sm_conf.thp == SM_CONF_THP_ALWAYS;
        SM_FN(obj).hinted_count += hp->hinted;
        SM_FN(relist)(hp);
    }
    return true;
}

#endif
