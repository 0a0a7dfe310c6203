/* tlsf_glk: a Two-Level Segregated Fit heap (Masmano et al., ECRTS 2004) behind one global lock:
 * O(1) alloc and free with immediate coalescing, for real-time and embedded compositions (the
 * paper's tlsfcc is brk_heap::tlsf_glk(sync=ccsynch)).
 * Why it is built this way, with the measurements: docs/layers.md, section tlsf_glk.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required: policies/sync/), err (required:
 * warn|fatal|callback), size_handle (requests outside [SM_SIZE_MIN, SM_SIZE_MAX] go to SM_NEXT),
 * sizeclass (optional: the classes of the layers above that serve the sizes below SM_SIZE_MIN; a
 * block shrunk below SM_SIZE_MIN keeps its new size's class size instead of SM_SIZE_MIN).
 * The composition includes the policy headers it names. Options:
 *   SM_OPT_SL_BITS      second-level subdivisions per power of two, as log2 (default 5, 2..6)
 *   SM_OPT_REGION_SIZE  bytes asked of SM_NEXT at a time (default 1 MiB; more for big requests)
 *   SM_OPT_DECAY_MS     free memory idle this long is given back by L_release (default 1000): the
 *                       pages inside large free blocks are purged (next layer's L_purge), an empty
 *                       span kept for reuse goes back to the next layer
 *   SM_OPT_PURGE_MIN    smallest run of whole pages inside a free block worth a purge (default
 *                       64 KiB: smaller free blocks are reused soon, and each purge is a system call)
 * Properties: thread_safe = that of the sync policy, min_align 16, zeroed 0. Capabilities: MOVE,
 * forwarded for the blocks it passes on (its own stay in their regions). Also L_check() (the debug
 * checker).
 *
 * Invariants (layout: tlsf_glk/blocks.h):
 * - A span is a run of page-aligned chunks of SM_NEXT, contiguous in memory: its header, blocks,
 *   then an 8-byte sentinel header of size 0. Every chunk's pages map to their span in the page map
 *   (bit 0: first page of a chunk), which is how free/getmeta/resize tell our blocks from the next
 *   layer's.
 * - No two free blocks are adjacent; every free block is in the list of its (fl, sl) class and the
 *   bitmaps say which lists are non-empty. A block taken by a release pass is BUSY: neither free
 *   nor live, in no list.
 * Lock order: the one lock -> next layer's locks (grow, give_chunk, requests passed to a next layer
 * that is not thread-safe). A release pass purges with no lock held; errors are raised after the
 * lock is released. Every section of a request path runs under the sync policy's atomic_exec.
 * Parts, in layers/core/tlsf_glk/ and included below (by this template only): blocks.h (block
 * layout, mapping, segregated lists, release_block/trim/carve), spans.h (grow, give_chunk,
 * return_span, live_block), release.h (the release pass), check.h (the debug checker).
 * @model: name=tlsf_glk kind=core slot sync slot err slot sizeclass= range
 * @model: key sl_bits int key region_size size key decay_ms int key purge_min size
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/layer.h"
#include "../../core/bits.h"
#include "../../core/conf.h"
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
#error "tlsf_glk: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "tlsf_glk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

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

#define SM_TLSF_GLK_PARTS 1
#include "tlsf_glk/blocks.h"
#include "tlsf_glk/spans.h"

/* ---- the layer contract ---- */
/* The decay in force: SM_OPT_DECAY_MS, or dirty_decay_ms (core/conf.h), read once here. */
static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    return SM_NEXT_FN(create)();
}

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
SM_INLINE void SM_FN(cs_pass_move)(void *arg)
{
    struct SM_FN(cs_pass_query) *q = (struct SM_FN(cs_pass_query) *)arg;
    q->answer = SM_NEXT_FN(move)(q->c, q->n);
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
    if (!SM_FN(serves)(c))
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

/* The usable size of a live block of `bytes` (its header's size). With the classes above (the
 * sizeclass slot), a block shrunk below the smallest size this layer serves says only the largest
 * class size it holds (its shrink kept one whole, resize below): a program may name any size up to
 * the usable size in a sized free, and a thread cache above takes that size's class for the block
 * (a block of 4104 usable bytes, kept by realloc(p, 4100) and freed as 4100, went to the 4608 B
 * list and was handed out for malloc(4388)). */
SM_INLINE size_t SM_FN(usable_of)(size_t bytes)
{
    size_t u = bytes - SM_TLSF_HDR;
#ifdef SM_SIZECLASS
    if (u < (size_t)(SM_SIZE_MIN) && u <= (size_t)SM_SIZECLASS_FN(max_size)) {
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(u);
        if (SM_SIZECLASS_FN(class_to_size)(cls) > u && cls > 0)
            cls--;
        u = SM_SIZECLASS_FN(class_to_size)(cls);
    }
#endif
    return u;
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
    c->usable = SM_FN(usable_of)(head & ~SM_TLSF_FLAGS);
    c->owner = SM_LAYER_NAME;
    return true;
}

struct SM_FN(cs_resize) { void *ptr; size_t want; bool done, note; };
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
        /* A shrink frees the tail: dirty pages, which the release clock must hear of as a free's
         * are (64 blocks of 1 MiB shrunk to 4 KiB stayed resident until malloc_trim). */
        struct SM_FN(block) *rest = SM_FN(trim)(b, r->want);
        r->note = rest && SM_FN(bsize)(rest) >= SM_FN(purge_block);
        r->done = true;
    }
}

