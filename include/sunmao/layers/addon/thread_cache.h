/* thread_cache: per-thread caches of small objects in LIFO lists (paper Table 2: "每线程缓存, 使用
 * LIFO链表管理"), in front of a layer that serves size classes in batches (slab_lk). An add-on layer.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots:
 *   SM_SIZECLASS  (required) the class sizes: the next layer's policy, so a cached object is exactly
 *                 one of its classes (the composition includes the policy's header first)
 *   SM_ERR        (required) double frees caught in the cache are reported through it, then ignored
 *   SM_RECLAIM    when the cache gives back what its thread stopped using: lowwater (the default)
 *                 or none (include policies/reclaim/none.h first); the contract: reclaim/lowwater.h
 *   SM_SYNC       (optional; the paper's bare `sync`) all threads' caches share SM_OPT_TOTAL_BYTES:
 *                 budgets are granted from a pool and stolen between caches under this policy
 *                 (thread_cache/pool.h); empty: each thread has its own budget, nothing is shared
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max 8 KiB; keep it a class size): the sizes cached;
 *                 other sizes, and alignments above 4 KiB, go straight to the next layer
 * Options:
 *   SM_OPT_CACHE_BYTES  per-thread budget (default 1 MiB): the sum over lists of limit x class size
 *                 never exceeds it, so a thread never caches more.
 *   SM_OPT_TOTAL_BYTES  with SM_SYNC: the most all caches hold together (default 16 x
 *                 SM_OPT_CACHE_BYTES, TCMalloc's 32 MiB at 2 MiB per thread)
 *   SM_OPT_CORE_AWARE   1: the budget follows the thread's core (the paper's coreaware_cachesize):
 *                 SM_OPT_CACHE_BYTES x the core's level-2 cache / the largest one (platform/core_table.h;
 *                 identical cores: the whole budget), re-read every SM_OPT_GC_EVENTS slow-path
 *                 events; a smaller budget gives the excess back at once. 0 (default): off.
 *   SM_OPT_BATCH_MAX    most objects moved per refill or release (default 32, at most 64)
 *   SM_OPT_BATCH_BYTES  a refill or release moves about this many bytes, within [2, SM_OPT_BATCH_MAX]
 *                 objects (default 64 KiB); a list grows by a batch per miss, so for large classes
 *                 this is also how fast the memory a list may hold grows
 *   SM_OPT_BATCH_BYTES_MAX  a list whose limit has grown past 4 batches moves a quarter of its limit
 *                 at a time, up to this many bytes (within [2, SM_OPT_BATCH_MAX] objects): a thread
 *                 allocating or freeing many objects of a class pays the next layer's section per
 *                 more of them, a list in light use keeps small batches (default SM_OPT_BATCH_BYTES)
 *   SM_OPT_LIST_MAX     most objects one list may hold (default 1024, at most 65535).
 *   SM_OPT_GC_EVENTS    slow-path events between two collections of the reclaim policy (default 64)
 *   SM_OPT_IDLE_SCAN_REFILLS  refills between two scans of the reclaim policy (default 4)
 *   SM_OPT_DOUBLE_FREE_CHECK  1 (default): tag cached objects so a double free of an object that is
 *                 still in the cache is caught (one load, compare and store more per free, one store
 *                 more per malloc); 0 trusts the program, as TCMalloc does.
 *   SM_OPT_HARDEN  how far a list trusts the links stored in its free objects (needs the check above):
 *                 0 raw pointers; 1 (default) encoded links, each object's two words a pair only this
 *                 cache's secret keys make, verified before a link is followed; 2 as 1, and a popped
 *                 object must also be the start of an object of the list's class or larger in the
 *                 next layer's owner map. A failed check is reported once (SM_ERR, heap corruption)
 *                 and the rest of the list is dropped, never followed (docs/security.md).
 *   SM_OPT_LINK_AT  where in a free object its words go: 0 (default) or 16, for a layer above that
 *                 keeps its own header in an object's first 16 bytes (tail_chksum): the words are
 *                 then the program's first bytes, where a dangling pointer writes. Classes smaller
 *                 than LINK_AT + 16 bytes are not cached.
 *   SM_OPT_HOLD_BYTES  a quarantine in the lists themselves (0, the default: none, LIFO lists): each
 *                 list is a FIFO (a free joins its tail, malloc takes its head) that keeps back
 *                 hold = max(1, HOLD_BYTES / class size) objects, so an object is handed out again
 *                 only after at least `hold` later frees of its class; refills go in front of
 *                 them. With SM_OPT_HARDEN a write into a held object's words is reported when it
 *                 reaches the head, or the tail (docs/security.md).
 * Requires of the next layer (core/capability.h; a compile error names what is missing): BATCH
 * (refills and releases), OWNER (an unsized free's list is owner_slot(p, block_owner(p)), its one
 * lookup, whose word the miss reuses and passes down; owner_foreign, the words' bits of other
 * CPUs' partitions, asked on slow paths and tested on free's hit path; owner_local is asked on a
 * free's slow path only), and the same sizeclass policy. Offers HIT: alloc_hit, free_hit,
 * aligned_hit and usable_hit (below); and MOVE, forwarded.
 * Properties: thread_safe = the next layer's (the caches are per thread), min_align = the next
 * layer's, zeroed 0 (cached objects hold old data; the socket clears calloc's).
 * @model: name=thread_cache kind=addon flag cache slot sizeclass slot err
 * @model: slot reclaim=lowwater slot sync= range
 * @model: key cache_bytes size paper=cache_size key total_bytes size
 * @model: key core_aware bool paper=coreaware_cachesize key batch_max int key batch_bytes size
 * @model: key batch_bytes_max size
 * @model: key list_max int key gc_events int key idle_scan_refills int
 * @model: key double_free_check bool key harden int key link_at int key hold_bytes size
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake
 *
 * The hit paths. Each thread has one initial-exec TLS pointer (docs/architecture.md: why one, and
 * why initial-exec) to its cache, one list per class. It starts at a constant *empty cache*, every
 * list empty and every limit 0, so every rare condition costs the hit path a test it makes anyway:
 *   malloc  slot = slot_of[(size + 15) / 16] (16 x the class: the list's offset in the cache);
 *           if (list.head) pop it and return it
 *   free    slot = the size's (SM_F_SIZED), or the next layer's owner_slot, or 16 x class_count
 *           (a sentinel list whose limit is always 0) for a block of no cached class;
 *           (with one of cache.foreign's bits in the word: the class's remote list instead, which
 *           malloc never takes from: another CPU's object, reclaim.h);
 *           if (list.count < list.limit && p is not tagged as cached) push p and return
 * No lock, no atomic read-modify-write, no syscall, no division; a miss changes nothing. Aligned
 * requests (32 B - 4 KiB) pop the list of the smallest class whose size is a multiple of the
 * alignment. Everything else is alloc_miss / free_miss, which the socket calls from its own
 * out-of-line miss with the request's context (sockets/libc_api.h); tests/build/fastpath.golden
 * holds the hit paths' instruction counts.
 *
 * The parts (layers/addon/thread_cache/, each opened by what it does): tables.h the lookup tables;
 * pool.h the budget shared under the sync slot; reclaim.h giving objects back, and the reclaim policy's passes; lifecycle.h making a thread's
 * cache and retiring it; refill.h slow start, the budget, refills and overflows. Measurements and
 * the history of each decision: docs/layers.md, thread_cache. */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/msg.h"
