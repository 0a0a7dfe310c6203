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
 * any composition; without an exit hook the tail stays unused: address space, never memory.
 * A new region is a mapping of the thread's own (new_region), or with SM_OPT_FAA_GROWTH the next
 * region of a shared arena (faa_region): one fetch-and-add on the arena's top word, which packs the
 * arena's base over the next region's index, so its result alone names the region; the arena's
 * nodes exist since its reservation. A result past the end (an overshoot) names none: that thread
 * takes the lock and, unless the top names another arena by then, reserves the next arena and takes
 * its first region. The top is replaced only under the lock and only when used up, so each index
 * below the end is handed out once and none is lost; a thread adds only to a top it read as not
 * used up, so it overshoots an arena at most once and the 28-bit index never carries into the base.
 * With nothing to reuse (no freed block, no orphan tail: two loads) that path takes no lock at all.
 * A part of os/mmap_heap.h; defines L_take_freed_locked, L_cs_region_nodes, L_new_region, the
 * arena's L_faa_word/base/index/region_of, L_cs_arena and L_faa_region, L_cs_carve, L_carve_slow
 * (the fast carve is in L_alloc, the frees in L_free_carved and L_thread_exit).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/err/warn.h> SM_ERR=warn */
#ifndef SM_MMAP_HEAP_PARTS
#include "../mmap_heap.h"
#else

/* The thread-heap functions below are dead code when SM_OPT_THREAD_HEAP_SIZE is 0 (options may
 * be expressions with casts, which #if cannot evaluate). */
/* A freed carved block of at least `bytes` (page-granular), made live again; NULL if none. A larger
 * block is cut: the pages past `bytes` stay on the free list as a block of their own, so a request
 * never gets a block far larger than it asked for (a 17 KiB request once got a 60 KiB one). Caller
 * holds the lock. */
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
            if (size - bytes >= ((size_t)1 << SM_FN(granule_shift))) {
                struct SM_FN(link) *tail = (struct SM_FN(link) *)((char *)b + bytes);
                unsigned tbin = sm_log2_floor((size - bytes) >> SM_FN(granule_shift));
                if (tbin >= SM_FN(bin_count))
                    tbin = SM_FN(bin_count) - 1;
                tail->end = b->end; /* one page of the purged tail is touched again */
                tail->next = SM_FN(obj).bins[tbin];
                SM_FN(obj).bins[tbin] = tail;
                SM_FN(record)(tail, (size - bytes) | SM_FN(w_carved) | SM_FN(w_free));
                size = bytes;
            } else {
                __atomic_store_n(&SM_FN(obj).freed_count, SM_FN(obj).freed_count - 1, __ATOMIC_RELAXED);
            }
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
    SM_FN(hint_pages)(base, size, SM_OPT_HUGE_PAGES);
    struct SM_FN(cs_record) r = { base, size, NULL, 0, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_region_nodes), &r);
    if (!r.ok) {
        sm_plat_unmap(base, size);
        return false;
    }
    SM_FN(region).cur = base, SM_FN(region).end = base + size;
    return true;
}

/* SM_OPT_FAA_GROWTH. The arena's top word: its base as a page number (bits 28 and up; addresses
 * stay below 2^48, or the page map refuses the arena) over the index of its next region. */
enum { SM_FN(faa_index_bits) = 28 };
SM_INLINE uint64_t SM_FN(faa_word)(const char *base, uint64_t index)
{
    return ((uint64_t)((uintptr_t)base >> SM_FN(granule_shift)) << SM_FN(faa_index_bits)) | index;
}
SM_INLINE char *SM_FN(faa_base)(uint64_t w)
{
    return (char *)(uintptr_t)((w >> SM_FN(faa_index_bits)) << SM_FN(granule_shift));
}
SM_INLINE uint64_t SM_FN(faa_index)(uint64_t w) { return w & (((uint64_t)1 << SM_FN(faa_index_bits)) - 1); }
/* Regions of an arena lie side by side, each the thread-heap size rounded up to pages. */
SM_INLINE size_t SM_FN(region_stride)(void) { return sm_align_up(SM_OPT_THREAD_HEAP_SIZE, sm_plat_page_size()); }
/* The region a fetch-and-add's result names; NULL past the arena's end (an overshoot) or no arena. */
SM_INLINE char *SM_FN(faa_region_of)(uint64_t w)
{
    if (!w || SM_FN(faa_index)(w) >= (uint64_t)(SM_OPT_FAA_ARENA_REGIONS))
        return NULL;
    return SM_FN(faa_base)(w) + SM_FN(faa_index)(w) * SM_FN(region_stride)();
}

