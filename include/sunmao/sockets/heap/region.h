/* The region kind of a first-class heap (part of sockets/heap/heap.h): blocks are carved one after the
 * other from the current span (a bump pointer); a request that does not fit starts a new span.
 * A free gives memory back only when it is the block carved last (a stack discipline costs
 * nothing); every other block's memory returns at reset, which rewinds to the first span kept.
 *
 * Block layout: an 8-byte header {tag | usable | SM_HR_FREED}, then the program's bytes. A block
 * takes align16(n + 8) bytes, so with the header at an address 8 mod 16 every block's bytes start
 * 16-aligned and the next header again lands at 8 mod 16.
 * Invariants: r.cur is in r.at, 8 mod 16, and r.cur <= r.end; a span that is neither r.at nor on
 * the ready list (spans a reset kept, not yet carved) is never carved again until reset.
 * @check: <sunmao/policies/err/warn.h> SM_HEAP_RAISE=sm_err_warn_raise */
#ifndef SM_HEAP_PARTS
#include "heap.h"
#else

#define SM_HR_FREED 1u

static inline uint64_t *sm_hr_hdr(const void *p) { return (uint64_t *)((char *)p - 8); }
static inline size_t sm_hr_usable(const void *p)
{
    return (size_t)(*sm_hr_hdr(p) & SM_HT_SIZE_MASK) | 8u; /* usable sizes are 8 mod 16 */
}

/* The region's current span becomes s, empty. */
static SM_UNUSED void sm_hr_start(sm_heap_t *h, sm_heap_span_t *s)
{
    h->u.r.at = s;
    h->u.r.cur = (char *)s + SM_HEAP_SPAN_HDR + 8;
    h->u.r.end = (char *)s + s->bytes;
}

static SM_UNUSED void *sm_hr_carve(sm_heap_t *h, size_t n, size_t align)
{
    size_t take = sm_align_up(n + 8, 16);
    uintptr_t user = sm_align_up((uintptr_t)h->u.r.cur + 8, align);
    if (take > (uintptr_t)h->u.r.end || user > (uintptr_t)h->u.r.end - take)
        return NULL;
    uint64_t *hdr = (uint64_t *)(user - 8);
    *hdr = sm_heap_tag(h, hdr) | (take - 16); /* usable = take - 8; stored without its 8 */
    h->u.r.cur = (char *)(user + take - 8);
    h->u.r.at->used = 1;
    return (void *)user;
}

/* A span a reset kept with at least `need` bytes, taken off the ready list; NULL when none. */
static SM_UNUSED sm_heap_span_t *sm_hr_take_ready(sm_heap_t *h, size_t need)
{
    for (sm_heap_span_t **link = &h->u.r.ready; *link; link = &(*link)->ready)
        if ((*link)->bytes >= need) {
            sm_heap_span_t *s = *link;
            *link = s->ready;
            return s;
        }
    return NULL;
}

static SM_UNUSED void *sm_hr_alloc(sm_heap_t *h, size_t n, size_t align)
{
    void *p = h->u.r.at ? sm_hr_carve(h, n, align) : NULL;
    if (p)
        return p;
    size_t need = SM_HEAP_SPAN_HDR + 8 + sm_align_up(n + 8, 16) + (align > 16 ? align : 0);
    /* A block that would take more than a quarter of a span gets a span of its own, and the
     * current span stays current: a big block does not waste the rest of it. Up to a chunk, that
     * span is an ordinary one (a kept one if a reset left one); beyond, a solo span (heap.h). */
    if (need > h->chunk / 4 && !h->in_range) { /* (the caller's range is its one span) */
        sm_heap_span_t *cur = h->u.r.at;
        char *c = h->u.r.cur, *e = h->u.r.end;
        bool solo = need > h->chunk;
        sm_heap_span_t *s = solo ? NULL : sm_hr_take_ready(h, need);
        if (!s && !(s = sm_heap_span_new(h, solo ? need : h->chunk, solo)))
            return NULL;
        s->alone = 1; /* its free may give the span back (sm_hr_own_span) */
        sm_hr_start(h, s);
        p = sm_hr_carve(h, n, align);
        h->u.r.at = cur, h->u.r.cur = c, h->u.r.end = e;
        return !solo || sm_heap_span_solo(h, s, p, 8) ? p : NULL;
    }
    sm_heap_span_t *s = sm_hr_take_ready(h, need);
    if (!s && !(s = sm_heap_span_new(h, h->chunk, false)))
        return NULL;
    sm_hr_start(h, s);
    return sm_hr_carve(h, n, align);
}

