/* thread_cache: per-thread caches of small objects in LIFO lists (paper Table 2: "每线程缓存, 使用
 * LIFO链表管理"), in front of a layer that serves size classes in batches (slab_lk). An add-on layer.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots (required):
 *   SM_SIZECLASS  the class sizes; must be the next layer's policy, so a cached object is exactly
 *                 one of its classes (the composition includes the policy's header first)
 *   SM_ERR        double frees caught in the cache are reported through it, then ignored
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max 8 KiB; keep it a class size): the sizes cached;
 *                 requests outside it, and those aligned to more than 4 KiB, go straight to the
 *                 next layer; other aligned requests are served from the lists (see below).
 * Options:
 *   SM_OPT_CACHE_BYTES  per-thread budget (default 1 MiB): the sum over lists of limit x class size
 *                 never exceeds it, so a thread never caches more. Measured: a thread cycling 1000 live
 *                 objects of 16 B-1 KiB (about 520 KiB) ran at 46 ns per malloc+free with 256 KiB —
 *                 misses and overflows on every list, worse than the slab alone (22 ns) — and at 11 ns
 *                 with 1 MiB (glibc: 32 ns). 1 MiB is a quarter of TCMalloc's per-thread maximum (4 MiB);
 *                 the low-water GC hands back what a thread stops using, so the budget is a worst case
 *                 (100 threads: 100 MiB at most, only while each keeps using its objects).
 *   SM_OPT_BATCH_MAX    most objects moved per refill or release (default 32, at most 64)
 *   SM_OPT_BATCH_BYTES  a refill or release moves about this many bytes, within [2, SM_OPT_BATCH_MAX]
 *                 objects (default 64 KiB); a list grows by a batch per miss, so for large classes
 *                 this is also how fast the memory a list may hold grows
 *   SM_OPT_LIST_MAX     most objects one list may hold (default 1024, at most 65535). A program
 *                 that allocates bursts of 1000 blocks of one size, then frees them (glibc-simple),
 *                 sent half of each burst through the slab's batches with 512: 70 -> 64 ms, peak
 *                 RSS +10% on that program (the byte budget still bounds it; 64 in a batch was
 *                 tried and was worse: a batch of 1 KiB objects then empties a whole slab).
 *   SM_OPT_GC_EVENTS    slow-path events between two garbage collections (default 64)
 *   SM_OPT_IDLE_SCAN_REFILLS  refills between two idle scans (default 4; see below)
 *   SM_OPT_DOUBLE_FREE_CHECK  1 (default): tag cached objects so a double free of an object that is
 *                 still in the cache is caught (one load, compare and store more per free, one store
 *                 more per malloc); 0 trusts the program, as TCMalloc does.
 * Requires of the next layer (core/capability.h; a compile error names what is missing): BATCH
 * (refills and releases), OWNER (an unsized free's list is block_slot(p), 16 x the class, the
 * offset of a 16-byte list entry: no multiply on the hit path; block_local is asked on a free's
 * slow path only), and the same sizeclass policy. Offers HIT: alloc_hit, free_hit (below).
 * Properties: thread_safe = the next layer's (the caches are per thread), min_align = the next
 * layer's, zeroed 0 (cached objects hold old data; the socket clears calloc's).
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake
 *
 * The fast paths. Each thread has one pointer in TLS. It starts out pointing at a constant *empty
 * cache* whose lists are all empty and whose limits are all 0, so every rare condition costs the
 * fast path one test it makes anyway:
 *   malloc  slot = slot_of[(size + 15) / 16] (16 x the class, the list's offset in the cache: a
 *           table built from the policy, no branches that mispredict on varying sizes);
 *           head = list at slot .head; if (head) pop and return;
 *           (a new thread's first malloc misses here, and the miss creates its cache)
 *   free    slot = the flags' size's slot (SM_F_SIZED) or the next layer's block_slot(p), which
 *           names the class of one of its objects in one page-map lookup, or 16 x class_count (a
 *           sentinel list whose limit is always 0) for any other block;
 *           if (count < limit && not tagged) push and return;
 *           (the empty cache has limit 0, so a new thread's first free goes to the slow path too)
 * No lock, no atomic read-modify-write, no syscall, no division. The empty cache is const: a write
 * to it faults, which keeps the "every limit is 0" invariant honest.
 * Aligned requests (posix_memalign, aligned_alloc, memalign: align > 16, up to 4 KiB) reach
 * L_alloc from a socket's miss path and pop the list of the smallest class >= size whose size is a
 * multiple of align (a byte table per alignment, built with class_of): slab_lk aligns a class's
 * objects to the largest power of two dividing its size, so they need no class of their own and
 * share the lists of plain requests. The pop checks the head's address (see aligned_hit); a miss
 * refills that list like any other. Measured: rptest, one request in two aligned, took the class
 * lock of slab_lk on every aligned malloc before this.
 * Everything else — a miss, an overflow, a size outside the range, a block the
 * cache does not take, the empty or retired cache — is alloc_miss / free_miss (capability HIT),
 * which the socket calls from its own out-of-line miss with the request's context; they hold the
 * one pass-down call site. So the hit path the socket inlines needs no saved registers and never
 * builds the context in memory (tests/build/fastpath.golden has its instruction counts). The hit
 * paths alone, alloc_hit(size) and free_hit(p, size, flags), answer NULL / false on a miss having
 * changed nothing and are safe before the stack is created, so the socket leaves its own checks
 * and start-up to its misses (sockets/libc_api.h).
 *
 * Why initial-exec TLS. The pointer is `static __thread` with tls_model("initial-exec"): reaching
 * it is one %fs-relative load, where the default model of a shared library costs a call to
 * __tls_get_addr on every malloc. The price of initial-exec in a shared library is a slot in the
 * static TLS block, which a library loaded by dlopen can only get from glibc's small surplus
 * reserved for this (hundreds of bytes, rtld.optional_static_tls). Keeping the layer's static TLS
 * to this one 8-byte pointer (the cache itself is allocated) is what lets a drop-in library built
 * with it still be dlopen'ed; a whole cache in TLS would make dlopen fail with "cannot allocate
 * memory in static TLS block".
 *
 * The slow paths. A miss refills a list with one N_alloc_batch call; a free into a full list
 * releases a batch with N_free_batch first. Slow start (TCMalloc's): a list's limit starts at 0
 * and grows by one on each miss or overflow up to its batch size, clamp(SM_OPT_BATCH_BYTES / size, 2,
 * SM_OPT_BATCH_MAX), then by a batch per miss up to SM_OPT_LIST_MAX: a class used once costs one
 * object, a class used in bursts gets room for the burst. Growth is paid from the byte budget.
 * Garbage collection by low-water mark: each list tracks the minimum length since the last GC
 * (one compare on pop); every SM_OPT_GC_EVENTS slow-path events, and whenever a list's growth
 * would overrun the budget, half of each list's low-water mark — objects the thread did not need
 * at all since the last GC — goes back to the next layer and the list's limit shrinks by as much.
 * A list that was idle for the whole period (its count is its low-water mark and what the last GC
 * left) and holds more than a batch gives back all of it: halving kept about one burst's worth
 * of a size the program had moved on from (glibc-simple, bursts of 1000 blocks of one size after
 * another: 0.8 MiB cached at the peak, pinning slabs a new size could not use; peak RSS 4.1 ->
 * 3.6 MiB, time unchanged). The idle test needs the count the last GC left, kept outside the
 * lists so the hit paths' lines do not change; lists in use keep the halving (random
 * replacement, glibc-thread: unchanged).
 * The idle scan: every SM_OPT_IDLE_SCAN_REFILLS refills, before the refill, the same "idle list goes
 * back whole" test alone, on the lists longer than a batch. A GC period (64 events, two bursts of
 * glibc-simple) was too long: finished bursts of several sizes stayed cached, up to the budget,
 * while new sizes took new slabs (peak 4.5 MiB, glibc 2.3). Scanning when the thread asks for
 * more objects is when what it no longer uses can make room: 4.5 -> 3.0 MiB, no time change on
 * the suite. Not on every slow-path event: a GC every 16 events (or the scan on every event)
 * cost xmalloc 0.32 -> 0.70 s, whose consumer overflows every ten frees; it never refills, so
 * the scan, tied to refills, costs it nothing. Its own low-water marks are folded into the GC's
 * (gc_low), so the halving still sees a whole GC period.
 * Under budget pressure, half of each other list's unused room is given up as well. No timers, no
 * threads: an idle thread keeps its cache until it runs a slow path or exits.
 *
 * Budget invariant: capacity = sum of limit x class size <= SM_OPT_CACHE_BYTES, and count <= limit
 * in every list, so the bytes cached never exceed the budget — without a byte counter on the fast
 * path (limits change only on slow paths).
 *
 * Thread exit. Making a cache attaches the thread to the composition's lifecycle service
 * (platform/lifecycle.h), which costs the fast path nothing; at exit the service runs the chain's
 * L_thread_exit. This layer's returns every cached object and the cache itself to the next layer,
 * calls the next layer's thread_exit, and points the TLS at a second constant, the *retired cache*:
 * also empty with limits 0, but its slow path passes every request to the next layer instead of
 * creating a cache. So a destructor that runs after the hook (glibc runs key destructors for up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds) may still allocate and free, never makes a cache again, and
 * the rounds end. A second L_thread_exit only calls the next layer's thread_exit again.
 *
 * Fork. The forking thread's cache is memory of the process, so it stays valid in the child. Other
 * threads' caches are lost in the child: their objects stay allocated and are never reused (the
 * layer keeps no list of caches, so nothing needs locking in fork_prepare, and nothing can look at
 * a cache another thread was changing when fork happened). The hooks only pass down.
 *
 * Blocks cached on an unsized free are the objects block_slot names, of a cached class. A sized
 * free is trusted: its block joins the list of size_to_class(size), never larger than the block, as
 * long as the next layer serves sizes in the cached range with class-sized objects; what matters is
 * that it holds a class's worth of bytes at a 16-byte alignment. Every block goes back through
 * N_free_batch, which passes blocks it does not own to its next layer.
 * Why block_slot and not getmeta: the unsized free needs the list, not the size. Asking getmeta
 * for the usable size, then mapping it back to a class and checking that it is exactly a class size
 * cost two table loads and a compare more, and getmeta's own size logic: 69 instructions per free
 * hit, now 43 (gcc 12, with slab_lk's page-map window; the pair 11.60 -> 7.31 ns; 7.07 with
 * block_slot and malloc's slot table). */
