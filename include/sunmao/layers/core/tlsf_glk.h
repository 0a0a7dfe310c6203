/* tlsf_glk: a Two-Level Segregated Fit heap (Masmano et al., ECRTS 2004) behind one global lock:
 * O(1) alloc and free with immediate coalescing, for real-time and embedded compositions (the
 * paper's tlsfcc is brk_heap::tlsf_glk(sync=ccsynch)).
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required: none|spinlock|mutex), err (required:
 * warn|fatal|callback), size_handle (requests outside [SM_SIZE_MIN, SM_SIZE_MAX] go to SM_NEXT).
 * The composition includes the policy headers it names. Options:
 *   SM_OPT_SL_BITS      second-level subdivisions per power of two, as log2 (default 5, 2..6)
 *   SM_OPT_REGION_SIZE  bytes asked of SM_NEXT at a time (default 1 MiB; more for big requests)
 *   SM_OPT_DECAY_MS     free memory idle this long is given back by L_release (default 1000): the
 *                       pages inside large free blocks are purged (next layer's L_purge), an empty
 *                       span kept for reuse goes back to the next layer
 *   SM_OPT_PURGE_MIN    smallest run of whole pages inside a free block worth a purge (default
 *                       64 KiB: smaller free blocks are reused soon, and each purge is a system call)
 * Properties: thread_safe = that of the sync policy, min_align 16, zeroed 0.
 *   @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 *   @check-next: fake
 *
 * Layout. Memory comes from SM_NEXT in page-aligned chunks. A span is a run of chunks that are
 * contiguous in memory (brk-like next layers give such runs), so blocks coalesce across chunk
 * boundaries. A span starts with its header, then blocks, then an 8-byte sentinel header of size 0.
 * A block is an 8-byte header word (size | FREE | PREV_FREE) followed by its payload; block
 * addresses are 8 mod 16 so payloads are 16-aligned with 8 bytes of overhead. A free block keeps
 * its list links after the header and a pointer to itself in its last word, which is where the
 * next block finds it (PREV_FREE tells it the word is valid). Invariants: no two free blocks are
 * adjacent; every free block is in the list of its (fl, sl) class and the bitmaps say which lists
 * are non-empty. Every chunk's pages map to their span in a page map (bit 0: first page of a
 * chunk), which is how free/getmeta/resize tell our blocks from the next layer's.
 *
 * Giving memory back (L_release). A free block large enough to hold PURGE_MIN of whole pages is
 * stamped by the first release pass that sees it (frees never read a clock; the free notes the
 * release clock instead) and purged by the first pass after the decay time: taken off its list
 * under the lock (BUSY: neither free nor live, so a bad free of it is still reported), purged
 * outside it, freed back and marked PURGED so later passes skip it until it is allocated from or
 * merged. The pages of its header, links and tail word stay. An empty span that free kept for reuse
 * goes back to the next layer the same way, one decay after it emptied. */
#include <string.h>
#include "../../core/layer.h"
#include "../../core/bits.h"
#include "../../core/errors.h"
#include "../../core/msg.h"
#include "../../core/pagemap.h"

#ifndef SM_LAYER
#error "tlsf_glk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "tlsf_glk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "tlsf_glk: policy slot 'sync' is empty (SM_SYNC = none|spinlock|mutex)"
#endif
#ifndef SM_ERR
#error "tlsf_glk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"

#ifndef SM_OPT_SL_BITS
#define SM_OPT_SL_BITS 5
#endif
#ifndef SM_OPT_REGION_SIZE
#define SM_OPT_REGION_SIZE ((size_t)1 << 20)
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
#ifndef SM_OPT_PURGE_MIN
#define SM_OPT_PURGE_MIN ((size_t)64 << 10)
#endif
_Static_assert((SM_OPT_DECAY_MS) >= 1, "tlsf_glk: SM_OPT_DECAY_MS must be at least 1 ms");
_Static_assert((SM_OPT_PURGE_MIN) >= 4096, "tlsf_glk: SM_OPT_PURGE_MIN must be at least one page");
_Static_assert((SM_OPT_SL_BITS) >= 2 && (SM_OPT_SL_BITS) <= 6, "tlsf_glk: SM_OPT_SL_BITS must be 2..6");
_Static_assert((SM_OPT_REGION_SIZE) >= 4096 && (SM_OPT_REGION_SIZE) % 4096 == 0,
               "tlsf_glk: SM_OPT_REGION_SIZE must be a non-zero multiple of 4096");

