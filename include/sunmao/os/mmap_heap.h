/* mmap_heap: OS layer over anonymous mmap (paper Table 2; mmap_heap(faa_heap_growth, threadlocal_heap_size,
 * huge_page)). The bottom of a composition: no SM_NEXT.
 * Why it is built this way: docs/layers.md, section OS layers.
 *
 * Parameters: SM_LAYER. Slots: err (required; invalid and double frees), sync (optional, default
 * spinlock: guards the block registry, never taken on the thread-heap carve path).
 * Options:
 *   SM_OPT_GROWTH                 direct mappings are rounded up to this (0 = the page size; default 0)
 *   SM_OPT_THREAD_HEAP_SIZE       0 = off (default); else bytes of address space each thread reserves
 *                                 (MAP_NORESERVE) and bump-allocates small requests from
 *   SM_OPT_THREAD_HEAP_MAX_BLOCK  largest request served by the thread heap (default 1 MiB, and never
 *                                 more than a quarter of the thread heap)
 *   SM_OPT_HUGE_PAGES             1: ask for transparent huge pages on mappings >= 2 MiB, aligned to 2 MiB
 *                                 (and on thread regions and arenas, arenas aligned to 2 MiB)
 *   SM_OPT_FAA_GROWTH             1: thread regions come from shared arenas, each taken by one atomic
 *                                 fetch-and-add on the arena's top (the paper's faa_heap_growth); 0
 *                                 (default): each thread maps its own region. Needs SM_OPT_THREAD_HEAP_SIZE
 *   SM_OPT_FAA_ARENA_REGIONS      regions per arena with SM_OPT_FAA_GROWTH (default 64): address space
 *                                 reserved at a time (MAP_NORESERVE), page-map nodes created with it
 * Properties: thread-safe, page-aligned blocks, always zero-filled (SM_F_FRESH on every result).
 * Capabilities: MAPPING (L_remap grows a direct block, moving it if need be; L_split cuts one;
 * L_join makes two adjacent ones one); MOVE (a direct block as remap moves it, a carved one into a
 * mapping of its own).
 *
 * Invariants: every block handed out is recorded in a page map keyed by its first page, holding its
 * size and kind (direct: a mapping of its own; carved: from a thread region, whose page-map nodes
 * exist from its reservation, or its arena's, on), so free without a size, getmeta and
 * foreign-pointer detection cost one lock-free lookup; a free claims the word under the lock, so a
 * racing second free is reported, not obeyed. A region taken from an arena lies inside it and is
 * handed out once (thread_heap.h says why). Lock order: the registry lock only (page-map updates
 * and node mappings, freed bins, orphan tails, arena reservation), in sections run by the sync
 * policy's atomic_exec; the arena's top changes by fetch-and-add outside it, is replaced only in it.
 * Parts, in os/mmap_heap/, included below by this template only: thread_heap.h (thread heaps).
 * @model: name=mmap_heap kind=os slot err slot sync=spinlock key growth size
 * @model: key thread_heap_size size paper=threadlocal_heap_size key thread_heap_max_block size
 * @model: key huge_pages bool paper=huge_page key faa_growth bool paper=faa_heap_growth
 * @model: key faa_arena_regions int
 * @check: SM_LAYER=t <sunmao/policies/err/warn.h> SM_ERR=warn */
#include "../core/bits.h"
#include "../core/conf.h"
#include "../core/layer.h"
#include "../core/errors.h"
#include "../core/pagemap.h"
#include "../platform/platform.h"

