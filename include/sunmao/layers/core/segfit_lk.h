/* segfit_lk: segregated fit with one lock per size class (Mortise paper, Table 2). A core layer for
 * page-sized and larger blocks carved from chunks of the next layer; the lock-based baseline of
 * the lock-free segfit_lf.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required: one lock per class, and one for the map),
 * sizeclass (required: the classes), err (required), size_handle (requests outside it go down).
 * Options:
 *   SM_OPT_MIN_BLOCK   block granule, a power of two >= 4096 (default 4096)
 *   SM_OPT_CHUNK_SIZE  a power of two: bytes a class takes from the next layer at a time, aligned
 *                      to their size (default 4 MiB)
 * Properties: thread_safe from the sync policy; min_align SM_OPT_MIN_BLOCK; zeroed 0.
 * Capabilities: MOVE where the next layer has it (a direct block moves with its word; a class
 * block does not).
 *
 * Each class has a lock, a LIFO free list and a region it carves new blocks from. A request gets a
 * block of its class's size (rounded up to the granule): its class's free list, else carved from
 * the class's region, else the class takes a new chunk. Freed blocks go back to their class's list;
 * blocks are never split or merged, so a class holds at most its peak of live blocks, and
 * fragmentation between classes cannot grow (the version that split large free blocks for smaller
 * requests, and could not merge them back without holding two classes' locks, grew to 6,755 chunks
 * for 16 live blocks: docs/layers.md). Blocks of a class are carved at multiples of its size from
 * chunks aligned to the chunk size, so an aligned request takes the smallest class whose size is a
 * multiple of the alignment. Requests above the largest class, or above half a chunk, get a chunk of
 * their own (direct), given back to the next layer when freed. Free memory stays with its class
 * (no release): the layer is the lock-based baseline, not an allocator of its own.
 * Metadata: a page map keyed by the granule holds, at each block's first granule, its size and
 * state (live, free; direct); the other granules of a class chunk read INNER, so an interior
 * pointer is recognised. No header in a block: a 64 KiB block stays 64 KiB-aligned for a slab above.
 *
 * Invariants: a block's word is written by who holds the block, or by its free under its class's
 * lock, which claims it (a racing second free is reported); map nodes are made when a chunk arrives,
 * under the map lock, so later writes are single stores. Lock order: a class lock, then the map lock
 * (a class takes a chunk under its own lock); the next layer is called under a class lock only to
 * take a chunk. Fork: the map lock, the class locks in order, then the next layer.
 * @model: name=segfit_lk kind=core slot sync slot sizeclass slot err range
 * @model: key min_block size key chunk_size size
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/log2b.h> SM_SIZECLASS=log2b <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <stdint.h>
#include <string.h>
#include "../../core/bits.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"

#ifndef SM_LAYER
#error "segfit_lk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "segfit_lk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "segfit_lk: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. spinlock)"
#endif
#ifndef SM_SIZECLASS
#error "segfit_lk: policy slot 'sizeclass' is empty (SM_SIZECLASS = log2b|tc|...: its classes)"
#endif
#ifndef SM_ERR
#error "segfit_lk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

#ifndef SM_OPT_MIN_BLOCK
#define SM_OPT_MIN_BLOCK 4096
#endif
#ifndef SM_OPT_CHUNK_SIZE
#define SM_OPT_CHUNK_SIZE ((size_t)4 << 20)
#endif
_Static_assert((SM_OPT_MIN_BLOCK) >= 4096 && ((SM_OPT_MIN_BLOCK) & ((SM_OPT_MIN_BLOCK) - 1)) == 0,
               "segfit_lk: SM_OPT_MIN_BLOCK must be a power of two >= 4096 (its low bits hold a block's state)");
_Static_assert((SM_OPT_CHUNK_SIZE) >= 2 * (SM_OPT_MIN_BLOCK) && ((SM_OPT_CHUNK_SIZE) & ((SM_OPT_CHUNK_SIZE) - 1)) == 0,
               "segfit_lk: SM_OPT_CHUNK_SIZE must be a power of two >= 2 x SM_OPT_MIN_BLOCK");

enum {
    SM_FN(shift) = __builtin_ctzll(SM_OPT_MIN_BLOCK),
    SM_FN(classes) = SM_SIZECLASS_FN(count),
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe),
    SM_FN(min_align) = SM_OPT_MIN_BLOCK,
    SM_FN(zeroed) = 0,
};
/* A block's map word: its size (a multiple of the granule) | state bits. */
#define SM_SEGFIT_LIVE   1u
#define SM_SEGFIT_FREE   2u
#define SM_SEGFIT_STATE  3u
#define SM_SEGFIT_INNER  4u /* a granule of a class chunk where no block starts */
#define SM_SEGFIT_DIRECT 8u /* a chunk of its own: back to the next layer when freed */
#define SM_SEGFIT_BITS   15u

