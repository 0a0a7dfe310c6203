/* passthrough: an add-on layer that serves nothing and passes every request to the next layer.
 * It is the paper's `fake` layer (§4.4, question 1): composing it anywhere must not change the
 * machine code of the allocator, which tests/unit/compose_zero_cost checks. It is also the smallest
 * complete example of the layer contract (core/layer.h) to copy when writing a new layer.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: size_handle (requests outside it skip the layer; here
 * both paths are the same, which is the point). Properties and capabilities: those of the next layer.
 * @model: name=passthrough kind=addon range */
#include "../../core/layer.h"

#ifndef SM_LAYER
#error "passthrough: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "passthrough: define SM_NEXT (the layer below) before including"
#endif
#include "../../policies/size_handle.h"

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = SM_PROP(SM_NEXT, zeroed),
};

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (SM_FN(serves)(c)) {
        /* A real layer serves the request here and returns; this one has nothing to give. */
    }
    /* One call site for the pass-down path: everything below is inlined here exactly once.
     * (Two calls, one per branch, would inline the whole stack twice.) */
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

/* Every capability, forwarded: the layer offers what its next layer offers. */
SM_HOT void *SM_FN(alloc_hit)(size_t size) { return SM_NEXT_FN(alloc_hit)(size); }
SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    return SM_NEXT_FN(free_hit)(p, size, flags, owner_word);
}
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c) { return SM_NEXT_FN(alloc_miss)(c); }
SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c) { SM_NEXT_FN(free_miss)(c); }
enum { SM_FN(batch_classes) = SM_PROP(SM_NEXT, batch_classes), SM_FN(batch_max_size) = SM_PROP(SM_NEXT, batch_max_size) };
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n) { return SM_NEXT_FN(alloc_batch)(c, out, n); }
SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n) { SM_NEXT_FN(free_batch)(blocks, n); }
SM_HOT uintptr_t SM_FN(block_owner)(const void *p) { return SM_NEXT_FN(block_owner)(p); }
SM_HOT unsigned SM_FN(owner_slot)(const void *p, uintptr_t w) { return SM_NEXT_FN(owner_slot)(p, w); }
SM_INLINE bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c) { return SM_NEXT_FN(owner_local)(p, w, c); }
SM_INLINE uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c) { return SM_NEXT_FN(owner_foreign)(c); }
SM_INLINE void *SM_FN(split)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(split)(c, n); }
SM_INLINE bool SM_FN(remap)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(remap)(c, n); }
enum { SM_FN(stable_max) = SM_PROP(SM_NEXT, stable_max) };

#define SM_LAYER_OFFERS SM_CAP_ALL
#define SM_LAYER_CAPS   SM_CAPS(SM_NEXT)

#include "../../core/layer_end.h"
