/* A sparse three-level radix map from address granules to one word each: O(1) block -> metadata
 * lookup (TCMalloc's page map, paper seed 001) without headers in front of user blocks.
 * Framework core data structure, used by layers that must recognise their own blocks.
 *
 * Covers 48-bit user addresses. The granule (1 << shift bytes, shift >= 12) is chosen per map.
 * Lookups take no lock (three dependent loads); updates are serialised by the owning layer's lock.
 * Interior nodes come from a caller-supplied allocator (normally the layer's metadata route, so
 * the map works on every OS layer, static pools included) and are never freed: the map is as large as the
 * address range the layer ever used, at 8 bytes per granule in 32 KiB nodes. */
#ifndef SUNMAO_CORE_PAGEMAP_H
#define SUNMAO_CORE_PAGEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "compiler.h"
#include "mctx.h"

#define SM_PAGEMAP_ADDR_BITS 48
#define SM_PAGEMAP_NODE_BITS 12
#define SM_PAGEMAP_NODE_BYTES ((size_t)sizeof(uintptr_t) << SM_PAGEMAP_NODE_BITS)

typedef struct sm_pagemap {
    uintptr_t **root[1u << SM_PAGEMAP_NODE_BITS];
} sm_pagemap_t;

/* Returns a zero-filled block of `bytes` (a node or a leaf), or NULL. */
typedef void *sm_pagemap_node_alloc_fn(size_t bytes);

/* In a layer template (core/layer.h): defines the node allocator of the layer's page maps,
 *     static void *L_map_node_alloc(size_t bytes)      (an sm_pagemap_node_alloc_fn)
 * A node comes from the layer's metadata route (core/meta_route.h: by default the OS layer at the
 * bottom), aligned to `align`, so a map works over every OS layer, static pools included; it is
 * cleared unless the layer that gave it reports fresh memory (sm_mctx_zeroed), and
 * `count`, an lvalue, counts the nodes held (never freed: see above). Called by sm_pagemap_set and
 * sm_pagemap2_set, under the lock that serialises the map's updates, which also guards `count`. */
#define SM_PAGEMAP_NODE_ALLOC(align, count)                                                        \
    static void *SM_FN(map_node_alloc)(size_t bytes)                                               \
    {                                                                                              \
        sm_mctx_t r_ = sm_mctx_alloc(bytes, (align), 0);                                           \
        void *p_ = sm_mctx_zeroed(&r_, SM_FN(meta_alloc)(&r_));                                    \
        if (p_)                                                                                    \
            (count)++;                                                                             \
        return p_;                                                                                 \
    }

/* The same for a map updated without a lock (sm_pagemap_set_shared): defines L_map_node_alloc
 * and L_map_node_lost, the latter keeping a node that lost an install race in `spare` (an lvalue
 * of type void *), still zero since nobody saw it, for the next install; a second one lost at the
 * same moment stays unused. `count` is updated atomically. */
#define SM_PAGEMAP_SHARED_NODE_ALLOC(align, spare, count)                                          \
    static void *SM_FN(map_node_alloc)(size_t bytes)                                               \
    {                                                                                              \
        void *n_ = __atomic_exchange_n(&(spare), NULL, __ATOMIC_ACQUIRE);                          \
        if (n_)                                                                                    \
            return n_;                                                                             \
        sm_mctx_t r_ = sm_mctx_alloc(bytes, (align), 0);                                           \
        n_ = sm_mctx_zeroed(&r_, SM_FN(meta_alloc)(&r_));                                          \
        if (n_)                                                                                    \
            __atomic_add_fetch(&(count), 1, __ATOMIC_RELAXED);                                     \
        return n_;                                                                                 \
    }                                                                                              \
    static void SM_FN(map_node_lost)(void *n_)                                                     \
    {                                                                                              \
        void *none_ = NULL;                                                                        \
        __atomic_compare_exchange_n(&(spare), &none_, n_, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED); \
    }

SM_INLINE unsigned sm_pagemap_root_bits(unsigned shift)
{
    return SM_PAGEMAP_ADDR_BITS - shift - 2 * SM_PAGEMAP_NODE_BITS;
}

/* The word for the granule holding addr; 0 where nothing was set. */
SM_INLINE uintptr_t sm_pagemap_get(const sm_pagemap_t *m, unsigned shift, const void *addr)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    if (sm_unlikely(g >> (SM_PAGEMAP_ADDR_BITS - shift)))
        return 0;
    uintptr_t **mid = __atomic_load_n(&m->root[g >> (2 * SM_PAGEMAP_NODE_BITS)], __ATOMIC_ACQUIRE);
    if (!mid)
        return 0;
    uintptr_t *leaf = __atomic_load_n(&mid[(g >> SM_PAGEMAP_NODE_BITS) & ((1u << SM_PAGEMAP_NODE_BITS) - 1)],
                                      __ATOMIC_ACQUIRE);
    if (!leaf)
        return 0;
    return __atomic_load_n(&leaf[g & ((1u << SM_PAGEMAP_NODE_BITS) - 1)], __ATOMIC_RELAXED);
}

