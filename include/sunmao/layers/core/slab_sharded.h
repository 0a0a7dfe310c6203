/* slab_sharded: slabs owned by threads, each slab with its own free lists (free-list sharding, the
 * idea of mimalloc: Leijen, Zorn and de Moura, "Mimalloc: Free List Sharding in Action", 2019).
 * Beyond the Mortise paper's Table 2: a core layer for small blocks with no thread cache above it,
 * so an object never crosses between two levels: a malloc pops its class's current slab's list, a
 * free by the slab's owner pushes onto that slab's own list, and a program that builds a large
 * structure and tears it down pays no refill or flush per object (docs/layers.md, slab_sharded).
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sizeclass (required), err (required), sync (required: the
 * layer's one lock, taken on slow paths only), size_handle (keep SM_SIZE_MAX a class size). Options:
 *   SM_OPT_SLAB_SIZE    a power of two in [16 KiB, 16 MiB]: bytes per slab, aligned to it (64 KiB)
 *   SM_OPT_MIN_OBJECTS  a class is served if a slab holds at least this many objects (default 4)
 *   SM_OPT_CARVE_BYTES  a slab's never-used objects are linked about this many bytes at a time, so
 *                       its pages are touched as they are needed (default 4 KiB)
 *   SM_OPT_SCAN_FULL    full slabs a refill looks into for other threads' frees (default 4)
 *   SM_OPT_KEEP_EMPTY   emptied slabs a thread keeps, over all classes, their objects still linked,
 *                       before it gives them to the layer's empty lists (default 8)
 *   SM_OPT_DECAY_MS     an empty slab idle this long is purged by L_release (default 1000)
 * Properties: thread-safe; 16-byte alignment, an object of a class whose size is a multiple of a
 * larger power of two (up to 4 KiB) aligned to it; zeroed 0. Capabilities: HIT (a malloc from the
 * thread's current slab of the class, a free by the slab's owner), MOVE forwarded (objects stay in
 * their slabs). Needs nothing of the next layer but SM_OPT_SLAB_SIZE-aligned blocks.
 *
 * A slab is objects of one class, from its first byte; its descriptor lives apart (metadata, 128
 * bytes, packed with others: descriptors at every slab's start would all fall in the same cache
 * sets), found through the layer's page map. A descriptor holds three lists of free objects:
 * `free` (what malloc pops), `local` (what the owner freed since) and `remote` (what other threads
 * freed: pushed by compare-and-swap, taken whole by an exchange), and `used`, the objects out of
 * `free` and `local`. Each list ends at the slab's address + 1; a free object's first word is its
 * link xor the slab's key, its second word the first xor the slab's tag key: a pop checks that the
 * link stays in the slab and that the tag is whole (a write after free, an overflow into it:
 * reported, the list dropped), and a free that finds the tag reports a double free. A thread's
 * heap has one current slab per class and lists of its other slabs (with local frees, or full); the
 * owner alone touches them, without a lock. When the current slab's lists are empty, a refill
 * takes, in order: its local list, its remote list, a stretch of never-used objects, a slab with
 * local frees, a full slab with remote ones (a few looked at), an abandoned slab of the class, an
 * empty slab, a new slab from the next layer. A slab whose last object its owner gets back is
 * empty: it goes to the layer's empty list, for any class. A thread's exit gives its slabs up:
 * empty ones to the empty list, the rest abandoned, for a thread that needs one of the class to
 * adopt (and release empties those whose objects all came back). Slabs and descriptors are never
 * given back to the next layer (type-stable: a late free reads a descriptor, never another layer's
 * data); release purges idle empty slabs.
 * Invariants: only the owner (or the lock's holder, for an abandoned or empty slab) writes a
 * slab's free, local, used and list links; a slab's remote frees are in `used` until taken; a slab
 * is in at most one list. Lock order: this layer's lock, then the next layer's. Fork: the lock is
 * taken around fork; in the child, the other threads' heaps stay as they were (their slabs stay
 * held, frees of their objects go to the remote lists), as a thread cache's would.
 * @model: name=slab_sharded kind=core flag serves-max=slab_size/min_objects slot sizeclass slot err slot sync range
 * @model: key slab_size size key min_objects int key carve_bytes size key scan_full int key keep_empty int
 * @model: key decay_ms int
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <stdint.h>
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"
#include "../../core/secret.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "slab_sharded: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "slab_sharded: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "slab_sharded: policy slot 'sync' is empty (SM_SYNC = spinlock|mutex|...: the slow paths' lock)"
#endif
#ifndef SM_SIZECLASS
#error "slab_sharded: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|tc5|prime|...)"
#endif
#ifndef SM_ERR
#error "slab_sharded: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

#ifndef SM_OPT_SLAB_SIZE
#define SM_OPT_SLAB_SIZE ((size_t)64 << 10)
#endif
#ifndef SM_OPT_MIN_OBJECTS
#define SM_OPT_MIN_OBJECTS 4
#endif
#ifndef SM_OPT_CARVE_BYTES
#define SM_OPT_CARVE_BYTES (4u << 10)
#endif
#ifndef SM_OPT_SCAN_FULL
#define SM_OPT_SCAN_FULL 4
#endif
#ifndef SM_OPT_KEEP_EMPTY
#define SM_OPT_KEEP_EMPTY 8
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
_Static_assert((SM_OPT_SLAB_SIZE) >= (16u << 10) && (SM_OPT_SLAB_SIZE) <= ((size_t)1 << 24) &&
                   ((SM_OPT_SLAB_SIZE) & ((SM_OPT_SLAB_SIZE) - 1)) == 0,
               "slab_sharded: SM_OPT_SLAB_SIZE must be a power of two in [16 KiB, 16 MiB]");
_Static_assert((SM_OPT_MIN_OBJECTS) >= 1 && (SM_OPT_MIN_OBJECTS) <= 4096,
               "slab_sharded: SM_OPT_MIN_OBJECTS must be in [1, 4096]");
_Static_assert((SM_OPT_CARVE_BYTES) >= 16 && (SM_OPT_CARVE_BYTES) <= (SM_OPT_SLAB_SIZE),
               "slab_sharded: SM_OPT_CARVE_BYTES must be in [16, SM_OPT_SLAB_SIZE]");
_Static_assert((SM_OPT_SCAN_FULL) >= 0 && (SM_OPT_SCAN_FULL) <= 1024, "slab_sharded: SM_OPT_SCAN_FULL must be in [0, 1024]");
_Static_assert((SM_OPT_KEEP_EMPTY) >= 0 && (SM_OPT_KEEP_EMPTY) <= 4096, "slab_sharded: SM_OPT_KEEP_EMPTY must be in [0, 4096]");
_Static_assert((SM_OPT_DECAY_MS) >= 1, "slab_sharded: SM_OPT_DECAY_MS must be at least 1 ms");

enum {
    SM_FN(classes) = SM_SIZECLASS_FN(count),
    SM_FN(shift) = __builtin_ctzll(SM_OPT_SLAB_SIZE),
    SM_FN(max_align) = 4096, /* the most an aligned request may ask */
    SM_FN(colours) = 8,
    SM_FN(desc_block) = 64 << 10, /* descriptors are carved from metadata blocks this large */
    SM_FN(thread_safe) = 1,
    SM_FN(min_align) = 16,
    SM_FN(zeroed) = 0,
};

