/* tarrcache: a per-thread array cache (the paper's Table 2 `tarrcache`): per size class, a
 * fixed-capacity stack of free blocks held in the thread's own memory, in front of a layer that
 * serves those classes. Compare thread_cache.h, which links its free objects through their first
 * words: this cache writes nothing into a freed block (the pointers live in the array), so a
 * program's write after free cannot redirect it, a freed block's cache lines are not dirtied, and
 * a block that is freed and handed out again is never touched by the allocator in between.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots:
 *   SM_SIZECLASS  (required) the class sizes; when the next layer offers BATCH or OWNER its classes
 *                 must be these (checked: owner_slot answers and batches index the arrays)
 *   SM_ERR        (required) a double free found in the array is reported through it, then ignored
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max 8 KiB): the sizes cached; others, and
 *                 alignments above SM_MIN_ALIGN, go down (in range: asked as their whole class)
 * Options:
 *   SM_OPT_CAP          most blocks one class's array holds (default 32, in [2, 4096])
 *   SM_OPT_CLASS_BYTES  a second bound on a class's array, in bytes (default 64 KiB): a class of
 *                       size s holds min(SM_OPT_CAP, max(1, SM_OPT_CLASS_BYTES / s)) blocks
 *   SM_OPT_DOUBLE_FREE_CHECK  1 (default): a free scans its class's array (at most the cap, in
 *                       contiguous memory) and reports a block already there; 0 trusts the program
 * Paths: alloc_hit pops the class's array; free_hit pushes when there is room (class from a sized
 * free's size, else the next layer's owner_slot when it offers OWNER, else a miss). The misses:
 * an empty array is refilled with half its capacity in one alloc_batch when the next layer offers
 * BATCH (else one alloc each); a full array gives its older half back in one free_batch (one free
 * each without BATCH); an unsized free with no OWNER below asks getmeta and files the block under
 * the largest class its usable size covers. Requests and blocks of no cached class go down.
 * Per thread: one initial-exec TLS pointer, at first a constant empty cache (all limits 0: every hit
 * misses, nothing is written), replaced on the first slow path by the thread's cache, allocated on
 * the metadata route (core/meta_route.h) after the thread attaches to the lifecycle service
 * (platform/lifecycle.h). Thread exit (L_thread_exit) gives every array back and leaves a constant
 * retired cache, whose misses pass everything down; L_release (ALL or THREAD) empties the calling
 * thread's arrays. Other threads' arrays are theirs alone (no lock); they go back when they exit.
 * Invariants: n <= limit <= SM_OPT_CAP per class; every cached block holds at least its class's
 * size (blocks come from refills of that class, from sized frees the contract trusts, or from
 * getmeta's usable size); the constant caches are never written.
 * Capabilities: needs none of the next layer (uses BATCH and OWNER when offered); offers HIT, and
 * MOVE, forwarded.
 * Properties: thread_safe and min_align of the next layer, zeroed 0. No locks: fork hooks forward.
 * getmeta of a cached block answers as the next layer does (live): allowed for a freed block.
 * @model: name=tarrcache kind=addon flag cache slot sizeclass slot err range
 * @model: key cap int key class_bytes size key double_free_check bool
 * @check: <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=t SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "tarrcache: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "tarrcache: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SIZECLASS
#error "tarrcache: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|log2b|prime|...)"
#endif
#ifndef SM_ERR
#error "tarrcache: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_CAP
#define SM_OPT_CAP 32
#endif
#ifndef SM_OPT_CLASS_BYTES
#define SM_OPT_CLASS_BYTES (64u << 10)
#endif
#ifndef SM_OPT_DOUBLE_FREE_CHECK
#define SM_OPT_DOUBLE_FREE_CHECK 1
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX (8u << 10)
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"
_Static_assert((SM_OPT_CAP) >= 2 && (SM_OPT_CAP) <= 4096, "tarrcache: SM_OPT_CAP must be in [2, 4096]");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "tarrcache: SM_SIZE_MAX is above the largest size of the sizeclass policy");
_Static_assert(!SM_HAS_CAP(SM_NEXT, SM_CAP_BATCH | SM_CAP_OWNER) ||
                   ((long)SM_PROP(SM_NEXT, batch_classes) == (long)SM_SIZECLASS_FN(count) &&
                    (long)SM_PROP(SM_NEXT, batch_max_size) == (long)SM_SIZECLASS_FN(max_size)),
               SM_STR(SM_LAYER) ": its sizeclass policy differs from that of its next layer " SM_STR(SM_NEXT));

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
    SM_FN(class_count) = SM_SIZECLASS_FN(count),
    SM_FN(cap) = SM_OPT_CAP,
};

struct SM_FN(arr) { uint16_t n, limit; };
struct SM_FN(cache) {
    struct SM_FN(arr) a[SM_FN(class_count)]; /* first: the hit paths read one small line here */
    void *slot[SM_FN(class_count)][SM_OPT_CAP];
};
static const struct SM_FN(cache) SM_FN(empty_cache);
static const struct SM_FN(cache) SM_FN(retired_cache);
static __thread struct SM_FN(cache) *SM_FN(tls) __attribute__((tls_model("initial-exec"))) =
    (struct SM_FN(cache) *)&SM_FN(empty_cache);