#include "../../core/secret.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"
#include "../../policies/reclaim/lowwater.h"

#ifndef SM_LAYER
#error "thread_cache: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "thread_cache: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SIZECLASS
#error "thread_cache: policy slot 'sizeclass' is empty (SM_SIZECLASS = the next layer's: tc|log2b|prime|...)"
#endif
#ifndef SM_ERR
#error "thread_cache: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_RECLAIM
#define SM_RECLAIM lowwater
#endif
#ifndef SM_OPT_CACHE_BYTES
#define SM_OPT_CACHE_BYTES (1u << 20)
#endif
#ifndef SM_OPT_BATCH_MAX
#define SM_OPT_BATCH_MAX 32
#endif
#ifndef SM_OPT_BATCH_BYTES
#define SM_OPT_BATCH_BYTES (64u << 10)
#endif
#ifndef SM_OPT_BATCH_BYTES_MAX
#define SM_OPT_BATCH_BYTES_MAX SM_OPT_BATCH_BYTES
#endif
#ifndef SM_OPT_LIST_MAX
#define SM_OPT_LIST_MAX 1024
#endif
#ifndef SM_OPT_GC_EVENTS
#define SM_OPT_GC_EVENTS 64
#endif
#ifndef SM_OPT_IDLE_SCAN_REFILLS
#define SM_OPT_IDLE_SCAN_REFILLS 4
#endif
#ifndef SM_OPT_DOUBLE_FREE_CHECK
#define SM_OPT_DOUBLE_FREE_CHECK 1
#endif
#ifndef SM_OPT_CORE_AWARE
#define SM_OPT_CORE_AWARE 0
#endif
#ifndef SM_OPT_HARDEN
#define SM_OPT_HARDEN 1
#endif
#ifndef SM_OPT_LINK_AT
#define SM_OPT_LINK_AT 0
#endif
#ifndef SM_OPT_HOLD_BYTES
#define SM_OPT_HOLD_BYTES 0
#endif
_Static_assert((SM_OPT_LINK_AT) == 0 || (SM_OPT_LINK_AT) == 16, "thread_cache: SM_OPT_LINK_AT must be 0 or 16");
_Static_assert((SM_OPT_HOLD_BYTES) >= 0 && (SM_OPT_HOLD_BYTES) <= (1u << 24),
               "thread_cache: SM_OPT_HOLD_BYTES must be in [0, 16 MiB]");
