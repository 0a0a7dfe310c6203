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

#if defined(SM_META)
SM_INLINE SM_UNUSED void *SM_FN(meta_alloc)(sm_mctx_t *c) { return SM_CAT3(SM_META, _, alloc)(c); }
SM_INLINE SM_UNUSED void SM_FN(meta_free)(sm_mctx_t *c) { SM_CAT3(SM_META, _, free)(c); }
#elif defined(SM_NEXT)
SM_INLINE SM_UNUSED void *SM_FN(meta_alloc)(sm_mctx_t *c) { return SM_NEXT_FN(meta_alloc)(c); }
SM_INLINE SM_UNUSED void SM_FN(meta_free)(sm_mctx_t *c) { SM_NEXT_FN(meta_free)(c); }
#else
SM_INLINE SM_UNUSED void *SM_FN(meta_alloc)(sm_mctx_t *c) { return SM_FN(alloc)(c); }
SM_INLINE SM_UNUSED void SM_FN(meta_free)(sm_mctx_t *c) { SM_FN(free)(c); }
#endif

#endif /* SM_META_ROUTED */