#ifndef SM_LAYER
#error "mmap_heap: define SM_LAYER (this instance's name) before including"
#endif
#ifdef SM_NEXT
#error "mmap_heap: an OS layer is the bottom of a composition; SM_NEXT must not be defined"
#endif
#ifndef SM_ERR
#error "mmap_heap: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_SYNC
#include "../policies/sync/spinlock.h"
#define SM_SYNC spinlock
#endif
#ifndef SM_OPT_GROWTH
#define SM_OPT_GROWTH 0
#endif
#ifndef SM_OPT_THREAD_HEAP_SIZE
#define SM_OPT_THREAD_HEAP_SIZE 0
#endif
#ifndef SM_OPT_THREAD_HEAP_MAX_BLOCK
#define SM_OPT_THREAD_HEAP_MAX_BLOCK ((size_t)1 << 20)
#endif
#ifndef SM_OPT_HUGE_PAGES
#define SM_OPT_HUGE_PAGES 0
#endif
#ifndef SM_OPT_FAA_GROWTH
#define SM_OPT_FAA_GROWTH 0
#endif
#ifndef SM_OPT_FAA_ARENA_REGIONS
#define SM_OPT_FAA_ARENA_REGIONS 64
#endif
_Static_assert((SM_OPT_GROWTH) == 0 || ((SM_OPT_GROWTH) & ((SM_OPT_GROWTH) - 1)) == 0,
               "mmap_heap: SM_OPT_GROWTH must be 0 or a power of two");
_Static_assert((SM_OPT_THREAD_HEAP_SIZE) == 0 || (SM_OPT_THREAD_HEAP_SIZE) >= ((size_t)1 << 20),
               "mmap_heap: SM_OPT_THREAD_HEAP_SIZE must be 0 or at least 1 MiB");
_Static_assert((SM_OPT_FAA_GROWTH) == 0 || (SM_OPT_FAA_GROWTH) == 1, "mmap_heap: SM_OPT_FAA_GROWTH must be 0 or 1");
_Static_assert((SM_OPT_FAA_GROWTH) == 0 || (SM_OPT_THREAD_HEAP_SIZE) != 0,
               "mmap_heap: SM_OPT_FAA_GROWTH 1 needs SM_OPT_THREAD_HEAP_SIZE != 0 (it grows the thread heaps)");
_Static_assert((SM_OPT_FAA_ARENA_REGIONS) >= 1 && (SM_OPT_FAA_ARENA_REGIONS) <= 65536,
               "mmap_heap: SM_OPT_FAA_ARENA_REGIONS must be in [1, 65536]");
_Static_assert((SM_OPT_FAA_GROWTH) == 0 ||
                   (SM_OPT_THREAD_HEAP_SIZE) <= ((size_t)1 << 40) / (size_t)(SM_OPT_FAA_ARENA_REGIONS),
               "mmap_heap: SM_OPT_FAA_ARENA_REGIONS x SM_OPT_THREAD_HEAP_SIZE must be at most 1 TiB");

/* Page-map word of a block's first page: its size (a multiple of 4 KiB) | kind bits. */
enum {
    SM_FN(granule_shift) = 12,
    SM_FN(w_direct) = 1,   /* a mapping of its own: free unmaps it */
    SM_FN(w_carved) = 2,   /* carved from a thread region */
    SM_FN(w_free) = 4,     /* with w_carved: freed, waiting on a bin */
    SM_FN(w_kind_mask) = 0xfff,
    SM_FN(bin_count) = 24,
    SM_FN(huge_bytes) = 2 << 20,
};
#define SM_MMAP_THREAD_MAX                                                                          \
    ((size_t)(SM_OPT_THREAD_HEAP_MAX_BLOCK) < (size_t)(SM_OPT_THREAD_HEAP_SIZE) / 4                \
         ? (size_t)(SM_OPT_THREAD_HEAP_MAX_BLOCK)                                                   \
         : (size_t)(SM_OPT_THREAD_HEAP_SIZE) / 4)

/* Stored in the first bytes of a freed carved block, or of an abandoned region tail. */
struct SM_FN(link) { struct SM_FN(link) *next; char *end; };

static struct {
    SM_SYNC_FN(t) lock;
    sm_pagemap_t map;
    struct SM_FN(link) *bins[SM_FN(bin_count)]; /* freed carved blocks, by log2 of page count */
    size_t freed_count;                          /* blocks in bins; read without the lock */
    struct SM_FN(link) *orphans;                 /* region tails of exited threads */
    uint64_t arena_top;                          /* SM_OPT_FAA_GROWTH: the arena and its next region */
    size_t arenas;                               /* arenas reserved (under the lock) */
    size_t in_use, node_bytes;                   /* statistics: live blocks, page-map nodes (atomic) */
} SM_FN(obj) = { SM_SYNC_INIT, { { 0 } }, { 0 }, 0, 0, 0, 0, 0, 0 };

