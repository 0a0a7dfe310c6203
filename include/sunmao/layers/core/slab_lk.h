/* slab_lk: a slab allocator with one lock per size class (paper Table 2: "slab 式, 每大小阶锁").
 * A core layer: it carves slabs obtained from the next layer into objects of one size class.
 * Why it is built this way, with the measurements: docs/layers.md, section slab_lk.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots:
 *   SM_SYNC       one lock per class (and shard), one for the owner map (policies/sync/)
 *   SM_SIZECLASS  the class sizes (policies/sizeclass/; the composition includes the policy first)
 *   SM_ERR        invalid and double frees are reported through it, then ignored
 *   SM_RETAIN     which emptied slabs stay (policies/retain/): keep_last (default), none
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max: the policy's max_size, at most 2 MiB);
 *                 other sizes go to the next layer.
 * Options:
 *   SM_OPT_SLAB_SIZE  the slab size of the small classes (default 64 KiB, a power of two in
 *                     [4 KiB, 64 KiB]); a class gets a larger power of two where this one would
 *                     hold fewer than 8 objects. Slabs are asked of the next layer aligned to
 *                     their size (buddy_glk does that).
 *   SM_OPT_EMPTY_MAX  empty slabs kept, all classes together: the bound given to the retain policy
 *                     (default: the class count, no bound beyond keep_last's one per class).
 *   SM_OPT_COLOURS    slab colours (default 8, a power of two <= 16; 1 = off): a slab's objects
 *                     start 0..COLOURS-1 cache lines in, by the slab's address (slab_lk/geometry.h).
 *   SM_OPT_SHARDS     CPU shards per class (default 1, a power of two <= 64), each with its own
 *                     lock and slabs; a request takes from its CPU's shard (slab_lk/shards.h).
 *   SM_OPT_SHARD_MAX  classes larger than this are not sharded (default SM_SIZE_MAX): every CPU
 *                     uses shard 0.
 * Properties: thread_safe from the sync policy, min_align 16, zeroed 0.
 * Capabilities (core/capability.h; slab_lk/batch.h): BATCH (alloc_batch in one critical section of
 * a class, free_batch with runs of one class in one section each) and OWNER (block_owner: one
 * owner-map lookup; owner_slot; owner_local false for a slab of another CPU's shard; owner_foreign
 * the word bits of the other shards). A free that carries its word (c->owner_word) is not looked up again. Also L_block_slot(p), L_block_class(p).
 *
 * Invariants:
 * - A slab is one block of the next layer, aligned to its size, its descriptor at its start (or, for
 *   the classes whose objects would fill it exactly, outside it, in the descriptor map). Every
 *   granule of a live slab maps, in the owner map (slab_lk/map.h), to the word first object << 16
 *   | 16 x class (| its home shard's bit, for 2-8 shards); an address that maps to 0 is not ours
 *   and is passed on.
 * - A slab with a free object is on its class's partial list; a full one is on no list. Allocation
 *   takes the lowest free object of the list's head. A slab that becomes empty stays on the list if
 *   the retain policy keeps it (a class keeps at most one), else it leaves the list and goes back.
 * - The bitmap (1 = free) is the only record of free objects: nothing is written into them, so a
 *   double free is a bit already set and a use after free cannot corrupt the allocator's state.
 * - A slab holding a live object is never released: its descriptor's fields from `objects` to
 *   `bytes` and its class's geometry are immutable and read without a lock.
 * - A slab is under one class struct (s->home, its shard's); a steal moves it with both locks held.
 * Lock order: class lock -> map lock -> next layer's locks, only. Every request path hands its
 * class's critical section to the sync policy's atomic_exec (a combining policy may run it on
 * another thread); a steal only tries another shard's class lock, from inside a section; eviction
 * and release(ALL) run with no lock held and take one class at a time.
 * A free racing with the release of the slab it points into is a double free the map cannot always
 * catch.
 * Parts, in layers/core/slab_lk/ and included below (by this template only): lists.h (a class's
 * partial list, taking and putting objects), geometry.h (class geometry, colours, object index),
 * map.h (owner map; descriptors kept outside their slabs), shards.h (CPU partitions), slabs.h (slabs from and back to the next layer,
 * eviction), batch.h (capabilities BATCH and OWNER).
 * @model: name=slab_lk kind=core slot sync slot sizeclass slot err slot retain=keep_last range
 * @model: key slab_size size key empty_max int key colours int key shards int key shard_max size
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/conf.h"
#include "../../core/bits.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"
#include "../../platform/platform.h"
#include "../../policies/retain/keep_last.h" /* the default retain policy */

