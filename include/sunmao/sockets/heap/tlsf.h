/* The tlsf kind of a first-class heap (part of sockets/heap/heap.h): Two-Level Segregated Fit (Masmano
 * et al., ECRTS 2004) over the heap's own spans, its state in the heap object, so every heap has
 * its lists and its lock. (layers/core/tlsf_glk.h is the same algorithm as a layer of a
 * composition, one per instance.)
 *
 * Block layout: a 16-byte header {prev_size, size}, then the program's bytes (16-aligned).
 *   size       the block's bytes, header included (a multiple of 16, at least 32), flags in the
 *              low 4 bits, the tag (heap/heap.h) in the top 16
 *   prev_size  the block before's size, valid when this block has SM_HT_PREV_FREE; in the first
 *              block of a span (SM_HT_FIRST), which has none before it, the span's address
 *   a free block keeps its list links after the header
 * A span: its header, blocks end to end, then a 16-byte sentinel header of size 0.
 * Quick lists: a freed block of at most 256 bytes goes on its size's LIFO list (up to 16 each),
 * flagged SM_HT_QUICK, neither free nor coalesced, and the next request of that size takes it
 * without touching the segregated lists: a tight malloc/free loop costs two list operations, not
 * a split and a coalesce. They are flushed (each block freed for real) before the heap maps more
 * memory and when its last live block is freed, and emptied by a reset. So up to 240 freed blocks
 * may keep their spans mapped while other blocks live (glibc's tcache holds its 7 per size the
 * same way).
 * Invariants: no two free blocks are adjacent; every free block is in the list of its (fl, sl)
 * and the bitmaps say which lists are non-empty; a span that is one free block counts in
 * empty_spans; a free that empties a mapped span gives it back unless it is the only empty one
 * (a reset keeps more: heap.h, sm_heap_spans_trim).
 * @check: <sunmao/policies/err/warn.h> SM_HEAP_RAISE=sm_err_warn_raise */
#ifndef SM_HEAP_PARTS
#include "heap.h"
#else

enum { SM_HT_FREE = 1, SM_HT_PREV_FREE = 2, SM_HT_FIRST = 4, SM_HT_QUICK = 8 };
#define SM_HT_HDR       16u
#define SM_HT_MIN_BLOCK 32u
#define SM_HT_SIZE_MASK ((((uint64_t)1 << SM_HEAP_SIZE_BITS) - 1) & ~(uint64_t)15)

typedef struct sm_ht_block {
    uint64_t prev_size;
    uint64_t size;
    struct sm_ht_block *next_free, *prev_free; /* free blocks only */
} sm_ht_block_t;

static inline size_t sm_ht_size(const sm_ht_block_t *b) { return (size_t)(b->size & SM_HT_SIZE_MASK); }
static SM_UNUSED inline sm_ht_block_t *sm_ht_next(const sm_ht_block_t *b) { return (sm_ht_block_t *)((char *)b + sm_ht_size(b)); }
static inline void sm_ht_set_size(sm_ht_block_t *b, size_t bytes) { b->size = (b->size & ~SM_HT_SIZE_MASK) | bytes; }
static SM_UNUSED inline sm_ht_block_t *sm_ht_of(const void *p) { return (sm_ht_block_t *)((char *)p - SM_HT_HDR); }
static inline bool sm_ht_tag_ok(const sm_heap_t *h, const sm_ht_block_t *b)
{
    return (b->size & ~(((uint64_t)1 << SM_HEAP_SIZE_BITS) - 1)) == sm_heap_tag(h, b);
}
static inline size_t sm_ht_need(size_t n)
{
    size_t need = sm_align_up(n + SM_HT_HDR, 16);
    return need < SM_HT_MIN_BLOCK ? SM_HT_MIN_BLOCK : need;
}

static inline void sm_ht_mapping(size_t size, unsigned *fl, unsigned *sl)
{
    if (size < (1u << (SM_HT_SL_BITS + 4))) {
        *fl = 0;
        *sl = (unsigned)(size >> 4);
        return;
    }
    unsigned msb = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    *fl = msb - (SM_HT_SL_BITS + 3);
    *sl = (unsigned)(size >> (msb - SM_HT_SL_BITS)) & (SM_HT_SL_COUNT - 1);
}

static SM_UNUSED void sm_ht_insert(sm_heap_t *h, sm_ht_block_t *b)
{
    unsigned fl, sl;
    sm_ht_mapping(sm_ht_size(b), &fl, &sl);
    sm_ht_block_t *head = h->u.t.heads[fl][sl];
    b->next_free = head;
    b->prev_free = NULL;
    if (head)
        head->prev_free = b;
    h->u.t.heads[fl][sl] = b;
    h->u.t.fl_map |= (uint64_t)1 << fl;
    h->u.t.sl_map[fl] |= 1u << sl;
}