#include <string.h>
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

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
#ifndef SM_OPT_CACHE_BYTES
#define SM_OPT_CACHE_BYTES (1u << 20)
#endif
#ifndef SM_OPT_BATCH_MAX
#define SM_OPT_BATCH_MAX 32
#endif
#ifndef SM_OPT_BATCH_BYTES
#define SM_OPT_BATCH_BYTES (64u << 10)
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
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX (8u << 10)
#endif
#include "../../policies/size_handle.h"

SM_REQUIRE_CAP(BATCH, "refills and releases move objects of one class in batches");
SM_REQUIRE_CAP(OWNER, "an unsized free finds its list with block_slot");
/* The lists are the next layer's classes: block_slot's answers index them. */
_Static_assert((long)SM_PROP(SM_NEXT, batch_classes) == (long)SM_SIZECLASS_FN(count) &&
                   (long)SM_PROP(SM_NEXT, batch_max_size) == (long)SM_SIZECLASS_FN(max_size),
               SM_STR(SM_LAYER) ": its sizeclass policy differs from that of its next layer " SM_STR(SM_NEXT)
                                " (give both the same SM_SIZECLASS)");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "thread_cache: SM_SIZE_MAX is above the largest size of the sizeclass policy");
_Static_assert((SM_OPT_BATCH_BYTES) >= 1024, "thread_cache: SM_OPT_BATCH_BYTES must be at least 1 KiB");
_Static_assert((SM_OPT_BATCH_MAX) >= 2 && (SM_OPT_BATCH_MAX) <= 64, "thread_cache: SM_OPT_BATCH_MAX must be in [2, 64]");
_Static_assert((SM_OPT_LIST_MAX) >= (SM_OPT_BATCH_MAX) && (SM_OPT_LIST_MAX) <= 65535,
               "thread_cache: SM_OPT_LIST_MAX must be in [SM_OPT_BATCH_MAX, 65535]");
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
    SM_FN(gc_pressure_events) = (SM_OPT_GC_EVENTS) >= 4 ? (SM_OPT_GC_EVENTS) / 4 : 1,
    SM_FN(idle_scan_refills) = SM_OPT_IDLE_SCAN_REFILLS,
    SM_FN(class_table_len) = (int)(((size_t)(SM_SIZE_MAX) + 15) / 16 + 1),
    /* Aligned requests: alignments 32 .. align_max are served from the lists (see aligned_of). */
    SM_FN(align_min_log) = 5,
    SM_FN(align_max) = 4096,
    SM_FN(align_steps) = 12 - 5 + 1,
};
_Static_assert(SM_SIZECLASS_FN(count) <= 256, "thread_cache: the class table stores classes in bytes");