#define SM_TLSF_FREE       ((size_t)1)
#define SM_TLSF_PREV_FREE  ((size_t)2)
#define SM_TLSF_PURGED     ((size_t)4)  /* free block whose inner pages were purged */
#define SM_TLSF_BUSY       ((size_t)8)  /* taken by a release pass for its purge */
#define SM_TLSF_FLAGS      ((size_t)15)
#define SM_TLSF_HDR        ((size_t)8)  /* header word in front of every payload */
#define SM_TLSF_MIN_BLOCK  ((size_t)32) /* header + two links + self pointer of a free block */
#define SM_TLSF_SL_COUNT   (1u << (SM_OPT_SL_BITS))
/* Below 2^FL_SHIFT the classes are exact (one per 16 bytes) and all live in first level 0. */
#define SM_TLSF_FL_SHIFT   ((SM_OPT_SL_BITS) + 4)
#define SM_TLSF_FL_COUNT   (SM_PAGEMAP_ADDR_BITS - SM_TLSF_FL_SHIFT + 1)
/* Larger requests or alignments cannot be met in a 48-bit address space; refusing them early
 * keeps every size computation below free of overflow. */
#define SM_TLSF_MAX_REQUEST ((size_t)1 << 44)
#define SM_TLSF_PAGE_SHIFT 12
#define SM_TLSF_PAGE       ((size_t)1 << SM_TLSF_PAGE_SHIFT)
#define SM_TLSF_CHUNK_START ((uintptr_t)1)
/* First block of a span: right after the span header, at 8 mod 16. */
#define SM_TLSF_FIRST_OFFSET (sm_align_up(sizeof(struct SM_FN(span)) + SM_TLSF_HDR, 16) - SM_TLSF_HDR)

struct SM_FN(block) {
    size_t head;                                  /* size | flags; size 0 = sentinel */
    struct SM_FN(block) *next_free, *prev_free;   /* valid only while FREE */
    uint64_t stamp; /* free blocks >= purge_block only: when a release pass first saw it, 0 = not yet */
};

struct SM_FN(span) {
    size_t bytes;  /* all its chunks together */
    size_t chunks; /* > 1 once a contiguous chunk was merged in */
    struct SM_FN(span) *next, *prev;
};

static struct {
    SM_SYNC_FN(t) lock;
    uint64_t fl_map;
    uint64_t sl_map[SM_TLSF_FL_COUNT];
    struct SM_FN(block) *heads[SM_TLSF_FL_COUNT][SM_TLSF_SL_COUNT];
    struct SM_FN(span) *spans;
    size_t span_count, chunk_count, map_nodes; /* chunks and page-map nodes held from SM_NEXT */
    sm_pagemap_t map;
} SM_FN(obj) = { .lock = SM_SYNC_INIT };

enum {
    /* The smallest free block that can hold PURGE_MIN of whole pages after its header and links. */
    SM_FN(purge_block) = (SM_OPT_PURGE_MIN) + 2 * SM_TLSF_PAGE,
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe),
    SM_FN(min_align) = 16,
    SM_FN(zeroed) = 0,
    /* Requests we do not serve are passed on under our lock when the next layer needs one. */
    SM_FN(next_needs_lock) = !SM_PROP(SM_NEXT, thread_safe),
};

/* ---- blocks ---- */
SM_INLINE size_t SM_FN(bsize)(const struct SM_FN(block) *b) { return b->head & ~SM_TLSF_FLAGS; }
SM_INLINE struct SM_FN(block) *SM_FN(bnext)(struct SM_FN(block) *b)
{
    return (struct SM_FN(block) *)((char *)b + SM_FN(bsize)(b));
}
SM_INLINE struct SM_FN(block) *SM_FN(bprev)(struct SM_FN(block) *b) { return ((struct SM_FN(block) **)b)[-1]; }
SM_INLINE void SM_FN(set_self_tail)(struct SM_FN(block) *b)
{
    ((struct SM_FN(block) **)SM_FN(bnext)(b))[-1] = b;
}
SM_INLINE struct SM_FN(block) *SM_FN(first_block)(struct SM_FN(span) *s)
{
    return (struct SM_FN(block) *)((char *)s + SM_TLSF_FIRST_OFFSET);
}
SM_INLINE char *SM_FN(sentinel)(struct SM_FN(span) *s) { return (char *)s + s->bytes - SM_TLSF_HDR; }
/* The PREV_FREE bit lives in the header of the *next* block, which may be live and read by getmeta
 * without the lock; so that bit changes with an atomic store (a plain load and store under the lock,
 * on x86-64 the same instructions) and getmeta reads headers atomically: no data race in C11 terms. */
SM_INLINE void SM_FN(set_prev_free)(struct SM_FN(block) *b, bool prev_free)
{
    size_t h = b->head;
    __atomic_store_n(&b->head, prev_free ? h | SM_TLSF_PREV_FREE : h & ~SM_TLSF_PREV_FREE, __ATOMIC_RELAXED);
}

/* Block size for a payload of n bytes (n <= MAX_REQUEST). */
SM_INLINE size_t SM_FN(block_size)(size_t n)
{
    size_t s = sm_align_up(n + SM_TLSF_HDR, 16);
    return s < SM_TLSF_MIN_BLOCK ? SM_TLSF_MIN_BLOCK : s;
}

