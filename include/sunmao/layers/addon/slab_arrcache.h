/* slab_arrcache: a per-thread array cache that keeps the thread's blocks within few pages (the
 * paper's Table 2 `slab_arrcache`: an array cache for TLB locality). It is tarrcache.h with a
 * different order in each class's array; read that header for everything not said here (slots,
 * the per-thread lifecycle, refills and spills through BATCH, the constant caches, fork, getmeta).
 *
 * The definition of "locality" here: each class's array is kept sorted by address, so the blocks of
 * one page (2^SM_OPT_PAGE_SHIFT bytes) sit together in it, and an allocation takes
 *   - a block of the class's current page while the array holds one (binary search), else
 *   - a block of the page with the most blocks in the array (the densest run, one linear scan),
 *     which becomes the current page.
 * So a burst of allocations is served from as few pages as the array allows, whatever order the
 * blocks were freed in (a LIFO, tarrcache, serves them in free order: a thread that frees
 * objects of several structures in turn hands out one object per structure's page in turn). A full
 * array gives back its upper half by address: the thread's blocks drift to the lowest pages it
 * holds, and the higher pages' blocks go back to the next layer, where their slabs can empty. A
 * refill is sorted in (insertion sort of at most half the capacity).
 * Cost: a free is a binary search and a move of the entries above it (the whole array's pointers
 * in the worst case: SM_OPT_CAP x 8 bytes); an allocation a binary search and a move, plus a scan
 * when its page runs out. A double free is found by the same binary search (no extra cost), and
 * reported through SM_ERR. tests/unit/slab_arrcache.c checks the order; bench/workloads/tlb.c
 * measures pages touched, time and dTLB misses against tarrcache (docs/layers.md).
 *
 * Parameters and slots: as tarrcache (SM_SIZECLASS and SM_ERR required; size_handle, default max
 * 8 KiB).
 * Options:
 *   SM_OPT_CAP          most blocks one class's array holds (default 64, in [2, 4096])
 *   SM_OPT_CLASS_BYTES  a second bound on a class's array, in bytes (default 64 KiB): a class of
 *                       size s holds min(SM_OPT_CAP, max(1, SM_OPT_CLASS_BYTES / s)) blocks
 *   SM_OPT_PAGE_SHIFT   log2 of the page size the order groups blocks by (default 12: 4 KiB; a
 *                       slab's shift groups by slab)
 * Capabilities: needs none (uses BATCH and OWNER when offered); offers HIT (the hit paths touch
 * only the thread's own cache, but are longer than tarrcache's), and MOVE, forwarded. No locks.
 * @model: name=slab_arrcache kind=addon flag cache slot sizeclass slot err range
 * @model: key cap int key class_bytes size key page_shift int
 * @check: <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=t SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "slab_arrcache: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "slab_arrcache: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SIZECLASS
#error "slab_arrcache: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|log2b|prime|...)"
#endif
#ifndef SM_ERR
#error "slab_arrcache: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_CAP
#define SM_OPT_CAP 64
#endif
#ifndef SM_OPT_PAGE_SHIFT
#define SM_OPT_PAGE_SHIFT 12
#endif
#ifndef SM_OPT_CLASS_BYTES
#define SM_OPT_CLASS_BYTES (64u << 10)
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX (8u << 10)
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"
_Static_assert((SM_OPT_CAP) >= 2 && (SM_OPT_CAP) <= 4096, "slab_arrcache: SM_OPT_CAP must be in [2, 4096]");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "slab_arrcache: SM_SIZE_MAX is above the largest size of the sizeclass policy");
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
    uintptr_t cur[SM_FN(class_count)]; /* the page each class serves from (address >> shift) */
    void *slot[SM_FN(class_count)][SM_OPT_CAP]; /* ascending addresses */
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