_Static_assert((SM_OPT_HARDEN) >= 0 && (SM_OPT_HARDEN) <= 2, "thread_cache: SM_OPT_HARDEN must be 0, 1 or 2");
_Static_assert(!(SM_OPT_HARDEN) || (SM_OPT_DOUBLE_FREE_CHECK),
               "thread_cache: SM_OPT_HARDEN needs SM_OPT_DOUBLE_FREE_CHECK (the check word is the cached tag)");
#if defined(SM_OPT_TOTAL_BYTES) && !defined(SM_SYNC)
#error "thread_cache: SM_OPT_TOTAL_BYTES needs the sync slot (SM_SYNC), which guards the shared budget"
#endif
#ifndef SM_OPT_TOTAL_BYTES
#define SM_OPT_TOTAL_BYTES ((size_t)(SM_OPT_CACHE_BYTES) * 16)
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX (8u << 10)
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"
_Static_assert(SM_SIZE_USER, "thread_cache: SM_SIZE_USER must be 1: a thread cache serves the program's requests");

SM_REQUIRE_CAP(BATCH, "refills and releases move objects of one class in batches");
SM_REQUIRE_CAP(OWNER, "an unsized free finds its list with owner_slot");
/* The lists are the next layer's classes: owner_slot's answers index them. */
_Static_assert((long)SM_PROP(SM_NEXT, batch_classes) == (long)SM_SIZECLASS_FN(count) &&
                   (long)SM_PROP(SM_NEXT, batch_max_size) == (long)SM_SIZECLASS_FN(max_size),
               SM_STR(SM_LAYER) ": its sizeclass policy differs from that of its next layer " SM_STR(SM_NEXT)
                                " (give both the same SM_SIZECLASS)");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "thread_cache: SM_SIZE_MAX is above the largest size of the sizeclass policy");
_Static_assert((SM_OPT_BATCH_BYTES) >= 1024, "thread_cache: SM_OPT_BATCH_BYTES must be at least 1 KiB");
_Static_assert((SM_OPT_BATCH_BYTES_MAX) >= (SM_OPT_BATCH_BYTES), "thread_cache: SM_OPT_BATCH_BYTES_MAX must be at least SM_OPT_BATCH_BYTES");
_Static_assert((SM_OPT_BATCH_MAX) >= 2 && (SM_OPT_BATCH_MAX) <= 64, "thread_cache: SM_OPT_BATCH_MAX must be in [2, 64]");
_Static_assert((SM_OPT_LIST_MAX) >= (SM_OPT_BATCH_MAX) && (SM_OPT_LIST_MAX) <= 65535,
               "thread_cache: SM_OPT_LIST_MAX must be in [SM_OPT_BATCH_MAX, 65535]");
_Static_assert((SM_OPT_TOTAL_BYTES) >= (SM_OPT_CACHE_BYTES),
               "thread_cache: SM_OPT_TOTAL_BYTES must be at least SM_OPT_CACHE_BYTES");
_Static_assert((SM_OPT_GC_EVENTS) >= 1, "thread_cache: SM_OPT_GC_EVENTS must be at least 1");
_Static_assert((SM_OPT_IDLE_SCAN_REFILLS) >= 1, "thread_cache: SM_OPT_IDLE_SCAN_REFILLS must be at least 1");

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
    SM_FN(class_count) = SM_SIZECLASS_FN(count),
    SM_FN(batch_max) = SM_OPT_BATCH_MAX,
    SM_FN(list_max) = SM_OPT_LIST_MAX,
    SM_FN(batch_bytes) = SM_OPT_BATCH_BYTES,
    SM_FN(batch_bytes_max) = SM_OPT_BATCH_BYTES_MAX,
    SM_FN(idle_scan_refills) = SM_OPT_IDLE_SCAN_REFILLS,
    SM_FN(holding) = (SM_OPT_HOLD_BYTES) != 0, /* the lists are FIFOs with a hold */
};

/* One size class's list. 16 bytes, so list[cls] is a shift away from the cache pointer. */
struct SM_FN(list) {
    void *head;     /* LIFO of free objects (FIFO with SM_OPT_HOLD_BYTES: the oldest), linked
                     * through their word at SM_OPT_LINK_AT */
#if SM_OPT_HOLD_BYTES
    uint16_t count; /* objects on the list (list_max <= 65535) */
    uint16_t hold;  /* malloc takes the head only while count > hold (0 in the constant caches) */
#else
    uint32_t count; /* objects on the list */
#endif
    uint16_t limit; /* a free that finds count == limit takes the slow path */
    uint16_t low;   /* low-water mark of count since the last pass, if the reclaim policy keeps one */
};

/* Budget invariant: capacity = sum of limit x class size <= budget, and count <= limit
 * in every list, so the bytes cached never exceed the budget — without a byte counter on the hit
 * paths: limits change only on slow paths (refill.h grows them, reclaim.h lowers them). */