/* ---- segregated lists ---- */
SM_INLINE void SM_FN(mapping)(size_t size, unsigned *fl, unsigned *sl)
{
    if (size < ((size_t)1 << SM_TLSF_FL_SHIFT)) {
        *fl = 0;
        *sl = (unsigned)(size >> 4);
    } else {
        unsigned l = sm_log2_floor(size);
        *fl = l - SM_TLSF_FL_SHIFT + 1;
        *sl = (unsigned)(size >> (l - (SM_OPT_SL_BITS))) - SM_TLSF_SL_COUNT;
    }
}

/* Round a size up so that every block in its class is large enough ("good fit"): the search
 * then never walks a list. */
SM_INLINE size_t SM_FN(search_size)(size_t size)
{
    if (size >= ((size_t)1 << SM_TLSF_FL_SHIFT))
        size += ((size_t)1 << (sm_log2_floor(size) - (SM_OPT_SL_BITS))) - 1;
    return size;
}

SM_INLINE void SM_FN(list_insert)(struct SM_FN(block) *b)
{
    unsigned fl, sl;
    SM_FN(mapping)(SM_FN(bsize)(b), &fl, &sl);
    struct SM_FN(block) *head = SM_FN(obj).heads[fl][sl];
    b->next_free = head;
    b->prev_free = NULL;
    if (head)
        head->prev_free = b;
    SM_FN(obj).heads[fl][sl] = b;
    SM_FN(obj).sl_map[fl] |= (uint64_t)1 << sl;
    SM_FN(obj).fl_map |= (uint64_t)1 << fl;
}

SM_INLINE void SM_FN(list_remove)(struct SM_FN(block) *b)
{
    unsigned fl, sl;
    SM_FN(mapping)(SM_FN(bsize)(b), &fl, &sl);
    if (b->next_free)
        b->next_free->prev_free = b->prev_free;
    if (b->prev_free) {
        b->prev_free->next_free = b->next_free;
    } else {
        SM_FN(obj).heads[fl][sl] = b->next_free;
        if (!b->next_free) {
            SM_FN(obj).sl_map[fl] &= ~((uint64_t)1 << sl);
            if (!SM_FN(obj).sl_map[fl])
                SM_FN(obj).fl_map &= ~((uint64_t)1 << fl);
        }
    }
}

/* A free block of at least `size` bytes, still in its list, or NULL. */
SM_INLINE struct SM_FN(block) *SM_FN(find_free)(size_t size)
{
    unsigned fl, sl;
    SM_FN(mapping)(SM_FN(search_size)(size), &fl, &sl);
    if (sm_unlikely(fl >= SM_TLSF_FL_COUNT))
        return NULL;
    uint64_t sl_bits = SM_FN(obj).sl_map[fl] & (~(uint64_t)0 << sl);
    if (!sl_bits) {
        uint64_t fl_bits = SM_FN(obj).fl_map & (~(uint64_t)0 << fl << 1);
        if (!fl_bits)
            return NULL;
        fl = sm_ctz(fl_bits);
        sl_bits = SM_FN(obj).sl_map[fl];
    }
    return SM_FN(obj).heads[fl][sm_ctz(sl_bits)];
}

/* Free block b (its header says used, with its true size) and merge it with free neighbours.
 * Returns the merged block, which is in its list. The FREE bit is set in b's own header first,
 * so that a second free of b is still recognised after b was absorbed by its predecessor. */
static inline struct SM_FN(block) *SM_FN(release_block)(struct SM_FN(block) *b)
{
    b->head |= SM_TLSF_FREE;
    size_t size = SM_FN(bsize)(b);
    struct SM_FN(block) *next = SM_FN(bnext)(b);
    if (next->head & SM_TLSF_FREE) {
        SM_FN(list_remove)(next);
        size += SM_FN(bsize)(next);
    }
    if (b->head & SM_TLSF_PREV_FREE) {
        struct SM_FN(block) *prev = SM_FN(bprev)(b);
        SM_FN(list_remove)(prev);
        size += SM_FN(bsize)(prev);
        b = prev;
    }
    b->head = size | SM_TLSF_FREE; /* its predecessor is in use: free blocks are never adjacent */
    if (size >= SM_FN(purge_block))
        b->stamp = 0;
    SM_FN(set_self_tail)(b);
    SM_FN(set_prev_free)(SM_FN(bnext)(b), true);
    SM_FN(list_insert)(b);
    return b;
}

/* b is in use (in no list): give back its tail beyond `size` bytes if that tail can be a block. */
static inline void SM_FN(trim)(struct SM_FN(block) *b, size_t size)
{
    size_t have = SM_FN(bsize)(b);
    if (have - size < SM_TLSF_MIN_BLOCK)
        return;
    b->head = size | (b->head & SM_TLSF_PREV_FREE);
    struct SM_FN(block) *rest = SM_FN(bnext)(b);
    rest->head = have - size;
    SM_FN(release_block)(rest);
}