static SM_UNUSED void sm_ht_remove(sm_heap_t *h, sm_ht_block_t *b)
{
    unsigned fl, sl;
    sm_ht_mapping(sm_ht_size(b), &fl, &sl);
    if (b->prev_free)
        b->prev_free->next_free = b->next_free;
    else
        h->u.t.heads[fl][sl] = b->next_free;
    if (b->next_free)
        b->next_free->prev_free = b->prev_free;
    if (!h->u.t.heads[fl][sl]) {
        h->u.t.sl_map[fl] &= ~(1u << sl);
        if (!h->u.t.sl_map[fl])
            h->u.t.fl_map &= ~((uint64_t)1 << fl);
    }
}

/* A free block of at least `size` bytes, removed from its list; NULL when none. Searches from the
 * list above size's own, so any block found fits (good fit, O(1)). */
static SM_UNUSED sm_ht_block_t *sm_ht_take(sm_heap_t *h, size_t size)
{
    if (size >= (1u << (SM_HT_SL_BITS + 4))) {
        unsigned msb = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
        size += ((size_t)1 << (msb - SM_HT_SL_BITS)) - 1;
    }
    unsigned fl, sl;
    sm_ht_mapping(size, &fl, &sl);
    if (fl >= SM_HT_FL_COUNT)
        return NULL;
    uint32_t sls = h->u.t.sl_map[fl] & (~0u << sl);
    if (!sls) {
        uint64_t fls = fl + 1 < 64 ? h->u.t.fl_map & (~(uint64_t)0 << (fl + 1)) : 0;
        if (!fls)
            return NULL;
        fl = (unsigned)__builtin_ctzll(fls);
        sls = h->u.t.sl_map[fl];
    }
    sl = (unsigned)__builtin_ctz(sls);
    sm_ht_block_t *b = h->u.t.heads[fl][sl];
    sm_ht_remove(h, b);
    return b;
}

static inline sm_heap_span_t *sm_ht_span_of(const sm_ht_block_t *first)
{
    return (sm_heap_span_t *)(uintptr_t)first->prev_size;
}

static inline bool sm_ht_whole_span(const sm_ht_block_t *b)
{
    return (b->size & SM_HT_FIRST) && sm_ht_size(sm_ht_next(b)) == 0;
}

/* b becomes free (not yet listed): flags, the next block's prev_size and PREV_FREE. */
static inline void sm_ht_mark_free(sm_ht_block_t *b)
{
    b->size |= SM_HT_FREE;
    sm_ht_block_t *n = sm_ht_next(b);
    n->prev_size = sm_ht_size(b);
    n->size |= SM_HT_PREV_FREE;
}
static inline void sm_ht_mark_used(sm_ht_block_t *b)
{
    b->size &= ~(uint64_t)SM_HT_FREE;
    sm_ht_next(b)->size &= ~(uint64_t)SM_HT_PREV_FREE;
}

/* The bytes of b beyond `keep` become a free block (merged with a free block after it) when they
 * are enough for one. b is in use. */
static SM_UNUSED void sm_ht_trim(sm_heap_t *h, sm_ht_block_t *b, size_t keep)
{
    size_t size = sm_ht_size(b);
    if (size - keep < SM_HT_MIN_BLOCK)
        return;
    sm_ht_block_t *r = (sm_ht_block_t *)((char *)b + keep);
    size_t rest = size - keep;
    sm_ht_set_size(b, keep);
    sm_ht_block_t *n = (sm_ht_block_t *)((char *)r + rest);
    if (n->size & SM_HT_FREE) {
        sm_ht_remove(h, n);
        rest += sm_ht_size(n);
    }
    r->size = sm_heap_tag(h, r) | rest;
    sm_ht_mark_free(r);
    sm_ht_insert(h, r);
}

/* A span's blocks, all free: one block from the header to the sentinel. */
static SM_UNUSED void sm_ht_span_init(sm_heap_t *h, sm_heap_span_t *s)
{
    sm_ht_block_t *b = (sm_ht_block_t *)((char *)s + SM_HEAP_SPAN_HDR);
    size_t size = (s->bytes - SM_HEAP_SPAN_HDR - SM_HT_HDR) & ~(size_t)15;
    sm_ht_block_t *end = (sm_ht_block_t *)((char *)b + size);
    end->size = sm_heap_tag(h, end);
    b->prev_size = (uintptr_t)s;
    b->size = sm_heap_tag(h, b) | size | SM_HT_FIRST;
    sm_ht_mark_free(b);
    sm_ht_insert(h, b);
    h->u.t.empty_spans++;
}