/* Default TLS model on purpose: initial-exec would make the library impossible to dlopen. */
static __thread struct { char *cur, *end; } SM_FN(region);

enum {
    SM_FN(thread_safe) = 1,
    SM_FN(min_align) = 4096, /* the smallest page size; the true page size at run time */
    SM_FN(zeroed) = 1,
};

SM_INLINE size_t SM_FN(granularity)(void)
{
    size_t page = sm_plat_page_size(), growth = SM_OPT_GROWTH;
    return growth > page ? growth : page;
}

/* Called in sections: a failed mapping leaves errno alone (the caller reports ENOMEM itself). */
static void *SM_FN(node_alloc)(size_t bytes)
{
    int saved = errno;
    void *p = sm_plat_map(bytes);
    errno = saved;
    if (p)
        __atomic_add_fetch(&SM_FN(obj).node_bytes, bytes, __ATOMIC_RELAXED);
    return p;
}

SM_INLINE uintptr_t SM_FN(word)(const void *p)
{
    if (!p || !sm_ptr_aligned(p, (size_t)1 << SM_FN(granule_shift)))
        return 0;
    return sm_pagemap_get(&SM_FN(obj).map, SM_FN(granule_shift), p);
}

SM_INLINE bool SM_FN(word_live)(uintptr_t w)
{
    return (w & (SM_FN(w_direct) | SM_FN(w_carved))) && !(w & SM_FN(w_free));
}

SM_INLINE bool SM_FN(record)(void *p, uintptr_t w)
{
    /* Every live block comes and goes through here: the statistics' in_use follows the words. */
    uintptr_t old = SM_FN(word)(p);
    if (!sm_pagemap_set(&SM_FN(obj).map, SM_FN(granule_shift), p, 1, w, SM_FN(node_alloc)))
        return false;
    size_t was = SM_FN(word_live)(old) ? old & ~(uintptr_t)SM_FN(w_kind_mask) : 0;
    size_t now = SM_FN(word_live)(w) ? w & ~(uintptr_t)SM_FN(w_kind_mask) : 0;
    if (was != now)
        __atomic_add_fetch(&SM_FN(obj).in_use, now - was, __ATOMIC_RELAXED);
    return true;
}

/* The huge-page hint of a new mapping: the layer's own (want: SM_OPT_HUGE_PAGES and a mapping that
 * large) unless thp (core/conf.h) says always or never. Mapping paths only. */
SM_INLINE void SM_FN(hint_pages)(void *p, size_t bytes, bool want)
{
    if (sm_conf.thp == SM_CONF_THP_NEVER)
        sm_plat_hint_nohuge(p, bytes);
    else if (want || sm_conf.thp == SM_CONF_THP_ALWAYS)
        sm_plat_hint_huge(p, bytes);
}

SM_INLINE int SM_FN(create)(void)
{
    (void)sm_plat_page_size();
    return 0;
}

/* Critical sections go to the sync policy's atomic_exec, which may run them on another thread (a
 * combining policy): they make no system call but mappings for page-map nodes and arenas, leave
 * errno as it was, raise nothing and touch no thread-local state (the thread's region is the
 * caller's); results travel back in the argument. */

/* Up to two registry updates in one section: the second only if the first succeeded. */
struct SM_FN(cs_record) { char *p1; uintptr_t w1; char *p2; uintptr_t w2; bool ok; };
SM_INLINE void SM_FN(cs_record)(void *arg)
{
    struct SM_FN(cs_record) *r = (struct SM_FN(cs_record) *)arg;
    r->ok = SM_FN(record)(r->p1, r->w1);
    if (r->ok && r->p2)
        SM_FN(record)(r->p2, r->w2); /* its node exists (the caller knows): cannot fail */
}