struct SM_FN(cache) {
    /* SM_OPT_HARDEN: a free object's first word is its link ^ key, its second the first ^ check;
     * both random per cache (lifecycle.h), check odd. 0 in the constant caches, which hold nothing. */
    uintptr_t key, check;
    /* Owner-word bits of the next layer's other partitions (owner_foreign, as of this thread's
     * last slow path; 0 while the process has had one cache, and with a hold): a free whose word
     * has one set goes on remote[] instead of list[] (passive false sharing: reclaim.h). 0 in the
     * constant caches. */
    uintptr_t foreign;
    unsigned batches;        /* refills from the next layer */
    unsigned trust_until;    /* foreign stays 0 until batches reaches it (reclaim.h) */
    unsigned events;  /* slow-path events since the last collection (reclaim.h) */
    unsigned refills; /* refills, counted for the reclaim policy's scans */
    unsigned core_events; /* slow-path events since the budget was last matched to the core */
    size_t capacity;  /* sum of limit x class size; <= budget */
    size_t budget;    /* what the thread may cache: its want, or with SM_SYNC what the pool granted
                       * it (<= want; other threads lower it under the pool's lock: pool.h) */
    /* One list per class, and list[class_count], a sentinel whose limit stays 0: the free of a block
     * that is no class's object indexes it and misses, with no test of its own. */
    struct SM_FN(list) list[SM_FN(class_count) + 1];
    /* Right after list[], so a free reaches it by adding remote_slot to its slot: other partitions'
     * objects, never handed out from here (reclaim.h, remote_overflow). */
    struct SM_FN(list) remote[SM_FN(class_count) + 1];
    /* The reclaim policy's state per list: after the lists, off the hit paths' lines. */
    SM_RECLAIM_FN(mark_t) mark[SM_FN(class_count)];
    size_t want; /* SM_OPT_CACHE_BYTES, or its share for the thread's core (SM_OPT_CORE_AWARE) */
    /* SM_OPT_HOLD_BYTES: each list's last object (where a free joins), valid while count > 0 */
    void *tail[SM_FN(holding) ? SM_FN(class_count) : 1];
    struct SM_FN(cache) *pool_next, *pool_prev; /* SM_SYNC: the pool's registry */
};

enum { SM_FN(remote_slot) = (SM_FN(class_count) + 1) * 16 };
_Static_assert(offsetof(struct SM_FN(cache), remote) == offsetof(struct SM_FN(cache), list) + SM_FN(remote_slot),
               "thread_cache: a remote list is its class's list plus remote_slot bytes");

/* The class of list l of cache, one of list[] or remote[]. */
SM_INLINE unsigned SM_FN(list_class)(const struct SM_FN(cache) *cache, const struct SM_FN(list) *l)
{
    unsigned i = (unsigned)(l - cache->list);
    return i > SM_FN(class_count) ? i - SM_FN(class_count) - 1 : i;
}

/* The two constant caches: all lists empty, all limits 0, so every hit path misses on them. A
 * thread starts at the empty cache, whose slow path makes the thread's cache; an exited thread is
 * left at the retired cache, whose slow path passes every request down (lifecycle.h). const: a
 * write to them faults, which keeps "every limit is 0" honest. */
static const struct SM_FN(cache) SM_FN(empty_cache);
static const struct SM_FN(cache) SM_FN(retired_cache);

static __thread struct SM_FN(cache) *SM_FN(tls) __attribute__((tls_model("initial-exec"))) =
    (struct SM_FN(cache) *)&SM_FN(empty_cache);

#define SM_THREAD_CACHE_PARTS 1 /* the parts below are included by this template only */
#include "thread_cache/tables.h"

SM_INLINE void SM_FN(thread_exit)(void);

/* The largest class size that may get capacity: the compiled range, or less with tcache_max
 * (core/conf.h), read here once; only the slow path that grows a list asks (refill.h, grow). */
static size_t SM_FN(conf_max) = (size_t)(SM_SIZE_MAX);

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(conf_max) = sm_conf_tcache_max((size_t)(SM_SIZE_MAX));
    return SM_NEXT_FN(create)();
}

SM_INLINE bool SM_FN(is_static)(const struct SM_FN(cache) *cache)
{
    return cache == &SM_FN(empty_cache) || cache == &SM_FN(retired_cache);
}

/* The list at byte offset `slot` (16 x its class) of cache's list array: no multiply. */
SM_HOT struct SM_FN(list) *SM_FN(list_at)(struct SM_FN(cache) *cache, uintptr_t slot)
{
    _Static_assert(sizeof(struct SM_FN(list)) == 16, "thread_cache: lists are indexed by 16 x their class");
    return (struct SM_FN(list) *)((char *)cache->list + slot);
}

