/* carrcache_lk: a per-CPU array cache (the paper's Table 2 `carrcache_lk`): per CPU and per size
 * class, one array (stack) of free blocks under its own lock, in front of a layer that serves those
 * classes. A thread uses the arrays of the CPU its request names (sm_mctx_cpu(c): the socket's
 * cpu argument, cmalloc-style, or the CPU it runs on), so blocks freed on a CPU are served again
 * on that CPU: its caches hold them, and a partitioned allocator (DRAM banks, cache sets) keeps
 * each partition's memory apart. Unlike a thread cache, nothing is lost or held per thread: a
 * thread's exit leaves its CPU's arrays to the next thread there.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots:
 *   SM_SIZECLASS  (required) the class sizes; when the next layer offers BATCH or OWNER its classes
 *                 must be these (checked)
 *   SM_SYNC       (required) the lock of each array (spinlock, mutex, ...; `none`: one thread only)
 *   SM_ERR        (required) a double free found in an array is reported through it, then ignored
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max 8 KiB): the sizes cached; others, and
 *                 alignments above SM_MIN_ALIGN, go down (in range: asked as their whole class)
 * Options:
 *   SM_OPT_CPUS         arrays per class, a power of two (default 16); CPU k uses k & (CPUS - 1),
 *                       so CPUs beyond the cap share by their low bits
 *   SM_OPT_CAP          most blocks one array holds (default 32, in [2, 4096])
 *   SM_OPT_CLASS_BYTES  a second bound on one array, in bytes (default 64 KiB): a class of size s
 *                       holds min(SM_OPT_CAP, max(1, SM_OPT_CLASS_BYTES / s)) blocks
 * Paths (each takes one array's lock for a few loads and stores): alloc pops its CPU's array of the
 * class; an empty one is refilled with half its limit by one alloc_batch (one alloc each without
 * BATCH), made with no lock held, then pushed under the lock (what no longer fits goes back). A free
 * pushes on its CPU's array; a full one gives its older half back by one free_batch, after the lock
 * is dropped. An unsized free's class: the next layer's owner_slot when it offers OWNER, else the
 * largest class getmeta's usable size covers. Requests and blocks of no cached class go down.
 * Lock order: an array's lock is never held while another lock is taken or the next layer called,
 * so it nests under nothing and over nothing; the fork hooks take every array's lock (CPU-major,
 * then class), then the next layer's, and release them in the reverse order.
 * Invariants: n <= limit <= SM_OPT_CAP in every array; every cached block holds at least its
 * class's size. L_release (ALL) gives every array back; thread exit forwards. The arrays are a
 * static object: CPUS x classes x (SM_OPT_CAP pointers + lock), in .bss, touched only when used.
 * Capabilities: needs none (uses BATCH and OWNER when offered); offers MOVE, forwarded, and not HIT
 * (its paths take a lock, which a hit path must not). Properties: thread_safe when both the lock
 * policy and the next layer are; min_align the next layer's; zeroed 0. getmeta of a cached block answers as the next layer
 * does (live): allowed for a freed block.
 * @model: name=carrcache_lk kind=addon flag cache slot sizeclass slot sync slot err range
 * @model: key cpus int key cap int key class_bytes size
 * @check: <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> <sunmao/policies/sync/spinlock.h> SM_LAYER=t SM_SIZECLASS=tc SM_ERR=warn SM_SYNC=spinlock
 * @check-next: fake */
#include <string.h>
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "carrcache_lk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "carrcache_lk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SIZECLASS
#error "carrcache_lk: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|log2b|prime|...)"
#endif
#ifndef SM_SYNC
#error "carrcache_lk: policy slot 'sync' is empty (SM_SYNC = spinlock|mutex|...)"
#endif
#ifndef SM_ERR
#error "carrcache_lk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_CPUS
#define SM_OPT_CPUS 16
#endif
#ifndef SM_OPT_CAP
#define SM_OPT_CAP 32
#endif
#ifndef SM_OPT_CLASS_BYTES
#define SM_OPT_CLASS_BYTES (64u << 10)
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX (8u << 10)
#endif
#include "../../policies/size_handle.h"
_Static_assert((SM_OPT_CPUS) >= 1 && ((SM_OPT_CPUS) & ((SM_OPT_CPUS) - 1)) == 0,
               "carrcache_lk: SM_OPT_CPUS must be a power of two");