struct SM_FN(free_block) { struct SM_FN(free_block) *next; };

static struct {
    SM_SYNC_FN(t) map_lock; /* map nodes, chunk counts */
    sm_pagemap_t map;
    size_t map_nodes, chunks, carved; /* carved: bytes of class blocks ever carved (map lock or atomic) */
    struct {
        SM_CACHE_ALIGNED SM_SYNC_FN(t) lock;
        struct SM_FN(free_block) *head;
        size_t count;
        char *cur, *end; /* the class's region */
    } cls[SM_FN(classes)];
} SM_FN(obj) = { .map_lock = SM_SYNC_INIT };

SM_PAGEMAP_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).map_nodes)

SM_INLINE int SM_FN(create)(void)
{
    for (unsigned i = 0; i < SM_FN(classes); i++)
        SM_FN(obj).cls[i].lock = (SM_SYNC_FN(t))SM_SYNC_INIT;
    return SM_NEXT_FN(create)();
}

/* The word of the granule holding p: 0 if p is in no chunk of ours; INNER if no block starts
 * there (an unaligned p inside a class chunk reads so too); else the block's size and state. */
SM_INLINE uintptr_t SM_FN(word)(const void *p)
{
    uintptr_t w = sm_pagemap_get(&SM_FN(obj).map, SM_FN(shift), p);
    return w && !sm_ptr_aligned(p, SM_OPT_MIN_BLOCK) ? SM_SEGFIT_INNER : w;
}

/* Writes p's word; its node exists (made when p's chunk arrived), so this is one store. */
SM_INLINE void SM_FN(set_word)(void *p, uintptr_t w)
{
    sm_pagemap_set(&SM_FN(obj).map, SM_FN(shift), p, 1, w, SM_FN(map_node_alloc));
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

/* Sections (the sync policy's atomic_exec may run them on another thread: no errno, no TLS). */

/* Map entries for a chunk that arrived: every granule INNER (a section of the map lock). */
struct SM_FN(cs_map) { char *base; size_t bytes; uintptr_t word; bool ok; };
SM_INLINE void SM_FN(cs_map)(void *arg)
{
    struct SM_FN(cs_map) *m = (struct SM_FN(cs_map) *)arg;
    m->ok = sm_pagemap_set(&SM_FN(obj).map, SM_FN(shift), m->base, m->bytes, m->word, SM_FN(map_node_alloc));
    if (m->ok)
        SM_FN(obj).chunks++;
}

/* A chunk of `bytes` aligned to `align` from the next layer, its granules mapped to `word`. */
SM_SLOWPATH char *SM_FN(chunk)(size_t bytes, size_t align, uintptr_t word)
{
    sm_mctx_t r = sm_mctx_alloc(bytes, align, 0);
    char *base = (char *)SM_NEXT_FN(alloc)(&r);
    if (!base)
        return NULL;
    struct SM_FN(cs_map) m = { base, word == SM_SEGFIT_INNER ? bytes : (SM_OPT_MIN_BLOCK), word, false };
    if (sm_ptr_aligned(base, align))
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).map_lock, SM_FN(cs_map), &m);
    if (!m.ok) { /* nodes made before a failure stay (never freed); their words still read 0 */
        sm_mctx_t f = sm_mctx_block(base, bytes, SM_F_SIZED);
        SM_NEXT_FN(free)(&f);
        return NULL;
    }
    return base;
}