SM_INLINE void SM_FN(thread_exit)(void);

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* The class of an unsized free from the next layer's owner word, or class_count (not cached). */
SM_HOT unsigned SM_FN(owner_class)(const void *p, uintptr_t w)
{
    unsigned cls = SM_NEXT_FN(owner_slot)(p, w) >> 4;
    if (cls < (unsigned)SM_FN(class_count) &&
        !SM_FN(handles_size)(SM_SIZECLASS_FN(class_to_size)(cls)))
        return SM_FN(class_count);
    return cls;
}

/* Is p in the first n entries of s? The array is contiguous: a few cache lines at most. */
SM_HOT bool SM_FN(holds)(void *const *s, unsigned n, const void *p)
{
    for (unsigned i = 0; i < n; i++)
        if (s[i] == p)
            return true;
    return false;
}

/* ---- The hit paths: the thread's own cache only; a miss changes nothing. ---- */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_FN(handles_size)(size))
        return NULL;
    struct SM_FN(cache) *cache = SM_FN(tls);
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(size);
    struct SM_FN(arr) *a = &cache->a[cls];
    if (sm_unlikely(!a->n))
        return NULL;
    return cache->slot[cls][--a->n];
}

SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    unsigned cls;
    if (flags & SM_F_SIZED) {
        if (!SM_FN(handles_size)(size))
            return false;
        cls = SM_SIZECLASS_FN(size_to_class)(size);
    } else if (SM_HAS_CAP(SM_NEXT, SM_CAP_OWNER)) {
        uintptr_t w = SM_NEXT_FN(block_owner)(p);
        *owner_word = w;
        cls = SM_FN(owner_class)(p, w);
        if (cls >= (unsigned)SM_FN(class_count))
            return false;
    } else {
        return false; /* the miss asks getmeta */
    }
    struct SM_FN(cache) *cache = SM_FN(tls);
    struct SM_FN(arr) *a = &cache->a[cls];
    if (a->n >= a->limit || (SM_OPT_DOUBLE_FREE_CHECK && SM_FN(holds)(cache->slot[cls], a->n, p)))
        return false;
    cache->slot[cls][a->n++] = p;
    return true;
}

/* ---- The slow paths ---- */

/* The calling thread's cache, made on its first slow path; NULL: pass everything down. */
SM_SLOWPATH struct SM_FN(cache) *SM_FN(cache_get)(void)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    if (cache != &SM_FN(empty_cache))
        return cache == &SM_FN(retired_cache) ? NULL : cache;
    if (!sm_thread_attach(SM_FN(thread_exit))) {
        SM_FN(tls) = (struct SM_FN(cache) *)&SM_FN(retired_cache);
        return NULL;
    }
    sm_mctx_t r = sm_mctx_alloc(sizeof(struct SM_FN(cache)), SM_MIN_ALIGN, 0);
    cache = (struct SM_FN(cache) *)SM_FN(meta_alloc)(&r);
    if (!cache)
        return NULL; /* this request goes down; a later slow path tries again */
    memset(cache->a, 0, sizeof cache->a);
    for (unsigned cls = 0; cls < (unsigned)SM_FN(class_count); cls++) {
        size_t s = SM_SIZECLASS_FN(class_to_size)(cls);
        size_t lim = (size_t)(SM_OPT_CLASS_BYTES) / s;
        lim = lim < 1 ? 1 : lim > (size_t)(SM_OPT_CAP) ? (size_t)(SM_OPT_CAP) : lim;
        cache->a[cls].limit = SM_FN(handles_size)(s) ? (uint16_t)lim : 0;
    }
    SM_FN(tls) = cache;
    return cache;
}

/* Fills class cls's empty array with up to half its limit; how many it got. */
SM_SLOWPATH unsigned SM_FN(refill)(struct SM_FN(cache) *cache, unsigned cls, const sm_mctx_t *c)
{
    struct SM_FN(arr) *a = &cache->a[cls];
    unsigned want = a->limit > 1 ? a->limit / 2u : 1u, got = 0;
    sm_mctx_t r = sm_mctx_alloc(SM_SIZECLASS_FN(class_to_size)(cls), SM_MIN_ALIGN, c->flags & SM_F_USER);
    r.cpu = c->cpu;
    if (SM_HAS_CAP(SM_NEXT, SM_CAP_BATCH)) {
        got = SM_NEXT_FN(alloc_batch)(&r, cache->slot[cls], want);
    } else {
        for (; got < want; got++) {
            sm_mctx_t q = r;
            if (!(cache->slot[cls][got] = SM_NEXT_FN(alloc)(&q)))
                break;
        }
    }
    a->n = (uint16_t)got;
    return got;
}

/* Gives back the older half (the bottom) of class cls's array: the blocks this thread freed longest
 * ago, the ones least likely to be in its cache lines. */