static SM_UNUSED bool sm_hr_check(sm_heap_t *h, void *p, sm_heap_fault_t *f)
{
    uint64_t *hdr = sm_hr_hdr(p);
    if (((uintptr_t)p & 15) || !sm_heap_header_readable(h, p, 8) ||
        (*hdr & ~(((uint64_t)1 << SM_HEAP_SIZE_BITS) - 1)) != sm_heap_tag(h, hdr)) {
        sm_heap_fault(f, SM_ERR_INVALID_FREE, p, "not the start of a block of this heap");
        return false;
    }
    if (*hdr & SM_HR_FREED) {
        sm_heap_fault(f, SM_ERR_DOUBLE_FREE, p, "the block is already free");
        return false;
    }
    return true;
}

static inline bool sm_hr_is_last(const sm_heap_t *h, const void *p)
{
    return (char *)p + sm_hr_usable(p) == h->u.r.cur;
}

/* The span of its own a big block got (sm_hr_alloc), or NULL: found in the list, not by reading
 * below p, which may be any block's bytes. A solo span's block is the one whose header is in its
 * first registered page; an ordinary span counts when it was given to this block alone (a big
 * block carved at the start of the current span shares it with the blocks carved after it, and
 * their memory must not go with it) and the block fills it. */
static SM_UNUSED sm_heap_span_t *sm_hr_own_span(const sm_heap_t *h, const void *p)
{
    size_t page = sm_plat_page_size();
    if (sm_hr_usable(p) + SM_HEAP_SPAN_HDR + 16 + page <= h->chunk / 4)
        return NULL; /* too small to have been given a span */
    uintptr_t hdr_page = ((uintptr_t)p - 8) & ~(uintptr_t)(page - 1), s = (uintptr_t)p - SM_HEAP_SPAN_HDR - 16;
    for (sm_heap_span_t *x = h->spans; x; x = x->next) {
        if (x->solo && x->solo == hdr_page)
            return x;
        if ((uintptr_t)x == s)
            return x->alone && x != h->u.r.at && x->mapped && x->bytes - SM_HEAP_SPAN_HDR - 16 - sm_hr_usable(p) < page
                       ? x
                       : NULL;
    }
    return NULL;
}

static SM_UNUSED void sm_hr_free(sm_heap_t *h, void *p)
{
    sm_heap_span_t *own;
    if (sm_hr_is_last(h, p))
        h->u.r.cur = (char *)p - 8;
    else if ((own = sm_hr_own_span(h, p)) != NULL)
        sm_heap_span_drop(h, own);
    else
        *sm_hr_hdr(p) |= SM_HR_FREED;
}

/* In place: a shrink always (the block keeps its size), a growth of the block carved last. */
static SM_UNUSED bool sm_hr_resize(sm_heap_t *h, void *p, size_t n)
{
    size_t usable = sm_hr_usable(p);
    if (n <= usable)
        return true;
    if (!sm_hr_is_last(h, p))
        return false;
    size_t take = sm_align_up(n + 8, 16);
    if (take > (size_t)(h->u.r.end - ((char *)p - 8)))
        return false;
    uint64_t *hdr = sm_hr_hdr(p);
    *hdr = (*hdr & ~SM_HT_SIZE_MASK) | (take - 16);
    h->u.r.cur = (char *)p - 8 + take;
    return true;
}

/* reset: carving starts again at the first span kept (the newest: see sm_heap_spans_trim) and
 * goes on through the others before a span is mapped. */
static SM_UNUSED void sm_hr_keep(sm_heap_t *h, sm_heap_span_t *s)
{
    s->alone = 0; /* carved from again, by any block */
    if (!h->u.r.at) {
        sm_hr_start(h, s);
        return;
    }
    s->ready = h->u.r.ready;
    h->u.r.ready = s;
}
static SM_UNUSED void sm_hr_reset(sm_heap_t *h)
{
    h->u.r.at = NULL;
    h->u.r.ready = NULL;
    sm_heap_spans_trim(h, sm_hr_keep);
}
#endif
