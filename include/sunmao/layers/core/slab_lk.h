/* slab_lk: a slab allocator with one lock per size class (paper Table 2: "slab 式, 每大小阶锁").
 * A core layer: it carves slabs obtained from the next layer into objects of one size class.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots (all required):
 *   SM_SYNC       one lock per class, plus one for the slab map (none|spinlock|mutex)
 *   SM_SIZECLASS  the class sizes (policies/sizeclass/: tc, log2b, prime, or an interval policy;
 *                 the composition includes the policy's header first)
 *   SM_ERR        invalid and double frees are reported through it, then ignored
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max: the policy's max_size, at most 2 MiB);
 *                 other sizes go to the next layer.
 * Options: SM_OPT_SLAB_SIZE (default 64 KiB, a power of two in [4 KiB, 64 KiB]): the slab size of
 *   the small classes; a class gets a larger power of two when this one would hold fewer than 8
 *   objects. Slabs are requested from the next layer aligned to their size (buddy_glk does that).
 *   SM_OPT_EMPTY_MAX (default: the class count, i.e. no bound beyond one per class): how many
 *   empty slabs all classes together keep (see below).
 *   SM_OPT_COLOURS (default 8, a power of two <= 16): slab colouring, see the layout below; 1 = off.
 *   SM_OPT_SHARDS (default 1, a power of two <= 64): each class's slabs are split into this many
 *   shards, each with its own lock and lists; a thread allocates from the shard of the CPU it runs
 *   on (see Shards below). SM_OPT_SHARD_MAX (default SM_SIZE_MAX): classes larger than this are
 *   not sharded (every CPU uses shard 0).
 * Properties: thread_safe from the sync policy, min_align 16, zeroed 0.
 * Capabilities (core/capability.h): BATCH (alloc_batch under one acquisition of the class lock,
 * free_batch with runs of one class under one lock) and OWNER (block_slot from the page-map word;
 * block_local: false for a slab of a shard other than the calling CPU's, see Shards, a slow path's
 * question: sched_getcpu and a descriptor load). Also L_block_class(p) = block_slot(p) / 16.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake
 *
 * Layout. The slab descriptor sits at the start of its slab, followed by the objects: one request
 * to the next layer per slab, and the descriptor shares its fate. Objects start at an offset
 * aligned to min(largest power of two dividing the class size, 4 KiB), so every object is aligned
 * that much; an aligned request is served by the first class satisfying it, or passed on.
 * A page map (core/pagemap.h, its two-level variant, granule = SM_OPT_SLAB_SIZE) maps every
 * granule of a slab to one word: the address of the slab's first object shifted up by 16 bits and
 * the slab's class in the low 16 (the descriptor is the first object less the class's offset).
 * Blocks this layer does not own are recognised and passed on. Its leaves come from the next
 * layer and are never returned.
 * Why the word carries so much: a thread cache's free asks block_class for the list to push on, so
 * the loads from the pointer to the class are that free's critical path. Reading the class or size
 * from the descriptor made it longer (one more dependent load, and descriptors all sit at
 * slab-aligned addresses, in the same few L1 sets): a malloc+free pair cycling 2 or more classes
 * took 15-18 ns (glibc 9-10). With the word it is two page-map loads and a mask: two classes
 * alternating 15.3 -> 11.6 ns, random 16..1024 B 18.3 -> 13.0 ns; block_class reads the map
 * through its window (core/pagemap.h), one load inside it: 8.96 -> 7.33 ns for five classes
 * cycling (a hand-written thread cache with a flat table: 6.41). block_class, getmeta and free
 * check the object start against the class's geometry (first object offset, object count, the
 * inverse of the size), a 16-byte entry of a small per-class table that stays in L1 and only feeds
 * a predicted branch: a multiply, a rotate and one compare (see object_index).
 * Only the bitmap update under the class lock touches the descriptor.
 * Colouring: the bitmap hands out the lowest free objects first, so the objects in use crowd at
 * the start of their slabs, and slabs are aligned to 64 KiB: the same offsets in every slab of
 * every class fall in the same sets of a 1-2 MiB L2 cache. Each slab of a class whose objects
 * need no more than 64-byte alignment starts its objects 0..SM_OPT_COLOURS-1 cache lines later,
 * chosen by its address (the class reserves room for the largest shift, 448 B of 64 KiB at 8).
 * alloc-test (random replacement of 4096 blocks, 2 threads): 0.36 -> 0.32 s over 9 runs, min-max
 * apart; larson, glibc-thread unchanged. (A per-class offset, tried first, changed nothing.)
 *
 * Free objects are tracked by a bitmap (1 = free, as jemalloc 2006's region bitmaps) with a
 * 64-bit summary of the non-empty words: allocation is two count-trailing-zeros, a double free is
 * a bit that is already set, and nothing is ever written into free objects, so a use after free
 * cannot corrupt the allocator's own state. That caps a slab at 64 * 64 = 4096 objects, which
 * is why SM_OPT_SLAB_SIZE is at most 64 KiB (4096 objects of 16 bytes).
 * Turning a pointer into an object index is a multiply by the inverse of the class size's odd part
 * and a rotate (exact, and it validates the pointer at once; see object_index), not a division.
 *
 * Per class: a doubly linked list of slabs with free objects (full slabs are on no list);
 * allocation takes from its head. A slab that becomes empty stays on the list if the class keeps
 * no other empty slab, else it is returned to the next layer: alloc/free at a slab boundary cannot
 * make every call go to the next layer (jemalloc 2006's fullness hysteresis), the common
 * one-object alloc/free never leaves the fast path, and a class never hoards more than one empty
 * slab. Allocation only ever takes from the head, so the kept slab stops being empty exactly when
 * it is the head and is allocated from: that one compare keeps the count right.
 * Across classes, at most SM_OPT_EMPTY_MAX slabs are kept: when one more is kept, the one kept
 * longest (by a global stamp taken when it was kept) is released, so the classes in use keep
 * their hysteresis and classes a program has moved away from do not each pin a slab. Why: a
 * program that allocates bursts of one size after another (glibc-simple, 20 classes of 16 B-1 KiB)
 * kept 18 empty 64 KiB slabs, 1.1 MiB of its 3.6 MiB of slabs, with 1 MiB live. The count and the
 * stamp are atomics touched only when a slab becomes empty or stops being empty (once per slab's
 * worth of objects at most), never on an object's alloc or free; the eviction runs with no lock
 * held and takes the victim's class lock alone, so the lock order below is kept.
 *
 * Shards. With one set of slabs per class, the threads' refills take objects side by side from
 * the same slab, and objects freed by one thread and handed to another by a refill sit next to
 * the first thread's live ones: cache lines written by two cores (false sharing), and one lock per
 * class for all the threads. With SM_OPT_SHARDS > 1 every class has that many class structs;
 * allocation uses the one of the caller's CPU (sched_getcpu(), which glibc answers from its rseq
 * area without a system call), so threads running at the same time take from different slabs. A
 * slab stays under the class struct it was made by (s->home); frees go to it from any CPU. A shard
 * with no slab to allocate from first steals another shard's kept empty slab, or the second slab
 * of a shard that has two or more with free objects (trying its lock, never waiting, so two
 * stealing shards cannot deadlock), and maps a new one only if none: the shards together keep
 * about as many partly used slabs as one would, plus one per shard. Measured on this 2-CPU VM
 * (two threads; unsharded -> 2 shards with stealing): alloc-test 0.33 -> 0.28 s, glibc-thread
 * 0.50 -> 0.39, larson 0.25 -> 0.19 (mimalloc 0.17), xmalloc 0.28 -> 0.27; peak RSS +4-10% on
 * those and sh8bench, rptest (without stealing: sh8bench +24%, rptest +17%). One thread: no change.
 * Large objects share few cache lines with their neighbours, and a slab holds few of them, so a
 * partly used slab per shard costs more and buys less: with SM_OPT_SHARD_MAX 512 (libsunmao) peak
 * RSS fell 3-8% on larson, sh8bench, alloc-test, rptest and wcet, times unchanged; with 256 or
 * 128, mtest with two threads (64-512 B) took 0.38 -> 0.54 s and larson 0.19 -> 0.21 s.
 * A steal moves s->home with both class structs' locks held, so a free reads home, locks it and
 * checks it again (lock_home); free_batch checks each block's home under the lock it took.
 *
 * Locking: class lock -> map lock -> next layer's locks, in that order only (a steal only tries
 * another shard's class lock). The fast paths take
 * the class lock once; reading a slab's immutable descriptor fields before it is safe because a
 * slab holding a live object is never released. A free racing with the release of the slab it
 * points into is a double free the map cannot always catch. */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "slab_lk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "slab_lk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "slab_lk: policy slot 'sync' is empty (SM_SYNC = none|spinlock|mutex)"