/* One size class's list. 16 bytes, so list[cls] is a shift away from the cache pointer. */
struct SM_FN(list) {
    void *head;     /* LIFO of free objects, linked through their first word */
    uint32_t count; /* objects on the list */
    uint16_t limit; /* a free that finds count == limit takes the slow path */
    uint16_t low;   /* low-water mark of count since the last GC */
};

struct SM_FN(cache) {
    unsigned events;  /* slow-path events since the last GC */
    unsigned refills; /* refills, counted for the idle scan */
    size_t capacity;  /* sum of limit x class size; <= SM_OPT_CACHE_BYTES */
    /* One list per class, and list[class_count], a sentinel whose limit stays 0: the free of a block
     * that is no class's object indexes it and misses, with no test of its own. */
    struct SM_FN(list) list[SM_FN(class_count) + 1];
    uint16_t gc_low[SM_FN(class_count)];   /* each list's low-water mark since the last full GC, as
                                            * of the last GC */
    uint16_t gc_count[SM_FN(class_count)]; /* each list's count after the last GC; GC only, so it
                                            * sits after the lists, off the hit paths' lines */
};

/* The two constant caches (see the header comment): all lists empty, all limits 0. */
static const struct SM_FN(cache) SM_FN(empty_cache);
static const struct SM_FN(cache) SM_FN(retired_cache);

static __thread struct SM_FN(cache) *SM_FN(tls) __attribute__((tls_model("initial-exec"))) =
    (struct SM_FN(cache) *)&SM_FN(empty_cache);

/* Shared, written once (by the first slow path of the process, under sm_plat_once), then read only. */
static struct {
    sm_plat_once_t once;
    bool ready; /* the tables are built; false also if that failed */
    uint32_t class_bytes[SM_FN(class_count)]; /* the size of each cached class, 0 for the others:
                                                * only lists of a nonzero size ever get a limit */
    /* slot_of[(size + 15) / 16] = 16 x size_to_class(size) for size <= SM_SIZE_MAX, the offset of
     * the size's list (free_slot's unit, so malloc's hit adds it to the cache pointer as it is): one
     * load instead of the policy's branches, which mispredict when sizes vary (all class sizes are
     * multiples of 16, checked when the table is built). All 0 until then: see class_of. */
    uint16_t slot_of[SM_FN(class_table_len)];
    /* aligned_of[log2(align) - 5][cls] = the smallest cached class >= cls whose size is a multiple
     * of align, or 0 for none (class 0 never is: its objects would be smaller than align). */
    uint8_t aligned_of[SM_FN(align_steps)][SM_FN(class_count)];
    uint8_t batch[SM_FN(class_count)]; /* see batch_of */
} SM_FN(obj) = { .once = SM_PLAT_ONCE_INIT };