/* Where a slab is. */
enum { SM_FN(cur), SM_FN(avail), SM_FN(full), SM_FN(spare), SM_FN(abandoned), SM_FN(empty) };
/* An empty slab's pages. */
enum { SM_FN(fresh), SM_FN(aged), SM_FN(purged) };

struct SM_FN(heap);

/* A slab's descriptor. The first line is what the hit paths read and the owner writes; the second
 * is written by other threads' frees, and holds what only slow paths read. */
struct SM_FN(slab) {
    void *free, *local;           /* owner: lists ending at base + 1 */
    uintptr_t key, tag;           /* a free object's words: link ^ key, (link ^ key) ^ tag */
    struct SM_FN(heap) *owner;    /* atomic: the owning heap; NULL while abandoned or empty */
    uint64_t inverse;             /* of the odd part of the class size, modulo 2^64 */
    char *start;                  /* the first object: base + the slab's colour */
    uint32_t used;                /* owner: objects out of free and local (remote ones included) */
    uint16_t count;               /* objects the slab holds */
    uint8_t twos;                 /* trailing zero bits of the class size */
    uint8_t where;                /* above */
    SM_CACHE_ALIGNED uintptr_t remote; /* atomic: other threads' frees, 0 when none */
    char *base;                   /* the slab */
    uint16_t unfull;              /* a full slab's owner frees down to this many used: back to avail */
    char *bump;                   /* owner: the first object never linked */
    struct SM_FN(slab) *next, *prev; /* in a heap's list, an abandoned list or the empty list */
    struct SM_FN(slab) *all_next; /* in the list of every slab (set once) */
    uint16_t cls;
    uint8_t pages;                /* while empty: fresh, aged or purged */
};
_Static_assert(sizeof(struct SM_FN(slab)) == 2 * SM_CACHELINE, "slab_sharded: a descriptor is two cache lines");

/* A class's layout, computed by create. */
struct SM_FN(cls_info) {
    uint64_t inverse;
    bool coloured;      /* its slabs' objects start 0-7 cache lines in */
    uint32_t size;      /* 0: the class is not served */
    uint16_t count, carve; /* objects a slab; objects linked at a time from a slab's never-used part */
    uint8_t twos;
};

/* A thread's slabs. */
struct SM_FN(heap) {
    struct SM_FN(slab) *cur[SM_FN(classes)];
    struct SM_FN(slab) *avail[SM_FN(classes)], *full[SM_FN(classes)]; /* circular, doubly linked */
    struct SM_FN(slab) *spare[SM_FN(classes)]; /* emptied slabs kept, objects on their lists */
    unsigned nspare;          /* over all classes, at most SM_OPT_KEEP_EMPTY */
    size_t collect_in;        /* slabs the heap may still take before it collects (below) */
    struct SM_FN(heap) *next; /* in the spare list (lock) */
    uint64_t seed;
};

/* Requests up to this size find their class in a table (one load on malloc's hit path); larger
 * ones miss it. At most 64 KiB, the size handle's top and the policy's largest class. */
#define SM_SHARDED_MIN(a, b) ((size_t)(a) < (size_t)(b) ? (size_t)(a) : (size_t)(b))
#define SM_SHARDED_TABLE_MAX \
    SM_SHARDED_MIN(SM_SHARDED_MIN(SM_SIZE_MAX, (size_t)64 << 10), SM_SIZECLASS_FN(max_size))

static uint8_t SM_FN(class_of)[SM_SHARDED_TABLE_MAX / 16 + 1];
_Static_assert(SM_FN(classes) <= 256, "slab_sharded: the class table holds classes in bytes");

static struct {
    struct SM_FN(cls_info) info[SM_FN(classes)];
    size_t max_size; /* the largest request served as a class (0 until create) */
    uintptr_t *map[SM_PAGEMAP2_ROOT_LEN(SM_FN(shift))]; /* a slab's granule -> its descriptor */
    size_t map_nodes, slabs;   /* slabs: also read without the lock */
    SM_SYNC_FN(t) lock;        /* guards what follows, and the map's updates */
    char *desc_next, *desc_end; /* the metadata block descriptors are carved from */
    struct SM_FN(heap) *spare; /* heaps of exited threads, for the next ones */
    struct SM_FN(slab) *all;   /* every slab made, through all_next: for statistics */
    struct SM_FN(slab) *empties[SM_FN(classes)]; /* empty slabs, their objects still linked */
    struct SM_FN(slab) *purged;                  /* empty slabs purged: to be formatted */
    struct SM_FN(slab) *abandoned[SM_FN(classes)];
    size_t nabandoned[SM_FN(classes)]; /* also read without the lock, as a hint */
} SM_FN(obj) = { .lock = SM_SYNC_INIT };
static sm_pagemap2_window_t SM_FN(map_window) = SM_PAGEMAP2_WINDOW_INIT;

/* A heap with no slab: every list of its current "slabs" is empty (the end marker's low bit), so
 * a thread that has none yet misses on the test the hit path makes anyway; it owns nothing. */