#endif
#ifndef SM_SIZECLASS
#error "slab_lk: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|log2b|prime|<interval policy>)"
#endif
#ifndef SM_ERR
#error "slab_lk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
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
};

/* The page-map word (see the layout above): the address of the slab's first object in the high
 * 48 bits, 16 x the class in the low 16 (the class's slot, see block_slot). */
_Static_assert(SM_SIZECLASS_FN(count) < 4096, "slab_lk: 16 x the class must fit the page-map word's 16 bits");
_Static_assert(sizeof(uintptr_t) == 8 && SM_PAGEMAP_ADDR_BITS == 48, "slab_lk: the page-map word needs 64-bit words");

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

/* A class's geometry, the same for all its slabs: what block_class, getmeta and free need to check
 * an object start without loading the descriptor. 16 bytes, so the table of the small classes is a
 * few lines, in an array of its own: read on every free, never written near anything that is.
 * Written (class lock held) before the class's first slab is mapped, then read only: a block of
 * the class reaches a reader only after that. The class size is not here: the policy computes it
 * off the free's hit path, and the check needs only its trailing zeros. */
struct SM_FN(geo) {
    uint64_t inverse; /* of the odd part of the class size, modulo 2^64 (see object_index) */
    uint16_t offset;  /* of the first object from the slab's start (<= 4096 + descriptor) */
    uint16_t nobjs;   /* objects per slab (<= 4096); 0 until the class's first slab */
    uint8_t twos;     /* trailing zero bits of the class size */
    uint8_t slab_shift; /* log2 of the class's slab size */
    uint8_t coloured;   /* the class's slabs are coloured (see the layout above) */
};

struct SM_FN(class) {
    SM_SYNC_FN(t) lock;
    struct SM_FN(slab) *partial; /* slabs with a free object */
    unsigned npartial;           /* slabs on that list; class lock to write, read without it by a
                                  * steal looking for a victim */
    struct SM_FN(slab) *empty;   /* the slab on the list with no object in use, or NULL; class lock
                                  * to write, read without it by an eviction looking for a victim */
    uint64_t empty_stamp;        /* when `empty` was kept (obj.empty_clock); same access as `empty` */
    uint32_t slab_bytes;         /* 0 until the geometry is computed, on the class's first slab */
} SM_CACHE_ALIGNED;