#ifndef SM_LAYER
#error "slab_lk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "slab_lk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "slab_lk: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_SIZECLASS
#error "slab_lk: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|log2b|prime|<interval policy>)"
#endif
#ifndef SM_ERR
#error "slab_lk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_RETAIN
#define SM_RETAIN keep_last
#endif
#ifndef SM_OPT_SLAB_SIZE
#define SM_OPT_SLAB_SIZE 65536
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX SM_SIZECLASS_FN(max_size)
#endif
#ifndef SM_OPT_EMPTY_MAX
#define SM_OPT_EMPTY_MAX SM_SIZECLASS_FN(count)
#endif
#ifndef SM_OPT_COLOURS
#define SM_OPT_COLOURS 8
#endif
#ifndef SM_OPT_SHARDS
#define SM_OPT_SHARDS 1
#endif
#ifndef SM_OPT_SHARD_MAX
#define SM_OPT_SHARD_MAX SM_SIZE_MAX
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

_Static_assert((SM_OPT_SLAB_SIZE) >= 4096 && (SM_OPT_SLAB_SIZE) <= 65536 &&
                   ((SM_OPT_SLAB_SIZE) & ((SM_OPT_SLAB_SIZE) - 1)) == 0,
               "slab_lk: SM_OPT_SLAB_SIZE must be a power of two in [4 KiB, 64 KiB]");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "slab_lk: SM_SIZE_MAX is above the largest size of the sizeclass policy");
_Static_assert((size_t)(SM_SIZE_MAX) <= ((size_t)2 << 20),
               "slab_lk: objects above 2 MiB do not belong in slabs; lower SM_SIZE_MAX");
_Static_assert((SM_OPT_EMPTY_MAX) >= 1, "slab_lk: SM_OPT_EMPTY_MAX must be at least 1");
_Static_assert((SM_OPT_SHARDS) >= 1 && (SM_OPT_SHARDS) <= 64 && ((SM_OPT_SHARDS) & ((SM_OPT_SHARDS) - 1)) == 0,
               "slab_lk: SM_OPT_SHARDS must be a power of two in [1, 64]");
_Static_assert((SM_OPT_COLOURS) >= 1 && (SM_OPT_COLOURS) <= 16 && ((SM_OPT_COLOURS) & ((SM_OPT_COLOURS) - 1)) == 0,
               "slab_lk: SM_OPT_COLOURS must be a power of two in [1, 16]");

enum {
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe),
    SM_FN(min_align) = SM_MIN_ALIGN,
    SM_FN(zeroed) = 0,
    SM_FN(class_count) = SM_SIZECLASS_FN(count),
    SM_FN(batch_classes) = SM_SIZECLASS_FN(count),   /* capability BATCH (core/capability.h) */
    SM_FN(batch_max_size) = SM_SIZECLASS_FN(max_size),
    SM_FN(shards) = SM_OPT_SHARDS,
    SM_FN(map_shift) = __builtin_ctz(SM_OPT_SLAB_SIZE),
    SM_FN(bitmap_words) = 64,
    SM_FN(max_objects) = 64 * 64,
    SM_FN(min_objects) = 8,
    SM_FN(max_object_align) = 4096, /* larger alignments would waste too much of a slab */
    SM_FN(colour_unit) = 64,          /* a cache line: one colour step */
    SM_FN(offslab_min) = 1024,        /* classes from here up may keep their descriptors outside */
};

/* The descriptor, at the start of its slab. Free objects are a bitmap with a summary word of the
 * non-empty words: allocation is two count-trailing-zeros. 64 x 64 bits cap a slab at 4096 objects,
 * which is why SM_OPT_SLAB_SIZE is at most 64 KiB (4096 objects of 16 bytes). */
struct SM_FN(slab) {
    struct SM_FN(slab) *prev, *next; /* partial list; class lock */
    char *objects;                   /* immutable from here to `bytes` */
    struct SM_FN(class) *home;       /* the class struct (of a shard) whose list and lock the slab is
                                      * under; changes only with both the old and new one's lock held
                                      * (a steal), so read it with atomics and check it once locked */
    uint32_t size, nobjs, bytes;
    uint32_t nfree;                  /* class lock, like the bitmap */
    uint64_t nonempty_words;         /* bit w set iff free_bits[w] != 0 */
    uint64_t free_bits[];            /* bit i set iff object i is free */
};