/* A block of class `cls`, held by the caller: its list's head, else carved (a section of the
 * class's lock; it takes a chunk from the next layer when the region is used up). */
struct SM_FN(cs_take) { unsigned cls; char *block; };
SM_INLINE void SM_FN(cs_take)(void *arg)
{
    struct SM_FN(cs_take) *t = (struct SM_FN(cs_take) *)arg;
    __typeof__(SM_FN(obj).cls[0]) *k = &SM_FN(obj).cls[t->cls];
    if (k->head) {
        t->block = (char *)k->head;
        k->head = k->head->next;
        k->count--;
        return;
    }
    size_t size = SM_FN(block_size)(t->cls);
    if ((size_t)(k->end - k->cur) < size) {
        char *base = SM_FN(chunk)(SM_OPT_CHUNK_SIZE, SM_OPT_CHUNK_SIZE, SM_SEGFIT_INNER);
        if (!base)
            return;
        k->cur = base, k->end = base + (SM_OPT_CHUNK_SIZE); /* the old tail, under a block, is left */
    }
    t->block = k->cur;
    k->cur += size;
    __atomic_add_fetch(&SM_FN(obj).carved, size, __ATOMIC_RELAXED);
}

/* A free: claims the block (still live, as its word said) and lists it (a section). */
struct SM_FN(cs_free) { unsigned cls; struct SM_FN(free_block) *block; uintptr_t word; bool bad; };
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    __typeof__(SM_FN(obj).cls[0]) *k = &SM_FN(obj).cls[f->cls];
    f->bad = SM_FN(word)(f->block) != f->word;
    if (f->bad)
        return;
    SM_FN(set_word)(f->block, (f->word & ~(uintptr_t)SM_SEGFIT_STATE) | SM_SEGFIT_FREE);
    f->block->next = k->head;
    k->head = f->block;
    k->count++;
}

/* Clears a direct block's word once its free claimed it (a section of the map lock). */
SM_INLINE void SM_FN(cs_unmap)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    f->bad = SM_FN(word)(f->block) != f->word;
    if (!f->bad)
        SM_FN(set_word)(f->block, 0);
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
    struct SM_FN(cs_take) t = { SM_FN(class_for)(size, align), NULL };
    if (t.cls < SM_FN(classes)) {
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).cls[t.cls].lock, SM_FN(cs_take), &t);
        size = SM_FN(block_size)(t.cls);
    } else {
        t.block = SM_FN(chunk)(size, align, size | SM_SEGFIT_DIRECT | SM_SEGFIT_LIVE);
    }
    if (sm_unlikely(!t.block)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    if (t.cls < SM_FN(classes))
        SM_FN(set_word)(t.block, size | SM_SEGFIT_LIVE);
    return c->ptr = t.block;
}

SM_SLOWPATH void SM_FN(bad_free)(void *p, uintptr_t w, const char *why)
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
    struct SM_FN(cs_free) f = { 0, (struct SM_FN(free_block) *)c->ptr, w, false };
    if (w & SM_SEGFIT_DIRECT) {
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).map_lock, SM_FN(cs_unmap), &f);
        if (!f.bad) {
            sm_mctx_t d = sm_mctx_block(c->ptr, size, SM_F_SIZED);
            SM_NEXT_FN(free)(&d);
        }
    } else {
        f.cls = SM_SIZECLASS_FN(size_to_class)(size);
        while (SM_FN(block_size)(f.cls) != size) /* an aligned request's class: a few steps up */
            f.cls++;
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).cls[f.cls].lock, SM_FN(cs_free), &f);
    }
    if (sm_unlikely(f.bad))
        SM_FN(bad_free)(c->ptr, SM_FN(word)(c->ptr), "block changed while being freed (freed twice?)");
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