static struct {
    /* first, on the page of shard 0's classes: a small program touches one page of this object
     * besides the map's root entry */
    SM_SYNC_FN(t) map_lock; /* page map updates: slabs of different classes come and go at once */
    unsigned empty_count;   /* classes keeping an empty slab (atomic) */
    uint64_t empty_clock;   /* stamps for the kept slabs' age (atomic) */
    struct SM_FN(class) cls[SM_FN(shards) * SM_FN(class_count)]; /* shard-major */
    uintptr_t *map[SM_PAGEMAP2_ROOT_LEN(SM_FN(map_shift))]; /* two-level: see the layout above */
} SM_FN(obj) = {
    .cls = { [0 ... SM_FN(shards) * SM_FN(class_count) - 1] = { .lock = SM_SYNC_INIT } },
    .map_lock = SM_SYNC_INIT,
};
/* The map's first leaf, for lookup (core/pagemap.h). Not in obj: its initial value is not
 * zero, and obj (36 KiB with the map's root) would leave .bss for .data, whose pages the kernel
 * maps in 64 KiB at a time once one is read: 36 KiB of RSS in every process instead of the
 * few pages in use. */
static sm_pagemap2_window_t SM_FN(map_window) = SM_PAGEMAP2_WINDOW_INIT;

static struct SM_FN(geo) SM_FN(geometry)[SM_FN(class_count)] SM_CACHE_ALIGNED;

/* The page-map word of p's granule: 0 if this layer does not own it, else first object | class.
 * One load through the map's window where p is inside it (core/pagemap.h). An address at 2^48 or
 * above may find the word of its low 48 bits: every caller checks p against the word
 * (object_index), which no such address passes. */
SM_HOT uintptr_t SM_FN(lookup)(const void *p)
{
    return sm_pagemap2_get_windowed(SM_FN(obj).map, &SM_FN(map_window), SM_FN(map_shift), p);
}
SM_HOT unsigned SM_FN(word_slot)(uintptr_t w) { return (unsigned)(uint16_t)w; }
SM_INLINE unsigned SM_FN(word_cls)(uintptr_t w) { return SM_FN(word_slot)(w) >> 4; }
SM_INLINE uintptr_t SM_FN(word_first)(uintptr_t w) { return w >> 16; }
/* The descriptor: the first object's address less the class's offset and the slab's colour, which
 * is less than a slab, whose start is aligned to its size. */
SM_INLINE struct SM_FN(slab) *SM_FN(word_slab)(uintptr_t w, const struct SM_FN(geo) *g)
{
    return (struct SM_FN(slab) *)((SM_FN(word_first)(w) - g->offset) & ~(((uintptr_t)1 << g->slab_shift) - 1));
}
SM_INLINE uintptr_t SM_FN(make_word)(const struct SM_FN(slab) *s, unsigned cls)
{
    return (uintptr_t)s->objects << 16 | cls << 4;
}

/* The index of the object starting at p in the slab of page-map word w (its class's geometry g):
 * below g->nobjs if p is an object start, at least g->nobjs otherwise. Reads no descriptor (the
 * slab's address is in w) and makes one compare, which the caller makes: an exact divisibility test
 * by multiplication (Granlund and Montgomery 1994). With size = odd << twos and inverse the odd
 * part's inverse modulo 2^64, rotating off * inverse right by twos gives off / size when size
 * divides off; when it does not, either a low bit of off below twos is set (the rotation moves it
 * to the top: a huge result) or the odd part does not divide (off >> twos) and the product, taken
 * modulo 2^(64 - twos), is not below 2^(64 - twos) / odd > nobjs. An off that wrapped (p below
 * the first object) fails the same way. So idx < nobjs holds exactly when off = idx * size for an
 * idx < nobjs: no division, no second multiply, no bounds test of its own. As p - first < 2^33
 * for a valid index, a p at 2^48 or above never passes, whatever word its lower bits found. */
SM_HOT size_t SM_FN(object_index)(const struct SM_FN(geo) *g, uintptr_t w, const void *p)
{
    uint64_t off = (uint64_t)((uintptr_t)p - SM_FN(word_first)(w));
    uint64_t q = off * g->inverse;
    unsigned twos = g->twos;
    return (size_t)((q >> twos) | (q << ((64 - twos) & 63)));
}

SM_SLOWPATH void SM_FN(report)(sm_err_kind_t kind, const void *p, const char *detail)
{
    SM_ERR_FN(raise)(kind, SM_LAYER_NAME, p, detail);
}