static struct SM_FN(slab) SM_FN(none_slab) = { .free = (void *)1, .local = (void *)1, .where = SM_FN(cur) };
static struct SM_FN(heap) SM_FN(none_heap) = { .cur = { [0 ... SM_FN(classes) - 1] = &SM_FN(none_slab) } };

static __thread struct SM_FN(heap) *SM_FN(tls) __attribute__((tls_model("initial-exec"))) = &SM_FN(none_heap);
/* Under junk or zero fill (core/conf.h) the thread's heap is here instead, and SM_FN(tls) stays the
 * empty heap: every request then misses the hit paths and reaches the socket's slow paths, which
 * fill the blocks. Read on slow paths only (not initial-exec: no static TLS spent). */
static __thread struct SM_FN(heap) *SM_FN(fill_heap);

/* The calling thread's heap, where its hit paths find it or not (NULL: none yet). */
SM_INLINE struct SM_FN(heap) *SM_FN(mine)(void)
{
    struct SM_FN(heap) *t = SM_FN(tls);
    return t != &SM_FN(none_heap) ? t : SM_FN(fill_heap);
}

SM_INLINE void SM_FN(thread_exit)(void);

SM_PAGEMAP_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).map_nodes)

static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    size_t max = 0;
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        size_t size = SM_SIZECLASS_FN(class_to_size)(i);
        bool coloured = (size & -size) <= SM_CACHELINE;
        size_t count = ((SM_OPT_SLAB_SIZE) - (coloured ? (SM_FN(colours) - 1) * SM_CACHELINE : 0)) / size;
        if (!SM_FN(handles_size)(size))
            continue;
        if (count < (SM_OPT_MIN_OBJECTS))
            break; /* classes grow: no larger one fits either */
        if (count > UINT16_MAX)
            count = UINT16_MAX;
        size_t carve = (SM_OPT_CARVE_BYTES) / size;
        uint64_t odd = (uint64_t)size >> __builtin_ctzll(size), inverse = odd;
        for (int k = 0; k < 5; k++) /* Newton: the correct low bits double each step */
            inverse *= 2 - odd * inverse;
        SM_FN(obj).info[i] = (struct SM_FN(cls_info)){ inverse, coloured, (uint32_t)size, (uint16_t)count,
                                                       (uint16_t)(carve < 1 ? 1 : carve > count ? count : carve),
                                                       (uint8_t)__builtin_ctzll(size) };
        max = size;
    }
    for (size_t u = 0; u <= SM_SHARDED_TABLE_MAX / 16; u++)
        SM_FN(class_of)[u] = (uint8_t)SM_SIZECLASS_FN(size_to_class)(u ? u * 16 : 1);
    __atomic_store_n(&SM_FN(obj).max_size, max, __ATOMIC_RELEASE);
    return SM_NEXT_FN(create)();
}

/* The descriptor of p's slab (NULL: not a slab of ours) in *slab; true if p is an object start.
 * The index test is exact with one multiply and a rotate (as slab_lk's geometry: an offset that is
 * not a multiple of the size rotates to a number far above the count). An address at 2^48 or above
 * may find a descriptor by its low bits: it fails the test, as its offset is not below 2^48. */
SM_HOT bool SM_FN(locate)(const void *p, struct SM_FN(slab) **slab)
{
    struct SM_FN(slab) *s = (struct SM_FN(slab) *)sm_pagemap2_get_windowed(SM_FN(obj).map, &SM_FN(map_window),
                                                                           SM_FN(shift), p);
    *slab = s;
    if (sm_unlikely(!s))
        return false;
    uint64_t q = (uint64_t)((uintptr_t)p - (uintptr_t)s->start) * s->inverse;
    unsigned twos = s->twos;
    return ((q >> twos) | (q << ((64 - twos) & 63))) < s->count;
}

SM_INLINE size_t SM_FN(size_of)(const struct SM_FN(slab) *s) { return SM_FN(obj).info[s->cls].size; }

/* thread.allocated / thread.deallocated (core/stats.h) count, as a thread cache's do, the bytes that
 * move between the calling thread and the layer, off the hit paths: objects that join the lists of
 * a slab the thread owns without the thread's own free (linked from a never-used stretch, come
 * back from other threads, or in a slab it takes), objects that leave with a slab it gives up, its
 * frees of other threads' objects, and the blocks it passes down. The bytes of s's free objects
 * that have been linked: */
SM_INLINE uint64_t SM_FN(free_bytes)(const struct SM_FN(slab) *s)
{
    size_t size = SM_FN(size_of)(s);
    return ((uint64_t)(size_t)(s->bump - s->start) / size - s->used) * size;
}

SM_SLOWPATH SM_UNUSED void SM_FN(report)(sm_err_kind_t kind, const void *p, const char *what)
{
    SM_ERR_FN(raise)(kind, SM_LAYER_NAME, p, what);
}

/* The pop both alloc paths make: the head p of s's free list, checked. A link out of the slab or a
 * torn tag is a write into a free object: reported once, the rest of the list dropped (its objects
 * stay out of use). */
SM_SLOWPATH void *SM_FN(corrupt)(struct SM_FN(slab) *s, void *p)
{
    SM_FN(report)(SM_ERR_CORRUPTION, p, "free object overwritten (its list link or tag); the list is dropped");
    s->free = s->base + 1;
    return NULL;
}

SM_HOT void *SM_FN(pop)(struct SM_FN(slab) *s, void *p)
{
    uintptr_t *o = (uintptr_t *)p, link = o[0] ^ s->key;
    if (sm_unlikely((((uintptr_t)p ^ link) >> SM_FN(shift)) | (o[1] ^ o[0] ^ s->tag)))
        return SM_FN(corrupt)(s, p);
    o[1] = 0; /* no longer a free object's tag: a free of it is not a double free */
    s->free = (void *)link;
    s->used++;
    return p;
}

