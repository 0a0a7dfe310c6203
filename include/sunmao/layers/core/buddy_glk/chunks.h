/* buddy_glk/chunks.h: chunks from and back to the next layer, and the free lists. Each chunk's
 * descriptor (from the metadata route) holds a state byte and a list link per min block, found
 * through a two-level page map at chunk granularity; a free block's pages are never written.
 * A part of buddy_glk.h. Included alone, as tools/check-headers.sh does, it instantiates the whole
 * layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_BUDDY_GLK_PARTS
#include "../buddy_glk.h"
#else

SM_INLINE struct SM_FN(chunk) *SM_FN(chunk_of)(const void *p)
{
    return (struct SM_FN(chunk) *)sm_pagemap2_get(SM_FN(obj).map, SM_FN(max_order), p);
}

/* Puts the block at offset off of chunk ch on the free list of its order; stamp: 0 (dirty) or
 * SM_BUDDY_PURGED. Caller holds the lock. */
SM_INLINE void SM_FN(push)(unsigned order, struct SM_FN(chunk) *ch, size_t off, uint64_t stamp)
{
    struct SM_FN(link) *b = &ch->links[off >> SM_FN(min_order)], **head = &SM_FN(obj).free[order - SM_FN(min_order)];
    b->block = ch->base + off;
    b->stamp = stamp;
    b->prev = NULL;
    b->next = *head;
    if (*head)
        (*head)->prev = b;
    *head = b;
    SM_FN(obj).nonempty |= SM_BUDDY_BIT(order);
}

SM_INLINE void SM_FN(unlink)(unsigned order, struct SM_FN(chunk) *ch, size_t off)
{
    struct SM_FN(link) *b = &ch->links[off >> SM_FN(min_order)], **head = &SM_FN(obj).free[order - SM_FN(min_order)];
    if (b->prev)
        b->prev->next = b->next;
    else
        *head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    if (!*head)
        SM_FN(obj).nonempty &= ~SM_BUDDY_BIT(order);
}

/* Page-map leaves: zero-filled, from the metadata route, counted in map_nodes (core/pagemap.h). */
SM_PAGEMAP_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).map_nodes)

/* Adds one entirely free chunk to the heap. Caller holds the lock: the next layer is called under it
 * so two threads that miss at once do not both take a chunk. */
SM_SLOWPATH bool SM_FN(grow)(void)
{
    sm_mctx_t r = sm_mctx_alloc(SM_OPT_CHUNK_SIZE, SM_OPT_CHUNK_SIZE, 0);
    char *base = (char *)SM_NEXT_FN(alloc)(&r);
    if (!base)
        return false;
    sm_mctx_t d = sm_mctx_alloc(sizeof(struct SM_FN(chunk)), SM_MIN_ALIGN, 0);
    struct SM_FN(chunk) *ch = (struct SM_FN(chunk) *)SM_FN(meta_alloc)(&d);
    /* A misaligned chunk would break every buddy computation: refuse it rather than trust it. */
    if (!ch || !sm_ptr_aligned(base, SM_OPT_CHUNK_SIZE) ||
        !sm_pagemap2_set(SM_FN(obj).map, SM_FN(max_order), base, SM_OPT_CHUNK_SIZE, (uintptr_t)ch,
                        SM_FN(map_node_alloc))) {
        if (ch) {
            sm_mctx_t f = sm_mctx_block(ch, sizeof *ch, SM_F_SIZED);
            SM_FN(meta_free)(&f);
        }
        sm_mctx_t f = sm_mctx_block(base, SM_OPT_CHUNK_SIZE, SM_F_SIZED);
        SM_NEXT_FN(free)(&f);
        return false;
    }
    memset(ch->state, 0, sizeof ch->state);
    ch->base = base;
    ch->prev = NULL;
    ch->next = SM_FN(obj).chunks;
    if (ch->next)
        ch->next->prev = ch;
    SM_FN(obj).chunks = ch;
    SM_FN(obj).chunk_count++;
    ch->state[0] = (uint8_t)(SM_BUDDY_FREE | SM_FN(max_order));
    SM_FN(push)(SM_FN(max_order), ch, 0, SM_BUDDY_PURGED); /* fresh from the next layer */
    return true;
}

/* Returns an entirely free chunk (not on any free list) and its descriptor. Caller holds the lock. */
SM_SLOWPATH void SM_FN(release_chunk)(struct SM_FN(chunk) *ch)
{
    sm_pagemap2_set(SM_FN(obj).map, SM_FN(max_order), ch->base, SM_OPT_CHUNK_SIZE, 0, SM_FN(map_node_alloc));
    if (ch->prev)
        ch->prev->next = ch->next;
    else
        SM_FN(obj).chunks = ch->next;
    if (ch->next)
        ch->next->prev = ch->prev;
    SM_FN(obj).chunk_count--;
    sm_mctx_t f = sm_mctx_block(ch->base, SM_OPT_CHUNK_SIZE, SM_F_SIZED);
    SM_NEXT_FN(free)(&f);
    f = sm_mctx_block(ch, sizeof *ch, SM_F_SIZED);
    SM_FN(meta_free)(&f);
}

#endif