SM_INLINE bool SM_FN(record_2)(void *p1, uintptr_t w1, void *p2, uintptr_t w2)
{
    struct SM_FN(cs_record) r = { (char *)p1, w1, (char *)p2, w2, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_record), &r);
    return r.ok;
}

SM_SLOWPATH void *SM_FN(map_direct)(sm_mctx_t *c)
{
    if (c->size > SIZE_MAX / 2 || c->align > SIZE_MAX / 4) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    size_t align = c->align;
    size_t bytes = sm_align_up(c->size ? c->size : 1, SM_FN(granularity)());
    if (SM_OPT_HUGE_PAGES && bytes >= SM_FN(huge_bytes) && align < SM_FN(huge_bytes))
        align = SM_FN(huge_bytes);
    void *p = sm_plat_map_aligned(bytes, align);
    if (!p)
        return c->ptr = NULL;
    SM_FN(hint_pages)(p, bytes, SM_OPT_HUGE_PAGES && bytes >= SM_FN(huge_bytes));
    if (!SM_FN(record_2)(p, bytes | SM_FN(w_direct), NULL, 0)) {
        /* no memory for the registry: a block we could not recognise must not escape */
        sm_plat_unmap(p, bytes);
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    c->flags |= SM_F_FRESH;
    return c->ptr = p;
}

#define SM_MMAP_HEAP_PARTS 1
#include "mmap_heap/thread_heap.h"
#undef SM_MMAP_HEAP_PARTS

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t page = sm_plat_page_size();
    if ((SM_OPT_THREAD_HEAP_SIZE) != 0 && c->size <= SM_MMAP_THREAD_MAX && c->align <= page) {
        size_t bytes = sm_align_up(c->size ? c->size : 1, page);
        char *p = SM_FN(region).cur;
        if (sm_likely(!__atomic_load_n(&SM_FN(obj).freed_count, __ATOMIC_RELAXED) &&
                      (size_t)(SM_FN(region).end - p) >= bytes)) {
            SM_FN(region).cur = p + bytes;
            SM_FN(record)(p, bytes | SM_FN(w_carved)); /* node exists: one store, no allocation */
            c->flags |= SM_F_FRESH;
            return c->ptr = p;
        }
        return SM_FN(carve_slow)(c, bytes);
    }
    return SM_FN(map_direct)(c);
}

SM_SLOWPATH void SM_FN(bad_free)(void *p, uintptr_t w)
{
    bool twice = (w & SM_FN(w_carved)) && (w & SM_FN(w_free));
    SM_ERR_FN(raise)(twice ? SM_ERR_DOUBLE_FREE : SM_ERR_INVALID_FREE, SM_LAYER_NAME, p,
                     twice ? "block already freed" : "not the start of a block this layer mapped (or freed twice)");
}

/* Push link b on the list *head (a section); counted: a freed carved block. */
struct SM_FN(cs_push) { struct SM_FN(link) **head, *b; bool freed; };
SM_INLINE void SM_FN(cs_push)(void *arg)
{
    struct SM_FN(cs_push) *q = (struct SM_FN(cs_push) *)arg;
    q->b->next = *q->head;
    __atomic_store_n(q->head, q->b, __ATOMIC_RELAXED); /* the orphans' head is read without the lock */
    if (q->freed)
        __atomic_store_n(&SM_FN(obj).freed_count, SM_FN(obj).freed_count + 1, __ATOMIC_RELAXED);
}

/* Drop a carved block's pages (they read as zero afterwards), then offer it for reuse. */
SM_SLOWPATH void SM_FN(free_carved)(void *p, size_t size)
{
    sm_plat_purge(p, size, false);
    struct SM_FN(link) *b = (struct SM_FN(link) *)p;
    unsigned bin = sm_log2_floor(size >> SM_FN(granule_shift));
    if (bin >= SM_FN(bin_count))
        bin = SM_FN(bin_count) - 1;
    b->end = (char *)p + size;
    struct SM_FN(cs_push) push = { &SM_FN(obj).bins[bin], b, true };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_push), &push);
}