struct SM_FN(class) {
    SM_SYNC_FN(t) lock;
    struct SM_FN(slab) *partial;  /* slabs with a free object */
    unsigned npartial;            /* slabs on that list; class lock to write, read without it by a
                                   * steal looking for a victim */
    SM_RETAIN_FN(class_t) retain; /* the kept empty slab, on the list (SM_RETAIN policy) */
    uint32_t slab_bytes;          /* 0 until the geometry is computed, on the class's first slab */
    uint64_t nmalloc, nfree;      /* statistics: objects handed up and taken back; class lock */
} SM_CACHE_ALIGNED;

/* All zero but the locks' initialisers (zero for spinlock and none), so it stays in .bss. */
static struct {
    /* first, on the page of shard 0's classes: a small program touches one page of this object
     * besides the map's root entry */
    SM_SYNC_FN(t) map_lock;  /* owner-map updates: slabs of different classes come and go at once */
    SM_RETAIN_FN(t) retain;  /* the retain policy's count of kept slabs (atomics) */
    /* bit i: class struct cls[i] keeps an empty slab (set after the policy keeps one, cleared
     * with unkeep, both under the class's lock; atomic or/and): evict reads these instead of every
     * class struct of every shard */
    uint64_t kept_bits[(SM_FN(shards) * SM_FN(class_count) + 63) / 64];
    size_t map_nodes;        /* owner-map leaves held from the metadata route; map lock */
    size_t slabs[SM_FN(class_count)]; /* statistics: slabs held, by class (atomic, slow paths) */
    void *bad_slab;          /* a misaligned slab the next layer gave inside a section, to report */
    struct SM_FN(class) cls[SM_FN(shards) * SM_FN(class_count)]; /* shard-major (slab_lk/shards.h) */
    uintptr_t *map[SM_PAGEMAP2_ROOT_LEN(SM_FN(map_shift))];       /* the owner map (slab_lk/map.h) */
    /* Slabs whose descriptors are kept outside them (geometry's offslab): slab start -> descriptor
     * (three levels, 32 KiB nodes: read on slow paths only, and small where metadata is a static
     * pool), and the descriptors not in use, linked through `next`; map lock (slab_lk/map.h). */
    sm_pagemap_t desc_map;
    struct SM_FN(slab) *desc_free;
    size_t desc_pages;       /* metadata blocks carved into descriptors; map lock */
} SM_FN(obj) = {
    .cls = { [0 ... SM_FN(shards) * SM_FN(class_count) - 1] = { .lock = SM_SYNC_INIT } },
    .map_lock = SM_SYNC_INIT,
};

/* The shards requests are spread over: SM_OPT_SHARDS, or fewer with narenas (core/conf.h), read
 * once at create; only the slow paths that pick a shard ask (slab_lk/shards.h). */
static unsigned SM_FN(shards_live) = SM_OPT_SHARDS;

SM_SLOWPATH void SM_FN(report)(sm_err_kind_t kind, const void *p, const char *detail)
{
    SM_ERR_FN(raise)(kind, SM_LAYER_NAME, p, detail);
}

/* A section found a slab from the next layer misaligned (slab_lk/slabs.h) and could not raise it
 * there; the request's thread does, after the section, once per such slab. */
SM_SLOWPATH void SM_FN(report_bad_slab)(void)
{
    void *bad = __atomic_exchange_n(&SM_FN(obj).bad_slab, NULL, __ATOMIC_RELAXED);
    if (sm_unlikely(bad != NULL))
        SM_FN(report)(SM_ERR_BAD_REQUEST, bad, "the next layer returned a slab not aligned to its size");
}

#define SM_SLAB_LK_PARTS 1
#include "slab_lk/lists.h"
#include "slab_lk/geometry.h"
#include "slab_lk/map.h"
#include "slab_lk/shards.h"
#include "slab_lk/slabs.h"

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(shards_live) = sm_conf_shards(SM_OPT_SHARDS);
    return SM_NEXT_FN(create)();
}

/* Critical sections, handed to the sync policy's atomic_exec, which may run them on another thread
 * (a combining policy): they set no errno and raise nothing; results travel back in the argument.
 * A section may take the map lock (class -> map order), call the next layer (a new slab) and
 * trylock another shard's class lock (a steal), which never waits, so no two sections can wait on
 * each other. */
