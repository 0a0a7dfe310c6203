/* segfit_lf: lock-free segregated fit (Mortise paper, Table 2; the large-block layer of wfslab,
 * which hands slab_wf its 64 KiB-aligned slabs). segfit_lk's algorithm with no lock anywhere.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sizeclass (required: the classes), err (required),
 * size_handle (requests outside it go down). No sync slot: lock-free by construction.
 * Options:
 *   SM_OPT_MIN_BLOCK   block granule, a power of two >= 4096 (default 4096)
 *   SM_OPT_CHUNK_SIZE  a power of two: bytes a class takes from the next layer at a time, aligned
 *                      to their size (default 4 MiB)
 *   SM_OPT_DECAY_MS    a free block idle this long is purged by L_release (default 1000)
 * Properties: thread-safe; min_align SM_OPT_MIN_BLOCK; zeroed 0.
 * Capabilities: STABLE up to half a chunk (class blocks are never given back, so never unmapped);
 * MOVE where the next layer has it (a direct block moves with its word; a class block does not).
 *
 * A request gets a block of its class's size (rounded up to the granule): popped from its class's
 * free stack (core/tagged_stack.h: a Treiber stack with a 16-byte compare-and-swap and an ABA tag),
 * else carved from the class's region {cur, end}, advanced by one 16-byte compare-and-swap; a
 * thread that finds the region used up installs a new chunk the same way (a loser gives its chunk
 * back). Blocks are carved at multiples of their size from chunk-aligned chunks, so a power-of-two
 * class is aligned to its size. Requests above the largest class or half a chunk get a chunk of
 * their own (direct), given back to the next layer when freed. Free memory stays with its class;
 * release purges free blocks but their first granule, which holds the stack's link: all of them
 * (ALL), or those a previous pass found free already (DECAYED: each pass takes a stack whole,
 * marks its blocks aged, purges those aged before; allocations meanwhile carve or wait a pass).
 * Metadata: a page map (core/pagemap.h) whose nodes are installed by compare-and-swap holds at
 * each block's first granule its size and state (live, free; direct); the other granules of a
 * class chunk read INNER. A free claims its block by compare-and-swap of that word (live -> free,
 * or direct -> 0), so of two racing frees one is reported.
 *
 * Invariants: a block's word is written by who holds the block (carve, pop) or by the free that
 * claimed it; a stack holds only free blocks of its class; memory of class chunks stays mapped
 * (a pop may read the link of a block another thread took: tagged_stack.h). Progress: alloc and
 * free are lock-free (a retry means another thread's step succeeded), the next layer aside.
 * Fork: nothing to lock; a child may lose a block that a vanished thread was between steps on.
 * @model: name=segfit_lf kind=core slot sizeclass slot err range
 * @model: key min_block size key chunk_size size key decay_ms int
 * @check: SM_LAYER=t <sunmao/policies/sizeclass/log2b.h> SM_SIZECLASS=log2b <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <stdint.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"
#include "../../core/tagged_stack.h"

#ifndef SM_LAYER
#error "segfit_lf: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "segfit_lf: define SM_NEXT (the layer below) before including"
#endif
#ifdef SM_SYNC
#error "segfit_lf: lock-free by construction, it has no sync slot; undefine SM_SYNC"
#endif
#ifndef SM_SIZECLASS
#error "segfit_lf: policy slot 'sizeclass' is empty (SM_SIZECLASS = log2b|tc|...: its classes)"
#endif
#ifndef SM_ERR
#error "segfit_lf: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

#ifndef SM_OPT_MIN_BLOCK
#define SM_OPT_MIN_BLOCK 4096
#endif
#ifndef SM_OPT_CHUNK_SIZE
#define SM_OPT_CHUNK_SIZE ((size_t)4 << 20)
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
_Static_assert((SM_OPT_DECAY_MS) >= 1, "segfit_lf: SM_OPT_DECAY_MS must be at least 1 ms");
_Static_assert((SM_OPT_MIN_BLOCK) >= 4096 && ((SM_OPT_MIN_BLOCK) & ((SM_OPT_MIN_BLOCK) - 1)) == 0,
               "segfit_lf: SM_OPT_MIN_BLOCK must be a power of two >= 4096 (its low bits hold a block's state)");
_Static_assert((SM_OPT_CHUNK_SIZE) >= 2 * (SM_OPT_MIN_BLOCK) && ((SM_OPT_CHUNK_SIZE) & ((SM_OPT_CHUNK_SIZE) - 1)) == 0,
               "segfit_lf: SM_OPT_CHUNK_SIZE must be a power of two >= 2 x SM_OPT_MIN_BLOCK");

enum {
    SM_FN(shift) = __builtin_ctzll(SM_OPT_MIN_BLOCK),
    SM_FN(classes) = SM_SIZECLASS_FN(count),
    SM_FN(thread_safe) = 1,
    SM_FN(min_align) = SM_OPT_MIN_BLOCK,
    SM_FN(zeroed) = 0,
};
enum { SM_FN(stable_max) = (SM_OPT_CHUNK_SIZE) / 2 };
/* A block's map word: its size (a multiple of the granule) | state bits. */
#define SM_SEGFIT_LIVE   1u
#define SM_SEGFIT_FREE   2u
#define SM_SEGFIT_STATE  3u
#define SM_SEGFIT_INNER  4u /* a granule of a class chunk where no block starts */
#define SM_SEGFIT_DIRECT 8u /* a chunk of its own: back to the next layer when freed */
#define SM_SEGFIT_AGED   16u /* free, seen so by a release pass */
#define SM_SEGFIT_PURGED 32u /* free, its pages past the first granule purged */
#define SM_SEGFIT_BITS   63u