SM_INLINE void SM_FN(thread_exit)(void);

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* The class of a size <= SM_SIZE_MAX. Before the table is built it answers 0 for everything, which
 * is harmless: until then every list is empty and every limit 0 (no cache exists yet), so the fast
 * paths miss, and the slow paths build the table and compute the class again. */
SM_HOT unsigned SM_FN(slot_of)(size_t size) { return SM_FN(obj).slot_of[(size + 15) >> 4]; }
SM_HOT unsigned SM_FN(class_of)(size_t size) { return SM_FN(slot_of)(size) >> 4; }

SM_INLINE bool SM_FN(is_static)(const struct SM_FN(cache) *cache)
{
    return cache == &SM_FN(empty_cache) || cache == &SM_FN(retired_cache);
}

/* Objects moved per refill or release of class cls: about batch_bytes, within [2, batch_max]. */
SM_INLINE unsigned SM_FN(batch_of)(unsigned cls) { return SM_FN(obj).batch[cls]; }

/* The one place objects go back to the next layer (so its free_batch is inlined once). */
SM_SLOWPATH void SM_FN(give_blocks)(void **blocks, unsigned n)
{
    if (n)
        SM_NEXT_FN(free_batch)(blocks, n);
}

/* Collects objects to release and hands them to the next layer a batch at a time. */
struct SM_FN(sink) {
    unsigned n;
    void *blocks[SM_FN(batch_max)];
};
SM_INLINE void SM_FN(sink_put)(struct SM_FN(sink) *sink, void *p)
{
    sink->blocks[sink->n++] = p;
    if (sink->n == SM_FN(batch_max)) {
        SM_FN(give_blocks)(sink->blocks, sink->n);
        sink->n = 0;
    }
}

/* Moves the first n objects of list l into the sink. */
SM_INLINE void SM_FN(drain)(struct SM_FN(list) *l, unsigned n, struct SM_FN(sink) *sink)
{
    void *p = l->head;
    for (unsigned i = 0; i < n; i++) {
        void *next = *(void **)p;
        SM_FN(sink_put)(sink, p);
        p = next;
    }
    l->head = p;
    l->count -= n;
}

/* Garbage collection (see the header comment). With `pressure`, every list other than keep_cls also
 * gives up half of its unused room, because keep_cls needs budget now. */
SM_SLOWPATH void SM_FN(gc)(struct SM_FN(cache) *cache, unsigned keep_cls, bool pressure)
{
    struct SM_FN(sink) sink;
    sink.n = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        struct SM_FN(list) *l = &cache->list[cls];
        size_t size = SM_FN(obj).class_bytes[cls];
        unsigned low = l->low < cache->gc_low[cls] ? l->low : cache->gc_low[cls]; /* since the last GC */
        /* A list idle since the last GC or idle scan (it ends where that left it and never went
         * below that) and holding more than a batch goes back entirely: a burst of one size that is
         * over. Short lists keep the halving: a class used now and then would otherwise refill from
         * its slab on each use (alloc-test: +35% time without that bound). */
        bool idle = l->count > SM_FN(batch_of)(cls) && l->low == l->count && l->count == cache->gc_count[cls];
        unsigned drop = idle ? l->count : (low + 1u) / 2;
        SM_FN(drain)(l, drop, &sink);
        unsigned cut = drop; /* count - drop <= limit - drop: the invariant holds */
        if (pressure && cls != keep_cls)
            cut += (l->limit - cut - l->count + 1u) / 2;
        l->limit = (uint16_t)(l->limit - cut);
        cache->capacity -= cut * size;
        l->low = (uint16_t)l->count;
        cache->gc_low[cls] = (uint16_t)l->count;
        cache->gc_count[cls] = (uint16_t)l->count;
    }
    SM_FN(give_blocks)(sink.blocks, sink.n);
    cache->events = 0;
}

/* The idle scan (see the header comment): the GC's "idle list goes back whole" alone, run every
 * idle_scan_refills refills. Lists of a batch or less are skipped with one compare: their marks
 * are left alone, which only makes their next idle test cover a longer time. */
SM_SLOWPATH void SM_FN(idle_scan)(struct SM_FN(cache) *cache)
{
    struct SM_FN(sink) sink;
    sink.n = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        struct SM_FN(list) *l = &cache->list[cls];
        unsigned count = l->count;
        if (count <= SM_FN(batch_of)(cls))
            continue;
        if (l->low == count && count == cache->gc_count[cls]) {
            SM_FN(drain)(l, count, &sink);
            l->limit = (uint16_t)(l->limit - count);
            cache->capacity -= count * SM_FN(obj).class_bytes[cls];
            count = 0;
        }
        if (l->low < cache->gc_low[cls]) /* the GC's low-water mark spans its whole period */
            cache->gc_low[cls] = l->low;
        l->low = (uint16_t)count;
        cache->gc_count[cls] = (uint16_t)count;
    }
    SM_FN(give_blocks)(sink.blocks, sink.n);
}