/* Hand out free block b (in its list) with at least `size` bytes at an `align`-aligned payload. */
SM_INLINE void *SM_FN(carve)(struct SM_FN(block) *b, size_t size, size_t align)
{
    SM_FN(list_remove)(b);
    uintptr_t payload = sm_addr(b) + SM_TLSF_HDR;
    if (sm_unlikely(!sm_ptr_aligned((void *)payload, align))) {
        /* The gap in front becomes a free block of its own, so it must be able to hold one. */
        size_t gap = sm_align_up(payload, align) - payload;
        if (gap < SM_TLSF_MIN_BLOCK)
            gap += align;
        size_t total = SM_FN(bsize)(b);
        b->head = gap | SM_TLSF_FREE;
        SM_FN(set_self_tail)(b);
        SM_FN(list_insert)(b);
        b = (struct SM_FN(block) *)((char *)b + gap);
        b->head = (total - gap) | SM_TLSF_PREV_FREE;
    } else {
        b->head &= ~(SM_TLSF_FREE | SM_TLSF_PURGED);
    }
    SM_FN(set_prev_free)(SM_FN(bnext)(b), false);
    SM_FN(trim)(b, size);
    return (char *)b + SM_TLSF_HDR;
}

/* ---- spans and chunks from the next layer ---- */
/* Page-map nodes: zero-filled, from the next layer, counted in map_nodes (core/pagemap.h). */
SM_PAGEMAP_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).map_nodes)

SM_INLINE struct SM_FN(span) *SM_FN(span_of)(uintptr_t tag)
{
    return (struct SM_FN(span) *)(tag & ~SM_TLSF_CHUNK_START);
}

SM_INLINE void SM_FN(give_chunk)(void *chunk, size_t bytes)
{
    sm_pagemap_set(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, chunk, bytes, 0, SM_FN(map_node_alloc));
    sm_mctx_t r = sm_mctx_block(chunk, bytes, SM_F_SIZED);
    SM_NEXT_FN(free)(&r);
}

/* Get a chunk able to hold a free block of `need` bytes; false (errno = ENOMEM) if the next layer
 * or the page map is out of memory. Called with the lock held. */
SM_SLOWPATH bool SM_FN(grow)(size_t need)
{
    size_t bytes = sm_align_up(need + SM_TLSF_FIRST_OFFSET + SM_TLSF_HDR, SM_TLSF_PAGE);
    if (bytes < (SM_OPT_REGION_SIZE))
        bytes = SM_OPT_REGION_SIZE;
    sm_mctx_t r = sm_mctx_alloc(bytes, SM_TLSF_PAGE, 0);
    char *chunk = (char *)SM_NEXT_FN(alloc)(&r);
    if (!chunk)
        return false;
    uintptr_t before = sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, chunk - 1);
    struct SM_FN(span) *span = before ? SM_FN(span_of)(before) : NULL;
    bool extends = span && (char *)span + span->bytes == chunk;
    if (!extends)
        span = (struct SM_FN(span) *)chunk;
    if (!sm_ptr_aligned(chunk, SM_TLSF_PAGE) ||
        !sm_pagemap_set(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, chunk, bytes, (uintptr_t)span, SM_FN(map_node_alloc)) ||
        !sm_pagemap_set(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, chunk, 1, (uintptr_t)span | SM_TLSF_CHUNK_START,
                        SM_FN(map_node_alloc))) {
        SM_FN(give_chunk)(chunk, bytes);
        errno = ENOMEM;
        return false;
    }
    struct SM_FN(block) *b;
    if (extends) {
        /* The old sentinel becomes the header of a block covering the new chunk. */
        b = (struct SM_FN(block) *)SM_FN(sentinel)(span);
        b->head = bytes | (b->head & SM_TLSF_PREV_FREE);
        span->bytes += bytes;
        span->chunks++;
    } else {
        span->bytes = bytes;
        span->chunks = 1;
        span->prev = NULL;
        span->next = SM_FN(obj).spans;
        if (span->next)
            span->next->prev = span;
        SM_FN(obj).spans = span;
        SM_FN(obj).span_count++;
        b = SM_FN(first_block)(span);
        b->head = bytes - SM_TLSF_FIRST_OFFSET - SM_TLSF_HDR;
    }
    ((struct SM_FN(block) *)SM_FN(sentinel)(span))->head = 0;
    SM_FN(obj).chunk_count++;
    SM_FN(release_block)(b);
    return true;
}