static SM_UNUSED void sm_ht_clear(sm_heap_t *h)
{
    memset(&h->u.t, 0, sizeof h->u.t);
}

static SM_UNUSED void sm_ht_free_block(sm_heap_t *h, sm_ht_block_t *b);

/* Every quick-listed block freed for real (coalesced): before the heap maps more memory. False
 * when there was none. */
static SM_UNUSED bool sm_ht_flush_quick(sm_heap_t *h)
{
    bool any = false;
    for (unsigned q = 0; q < SM_HT_QUICK_CLASSES; q++) {
        any |= h->u.t.quick[q] != NULL;
        sm_ht_block_t *b = h->u.t.quick[q];
        h->u.t.quick[q] = NULL;
        h->u.t.quick_n[q] = 0;
        while (b) {
            sm_ht_block_t *next = b->next_free;
            b->size &= ~(uint64_t)SM_HT_QUICK;
            sm_ht_free_block(h, b);
            b = next;
        }
    }
    return any;
}

/* A block that does not fit a chunk: a solo span of its own (heap.h), in no list. */
static SM_UNUSED void *sm_ht_alloc_solo(sm_heap_t *h, size_t need, size_t align)
{
    sm_heap_span_t *s = sm_heap_span_new(h, SM_HEAP_SPAN_HDR + 2 * SM_HT_HDR + need + (align > 16 ? align : 0), true);
    if (!s)
        return NULL;
    uintptr_t user = sm_align_up((uintptr_t)s + SM_HEAP_SPAN_HDR + SM_HT_HDR, align);
    sm_ht_block_t *b = sm_ht_of((void *)user);
    sm_ht_block_t *end = (sm_ht_block_t *)((char *)s + s->bytes - SM_HT_HDR);
    end->size = sm_heap_tag(h, end);
    b->prev_size = (uintptr_t)s;
    b->size = sm_heap_tag(h, b) | (size_t)((char *)end - (char *)b) | SM_HT_FIRST;
    return sm_heap_span_solo(h, s, (void *)user, SM_HT_HDR) ? (void *)user : NULL;
}

static inline bool sm_ht_solo(const sm_ht_block_t *b)
{
    return (b->size & SM_HT_FIRST) && sm_ht_span_of(b)->solo;
}

/* A block of usable size >= n at an address aligned to `align` (a power of two), or NULL. */
static SM_UNUSED void *sm_ht_alloc(sm_heap_t *h, size_t n, size_t align)
{
    size_t need = sm_ht_need(n);
    if (need + (align > 16 ? align : 0) > h->chunk - SM_HEAP_SPAN_HDR - 2 * SM_HT_HDR && !h->in_range)
        return sm_ht_alloc_solo(h, need, align); /* (the caller's range is one span of any size) */
    if (need <= 256 && align <= 16) {
        unsigned q = (unsigned)(need >> 4) - 2;
        sm_ht_block_t *b = h->u.t.quick[q];
        if (b) {
            h->u.t.quick[q] = b->next_free;
            h->u.t.quick_n[q]--;
            b->size &= ~(uint64_t)SM_HT_QUICK;
            return (char *)b + SM_HT_HDR;
        }
    }
    size_t search = align > 16 ? need + align + SM_HT_MIN_BLOCK : need;
    sm_ht_block_t *b = sm_ht_take(h, search);
    if (!b && sm_ht_flush_quick(h))
        b = sm_ht_take(h, search);
    if (!b) {
        /* room for the class above search's: sm_ht_take looks from there */
        size_t span = search + (search >> SM_HT_SL_BITS) + SM_HEAP_SPAN_HDR + 2 * SM_HT_HDR;
        sm_heap_span_t *s = sm_heap_span_new(h, span > h->chunk ? span : h->chunk, false);
        if (!s)
            return NULL;
        sm_ht_span_init(h, s);
        b = sm_ht_take(h, search);
        if (!b)
            return NULL;
    }
    if (sm_ht_whole_span(b)) {
        h->u.t.empty_spans--;
        sm_ht_span_of(b)->used = 1;
    }
    if (align > 16) {
        uintptr_t user = sm_align_up((uintptr_t)b + SM_HT_HDR, align);
        size_t gap = user - ((uintptr_t)b + SM_HT_HDR);
        if (gap && gap < SM_HT_MIN_BLOCK)
            gap += align; /* align >= 32 here: the gap becomes a block of its own */
        if (gap) {
            sm_ht_block_t *a = (sm_ht_block_t *)((char *)b + gap);
            a->size = sm_heap_tag(h, a) | (sm_ht_size(b) - gap);
            sm_ht_set_size(b, gap);
            sm_ht_mark_free(b); /* sets a's prev_size and PREV_FREE */
            sm_ht_insert(h, b);
            b = a;
        }
    }
    sm_ht_mark_used(b);
    sm_ht_trim(h, b, need);
    return (char *)b + SM_HT_HDR;
}