/* Raises list cls's limit toward `want`, as far as the budget allows after a GC under pressure. */
SM_INLINE void SM_FN(grow)(struct SM_FN(cache) *cache, unsigned cls, unsigned want)
{
    struct SM_FN(list) *l = &cache->list[cls];
    size_t size = SM_FN(obj).class_bytes[cls];
    if (want > SM_FN(list_max))
        want = SM_FN(list_max);
    if (want <= l->limit || !size)
        return;
    if (cache->capacity + (want - l->limit) * size > (size_t)(SM_OPT_CACHE_BYTES)) {
        /* At most one GC under pressure per gc_pressure_events slow paths: when the working set is
         * larger than the budget, lists stop growing rather than GC on every miss. */
        if (cache->events >= SM_FN(gc_pressure_events))
            SM_FN(gc)(cache, cls, true);
        size_t room = ((size_t)(SM_OPT_CACHE_BYTES) - cache->capacity) / size; /* slow path: division is fine */
        if (want > l->limit + room)
            want = l->limit + (unsigned)room;
    }
    cache->capacity += (want - l->limit) * size;
    l->limit = (uint16_t)want;
}

SM_SLOWPATH void SM_FN(report_setup)(const char *detail)
{
    SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, SM_LAYER_NAME, NULL, detail);
}

/* Once per process, from the first slow path: the class tables. */
SM_SLOWPATH void SM_FN(init_once)(void)
{
    /* The cached classes: those of the sizes in [SM_SIZE_MIN, SM_SIZE_MAX]. */
    unsigned first = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MIN));
    unsigned last = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MAX));
    for (unsigned cls = first; cls <= last; cls++) {
        size_t size = SM_SIZECLASS_FN(class_to_size)(cls), n = SM_FN(batch_bytes) / size;
        SM_FN(obj).class_bytes[cls] = (uint32_t)size;
        SM_FN(obj).batch[cls] = (uint8_t)(n < 2 ? 2 : n > SM_FN(batch_max) ? SM_FN(batch_max) : n);
    }
    for (size_t i = 0; i < (size_t)SM_FN(class_table_len); i++) {
        /* entry 0 serves malloc(0) on the hit path, which the socket would make a 1-byte request */
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(i ? i * 16 : 1);
        if (i && SM_SIZECLASS_FN(size_to_class)(i * 16 - 15) != cls) {
            SM_FN(report_setup)("a class boundary of the sizeclass policy is not a multiple of 16; caching off");
            return;
        }
        SM_FN(obj).slot_of[i] = (uint16_t)(cls << 4);
    }
    for (unsigned a = 0; a < SM_FN(align_steps); a++) {
        size_t align = (size_t)1 << (a + SM_FN(align_min_log));
        for (unsigned cls = first; cls <= last; cls++) {
            unsigned fit = cls;
            while (fit <= last && (SM_FN(obj).class_bytes[fit] & (align - 1)))
                fit++;
            SM_FN(obj).aligned_of[a][cls] = (uint8_t)(fit <= last ? fit : 0);
        }
    }
    SM_FN(obj).ready = true;
}

/* The calling thread's cache, created on its first slow path; NULL when the thread is to bypass
 * the cache (retired, or no memory for a cache, or no thread-exit hook could be had). */
SM_SLOWPATH struct SM_FN(cache) *SM_FN(cache_get)(void)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    if (!SM_FN(is_static)(cache))
        return cache;
    if (cache == &SM_FN(retired_cache))
        return NULL;
    sm_plat_once(&SM_FN(obj).once, SM_FN(init_once));
    if (!SM_FN(obj).ready || !sm_thread_attach(SM_FN(thread_exit))) {
        /* no tables, or no exit hook (a cache would leak when the thread ends) */
        SM_FN(tls) = (struct SM_FN(cache) *)&SM_FN(retired_cache);
        return NULL;
    }
    /* The cache is the allocator's own metadata: it comes from the next layer, never from libc. */
    sm_mctx_t r = sm_mctx_alloc(sizeof(struct SM_FN(cache)), SM_CACHELINE, 0);
    cache = (struct SM_FN(cache) *)SM_NEXT_FN(alloc)(&r);
    if (!cache)
        return NULL; /* this request bypasses the cache; a later slow path tries again */
    memset(cache, 0, sizeof *cache);
    /* Nonzero, differs per thread and per process, and is not a pointer a program stores. */
    SM_FN(tls) = cache;
    return cache;
}

/* The list at byte offset `slot` (16 x its class) of cache's list array: no multiply. */
SM_HOT struct SM_FN(list) *SM_FN(list_at)(struct SM_FN(cache) *cache, unsigned slot)
{
    _Static_assert(sizeof(struct SM_FN(list)) == 16, "thread_cache: lists are indexed by 16 x their class");
    return (struct SM_FN(list) *)((char *)cache->list + slot);
}

/* The tag written into the second word of cached objects (the double-free check): the cache's own
 * address, made odd. Per thread, and never a value a program stores (no program holds a pointer to
 * a thread's cache); a block that carries it by chance only takes the slow path, which looks for it
 * on the list. Derived from the cache pointer the free already holds rather than stored in the
 * cache: the free's hit path loaded it from the cache's first line, a line the list entry of most
 * classes is not on. */