/* The first index of s[0..n) (ascending) whose address is >= key; n if none. */
SM_HOT unsigned SM_FN(lower)(void *const *s, unsigned n, uintptr_t key)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if ((uintptr_t)s[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The start of the longest run of one page in s[0..n) (n > 0); the lowest such page on a tie. */
SM_SLOWPATH unsigned SM_FN(densest)(void *const *s, unsigned n)
{
    unsigned best = 0, best_len = 0;
    for (unsigned i = 0; i < n;) {
        uintptr_t page = (uintptr_t)s[i] >> (SM_OPT_PAGE_SHIFT);
        unsigned j = i + 1;
        while (j < n && ((uintptr_t)s[j] >> (SM_OPT_PAGE_SHIFT)) == page)
            j++;
        if (j - i > best_len)
            best = i, best_len = j - i;
        i = j;
    }
    return best;
}

/* Takes a block of class cls (its array not empty): from the current page, else from the densest. */
SM_HOT void *SM_FN(take)(struct SM_FN(cache) *cache, unsigned cls)
{
    void **s = cache->slot[cls];
    unsigned n = cache->a[cls].n;
    uintptr_t page = cache->cur[cls];
    unsigned i = SM_FN(lower)(s, n, page << (SM_OPT_PAGE_SHIFT));
    if (i >= n || ((uintptr_t)s[i] >> (SM_OPT_PAGE_SHIFT)) != page) {
        i = SM_FN(densest)(s, n);
        cache->cur[cls] = (uintptr_t)s[i] >> (SM_OPT_PAGE_SHIFT);
    }
    void *p = s[i];
    memmove(s + i, s + i + 1, (n - i - 1) * sizeof(void *));
    cache->a[cls].n = (uint16_t)(n - 1);
    return p;
}

/* Puts p in order into class cls's array (room checked by the caller); false if it is there already. */
SM_HOT bool SM_FN(insert)(struct SM_FN(cache) *cache, unsigned cls, void *p)
{
    void **s = cache->slot[cls];
    unsigned n = cache->a[cls].n;
    unsigned i = SM_FN(lower)(s, n, (uintptr_t)p);
    if (i < n && s[i] == p)
        return false;
    memmove(s + i + 1, s + i, (n - i) * sizeof(void *));
    s[i] = p;
    cache->a[cls].n = (uint16_t)(n + 1);
    return true;
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
    return SM_FN(take)(cache, cls);
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
    return a->n < a->limit && SM_FN(insert)(cache, cls, p);
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
    memset(cache->cur, 0, sizeof cache->cur);
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
    void **s = cache->slot[cls];
    for (unsigned i = 1; i < got; i++) { /* in order; a batch mostly comes ascending already */
        void *p = s[i];
        unsigned j = i;
        for (; j > 0 && (uintptr_t)s[j - 1] > (uintptr_t)p; j--)
            s[j] = s[j - 1];
        s[j] = p;
    }
    a->n = (uint16_t)got;
    return got;
}

/* Gives back the upper half by address of class cls's array: the thread keeps its lowest pages. */
SM_SLOWPATH void SM_FN(spill)(struct SM_FN(cache) *cache, unsigned cls)
{
    struct SM_FN(arr) *a = &cache->a[cls];
    unsigned k = a->n > 1 ? a->n / 2u : a->n;
    a->n = (uint16_t)(a->n - k);
    SM_NEXT_FN(free_batch)(cache->slot[cls] + a->n, k);
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (SM_FN(serves)(c)) {
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size);
        struct SM_FN(cache) *cache = c->align <= SM_MIN_ALIGN ? SM_FN(cache_get)() : NULL;
        if (cache && cache->a[cls].limit && (cache->a[cls].n || SM_FN(refill)(cache, cls, c)))
            return c->ptr = SM_FN(take)(cache, cls);
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
        if (a->n >= a->limit) {
            unsigned i = SM_FN(lower)(cache->slot[cls], a->n, (uintptr_t)c->ptr);
            if (!(i < a->n && cache->slot[cls][i] == c->ptr))
                SM_FN(spill)(cache, cls);
        }
        if (!SM_FN(insert)(cache, cls, c->ptr))
            SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, c->ptr, "block already in the thread's array");
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
#undef SM_OPT_PAGE_SHIFT
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#include "../../core/layer_end.h"