/* How many objects list l keeps back (SM_OPT_HOLD_BYTES; 0 without). */
SM_HOT unsigned SM_FN(hold_of)(const struct SM_FN(list) *l)
{
#if SM_OPT_HOLD_BYTES
    return l->hold;
#else
    (void)l;
    return 0;
#endif
}

/* The double-free tag written into the second word of cached objects (without SM_OPT_HARDEN): the
 * address of the layer's tables, made odd. The same in every cache, so a free from any thread sees
 * an object another thread's cache holds; never a value a program stores (no program holds a
 * pointer into the allocator's tables); a block that carries it by chance only takes the slow path
 * (refill.h's overflow). An address the code holds as a constant: no load. */
SM_HOT uintptr_t SM_FN(tag_of)(const struct SM_FN(cache) *cache)
{
    (void)cache;
    return (uintptr_t)&SM_FN(obj) | 1;
}

/* A free object's two words (SM_OPT_HARDEN): w0 = link ^ key, w1 = w0 ^ check (key this cache's,
 * check the process's: any cache recognises an object cached or given back by another). A program that
 * writes either word of an object it freed (a write after free, an overflow from its neighbour)
 * breaks the pair unless it knows check, and points the link nowhere it chose unless it knows key:
 * every pop verifies the pair before it follows the link, so no link is followed that this cache did
 * not write. A pop clears w1, so an object handed out and reached again through a stale link (a
 * double free that got past the tag) fails the check instead of being handed out twice. */

/* The two words of p a free object's link and mark occupy (SM_OPT_LINK_AT). */
SM_HOT uintptr_t *SM_FN(words)(const void *p) { return (uintptr_t *)((uintptr_t)p + (SM_OPT_LINK_AT)); }

/* Is p marked as a cached object: on a list of some cache, or given back below by one and not
 * handed out since? (Hardened: its pair holds.) */
SM_HOT bool SM_FN(is_cached)(const struct SM_FN(cache) *cache, const void *p)
{
    const uintptr_t *w = SM_FN(words)(p);
    if (SM_OPT_HARDEN)
        return (w[0] ^ w[1]) == cache->check;
    return w[1] == SM_FN(tag_of)(cache);
}

/* Writes p's link to next, marked as cached. */
SM_HOT void SM_FN(link_store)(const struct SM_FN(cache) *cache, void *p, void *next)
{
    uintptr_t *w = SM_FN(words)(p);
    if (SM_OPT_HARDEN) {
        uintptr_t w0 = (uintptr_t)next ^ cache->key;
        w[0] = w0;
        w[1] = w0 ^ cache->check;
    } else {
        w[0] = (uintptr_t)next;
        if (SM_OPT_DOUBLE_FREE_CHECK)
            w[1] = SM_FN(tag_of)(cache);
    }
}

/* p's link, p verified (is_cached) when hardened. */
SM_HOT void *SM_FN(link_load)(const struct SM_FN(cache) *cache, const void *p)
{
    uintptr_t w0 = *SM_FN(words)(p);
    return (void *)(SM_OPT_HARDEN ? w0 ^ cache->key : w0);
}

SM_SLOWPATH void SM_FN(list_corrupt)(const struct SM_FN(cache) *cache, struct SM_FN(list) *l, const void *p);

/* SM_OPT_HOLD_BYTES: puts p at the tail of list l, tagged as cached; false, with nothing changed,
 * if the tail's words are broken (the slow path's list_push reports it). */
SM_HOT bool SM_FN(list_append)(struct SM_FN(cache) *cache, struct SM_FN(list) *l, void *p)
{
    void **tail = &cache->tail[SM_FN(holding) ? l - cache->list : 0];
    if (l->count) {
        if (SM_OPT_HARDEN && sm_unlikely(!SM_FN(is_cached)(cache, *tail)))
            return false;
        SM_FN(link_store)(cache, *tail, p);
    } else {
        l->head = p;
    }
    SM_FN(link_store)(cache, p, NULL);
    *tail = p;
    l->count++;
    return true;
}

/* Puts p on list l of cache, tagged as cached so a second free of it is recognised: at its head
 * (LIFO), or with SM_OPT_HOLD_BYTES at its tail. */
SM_HOT void SM_FN(list_push)(struct SM_FN(cache) *cache, struct SM_FN(list) *l, void *p)
{
    if (SM_FN(holding)) {
        if (sm_unlikely(!SM_FN(list_append)(cache, l, p))) {
            SM_FN(list_corrupt)(cache, l, cache->tail[l - cache->list]); /* reported; the list starts anew */
            (void)SM_FN(list_append)(cache, l, p);
        }
        return;
    }
    SM_FN(link_store)(cache, p, l->head);
    l->head = p;
    l->count++;
}

/* ---- The hit paths ----
 * Each is a few loads and stores on the thread's own cache, with one test per way to miss; on a
 * miss it changes nothing and answers NULL / false. They read only the TLS pointer (the empty
 * cache until this thread's first slow path), the tables (all 0 until built) and, for an unsized
 * free, the next layer's owner word, so they are safe before the stack is created: a socket may
 * call them first and run its start-up only on their misses (sockets/libc_api.h). */