SM_HOT uintptr_t SM_FN(tag_of)(const struct SM_FN(cache) *cache) { return (uintptr_t)cache | 1; }

/* Puts p on list l of cache, tagged as cached so a second free of it is recognised. */
SM_HOT void SM_FN(list_push)(const struct SM_FN(cache) *cache, struct SM_FN(list) *l, void *p)
{
    (void)cache;
    ((void **)p)[0] = l->head;
    if (SM_OPT_DOUBLE_FREE_CHECK)
        ((uintptr_t *)p)[1] = SM_FN(tag_of)(cache);
    l->head = p;
    l->count++;
}

/* Counts a slow-path event; every SM_OPT_GC_EVENTS of them, a GC. */
SM_INLINE void SM_FN(event)(struct SM_FN(cache) *cache)
{
    if (++cache->events >= (SM_OPT_GC_EVENTS))
        SM_FN(gc)(cache, SM_FN(class_count), false);
}

/* malloc missed the list of `size`: refill it with one batch from the next layer and return the
 * first object, or NULL to send the request to the next layer. c: the request (its CPU). */
SM_SLOWPATH void *SM_FN(refill)(size_t size, sm_mctx_t *c)
{
    struct SM_FN(cache) *cache = SM_FN(cache_get)();
    if (!cache)
        return NULL;
    unsigned cls = SM_FN(class_of)(size); /* again: the fast path may have read an unbuilt table */
    struct SM_FN(list) *l = &cache->list[cls];
    unsigned batch = SM_FN(batch_of)(cls);
    /* Slow start, except that a thread's first objects of a class fill four cache lines of their
     * own: objects handed one at a time to different threads would share lines, and a line written
     * by two threads ping-pongs between their cores (measured: cache-thrash 1.85x glibc). Four, not
     * two: the hot object is the run's first, and with two lines it could sit in the same 128-byte
     * pair as another thread's objects, which the adjacent-line prefetcher moves together
     * (micro-mt, two threads cycling 64..120 B: 11.4-12.2 ns per pair with two lines, 8.9-9.5
     * with four, as one thread alone). */
    size_t obj_size = SM_SIZECLASS_FN(class_to_size)(cls);
    unsigned own_lines = obj_size >= 4 * SM_CACHELINE ? 1u : (unsigned)((4 * SM_CACHELINE + obj_size - 1) / obj_size);
    unsigned step = l->limit + 1u > own_lines ? l->limit + 1u : own_lines;
    SM_FN(grow)(cache, cls, l->limit < batch ? (step < batch ? step : batch) : l->limit + batch);
    if (++cache->refills % SM_FN(idle_scan_refills) == 0)
        SM_FN(idle_scan)(cache); /* first: what it frees may make room for this refill */
    unsigned want = l->limit < batch ? l->limit : batch;
    void *out[SM_FN(batch_max)];
    sm_mctx_t r = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    r.cpu = c->cpu;
    unsigned got = SM_NEXT_FN(alloc_batch)(&r, out, want ? want : 1);
    c->cpu = r.cpu; /* what the next layer learned, for the rest of the request */
    if (!got)
        return NULL;
    /* out[0] goes to the caller; out[1..] become the list, in the order the next layer gave them. */
    void *head = NULL;
    for (unsigned i = got; i-- > 1;) {
        *(void **)out[i] = head;
        head = out[i];
    }
    l->head = head; /* the list was empty: that is why we are here */
    l->count = got - 1;
    if (SM_OPT_DOUBLE_FREE_CHECK)
        ((uintptr_t *)out[0])[1] = 0; /* a stale tag would make its free look like a double free */
    SM_FN(event)(cache);
    return out[0];
}

/* Is p on list l? For a tagged block: a double free, or a block that left the cache since. */
SM_SLOWPATH bool SM_FN(on_list)(const struct SM_FN(list) *l, const void *p)
{
    const void *q = l->head;
    for (uint32_t i = 0; q && i < l->count; i++, q = *(void *const *)q)
        if (q == p)
            return true;
    return false;
}

SM_INLINE unsigned SM_FN(free_class)(void *p, size_t size, unsigned flags);

/* A free that missed its list (full, or the cache missing, or p tagged, or p of no cached class).
 * True if p was taken care of; false sends it to the next layer. */