/* The address of the word for the granule holding addr, for an owner that changes words by
 * compare-and-swap; NULL where no node exists (the word reads 0). */
SM_INLINE uintptr_t *sm_pagemap_slot(const sm_pagemap_t *m, unsigned shift, const void *addr)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    if (sm_unlikely(g >> (SM_PAGEMAP_ADDR_BITS - shift)))
        return NULL;
    uintptr_t **mid = __atomic_load_n(&m->root[g >> (2 * SM_PAGEMAP_NODE_BITS)], __ATOMIC_ACQUIRE);
    uintptr_t *leaf = mid ? __atomic_load_n(&mid[(g >> SM_PAGEMAP_NODE_BITS) & ((1u << SM_PAGEMAP_NODE_BITS) - 1)],
                                            __ATOMIC_ACQUIRE)
                          : NULL;
    return leaf ? &leaf[g & ((1u << SM_PAGEMAP_NODE_BITS) - 1)] : NULL;
}

/* Set the word of every granule in [addr, addr + len). Returns false (map unchanged for the
 * granules not yet reached) only if a node could not be allocated. Caller holds the layer's lock. */
static inline bool sm_pagemap_set(sm_pagemap_t *m, unsigned shift, const void *addr, size_t len, uintptr_t value,
                                  sm_pagemap_node_alloc_fn *node_alloc)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    uintptr_t end = ((uintptr_t)addr + len + ((uintptr_t)1 << shift) - 1) >> shift;
    const uintptr_t node_mask = (1u << SM_PAGEMAP_NODE_BITS) - 1;
    if (end > ((uintptr_t)1 << (SM_PAGEMAP_ADDR_BITS - shift)))
        return false;
    for (; g < end; g++) {
        uintptr_t ***slot = &m->root[g >> (2 * SM_PAGEMAP_NODE_BITS)];
        uintptr_t **mid = *slot;
        if (!mid) {
            if (value == 0)
                continue; /* clearing a granule that was never set */
            mid = (uintptr_t **)node_alloc(SM_PAGEMAP_NODE_BYTES);
            if (!mid)
                return false;
            __atomic_store_n(slot, mid, __ATOMIC_RELEASE);
        }
        uintptr_t **lslot = &mid[(g >> SM_PAGEMAP_NODE_BITS) & node_mask];
        uintptr_t *leaf = *lslot;
        if (!leaf) {
            if (value == 0)
                continue;
            leaf = (uintptr_t *)node_alloc(SM_PAGEMAP_NODE_BYTES);
            if (!leaf)
                return false;
            __atomic_store_n(lslot, leaf, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&leaf[g & node_mask], value, __ATOMIC_RELAXED);
    }
    return true;
}

/* A node of a map updated without a lock: installed by compare-and-swap; a thread that loses the
 * race hands its node to `lost` (which may keep it for the next call) and uses the winner's. */