/* A free's claim (a section): the block's word, and if it is a live block at least `sized` bytes
 * long, the block is no longer live, so a racing second free is reported, not obeyed. */
struct SM_FN(cs_claim) { char *p; size_t sized; uintptr_t word; };
SM_INLINE void SM_FN(cs_claim)(void *arg)
{
    struct SM_FN(cs_claim) *k = (struct SM_FN(cs_claim) *)arg;
    uintptr_t w = k->word = SM_FN(word)(k->p);
    if (SM_FN(word_live)(w) && k->sized <= (w & ~(uintptr_t)SM_FN(w_kind_mask)))
        SM_FN(record)(k->p, (w & SM_FN(w_direct)) ? 0 : w | SM_FN(w_free));
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    void *p = c->ptr;
    struct SM_FN(cs_claim) k = { (char *)p, (c->flags & SM_F_SIZED) ? c->size : 0, 0 };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_claim), &k);
    uintptr_t w = k.word;
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    bool live = SM_FN(word_live)(w);
    bool size_ok = k.sized <= size;
    if (!live) {
        SM_FN(bad_free)(p, w);
        return;
    }
    if (!size_ok) {
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, SM_LAYER_NAME, p, "sized free larger than the block; ignored");
        return;
    }
    if (w & SM_FN(w_direct)) {
        sm_plat_unmap(p, size);
        return;
    }
    SM_FN(free_carved)(p, size);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (!SM_FN(word_live)(w))
        return false;
    c->usable = w & ~(uintptr_t)SM_FN(w_kind_mask);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Shrinks unmap the tail of a direct mapping; grows extend it where the following pages are free
 * (mremap without MREMAP_MAYMOVE never moves). Carved blocks only accept what already fits. */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    void *p = c->ptr;
    uintptr_t w = SM_FN(word)(p);
    if (!SM_FN(word_live)(w) || n > SIZE_MAX / 2)
        return false;
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    if (!(w & SM_FN(w_direct)))
        return n <= size;
    size_t want = sm_align_up(n ? n : 1, SM_FN(granularity)());
    if (want == size)
        return true;
    if (want < size) {
        SM_FN(record_2)(p, want | SM_FN(w_direct), NULL, 0); /* node exists: cannot fail */
        sm_plat_unmap((char *)p + want, size - want);
        return true;
    }
    if (sm_plat_remap_inplace(p, size, want) != 0)
        return false;
    SM_FN(record_2)(p, want | SM_FN(w_direct), NULL, 0);
    return true;
}

/* The contract's purge (core/release.h): c->ptr a live block (c->size bytes from its start, 0 = the
 * whole block, rounded up to pages and clipped to the block), or a page-aligned range inside a block
 * the calling layer holds (c->size bytes, rounded up to pages; the caller vouches for the range, as
 * only layers call this). SM_F_ZERO: MADV_DONTNEED, the pages read as zero and RSS drops at once;
 * without it MADV_FREE, reclaimed lazily, contents undefined. False for a size of 0 outside a block
 * start, an unaligned pointer, or a failed madvise (an unmapped range). */
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c)
{
    size_t page = sm_plat_page_size();
    if (!sm_ptr_aligned(c->ptr, page))
        return false;
    uintptr_t w = SM_FN(word)(c->ptr);
    size_t bytes = sm_align_up(c->size, page);
    if (SM_FN(word_live)(w)) {
        size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
        if (!c->size || bytes > size || bytes < c->size) /* whole, past the block, or wrapped around */
            bytes = size;
    } else if (!c->size || bytes < c->size || (uintptr_t)c->ptr + bytes < (uintptr_t)c->ptr) {
        return false;
    }
    return sm_plat_purge(c->ptr, bytes, !(c->flags & SM_F_ZERO)) == 0;
}

/* Nothing to give back: freed blocks are unmapped, freed carved blocks purged when freed. */
SM_INLINE void SM_FN(release)(sm_release_t *r) { (void)r; }

