/* The metadata route (no include guard): where a layer's own metadata comes from — its page-map
 * nodes, chunk descriptors, per-thread caches — as opposed to the blocks it serves or carves.
 * Framework core.
 *
 * Metadata never travels the user chain by size: a 32 KiB page-map node asked of the next layer
 * would land in whichever layer's size range covers 32 KiB (a TLSF heap meant for user blocks),
 * mix with user blocks there, and be cleared by hand although the OS gives zeroed pages. So every
 * layer instance has
 *     void *L_meta_alloc(sm_mctx_t *c)     same contract as L_alloc
 *     void  L_meta_free(sm_mctx_t *c)      same contract as L_free, for a block from L_meta_alloc
 * routed, in this order, to:
 *     SM_META   when the composition names a layer instance (defined before this one) for this
 *               layer's metadata: that instance's L_alloc / L_free, size ranges and all;
 *     SM_NEXT's route, when there is a next layer: by default, metadata goes to the bottom;
 *     the layer's own L_alloc / L_free for an OS layer (no SM_NEXT), the end of every route.
 * Calls through the route are direct (each step is an inline forwarder), and every request on it
 * is one the layers made, never the program's (no SM_F_USER).
 *
 * A layer template that allocates metadata includes this after its parameter checks and calls
 * SM_FN(meta_alloc) / SM_FN(meta_free); core/layer_end.h includes it for every other layer (an OS
 * layer's route needs its L_alloc, so an OS layer leaves it to layer_end.h).
 * @check: <sunmao/core/layer.h> SM_LAYER=t @check-next: fake */
#ifndef SM_META_ROUTED
#define SM_META_ROUTED

/* The end of a route counts what it hands out, in the serving layer's units (its getmeta), so the
 * statistics can tell metadata from the program's blocks (core/stats.h). Metadata requests are
 * rare: an atomic add and a lookup cost nothing measurable there. */
#define SM_META_COUNTED(layer)                                                                     \
    SM_INLINE SM_UNUSED void *SM_FN(meta_alloc)(sm_mctx_t *c)                                      \
    {                                                                                              \
        void *p = SM_CAT3(layer, _, alloc)(c);                                                     \
        sm_mctx_t q = sm_mctx_block(p, 0, 0);                                                      \
        if (p && SM_CAT3(layer, _, getmeta)(&q))                                                   \
            __atomic_add_fetch(&sm_stats_meta_route_bytes, q.usable, __ATOMIC_RELAXED);            \
        return p;                                                                                  \
    }                                                                                              \
    SM_INLINE SM_UNUSED void SM_FN(meta_free)(sm_mctx_t *c)                                        \
    {                                                                                              \
        sm_mctx_t q = sm_mctx_block(c->ptr, 0, 0);                                                 \
        if (SM_CAT3(layer, _, getmeta)(&q))                                                        \
            __atomic_sub_fetch(&sm_stats_meta_route_bytes, q.usable, __ATOMIC_RELAXED);            \
        SM_CAT3(layer, _, free)(c);                                                                \
    }

#if defined(SM_META)
SM_META_COUNTED(SM_META)
#elif defined(SM_NEXT)
SM_INLINE SM_UNUSED void *SM_FN(meta_alloc)(sm_mctx_t *c) { return SM_NEXT_FN(meta_alloc)(c); }
SM_INLINE SM_UNUSED void SM_FN(meta_free)(sm_mctx_t *c) { SM_NEXT_FN(meta_free)(c); }
#else
SM_META_COUNTED(SM_LAYER)
#endif
#undef SM_META_COUNTED

#endif /* SM_META_ROUTED */
