/* batched_free: an add-on layer that collects each thread's frees and hands them to the next layer
 * in batches (the paper's Table 2 `batched_free`): one call, and in a locked layer one lock
 * acquisition per batch instead of per free. Allocation passes straight through.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: none.
 * Options:
 *   SM_OPT_BATCH  frees collected per thread before they go down (default 32, in [2, 256]).
 * Per thread: one initial-exec TLS array of SM_OPT_BATCH pointers and a count (8 x SM_OPT_BATCH + 8
 * bytes of static TLS; no allocation). A free appends the pointer; the free that fills the array
 * sends all of it down with the next layer's L_free_batch: with BATCH the next layer frees them in
 * one call, without it core/caps_default.h's L_free_batch frees them one by one (a plain free each,
 * unsized). The array is also flushed
 *   - when the thread exits: the first free attaches the thread to the lifecycle service
 *     (platform/lifecycle.h); L_thread_exit flushes and retires the thread, whose later frees (a
 *     destructor after ours) go down one at a time; a thread that cannot attach never batches;
 *   - on L_release with SM_RELEASE_ALL or SM_RELEASE_THREAD (malloc_trim): the calling thread's
 *     array, before the next layer's release, so what it held can be given back. Other threads'
 *     arrays hold at most SM_OPT_BATCH blocks each until their next flush.
 * What a batched block is, until its flush: still live below. So
 *   - getmeta of it answers as for a live block (the contract lets a layer answer either way for a
 *     freed block, core/layer.h); resize or purge of it is a use after free, as anywhere;
 *   - a double free is not caught here: both frees reach the next layer (the block cannot be handed
 *     out again between them, since the first has not gone down yet), which reports it as it would
 *     have, only later: at the flush that carries the second copy, with that flush's stack. The
 *     size of a sized free (SM_F_SIZED) and the owner word are dropped: the batch carries
 *     pointers only, so a next layer that checks sized frees sees unsized ones.
 * Invariants: a thread holds at most SM_OPT_BATCH - 1 blocks between frees; every block freed
 * through this layer reaches the next layer exactly once per free.
 * Capabilities: needs none (uses BATCH when the next layer offers it). Forwards BATCH (a thread cache
 * above frees in batches already: its free_batch goes straight down), OWNER, MAPPING, STABLE and MOVE;
 * not HIT (a free hit of the next layer would skip the batch). Properties: those of the next layer.
 * No locks (the arrays are per thread): the fork hooks forward; the forking thread's array stays
 * valid in the child.
 * @model: name=batched_free kind=addon key batch int
 * @check: SM_LAYER=t
 * @check-next: fake */
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "batched_free: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "batched_free: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_OPT_BATCH
#define SM_OPT_BATCH 32
#endif
_Static_assert((SM_OPT_BATCH) >= 2 && (SM_OPT_BATCH) <= 256, "batched_free: SM_OPT_BATCH must be in [2, 256]");

enum {
    SM_FN(batch) = SM_OPT_BATCH,
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = SM_PROP(SM_NEXT, zeroed),
};

/* A thread's state: 0 not attached yet, 1 batching, 2 retired (exited, or no exit hook). */
struct SM_FN(tls_t) {
    unsigned n, state;
    void *blocks[SM_OPT_BATCH];
};
static __thread struct SM_FN(tls_t) SM_FN(tls) __attribute__((tls_model("initial-exec")));

SM_INLINE void SM_FN(thread_exit)(void);

/* Sends the calling thread's array down. n is cleared first: a layer below that frees into this
 * composition again (it should not) would start a new batch, not re-send this one. */
SM_SLOWPATH SM_UNUSED void SM_FN(flush)(void)
{
    struct SM_FN(tls_t) *t = &SM_FN(tls);
    unsigned n = t->n;
    t->n = 0;
    if (n)
        SM_NEXT_FN(free_batch)(t->blocks, n);
}

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }
SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c) { return SM_NEXT_FN(alloc)(c); }

SM_SLOWPATH SM_UNUSED bool SM_FN(attach)(struct SM_FN(tls_t) *t)
{
    t->state = sm_thread_attach(SM_FN(thread_exit)) ? 1u : 2u;
    return t->state == 1;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    struct SM_FN(tls_t) *t = &SM_FN(tls);
    if (sm_unlikely(t->state != 1) && !(t->state == 0 && SM_FN(attach)(t))) {
        SM_NEXT_FN(free)(c);
        return;
    }
    t->blocks[t->n++] = c->ptr;
    if (sm_unlikely(t->n == (unsigned)(SM_OPT_BATCH)))
        SM_FN(flush)();
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    if (r->how == SM_RELEASE_ALL || r->how == SM_RELEASE_THREAD)
        SM_FN(flush)();
    SM_NEXT_FN(release)(r);
}

/* Flushes, then retires the thread: glibc may run the exit hook again for a destructor that frees
 * after ours, and that free must not sit in an array nobody will flush. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    SM_FN(flush)();
    SM_FN(tls).state = 2;
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

enum { SM_FN(batch_classes) = SM_PROP(SM_NEXT, batch_classes), SM_FN(batch_max_size) = SM_PROP(SM_NEXT, batch_max_size) };
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n) { return SM_NEXT_FN(alloc_batch)(c, out, n); }
SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n) { SM_NEXT_FN(free_batch)(blocks, n); }
SM_HOT uintptr_t SM_FN(block_owner)(const void *p) { return SM_NEXT_FN(block_owner)(p); }
SM_HOT unsigned SM_FN(owner_slot)(const void *p, uintptr_t w) { return SM_NEXT_FN(owner_slot)(p, w); }
SM_INLINE bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c) { return SM_NEXT_FN(owner_local)(p, w, c); }
SM_INLINE uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c) { return SM_NEXT_FN(owner_foreign)(c); }
SM_INLINE void *SM_FN(split)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(split)(c, n); }
SM_INLINE bool SM_FN(remap)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(remap)(c, n); }
SM_INLINE bool SM_FN(join)(sm_mctx_t *c, void *next) { return SM_NEXT_FN(join)(c, next); }
enum { SM_FN(stable_max) = SM_PROP(SM_NEXT, stable_max) };

#undef SM_OPT_BATCH
#define SM_LAYER_OFFERS (SM_CAP_BATCH | SM_CAP_OWNER | SM_CAP_MAPPING | SM_CAP_STABLE | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAPS(SM_NEXT) & (SM_CAP_BATCH | SM_CAP_OWNER | SM_CAP_MAPPING | SM_CAP_STABLE | SM_CAP_MOVE))
#include "../../core/layer_end.h"