/* Takes head, the first object of list l, off the list (the low-water mark follows); head verified
 * (may_pop) when hardened. */
SM_HOT void *SM_FN(pop)(const struct SM_FN(cache) *cache, struct SM_FN(list) *l, void *head)
{
    uint32_t count = l->count - 1;
    l->head = SM_FN(link_load)(cache, head);
    l->count = count;
    if (SM_RECLAIM_FN(low_water) && count < l->low)
        l->low = (uint16_t)count;
    if (SM_OPT_DOUBLE_FREE_CHECK)
        SM_FN(words)(head)[1] = 0;
    return head;
}

/* May head, the first object of the list at byte offset `slot`, be handed out? Always without
 * SM_OPT_HARDEN; else its pair must hold and (2) the owner map must show an object of the list's
 * class or a larger one starting there (a sized free may put a block on a smaller class's list).
 * A miss sends the request to the slow path, which reports and drops the list (refill.h). */
SM_HOT bool SM_FN(may_pop)(const struct SM_FN(cache) *cache, const void *head, unsigned slot)
{
    if (!SM_OPT_HARDEN)
        return true;
    if (sm_unlikely(!SM_FN(is_cached)(cache, head)))
        return false;
    if (SM_OPT_HARDEN >= 2) {
        unsigned owner = SM_NEXT_FN(owner_slot)(head, SM_NEXT_FN(block_owner)(head));
        return owner >= slot && owner < ((unsigned)SM_FN(class_count) << 4);
    }
    return true;
}

/* malloc's hit: an object of size's class (size 0 is served as 1) with the default alignment. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_FN(handles_size)(size))
        return NULL;
    struct SM_FN(cache) *cache = SM_FN(tls);
    unsigned slot = SM_FN(slot_of)(size);
    struct SM_FN(list) *l = SM_FN(list_at)(cache, slot);
    void *head = l->head;
    if (sm_unlikely(!head) || (SM_FN(holding) && l->count <= SM_FN(hold_of)(l)) || !SM_FN(may_pop)(cache, head, slot))
        return NULL;
    return SM_FN(pop)(cache, l, head);
}

/* An aligned request's hit (tables.h: aligned_class): the head of its list if that is aligned
 * enough. Not every object on a list need be: a sized free puts its block on the list of the size
 * it names, and a block that realloc kept in place (a shrink) can be named by a smaller size than
 * its class. Such a head sends the request down (one AND here instead of a guarantee on every free). */
SM_HOT void *SM_FN(aligned_hit)(size_t size, size_t align)
{
    unsigned cls = SM_FN(aligned_class)(size, align);
    if (!cls)
        return NULL;
    struct SM_FN(cache) *cache = SM_FN(tls);
    struct SM_FN(list) *l = &cache->list[cls];
    void *head = l->head;
    if (!head || (SM_FN(holding) && l->count <= SM_FN(hold_of)(l)) || ((uintptr_t)head & (align - 1)) ||
        !SM_FN(may_pop)(cache, head, cls << 4))
        return NULL;
    return SM_FN(pop)(cache, l, head);
}

/* realloc's and malloc_usable_size's hit: the size of the object starting at p, from its owner word
 * (the lookup and the geometry check free's hit makes) and the class table; 0 for a block of no
 * cached class, or no object start, or before the tables exist: the socket then asks getmeta,
 * which also reports a bad pointer. The next layer's classes are this layer's (BATCH, OWNER). */
SM_HOT size_t SM_FN(usable_hit)(const void *p)
{
    unsigned slot = SM_NEXT_FN(owner_slot)(p, SM_NEXT_FN(block_owner)(p));
    if (slot >= (unsigned)SM_FN(class_count) << 4)
        return 0;
    return __atomic_load_n(&SM_FN(obj).class_bytes[slot >> 4], __ATOMIC_RELAXED);
}

/* The list p goes on, as its offset in the list array: 16 x its class, or 16 x class_count (the
 * sentinel) for a block the cache does not take. A sized free is trusted: its block joins the list
 * of size_to_class(size), never larger than the block; what matters is that it holds a class's
 * worth of bytes at a 16-byte alignment. Before the tables exist a sized free gets class 0,
 * harmless as for class_of. An unsized free reads p's owner word from the next layer (one page-map
 * lookup, kept in *owner_word for a miss) and asks it the class (not getmeta: the free needs the
 * list, not the size). */
SM_HOT unsigned SM_FN(free_slot)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (flags & SM_F_SIZED)
        return SM_FN(handles_size)(size) ? SM_FN(slot_of)(size) : (unsigned)SM_FN(class_count) << 4;
    uintptr_t w = SM_NEXT_FN(block_owner)(p);
    *owner_word = w; /* for the miss, if there is one: the request's only lookup */
    return SM_NEXT_FN(owner_slot)(p, w);
}