SM_SLOWPATH bool SM_FN(overflow)(sm_mctx_t *c)
{
    void *p = c->ptr;
    size_t size = c->size;
    unsigned flags = c->flags;
    struct SM_FN(cache) *cache = SM_FN(cache_get)();
    if (!cache)
        return false;
    unsigned cls = SM_FN(free_class)(p, size, flags); /* again: the hit path may have read an unbuilt table */
    if (cls >= SM_FN(class_count) || !SM_FN(obj).class_bytes[cls])
        return false;
    struct SM_FN(list) *l = &cache->list[cls];
    if (SM_OPT_DOUBLE_FREE_CHECK && ((uintptr_t *)p)[1] == SM_FN(tag_of)(cache)) {
        if (SM_FN(on_list)(l, p)) {
            SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, p, "object is already in the thread cache; ignored");
            return true;
        }
        return false; /* not here (any more): let the layers below validate it */
    }
    unsigned batch = SM_FN(batch_of)(cls);
    if (l->limit < batch)
        SM_FN(grow)(cache, cls, l->limit + 1u); /* slow start on the freeing side too */
    if (l->count >= l->limit && l->count) {
        struct SM_FN(sink) sink;
        sink.n = 0;
        SM_FN(drain)(l, l->count < batch ? l->count : batch, &sink);
        SM_FN(give_blocks)(sink.blocks, sink.n);
        if (l->low > l->count)
            l->low = (uint16_t)l->count;
    }
    if (!SM_NEXT_FN(block_local)(p, c)) {
        /* Another CPU's slab: kept here, p would be this thread's next object of its class while
         * its neighbours are in use on that CPU (Hoard's passive false sharing: cache-scratch, the
         * object a thread is given and frees first, 0.51 or 0.65 s by where it fell in its line).
         * Asked only here, after a full list made room (else every free of the class would come here
         * while it is full): hit-path frees of remote blocks are still cached. */
        SM_FN(event)(cache);
        return false;
    }
    bool cached = l->count < l->limit;
    if (cached) {
        SM_FN(list_push)(cache, l, p);
    }
    SM_FN(event)(cache);
    return cached;
}

/* ---- The hit paths ----
 * Each is a few loads and stores on the thread's own cache, with one test per way to miss; on a
 * miss it changes nothing and answers NULL / false. They read only the TLS pointer (the empty
 * cache until this thread's first slow path), the class table (all 0 until built) and, for an
 * unsized free, the next layer's block_slot, so they are safe before the stack is created: a socket
 * may call them first and run its start-up only on their misses (sockets/libc_api.h). */

/* Takes head, the first object of list l, off the list (the low-water mark follows). */
SM_HOT void *SM_FN(pop)(struct SM_FN(list) *l, void *head)
{
    uint32_t count = l->count - 1;
    l->head = *(void **)head;
    l->count = count;
    if (count < l->low)
        l->low = (uint16_t)count;
    if (SM_OPT_DOUBLE_FREE_CHECK)
        ((uintptr_t *)head)[1] = 0;
    return head;
}

/* malloc's hit: an object of size's class (size 0 is served as 1) with the default alignment. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_FN(handles_size)(size))
        return NULL;
    struct SM_FN(list) *l = SM_FN(list_at)(SM_FN(tls), SM_FN(slot_of)(size));
    void *head = l->head;
    if (sm_unlikely(!head))
        return NULL;
    return SM_FN(pop)(l, head);
}

/* The list an aligned request (16 < align, a power of two) is served from: the smallest cached
 * class at least as large as size whose size is a multiple of align (class_count-wide table per
 * alignment, two byte loads), or 0 when none is (align above align_max, size out of range, tables
 * not built). A class's objects are that aligned when the next layer aligns its objects to the
 * largest power of two dividing their size, as slab_lk does up to 4 KiB; the pop checks it anyway. */
SM_INLINE unsigned SM_FN(aligned_class)(size_t size, size_t align)
{
    if (!SM_FN(handles_size)(size) || align > SM_FN(align_max) || (align & (align - 1)))
        return 0;
    return SM_FN(obj).aligned_of[__builtin_ctzll(align) - SM_FN(align_min_log)][SM_FN(class_of)(size)];
}

/* An aligned request's hit: the head of its list if that is aligned enough. Not every object on a
 * list need be: a sized free puts its block on the list of the size it names, and a block that
 * realloc kept in place (a shrink) can be named by a smaller size than its class, so it may sit on
 * a list whose size has more trailing zero bits than the block's address. Such a head sends the
 * request down (one AND on this path instead of a guarantee on every free). */
SM_HOT void *SM_FN(aligned_hit)(size_t size, size_t align)
{
    unsigned cls = SM_FN(aligned_class)(size, align);
    if (!cls)
        return NULL;
    struct SM_FN(list) *l = &SM_FN(tls)->list[cls];
    void *head = l->head;
    if (!head || ((uintptr_t)head & (align - 1)))
        return NULL;
    return SM_FN(pop)(l, head);
}

/* The list a freed block goes on (see the header comment): class_count, the sentinel, for a block
 * the cache does not take. Before the tables exist a sized free gets class 0, harmless as for
 * class_of: no cache exists yet, so every list is empty and every limit 0. */
/* The list p goes on, as its offset in the list array: 16 x its class (class_count: the sentinel). */
SM_HOT unsigned SM_FN(free_slot)(void *p, size_t size, unsigned flags)
{
    if (flags & SM_F_SIZED)
        return SM_FN(handles_size)(size) ? SM_FN(slot_of)(size) : (unsigned)SM_FN(class_count) << 4;
    return SM_NEXT_FN(block_slot)(p);
}

SM_INLINE unsigned SM_FN(free_class)(void *p, size_t size, unsigned flags)
{
    return SM_FN(free_slot)(p, size, flags) >> 4;
}

/* Pushes p on the list at byte offset `slot` if it has room and p is not tagged as cached already. */
SM_HOT bool SM_FN(push)(void *p, unsigned slot)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    struct SM_FN(list) *l = SM_FN(list_at)(cache, slot);
    bool room = l->count < l->limit && (!SM_OPT_DOUBLE_FREE_CHECK || ((uintptr_t *)p)[1] != SM_FN(tag_of)(cache));
    if (sm_unlikely(!room))
        return false;
    SM_FN(list_push)(cache, l, p);
    return true;
}

