/* brk_heap: OS layer over the program break (paper Table 2; the TLSF baseline uses it because
 * TLSF merges neighbouring regions, and sbrk hands out neighbouring regions). No SM_NEXT.
 *
 * Parameters: SM_LAYER. Slots: sync (optional, default mutex: the one global lock; no line of the
 * Mortise paper gives an OS layer's), err (required: invalid and double frees). Options:
 *   SM_OPT_GROWTH  bytes the break moves by at least, and the unused space above the last block
 *                  that is kept before the break is lowered (default 64 KiB, a power of two)
 * Properties: thread-safe with a locking sync policy, page-aligned blocks, not zero-filled
 * (SM_F_FRESH marks blocks carved from never-used break space).
 *
 * Blocks are whole pages carved upward from the break. A run is the span of break we extended
 * contiguously; when something else (the C library, a foreign sbrk) moved the break in between,
 * sbrk returns memory that does not continue our run and a new run starts there (the unused end of
 * the old one becomes a free block). Freed blocks go on one address-ordered free list, merged
 * with free neighbours, and are reused first-fit; a free block that reaches the top of the run is
 * handed back to the break, which is lowered once GROWTH bytes or more lie unused above the top
 * and only if the break is still where we left it. When the break cannot move at all (a mapping
 * right above it, RLIMIT_DATA, valgrind's fixed break segment), a request gets pages mapped for it
 * alone (a direct block: unmapped when freed, never resized). Free-list operations walk the list:
 * the layer
 * is meant to feed a core layer that asks for large chunks, rarely.
 *
 * Every block's first page is recorded in a page map (nodes from sm_plat_map, since the break itself
 * must not hold them), so free without a size, getmeta and foreign-pointer checks are lookups.
 * Limits: sbrk is process-global and not thread-safe in the C library; other code calling sbrk
 * concurrently with this layer is outside what any lock here can protect.
 * @model: name=brk_heap kind=os slot sync=mutex slot err key growth size */
#include "../core/layer.h"
#include "../core/errors.h"
#include "../core/pagemap.h"
#include "../platform/platform.h"

#ifndef SM_LAYER
#error "brk_heap: define SM_LAYER (this instance's name) before including"
#endif
#ifdef SM_NEXT
#error "brk_heap: an OS layer is the bottom of a composition; SM_NEXT must not be defined"
#endif
#ifndef SM_SYNC
#include "../policies/sync/mutex.h"
#define SM_SYNC mutex
#endif
#ifndef SM_ERR
#error "brk_heap: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_GROWTH
#define SM_OPT_GROWTH ((size_t)64 << 10)
#endif
_Static_assert(((SM_OPT_GROWTH) & ((SM_OPT_GROWTH) - 1)) == 0 && (SM_OPT_GROWTH) > 0,
               "brk_heap: SM_OPT_GROWTH must be a power of two");

enum {
    SM_FN(granule_shift) = 12,
    SM_FN(w_live) = 1, /* page-map word of a block's first page: size | w_live or size | w_free */
    SM_FN(w_free) = 2,
    SM_FN(w_direct) = 4, /* with w_live: a block in pages mapped for it, not from the break */
    SM_FN(w_kind_mask) = 0xfff,
};

/* Kept in the first bytes of a free block. */
struct SM_FN(free_block) { struct SM_FN(free_block) *next; size_t size; };

static struct {
    SM_SYNC_FN(t) lock;
    sm_pagemap_t map;
    char *run_start;  /* the break may not be lowered below this */
    char *top;        /* first uncarved byte of the run (page-aligned) */
    char *brk_end;    /* the break as this layer last set it */
    char *clean_from; /* [clean_from, brk_end) has never been handed out: it is still zero */
    struct SM_FN(free_block) *free_list; /* address order */
    size_t in_use, direct;               /* statistics: live blocks, those mapped for themselves */
} SM_FN(obj) = { SM_SYNC_INIT, { { 0 } }, 0, 0, 0, 0, 0, 0, 0 };

enum {
    SM_FN(thread_safe) = SM_CAT3(sm_sync_, SM_SYNC, _thread_safe),
    SM_FN(min_align) = 4096, /* the smallest page size; the true page size at run time */
    SM_FN(zeroed) = 0,
};

static void *SM_FN(node_alloc)(size_t bytes) { return sm_plat_map(bytes); }

SM_INLINE uintptr_t SM_FN(word)(const void *p)
{
    if (!p || !sm_ptr_aligned(p, (size_t)1 << SM_FN(granule_shift)))
        return 0;
    return sm_pagemap_get(&SM_FN(obj).map, SM_FN(granule_shift), p);
}