/* Span s is one free block b: give its chunks back to the next layer. Called with the lock held. */
SM_SLOWPATH void SM_FN(return_span)(struct SM_FN(span) *s, struct SM_FN(block) *b)
{
    SM_FN(list_remove)(b);
    if (s->prev)
        s->prev->next = s->next;
    else
        SM_FN(obj).spans = s->next;
    if (s->next)
        s->next->prev = s->prev;
    SM_FN(obj).span_count--;
    char *start = (char *)s, *end = start + s->bytes;
    SM_FN(obj).chunk_count -= s->chunks;
    if (s->chunks > 1) {
        /* Merged chunks go back one by one, as they came; the page map marks where each starts.
         * Only spans that really were merged pay for this page walk. */
        char *from = start;
        for (char *page = start + SM_TLSF_PAGE; page < end; page += SM_TLSF_PAGE) {
            if (sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, page) & SM_TLSF_CHUNK_START) {
                SM_FN(give_chunk)(from, (size_t)(page - from));
                from = page;
            }
        }
        start = from;
    }
    SM_FN(give_chunk)(start, (size_t)(end - start));
}

/* The block whose payload is p if p is a live block of span s; otherwise NULL with *kind and *why
 * saying what is wrong. O(1): checks the header against both physical neighbours. */
static inline struct SM_FN(block) *SM_FN(live_block)(struct SM_FN(span) *s, void *p, sm_err_kind_t *kind,
                                                     const char **why)
{
    char *first = (char *)SM_FN(first_block)(s), *sentinel = SM_FN(sentinel)(s);
    char *at = (char *)p - SM_TLSF_HDR;
    struct SM_FN(block) *b = (struct SM_FN(block) *)at;
    *kind = SM_ERR_INVALID_FREE;
    if (!sm_ptr_aligned(p, 16) || at < first || at >= sentinel) {
        *why = "pointer is inside the heap but not at a block's start";
        return NULL;
    }
    size_t size = SM_FN(bsize)(b);
    if (size < SM_TLSF_MIN_BLOCK || size > (size_t)(sentinel - at)) {
        *why = "no valid block header before the pointer (interior pointer or overwritten header)";
        return NULL;
    }
    if (b->head & (SM_TLSF_FREE | SM_TLSF_BUSY)) {
        *kind = SM_ERR_DOUBLE_FREE;
        *why = "block is already free";
        return NULL;
    }
    struct SM_FN(block) *next = SM_FN(bnext)(b);
    size_t next_size = SM_FN(bsize)(next);
    bool next_ok = !(next->head & SM_TLSF_PREV_FREE) &&
                   ((char *)next == sentinel ? next_size == 0
                                             : next_size >= SM_TLSF_MIN_BLOCK &&
                                                   next_size <= (size_t)(sentinel - (char *)next));
    if (next_ok && (b->head & SM_TLSF_PREV_FREE)) {
        char *prev = (char *)SM_FN(bprev)(b);
        next_ok = prev >= first && prev < at && (((struct SM_FN(block) *)prev)->head & SM_TLSF_FREE) &&
                  prev + SM_FN(bsize)((struct SM_FN(block) *)prev) == at;
    }
    if (!next_ok) {
        *why = "block header disagrees with its neighbours (interior pointer or heap overflow)";
        return NULL;
    }
    return b;
}

/* ---- the layer contract ---- */
SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* Critical sections. Every section of a request path is handed to the sync policy's atomic_exec,
 * which may run it on another thread (a combining policy runs waiting threads' sections in one
 * pass): a section sets no errno and raises nothing; its results travel back in its argument, and
 * the caller acts on them after the policy returns. */

/* A request passed to a next layer that is not thread-safe, under our lock. */
SM_INLINE void SM_FN(cs_pass_alloc)(void *c) { SM_NEXT_FN(alloc)((sm_mctx_t *)c); }
SM_INLINE void SM_FN(cs_pass_free)(void *c) { SM_NEXT_FN(free)((sm_mctx_t *)c); }
struct SM_FN(cs_pass_query) { sm_mctx_t *c; size_t n; bool answer; };
SM_INLINE void SM_FN(cs_pass_getmeta)(void *arg)
{
    struct SM_FN(cs_pass_query) *q = (struct SM_FN(cs_pass_query) *)arg;
    q->answer = SM_NEXT_FN(getmeta)(q->c);
}
SM_INLINE void SM_FN(cs_pass_resize)(void *arg)
{
    struct SM_FN(cs_pass_query) *q = (struct SM_FN(cs_pass_query) *)arg;
    q->answer = SM_NEXT_FN(resize)(q->c, q->n);
}

SM_INLINE void *SM_FN(pass_alloc)(sm_mctx_t *c)
{
    if (!SM_FN(next_needs_lock))
        return SM_NEXT_FN(alloc)(c);
    c->ptr = NULL;
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_pass_alloc), c);
    if (!c->ptr)
        errno = ENOMEM;
    return c->ptr;
}

SM_INLINE void SM_FN(pass_free)(sm_mctx_t *c)
{
    if (!SM_FN(next_needs_lock)) {
        SM_NEXT_FN(free)(c);
        return;
    }
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_pass_free), c);
}