struct SM_FN(cs_alloc) { struct SM_FN(class) *k; unsigned cls; void *ptr; };
SM_INLINE void SM_FN(cs_alloc)(void *arg)
{
    struct SM_FN(cs_alloc) *a = (struct SM_FN(cs_alloc) *)arg;
    struct SM_FN(slab) *s = a->k->partial;
    if (sm_unlikely(!s) && !(s = SM_FN(refill)(a->k, a->cls))) {
        a->ptr = NULL;
        return;
    }
    a->ptr = SM_FN(take_locked)(a->k, s);
}

/* A free of object idx of slab s under class k, the slab's home when the caller looked; moved: it
 * was stolen since, and the caller tries again under its new home. */
struct SM_FN(cs_free) {
    struct SM_FN(class) *k;
    struct SM_FN(slab) *s, *release;
    size_t idx;
    bool moved, freed, evict;
};
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    f->moved = SM_FN(shards) > 1 && sm_unlikely(__atomic_load_n(&f->s->home, __ATOMIC_RELAXED) != f->k);
    if (!f->moved)
        f->freed = SM_FN(put_locked)(f->k, f->s, f->idx, &f->release, &f->evict);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (!SM_FN(serves)(c))
        return SM_NEXT_FN(alloc)(c);
    unsigned cls;
    if (sm_likely(c->align <= SM_MIN_ALIGN)) {
        cls = SM_SIZECLASS_FN(size_to_class)(c->size);
    } else {
        cls = SM_FN(aligned_class)(c->size, c->align);
        if (cls >= SM_FN(class_count))
            return SM_NEXT_FN(alloc)(c);
    }
    struct SM_FN(cs_alloc) a = { SM_FN(class_here)(cls, c), cls, NULL };
    SM_SYNC_FN(atomic_exec)(&a.k->lock, SM_FN(cs_alloc), &a);
    if (sm_unlikely(!a.ptr)) {
        SM_FN(report_bad_slab)();
        errno = ENOMEM;
    }
    return c->ptr = a.ptr;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    /* the word a thread cache above read, if it read one (core/capability.h, OWNER); the layers
     * below get no word of ours */
    uintptr_t w = (c->flags & SM_F_OWNER) ? c->owner_word : SM_FN(lookup)(c->ptr);
    c->flags &= ~(unsigned)SM_F_OWNER;
    if (!w) {
        SM_NEXT_FN(free)(c);
        return;
    }
    unsigned cls = SM_FN(word_cls)(w);
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    size_t idx = SM_FN(object_index)(g, w, c->ptr);
    if (sm_unlikely(idx >= g->nobjs)) {
        SM_FN(report)(SM_ERR_INVALID_FREE, c->ptr, "pointer into a slab is not the start of an object; ignored");
        return;
    }
    if (sm_unlikely((c->flags & SM_F_SIZED) && c->size > SM_SIZECLASS_FN(class_to_size)(cls))) {
        SM_FN(report)(SM_ERR_INVALID_FREE, c->ptr, "sized free larger than the block's size class; ignored");
        return;
    }
    struct SM_FN(cs_free) f = { NULL, SM_FN(word_slab)(w, g), NULL, idx, false, false, false };
    do { /* home is read, then checked in the section: a steal may have moved the slab */
        f.k = __atomic_load_n(&f.s->home, __ATOMIC_RELAXED);
        SM_SYNC_FN(atomic_exec)(&f.k->lock, SM_FN(cs_free), &f);
    } while (sm_unlikely(f.moved));
    if (sm_unlikely(!f.freed))
        SM_FN(report)(SM_ERR_DOUBLE_FREE, c->ptr, "object is already free; ignored");
    if (f.release)
        SM_FN(slab_release)(f.release);
    if (sm_unlikely(f.evict))
        SM_FN(evict)();
}

#include "slab_lk/batch.h"
#undef SM_SLAB_LK_PARTS