/* Capability MOVE: a direct block is the next layer's to move; its word goes with it (cleared
 * before the move, so a chunk the next layer makes of the old pages meanwhile is mapped afresh;
 * written at the new address after, where the granule allows: else the block is the next layer's
 * from then on, as a foreign block passes through). A class block stays (false: the caller copies). */
SM_SLOWPATH bool SM_FN(move_direct)(sm_mctx_t *c, size_t n, uintptr_t w)
{
    struct SM_FN(cs_free) f = { 0, (struct SM_FN(free_block) *)c->ptr, w, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).map_lock, SM_FN(cs_unmap), &f);
    if (f.bad)
        return false;
    sm_mctx_t m = sm_mctx_block(c->ptr, w & ~(uintptr_t)SM_SEGFIT_BITS, SM_F_SIZED);
    size_t want = n > SIZE_MAX / 2 ? n : sm_align_up(n ? n : 1, SM_OPT_MIN_BLOCK);
    if (!SM_NEXT_FN(move)(&m, want)) {
        SM_FN(set_word)(c->ptr, w); /* its node exists: one store */
        return false;
    }
    struct SM_FN(cs_map) r = { (char *)m.ptr, SM_OPT_MIN_BLOCK, want | SM_SEGFIT_DIRECT | SM_SEGFIT_LIVE, false };
    if (sm_ptr_aligned(m.ptr, SM_OPT_MIN_BLOCK))
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).map_lock, SM_FN(cs_map), &r);
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
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }
SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

SM_INLINE void SM_FN(fork_prepare)(void)
{
    for (unsigned i = 0; i < SM_FN(classes); i++)
        SM_SYNC_FN(fork_lock)(&SM_FN(obj).cls[i].lock);
    SM_SYNC_FN(fork_lock)(&SM_FN(obj).map_lock);
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    SM_SYNC_FN(fork_unlock)(&SM_FN(obj).map_lock);
    for (unsigned i = SM_FN(classes); i-- > 0;)
        SM_SYNC_FN(fork_unlock)(&SM_FN(obj).cls[i].lock);
    SM_NEXT_FN(fork_parent)();
}
SM_INLINE void SM_FN(fork_child)(void)
{
    SM_SYNC_FN(fork_reinit)(&SM_FN(obj).map_lock);
    for (unsigned i = 0; i < SM_FN(classes); i++)
        SM_SYNC_FN(fork_reinit)(&SM_FN(obj).cls[i].lock);
    SM_NEXT_FN(fork_child)();
}

/* Counted from the map at read time, as segfit_lf does: the words are what the request paths
 * keep anyway (a block is live exactly while its word says so), so they need no counter. Class
 * chunks are held from their first granule's word (never 0 while the chunk is ours). */
SM_INLINE void SM_FN(stats_word)(void *arg, uintptr_t at, uintptr_t w)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    size_t size = w & ~(uintptr_t)SM_SEGFIT_BITS;
    if ((w & SM_SEGFIT_STATE) == SM_SEGFIT_LIVE)
        l->in_use += size;
    else if ((w & SM_SEGFIT_STATE) == SM_SEGFIT_FREE)
        l->dirty += size;
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
#define SM_LAYER_OFFERS SM_CAP_MOVE
#define SM_LAYER_CAPS   (SM_CAPS(SM_NEXT) & SM_CAP_MOVE)

#undef SM_SEGFIT_LIVE
#undef SM_SEGFIT_FREE
#undef SM_SEGFIT_STATE
#undef SM_SEGFIT_INNER
#undef SM_SEGFIT_DIRECT
#undef SM_SEGFIT_BITS
#undef SM_OPT_MIN_BLOCK
#undef SM_OPT_CHUNK_SIZE

#include "../../core/layer_end.h"