struct SM_FN(cs_alloc) { size_t size, need, align; void *ptr; };
SM_INLINE void SM_FN(cs_alloc)(void *arg)
{
    struct SM_FN(cs_alloc) *a = (struct SM_FN(cs_alloc) *)arg;
    struct SM_FN(block) *b = SM_FN(find_free)(a->need);
    if (sm_unlikely(!b)) {
        if (SM_FN(grow)(SM_FN(search_size)(a->need)))
            b = SM_FN(find_free)(a->need);
        if (!b) {
            a->ptr = NULL;
            return;
        }
    }
    a->ptr = SM_FN(carve)(b, a->size, a->align);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (!SM_FN(handles_size)(c->size))
        return SM_FN(pass_alloc)(c);
    size_t align = c->align;
    if (sm_unlikely(c->size > SM_TLSF_MAX_REQUEST || align > SM_TLSF_MAX_REQUEST)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    size_t size = SM_FN(block_size)(c->size);
    /* Room for the worst front gap: just under one alignment step plus a minimal free block. */
    struct SM_FN(cs_alloc) a = { size, align <= 16 ? size : size + align + SM_TLSF_MIN_BLOCK, align, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_alloc), &a);
    if (sm_unlikely(!a.ptr)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    c->flags &= ~(unsigned)SM_F_FRESH;
    return c->ptr = a.ptr;
}

/* A free's outcome: done, not ours (pass it down), or a bad free (kind and why say what). */
enum { SM_FN(freed), SM_FN(not_ours), SM_FN(bad_free) };
struct SM_FN(cs_free) { void *ptr; int outcome; bool note; sm_err_kind_t kind; const char *why; };
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    /* Read again inside the section: another thread may have returned the span meanwhile. */
    uintptr_t tag = sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, f->ptr);
    if (sm_unlikely(!tag)) {
        f->outcome = SM_FN(not_ours);
        return;
    }
    struct SM_FN(span) *span = SM_FN(span_of)(tag);
    struct SM_FN(block) *b = SM_FN(live_block)(span, f->ptr, &f->kind, &f->why);
    if (sm_unlikely(!b)) {
        f->outcome = SM_FN(bad_free);
        return;
    }
    b = SM_FN(release_block)(b);
    f->outcome = SM_FN(freed);
    f->note = SM_FN(bsize)(b) >= SM_FN(purge_block);
    /* Keep one span even when empty, so a program that frees everything and starts again does
     * not pay for a round trip to the next layer (until it has been empty for the decay time). */
    if (sm_unlikely(b == SM_FN(first_block)(span) && SM_FN(bsize)(SM_FN(bnext)(b)) == 0) &&
        SM_FN(obj).span_count > 1)
        SM_FN(return_span)(span, b); /* the next layer may have a clock of its own: note anyway */
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (!sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, c->ptr)) {
        SM_FN(pass_free)(c);
        return;
    }
    struct SM_FN(cs_free) f = { c->ptr, SM_FN(freed), false, SM_ERR_INVALID_FREE, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_free), &f);
    if (sm_unlikely(f.outcome == SM_FN(not_ours)))
        SM_FN(pass_free)(c);
    else if (sm_unlikely(f.outcome == SM_FN(bad_free)))
        SM_ERR_FN(raise)(f.kind, SM_LAYER_NAME, c->ptr, f.why); /* the free is ignored */
    else if (f.note)
        sm_release_note();
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uintptr_t tag = sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, c->ptr);
    if (!tag) {
        if (!SM_FN(next_needs_lock))
            return SM_NEXT_FN(getmeta)(c);
        struct SM_FN(cs_pass_query) q = { c, 0, false };
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_pass_getmeta), &q);
        return q.answer;
    }
    /* A live block's size and FREE bit change only through its owner, so its header can be read
     * without the lock (atomically: a neighbour may flip PREV_FREE meanwhile, set_prev_free); the
     * bounds check keeps the read inside the span for any pointer. */
    struct SM_FN(span) *span = SM_FN(span_of)(tag);
    char *at = (char *)c->ptr - SM_TLSF_HDR;
    if (!sm_ptr_aligned(c->ptr, 16) || at < (char *)SM_FN(first_block)(span))
        return false;
    size_t head = __atomic_load_n(&((struct SM_FN(block) *)at)->head, __ATOMIC_RELAXED);
    if ((head & (SM_TLSF_FREE | SM_TLSF_BUSY)) || (head & ~SM_TLSF_FLAGS) < SM_TLSF_MIN_BLOCK)
        return false;
    c->usable = (head & ~SM_TLSF_FLAGS) - SM_TLSF_HDR;
    c->owner = SM_LAYER_NAME;
    return true;
}