/* Capability MAPPING (core/capability.h), for decay_cache: cut the live direct block c->ptr after its first n bytes
 * (rounded up to pages) into two blocks, without a system call: the tail, returned, is recorded as
 * a block of its own (its pages, resident or not, go with it) and either part can be freed, resized
 * or remapped alone (munmap and mremap take any page range). NULL (block unchanged) for a carved
 * block, nothing to cut, or no memory for a registry node. */
SM_SLOWPATH SM_UNUSED void *SM_FN(split)(sm_mctx_t *c, size_t n)
{
    char *p = (char *)c->ptr;
    uintptr_t w = SM_FN(word)(p);
    if (!SM_FN(word_live)(w) || !(w & SM_FN(w_direct)) || n > SIZE_MAX / 2)
        return NULL;
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    size_t head = sm_align_up(n ? n : 1, SM_FN(granularity)());
    if (head >= size)
        return NULL;
    bool ok = SM_FN(record_2)(p + head, (size - head) | SM_FN(w_direct), p, head | SM_FN(w_direct));
    return ok ? p + head : NULL;
}

/* Capability MAPPING, for decay_cache: make the live direct blocks c->ptr and `next`, which starts
 * where c->ptr ends (a tail split off it, or a mapping the kernel placed right after it), one block,
 * without a system call. Both are the caller's (held in its cache), so their words cannot change
 * meanwhile. A block joined across two kernel mappings may later fail an in-place mremap or a move
 * (EFAULT on a range that spans them): resize and remap then report false and the caller maps anew. */
SM_SLOWPATH SM_UNUSED bool SM_FN(join)(sm_mctx_t *c, void *next)
{
    char *p = (char *)c->ptr;
    uintptr_t w = SM_FN(word)(p), wn = SM_FN(word)(next);
    if (!SM_FN(word_live)(w) || !(w & SM_FN(w_direct)) || !SM_FN(word_live)(wn) || !(wn & SM_FN(w_direct)))
        return false;
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask), size_next = wn & ~(uintptr_t)SM_FN(w_kind_mask);
    if (p + size != (char *)next || size + size_next < size)
        return false;
    return SM_FN(record_2)(p, (size + size_next) | SM_FN(w_direct), next, 0); /* both nodes exist */
}

/* Capability MAPPING, for decay_cache: make the live direct block c->ptr n bytes long, moving it
 * if it cannot grow in place (mremap moves the page tables, not the bytes: its resident pages stay
 * resident, only the added tail faults in as zero pages). On success c->ptr is the block's new
 * address and the old one is no longer a block; false (block unchanged) for a carved block, a
 * pointer that is not a live direct block, or a failed system call.
 * Order matters (docs/reliability.md, "registry order"): the moment mremap returns, the kernel may
 * give the old pages to another thread's mmap, which records its block there. So the old entry is
 * cleared, and the destination recorded, before the move, in one critical section; a failed move
 * puts them back. Between the two the block is registered nowhere, which is safe because its
 * caller owns it (decay_cache took it out of its cache) and nobody else may free or resize it. */
SM_SLOWPATH SM_UNUSED bool SM_FN(remap)(sm_mctx_t *c, size_t n)
{
    void *p = c->ptr;
    uintptr_t w = SM_FN(word)(p);
    if (!SM_FN(word_live)(w) || !(w & SM_FN(w_direct)) || n > SIZE_MAX / 2)
        return false;
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    size_t want = sm_align_up(n ? n : 1, SM_FN(granularity)());
    if (want <= size)
        return SM_FN(resize)(c, n);
    if (SM_FN(resize)(c, n)) /* the pages after it were free */
        return true;
    char *q = (char *)sm_plat_map(want);
    if (!q)
        return false;
    bool ok = SM_FN(record_2)(q, want | SM_FN(w_direct), p, 0);
    /* Only the old pages move, over the front of q; the rest of q stays the fresh pages it is. The
     * kernel gives the same result for a move that also grows, but valgrind's memcheck (3.19) leaves
     * the grown part of a moved mapping unaddressable: false reports of invalid writes there. */
    if (ok && sm_plat_remap_to(p, size, size, q) == 0) {
        c->ptr = q;
        return true;
    }
    /* Not moved: p is still mapped and ours, q still mapped and unused. */
    if (ok)
        SM_FN(record_2)(p, w, q, 0); /* both nodes exist: cannot fail */
    sm_plat_unmap(q, want);
    return false;
}