/* The arena `seen` is used up, or there is none: unless the top names another arena by now
 * (retry), reserve the next arena, create its page-map nodes, and take its first region (a section;
 * it runs under the lock, so one thread reserves and the others that overshot then retry). */
struct SM_FN(cs_arena) { uint64_t seen; char *region; bool retry; };
SM_INLINE void SM_FN(cs_arena)(void *arg)
{
    struct SM_FN(cs_arena) *a = (struct SM_FN(cs_arena) *)arg;
    uint64_t top = __atomic_load_n(&SM_FN(obj).arena_top, __ATOMIC_RELAXED);
    if (SM_FN(faa_base)(top) != SM_FN(faa_base)(a->seen)) {
        a->retry = true;
        return;
    }
    size_t bytes = SM_FN(region_stride)() * (size_t)(SM_OPT_FAA_ARENA_REGIONS);
    size_t align = SM_OPT_HUGE_PAGES ? (size_t)SM_FN(huge_bytes) : sm_plat_page_size();
    int saved = errno;
    char *base = (char *)sm_plat_map_aligned(bytes, align);
    struct SM_FN(cs_record) r = { base, bytes, NULL, 0, false };
    if (base) {
        SM_FN(hint_pages)(base, bytes, SM_OPT_HUGE_PAGES);
        SM_FN(cs_region_nodes)(&r);
        if (!r.ok)
            sm_plat_unmap(base, bytes);
    }
    errno = saved;
    if (!r.ok)
        return;
    SM_FN(obj).arenas++;
    /* Release: a thread whose fetch-and-add reads this top sees the nodes made above. */
    __atomic_store_n(&SM_FN(obj).arena_top, SM_FN(faa_word)(base, 1), __ATOMIC_RELEASE);
    a->region = base;
}

/* The thread's next region from the arena: one fetch-and-add, no lock, no system call; the lock
 * only for the thread that finds the arena used up (or none yet). False: no arena can be had. */
SM_UNUSED static bool SM_FN(faa_region)(void)
{
    char *region = NULL;
    while (!region) {
        uint64_t w = __atomic_load_n(&SM_FN(obj).arena_top, __ATOMIC_ACQUIRE);
        if (SM_FN(faa_region_of)(w)) /* not used up: add (an exhausted top is left alone) */
            w = __atomic_fetch_add(&SM_FN(obj).arena_top, 1, __ATOMIC_ACQUIRE);
        if ((region = SM_FN(faa_region_of)(w)) != NULL)
            break;
        struct SM_FN(cs_arena) a = { w, NULL, false };
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_arena), &a);
        if (!a.region && !a.retry)
            return false;
        region = a.region;
    }
    SM_FN(region).cur = region, SM_FN(region).end = region + SM_FN(region_stride)();
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
        __atomic_store_n(at, t->next, __ATOMIC_RELAXED); /* the head is read without the lock */
        k->adopt_cur = (char *)t, k->adopt_end = t->end;
        t->next = NULL, t->end = NULL;
        break;
    }
}

SM_SLOWPATH SM_UNUSED void *SM_FN(carve_slow)(sm_mctx_t *c, size_t bytes)
{
    struct SM_FN(cs_carve) k = { bytes, (size_t)(SM_FN(region).end - SM_FN(region).cur), NULL, 0, NULL, NULL };
    /* FAA growth: nothing to reuse (a race only costs the reuse) means no lock on the way to a region. */
    if (!(SM_OPT_FAA_GROWTH) || __atomic_load_n(&SM_FN(obj).freed_count, __ATOMIC_RELAXED) ||
        __atomic_load_n(&SM_FN(obj).orphans, __ATOMIC_RELAXED))
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_carve), &k);
    void *p = k.p;
    size_t usable = k.usable;
    if (k.adopt_cur) /* an exited thread's tail: this thread's region from now on */
        SM_FN(region).cur = k.adopt_cur, SM_FN(region).end = k.adopt_end;
    if (!p) {
        /* A new region, from the arena, else (no FAA growth, or no arena to be had) of its own; the
         * old tail, smaller than one block, is dropped: address space only, never touched. */
        if ((size_t)(SM_FN(region).end - SM_FN(region).cur) < bytes &&
            !((SM_OPT_FAA_GROWTH) && SM_FN(faa_region)()) && !SM_FN(new_region)())
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