/* free's hit: true if p (non-NULL; size and flags as in the context) went onto its list. */
SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags)
{
    return SM_FN(push)(p, SM_FN(free_slot)(p, size, flags));
}

/* ---- The misses (capability HIT's alloc_miss and free_miss) ----
 * Everything the hit paths do not do. A socket calls them from its own out-of-line miss function
 * with the request's one context, after its hit path missed (it never tries the hit twice); L_alloc
 * and L_free, for a layer above, are the hit then the miss. The context goes down unchanged, so
 * what a layer below learns (the CPU, SM_F_FRESH) reaches the socket. The pass-down is the one call
 * site of the next layer's alloc/free (docs/layers.md). */

/* An aligned request that missed its list (see aligned_class): refill that class's list and return
 * its first object, or NULL to send the request to the next layer. */
SM_SLOWPATH void *SM_FN(refill_aligned)(size_t size, size_t align, sm_mctx_t *c)
{
    struct SM_FN(cache) *cache = SM_FN(cache_get)(); /* builds the tables on a thread's first call */
    if (!cache)
        return NULL;
    unsigned cls = SM_FN(aligned_class)(size, align);
    if (!cls)
        return NULL;
    struct SM_FN(list) *l = &cache->list[cls];
    if (l->head) /* the hit path ran before the tables existed, or found the head misaligned */
        return SM_FN(aligned_hit)(size, align);
    void *p = SM_FN(refill)(SM_FN(obj).class_bytes[cls], c);
    if (p && ((uintptr_t)p & (align - 1))) {
        /* The next layer does not align this class's objects naturally: keep the object for
         * plain requests and pass this one down. */
        if (l->count < l->limit) {
            SM_FN(list_push)(cache, l, p);
        } else {
            SM_FN(give_blocks)(&p, 1);
        }
        return NULL;
    }
    return p;
}

/* The request after its hit path missed, or was not tried (an aligned request: the socket tries
 * hit paths for plain ones only). */
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (c->align > SM_MIN_ALIGN) {
        void *p = SM_FN(aligned_hit)(c->size, c->align);
        if (p)
            return c->ptr = p;
    }
    if (SM_FN(handles_size)(c->size)) {
        void *p = c->align <= SM_MIN_ALIGN ? SM_FN(refill)(c->size, c) : SM_FN(refill_aligned)(c->size, c->align, c);
        if (p)
            return c->ptr = p;
    }
    return SM_NEXT_FN(alloc)(c);
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    /* A block of no cached class goes down without creating a cache for this thread. */
    if (SM_FN(free_class)(c->ptr, c->size, c->flags) < SM_FN(class_count) && SM_FN(overflow)(c))
        return;
    SM_NEXT_FN(free)(c);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (c->align <= SM_MIN_ALIGN) {
        void *p = SM_FN(alloc_hit)(c->size);
        if (sm_likely(p != NULL))
            return c->ptr = p;
    }
    return SM_FN(alloc_miss)(c);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (sm_likely(SM_FN(free_hit)(c->ptr, c->size, c->flags)))
        return;
    SM_FN(free_miss)(c);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }

/* Returns every cached object and the cache itself to the next layer; the thread is retired. */
SM_SLOWPATH void SM_FN(cache_destroy)(void)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    SM_FN(tls) = (struct SM_FN(cache) *)&SM_FN(retired_cache);
    if (SM_FN(is_static)(cache))
        return;
    struct SM_FN(sink) sink;
    sink.n = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++)
        SM_FN(drain)(&cache->list[cls], cache->list[cls].count, &sink);
    SM_FN(sink_put)(&sink, cache);
    SM_FN(give_blocks)(sink.blocks, sink.n);
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* A release of everything (malloc_trim) empties the calling thread's own lists; other threads' caches
 * are theirs alone (no lock guards them): they shrink through their GC, and go back whole when their
 * thread exits. */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    struct SM_FN(cache) *cache = SM_FN(tls);
    if (r->how == SM_RELEASE_ALL && !SM_FN(is_static)(cache)) {
        struct SM_FN(sink) sink;
        sink.n = 0;
        for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
            struct SM_FN(list) *l = &cache->list[cls];
            r->released += (size_t)l->count * SM_FN(obj).class_bytes[cls];
            SM_FN(drain)(l, l->count, &sink);
            l->low = 0;
            cache->gc_low[cls] = cache->gc_count[cls] = 0;
        }
        SM_FN(give_blocks)(sink.blocks, sink.n);
    }
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void)
{
    SM_FN(cache_destroy)();
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#undef SM_OPT_CACHE_BYTES
#undef SM_OPT_BATCH_MAX
#undef SM_OPT_BATCH_BYTES
#undef SM_OPT_LIST_MAX
#undef SM_OPT_GC_EVENTS
#undef SM_OPT_IDLE_SCAN_REFILLS
#undef SM_OPT_DOUBLE_FREE_CHECK
#define SM_LAYER_OFFERS SM_CAP_HIT
#include "../../core/layer_end.h"