/* A carved block's pages moved into a mapping of their own, n bytes long (the tail fresh pages);
 * the carved range stays mapped, empty, and goes back to its heap as a free does. The new mapping
 * is recorded before the move and the old block freed after it, so every address is ours or the
 * kernel's at each step; a kernel that cannot move part of a mapping (sm_plat_move_out) leaves
 * the block where it is (false: the caller copies). */
SM_SLOWPATH bool SM_FN(move_carved)(sm_mctx_t *c, size_t n, uintptr_t w)
{
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    if (n > SIZE_MAX / 2)
        return false;
    size_t want = sm_align_up(n ? n : 1, SM_FN(granularity)());
    if (want <= size)
        return false; /* it fits: nothing to move */
    char *q = (char *)sm_plat_map(want);
    if (!q)
        return false;
    SM_FN(hint_pages)(q, want, SM_OPT_HUGE_PAGES && want >= SM_FN(huge_bytes));
    if (!SM_FN(record_2)(q, want | SM_FN(w_direct), NULL, 0)) {
        sm_plat_unmap(q, want);
        return false;
    }
    if (sm_plat_move_out(c->ptr, size, q) != 0) {
        SM_FN(record_2)(q, 0, NULL, 0); /* its node exists: cannot fail */
        sm_plat_unmap(q, want);
        return false;
    }
    sm_mctx_t old = sm_mctx_block(c->ptr, size, SM_F_SIZED);
    SM_FN(free)(&old);
    c->ptr = q;
    return true;
}

/* Capability MOVE: a direct block the program holds moves as remap moves it; a carved one into a
 * mapping of its own (move_carved), so a block that outgrows the thread heap is not copied. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (SM_FN(word_live)(w) && (w & SM_FN(w_carved)))
        return SM_FN(move_carved)(c, n, w);
    return SM_FN(remap)(c, n);
}

SM_INLINE void SM_FN(thread_exit)(void)
{
    if ((SM_OPT_THREAD_HEAP_SIZE) == 0)
        return;
    char *cur = SM_FN(region).cur, *end = SM_FN(region).end;
    SM_FN(region).cur = SM_FN(region).end = NULL;
    if ((size_t)(end - cur) < sm_plat_page_size())
        return;
    struct SM_FN(link) *t = (struct SM_FN(link) *)cur;
    t->end = end;
    struct SM_FN(cs_push) push = { &SM_FN(obj).orphans, t, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_push), &push);
}

/* Blocks are unmapped or purged when freed: what is mapped is what is handed out, plus the map. */
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    l->in_use = __atomic_load_n(&SM_FN(obj).in_use, __ATOMIC_RELAXED);
    l->metadata = __atomic_load_n(&SM_FN(obj).node_bytes, __ATOMIC_RELAXED);
    l->mapped = l->resident = l->in_use + l->metadata;
}
#define SM_LAYER_STATS 1

SM_INLINE void SM_FN(fork_prepare)(void) { SM_SYNC_FN(fork_lock)(&SM_FN(obj).lock); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_SYNC_FN(fork_unlock)(&SM_FN(obj).lock); }
SM_INLINE void SM_FN(fork_child)(void) { SM_SYNC_FN(fork_reinit)(&SM_FN(obj).lock); }

#undef SM_MMAP_THREAD_MAX
#undef SM_OPT_GROWTH
#undef SM_OPT_THREAD_HEAP_SIZE
#undef SM_OPT_THREAD_HEAP_MAX_BLOCK
#undef SM_OPT_HUGE_PAGES
#undef SM_OPT_FAA_GROWTH
#undef SM_OPT_FAA_ARENA_REGIONS
#define SM_LAYER_OFFERS (SM_CAP_MAPPING | SM_CAP_MOVE)
#include "../core/layer_end.h"
