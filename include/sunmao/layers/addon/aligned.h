/* aligned: an add-on layer that rounds every request's size, and its alignment, up to a granule
 * (the paper's Table 2 `aligned`). Below it, every block starts on a granule boundary and spans
 * whole granules: a cache-line granule keeps two blocks from sharing a line (no false sharing
 * between threads), a page granule makes every block page-aligned for a layer or device that wants
 * pages. It serves nothing itself.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: none (size_handle is not used: every request is rounded).
 * Options:
 *   SM_OPT_GRANULE  the granule, a power of two (default 16, SM_MIN_ALIGN: sizes become multiples
 *                   of 16 and nothing else changes; 64 for cache lines, 4096 for pages)
 * Contract, for every request that crosses it:
 *   alloc   the next layer sees size' = round_up(max(size, 1), G) and align' = max(align, G); a
 *           size whose rounding overflows fails here (NULL, ENOMEM) instead of wrapping to 0.
 *   free    a sized free (SM_F_SIZED) is passed down with the rounded size, the size it asked for;
 *           unsized frees and the owner word pass unchanged.
 *   resize  asks the next layer for round_up(n, G): the block keeps spanning whole granules.
 *   getmeta the next layer's answer: usable >= size' >= the size the program asked for.
 * Invariant: every block this layer handed out starts on a multiple of G and its usable size (the
 * next layer's) is at least a multiple of G that covers the request.
 * Capabilities: needs none. Forwards OWNER, MAPPING, STABLE and MOVE (the size a remap or a move
 * is asked for rounded up to the granule; a move only for granules up to 4 KiB);
 * forwards HIT and BATCH only when G <= SM_MIN_ALIGN, where the next layer's hit paths and classes
 * already give 16-byte multiples (alloc_hit is asked for the rounded size): with a larger granule
 * a class object need not be aligned to it, so those capabilities are not offered and the socket
 * takes the plain paths. Properties: thread_safe and zeroed of the next layer, min_align
 * max(G, the next layer's). No state, no locks: the fork hooks forward.
 * @model: name=aligned kind=addon key granule size
 * @check: SM_LAYER=t SM_OPT_GRANULE=64
 * @check-next: fake */
#include "../../core/layer.h"

#ifndef SM_LAYER
#error "aligned: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "aligned: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_OPT_GRANULE
#define SM_OPT_GRANULE 16
#endif
_Static_assert((SM_OPT_GRANULE) >= 1 && ((SM_OPT_GRANULE) & ((SM_OPT_GRANULE) - 1)) == 0,
               "aligned: SM_OPT_GRANULE must be a power of two");

enum {
    SM_FN(granule) = SM_OPT_GRANULE,
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = (size_t)SM_PROP(SM_NEXT, min_align) > (size_t)(SM_OPT_GRANULE) ? SM_PROP(SM_NEXT, min_align)
                                                                                       : (SM_OPT_GRANULE),
    SM_FN(zeroed) = SM_PROP(SM_NEXT, zeroed),
};

/* size rounded up to the granule (0 counts as 1); SIZE_MAX when that overflows, which no layer
 * below can serve, so the failure stays a failure. */
SM_HOT size_t SM_FN(round)(size_t size)
{
    size_t g = (size_t)(SM_OPT_GRANULE);
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX - (g - 1))
        return SIZE_MAX;
    return (size + g - 1) & ~(g - 1);
}

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t n = SM_FN(round)(c->size);
    if (sm_unlikely(n == SIZE_MAX)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    c->size = n;
    if (c->align < (size_t)(SM_OPT_GRANULE))
        c->align = (size_t)(SM_OPT_GRANULE);
    return SM_NEXT_FN(alloc)(c);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (c->flags & SM_F_SIZED)
        c->size = SM_FN(round)(c->size);
    SM_NEXT_FN(free)(c);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    size_t r = SM_FN(round)(n);
    return r != SIZE_MAX && SM_NEXT_FN(resize)(c, r);
}
/* A moved block starts on a page (a new mapping): granules up to 4 KiB, the smallest page, only. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    size_t r = SM_FN(round)(n);
    return (SM_OPT_GRANULE) <= 4096 && r != SIZE_MAX && SM_NEXT_FN(move)(c, r);
}
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }
SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }
SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#if (SM_OPT_GRANULE) <= 16
/* The granule divides every 16-byte multiple: the next layer's hit paths and classes keep it. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    size_t n = SM_FN(round)(size);
    return n == SIZE_MAX ? NULL : SM_NEXT_FN(alloc_hit)(n);
}
SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    return SM_NEXT_FN(free_hit)(p, (flags & SM_F_SIZED) ? SM_FN(round)(size) : size, flags, owner_word);
}
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    size_t n = SM_FN(round)(c->size);
    if (sm_unlikely(n == SIZE_MAX)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    c->size = n;
    return SM_NEXT_FN(alloc_miss)(c);
}
SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    if (c->flags & SM_F_SIZED)
        c->size = SM_FN(round)(c->size);
    SM_NEXT_FN(free_miss)(c);
}
enum { SM_FN(batch_classes) = SM_PROP(SM_NEXT, batch_classes), SM_FN(batch_max_size) = SM_PROP(SM_NEXT, batch_max_size) };
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    c->size = SM_FN(round)(c->size);
    return c->size == SIZE_MAX ? 0 : SM_NEXT_FN(alloc_batch)(c, out, n);
}
SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n) { SM_NEXT_FN(free_batch)(blocks, n); }
#endif

SM_HOT uintptr_t SM_FN(block_owner)(const void *p) { return SM_NEXT_FN(block_owner)(p); }
SM_HOT unsigned SM_FN(owner_slot)(const void *p, uintptr_t w) { return SM_NEXT_FN(owner_slot)(p, w); }
SM_INLINE bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c) { return SM_NEXT_FN(owner_local)(p, w, c); }
SM_INLINE uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c) { return SM_NEXT_FN(owner_foreign)(c); }
SM_INLINE void *SM_FN(split)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(split)(c, n); }
SM_INLINE bool SM_FN(join)(sm_mctx_t *c, void *next) { return SM_NEXT_FN(join)(c, next); }
SM_INLINE bool SM_FN(remap)(sm_mctx_t *c, size_t n)
{
    size_t r = SM_FN(round)(n);
    return r != SIZE_MAX && SM_NEXT_FN(remap)(c, r);
}
enum { SM_FN(stable_max) = SM_PROP(SM_NEXT, stable_max) };

#if (SM_OPT_GRANULE) <= 16
#define SM_LAYER_OFFERS SM_CAP_ALL
#define SM_LAYER_CAPS   SM_CAPS(SM_NEXT)
#else
#define SM_LAYER_OFFERS (SM_CAP_OWNER | SM_CAP_MAPPING | SM_CAP_STABLE | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAPS(SM_NEXT) & (SM_CAP_OWNER | SM_CAP_MAPPING | SM_CAP_STABLE | SM_CAP_MOVE))
#endif
#undef SM_OPT_GRANULE
#include "../../core/layer_end.h"