/* Its blocks stay in their regions; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    if (sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, c->ptr))
        return false;
    if (!SM_FN(next_needs_lock))
        return SM_NEXT_FN(move)(c, n);
    struct SM_FN(cs_pass_query) q = { c, n, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_pass_move), &q);
    return q.answer;
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
    /* A shrink keeps at least the class size of its new size (usable_of says no more): a sized
     * free of the block is trusted by a thread cache above to hold its size's class
     * (layers/addon/thread_cache.h). Shrunk to 5000 bytes, a block of 100000 went to the 5120 B
     * list on free_sized(p, 5000) and was handed out for malloc(5100). Without the classes (the
     * sizeclass slot), the smallest size this layer serves, above every class. */
    size_t floor = (size_t)(SM_SIZE_MIN);
#ifdef SM_SIZECLASS
    if (n < floor && n <= (size_t)SM_SIZECLASS_FN(max_size))
        floor = SM_SIZECLASS_FN(class_to_size)(SM_SIZECLASS_FN(size_to_class)(n));
#endif
    if (n < floor)
        n = floor;
    struct SM_FN(cs_resize) r = { c->ptr, SM_FN(block_size)(n), false, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_resize), &r);
    if (r.note)
        sm_release_note();
    return r.done;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

#include "tlsf_glk/release.h"

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

/* Counted by walking the spans under the lock: no counter on the request paths. A live block's
 * in_use is what getmeta calls usable; the spans are the next layer's chunks, held. */
SM_INLINE void SM_FN(cs_stats)(void *arg)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    for (struct SM_FN(span) *sp = SM_FN(obj).spans; sp; sp = sp->next) {
        l->held += sp->bytes;
        l->blocks += sp->chunks;
        for (struct SM_FN(block) *b = SM_FN(first_block)(sp); SM_FN(bsize)(b); b = SM_FN(bnext)(b)) {
            if (b->head & SM_TLSF_FREE)
                l->dirty += SM_FN(bsize)(b);
            else if (!(b->head & SM_TLSF_BUSY))
                l->in_use += SM_FN(bsize)(b) - SM_TLSF_HDR;
        }
    }
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_stats), sm_stats_layer(s, SM_LAYER_NAME));
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

SM_FORK_HOOKS_ONE_LOCK(&SM_FN(obj).lock)

#include "tlsf_glk/check.h"
#undef SM_TLSF_GLK_PARTS

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
#define SM_LAYER_OFFERS SM_CAP_MOVE
#include "../../core/layer_end.h"