/* p's owner word on a slow path: the one the hit path read, else one lookup now, kept in c for
 * the layers below (core/capability.h, OWNER). */
SM_INLINE uintptr_t SM_FN(owner_word)(sm_mctx_t *c)
{
    if (!(c->flags & SM_F_OWNER)) {
        c->owner_word = SM_NEXT_FN(block_owner)(c->ptr);
        c->flags |= SM_F_OWNER;
    }
    return c->owner_word;
}

/* A slow path's free_slot, as a class, with no second lookup. */
SM_INLINE unsigned SM_FN(free_class)(sm_mctx_t *c)
{
    if (c->flags & SM_F_SIZED)
        return SM_FN(handles_size)(c->size) ? SM_FN(slot_of)(c->size) >> 4 : SM_FN(class_count);
    return SM_NEXT_FN(owner_slot)(c->ptr, SM_FN(owner_word)(c)) >> 4;
}

/* Pushes p on the list at byte offset `slot` if it has room and p is not tagged as cached already. */
SM_HOT bool SM_FN(push)(void *p, uintptr_t slot)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    struct SM_FN(list) *l = SM_FN(list_at)(cache, slot);
    bool room = l->count < l->limit && (!SM_OPT_DOUBLE_FREE_CHECK || !SM_FN(is_cached)(cache, p));
    if (sm_unlikely(!room))
        return false;
    if (SM_FN(holding))
        return SM_FN(list_append)(cache, l, p);
    SM_FN(list_push)(cache, l, p);
    return true;
}

/* free's hit: true if p (non-NULL; size and flags as in the context) went onto its list; on a
 * miss, *owner_word holds p's owner word if it was read (an unsized free). */
SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    uintptr_t slot = SM_FN(free_slot)(p, size, flags, owner_word);
    /* A sized free read no owner word: it looks one up only when the thread has other partitions'
     * bits to test (never in a process that has had one cache), so a C++ sized delete of another
     * CPU's object leaves its cache line as a plain free does. */
    if ((flags & SM_F_SIZED) ? sm_unlikely(SM_FN(tls)->foreign != 0) && (SM_FN(tls)->foreign & SM_NEXT_FN(block_owner)(p))
                             : sm_unlikely(SM_FN(tls)->foreign & *owner_word)) {
        /* another partition's object: its remote list. A branch, predicted and run past, not a
         * select, which would make the list's address wait for the test (owner_slot's reason). */
        uintptr_t remote = SM_FN(remote_slot);
        __asm__ volatile("" : "+r"(remote));
        slot += remote;
    }
    return SM_FN(push)(p, slot);
}

/* The slow paths the misses call. */
#include "thread_cache/pool.h"
#include "thread_cache/reclaim.h"
#include "thread_cache/lifecycle.h"
#include "thread_cache/refill.h"
#undef SM_THREAD_CACHE_PARTS

/* ---- The misses (capability HIT's alloc_miss and free_miss) ----
 * Everything the hit paths do not do. A socket calls them from its own out-of-line miss function
 * with the request's one context, after its hit path missed (it never tries the hit twice); L_alloc
 * and L_free, for a layer above, are the hit then the miss. The context goes down unchanged, so
 * what a layer below learns (the CPU, SM_F_FRESH) reaches the socket. The pass-down is the one call
 * site of the next layer's alloc/free (docs/layers.md). */

/* The request after its hit path missed, or was not tried (an aligned request under a layer
 * that offers no aligned hit: tried here). */
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (c->align > SM_MIN_ALIGN) {
        void *p = SM_FN(aligned_hit)(c->size, c->align);
        if (p)
            return c->ptr = p;
    }
    /* SM_OPT_LINK_AT: a plain request of a class with no room for the words there goes straight
     * down (an aligned one's class is at least its alignment, 32 or more). */
    if (SM_FN(serves)(c) && (!(SM_OPT_LINK_AT) || c->size > (size_t)(SM_OPT_LINK_AT) || c->align > SM_MIN_ALIGN)) {
        void *p = c->align <= SM_MIN_ALIGN ? SM_FN(refill)(c->size, c) : SM_FN(refill_aligned)(c->size, c->align, c);
        if (p)
            return c->ptr = p;
        /* Served below (an alignment no cached class has, or no cache): ask for the whole class,
         * because a sized free of this block will be trusted to hold a class's bytes. */
        c->size = SM_SIZECLASS_FN(class_to_size)(SM_SIZECLASS_FN(size_to_class)(c->size));
        p = SM_NEXT_FN(alloc)(c);
        if (SM_OPT_DOUBLE_FREE_CHECK && p)
            SM_FN(words)(p)[1] = 0; /* an object a cache gave back keeps its mark (overflow) */
        return p;
    }
    sm_stats_thread_bytes[0] += c->size;
    return SM_NEXT_FN(alloc)(c);
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    /* A block of no cached class goes down without creating a cache for this thread. */
    if (SM_FN(free_class)(c) < SM_FN(class_count) && SM_FN(overflow)(c))
        return;
    sm_mctx_t q = sm_mctx_block(c->ptr, 0, 0);
    if (SM_NEXT_FN(getmeta)(&q)) /* a large block: the lookup is small beside its free */
        sm_stats_thread_bytes[1] += q.usable;
    SM_NEXT_FN(free)(c);
}

