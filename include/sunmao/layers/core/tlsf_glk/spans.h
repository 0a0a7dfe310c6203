/* tlsf_glk/spans.h: spans and chunks from the next layer. grow asks SM_NEXT for a chunk (at least
 * SM_OPT_REGION_SIZE), registers its pages in the page map and merges it into the span it extends,
 * if any, so blocks coalesce across chunk boundaries; give_chunk unmaps a chunk and gives it back;
 * return_span gives back the chunks of an empty span. live_block validates a free's pointer in O(1)
 * against both physical neighbours. A part of tlsf_glk.h; defines the page map's node allocator,
 * L_span_of, L_give_chunk, L_grow, L_return_span and L_live_block. Included alone, as
 * tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_TLSF_GLK_PARTS
#include "../tlsf_glk.h"
#else

/* Page-map nodes: zero-filled, from the metadata route, counted in map_nodes (core/pagemap.h). */
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

#endif /* SM_TLSF_GLK_PARTS */
