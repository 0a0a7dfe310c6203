/* The layer contract (Mortise paper, Table 1 and §2.2) and the helpers a layer template uses.
 * Framework core.
 *
 * A layer is a header with no include guard — a template. Including it after defining
 *     SM_LAYER   the name of this layer instance (an identifier, e.g. tlsf_heap)
 *     SM_NEXT    the instance it passes requests to (absent for an OS layer)
 *     SM_<SLOT>  one macro per policy slot the layer declares (SM_SYNC, SM_SIZECLASS, SM_RETAIN, ...)
 *     SM_OPT_*   the layer's options, each with a documented default
 *     SM_META    (optional) the instance that serves this layer's own metadata (core/meta_route.h;
 *                default: the OS layer at the bottom)
 * defines the instance: a static object holding its state and these static inline functions
 * (all names prefixed by SM_LAYER, shown here as L_):
 *
 *   enum constants (layer properties, checked by compositions with _Static_assert):
 *     L_thread_safe  1 if concurrent calls are safe (a lock policy other than `none` makes it so)
 *     L_min_align    alignment of every block it returns, whatever was requested
 *     L_zeroed       1 if every block it returns is zero-filled
 *   int   L_create(void)             create the layer's shared object; calls the next layer's first.
 *                                    0 on success, -1 (errno set) on failure.
 *   void *L_alloc(sm_mctx_t *c)      serve c->size bytes aligned to c->align, or pass the request on
 *                                    to the next layer (outside the size_handle range, or on a miss);
 *                                    sets and returns c->ptr; NULL (errno = ENOMEM) when no memory.
 *   void  L_free(sm_mctx_t *c)       release c->ptr if this layer owns it, else pass it on. A bad
 *                                    free (interior pointer, double free) goes to the err policy
 *                                    once, then is ignored. Its kind is SM_ERR_DOUBLE_FREE where
 *                                    the layer can tell; a layer that merges freed blocks (brk_heap)
 *                                    or keeps no record of them (mmap_heap's direct mappings) may
 *                                    report a second free as SM_ERR_INVALID_FREE.
 *   bool  L_getmeta(sm_mctx_t *c)    if c->ptr is a live block of a layer at or below this one,
 *                                    fill c->usable and c->owner and return true; false means
 *                                    "no live block starts here". Asked of a block that is free,
 *                                    a layer may answer either way (slab_lk and a thread cache
 *                                    above it cannot tell a cached object from a live one without
 *                                    a cost on every call; tlsf_glk, buddy_glk and the OS layers
 *                                    say false): only a bad program asks.
 *   bool  L_resize(sm_mctx_t *c, size_t n)  grow or shrink c->ptr in place to >= n usable bytes;
 *                                    false leaves the block untouched (the socket then moves it).
 *                                    A shrink keeps at least the layer's SM_SIZE_MIN: a thread
 *                                    cache above trusts a sized free's class to fit the block.
 *   bool  L_purge(sm_mctx_t *c)      drop the pages of a range of a block the caller holds, keep
 *                                    it mapped (core/release.h); pass down what is not ours.
 *   void  L_release(sm_release_t *r) give back memory held free: all of it, or what has decayed
 *                                    (core/release.h); then the next layer's.
 *   void  L_thread_exit(void)        the calling thread is exiting: return its cached state.
 *   void  L_stats(sm_stats_t *s)     add this layer's figures (an entry named SM_LAYER_NAME: bytes
 *                                    in use, held from below, dirty, metadata; per size class),
 *                                    under its lock where it has one, then call the next layer's;
 *                                    an OS layer adds mapped, resident and retained. Never on a
 *                                    request path; no allocation. Default (core/caps_default.h):
 *                                    an empty entry, forwarded; a layer that holds memory defines
 *                                    its own and SM_LAYER_STATS 1. How the totals, `allocated`
 *                                    exact among them, follow from the entries: core/stats.h.
 *   void  L_fork_prepare(void)       take every lock of this layer, then the next layer's;
 *   void  L_fork_parent(void)        release them in the parent;
 *   void  L_fork_child(void)         make them usable again in the (single-threaded) child.
 *
 * Layers are stateless functions of the context: their state lives in the instance's static object,
 * or in thread-local storage for per-thread layers, never in globals shared across instances.
 * A request starts at the socket (top) and moves toward the OS layer (bottom) until a layer
 * serves it; a layer may call only its own next layer, so the data flow is one-way.
 */
#ifndef SUNMAO_CORE_LAYER_H
#define SUNMAO_CORE_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "compiler.h"
#include "errnum.h"
#include "mctx.h"
#include "capability.h"
#include "release.h"
#include "stats.h"