SM_SLOWPATH void SM_FN(compute_geometry)(unsigned cls)
{
    size_t size = SM_SIZECLASS_FN(class_to_size)(cls);
    size_t align = size & -size;
    if (align > SM_FN(max_object_align))
        align = SM_FN(max_object_align);
    bool coloured = (SM_OPT_COLOURS) > 1 && align <= SM_FN(colour_unit);
    size_t reserve = coloured ? ((SM_OPT_COLOURS) - 1) * (size_t)SM_FN(colour_unit) : 0; /* the largest shift */
    size_t slab = SM_OPT_SLAB_SIZE, offset, nobjs;
    for (;; slab <<= 1) {
        size_t most = slab / size < SM_FN(max_objects) ? slab / size : SM_FN(max_objects);
        offset = sm_align_up(sizeof(struct SM_FN(slab)) + (most + 63) / 64 * sizeof(uint64_t), align);
        nobjs = offset + reserve < slab ? (slab - offset - reserve) / size : 0;
        if (nobjs >= SM_FN(min_objects))
            break;
    }
    _Static_assert(sizeof(struct SM_FN(slab)) + SM_FN(max_objects) / 8 + SM_FN(max_object_align) <= 65535,
                   "slab_lk: the first object's offset must fit the geometry's 16 bits");
    struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    /* Newton's iteration for the inverse of an odd number modulo 2^64: x = odd is right in its 3
     * low bits (odd * odd = 1 mod 8) and each step doubles the correct bits: 3, 6, ..., 96. */
    uint64_t odd = (uint64_t)size >> __builtin_ctzll(size), inverse = odd;
    for (int i = 0; i < 5; i++)
        inverse *= 2 - odd * inverse;
    g->inverse = inverse;
    g->twos = (uint8_t)__builtin_ctzll(size);
    g->slab_shift = (uint8_t)__builtin_ctzll(slab);
    g->coloured = coloured;
    g->offset = (uint16_t)offset;
    g->nobjs = (uint16_t)(nobjs < SM_FN(max_objects) ? nobjs : SM_FN(max_objects));
}

/* Page-map leaves: zero-filled, from the next layer, kept forever. */
static void *SM_FN(map_node_alloc)(size_t bytes)
{
    sm_mctx_t r = sm_mctx_alloc(bytes, 4096, 0);
    return sm_mctx_zeroed(&r, SM_NEXT_FN(alloc)(&r));
}

/* Maps every granule of the slab at base to `word` (first object << 16 | class), or unmaps it
 * with 0. False if a map node could not be had. */
SM_INLINE bool SM_FN(map_slab)(uintptr_t word, void *base, size_t bytes)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
    bool ok = sm_pagemap2_set(SM_FN(obj).map, SM_FN(map_shift), base, bytes, word, SM_FN(map_node_alloc));
    if (ok && word)
        sm_pagemap2_window_note(&SM_FN(map_window), SM_FN(obj).map, SM_FN(map_shift), base);
    if (!ok) /* undo the granules already set: the slab is about to go back */
        sm_pagemap2_set(SM_FN(obj).map, SM_FN(map_shift), base, bytes, 0, SM_FN(map_node_alloc));
    SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
    return ok;
}

/* Class lock held (npartial is read without it, hence the atomic store). */
SM_INLINE void SM_FN(count_partial)(struct SM_FN(class) *k, int delta)
{
    __atomic_store_n(&k->npartial, k->npartial + (unsigned)delta, __ATOMIC_RELAXED);
}

/* The class's geometry is computed once, by the first slab of any shard, under the map lock (the
 * class lock -> map lock order), so a shard's first slab writes nothing of another shard's. */
SM_SLOWPATH void SM_FN(first_slab_of_shard)(struct SM_FN(class) *k, unsigned cls)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
    if (!SM_FN(geometry)[cls].nobjs)
        SM_FN(compute_geometry)(cls);
    k->slab_bytes = (uint32_t)1 << SM_FN(geometry)[cls].slab_shift;
    SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
}

/* The shard of class cls for the calling thread: its CPU's (sm_plat_cpu: on Linux read from the
 * rseq area glibc registers, no system call), so threads running at the same time take objects from
 * different slabs; shard 0 for a class above SM_OPT_SHARD_MAX. */
SM_INLINE unsigned SM_FN(shard_here)(unsigned cls, sm_mctx_t *c)
{
    if (SM_FN(shards) == 1 || SM_SIZECLASS_FN(class_to_size)(cls) > (size_t)(SM_OPT_SHARD_MAX))
        return 0;
    return (unsigned)sm_mctx_cpu(c) & (SM_FN(shards) - 1);
}

/* Called with the class lock held, so the class's slabs come one at a time. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(slab_new)(struct SM_FN(class) *k, unsigned cls)
{
    if (!k->slab_bytes)
        SM_FN(first_slab_of_shard)(k, cls);
    const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    sm_mctx_t r = sm_mctx_alloc(k->slab_bytes, k->slab_bytes, 0);
    struct SM_FN(slab) *s = (struct SM_FN(slab) *)SM_NEXT_FN(alloc)(&r);
    if (!s)
        return NULL;
    if (sm_ptr_aligned(s, k->slab_bytes)) {
        /* The descriptor is complete before the map publishes it. */
        s->prev = s->next = NULL;
        size_t colour = g->coloured ? (((uintptr_t)s >> g->slab_shift) & ((SM_OPT_COLOURS) - 1)) * SM_FN(colour_unit) : 0;
        s->objects = (char *)s + g->offset + colour;
        s->home = k;
        s->size = (uint32_t)SM_SIZECLASS_FN(class_to_size)(cls);
        s->nobjs = s->nfree = g->nobjs;
        s->bytes = k->slab_bytes;
        unsigned full_words = g->nobjs / 64u, tail = g->nobjs % 64u, words = full_words + (tail != 0);
        for (unsigned w = 0; w < full_words; w++)
            s->free_bits[w] = ~(uint64_t)0;
        if (tail)
            s->free_bits[full_words] = ((uint64_t)1 << tail) - 1;
        s->nonempty_words = words == 64 ? ~(uint64_t)0 : ((uint64_t)1 << words) - 1;
        if (SM_FN(map_slab)(SM_FN(make_word)(s, cls), s, k->slab_bytes))
            return s;
    } else {
        SM_FN(report)(SM_ERR_BAD_REQUEST, s, "the next layer returned a slab not aligned to its size");
    }
    sm_mctx_t back = sm_mctx_block(s, k->slab_bytes, SM_F_SIZED);
    SM_NEXT_FN(free)(&back);
    return NULL;
}