/* One owner-map lookup and the class's geometry: no descriptor. */
SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uintptr_t w = SM_FN(lookup)(c->ptr);
    if (!w)
        return SM_NEXT_FN(getmeta)(c);
    unsigned cls = SM_FN(word_cls)(w);
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    if (SM_FN(object_index)(g, w, c->ptr) >= g->nobjs)
        return false;
    c->usable = SM_SIZECLASS_FN(class_to_size)(cls);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* A slab's object stays in its slab; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return !SM_FN(lookup)(c->ptr) && SM_NEXT_FN(move)(c, n); }

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    uintptr_t w = SM_FN(lookup)(c->ptr);
    if (!w)
        return SM_NEXT_FN(resize)(c, n);
    unsigned cls = SM_FN(word_cls)(w);
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    return n <= SM_SIZECLASS_FN(class_to_size)(cls) && SM_FN(object_index)(g, w, c->ptr) < g->nobjs;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* Kept empty slabs are few (SM_OPT_EMPTY_MAX) and are there to be reused at once: only a release of
 * everything (malloc_trim) hands them back. */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    if (r->how == SM_RELEASE_ALL && SM_RETAIN_FN(count)(&SM_FN(obj).retain)) {
        for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++) {
            struct SM_FN(class) *k = &SM_FN(obj).cls[i];
            if (!SM_RETAIN_FN(peek)(&k->retain))
                continue;
            SM_SYNC_FN(lock)(&k->lock);
            struct SM_FN(slab) *s = SM_FN(kept)(k);
            if (s) {
                SM_FN(unkeep)(k);
                SM_FN(retire)(k, s);
            }
            SM_SYNC_FN(unlock)(&k->lock);
            if (s) {
                r->released += s->bytes;
                SM_FN(slab_release)(s);
            }
        }
    }
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

/* Per class: live objects from the counts kept under each class lock (every shard's), slabs from
 * the slow paths' counts. A slab is a block of the next layer, held. */
SM_INLINE void SM_FN(cs_class_counts)(void *arg)
{
    struct SM_FN(class) *k = *(struct SM_FN(class) **)arg;
    uint64_t *out = (uint64_t *)((struct SM_FN(class) **)arg + 1);
    out[0] += k->nmalloc;
    out[1] += k->nfree;
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        struct { struct SM_FN(class) *k; uint64_t n[2]; } a = { NULL, { 0, 0 } };
        uint32_t slab_bytes = 0;
        for (unsigned sh = 0; sh < SM_FN(shards); sh++) {
            a.k = &SM_FN(obj).cls[sh * SM_FN(class_count) + cls];
            SM_SYNC_FN(atomic_exec)(&a.k->lock, SM_FN(cs_class_counts), &a);
            if (a.k->slab_bytes)
                slab_bytes = a.k->slab_bytes;
        }
        size_t slabs = __atomic_load_n(&SM_FN(obj).slabs[cls], __ATOMIC_RELAXED);
        if (!slabs && !a.n[0])
            continue;
        size_t size = SM_SIZECLASS_FN(class_to_size)(cls);
        sm_stats_class_t *c = sm_stats_class(s, size);
        c->slabs += slabs;
        c->live += (size_t)(a.n[0] - a.n[1]);
        c->nmalloc += a.n[0];
        c->nfree += a.n[1];
        l->in_use += (size_t)(a.n[0] - a.n[1]) * size;
        l->held += slabs * slab_bytes;
        l->blocks += slabs;
        l->nmalloc += a.n[0];
        l->nfree += a.n[1];
    }
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

SM_INLINE void SM_FN(fork_prepare)(void)
{
    for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++)
        SM_SYNC_FN(fork_lock)(&SM_FN(obj).cls[i].lock);
    SM_SYNC_FN(fork_lock)(&SM_FN(obj).map_lock);
    SM_NEXT_FN(fork_prepare)();
}

SM_INLINE void SM_FN(fork_parent)(void)
{
    SM_NEXT_FN(fork_parent)();
    SM_SYNC_FN(fork_unlock)(&SM_FN(obj).map_lock);
    for (unsigned i = SM_FN(shards) * SM_FN(class_count); i-- > 0;)
        SM_SYNC_FN(fork_unlock)(&SM_FN(obj).cls[i].lock);
}

SM_INLINE void SM_FN(fork_child)(void)
{
    SM_NEXT_FN(fork_child)();
    SM_SYNC_FN(fork_reinit)(&SM_FN(obj).map_lock);
    for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++)
        SM_SYNC_FN(fork_reinit)(&SM_FN(obj).cls[i].lock);
}

#undef SM_OPT_SLAB_SIZE
#undef SM_OPT_EMPTY_MAX
#undef SM_OPT_COLOURS
#undef SM_OPT_SHARDS
#undef SM_OPT_SHARD_MAX
#define SM_LAYER_OFFERS (SM_CAP_BATCH | SM_CAP_OWNER | SM_CAP_MOVE)
#include "../../core/layer_end.h"