/* Capability HIT: the current slab's free list. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (sm_unlikely(!(SM_SIZE_USER) || !SM_FN(handles_size)(size)))
        return NULL;
    if (sm_unlikely(size > SM_SHARDED_TABLE_MAX))
        return NULL;
    struct SM_FN(slab) *s = SM_FN(tls)->cur[SM_FN(class_of)[(size + 15) >> 4]];
    void *p = s->free;
    if (sm_unlikely((uintptr_t)p & 1)) {
        /* The owner's frees since: they become the free list, and the local list ends where the
         * free list did (p is the end marker). A thread freeing and allocating one class turns
         * here, not through the miss. */
        void *l = s->local;
        if ((uintptr_t)l & 1)
            return NULL;
        s->local = p;
        p = l;
    }
    return SM_FN(pop)(s, p);
}

/* ---- the owner's lists ---- */

/* A heap's lists are circular (the head's prev is the oldest), so a scan can start at either end. */
SM_INLINE void SM_FN(list_push)(struct SM_FN(slab) **head, struct SM_FN(slab) *s, unsigned where)
{
    s->where = (uint8_t)where;
    if (!*head) {
        s->next = s->prev = s;
    } else {
        s->next = *head;
        s->prev = (*head)->prev;
        s->prev->next = s;
        (*head)->prev = s;
    }
    *head = s;
}

SM_INLINE void SM_FN(list_remove)(struct SM_FN(slab) **head, struct SM_FN(slab) *s)
{
    if (s->next == s) {
        *head = NULL;
    } else {
        s->prev->next = s->next;
        s->next->prev = s->prev;
        if (*head == s)
            *head = s->next;
    }
    s->next = s->prev = NULL;
}

/* Walks the list from object o (a list of s) to its last object, checking each link: the last
 * object, or NULL when a link leaves the slab, a tag is torn or the walk is longer than the slab
 * (reported). *n: the objects walked. */
SM_SLOWPATH uintptr_t *SM_FN(list_last)(struct SM_FN(slab) *s, uintptr_t *o, uint32_t *n)
{
    for (uint32_t k = 1;; k++) {
        uintptr_t link = o[0] ^ s->key;
        if (sm_unlikely((((link ^ (uintptr_t)o) >> SM_FN(shift)) | (o[1] ^ o[0] ^ s->tag)) || k > s->count)) {
            SM_FN(report)(SM_ERR_CORRUPTION, o, "free object overwritten (its list link or tag); the list is dropped");
            return NULL;
        }
        if (link & 1) {
            *n = k;
            return o;
        }
        o = (uintptr_t *)link;
    }
}

/* Puts list `first` (of s) in front of s's free list: false if it is damaged (then dropped). */
SM_INLINE bool SM_FN(join_free)(struct SM_FN(slab) *s, void *first, uint32_t *n)
{
    uintptr_t *last = SM_FN(list_last)(s, (uintptr_t *)first, n);
    if (!last)
        return false;
    last[0] = (uintptr_t)s->free ^ s->key;
    last[1] = last[0] ^ s->tag;
    s->free = first;
    return true;
}

/* Takes s's remote list whole, in front of its free list: false if there was none (or it was
 * damaged: its objects then stay out of use, counted as used). */
SM_SLOWPATH bool SM_FN(take_remote)(struct SM_FN(slab) *s)
{
    if (!__atomic_load_n(&s->remote, __ATOMIC_RELAXED))
        return false;
    void *first = (void *)__atomic_exchange_n(&s->remote, 0, __ATOMIC_ACQUIRE);
    uint32_t n = 0;
    if (!SM_FN(join_free)(s, first, &n))
        return false;
    s->used -= n < s->used ? n : s->used;
    sm_stats_thread_bytes[0] += (uint64_t)n * SM_FN(size_of)(s);
    return true;
}

/* Links the next stretch of never-used objects as the free list (which is empty): false if there
 * is none. */
SM_SLOWPATH bool SM_FN(carve)(struct SM_FN(slab) *s)
{
    const struct SM_FN(cls_info) *k = &SM_FN(obj).info[s->cls];
    char *end = s->start + (size_t)s->count * k->size;
    if (s->bump >= end)
        return false;
    size_t n = (size_t)(end - s->bump) / k->size;
    if (n > k->carve)
        n = k->carve;
    char *o = s->bump;
    s->free = o;
    for (size_t i = 0; i < n; i++, o += k->size) {
        uintptr_t next = i + 1 < n ? (uintptr_t)(o + k->size) : (uintptr_t)s->base + 1;
        ((uintptr_t *)o)[0] = next ^ s->key;
        ((uintptr_t *)o)[1] = next ^ s->key ^ s->tag;
    }
    s->bump = o;
    sm_stats_thread_bytes[0] += (uint64_t)n * k->size;
    return true;
}

/* Makes s's free list non-empty from its other sources: false when s has no free object at all. */
SM_INLINE bool SM_FN(refill_slab)(struct SM_FN(slab) *s)
{
    if (!((uintptr_t)s->free & 1))
        return true;
    if (!((uintptr_t)s->local & 1)) {
        s->free = s->local;
        s->local = s->base + 1;
        return true;
    }
    return SM_FN(take_remote)(s) || SM_FN(carve)(s);
}

/* s, whose objects are all on its lists, onto its class's empty list (lock held). */
SM_INLINE void SM_FN(push_empty_locked)(struct SM_FN(slab) *s)
{
    __atomic_store_n(&s->where, (uint8_t)SM_FN(empty), __ATOMIC_RELAXED);
    s->pages = SM_FN(fresh);
    s->prev = NULL;
    s->next = SM_FN(obj).empties[s->cls];
    SM_FN(obj).empties[s->cls] = s;
}

/* s (empty: its objects all back) to its class's empty list, for any thread and, formatted again,
 * any class. */
SM_SLOWPATH void SM_FN(retire)(struct SM_FN(slab) *s)
{
    __atomic_store_n(&s->owner, NULL, __ATOMIC_RELAXED);
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    SM_FN(push_empty_locked)(s);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    sm_release_note();
}

