/* cond_bypass: an add-on layer that lets a user predicate send a request past its next layer,
 * straight to a named layer further down (the paper's Table 2 `cond_bypass`): e.g. requests of a
 * tagged arena, or of sizes a cache above should not see, skip the cache and go to the heap below.
 *
 * Parameters: SM_LAYER, SM_NEXT, and
 *   SM_BYPASS_TO      (required) the layer instance the selected requests go to: one in SM_NEXT's
 *                     chain, below SM_NEXT (the composition defines it before SM_NEXT)
 *   SM_OPT_PREDICATE  the name of a function `bool pred(sm_mctx_t *c)`, decided at compile time
 *                     (inlined); true: alloc request c goes to SM_BYPASS_TO. It sees the request
 *                     as the socket made it (size, align, flags, cpu) and may read anything the
 *                     program put in reach; it must not change c. (A function-like macro of c
 *                     works too: SM_OPT_PREDICATE(c) is what the layer expands.) The default,
 *                     L_select_none, selects nothing: every request goes to SM_NEXT, and the
 *                     layer is a pass-through until a composition names its predicate.
 * Slots: none. Only allocations are routed by the predicate; every other request (free, getmeta,
 * resize, purge) goes to SM_NEXT. Invariant that makes this right: SM_BYPASS_TO is in SM_NEXT's chain,
 * and the core/layer.h contract makes every layer pass down a block it did not serve, unchanged
 * (caches keep only objects of their next layer's classes, which the layer below serves again;
 * wrapping layers such as tail_chksum recognise their own blocks by a verified header and pass
 * the rest down). So a free that enters SM_NEXT reaches the layer that owns the block, whichever
 * path served it: by ownership, not by a second call of the predicate, which could answer otherwise
 * at free time (a free carries no size, nor whatever state the predicate read). The cost of the
 * bypassed block's free is the walk down through SM_NEXT's layers to its owner. A composition
 * whose layers between SM_NEXT and SM_BYPASS_TO cannot tell a foreign block (a layer that answers
 * every pointer as its own) must not use this layer.
 * Release, thread exit and fork go to SM_NEXT only: SM_BYPASS_TO is in its chain and receives them
 * there, once. create is SM_NEXT's (which creates SM_BYPASS_TO on its way down).
 * Capabilities: needs none; offers MOVE where SM_NEXT does (a live block's move goes down by
 * ownership, as its free does), and nothing else (a socket's hit paths would skip the predicate).
 * Properties: thread_safe and zeroed when both paths are, min_align the smaller of the two.
 * No state, no locks.
 * @model: name=cond_bypass kind=addon opaque predicate flag c-only
 * @check: SM_LAYER=b SM_NEXT=fake_next <sunmao/layers/addon/passthrough.h> SM_LAYER=t SM_NEXT=b SM_BYPASS_TO=fake_next SM_OPT_PREDICATE(c)=((c)->size>=1024)
 * @check-next: fake */
#include "../../core/layer.h"

#ifndef SM_LAYER
#error "cond_bypass: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "cond_bypass: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_BYPASS_TO
#error "cond_bypass: define SM_BYPASS_TO (the layer below SM_NEXT that selected requests go to)"
#endif
#ifndef SM_OPT_PREDICATE
#define SM_OPT_PREDICATE SM_FN(select_none)
/* The default predicate: no request is selected, all go to SM_NEXT. */
SM_INLINE bool SM_FN(select_none)(sm_mctx_t *c)
{
    (void)c;
    return false;
}
#endif

enum {
    SM_FN(thread_safe) = (int)SM_PROP(SM_NEXT, thread_safe) && (int)SM_PROP(SM_BYPASS_TO, thread_safe),
    SM_FN(min_align) = (long)SM_PROP(SM_NEXT, min_align) < (long)SM_PROP(SM_BYPASS_TO, min_align)
                           ? (long)SM_PROP(SM_NEXT, min_align)
                           : (long)SM_PROP(SM_BYPASS_TO, min_align),
    SM_FN(zeroed) = (int)SM_PROP(SM_NEXT, zeroed) && (int)SM_PROP(SM_BYPASS_TO, zeroed),
};

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (SM_OPT_PREDICATE(c))
        return SM_CAT3(SM_BYPASS_TO, _, alloc)(c);
    return SM_NEXT_FN(alloc)(c);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c) { SM_NEXT_FN(free)(c); }
SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }
SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }
SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#define SM_LAYER_OFFERS SM_CAP_MOVE
#define SM_LAYER_CAPS   (SM_CAPS(SM_NEXT) & SM_CAP_MOVE)
#undef SM_BYPASS_TO
#undef SM_OPT_PREDICATE
#include "../../core/layer_end.h"