_Static_assert((SM_OPT_CAP) >= 2 && (SM_OPT_CAP) <= 4096, "carrcache_lk: SM_OPT_CAP must be in [2, 4096]");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "carrcache_lk: SM_SIZE_MAX is above the largest size of the sizeclass policy");
_Static_assert(!SM_HAS_CAP(SM_NEXT, SM_CAP_BATCH | SM_CAP_OWNER) ||
                   ((long)SM_PROP(SM_NEXT, batch_classes) == (long)SM_SIZECLASS_FN(count) &&
                    (long)SM_PROP(SM_NEXT, batch_max_size) == (long)SM_SIZECLASS_FN(max_size)),
               SM_STR(SM_LAYER) ": its sizeclass policy differs from that of its next layer " SM_STR(SM_NEXT));

enum {
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe) && SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
    SM_FN(class_count) = SM_SIZECLASS_FN(count),
    SM_FN(cpus) = SM_OPT_CPUS,
    SM_FN(cap) = SM_OPT_CAP,
    SM_FN(arrays) = SM_OPT_CPUS * SM_SIZECLASS_FN(count),
};

struct SM_FN(arr) {
    SM_SYNC_FN(t) lock;
    unsigned n;
    void *slot[SM_OPT_CAP];
};
static struct {
    struct SM_FN(arr) arr[SM_FN(arrays)]; /* CPU-major: arr[cpu * class_count + cls] */
} SM_FN(obj) = { .arr = { [0 ... SM_FN(arrays) - 1] = { .lock = SM_SYNC_INIT } } };

/* The most blocks class cls's arrays hold: the cap, or fewer for large classes; 0 if not cached. */
SM_INLINE unsigned SM_FN(limit)(unsigned cls)
{
    size_t s = SM_SIZECLASS_FN(class_to_size)(cls);
    if (!SM_FN(handles_size)(s))
        return 0;
    size_t lim = (size_t)(SM_OPT_CLASS_BYTES) / s;
    return lim < 1 ? 1u : lim > (size_t)(SM_OPT_CAP) ? (unsigned)(SM_OPT_CAP) : (unsigned)lim;
}

/* c's CPU's array of class cls. */
SM_INLINE struct SM_FN(arr) *SM_FN(array)(sm_mctx_t *c, unsigned cls)
{
    unsigned cpu = (unsigned)sm_mctx_cpu(c) & ((SM_OPT_CPUS) - 1u);
    return &SM_FN(obj).arr[cpu * (unsigned)SM_FN(class_count) + cls];
}

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* Refills class cls for c with no lock held: one block for c, the rest pushed on its CPU's array. */
SM_SLOWPATH void *SM_FN(refill)(sm_mctx_t *c, unsigned cls, struct SM_FN(arr) *k)
{
    void *got[SM_OPT_CAP];
    unsigned lim = SM_FN(limit)(cls), want = lim > 1 ? lim / 2u : 1u, n = 0;
    sm_mctx_t r = sm_mctx_alloc(SM_SIZECLASS_FN(class_to_size)(cls), SM_MIN_ALIGN, c->flags & SM_F_USER);
    r.cpu = c->cpu;
    if (SM_HAS_CAP(SM_NEXT, SM_CAP_BATCH)) {
        n = SM_NEXT_FN(alloc_batch)(&r, got, want);
    } else {
        for (; n < want; n++) {
            sm_mctx_t q = r;
            if (!(got[n] = SM_NEXT_FN(alloc)(&q)))
                break;
        }
    }
    if (!n)
        return NULL;
    unsigned i = 1;
    SM_SYNC_FN(lock)(&k->lock);
    for (; i < n && k->n < lim; i++)
        k->slot[k->n++] = got[i];
    SM_SYNC_FN(unlock)(&k->lock);
    if (i < n) /* another thread filled the array meanwhile */
        SM_NEXT_FN(free_batch)(got + i, n - i);
    return got[0];
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (c->align <= SM_MIN_ALIGN && SM_FN(serves)(c)) {
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size);
        if (SM_FN(limit)(cls)) {
            struct SM_FN(arr) *k = SM_FN(array)(c, cls);
            void *p = NULL;
            SM_SYNC_FN(lock)(&k->lock);
            if (k->n)
                p = k->slot[--k->n];
            SM_SYNC_FN(unlock)(&k->lock);
            if (p || (p = SM_FN(refill)(c, cls, k)))
                return c->ptr = p;
        }
    }
    if (SM_FN(serves)(c)) /* served below: as the whole class, since a sized free of it is trusted */
        c->size = SM_SIZECLASS_FN(class_to_size)(SM_SIZECLASS_FN(size_to_class)(c->size));
    return SM_NEXT_FN(alloc)(c);
}