/* A new slab and its descriptor, mapped (lock held), or NULL. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(new_slab_locked)(void)
{
    if (SM_FN(obj).desc_next == SM_FN(obj).desc_end) {
        sm_mctx_t r = sm_mctx_alloc(SM_FN(desc_block), SM_CACHELINE, 0);
        char *b = (char *)SM_FN(meta_alloc)(&r);
        if (!b)
            return NULL;
        SM_FN(obj).desc_next = b;
        SM_FN(obj).desc_end = b + SM_FN(desc_block);
    }
    sm_mctx_t r = sm_mctx_alloc(SM_OPT_SLAB_SIZE, SM_OPT_SLAB_SIZE, 0);
    char *base = (char *)SM_NEXT_FN(alloc)(&r);
    if (!base)
        return NULL;
    struct SM_FN(slab) *s = (struct SM_FN(slab) *)SM_FN(obj).desc_next;
    if (!sm_ptr_aligned(base, SM_OPT_SLAB_SIZE) ||
        !sm_pagemap2_set(SM_FN(obj).map, SM_FN(shift), base, 1, (uintptr_t)s, SM_FN(map_node_alloc))) {
        SM_NEXT_FN(free)(&r);
        errno = ENOMEM;
        return NULL;
    }
    sm_pagemap2_window_note(&SM_FN(map_window), SM_FN(obj).map, SM_FN(shift), base);
    SM_FN(obj).desc_next += sizeof *s;
    memset(s, 0, sizeof *s);
    s->base = base;
    s->all_next = SM_FN(obj).all;
    SM_FN(obj).all = s;
    __atomic_store_n(&SM_FN(obj).slabs, SM_FN(obj).slabs + 1, __ATOMIC_RELAXED);
    return s;
}

/* A slab of class cls, owned by t: an empty one of the class (its objects still linked), or one
 * formatted: purged, of another class, or new. NULL when the next layer has no slab to give. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(fresh_slab)(struct SM_FN(heap) *t, unsigned cls)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    struct SM_FN(slab) *s = SM_FN(obj).empties[cls], **from = &SM_FN(obj).empties[cls];
    bool linked = s != NULL;
    if (!s && !(s = *(from = &SM_FN(obj).purged)))
        for (unsigned i = 0; i < SM_FN(classes) && !s; i++)
            s = *(from = &SM_FN(obj).empties[i]);
    if (s)
        *from = s->next;
    else
        s = SM_FN(new_slab_locked)();
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (!s)
        return NULL;
    s->next = s->prev = NULL;
    if (!linked) {
        const struct SM_FN(cls_info) *k = &SM_FN(obj).info[cls];
        t->seed = t->seed * 6364136223846793005ull + 1442695040888963407ull;
        s->key = (uintptr_t)(sm_secret() ^ t->seed ^ ((uintptr_t)s->base >> SM_FN(shift)));
        s->tag = (uintptr_t)((t->seed >> 17) * 0x9e3779b97f4a7c15ull) | 1;
        s->free = s->local = s->base + 1;
        s->used = 0;
        s->inverse = k->inverse;
        s->twos = k->twos;
        s->cls = (uint16_t)cls;
        s->unfull = (uint16_t)(k->count - (k->count / 8 ? k->count / 8 : 1));
        /* Colour: the slabs of a class whose objects need no alignment past 64 bytes start them
         * 0-7 cache lines in, by the slab's address, so the objects at the same place in many
         * slabs (every class's first ones, in a burst over many classes) do not fall in the same
         * cache sets. */
        s->start = s->base + (k->coloured ? (((uintptr_t)s->base >> SM_FN(shift)) & (SM_FN(colours) - 1)) * SM_CACHELINE : 0);
        s->bump = s->start;
        __atomic_store_n(&s->remote, 0, __ATOMIC_RELAXED);
        /* The count last, with release: a (bad) free that reads the new count reads the rest. */
        __atomic_store_n(&s->count, k->count, __ATOMIC_RELEASE);
    } else {
        sm_stats_thread_bytes[0] += SM_FN(free_bytes)(s); /* its objects, still linked */
    }
    __atomic_store_n(&s->where, (uint8_t)SM_FN(cur), __ATOMIC_RELAXED);
    __atomic_store_n(&s->owner, t, __ATOMIC_RELEASE);
    return s;
}

/* Before the heap takes another slab: other threads' frees into its full slabs of every class (a
 * class it no longer allocates from is never refilled, so they would wait there for its exit).
 * Slabs all of whose objects came back go to the layer's empty lists, the others with frees to
 * avail. Every full slab is looked at once per collection, and a collection comes after half as
 * many slabs taken as it looked at: amortised, a slab taken pays for a few looks. */
SM_SLOWPATH void SM_FN(collect)(struct SM_FN(heap) *t)
{
    size_t looked = 0;
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        struct SM_FN(slab) *s = t->full[i], *stop = s ? s->prev : NULL;
        while (s) {
            struct SM_FN(slab) *n = s == stop ? NULL : s->next;
            looked++;
            if (__atomic_load_n(&s->remote, __ATOMIC_RELAXED) && SM_FN(take_remote)(s)) {
                SM_FN(list_remove)(&t->full[i], s);
                if (s->used) {
                    SM_FN(list_push)(&t->avail[i], s, SM_FN(avail));
                } else {
                    sm_stats_thread_bytes[1] += SM_FN(free_bytes)(s);
                    SM_FN(retire)(s);
                }
            }
            s = n;
        }
    }
    t->collect_in = looked / 2 > 16 ? looked / 2 : 16;
}

/* An abandoned slab of class cls, now t's, or NULL. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(adopt)(struct SM_FN(heap) *t, unsigned cls)
{
    if (!__atomic_load_n(&SM_FN(obj).nabandoned[cls], __ATOMIC_RELAXED))
        return NULL;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    struct SM_FN(slab) *s = SM_FN(obj).abandoned[cls];
    if (s) {
        SM_FN(obj).abandoned[cls] = s->next;
        __atomic_store_n(&SM_FN(obj).nabandoned[cls], SM_FN(obj).nabandoned[cls] - 1, __ATOMIC_RELAXED);
        s->next = s->prev = NULL;
        __atomic_store_n(&s->owner, t, __ATOMIC_RELEASE);
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (s)
        sm_stats_thread_bytes[0] += SM_FN(free_bytes)(s);
    return s;
}

/* The heap's current slab of class cls ran out: the next one with a free object, installed, and
 * the object popped; NULL (errno ENOMEM) when the next layer has no slab to give. */