struct SM_FN(cs_resize) { void *ptr; size_t want; bool done; };
SM_INLINE void SM_FN(cs_resize)(void *arg)
{
    struct SM_FN(cs_resize) *r = (struct SM_FN(cs_resize) *)arg;
    uintptr_t tag = sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, r->ptr);
    sm_err_kind_t kind;
    const char *why;
    struct SM_FN(block) *b = tag ? SM_FN(live_block)(SM_FN(span_of)(tag), r->ptr, &kind, &why) : NULL;
    r->done = false;
    if (!b)
        return;
    size_t have = SM_FN(bsize)(b);
    struct SM_FN(block) *next = SM_FN(bnext)(b);
    if (r->want > have && (next->head & SM_TLSF_FREE) && have + SM_FN(bsize)(next) >= r->want) {
        SM_FN(list_remove)(next);
        have += SM_FN(bsize)(next);
        b->head = have | (b->head & SM_TLSF_PREV_FREE);
        SM_FN(set_prev_free)(SM_FN(bnext)(b), false);
    }
    if (r->want <= have) {
        SM_FN(trim)(b, r->want);
        r->done = true;
    }
}

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    if (!sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, c->ptr)) {
        if (!SM_FN(next_needs_lock))
            return SM_NEXT_FN(resize)(c, n);
        struct SM_FN(cs_pass_query) q = { c, n, false };
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_pass_resize), &q);
        return q.answer;
    }
    if (n > SM_TLSF_MAX_REQUEST)
        return false;
    struct SM_FN(cs_resize) r = { c->ptr, SM_FN(block_size)(n), false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_resize), &r);
    return r.done;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* One release pass (see "Giving memory back"): stamp what is new, return a kept empty span and take
 * the free blocks that are due, under the lock; purge the taken blocks without it; free them back. */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    enum { max_taken = 64, max_visits = 4096 };
    struct SM_FN(block) *taken[max_taken];
    unsigned ntaken = 0, visits = 0;
    const bool all = r->how == SM_RELEASE_ALL;
    const uint64_t now = r->now_ms, decay = SM_OPT_DECAY_MS;
    unsigned fl0, sl0;
    SM_FN(mapping)(SM_FN(purge_block), &fl0, &sl0);
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    /* Largest first: if the bounds stop the pass, the pages it leaves are the fewest. */
    for (unsigned fl = SM_TLSF_FL_COUNT; fl-- > fl0 && ntaken < max_taken && visits < max_visits;) {
        if (!(SM_FN(obj).fl_map & ((uint64_t)1 << fl)))
            continue;
        for (unsigned sl = 0; sl < SM_TLSF_SL_COUNT && ntaken < max_taken && visits < max_visits; sl++) {
            struct SM_FN(block) *b = SM_FN(obj).heads[fl][sl], *next;
            for (; b && ntaken < max_taken && visits < max_visits; b = next, visits++) {
                next = b->next_free;
                size_t size = SM_FN(bsize)(b);
                if (size < SM_FN(purge_block) || ((b->head & SM_TLSF_PURGED) && !all))
                    continue;
                if (!all && (!b->stamp || b->stamp + decay > now)) {
                    if (!b->stamp)
                        b->stamp = now ? now : 1;
                    sm_release_due(r, b->stamp + decay);
                    continue;
                }
                struct SM_FN(span) *span = SM_FN(span_of)(sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, b));
                if (b == SM_FN(first_block)(span) && SM_FN(bsize)(SM_FN(bnext)(b)) == 0) {
                    r->released += span->bytes;
                    SM_FN(return_span)(span, b); /* empty: the whole span goes back */
                    continue;
                }
                if (b->head & SM_TLSF_PURGED)
                    continue; /* a release of everything: already purged */
                SM_FN(list_remove)(b);
                b->head = size | SM_TLSF_BUSY;
                SM_FN(set_prev_free)(SM_FN(bnext)(b), false);
                taken[ntaken++] = b;
            }
        }
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (ntaken == max_taken || visits == max_visits)
        sm_release_due(r, now + 1); /* more to look at: the next pass comes at once */
    bool purged[max_taken];
    for (unsigned i = 0; i < ntaken; i++) {
        char *b = (char *)taken[i], *end = b + SM_FN(bsize)(taken[i]);
        char *from = (char *)sm_align_up((uintptr_t)(b + sizeof(struct SM_FN(block))), SM_TLSF_PAGE);
        char *to = (char *)sm_align_down((uintptr_t)(end - SM_TLSF_HDR), SM_TLSF_PAGE);
        sm_mctx_t c = sm_mctx_block(from, (size_t)(to - from), SM_F_ZERO);
        purged[i] = SM_NEXT_FN(purge)(&c);
        r->released += purged[i] ? (size_t)(to - from) : 0;
    }
    if (ntaken) {
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        for (unsigned i = 0; i < ntaken; i++) {
            struct SM_FN(block) *b = taken[i];
            size_t size = SM_FN(bsize)(b);
            b->head = size | (b->head & SM_TLSF_PREV_FREE); /* a neighbour may have been freed since */
            struct SM_FN(block) *merged = SM_FN(release_block)(b);
            if (merged == b && SM_FN(bsize)(b) == size && purged[i])
                b->head |= SM_TLSF_PURGED;
            else if (!all)
                sm_release_due(r, now + decay); /* merged with dirty neighbours: stamped next pass */
        }
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

SM_FORK_HOOKS_ONE_LOCK(&SM_FN(obj).lock)

/* ---- for tests and debugging ---- */
/* Walk every span and list and check the invariants. Returns NULL when the heap is consistent,
 * else a description of the first problem (in a static buffer). Takes the lock; O(heap). */
static inline const char *SM_FN(check)(void)
{
    static char why[160];
    const char *bad = NULL;
    const void *where = NULL;
    size_t walked_free = 0, listed_free = 0, spans = 0;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (struct SM_FN(span) *s = SM_FN(obj).spans; s && !bad; s = s->next, spans++) {
        char *sentinel = SM_FN(sentinel)(s);
        uintptr_t tag = sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, s);
        if (tag != ((uintptr_t)s | SM_TLSF_CHUNK_START) ||
            SM_FN(span_of)(sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, sentinel)) != s) {
            bad = "span is not registered in the page map", where = s;
            break;
        }
        size_t prev_free = 0;
        struct SM_FN(block) *b = SM_FN(first_block)(s);
        while ((char *)b < sentinel) {
            size_t size = SM_FN(bsize)(b), free = b->head & SM_TLSF_FREE;
            where = b;
            if (size < SM_TLSF_MIN_BLOCK || size > (size_t)(sentinel - (char *)b)) {
                bad = "block size out of range";
                break;
            }
            if (!!(b->head & SM_TLSF_PREV_FREE) != !!prev_free) {
                bad = "PREV_FREE bit does not match the previous block";
                break;
            }
            if (free && prev_free) {
                bad = "two adjacent free blocks (missed coalescing)";
                break;
            }
            if (free && ((struct SM_FN(block) **)SM_FN(bnext)(b))[-1] != b) {
                bad = "free block's tail does not point to it";
                break;
            }
            walked_free += free != 0;
            prev_free = free;
            b = SM_FN(bnext)(b);
        }
        if (!bad && ((char *)b != sentinel || SM_FN(bsize)(b) != 0 || (b->head & SM_TLSF_FREE) ||
                     !!(b->head & SM_TLSF_PREV_FREE) != !!prev_free))
            bad = "span does not end in a consistent sentinel", where = b;
    }
    if (!bad && spans != SM_FN(obj).span_count)
        bad = "span count is wrong", where = NULL;
    for (unsigned fl = 0; fl < SM_TLSF_FL_COUNT && !bad; fl++) {
        if (!!(SM_FN(obj).fl_map & ((uint64_t)1 << fl)) != !!SM_FN(obj).sl_map[fl]) {
            bad = "first-level bitmap disagrees with the second level", where = NULL;
            break;
        }
        for (unsigned sl = 0; sl < SM_TLSF_SL_COUNT && !bad; sl++) {
            struct SM_FN(block) *head = SM_FN(obj).heads[fl][sl], *prev = NULL;
            if (!!(SM_FN(obj).sl_map[fl] & ((uint64_t)1 << sl)) != !!head) {
                bad = "second-level bitmap disagrees with the list", where = head;
                break;
            }
            for (struct SM_FN(block) *b = head; b; prev = b, b = b->next_free, listed_free++) {
                unsigned bfl, bsl;
                SM_FN(mapping)(SM_FN(bsize)(b), &bfl, &bsl);
                where = b;
                if (!(b->head & SM_TLSF_FREE) || b->prev_free != prev || bfl != fl || bsl != sl ||
                    !sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, b)) {
                    bad = "listed block is not free, in the wrong class, or badly linked";
                    break;
                }
            }
        }
    }
    if (!bad && walked_free != listed_free)
        bad = "free blocks in spans and in lists differ in number", where = NULL;
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (!bad)
        return NULL;
    sm_msg_format(why, sizeof why, "%s (at %p)", bad, where);
    return why;
}

#undef SM_TLSF_FREE
#undef SM_TLSF_PREV_FREE
#undef SM_TLSF_FLAGS
#undef SM_TLSF_HDR
#undef SM_TLSF_MIN_BLOCK
#undef SM_TLSF_SL_COUNT
#undef SM_TLSF_FL_SHIFT
#undef SM_TLSF_FL_COUNT
#undef SM_TLSF_MAX_REQUEST
#undef SM_TLSF_PAGE_SHIFT
#undef SM_TLSF_PAGE
#undef SM_TLSF_CHUNK_START
#undef SM_TLSF_FIRST_OFFSET
#undef SM_TLSF_PURGED
#undef SM_TLSF_BUSY
#undef SM_OPT_SL_BITS
#undef SM_OPT_REGION_SIZE
#undef SM_OPT_DECAY_MS
#undef SM_OPT_PURGE_MIN
#include "../../core/layer_end.h"
