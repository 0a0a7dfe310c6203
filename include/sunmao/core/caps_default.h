/* Included by core/layer_end.h (no include guard): completes the layer instance just defined with
 * the property L_caps and, for every capability it does not offer, the default functions of
 * core/capability.h, which always miss. Framework core.
 *
 * A layer template states what it offers before including layer_end.h:
 *   #define SM_LAYER_OFFERS (SM_CAP_BATCH | SM_CAP_OWNER)   the functions it defines itself
 *   #define SM_LAYER_CAPS   SM_CAPS(SM_NEXT)                 (optional) the L_caps it declares, when
 *                                                            it differs: a layer that forwards every
 *                                                            capability offers its next layer's
 *   #define SM_LAYER_ALIGNED_HIT 1                           (optional, with HIT) it defines
 *                                                            L_aligned_hit itself
 *   #define SM_LAYER_USABLE_HIT 1                            (optional, with HIT) it defines
 *                                                            L_usable_hit itself
 *   #define SM_LAYER_STATS  1                                (optional) it defines L_stats itself
 *                                                            (core/stats.h); the default adds an
 *                                                            empty entry with its name and forwards
 *   @check: <sunmao/core/layer.h> SM_LAYER=t SM_LAYER_OFFERS=SM_CAP_ALL */
#include "capability.h"

#ifndef SM_LAYER_OFFERS
#define SM_LAYER_OFFERS 0
#endif
#ifndef SM_LAYER_CAPS
#define SM_LAYER_CAPS (SM_LAYER_OFFERS)
#endif

enum { SM_FN(caps) = (SM_LAYER_CAPS) };

#if !((SM_LAYER_OFFERS) & SM_CAP_HIT)
SM_HOT SM_UNUSED void *SM_FN(alloc_hit)(size_t size) { (void)size; return NULL; }
SM_HOT SM_UNUSED bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    (void)p, (void)size, (void)flags, (void)owner_word;
    return false;
}
SM_HOT SM_UNUSED void *SM_FN(alloc_miss)(sm_mctx_t *c) { return SM_FN(alloc)(c); }
SM_HOT SM_UNUSED void SM_FN(free_miss)(sm_mctx_t *c) { SM_FN(free)(c); }
#endif

/* HIT's optional aligned hit: a layer that offers HIT and can serve an aligned request from what it
 * holds defines L_aligned_hit and SM_LAYER_ALIGNED_HIT; every other layer gets this one, which
 * misses (the socket then sends the request to the miss, as it did before the hit existed). */
#if !((SM_LAYER_OFFERS) & SM_CAP_HIT) || !defined(SM_LAYER_ALIGNED_HIT)
SM_HOT SM_UNUSED void *SM_FN(aligned_hit)(size_t size, size_t align)
{
    (void)size, (void)align;
    return NULL;
}
#endif

/* HIT's optional usable-size hit (realloc's and malloc_usable_size's): a layer that offers HIT and
 * can tell a block's usable size from its owner word defines L_usable_hit and SM_LAYER_USABLE_HIT;
 * every other layer gets this one, which answers 0 (the socket then asks getmeta). */
#if !((SM_LAYER_OFFERS) & SM_CAP_HIT) || !defined(SM_LAYER_USABLE_HIT)
SM_HOT SM_UNUSED size_t SM_FN(usable_hit)(const void *p)
{
    (void)p;
    return 0;
}
#endif

#if !((SM_LAYER_OFFERS) & SM_CAP_BATCH)
enum { SM_FN(batch_classes) = 0, SM_FN(batch_max_size) = 0 };
SM_INLINE SM_UNUSED unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    (void)c, (void)out, (void)n;
    return 0;
}
SM_INLINE SM_UNUSED void SM_FN(free_batch)(void **blocks, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        sm_mctx_t c = sm_mctx_block(blocks[i], 0, 0);
        SM_FN(free)(&c);
    }
}
#endif

#if !((SM_LAYER_OFFERS) & SM_CAP_OWNER)
SM_INLINE SM_UNUSED uintptr_t SM_FN(block_owner)(const void *p)
{
    (void)p;
    return 0;
}
SM_INLINE SM_UNUSED unsigned SM_FN(owner_slot)(const void *p, uintptr_t w)
{
    (void)p, (void)w;
    return (unsigned)SM_FN(batch_classes) << 4;
}
SM_INLINE SM_UNUSED bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c)
{
    (void)p, (void)w, (void)c;
    return true;
}
SM_INLINE SM_UNUSED uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c)
{
    (void)c;
    return 0;
}
#endif

#if !((SM_LAYER_OFFERS) & SM_CAP_MAPPING)
SM_INLINE SM_UNUSED void *SM_FN(split)(sm_mctx_t *c, size_t n)
{
    (void)c, (void)n;
    return NULL;
}
SM_INLINE SM_UNUSED bool SM_FN(remap)(sm_mctx_t *c, size_t n)
{
    (void)c, (void)n;
    return false;
}
SM_INLINE SM_UNUSED bool SM_FN(join)(sm_mctx_t *c, void *next)
{
    (void)c, (void)next;
    return false;
}
#endif

#if !((SM_LAYER_OFFERS) & SM_CAP_MOVE)
SM_INLINE SM_UNUSED bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    (void)c, (void)n;
    return false;
}
#endif

#if !((SM_LAYER_OFFERS) & SM_CAP_STABLE)
enum { SM_FN(stable_max) = 0 };
#endif

/* Statistics (core/stats.h): a layer that holds no memory of its own reports its name only. */
#ifndef SM_LAYER_STATS
SM_INLINE SM_UNUSED void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer(s, SM_LAYER_NAME);
#ifdef SM_NEXT
    SM_NEXT_FN(stats)(s);
#endif
}
#endif

#undef SM_LAYER_OFFERS
#undef SM_LAYER_CAPS
#undef SM_LAYER_STATS
#undef SM_LAYER_ALIGNED_HIT
#undef SM_LAYER_USABLE_HIT