SM_SLOWPATH void *SM_FN(refill)(struct SM_FN(heap) *t, unsigned cls)
{
    struct SM_FN(slab) *s = t->cur[cls];
    if (s != &SM_FN(none_slab)) {
        if (SM_FN(refill_slab)(s))
            return SM_FN(pop)(s, s->free);
        SM_FN(list_push)(&t->full[cls], s, SM_FN(full));
        t->cur[cls] = &SM_FN(none_slab);
    }
    while ((s = t->avail[cls]) != NULL) {
        SM_FN(list_remove)(&t->avail[cls], s);
        if (SM_FN(refill_slab)(s))
            goto install;
        SM_FN(list_push)(&t->full[cls], s, SM_FN(full));
    }
    if ((s = t->spare[cls]) != NULL) {
        SM_FN(list_remove)(&t->spare[cls], s);
        t->nspare--;
        if (SM_FN(refill_slab)(s))
            goto install;
        SM_FN(retire)(s); /* not reached: a spare's objects are all on its lists */
    }
    /* Full slabs, oldest first: others' frees reach them unseen. One looked at becomes the newest. */
    for (unsigned k = 0; k + 1 <= (SM_OPT_SCAN_FULL) && t->full[cls] != NULL; k++) {
        s = t->full[cls]->prev;
        t->full[cls] = s; /* the oldest becomes the head: the list turns by one */
        if (__atomic_load_n(&s->remote, __ATOMIC_RELAXED)) {
            SM_FN(list_remove)(&t->full[cls], s);
            if (SM_FN(take_remote)(s))
                goto install;
            SM_FN(list_push)(&t->full[cls], s, SM_FN(full));
        }
    }
    while ((s = SM_FN(adopt)(t, cls)) != NULL) {
        if (SM_FN(refill_slab)(s))
            goto install;
        SM_FN(list_push)(&t->full[cls], s, SM_FN(full));
    }
    if (t->collect_in == 0) {
        SM_FN(collect)(t);
        if ((s = t->avail[cls]) != NULL) {
            SM_FN(list_remove)(&t->avail[cls], s);
            if (SM_FN(refill_slab)(s))
                goto install;
            SM_FN(list_push)(&t->full[cls], s, SM_FN(full));
        }
    }
    t->collect_in--;
    if (!(s = SM_FN(fresh_slab)(t, cls)))
        return NULL;
    SM_FN(refill_slab)(s); /* an empty slab: it has every object */
install:
    s->where = SM_FN(cur);
    t->cur[cls] = s;
    return SM_FN(pop)(s, s->free);
}

/* A heap for the calling thread, or NULL (before create, or no exit hook left for the thread). */
SM_SLOWPATH struct SM_FN(heap) *SM_FN(heap_make)(void)
{
    if (!__atomic_load_n(&SM_FN(obj).max_size, __ATOMIC_ACQUIRE) || !sm_thread_attach(SM_FN(thread_exit)))
        return NULL;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    struct SM_FN(heap) *t = SM_FN(obj).spare;
    if (t)
        SM_FN(obj).spare = t->next;
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (!t) {
        sm_mctx_t r = sm_mctx_alloc(sizeof *t, SM_CACHELINE, 0);
        if (!(t = (struct SM_FN(heap) *)SM_FN(meta_alloc)(&r)))
            return NULL;
    }
    for (unsigned i = 0; i < SM_FN(classes); i++)
        t->cur[i] = &SM_FN(none_slab), t->avail[i] = t->full[i] = t->spare[i] = NULL;
    t->nspare = 0;
    t->collect_in = 16;
    t->seed = sm_secret() ^ (uintptr_t)t ^ (uintptr_t)&t;
    if (sm_conf.fill)
        return SM_FN(fill_heap) = t;
    return SM_FN(tls) = t;
}

/* The class serving c (an aligned request: the first class whose size is a multiple of the
 * alignment, so all its objects are aligned), or SM_FN(classes) when none is. */
SM_INLINE unsigned SM_FN(class_for)(const sm_mctx_t *c)
{
    size_t max = __atomic_load_n(&SM_FN(obj).max_size, __ATOMIC_ACQUIRE);
    if (!SM_FN(serves)(c) || c->size > max || c->align > SM_FN(max_align))
        return SM_FN(classes);
    if (c->align <= 16)
        return SM_SIZECLASS_FN(size_to_class)(c->size ? c->size : 1);
    size_t need = sm_align_up(c->size ? c->size : 1, c->align);
    for (unsigned i = need <= max ? SM_SIZECLASS_FN(size_to_class)(need) : SM_FN(classes); i < SM_FN(classes); i++) {
        size_t size = SM_FN(obj).info[i].size;
        if (!size)
            break;
        if ((size & (c->align - 1)) == 0)
            return i;
    }
    return SM_FN(classes);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    unsigned cls = SM_FN(class_for)(c);
    if (cls >= SM_FN(classes) || !SM_FN(obj).info[cls].size) {
        sm_stats_thread_bytes[0] += c->size;
        return SM_NEXT_FN(alloc)(c);
    }
    struct SM_FN(heap) *t = SM_FN(mine)();
    if (!t && !(t = SM_FN(heap_make)())) {
        sm_stats_thread_bytes[0] += c->size;
        return SM_NEXT_FN(alloc)(c); /* no exit hook left for this thread: not served here */
    }
    struct SM_FN(slab) *s = t->cur[cls];
    void *p = !((uintptr_t)s->free & 1) ? SM_FN(pop)(s, s->free) : NULL;
    if (!p)
        p = SM_FN(refill)(t, cls);
    return c->ptr = p;
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c) { return SM_FN(alloc)(c); }

/* ---- free ---- */

/* After the owner's free of an object of s, which is not its class's current slab: s emptied (to
 * the empty list) or was full (now it has a free object). */