SM_ALLOC_FREE_BY_HIT()

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* A release of everything (malloc_trim) empties the calling thread's own lists; other threads' caches
 * are theirs alone (no lock guards them): they shrink through the reclaim policy, and go back whole
 * when their thread exits. */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    if ((r->how == SM_RELEASE_ALL || r->how == SM_RELEASE_THREAD) && !SM_FN(is_static)(cache)) {
        struct SM_FN(sink) sink;
        sink.n = 0;
        for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
            struct SM_FN(list) *l = &cache->list[cls];
            r->released += (size_t)l->count * SM_FN(obj).class_bytes[cls];
            SM_FN(drain)(cache, l, l->count, &sink);
            SM_RECLAIM_FN(clear)(&cache->mark[cls], &l->low);
        }
        SM_FN(remote_home)(cache, &sink);
        SM_FN(give_blocks)(sink.blocks, sink.n);
    }
    if (r->how == SM_RELEASE_ALL) /* metadata, not cached objects: not in r->released */
        SM_FN(spares_free)();
    SM_NEXT_FN(release)(r);
}

/* Statistics: every registered cache's lists, read without their owners' cooperation (a count
 * may be a moment old: merged on read). The objects are the slab layer's, held here. */
SM_INLINE void SM_FN(stats_cache)(struct SM_FN(cache) *cache, void *arg)
{
    sm_stats_t *s = (sm_stats_t *)arg;
    sm_stats_layer_t *l = &s->layer[s->nlayers - 1];
    s->tcache_threads++;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        uint32_t n = __atomic_load_n(&cache->list[cls].count, __ATOMIC_RELAXED) +
                     __atomic_load_n(&cache->remote[cls].count, __ATOMIC_RELAXED);
        size_t size = SM_FN(obj).class_bytes[cls];
        if (!n || !size)
            continue;
        sm_stats_class(s, size)->cached += n;
        s->tcache_objects += n;
        s->tcache_bytes += (size_t)n * size;
        l->held += (size_t)n * size;
        l->dirty += (size_t)n * size;
    }
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    s->tcache_threads = s->tcache_objects = s->tcache_bytes = 0;
    if (SM_FN(obj).ready)
        SM_FN(pool_each)(SM_FN(stats_cache), s);
    l->blocks = s->tcache_objects;
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

SM_INLINE void SM_FN(thread_exit)(void)
{
    SM_FN(cache_destroy)();
    SM_NEXT_FN(thread_exit)();
}

/* Fork: the forking thread's cache is memory of the process, so it stays valid in the child. Other
 * threads' caches are lost in the child: their objects stay allocated and are never reused
 * (nothing can look at a cache another thread was changing when fork happened); with SM_SYNC their
 * budgets go back to the pool (pool.h). The pool's lock is taken before the next layer's. */
SM_INLINE void SM_FN(fork_prepare)(void)
{
    SM_FN(pool_fork_prepare)();
    sm_plat_lock(&SM_FN(spares).lock);
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    sm_plat_unlock(&SM_FN(spares).lock);
    SM_FN(pool_fork_parent)();
    SM_NEXT_FN(fork_parent)();
}
SM_INLINE void SM_FN(fork_child)(void)
{
    sm_plat_lock_reinit(&SM_FN(spares).lock); /* held across fork: the list is whole */
    /* the child's one thread: its next slow path stops telling partitions apart (reclaim.h) */
    SM_FN(obj).caches_made = !SM_FN(is_static)(SM_FN(tls));
    SM_FN(pool_fork_child)(SM_FN(tls));
    SM_NEXT_FN(fork_child)();
}

#undef SM_OPT_CACHE_BYTES
#undef SM_OPT_TOTAL_BYTES
#undef SM_OPT_CORE_AWARE
#undef SM_OPT_BATCH_MAX
#undef SM_OPT_BATCH_BYTES
#undef SM_OPT_BATCH_BYTES_MAX
#undef SM_OPT_LIST_MAX
#undef SM_OPT_GC_EVENTS
#undef SM_OPT_IDLE_SCAN_REFILLS
#undef SM_OPT_DOUBLE_FREE_CHECK
#undef SM_OPT_HARDEN
#undef SM_OPT_LINK_AT
#undef SM_OPT_HOLD_BYTES
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_ALIGNED_HIT 1
#define SM_LAYER_USABLE_HIT 1
#include "../../core/layer_end.h"