static inline size_t sm_ht_usable(const void *p) { return sm_ht_size(sm_ht_of(p)) - SM_HT_HDR; }

/* Checks p before a free or a resize: false with the fault filled in for a pointer that does not
 * start a live block of h. */
static SM_UNUSED bool sm_ht_check(sm_heap_t *h, void *p, sm_heap_fault_t *f)
{
    sm_ht_block_t *b = sm_ht_of(p);
    if (((uintptr_t)p & 15) || !sm_heap_header_readable(h, p, SM_HT_HDR) || !sm_ht_tag_ok(h, b) ||
        sm_ht_size(b) < SM_HT_MIN_BLOCK) {
        sm_heap_fault(f, SM_ERR_INVALID_FREE, p, "not the start of a block of this heap");
        return false;
    }
    if (b->size & (SM_HT_FREE | SM_HT_QUICK)) {
        sm_heap_fault(f, SM_ERR_DOUBLE_FREE, p, "the block is already free");
        return false;
    }
    return true;
}

static SM_UNUSED void sm_ht_free(sm_heap_t *h, void *p)
{
    sm_ht_block_t *b = sm_ht_of(p);
    size_t size = sm_ht_size(b);
    if (size <= 256) {
        unsigned q = (unsigned)(size >> 4) - 2;
        if (h->u.t.quick_n[q] < SM_HT_QUICK_MAX) {
            b->size |= SM_HT_QUICK;
            b->next_free = h->u.t.quick[q];
            h->u.t.quick[q] = b;
            h->u.t.quick_n[q]++;
            return;
        }
    }
    sm_ht_free_block(h, b);
}

/* b, in use, becomes free: coalesced with free neighbours, listed, or its span given back. */
static SM_UNUSED void sm_ht_free_block(sm_heap_t *h, sm_ht_block_t *b)
{
    sm_ht_block_t *n = sm_ht_next(b);
    if (n->size & SM_HT_FREE) {
        sm_ht_remove(h, n);
        sm_ht_set_size(b, sm_ht_size(b) + sm_ht_size(n));
    }
    if (b->size & SM_HT_PREV_FREE) {
        sm_ht_block_t *prev = (sm_ht_block_t *)((char *)b - b->prev_size);
        sm_ht_remove(h, prev);
        sm_ht_set_size(prev, sm_ht_size(prev) + sm_ht_size(b));
        b = prev;
    }
    if (sm_ht_whole_span(b)) {
        sm_heap_span_t *s = sm_ht_span_of(b);
        if (s->solo || (s->mapped && (h->u.t.empty_spans || s->bytes > h->chunk))) {
            sm_heap_span_drop(h, s); /* one empty span is kept: a heap at a boundary does not map per call */
            return;
        }
        h->u.t.empty_spans++;
    }
    sm_ht_mark_free(b);
    sm_ht_insert(h, b);
}

/* In place: p's block made to hold n bytes, growing into a free block after it. */
static SM_UNUSED bool sm_ht_resize(sm_heap_t *h, void *p, size_t n)
{
    sm_ht_block_t *b = sm_ht_of(p);
    size_t need = sm_ht_need(n), size = sm_ht_size(b);
    if (sm_ht_solo(b)) /* a shrink keeps its size: the rest of a solo span serves nothing */
        return need <= size;
    if (need > size) {
        sm_ht_block_t *next = sm_ht_next(b);
        if (!(next->size & SM_HT_FREE) || size + sm_ht_size(next) < need)
            return false;
        sm_ht_remove(h, next);
        sm_ht_set_size(b, size + sm_ht_size(next));
        sm_ht_next(b)->size &= ~(uint64_t)SM_HT_PREV_FREE;
    }
    sm_ht_trim(h, b, need);
    return true;
}

/* reset: every span kept becomes one free block. */
static SM_UNUSED void sm_ht_keep(sm_heap_t *h, sm_heap_span_t *s) { sm_ht_span_init(h, s); }
static SM_UNUSED void sm_ht_reset(sm_heap_t *h)
{
    sm_ht_clear(h);
    sm_heap_spans_trim(h, sm_ht_keep);
}
#endif