SM_SLOWPATH void SM_FN(freed_elsewhere)(struct SM_FN(heap) *t, struct SM_FN(slab) *s)
{
    SM_FN(list_remove)(s->where == SM_FN(avail) ? &t->avail[s->cls] : &t->full[s->cls], s);
    if (s->used)
        SM_FN(list_push)(&t->avail[s->cls], s, SM_FN(avail));
    else if (t->nspare + 1 <= (SM_OPT_KEEP_EMPTY))
        t->nspare++, SM_FN(list_push)(&t->spare[s->cls], s, SM_FN(spare));
    else {
        sm_stats_thread_bytes[1] += SM_FN(free_bytes)(s);
        SM_FN(retire)(s);
    }
}

/* The owner t's free of p, an object of s: false (nothing done) for a double free or a sized free
 * larger than the class, which the miss reports. */
SM_HOT bool SM_FN(free_local)(struct SM_FN(heap) *t, struct SM_FN(slab) *s, void *p, size_t size, unsigned flags)
{
    uintptr_t *o = (uintptr_t *)p;
    if (sm_unlikely((o[0] ^ o[1]) == s->tag || ((flags & SM_F_SIZED) && size > SM_FN(size_of)(s))))
        return false;
    /* Into the current slab: straight onto the list malloc pops, so the object just freed (in the
     * cache) is the next one handed out; elsewhere onto the local list. */
    unsigned where = s->where;
    void **list = where == SM_FN(cur) ? &s->free : &s->local;
    o[0] = (uintptr_t)*list ^ s->key;
    o[1] = o[0] ^ s->tag;
    *list = p;
    uint32_t used = --s->used;
    if (sm_unlikely(where != SM_FN(cur)) && (used == 0 || (where == SM_FN(full) && used <= s->unfull)))
        SM_FN(freed_elsewhere)(t, s);
    return true;
}

/* Capability HIT: a free by the slab's owner, onto the slab's lists. */
SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    (void)owner_word; /* no OWNER capability: nothing to hand on */
    struct SM_FN(slab) *s;
    if (sm_unlikely(!SM_FN(locate)(p, &s)))
        return false;
    struct SM_FN(heap) *t = SM_FN(tls);
    if (sm_unlikely(__atomic_load_n(&s->owner, __ATOMIC_RELAXED) != t))
        return false; /* another thread's: the miss */
    return SM_FN(free_local)(t, s, p, size, flags);
}

/* The rest of free, after the hit missed: another thread's object (onto its slab's remote list),
 * a bad free, or not ours. */
SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    struct SM_FN(slab) *s;
    void *p = c->ptr;
    if (!SM_FN(locate)(p, &s)) {
        if (s) {
            SM_FN(report)(SM_ERR_INVALID_FREE, p, "pointer is not the start of an object; ignored");
            return;
        }
        sm_mctx_t q = sm_mctx_block(p, 0, 0);
        if (SM_NEXT_FN(getmeta)(&q)) /* a block of the layers below: the lookup is small beside its free */
            sm_stats_thread_bytes[1] += q.usable;
        SM_NEXT_FN(free)(c);
        return;
    }
    uintptr_t *o = (uintptr_t *)p;
    if ((c->flags & SM_F_SIZED) && c->size > SM_FN(size_of)(s)) {
        SM_FN(report)(SM_ERR_INVALID_FREE, p, "size given to a sized free is larger than the block; ignored");
        return;
    }
    if (__atomic_load_n(&s->where, __ATOMIC_RELAXED) == SM_FN(empty) || (o[0] ^ o[1]) == s->tag) {
        SM_FN(report)(SM_ERR_DOUBLE_FREE, p, "object already freed; ignored");
        return;
    }
    struct SM_FN(heap) *t = SM_FN(mine)();
    if (t && __atomic_load_n(&s->owner, __ATOMIC_RELAXED) == t && SM_FN(free_local)(t, s, p, 0, 0))
        return; /* the thread's own object, under a fill (its hit paths always miss) */
    sm_stats_thread_bytes[1] += SM_FN(size_of)(s);
    uintptr_t head = __atomic_load_n(&s->remote, __ATOMIC_RELAXED);
    do {
        o[0] = (head ? head : (uintptr_t)s->base + 1) ^ s->key;
        o[1] = o[0] ^ s->tag;
    } while (!__atomic_compare_exchange_n(&s->remote, &head, (uintptr_t)p, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (!SM_FN(free_hit)(c->ptr, c->size, c->flags, NULL))
        SM_FN(free_miss)(c);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    struct SM_FN(slab) *s;
    if (!SM_FN(locate)(c->ptr, &s))
        return s ? false : SM_NEXT_FN(getmeta)(c);
    c->usable = SM_FN(size_of)(s);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Within the object, unless a shrink frees more than half of it (core/release.h: the socket then
 * moves the block, so a shrunk buffer does not keep its old class's memory). */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    struct SM_FN(slab) *s;
    if (!SM_FN(locate)(c->ptr, &s))
        return s ? false : SM_NEXT_FN(resize)(c, n);
    return n <= SM_FN(size_of)(s) && !sm_shrink_should_move(SM_FN(size_of)(s), n);
}

/* Capability MOVE: its objects stay in their slabs; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    struct SM_FN(slab) *s;
    return !SM_FN(locate)(c->ptr, &s) && !s && SM_NEXT_FN(move)(c, n);
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* ---- giving up, release, fork ---- */

/* s, which its owner gives up (its thread exits): to the empty list if all its objects are back,
 * else onto *chain, to be abandoned (its local list joined to its free list: one list to adopt). */
SM_INLINE void SM_FN(give_up)(struct SM_FN(slab) *s, struct SM_FN(slab) **chain)
{
    SM_FN(take_remote)(s);
    sm_stats_thread_bytes[1] += SM_FN(free_bytes)(s);
    if (s->used == 0) {
        SM_FN(retire)(s);
        return;
    }
    if (!((uintptr_t)s->local & 1)) {
        uint32_t n;
        (void)SM_FN(join_free)(s, s->local, &n); /* damaged: dropped, its objects stay out of use */
        s->local = s->base + 1;
    }
    __atomic_store_n(&s->owner, NULL, __ATOMIC_RELEASE);
    s->where = SM_FN(abandoned);
    s->next = *chain;
    *chain = s;
}

/* The thread's slabs are given up; its heap is kept for the next thread. */
/* Every slab of heap t given up (t stays usable, with no slab). */
SM_SLOWPATH void SM_FN(give_up_all)(struct SM_FN(heap) *t)
{
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        struct SM_FN(slab) *chain = NULL, *s, *n;
        if (t->cur[i] != &SM_FN(none_slab))
            SM_FN(give_up)(t->cur[i], &chain);
        t->cur[i] = &SM_FN(none_slab);
        struct SM_FN(slab) **lists[] = { &t->avail[i], &t->full[i], &t->spare[i] };
        for (unsigned l = 0; l < 3; l++)
            while ((s = *lists[l]) != NULL) {
                SM_FN(list_remove)(lists[l], s);
                SM_FN(give_up)(s, &chain);
            }
        if (!chain)
            continue;
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        size_t k = 0;
        for (s = chain; s; s = n, k++) {
            n = s->next;
            s->next = SM_FN(obj).abandoned[i];
            SM_FN(obj).abandoned[i] = s;
        }
        __atomic_store_n(&SM_FN(obj).nabandoned[i], SM_FN(obj).nabandoned[i] + k, __ATOMIC_RELAXED);
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    t->nspare = 0;
}

/* The thread's slabs are given up; its heap is kept for the next thread. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(heap) *t = SM_FN(mine)();
    if (t) {
        SM_FN(tls) = &SM_FN(none_heap);
        SM_FN(fill_heap) = NULL;
        SM_FN(give_up_all)(t);
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        t->next = SM_FN(obj).spare;
        SM_FN(obj).spare = t;
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    SM_NEXT_FN(thread_exit)();
}

/* On ALL and THREAD (thread.tcache.flush), the calling thread gives up its slabs first. Abandoned
 * slabs whose objects have all come back (through their remote lists) become empty; empty slabs
 * idle for SM_OPT_DECAY_MS (all of them on ALL) are purged. */
SM_INLINE void SM_FN(release)(sm_release_t *r)
{
    struct SM_FN(slab) *purge = NULL, *s, *n;
    bool pending = false;
    if (r->how != SM_RELEASE_DECAYED && SM_FN(mine)())
        SM_FN(give_up_all)(SM_FN(mine)()); /* the calling thread's slabs, for any thread to adopt */
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        struct SM_FN(slab) **at = &SM_FN(obj).abandoned[i];
        while ((s = *at) != NULL) {
            SM_FN(take_remote)(s);
            if (s->used) {
                at = &s->next;
                continue;
            }
            *at = s->next;
            __atomic_store_n(&SM_FN(obj).nabandoned[i], SM_FN(obj).nabandoned[i] - 1, __ATOMIC_RELAXED);
            SM_FN(push_empty_locked)(s);
            pending = true;
        }
        for (at = &SM_FN(obj).empties[i]; (s = *at) != NULL;) {
            if (s->pages == SM_FN(fresh) && r->how != SM_RELEASE_ALL) {
                s->pages = SM_FN(aged);
                pending = true;
            } else if (r->how == SM_RELEASE_ALL || SM_FN(decay_ms) != SM_CONF_DECAY_NEVER) {
                *at = s->next; /* out of the lists while its pages go, outside the lock */
                s->next = purge;
                purge = s;
                continue;
            }
            at = &s->next;
        }
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    for (s = purge; s; s = n) {
        n = s->next;
        sm_mctx_t p = sm_mctx_block(s->base, SM_OPT_SLAB_SIZE, SM_F_ZERO);
        if (SM_NEXT_FN(purge)(&p))
            r->released += p.size;
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        s->pages = SM_FN(purged);
        s->next = SM_FN(obj).purged;
        SM_FN(obj).purged = s;
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    if (pending)
        sm_release_due(r, r->now_ms + SM_FN(decay_ms));
    SM_NEXT_FN(release)(r);
}

SM_FORK_HOOKS_ONE_LOCK(&SM_FN(obj).lock)

#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAP_HIT | (SM_CAPS(SM_NEXT) & SM_CAP_MOVE))

/* Counted from the slabs at read time (the hit paths keep no counter): a slab's live objects are
 * its `used` less its remote list's length, read racily from its owner (exact when quiescent). */
SM_INLINE void SM_FN(stats_slab)(sm_stats_t *st, sm_stats_layer_t *l, struct SM_FN(slab) *s)
{
    if (__atomic_load_n(&s->where, __ATOMIC_RELAXED) == SM_FN(empty)) {
        if (s->pages != SM_FN(purged))
            l->dirty += SM_OPT_SLAB_SIZE;
        return;
    }
    size_t live = __atomic_load_n(&s->used, __ATOMIC_RELAXED), pending = 0;
    uintptr_t o = __atomic_load_n(&s->remote, __ATOMIC_ACQUIRE), key = s->key;
    while (o && !(o & 1) && pending < live && ((o ^ (uintptr_t)s->base) >> SM_FN(shift)) == 0) {
        pending++;
        o = __atomic_load_n((uintptr_t *)o, __ATOMIC_RELAXED) ^ key;
    }
    live -= pending;
    size_t size = SM_FN(size_of)(s);
    sm_stats_class_t *c = sm_stats_class(st, size);
    c->slabs++;
    c->live += live;
    l->in_use += live * size;
}
SM_INLINE void SM_FN(stats)(sm_stats_t *st)
{
    sm_stats_layer_t *l = sm_stats_layer(st, SM_LAYER_NAME);
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    l->blocks = SM_FN(obj).slabs;
    l->held = l->blocks * (SM_OPT_SLAB_SIZE);
    for (struct SM_FN(slab) *s = SM_FN(obj).all; s; s = s->all_next)
        SM_FN(stats_slab)(st, l, s);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    SM_NEXT_FN(stats)(st);
}
#define SM_LAYER_STATS 1

#undef SM_SHARDED_TABLE_MAX
#undef SM_SHARDED_MIN
#undef SM_OPT_SLAB_SIZE
#undef SM_OPT_MIN_OBJECTS
#undef SM_OPT_CARVE_BYTES
#undef SM_OPT_SCAN_FULL
#undef SM_OPT_KEEP_EMPTY
#undef SM_OPT_DECAY_MS

#include "../../core/layer_end.h"