/* Called without any lock held. */
SM_SLOWPATH void SM_FN(slab_release)(struct SM_FN(slab) *s)
{
    size_t bytes = s->bytes;
    SM_FN(map_slab)(0, s, bytes); /* clearing allocates nothing, so it cannot fail */
    sm_mctx_t r = sm_mctx_block(s, bytes, SM_F_SIZED);
    SM_NEXT_FN(free)(&r);
}

SM_SLOWPATH struct SM_FN(slab) *SM_FN(steal)(struct SM_FN(class) *k, unsigned cls);

/* Class k (of a shard) has no slab with a free object: take one from another shard, or get a new
 * one. Class lock held. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(refill)(struct SM_FN(class) *k, unsigned cls)
{
    struct SM_FN(slab) *s = SM_FN(shards) > 1 ? SM_FN(steal)(k, cls) : NULL;
    if (!s && !(s = SM_FN(slab_new)(k, cls)))
        return NULL;
    s->prev = s->next = NULL;
    k->partial = s;
    SM_FN(count_partial)(k, 1);
    return s;
}

/* Slab s is empty and is not to be kept: off the list, to be released after unlocking. Class
 * lock held. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(retire)(struct SM_FN(class) *k, struct SM_FN(slab) *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        k->partial = s->next;
    if (s->next)
        s->next->prev = s->prev;
    SM_FN(count_partial)(k, -1);
    return s;
}

/* Slab s of class k has just become empty and k keeps none: keep it. True if that makes more kept
 * slabs than SM_OPT_EMPTY_MAX, and the caller is to call evict() once it holds no lock. Class lock
 * held. */
SM_SLOWPATH bool SM_FN(keep_empty)(struct SM_FN(class) *k, struct SM_FN(slab) *s)
{
    __atomic_store_n(&k->empty_stamp, __atomic_fetch_add(&SM_FN(obj).empty_clock, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&k->empty, s, __ATOMIC_RELAXED);
    return __atomic_add_fetch(&SM_FN(obj).empty_count, 1, __ATOMIC_RELAXED) > (SM_OPT_EMPTY_MAX);
}

/* Class k's kept slab is being allocated from, or released: it is kept no more. Class lock held. */
SM_SLOWPATH void SM_FN(unkeep_empty)(struct SM_FN(class) *k)
{
    __atomic_store_n(&k->empty, NULL, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&SM_FN(obj).empty_count, 1, __ATOMIC_RELAXED);
}

/* More slabs are kept than SM_OPT_EMPTY_MAX: release the one kept longest. Called with no lock
 * held. The victim is chosen from unlocked reads, then checked under its class lock: a slab that
 * was allocated from or released meanwhile is left alone (the next eviction sees the new count). */
SM_SLOWPATH void SM_FN(evict)(void)
{
    struct SM_FN(class) *victim = NULL;
    uint64_t oldest = UINT64_MAX;
    for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++) {
        struct SM_FN(class) *k = &SM_FN(obj).cls[i];
        uint64_t stamp = __atomic_load_n(&k->empty_stamp, __ATOMIC_RELAXED);
        if (__atomic_load_n(&k->empty, __ATOMIC_RELAXED) && stamp < oldest) {
            oldest = stamp;
            victim = k;
        }
    }
    if (!victim)
        return;
    struct SM_FN(slab) *s;
    SM_SYNC_FN(lock)(&victim->lock);
    s = victim->empty;
    if (s && __atomic_load_n(&SM_FN(obj).empty_count, __ATOMIC_RELAXED) > (SM_OPT_EMPTY_MAX)) {
        SM_FN(unkeep_empty)(victim);
        SM_FN(retire)(victim, s);
    } else {
        s = NULL;
    }
    SM_SYNC_FN(unlock)(&victim->lock);
    if (s)
        SM_FN(slab_release)(s);
}

/* Shard k has no slab of class cls with a free object. Another shard's kept empty slab, or a slab
 * of one that has two or more with free objects (its head, the one it allocates from, is left to
 * it), moves over: only then does a shard map a new slab, so the shards together hold about as many
 * partial slabs as one would, plus at most one per shard. The other shard's lock is only tried:
 * two shards stealing from each other must not wait for each other. Class lock of k held. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(steal)(struct SM_FN(class) *k, unsigned cls)
{
    unsigned me = (unsigned)(k - SM_FN(obj).cls) / SM_FN(class_count);
    for (unsigned d = 1; d < SM_FN(shards); d++) {
        struct SM_FN(class) *v = &SM_FN(obj).cls[((me + d) & (SM_FN(shards) - 1)) * SM_FN(class_count) + cls];
        if (!__atomic_load_n(&v->empty, __ATOMIC_RELAXED) && __atomic_load_n(&v->npartial, __ATOMIC_RELAXED) < 2)
            continue;
        if (!SM_SYNC_FN(trylock)(&v->lock))
            continue;
        struct SM_FN(slab) *s = v->empty;
        if (s)
            SM_FN(unkeep_empty)(v);
        else if (v->npartial >= 2)
            s = v->partial->next;
        if (s) {
            SM_FN(retire)(v, s);
            __atomic_store_n(&s->home, k, __ATOMIC_RELAXED);
        }
        SM_SYNC_FN(unlock)(&v->lock);
        if (s)
            return s;
    }
    return NULL;
}

/* Locks the class struct slab s is under and returns it (see home). */
SM_INLINE struct SM_FN(class) *SM_FN(lock_home)(struct SM_FN(slab) *s)
{
    for (;;) {
        struct SM_FN(class) *k = __atomic_load_n(&s->home, __ATOMIC_RELAXED);
        SM_SYNC_FN(lock)(&k->lock);
        if (SM_FN(shards) == 1 || sm_likely(__atomic_load_n(&s->home, __ATOMIC_RELAXED) == k))
            return k;
        SM_SYNC_FN(unlock)(&k->lock); /* stolen meanwhile */
    }
}