static struct {
    sm_pagemap_t map;
    void *spare_node;                 /* a map node that lost an install race, for the next one */
    size_t map_nodes, chunks, carved; /* atomic counters; carved: bytes of class blocks ever carved */
    struct {
        SM_CACHE_ALIGNED sm_tstack_t free; /* free blocks of the class */
        sm_pair_t region;                  /* {cur, end}: where the next block is carved */
    } cls[SM_FN(classes)];
} SM_FN(obj);

SM_PAGEMAP_SHARED_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).spare_node, SM_FN(obj).map_nodes)

/* The decay in force: SM_OPT_DECAY_MS, or dirty_decay_ms (core/conf.h), read once here. */
static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    return SM_NEXT_FN(create)();
}

/* The word of the granule holding p: 0 if p is in no chunk of ours; INNER if no block starts
 * there (an unaligned p inside a class chunk reads so too); else the block's size and state. */
SM_INLINE uintptr_t SM_FN(word)(const void *p)
{
    uintptr_t w = sm_pagemap_get(&SM_FN(obj).map, SM_FN(shift), p);
    return w && !sm_ptr_aligned(p, SM_OPT_MIN_BLOCK) ? SM_SEGFIT_INNER : w;
}

SM_INLINE bool SM_FN(set_words)(void *p, size_t bytes, uintptr_t w)
{
    return sm_pagemap_set_shared(&SM_FN(obj).map, SM_FN(shift), p, bytes, w, SM_FN(map_node_alloc),
                                 SM_FN(map_node_lost));
}