static inline uintptr_t *sm_pagemap_node_shared(void **slot, sm_pagemap_node_alloc_fn *node_alloc, void (*lost)(void *))
{
    void *n = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (n)
        return (uintptr_t *)n;
    void *mine = node_alloc(SM_PAGEMAP_NODE_BYTES);
    if (!mine)
        return NULL;
    if (__atomic_compare_exchange_n(slot, &n, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return (uintptr_t *)mine;
    lost(mine);
    return (uintptr_t *)n;
}

/* As sm_pagemap_set, for a map whose owner takes no lock: the granules written must be the
 * caller's alone (a block it holds), nodes are installed by sm_pagemap_node_shared. */
static inline bool sm_pagemap_set_shared(sm_pagemap_t *m, unsigned shift, const void *addr, size_t len,
                                         uintptr_t value, sm_pagemap_node_alloc_fn *node_alloc, void (*lost)(void *))
{
    uintptr_t g = (uintptr_t)addr >> shift;
    uintptr_t end = ((uintptr_t)addr + len + ((uintptr_t)1 << shift) - 1) >> shift;
    const uintptr_t node_mask = (1u << SM_PAGEMAP_NODE_BITS) - 1;
    if (end > ((uintptr_t)1 << (SM_PAGEMAP_ADDR_BITS - shift)))
        return false;
    while (g < end) {
        uintptr_t **mid = (uintptr_t **)sm_pagemap_node_shared((void **)&m->root[g >> (2 * SM_PAGEMAP_NODE_BITS)],
                                                               node_alloc, lost);
        uintptr_t *leaf = mid ? sm_pagemap_node_shared((void **)&mid[(g >> SM_PAGEMAP_NODE_BITS) & node_mask],
                                                       node_alloc, lost)
                              : NULL;
        if (!leaf)
            return false;
        do
            __atomic_store_n(&leaf[g & node_mask], value, __ATOMIC_RELEASE);
        while (++g < end && (g & node_mask));
    }
    return true;
}

/* Calls fn(arg, granule address, word) for every granule whose word is not 0, in address order.
 * For statistics: a layer that keeps no count on its request paths derives its figures from its
 * map at read time. Reads as sm_pagemap_get does (no lock); a word changed meanwhile is seen old
 * or new. Slow: every leaf made is read whole (4096 words). */
static inline void sm_pagemap_each(const sm_pagemap_t *m, unsigned shift, void (*fn)(void *, uintptr_t, uintptr_t),
                                   void *arg)
{
    const uintptr_t n = (uintptr_t)1 << SM_PAGEMAP_NODE_BITS;
    unsigned rb = SM_PAGEMAP_ADDR_BITS - shift > 2 * SM_PAGEMAP_NODE_BITS ? sm_pagemap_root_bits(shift) : 0;
    for (uintptr_t r = 0; r < ((uintptr_t)1 << rb); r++) {
        uintptr_t **mid = __atomic_load_n(&m->root[r], __ATOMIC_ACQUIRE);
        for (uintptr_t i = 0; mid && i < n; i++) {
            uintptr_t *leaf = __atomic_load_n(&mid[i], __ATOMIC_ACQUIRE);
            for (uintptr_t j = 0; leaf && j < n; j++) {
                uintptr_t w = __atomic_load_n(&leaf[j], __ATOMIC_ACQUIRE);
                if (w)
                    fn(arg, ((r << 2 * SM_PAGEMAP_NODE_BITS) | (i << SM_PAGEMAP_NODE_BITS) | j) << shift, w);
            }
        }
    }
}

/* A two-level variant, for maps on the hottest paths: one dependent load less per lookup (a
 * thread cache's free waits on it; measured 1-1.5 ns of a 12-13 ns malloc+free pair). The root
 * has SM_PAGEMAP2_ROOT_LEN(shift) entries in the owner's static storage: 32 KiB for a 64 KiB
 * granule, more for finer ones (only the pages of it in use are ever touched, a page per 32 GiB
 * of address space at 64 KiB). Leaves hold 2^20 words (8 MiB, from node_alloc like the nodes
 * above): large enough that the next layers pass them on to the OS, whose fresh pages are zero
 * and stay untouched where no granule is set (a page of leaf per 32 MiB of address space at a
 * 64 KiB granule). Same rules as the three-level map otherwise: lock-free lookups, updates
 * serialised by the owner, nodes never freed. Declare the root as
 *     uintptr_t *root[SM_PAGEMAP2_ROOT_LEN(shift)];   (zero-initialised) */
#define SM_PAGEMAP2_LEAF_BITS        20
#define SM_PAGEMAP2_LEAF_BYTES       ((size_t)sizeof(uintptr_t) << SM_PAGEMAP2_LEAF_BITS)
#define SM_PAGEMAP2_ROOT_LEN(shift)  ((size_t)1 << (SM_PAGEMAP_ADDR_BITS - (shift) - SM_PAGEMAP2_LEAF_BITS))

/* The word for the granule holding addr; 0 where nothing was set. */
SM_INLINE uintptr_t sm_pagemap2_get(uintptr_t *const *root, unsigned shift, const void *addr)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    if (sm_unlikely(g >> (SM_PAGEMAP_ADDR_BITS - shift)))
        return 0;
    uintptr_t *leaf = __atomic_load_n(&root[g >> SM_PAGEMAP2_LEAF_BITS], __ATOMIC_ACQUIRE);
    if (!leaf)
        return 0;
    return __atomic_load_n(&leaf[g & (((uintptr_t)1 << SM_PAGEMAP2_LEAF_BITS) - 1)], __ATOMIC_RELAXED);
}

/* The word for the granule of addr modulo 2^48: for a caller that validates addr against the word
 * it finds (so an address at 2^48 or above, never mapped by the owner, cannot pass), which saves
 * the range test of sm_pagemap2_get on its hot path. */
SM_HOT uintptr_t sm_pagemap2_get_wrapped(uintptr_t *const *root, unsigned shift, const void *addr)
{
    uintptr_t g = ((uintptr_t)addr & (((uintptr_t)1 << SM_PAGEMAP_ADDR_BITS) - 1)) >> shift;
    uintptr_t *leaf = __atomic_load_n(&root[g >> SM_PAGEMAP2_LEAF_BITS], __ATOMIC_ACQUIRE);
    if (sm_unlikely(!leaf))
        return 0;
    return __atomic_load_n(&leaf[g & (((uintptr_t)1 << SM_PAGEMAP2_LEAF_BITS) - 1)], __ATOMIC_RELAXED);
}

/* A two-level map's window: the first leaf the map made and the address its range starts at
 * (2^(shift + 20) bytes, 64 GiB at a 64 KiB granule). A lookup inside the window reads the leaf
 * straight away: one load that depends on the address instead of two (root, then leaf). Programs
 * map their heap memory close together, so in practice every lookup is inside it; others take the
 * root. For a free's hit path, which waits on the class its lookup finds: a malloc+free pair cycling
 * 5 classes 8.96 -> 7.33 ns. Set once (sm_pagemap2_window_note), then read only. */
typedef struct {
    uintptr_t first; /* the leaf's first granule (address >> shift); UINTPTR_MAX / 2 until set, which
                      * no granule is within a leaf of */
    uintptr_t *leaf;
} sm_pagemap2_window_t;
#define SM_PAGEMAP2_WINDOW_INIT { .first = UINTPTR_MAX / 2, .leaf = NULL }

/* As sm_pagemap2_get_wrapped, through the window where addr is inside it. */
SM_HOT uintptr_t sm_pagemap2_get_windowed(uintptr_t *const *root, const sm_pagemap2_window_t *win, unsigned shift,
                                             const void *addr)
{
    /* Granules, not bytes: the index is the shifted address less a constant, and the range test a
     * compare with an immediate, one instruction fewer on a free's hit path than an offset in
     * bytes tested by a shift (tests/build/fastpath.golden). */
    uintptr_t g = ((uintptr_t)addr >> shift) - __atomic_load_n(&win->first, __ATOMIC_ACQUIRE);
    if (sm_likely(g < ((uintptr_t)1 << SM_PAGEMAP2_LEAF_BITS)))
        return __atomic_load_n(&win->leaf[g], __ATOMIC_RELAXED);
    /* The address passed through an empty asm: the compiler cannot reuse the shifted address here,
     * so the hit path keeps no copy of it (a call instead cost the hit path a stack frame). */
    __asm__("" : "+r"(addr));
    return sm_pagemap2_get_wrapped(root, shift, addr);
}

/* After a granule at addr was set: if the window is not set yet, it becomes addr's leaf. The leaf
 * is published before its first granule (release), so a reader that finds addr inside finds the leaf. Caller
 * holds the owner's lock. */
static inline void sm_pagemap2_window_note(sm_pagemap2_window_t *win, uintptr_t *const *root, unsigned shift,
                                           const void *addr)
{
    if (win->leaf)
        return;
    uintptr_t g = (uintptr_t)addr >> shift;
    uintptr_t *leaf = root[g >> SM_PAGEMAP2_LEAF_BITS];
    if (!leaf)
        return;
    __atomic_store_n(&win->leaf, leaf, __ATOMIC_RELAXED);
    __atomic_store_n(&win->first, (g >> SM_PAGEMAP2_LEAF_BITS) << SM_PAGEMAP2_LEAF_BITS, __ATOMIC_RELEASE);
}

/* Set the word of every granule in [addr, addr + len), as sm_pagemap_set. node_alloc is asked
 * for SM_PAGEMAP2_LEAF_BYTES. Caller holds the owner's lock. */
static inline bool sm_pagemap2_set(uintptr_t **root, unsigned shift, const void *addr, size_t len, uintptr_t value,
                                   sm_pagemap_node_alloc_fn *node_alloc)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    uintptr_t end = ((uintptr_t)addr + len + ((uintptr_t)1 << shift) - 1) >> shift;
    if (end > ((uintptr_t)1 << (SM_PAGEMAP_ADDR_BITS - shift)))
        return false;
    for (; g < end; g++) {
        uintptr_t **slot = &root[g >> SM_PAGEMAP2_LEAF_BITS];
        uintptr_t *leaf = *slot;
        if (!leaf) {
            if (value == 0)
                continue; /* clearing a granule that was never set */
            leaf = (uintptr_t *)node_alloc(SM_PAGEMAP2_LEAF_BYTES);
            if (!leaf)
                return false;
            __atomic_store_n(slot, leaf, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&leaf[g & (((uintptr_t)1 << SM_PAGEMAP2_LEAF_BITS) - 1)], value, __ATOMIC_RELAXED);
    }
    return true;
}

#endif