/* An aligned request: the first class from `size` up whose objects are aligned enough (its size
 * is a multiple of align, see the layout above), or class_count when none is. */
SM_SLOWPATH unsigned SM_FN(aligned_class)(size_t size, size_t align)
{
    if (align > SM_FN(max_object_align) || size > (size_t)(SM_SIZE_MAX))
        return SM_FN(class_count);
    size_t need = sm_align_up(size ? size : 1, align);
    if (need > (size_t)(SM_SIZE_MAX))
        return SM_FN(class_count);
    unsigned last = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MAX));
    for (unsigned cls = SM_SIZECLASS_FN(size_to_class)(need); cls <= last; cls++)
        if ((SM_SIZECLASS_FN(class_to_size)(cls) & (align - 1)) == 0)
            return cls;
    return SM_FN(class_count);
}

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* Takes the lowest free object of slab s, the head of class k's partial list. Class lock held. */
SM_INLINE void *SM_FN(take_locked)(struct SM_FN(class) *k, struct SM_FN(slab) *s)
{
    if (sm_unlikely(s == k->empty))
        SM_FN(unkeep_empty)(k);
    unsigned w = (unsigned)__builtin_ctzll(s->nonempty_words);
    uint64_t bits = s->free_bits[w];
    size_t idx = (size_t)w * 64 + (unsigned)__builtin_ctzll(bits);
    bits &= bits - 1;
    s->free_bits[w] = bits;
    if (!bits)
        s->nonempty_words &= ~((uint64_t)1 << w);
    if (sm_unlikely(--s->nfree == 0)) { /* full: off the list (it is the head) */
        k->partial = s->next;
        if (s->next)
            s->next->prev = NULL;
        SM_FN(count_partial)(k, -1);
    }
    return s->objects + idx * s->size;
}

/* Marks object idx of slab s (class k) free. False if it already was (a double free: nothing
 * changed). *release is set to the slab when it became empty and must go back to the next layer
 * once the lock is dropped; *evict is set when evict() is to run then. Class lock held. */