/* Claims p's word: from `from` to `to` if nobody changed it (its node exists: p is ours). */
SM_INLINE bool SM_FN(claim)(void *p, uintptr_t from, uintptr_t to)
{
    uintptr_t *slot = sm_pagemap_slot(&SM_FN(obj).map, SM_FN(shift), p);
    return slot && __atomic_compare_exchange_n(slot, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* A block size a class chunk holds at least two of; larger ones are direct. */
SM_INLINE size_t SM_FN(block_size)(unsigned cls)
{
    return sm_align_up(SM_SIZECLASS_FN(class_to_size)(cls), SM_OPT_MIN_BLOCK);
}

/* The class serving `size` bytes aligned to `align` (a power of two), or classes for a direct
 * block: the smallest class at least that large whose block size is a multiple of the alignment. */
SM_INLINE unsigned SM_FN(class_for)(size_t size, size_t align)
{
    if (size > (size_t)SM_SIZECLASS_FN(max_size) || size > (SM_OPT_CHUNK_SIZE) / 2)
        return SM_FN(classes);
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(size);
    while (cls < SM_FN(classes) && (SM_FN(block_size)(cls) & (align - 1)))
        cls++;
    return cls < SM_FN(classes) && SM_FN(block_size)(cls) <= (SM_OPT_CHUNK_SIZE) / 2 ? cls : SM_FN(classes);
}

/* The class of a class block of `size` bytes (its word's size): an aligned request's class may
 * be a few steps above size_to_class. */
SM_INLINE unsigned SM_FN(class_of)(size_t size)
{
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(size);
    while (SM_FN(block_size)(cls) != size)
        cls++;
    return cls;
}

SM_SLOWPATH void SM_FN(unchunk)(char *base, size_t bytes)
{
    SM_FN(set_words)(base, bytes, 0);
    sm_mctx_t f = sm_mctx_block(base, bytes, SM_F_SIZED);
    SM_NEXT_FN(free)(&f);
}

/* A chunk of `bytes` aligned to `align` from the next layer, mapped: every granule INNER (a class
 * chunk) or its first granule `word` (a direct block). */
SM_SLOWPATH char *SM_FN(chunk)(size_t bytes, size_t align, uintptr_t word)
{
    sm_mctx_t r = sm_mctx_alloc(bytes, align, 0);
    char *base = (char *)SM_NEXT_FN(alloc)(&r);
    if (!base)
        return NULL;
    if (!sm_ptr_aligned(base, align) ||
        !SM_FN(set_words)(base, word == SM_SEGFIT_INNER ? bytes : (SM_OPT_MIN_BLOCK), word)) {
        SM_FN(unchunk)(base, bytes); /* nodes made before a failure stay (never freed) */
        return NULL;
    }
    __atomic_add_fetch(&SM_FN(obj).chunks, 1, __ATOMIC_RELAXED);
    sm_release_note(); /* from now on frees may leave memory to purge: the release clock runs */
    return base;
}

/* A new block of class `cls` from its region; a thread that finds the region used up installs a
 * chunk, and one that loses that race gives its chunk back and carves from the winner's. */
SM_SLOWPATH char *SM_FN(carve)(unsigned cls)
{
    sm_pair_t *region = &SM_FN(obj).cls[cls].region;
    size_t size = SM_FN(block_size)(cls);
    sm_pair_t r = sm_pair_peek(region);
    for (;;) {
        char *block = (char *)r.lo;
        if (r.hi - r.lo >= size) {
            if (!sm_pair_cas(region, &r, r.lo + size, r.hi))
                continue;
        } else {
            char *base = SM_FN(chunk)(SM_OPT_CHUNK_SIZE, SM_OPT_CHUNK_SIZE, SM_SEGFIT_INNER);
            if (!base)
                return NULL;
            if (!sm_pair_cas(region, &r, (uintptr_t)base + size, (uintptr_t)base + (SM_OPT_CHUNK_SIZE))) {
                SM_FN(unchunk)(base, SM_OPT_CHUNK_SIZE);
                continue; /* the old region's tail, under a block, is left */
            }
            block = base;
        }
        __atomic_add_fetch(&SM_FN(obj).carved, size, __ATOMIC_RELAXED);
        return block;
    }
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (!SM_FN(serves)(c))
        return SM_NEXT_FN(alloc)(c);
    if (c->size > PTRDIFF_MAX / 4 || c->align > (size_t)1 << 40) { /* no chunk could hold it */
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    size_t align = c->align > (SM_OPT_MIN_BLOCK) ? c->align : (SM_OPT_MIN_BLOCK);
    size_t size = sm_align_up(c->size ? c->size : 1, SM_OPT_MIN_BLOCK);
    unsigned cls = SM_FN(class_for)(size, align);
    char *block;
    if (cls < SM_FN(classes)) {
        size = SM_FN(block_size)(cls);
        block = (char *)sm_tstack_pop(&SM_FN(obj).cls[cls].free);
        if (!block)
            block = SM_FN(carve)(cls);
        if (block)
            SM_FN(set_words)(block, 1, size | SM_SEGFIT_LIVE); /* its node exists: one store */
    } else {
        block = SM_FN(chunk)(size, align, size | SM_SEGFIT_DIRECT | SM_SEGFIT_LIVE);
    }
    if (sm_unlikely(!block)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    return c->ptr = block;
}

SM_SLOWPATH SM_UNUSED void SM_FN(bad_free)(void *p, uintptr_t w, const char *why)
{
    bool twice = (w & SM_SEGFIT_STATE) == SM_SEGFIT_FREE;
    SM_ERR_FN(raise)(twice ? SM_ERR_DOUBLE_FREE : SM_ERR_INVALID_FREE, SM_LAYER_NAME, p, twice ? "block already freed" : why);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (!w) { /* in no chunk of ours: another layer's block, or nobody's */
        SM_NEXT_FN(free)(c);
        return;
    }
    size_t size = w & ~(uintptr_t)SM_SEGFIT_BITS;
    if ((w & SM_SEGFIT_STATE) != SM_SEGFIT_LIVE || ((c->flags & SM_F_SIZED) && c->size > size)) {
        SM_FN(bad_free)(c->ptr, w, w == SM_SEGFIT_INNER ? "pointer is not the start of a block" : "sized free larger than the block; ignored");
        return;
    }
    bool direct = (w & SM_SEGFIT_DIRECT) != 0;
    if (!SM_FN(claim)(c->ptr, w, direct ? 0 : (w & ~(uintptr_t)SM_SEGFIT_STATE) | SM_SEGFIT_FREE)) {
        SM_FN(bad_free)(c->ptr, SM_FN(word)(c->ptr), "block changed while being freed (freed twice?)");
        return;
    }
    if (direct) {
        sm_mctx_t d = sm_mctx_block(c->ptr, size, SM_F_SIZED);
        SM_NEXT_FN(free)(&d);
    } else {
        sm_tstack_push(&SM_FN(obj).cls[SM_FN(class_of)(size)].free, (sm_tnode_t *)c->ptr);
        sm_release_note();
    }
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (!w)
        return SM_NEXT_FN(getmeta)(c);
    if ((w & SM_SEGFIT_STATE) != SM_SEGFIT_LIVE)
        return false;
    c->usable = w & ~(uintptr_t)SM_SEGFIT_BITS;
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Within the block only: blocks are never split. */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (!w)
        return SM_NEXT_FN(resize)(c, n);
    return (w & SM_SEGFIT_STATE) == SM_SEGFIT_LIVE && n <= (w & ~(uintptr_t)SM_SEGFIT_BITS);
}

/* Capability MOVE: a direct block is the next layer's to move; its word goes with it (claimed
 * before the move, so a chunk the next layer makes of the old pages meanwhile is mapped afresh;
 * written at the new address after, where the granule allows: else the block is the next layer's
 * from then on, as a foreign block passes through). A class block stays (false: the caller copies). */
SM_SLOWPATH bool SM_FN(move_direct)(sm_mctx_t *c, size_t n, uintptr_t w)
{
    if (!SM_FN(claim)(c->ptr, w, 0))
        return false;
    sm_mctx_t m = sm_mctx_block(c->ptr, w & ~(uintptr_t)SM_SEGFIT_BITS, SM_F_SIZED);
    size_t want = n > SIZE_MAX / 2 ? n : sm_align_up(n ? n : 1, SM_OPT_MIN_BLOCK);
    if (!SM_NEXT_FN(move)(&m, want)) {
        SM_FN(set_words)(c->ptr, 1, w); /* its node exists: one store */
        return false;
    }
    if (sm_ptr_aligned(m.ptr, SM_OPT_MIN_BLOCK))
        (void)SM_FN(set_words)(m.ptr, SM_OPT_MIN_BLOCK, want | SM_SEGFIT_DIRECT | SM_SEGFIT_LIVE);
    c->ptr = m.ptr;
    return true;
}
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    uintptr_t w = SM_FN(word)(c->ptr);
    if (!w)
        return SM_NEXT_FN(move)(c, n);
    return (w & SM_SEGFIT_STATE) == SM_SEGFIT_LIVE && (w & SM_SEGFIT_DIRECT) && SM_FN(move_direct)(c, n, w);
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* Each class's stack is taken whole (allocations meanwhile carve), its blocks purged but the
 * granule holding the link (ALL: every one; DECAYED: those aged by an earlier pass, the others
 * aged now), and put back in one push. The blocks' words are the pass's alone meanwhile. */
SM_INLINE void SM_FN(release)(sm_release_t *r)
{
    bool pending = false;
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        size_t size = SM_FN(block_size)(i);
        sm_tnode_t *first = sm_tstack_take_all(&SM_FN(obj).cls[i].free), *last = first;
        for (sm_tnode_t *b = first; b; last = b, b = b->next) {
            uintptr_t w = SM_FN(word)(b);
            if (w & SM_SEGFIT_PURGED)
                continue;
            /* dirty_decay_ms:-1: aged, never purged on time */
            if (r->how != SM_RELEASE_ALL && (!(w & SM_SEGFIT_AGED) || SM_FN(decay_ms) == SM_CONF_DECAY_NEVER)) {
                SM_FN(set_words)(b, 1, w | SM_SEGFIT_AGED);
                pending = true;
                continue;
            }
            sm_mctx_t p = sm_mctx_block((char *)b + (SM_OPT_MIN_BLOCK), size - (SM_OPT_MIN_BLOCK), SM_F_ZERO);
            if (size > (SM_OPT_MIN_BLOCK) && SM_NEXT_FN(purge)(&p))
                r->released += p.size;
            SM_FN(set_words)(b, 1, w | SM_SEGFIT_AGED | SM_SEGFIT_PURGED);
        }
        if (first)
            sm_tstack_push_chain(&SM_FN(obj).cls[i].free, first, last);
    }
    if (pending)
        sm_release_due(r, r->now_ms + SM_FN(decay_ms));
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }
SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#define SM_LAYER_OFFERS (SM_CAP_STABLE | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAP_STABLE | (SM_CAPS(SM_NEXT) & SM_CAP_MOVE))

/* Counted from the map at read time: no counter on the lock-free paths, and the words are the
 * truth those paths keep (a block is live exactly while its word says so). Class chunks are held
 * from their first granule's word (never 0 while the chunk is ours), direct blocks from theirs. */
SM_INLINE void SM_FN(stats_word)(void *arg, uintptr_t at, uintptr_t w)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    size_t size = w & ~(uintptr_t)SM_SEGFIT_BITS;
    if ((w & SM_SEGFIT_STATE) == SM_SEGFIT_LIVE)
        l->in_use += size;
    else if ((w & SM_SEGFIT_STATE) == SM_SEGFIT_FREE)
        l->dirty += w & SM_SEGFIT_PURGED ? (SM_OPT_MIN_BLOCK) : size;
    if (w & SM_SEGFIT_DIRECT)
        l->held += size, l->blocks++;
    else if (at % (SM_OPT_CHUNK_SIZE) == 0)
        l->held += SM_OPT_CHUNK_SIZE, l->blocks++;
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    sm_pagemap_each(&SM_FN(obj).map, SM_FN(shift), SM_FN(stats_word), l);
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

#undef SM_SEGFIT_LIVE
#undef SM_SEGFIT_FREE
#undef SM_SEGFIT_STATE
#undef SM_SEGFIT_INNER
#undef SM_SEGFIT_DIRECT
#undef SM_SEGFIT_AGED
#undef SM_SEGFIT_PURGED
#undef SM_SEGFIT_BITS
#undef SM_OPT_MIN_BLOCK
#undef SM_OPT_CHUNK_SIZE
#undef SM_OPT_DECAY_MS

#include "../../core/layer_end.h"
