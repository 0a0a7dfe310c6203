/* mmap_heap/thread_heap.h: per-thread heaps (SM_OPT_THREAD_HEAP_SIZE). A thread carves page-granular
 * blocks from its private region with plain stores to a thread-local cursor: no lock, no atomic
 * read-modify-write. That works because the page-map nodes covering the whole region are created
 * when the region is reserved, so recording a carved block is a single store to a word no other
 * thread writes. Frees may come from any thread: a carved block's pages are purged with
 * MADV_DONTNEED (zero again on next touch, so reuse stays SM_F_FRESH) and the block goes on a
 * shared, locked free list binned by log2 of its page count; allocation looks there first only when
 * the shared counter of such blocks is non-zero (one plain load otherwise). Regions are never
 * unmapped: their pages cost RSS only while carved blocks are live. When a thread exits
 * (thread_exit), the uncarved tail of its region goes on a shared list that the next thread needing
 * space adopts, so short-lived threads do not each burn a region of address space. Carving attaches
 * the thread to the composition's lifecycle service (platform/lifecycle.h), so that happens under
 * any composition; without an exit hook the tail stays unused: address space, never memory. A part
 * of os/mmap_heap.h; defines L_take_freed_locked, L_cs_region_nodes, L_new_region, L_cs_carve and
 * L_carve_slow (the fast carve is in L_alloc, the frees in L_free_carved and L_thread_exit).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/err/warn.h> SM_ERR=warn */
#ifndef SM_MMAP_HEAP_PARTS
#include "../mmap_heap.h"
#else

/* The thread-heap functions below are dead code when SM_OPT_THREAD_HEAP_SIZE is 0 (options may
 * be expressions with casts, which #if cannot evaluate). */
/* A freed carved block of at least `bytes`, made live again; NULL if none. Caller holds the lock. */
SM_UNUSED static void *SM_FN(take_freed_locked)(size_t bytes, size_t *usable)
{
    unsigned bin = sm_log2_floor(bytes >> SM_FN(granule_shift));
    for (; bin < SM_FN(bin_count); bin++) {
        for (struct SM_FN(link) **at = &SM_FN(obj).bins[bin]; *at; at = &(*at)->next) {
            struct SM_FN(link) *b = *at;
            size_t size = (size_t)(b->end - (char *)b);
            if (size < bytes)
                continue;
            *at = b->next;
            __atomic_store_n(&SM_FN(obj).freed_count, SM_FN(obj).freed_count - 1, __ATOMIC_RELAXED);
            b->next = NULL, b->end = NULL; /* the purged block is all zero again */
            SM_FN(record)(b, size | SM_FN(w_carved));
            *usable = size;
            return b;
        }
    }
    return NULL;
}

/* The page-map nodes covering the region [p1, p1 + w1 bytes) (a section). */
SM_INLINE void SM_FN(cs_region_nodes)(void *arg)
{
    struct SM_FN(cs_record) *r = (struct SM_FN(cs_record) *)arg;
    const size_t leaf_span = (size_t)1 << (SM_FN(granule_shift) + SM_PAGEMAP_NODE_BITS);
    char *base = r->p1, *end = r->p1 + r->w1;
    r->ok = true;
    for (char *g = base; r->ok && g < end; g = (char *)sm_align_down((uintptr_t)g + leaf_span, leaf_span))
        r->ok = SM_FN(record)(g, SM_FN(w_free)) && SM_FN(record)(g, 0); /* w_free alone: not a block */
}

/* Reserve a region and create the page-map nodes covering it, so carving never allocates. */
SM_UNUSED static bool SM_FN(new_region)(void)
{
    size_t size = SM_OPT_THREAD_HEAP_SIZE;
    char *base = (char *)sm_plat_map(size);
    if (!base)
        return false;
    if (SM_OPT_HUGE_PAGES)
        sm_plat_hint_huge(base, size);
    struct SM_FN(cs_record) r = { base, size, NULL, 0, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_region_nodes), &r);
    if (!r.ok) {
        sm_plat_unmap(base, size);
        return false;
    }
    SM_FN(region).cur = base, SM_FN(region).end = base + size;
    return true;
}

SM_INLINE void SM_FN(thread_exit)(void);

/* The thread's region cannot hold `bytes`: reuse a freed block, adopt an orphan tail or reserve. */
struct SM_FN(cs_carve) { size_t bytes, room; void *p; size_t usable; char *adopt_cur, *adopt_end; };
SM_INLINE void SM_FN(cs_carve)(void *arg)
{
    struct SM_FN(cs_carve) *k = (struct SM_FN(cs_carve) *)arg;
    if (SM_FN(obj).freed_count)
        k->p = SM_FN(take_freed_locked)(k->bytes, &k->usable);
    if (k->p || k->room >= k->bytes)
        return;
    for (struct SM_FN(link) **at = &SM_FN(obj).orphans; *at; at = &(*at)->next) {
        struct SM_FN(link) *t = *at;
        if ((size_t)(t->end - (char *)t) < k->bytes)
            continue;
        *at = t->next;
        k->adopt_cur = (char *)t, k->adopt_end = t->end;
        t->next = NULL, t->end = NULL;
        break;
    }
}

SM_SLOWPATH SM_UNUSED void *SM_FN(carve_slow)(sm_mctx_t *c, size_t bytes)
{
    struct SM_FN(cs_carve) k = { bytes, (size_t)(SM_FN(region).end - SM_FN(region).cur), NULL, 0, NULL, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_carve), &k);
    void *p = k.p;
    size_t usable = k.usable;
    if (k.adopt_cur) /* an exited thread's tail: this thread's region from now on */
        SM_FN(region).cur = k.adopt_cur, SM_FN(region).end = k.adopt_end;
    if (!p) {
        /* The old tail, smaller than one block, is dropped: address space only, never touched. */
        if ((size_t)(SM_FN(region).end - SM_FN(region).cur) < bytes && !SM_FN(new_region)())
            return SM_FN(map_direct)(c);
        /* Its tail goes on the orphan list when the thread exits (without an exit hook it stays
         * with the thread: address space only, never touched). */
        (void)sm_thread_attach(SM_FN(thread_exit));
        p = SM_FN(region).cur;
        SM_FN(region).cur += bytes;
        usable = bytes;
        SM_FN(record)(p, usable | SM_FN(w_carved));
    }
    c->flags |= SM_F_FRESH;
    return c->ptr = p;
}

#endif /* SM_MMAP_HEAP_PARTS */