SM_INLINE bool SM_FN(put_locked)(struct SM_FN(class) *k, struct SM_FN(slab) *s, size_t idx,
                                 struct SM_FN(slab) **release, bool *evict)
{
    uint64_t bit = (uint64_t)1 << (idx % 64);
    uint64_t *word = &s->free_bits[idx / 64];
    if (sm_unlikely(*word & bit))
        return false;
    *word |= bit;
    s->nonempty_words |= (uint64_t)1 << (idx / 64);
    uint32_t nfree = ++s->nfree;
    if (nfree == 1) { /* was full: back on the partial list */
        s->prev = NULL;
        s->next = k->partial;
        if (k->partial)
            k->partial->prev = s;
        k->partial = s;
        SM_FN(count_partial)(k, 1);
    }
    if (sm_unlikely(nfree == s->nobjs)) {
        if (k->empty)
            *release = SM_FN(retire)(k, s);
        else if (SM_FN(keep_empty)(k, s))
            *evict = true;
    }
    return true;
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (!SM_FN(handles_size)(c->size))
        return SM_NEXT_FN(alloc)(c);
    unsigned cls;
    if (sm_likely(c->align <= SM_MIN_ALIGN)) {
        cls = SM_SIZECLASS_FN(size_to_class)(c->size);
    } else {
        cls = SM_FN(aligned_class)(c->size, c->align);
        if (cls >= SM_FN(class_count))
            return SM_NEXT_FN(alloc)(c);
    }
    struct SM_FN(class) *k = &SM_FN(obj).cls[SM_FN(shard_here)(cls, c) * SM_FN(class_count) + cls];
    SM_SYNC_FN(lock)(&k->lock);
    struct SM_FN(slab) *s = k->partial;
    if (sm_unlikely(!s) && !(s = SM_FN(refill)(k, cls))) {
        SM_SYNC_FN(unlock)(&k->lock);
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    void *p = SM_FN(take_locked)(k, s);
    SM_SYNC_FN(unlock)(&k->lock);
    return c->ptr = p;
}

/* Batch interface, for a thread cache above: up to n objects of the class of c->size
 * (c->align <= 16) under one acquisition of the class lock, walking the partial slabs and taking
 * new slabs from the next layer as needed. Objects come out in the order a slab hands them out
 * (ascending addresses within a slab). Returns how many were stored in out: fewer than n when the
 * next layer ran out of memory, 0 with errno = ENOMEM when none could be had, and 0 with
 * errno = EINVAL for a request this layer does not serve as a class (size outside size_handle or
 * align > 16): the caller then sends it through alloc. */
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    if (sm_unlikely(!SM_FN(handles_size)(c->size) || c->align > SM_MIN_ALIGN)) {
        errno = EINVAL;
        return 0;
    }
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size), got = 0;
    struct SM_FN(class) *k = &SM_FN(obj).cls[SM_FN(shard_here)(cls, c) * SM_FN(class_count) + cls];
    SM_SYNC_FN(lock)(&k->lock);
    while (got < n) {
        struct SM_FN(slab) *s = k->partial;
        if (!s && !(s = SM_FN(refill)(k, cls)))
            break;
        /* take_locked's work, a bitmap word at a time: the bits taken from one word are cleared
         * with one store and counted once, so the class lock is held for about a ctz and an
         * address per object (the lock is what the threads of a burst-heavy program wait on). */
        if (sm_unlikely(s == k->empty))
            SM_FN(unkeep_empty)(k);
        uint32_t nfree = s->nfree;
        size_t size = s->size;
        do {
            unsigned w = (unsigned)__builtin_ctzll(s->nonempty_words);
            uint64_t bits = s->free_bits[w];
            char *base = s->objects + (size_t)w * 64 * size;
            unsigned before = got;
            do {
                out[got++] = base + (size_t)__builtin_ctzll(bits) * size;
                bits &= bits - 1;
            } while (bits && got < n);
            s->free_bits[w] = bits;
            if (!bits)
                s->nonempty_words &= ~((uint64_t)1 << w);
            nfree -= got - before;
        } while (nfree && got < n);
        s->nfree = nfree;
        if (!nfree) { /* full: off the list (it is the head) */
            k->partial = s->next;
            if (s->next)
                s->next->prev = NULL;
            SM_FN(count_partial)(k, -1);
        }
    }
    SM_SYNC_FN(unlock)(&k->lock);
    if (!got && n)
        errno = ENOMEM;
    return got;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    uintptr_t w = SM_FN(lookup)(c->ptr);
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
    struct SM_FN(slab) *s = SM_FN(word_slab)(w, g);
    struct SM_FN(slab) *release = NULL;
    bool evict = false;
    struct SM_FN(class) *k = SM_FN(lock_home)(s);
    bool freed = SM_FN(put_locked)(k, s, idx, &release, &evict);
    SM_SYNC_FN(unlock)(&k->lock);
    if (sm_unlikely(!freed))
        SM_FN(report)(SM_ERR_DOUBLE_FREE, c->ptr, "object is already free; ignored");
    if (release)
        SM_FN(slab_release)(release);
    if (sm_unlikely(evict))
        SM_FN(evict)();
}

enum {
    SM_FN(batch_release_max) = 8, /* emptied slabs one lock section may set aside */
    SM_FN(batch_run_max) = 64,    /* blocks one lock section frees */
};

/* Frees n blocks. A run of consecutive blocks of the same class is freed under one acquisition of
 * the class lock; every block is validated as free() validates it (an interior pointer or a double
 * free reaches the err policy after the lock is dropped, and is ignored). Blocks this layer does
 * not own go to the next layer's free one by one. The order of `blocks` is kept.
 * A run is resolved to (slab, index) pairs before the lock is taken — the page-map loads, the
 * geometry check and the multiply are per-object work the class lock does not need to cover —
 * so the lock is held for the bitmap updates alone (threads freeing bursts of one class wait on
 * it). */
SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n)
{
    unsigned i = 0;
    while (i < n) {
        void *p = blocks[i++];
        uintptr_t w = SM_FN(lookup)(p);
        if (!w) {
            sm_mctx_t r = sm_mctx_block(p, 0, 0);
            SM_NEXT_FN(free)(&r);
            continue;
        }
        unsigned cls = SM_FN(word_cls)(w);
        const struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
        size_t idx = SM_FN(object_index)(g, w, p);
        if (sm_unlikely(idx >= g->nobjs)) {
            SM_FN(report)(SM_ERR_INVALID_FREE, p, "pointer into a slab is not the start of an object; ignored");
            continue;
        }
        /* The run: this block and the valid blocks of the same class that follow it; anything
         * else is left to the outer loop, which passes it on or reports it. */
        unsigned first = i - 1, m = 0;
        struct SM_FN(slab) *run_slab[SM_FN(batch_run_max)];
        uint16_t run_idx[SM_FN(batch_run_max)];
        run_slab[m] = SM_FN(word_slab)(w, g);
        run_idx[m++] = (uint16_t)idx;
        struct SM_FN(class) *k = __atomic_load_n(&run_slab[0]->home, __ATOMIC_RELAXED);
        while (i < n && m < SM_FN(batch_run_max)) {
            p = blocks[i];
            w = SM_FN(lookup)(p);
            if (!w || SM_FN(word_cls)(w) != cls || (idx = SM_FN(object_index)(g, w, p)) >= g->nobjs)
                break;
            run_slab[m] = SM_FN(word_slab)(w, g);
            if (SM_FN(shards) > 1 && __atomic_load_n(&run_slab[m]->home, __ATOMIC_RELAXED) != k)
                break;
            run_idx[m++] = (uint16_t)idx;
            i++;
        }
        struct SM_FN(slab) *release[SM_FN(batch_release_max)];
        unsigned nrelease = 0, j = 0;
        void *double_freed = NULL;
        bool evict = false;
        SM_SYNC_FN(lock)(&k->lock);
        for (; j < m; j++) {
            struct SM_FN(slab) *emptied = NULL;
            if (SM_FN(shards) > 1 && sm_unlikely(__atomic_load_n(&run_slab[j]->home, __ATOMIC_RELAXED) != k))
                break; /* stolen since the run was built: this block and the rest go round again */
            if (sm_unlikely(!SM_FN(put_locked)(k, run_slab[j], run_idx[j], &emptied, &evict))) {
                double_freed = blocks[first + j]; /* reported once unlocked; the run ends here */
                j++;
                break;
            }
            if (emptied) {
                release[nrelease++] = emptied;
                if (nrelease == SM_FN(batch_release_max)) {
                    j++;
                    break; /* out of room: release these, then start a new run */
                }
            }
        }
        SM_SYNC_FN(unlock)(&k->lock);
        i = first + j; /* blocks of the run not freed yet go round again */
        if (double_freed)
            SM_FN(report)(SM_ERR_DOUBLE_FREE, double_freed, "object is already free; ignored");
        for (unsigned r = 0; r < nrelease; r++)
            SM_FN(slab_release)(release[r]);
        if (sm_unlikely(evict))
            SM_FN(evict)();
    }
}