SM_INLINE bool SM_FN(record)(void *p, uintptr_t w)
{
    /* Every live block comes and goes through here (under the lock): in_use follows the words. */
    uintptr_t old = sm_pagemap_get(&SM_FN(obj).map, SM_FN(granule_shift), p);
    if (!sm_pagemap_set(&SM_FN(obj).map, SM_FN(granule_shift), p, 1, w, SM_FN(node_alloc)))
        return false;
    size_t was = (old & SM_FN(w_live)) ? old & ~(uintptr_t)SM_FN(w_kind_mask) : 0;
    size_t now = (w & SM_FN(w_live)) ? w & ~(uintptr_t)SM_FN(w_kind_mask) : 0;
    SM_FN(obj).in_use += now - was;
    if ((old | w) & SM_FN(w_direct))
        SM_FN(obj).direct += ((w & SM_FN(w_direct)) ? now : 0) - ((old & SM_FN(w_direct)) ? was : 0);
    return true;
}

SM_INLINE int SM_FN(create)(void)
{
    (void)sm_plat_page_size();
    return 0;
}

static void SM_FN(trim_locked)(void)
{
    char *keep = SM_FN(obj).top;
    size_t unused = (size_t)(SM_FN(obj).brk_end - keep);
    if (unused < (size_t)(SM_OPT_GROWTH) || sm_plat_sbrk(0) != SM_FN(obj).brk_end)
        return; /* little to gain, or someone else's memory now lies above ours */
    if (sm_plat_sbrk(-(intptr_t)unused)) {
        SM_FN(obj).brk_end = keep;
        if (SM_FN(obj).clean_from > keep)
            SM_FN(obj).clean_from = keep;
    }
}

/* Put [b, b + size) on the free list, merging with free neighbours; give it to the top if it
 * reaches it. Caller holds the lock. */
static void SM_FN(insert_free_locked)(char *b, size_t size)
{
    struct SM_FN(free_block) **at = &SM_FN(obj).free_list, *prev = NULL;
    while (*at && (char *)*at < b)
        prev = *at, at = &(*at)->next;
    struct SM_FN(free_block) *next = *at;
    if (prev && (char *)prev + prev->size == b) {
        SM_FN(record)(b, 0);
        prev->size += size;
        b = (char *)prev, size = prev->size;
    } else {
        struct SM_FN(free_block) *f = (struct SM_FN(free_block) *)b;
        f->next = next, f->size = size;
        *at = f, prev = f;
    }
    if (next && b + size == (char *)next) {
        SM_FN(record)(next, 0);
        prev->next = next->next;
        prev->size = size += next->size;
    }
    if (b + size == SM_FN(obj).top) {
        SM_FN(record)(b, 0);
        for (at = &SM_FN(obj).free_list; *at != prev; at = &(*at)->next) {
        }
        *at = prev->next;
        SM_FN(obj).top = b;
        SM_FN(trim_locked)();
        return;
    }
    SM_FN(record)(b, size | SM_FN(w_free));
}

/* Move the break up by at least `need` bytes. If it no longer continues our run, start a new run
 * where it is. false with errno = ENOMEM when sbrk refuses. Caller holds the lock. */
static bool SM_FN(extend_locked)(size_t need)
{
    size_t page = sm_plat_page_size();
    size_t incr = sm_align_up(need, (size_t)(SM_OPT_GROWTH) > page ? (size_t)(SM_OPT_GROWTH) : page);
    if (incr < need || incr > (size_t)INTPTR_MAX) {
        errno = ENOMEM;
        return false;
    }
    char *old = (char *)sm_plat_sbrk((intptr_t)incr);
    if (!old)
        return false;
    if (old == SM_FN(obj).brk_end) {
        SM_FN(obj).brk_end = old + incr;
        return true;
    }
    char *old_top = SM_FN(obj).top;
    char *old_end = (char *)sm_align_down((uintptr_t)SM_FN(obj).brk_end, page);
    SM_FN(obj).run_start = old;
    SM_FN(obj).top = SM_FN(obj).clean_from = (char *)sm_align_up((uintptr_t)old, page);
    SM_FN(obj).brk_end = old + incr;
    if (old_top && old_end > old_top) /* the rest of the old run stays ours: keep it for reuse */
        SM_FN(insert_free_locked)(old_top, (size_t)(old_end - old_top));
    return true;
}

/* Remove f from the free list and return to it the parts of it outside [a, a + bytes). */
static void SM_FN(take_from_free_locked)(struct SM_FN(free_block) *f, char *a, size_t bytes)
{
    struct SM_FN(free_block) **at = &SM_FN(obj).free_list;
    while (*at != f)
        at = &(*at)->next;
    *at = f->next;
    char *b = (char *)f, *end = b + f->size;
    SM_FN(record)(b, 0);
    if (a > b)
        SM_FN(insert_free_locked)(b, (size_t)(a - b));
    if (end > a + bytes)
        SM_FN(insert_free_locked)(a + bytes, (size_t)(end - (a + bytes)));
}