SM_SLOWPATH void SM_FN(spill)(struct SM_FN(cache) *cache, unsigned cls)
{
    struct SM_FN(arr) *a = &cache->a[cls];
    unsigned k = a->n > 1 ? a->n / 2u : a->n;
    SM_NEXT_FN(free_batch)(cache->slot[cls], k);
    memmove(cache->slot[cls], cache->slot[cls] + k, (a->n - k) * sizeof(void *));
    a->n = (uint16_t)(a->n - k);
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (SM_FN(serves)(c)) {
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size);
        struct SM_FN(cache) *cache = c->align <= SM_MIN_ALIGN ? SM_FN(cache_get)() : NULL;
        if (cache && cache->a[cls].limit && (cache->a[cls].n || SM_FN(refill)(cache, cls, c)))
            return c->ptr = cache->slot[cls][--cache->a[cls].n];
        /* Served below: as the whole class, since a sized free of it will be trusted to hold it. */
        c->size = SM_SIZECLASS_FN(class_to_size)(cls);
    }
    return SM_NEXT_FN(alloc)(c);
}

/* The class of a free on the slow path: the size it names, the owner word (read by the hit, or
 * now), or the largest class getmeta's usable size covers. class_count: not cached. */
SM_SLOWPATH unsigned SM_FN(free_class)(sm_mctx_t *c)
{
    if (c->flags & SM_F_SIZED)
        return SM_FN(handles_size)(c->size) ? SM_SIZECLASS_FN(size_to_class)(c->size) : SM_FN(class_count);
    if (SM_HAS_CAP(SM_NEXT, SM_CAP_OWNER)) {
        if (!(c->flags & SM_F_OWNER)) {
            c->owner_word = SM_NEXT_FN(block_owner)(c->ptr);
            c->flags |= SM_F_OWNER;
        }
        return SM_FN(owner_class)(c->ptr, c->owner_word);
    }
    sm_mctx_t q = sm_mctx_block(c->ptr, 0, 0);
    if (!SM_NEXT_FN(getmeta)(&q) || q.usable < SM_SIZECLASS_FN(class_to_size)(0))
        return SM_FN(class_count);
    size_t u = q.usable < (size_t)SM_SIZECLASS_FN(max_size) ? q.usable : (size_t)SM_SIZECLASS_FN(max_size);
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(u);
    if (SM_SIZECLASS_FN(class_to_size)(cls) > u)
        cls--;
    return SM_FN(handles_size)(SM_SIZECLASS_FN(class_to_size)(cls)) ? cls : SM_FN(class_count);
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    unsigned cls = SM_FN(free_class)(c);
    struct SM_FN(cache) *cache = cls < (unsigned)SM_FN(class_count) ? SM_FN(cache_get)() : NULL;
    if (cache && cache->a[cls].limit) {
        struct SM_FN(arr) *a = &cache->a[cls];
        if (SM_OPT_DOUBLE_FREE_CHECK && SM_FN(holds)(cache->slot[cls], a->n, c->ptr)) {
            SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, c->ptr, "block already in the thread's array");
            return;
        }
        if (a->n >= a->limit)
            SM_FN(spill)(cache, cls);
        cache->slot[cls][a->n++] = c->ptr;
        return;
    }
    SM_NEXT_FN(free)(c);
}

SM_ALLOC_FREE_BY_HIT()

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* Every array of the calling thread's cache goes down; the bytes count as released. */
SM_SLOWPATH SM_UNUSED size_t SM_FN(drain)(struct SM_FN(cache) *cache)
{
    size_t bytes = 0;
    for (unsigned cls = 0; cls < (unsigned)SM_FN(class_count); cls++) {
        struct SM_FN(arr) *a = &cache->a[cls];
        if (!a->n)
            continue;
        bytes += (size_t)a->n * SM_SIZECLASS_FN(class_to_size)(cls);
        unsigned n = a->n;
        a->n = 0;
        SM_NEXT_FN(free_batch)(cache->slot[cls], n);
    }
    return bytes;
}

SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    if ((r->how == SM_RELEASE_ALL || r->how == SM_RELEASE_THREAD) && cache != &SM_FN(empty_cache) &&
        cache != &SM_FN(retired_cache))
        r->released += SM_FN(drain)(cache);
    SM_NEXT_FN(release)(r);
}

/* Retires the thread before it gives its blocks back: a free made below while it does (none should
 * be) or by a later destructor passes straight down. A second call finds the retired cache. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    SM_FN(tls) = (struct SM_FN(cache) *)&SM_FN(retired_cache);
    if (cache != &SM_FN(empty_cache) && cache != &SM_FN(retired_cache)) {
        SM_FN(drain)(cache);
        sm_mctx_t f = sm_mctx_block(cache, sizeof *cache, SM_F_SIZED);
        SM_FN(meta_free)(&f);
    }
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#undef SM_OPT_CAP
#undef SM_OPT_CLASS_BYTES
#undef SM_OPT_DOUBLE_FREE_CHECK
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#include "../../core/layer_end.h"