/* A thread cache's unsized free: which list p goes on, as the class's *slot*, 16 x the class: the
 * byte offset of the class's entry in a table of 16-byte entries (the geometry here, a thread
 * cache's lists), so neither side multiplies. One page-map lookup, the geometry check, nothing else
 * (no size, no descriptor): the free's chain from the pointer to its list's address is the page-map
 * load and one zero-extension. With block_class's class, the cache shifted and added it, two
 * operations on that chain, which the next malloc of the class waits on: the pair 7.58 -> 7.37 ns.
 * 16 x class_count means "not one of my objects": not owned, or not an object start. */
SM_HOT unsigned SM_FN(block_slot)(const void *p)
{
    uintptr_t w = SM_FN(lookup)(p);
    unsigned slot = SM_FN(word_slot)(w);
    const struct SM_FN(geo) *g = (const struct SM_FN(geo) *)((const char *)SM_FN(geometry) + slot);
    _Static_assert(sizeof(struct SM_FN(geo)) == 16, "slab_lk: a slot is the offset of a 16-byte geometry entry");
    if (sm_likely(w != 0) && sm_likely(SM_FN(object_index)(g, w, p) < g->nobjs))
        return slot;
    return SM_FN(class_count) << 4;
}

/* The class of the object starting at p, or class_count (block_slot's answer, as a class). */
SM_INLINE unsigned SM_FN(block_class)(const void *p) { return SM_FN(block_slot)(p) >> 4; }

SM_INLINE bool SM_FN(block_local)(const void *p, sm_mctx_t *c)
{
    if (SM_FN(shards) == 1)
        return true;
    uintptr_t w = SM_FN(lookup)(p);
    if (!w)
        return true; /* not a slab's: nothing to say */
    const struct SM_FN(slab) *s = SM_FN(word_slab)(w, &SM_FN(geometry)[SM_FN(word_cls)(w)]);
    const struct SM_FN(class) *home = __atomic_load_n(&s->home, __ATOMIC_RELAXED);
    unsigned i = (unsigned)(home - SM_FN(obj).cls);
    return i / SM_FN(class_count) == SM_FN(shard_here)(i % SM_FN(class_count), c);
}

/* One page-map lookup and the class's geometry: no descriptor (see the layout above). */
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
    if (r->how == SM_RELEASE_ALL && __atomic_load_n(&SM_FN(obj).empty_count, __ATOMIC_RELAXED)) {
        for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++) {
            struct SM_FN(class) *k = &SM_FN(obj).cls[i];
            if (!__atomic_load_n(&k->empty, __ATOMIC_RELAXED))
                continue;
            SM_SYNC_FN(lock)(&k->lock);
            struct SM_FN(slab) *s = k->empty;
            if (s) {
                SM_FN(unkeep_empty)(k);
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

SM_INLINE void SM_FN(fork_prepare)(void)
{
    for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++)
        SM_SYNC_FN(lock)(&SM_FN(obj).cls[i].lock);
    SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
    SM_NEXT_FN(fork_prepare)();
}

SM_INLINE void SM_FN(fork_parent)(void)
{
    SM_NEXT_FN(fork_parent)();
    SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
    for (unsigned i = SM_FN(shards) * SM_FN(class_count); i-- > 0;)
        SM_SYNC_FN(unlock)(&SM_FN(obj).cls[i].lock);
}

SM_INLINE void SM_FN(fork_child)(void)
{
    SM_NEXT_FN(fork_child)();
    SM_SYNC_FN(reinit)(&SM_FN(obj).map_lock);
    for (unsigned i = 0; i < SM_FN(shards) * SM_FN(class_count); i++)
        SM_SYNC_FN(reinit)(&SM_FN(obj).cls[i].lock);
}

#undef SM_OPT_SLAB_SIZE
#undef SM_OPT_EMPTY_MAX
#undef SM_OPT_COLOURS
#undef SM_OPT_SHARDS
#undef SM_OPT_SHARD_MAX
#define SM_LAYER_OFFERS (SM_CAP_BATCH | SM_CAP_OWNER)
#include "../../core/layer_end.h"