struct SM_FN(cs_alloc) { size_t bytes, align; char *ptr; bool fresh; };

/* The break refused to move: pages of the request's own, recorded as a direct block. */
static void SM_FN(alloc_direct_locked)(struct SM_FN(cs_alloc) *r)
{
    char *a = (char *)sm_plat_map_aligned(r->bytes, r->align);
    if (!a)
        return;
    if (!SM_FN(record)(a, r->bytes | SM_FN(w_live) | SM_FN(w_direct))) {
        sm_plat_unmap(a, r->bytes);
        return;
    }
    r->ptr = a;
    r->fresh = true;
}

/* Critical sections go to the sync policy's atomic_exec (it may run them on another thread, and
 * with them the sbrk calls): they set no errno and raise nothing; results travel back in the
 * argument. */
SM_INLINE void SM_FN(cs_alloc)(void *arg)
{
    struct SM_FN(cs_alloc) *r = (struct SM_FN(cs_alloc) *)arg;
    size_t bytes = r->bytes, align = r->align;
    char *a = NULL;
    r->ptr = NULL;
    r->fresh = false;
    for (struct SM_FN(free_block) *f = SM_FN(obj).free_list; f; f = f->next) {
        char *cand = (char *)sm_align_up((uintptr_t)f, align);
        if (cand + bytes <= (char *)f + f->size && cand >= (char *)f) {
            a = cand;
            SM_FN(take_from_free_locked)(f, a, bytes);
            break;
        }
    }
    if (!a) {
        for (;;) {
            uintptr_t start = sm_align_up((uintptr_t)SM_FN(obj).top, align);
            a = (char *)start;
            if (SM_FN(obj).top && start + bytes <= (uintptr_t)SM_FN(obj).brk_end)
                break;
            /* Integers, not pointers: before the first sbrk there is no run to point into. */
            if (!SM_FN(extend_locked)(start + bytes - (uintptr_t)SM_FN(obj).brk_end)) {
                SM_FN(alloc_direct_locked)(r);
                return;
            }
        }
        char *gap = SM_FN(obj).top;
        SM_FN(obj).top = a + bytes;
        r->fresh = a >= SM_FN(obj).clean_from;
        if (SM_FN(obj).clean_from < a + bytes)
            SM_FN(obj).clean_from = a + bytes;
        if (a > gap) /* alignment padding below the block */
            SM_FN(insert_free_locked)(gap, (size_t)(a - gap));
    }
    if (SM_FN(record)(a, bytes | SM_FN(w_live)))
        r->ptr = a;
    else
        SM_FN(insert_free_locked)(a, bytes);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t page = sm_plat_page_size();
    if (c->size > SIZE_MAX / 4 || c->align > SIZE_MAX / 4) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    struct SM_FN(cs_alloc) r = { sm_align_up(c->size ? c->size : 1, page), c->align > page ? c->align : page, NULL, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_alloc), &r);
    if (!r.ptr) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    if (r.fresh)
        c->flags |= SM_F_FRESH;
    return c->ptr = r.ptr;
}

struct SM_FN(cs_free) { char *ptr; size_t sized; uintptr_t word; bool freed; };
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    uintptr_t w = f->word = SM_FN(word)(f->ptr);
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    f->freed = (w & SM_FN(w_live)) && f->sized <= size;
    if (f->freed) {
        SM_FN(record)(f->ptr, 0);
        if (!(w & SM_FN(w_direct)))
            SM_FN(insert_free_locked)(f->ptr, size);
    }
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    struct SM_FN(cs_free) f = { (char *)c->ptr, (c->flags & SM_F_SIZED) ? c->size : 0, 0, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_free), &f);
    if (f.freed && (f.word & SM_FN(w_direct))) /* unrecorded under the lock, unmapped after it */
        sm_plat_unmap(f.ptr, f.word & ~(uintptr_t)SM_FN(w_kind_mask));
    if (f.freed)
        return;
    uintptr_t w = f.word;
    if (!(w & SM_FN(w_live)))
        SM_ERR_FN(raise)((w & SM_FN(w_free)) ? SM_ERR_DOUBLE_FREE : SM_ERR_INVALID_FREE, SM_LAYER_NAME, c->ptr,
                         (w & SM_FN(w_free)) ? "block already freed"
                                             : "not the start of a live block of this layer (or freed twice)");
    else
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, SM_LAYER_NAME, c->ptr, "sized free larger than the block; ignored");
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (!(w & SM_FN(w_live)))
        return false;
    c->usable = w & ~(uintptr_t)SM_FN(w_kind_mask);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Shrinking frees the tail pages; growing takes the free block or the top space that follows. */