/* A composition that calls what no header declared (a misspelt layer or policy name, a policy whose
 * header is not there) is an error whatever the build's flags: C99 removed implicit declarations,
 * and GCC 12 only warns, then links a library with undefined symbols that crashes at load. */
#pragma GCC diagnostic error "-Wimplicit-function-declaration"

/* Name of this instance's function or object `name`, and of the next instance's. */
#define SM_FN(name)      SM_CAT3(SM_LAYER, _, name)
#define SM_NEXT_FN(name) SM_CAT3(SM_NEXT, _, name)
#define SM_LAYER_NAME    SM_STR(SM_LAYER)

/* A property of any composed layer instance, for _Static_assert in compositions. */
#define SM_PROP(layer, prop) SM_CAT3(layer, _, prop)

/* Policy slots: a policy named P of kind K provides functions and types named sm_K_P_<fn>. */
#define SM_POLICY_FN(kind, policy, fn) SM_CAT4(sm_, kind, _, SM_CAT3(policy, _, fn))
#define SM_SYNC_FN(fn)      SM_POLICY_FN(sync, SM_SYNC, fn)
#define SM_SYNC_INIT        SM_CAT3(SM_SYNC_, SM_SYNC, _INIT)
#define SM_SIZECLASS_FN(fn) SM_POLICY_FN(sizeclass, SM_SIZECLASS, fn)
#define SM_CHKSUM_FN(fn)    SM_POLICY_FN(chksum, SM_CHKSUM, fn)
#define SM_ERR_FN(fn)       SM_POLICY_FN(err, SM_ERR, fn)
#define SM_RECLAIM_FN(fn)   SM_POLICY_FN(reclaim, SM_RECLAIM, fn)
#define SM_RETAIN_FN(fn)    SM_POLICY_FN(retain, SM_RETAIN, fn)

/* The fork hooks of a layer guarded by one lock of its sync policy: take it before the next
 * layer's locks (the order in which requests take them), release it (parent) or re-create it
 * (child) after, through the policy's fork_lock / fork_unlock / fork_reinit, which keep a lock the
 * forking thread itself holds (a fork from a signal handler: policies/sync/owner.h). Expands to
 * the three hook functions. */
#define SM_FORK_HOOKS_ONE_LOCK(lockp)                                                  \
    SM_INLINE void SM_FN(fork_prepare)(void)                                           \
    {                                                                                  \
        SM_SYNC_FN(fork_lock)(lockp);                                                  \
        SM_NEXT_FN(fork_prepare)();                                                    \
    }                                                                                  \
    SM_INLINE void SM_FN(fork_parent)(void)                                            \
    {                                                                                  \
        SM_SYNC_FN(fork_unlock)(lockp);                                                \
        SM_NEXT_FN(fork_parent)();                                                     \
    }                                                                                  \
    SM_INLINE void SM_FN(fork_child)(void)                                             \
    {                                                                                  \
        SM_SYNC_FN(fork_reinit)(lockp);                                                \
        SM_NEXT_FN(fork_child)();                                                      \
    }

/* L_alloc and L_free of a layer that offers SM_CAP_HIT (core/capability.h): its hit path, else its
 * miss with the request's one context (and, for a free, the owner word the hit read). Expands to
 * the two functions. */
#define SM_ALLOC_FREE_BY_HIT()                                                         \
    SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)                                         \
    {                                                                                  \
        if (c->align <= SM_MIN_ALIGN) {                                                \
            void *p = SM_FN(alloc_hit)(c->size);                                       \
            if (sm_likely(p != NULL))                                                  \
                return c->ptr = p;                                                     \
        }                                                                              \
        return SM_FN(alloc_miss)(c);                                                   \
    }                                                                                  \
    SM_INLINE void SM_FN(free)(sm_mctx_t *c)                                           \
    {                                                                                  \
        uintptr_t w = SM_OWNER_UNKNOWN;                                                \
        if (sm_likely(SM_FN(free_hit)(c->ptr, c->size, c->flags, &w)))                 \
            return;                                                                    \
        if (w != SM_OWNER_UNKNOWN) {                                                   \
            c->owner_word = w;                                                         \
            c->flags |= SM_F_OWNER;                                                    \
        }                                                                              \
        SM_FN(free_miss)(c);                                                           \
    }

/* Options (SM_OPT_*) are read once, when the template is included: a template gives each a
 * default with #ifndef, and #undefs its own options at its end, so the next inclusion starts clean.
 * The common parameters are #undef'd by core/layer_end.h, which every template includes last. */

#endif /* SUNMAO_CORE_LAYER_H */