/* A free's class: its size, its owner word, or getmeta's usable size; class_count: not cached. */
SM_SLOWPATH unsigned SM_FN(free_class)(sm_mctx_t *c)
{
    unsigned cls;
    if (c->flags & SM_F_SIZED) {
        if (!SM_FN(handles_size)(c->size))
            return SM_FN(class_count);
        cls = SM_SIZECLASS_FN(size_to_class)(c->size);
    } else if (SM_HAS_CAP(SM_NEXT, SM_CAP_OWNER)) {
        if (!(c->flags & SM_F_OWNER)) {
            c->owner_word = SM_NEXT_FN(block_owner)(c->ptr);
            c->flags |= SM_F_OWNER;
        }
        cls = SM_NEXT_FN(owner_slot)(c->ptr, c->owner_word) >> 4;
        if (cls >= (unsigned)SM_FN(class_count))
            return SM_FN(class_count);
    } else {
        sm_mctx_t q = sm_mctx_block(c->ptr, 0, 0);
        if (!SM_NEXT_FN(getmeta)(&q) || q.usable < SM_SIZECLASS_FN(class_to_size)(0))
            return SM_FN(class_count);
        size_t u = q.usable < (size_t)SM_SIZECLASS_FN(max_size) ? q.usable : (size_t)SM_SIZECLASS_FN(max_size);
        cls = SM_SIZECLASS_FN(size_to_class)(u);
        if (SM_SIZECLASS_FN(class_to_size)(cls) > u)
            cls--;
    }
    return SM_FN(limit)(cls) ? cls : SM_FN(class_count);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    unsigned cls = SM_FN(free_class)(c);
    if (cls >= (unsigned)SM_FN(class_count)) {
        SM_NEXT_FN(free)(c);
        return;
    }
    struct SM_FN(arr) *k = SM_FN(array)(c, cls);
    void *spill[SM_OPT_CAP];
    unsigned nspill = 0, lim = SM_FN(limit)(cls);
    bool twice = false;
    SM_SYNC_FN(lock)(&k->lock);
    for (unsigned i = 0; i < k->n && !twice; i++)
        twice = k->slot[i] == c->ptr;
    if (!twice) {
        if (k->n >= lim) { /* the older half goes down, after the lock is dropped */
            nspill = k->n > 1 ? k->n / 2u : k->n;
            memcpy(spill, k->slot, nspill * sizeof(void *));
            memmove(k->slot, k->slot + nspill, (k->n - nspill) * sizeof(void *));
            k->n -= nspill;
        }
        k->slot[k->n++] = c->ptr;
    }
    SM_SYNC_FN(unlock)(&k->lock);
    if (twice)
        SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, c->ptr, "block already in its CPU's array");
    if (nspill)
        SM_NEXT_FN(free_batch)(spill, nspill);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* Every array goes down on a release of everything (one array at a time, each under its lock only
 * while it is copied out); a decayed release leaves them (they are small and shared). */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    if (r->how == SM_RELEASE_ALL) {
        void *out[SM_OPT_CAP];
        for (unsigned i = 0; i < (unsigned)SM_FN(arrays); i++) {
            struct SM_FN(arr) *k = &SM_FN(obj).arr[i];
            SM_SYNC_FN(lock)(&k->lock);
            unsigned n = k->n;
            memcpy(out, k->slot, n * sizeof(void *));
            k->n = 0;
            SM_SYNC_FN(unlock)(&k->lock);
            if (n) {
                r->released += (size_t)n * SM_SIZECLASS_FN(class_to_size)(i % (unsigned)SM_FN(class_count));
                SM_NEXT_FN(free_batch)(out, n);
            }
        }
    }
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

/* SM_FORK_HOOKS_ONE_LOCK for many: every array's lock in index order, then the next layer's. */
SM_INLINE void SM_FN(fork_prepare)(void)
{
    for (unsigned i = 0; i < (unsigned)SM_FN(arrays); i++)
        SM_SYNC_FN(fork_lock)(&SM_FN(obj).arr[i].lock);
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    SM_NEXT_FN(fork_parent)();
    for (unsigned i = (unsigned)SM_FN(arrays); i-- > 0;)
        SM_SYNC_FN(fork_unlock)(&SM_FN(obj).arr[i].lock);
}
SM_INLINE void SM_FN(fork_child)(void)
{
    SM_NEXT_FN(fork_child)();
    for (unsigned i = (unsigned)SM_FN(arrays); i-- > 0;)
        SM_SYNC_FN(fork_reinit)(&SM_FN(obj).arr[i].lock);
}

#undef SM_OPT_CPUS
#undef SM_OPT_CAP
#undef SM_OPT_CLASS_BYTES
#define SM_LAYER_OFFERS SM_CAP_MOVE
#include "../../core/layer_end.h"