struct SM_FN(cs_resize) { char *ptr; size_t want; bool ok; };
SM_INLINE void SM_FN(cs_resize)(void *arg)
{
    struct SM_FN(cs_resize) *r = (struct SM_FN(cs_resize) *)arg;
    char *p = r->ptr;
    size_t want = r->want;
    bool ok = false;
    uintptr_t w = SM_FN(word)(p);
    size_t size = w & ~(uintptr_t)SM_FN(w_kind_mask);
    if (!(w & SM_FN(w_live)) || (w & SM_FN(w_direct))) {
        ok = false; /* a direct block is moved by the socket: its pages are its own */
    } else if (want <= size) {
        SM_FN(record)(p, want | SM_FN(w_live));
        if (want < size)
            SM_FN(insert_free_locked)(p + want, size - want);
        ok = true;
    } else {
        char *end = p + size;
        size_t extra = want - size;
        uintptr_t nw = SM_FN(word)(end);
        if ((nw & SM_FN(w_free)) && (nw & ~(uintptr_t)SM_FN(w_kind_mask)) >= extra) {
            SM_FN(take_from_free_locked)((struct SM_FN(free_block) *)end, end, extra);
            ok = true;
        } else if (end == SM_FN(obj).top) {
            if ((size_t)(SM_FN(obj).brk_end - end) < extra && sm_plat_sbrk(0) == SM_FN(obj).brk_end)
                SM_FN(extend_locked)(extra - (size_t)(SM_FN(obj).brk_end - end));
            ok = end == SM_FN(obj).top && (size_t)(SM_FN(obj).brk_end - end) >= extra;
            if (ok) {
                SM_FN(obj).top = end + extra;
                if (SM_FN(obj).clean_from < SM_FN(obj).top)
                    SM_FN(obj).clean_from = SM_FN(obj).top;
            }
        }
        if (ok)
            SM_FN(record)(p, want | SM_FN(w_live));
    }
    r->ok = ok;
}

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    if (n > SIZE_MAX / 4)
        return false;
    struct SM_FN(cs_resize) r = { (char *)c->ptr, sm_align_up(n ? n : 1, sm_plat_page_size()), false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_resize), &r);
    return r.ok;
}

/* The contract's purge (core/release.h): the page-aligned range lies in a block the calling layer
 * holds, so it is ours and mapped; the break's pages are anonymous memory like any other. */
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c)
{
    size_t page = sm_plat_page_size(), bytes = sm_align_up(c->size, page);
    if (!sm_ptr_aligned(c->ptr, page) || !c->size || bytes < c->size)
        return false;
    return sm_plat_purge(c->ptr, bytes, !(c->flags & SM_F_ZERO)) == 0;
}

/* Freed blocks wait on the free list for the next request (the top of the heap is trimmed on free);
 * a release pass drops the pages of the large ones, all but the first, which holds the list link.
 * The blocks are the spans and regions layers above gave back, already after their own decay or
 * when emptied, so there is no second clock here; passes are rare (the release clock runs only
 * while layers note memory to give back), and re-purging pages that are gone costs little. */
SM_UNUSED static void SM_FN(release)(sm_release_t *r)
{
    size_t page = sm_plat_page_size();
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (struct SM_FN(free_block) *f = SM_FN(obj).free_list; f; f = f->next) {
        if (f->size < ((size_t)64 << 10) || f->size < 2 * page)
            continue;
        if (sm_plat_purge((char *)f + page, f->size - page, false) == 0)
            r->released += f->size - page;
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
}

SM_INLINE void SM_FN(thread_exit)(void) {}
/* Mapped: the break's run and the blocks mapped for themselves; resident at most that. */
SM_INLINE void SM_FN(cs_stats)(void *arg)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    l->in_use = SM_FN(obj).in_use;
    for (struct SM_FN(free_block) *f = SM_FN(obj).free_list; f; f = f->next)
        l->dirty += f->size;
    l->mapped = l->resident = (size_t)(SM_FN(obj).brk_end - SM_FN(obj).run_start) + SM_FN(obj).direct;
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_stats), sm_stats_layer(s, SM_LAYER_NAME));
}
#define SM_LAYER_STATS 1

SM_INLINE void SM_FN(fork_prepare)(void) { SM_SYNC_FN(fork_lock)(&SM_FN(obj).lock); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_SYNC_FN(fork_unlock)(&SM_FN(obj).lock); }
SM_INLINE void SM_FN(fork_child)(void) { SM_SYNC_FN(fork_reinit)(&SM_FN(obj).lock); }

#undef SM_OPT_GROWTH
#include "../core/layer_end.h"
