/* decay_cache: an add-on layer that keeps freed large blocks of the next layer mapped for reuse,
 * and gives their memory back over time (jemalloc's dirty/muzzy decay, done on the request path).
 * Why it is built this way, its defaults, with the measurements: docs/layers.md, section decay_cache.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required: one lock over the cache; only large blocks
 * ever take it), err (required: double frees of cached blocks).
 * Idle blocks are purged with the next layer's L_purge (core/release.h; layers may not call the OS,
 * so the purge is asked of the layer that owns the mapping); L_release purges and returns what is
 * due (SM_RELEASE_DECAYED) or hands every cached block back (SM_RELEASE_ALL, malloc_trim).
 * Options:
 *   SM_OPT_MIN_CACHED   smallest block kept, in bytes (default 64 KiB: smaller blocks belong to
 *                       the heap layers above, and a page-map node or descriptor is never freed)
 *   SM_OPT_MAX_WASTE    percent by which a reused block may exceed the request (default 100: at
 *                       most twice the request, a power-of-two allocator's bound); a larger cached
 *                       block is shrunk to the request with N_resize (the tail is unmapped) instead
 *   SM_OPT_DECAY_MS     a block idle this long is purged (pages given back, still mapped); idle
 *                       twice this long it goes back to the next layer, unmapped (default 1000)
 *   SM_OPT_PURGE_LAZY   0: purge with MADV_DONTNEED (default: RSS drops at once, as users and their
 *                       monitoring read it, and a purged block is reused as zero memory, SM_F_FRESH);
 *                       1: MADV_FREE (cheaper to reuse, RSS drops only under memory pressure)
 *   SM_OPT_GROW         1: on a miss, grow the largest dirty cached block to the request with the next
 *                       layer's N_remap, and cut a too-large block with N_split and keep the tail,
 *                       instead of unmapping it: resident pages are reused instead of faulting new
 *                       mappings in, and the cache does not pile up blocks too small for the requests
 *                       (default 0); a freed block is joined with cached blocks that touch it (join),
 *                       and a growth the next layer cannot make in place takes the cached block that
 *                       starts where the block ends (join, then split: a realloc-grown buffer's old copy).
 *                       Needs capability MAPPING of the next layer (mmap_heap has it)
 *   SM_OPT_MAX_BLOCKS   at most this many blocks cached (default 64)
 *   SM_OPT_MAX_BYTES    at most this many bytes cached, dirty or purged (default 256 MiB)
 *   SM_OPT_MAX_BLOCK    the largest block kept when freed (default SM_OPT_MAX_BYTES); a larger one
 *                       goes back at once: a program's huge buffer is seldom asked for again, where
 *                       the chunks the heaps above give back are
 * Properties: thread_safe when the sync policy and the next layer are (the next layer is called
 * outside the lock); min_align of the next layer (every cached block came from it); zeroed 0 (dirty
 * blocks are reused as they are; purged ones come back with SM_F_FRESH). Capabilities: offers MOVE
 * (a live block moved by the next layer's remap, when it has MAPPING); needs MAPPING of the next
 * layer (remap, split, join) with SM_OPT_GROW 1. Also L_flush, L_is_cached.
 *
 * Invariants:
 * - The cache is a fixed array of SM_OPT_MAX_BLOCKS static slots (no allocation); a slot is empty,
 *   dirty (as the user left it), purged, or busy (being purged outside the lock: neither handed out
 *   nor freed twice meanwhile); blocks and bytes count them all.
 * - A block idle DECAY_MS is purged, idle 2 x DECAY_MS it goes back to the next layer. Each free that
 *   reaches this layer and each large allocation compares CLOCK_MONOTONIC_COARSE (vDSO) with
 *   next_deadline (one load); only when it has passed is the cache scanned. Keeping a block notes it
 *   (sm_release_note), so a release clock purges and returns it even when the program stops calling.
 * - With SM_OPT_GROW 1, no two cached blocks touch: a freed block is joined with its cached
 *   neighbours (the next layer's join) before it is kept, unless the next layer refuses.
 * Lock order: cache lock -> next layer's locks, in the fork hooks and for join (a registry update, no
 * system call); the next layer's purge, unmap and map are called outside it. Request-path sections
 * run under atomic_exec.
 * Parts, in layers/addon/decay_cache/ and included below (by this template only): chores.h
 * (eviction, collect, do_chores, decay: the work found under the lock and done after it).
 * @model: name=decay_cache kind=addon slot sync slot err
 * @model: key min_cached size key max_waste int key decay_ms int key purge_lazy bool key grow bool
 * @model: key max_blocks int key max_bytes size key max_block size
 * @check: <sunmao/policies/err/warn.h> SM_LAYER=m SM_ERR=warn <sunmao/os/mmap_heap.h> SM_LAYER=t SM_NEXT=m <sunmao/policies/sync/mutex.h> SM_SYNC=mutex SM_ERR=warn */
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "decay_cache: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "decay_cache: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "decay_cache: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "decay_cache: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif

#ifndef SM_OPT_MIN_CACHED
#define SM_OPT_MIN_CACHED ((size_t)64 << 10)
#endif
#ifndef SM_OPT_MAX_WASTE
#define SM_OPT_MAX_WASTE 100
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
#ifndef SM_OPT_PURGE_LAZY
#define SM_OPT_PURGE_LAZY 0
#endif
#ifndef SM_OPT_GROW
#define SM_OPT_GROW 0
#endif
#if SM_OPT_GROW != 0 && SM_OPT_GROW != 1
#error "decay_cache: SM_OPT_GROW must be the literal 0 or 1"
#endif
#ifndef SM_OPT_MAX_BLOCKS
#define SM_OPT_MAX_BLOCKS 64
#endif
SM_REQUIRE_CAP_WHEN(SM_OPT_GROW, MAPPING, "remap, split and join, for SM_OPT_GROW 1");
#ifndef SM_OPT_MAX_BYTES
#define SM_OPT_MAX_BYTES ((size_t)256 << 20)
#endif
#ifndef SM_OPT_MAX_BLOCK
#define SM_OPT_MAX_BLOCK SM_OPT_MAX_BYTES
#endif
_Static_assert((SM_OPT_MAX_BLOCK) <= (SM_OPT_MAX_BYTES), "decay_cache: SM_OPT_MAX_BLOCK must be at most SM_OPT_MAX_BYTES");
_Static_assert((SM_OPT_MIN_CACHED) >= 1, "decay_cache: SM_OPT_MIN_CACHED must be at least 1");
_Static_assert((SM_OPT_MAX_WASTE) >= 0 && (SM_OPT_MAX_WASTE) <= 1000, "decay_cache: SM_OPT_MAX_WASTE is a percentage, 0..1000");
_Static_assert((SM_OPT_DECAY_MS) >= 1, "decay_cache: SM_OPT_DECAY_MS must be at least 1 ms");
_Static_assert((SM_OPT_MAX_BLOCKS) >= 1 && (SM_OPT_MAX_BLOCKS) <= 4096, "decay_cache: SM_OPT_MAX_BLOCKS must be 1..4096");

enum {
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe) && SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
    /* Slot states. */
    SM_FN(s_empty) = 0,
    SM_FN(s_dirty) = 1,  /* as the user left it, resident */
    SM_FN(s_purged) = 2, /* pages given back; reads as zero unless the purge was lazy */
    SM_FN(s_busy) = 3,   /* being purged outside the lock: not reusable, still "free" */
};

struct SM_FN(slot) {
    char *ptr;
    size_t size;
    uint64_t since_ms; /* when it entered the cache; decay deadlines count from here */
    unsigned state;
};

static struct {
    SM_SYNC_FN(t) lock;
    size_t blocks, bytes;     /* cached, busy included */
    uint64_t next_deadline;   /* earliest time a slot needs a purge or a return; read without lock */
} SM_FN(obj) = { SM_SYNC_INIT, 0, 0, UINT64_MAX };
/* The slots (under obj.lock), apart from obj's initialised words: all zero, so they lie in .bss and
 * a page of them becomes resident only when a slot on it is used (in obj, they were all in the
 * library's file-backed data, resident in every process: docs/default-allocator.md). */
static struct SM_FN(slot) SM_FN(slots)[SM_OPT_MAX_BLOCKS];

SM_INLINE uint64_t SM_FN(now_ms)(void) { return sm_plat_now_ms(); }

/* The decay in force: SM_OPT_DECAY_MS, or dirty_decay_ms (core/conf.h), read once here. */
static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    return SM_NEXT_FN(create)();
}

/* The block count is also read without the lock, as a hint that the cache is empty. */
SM_INLINE void SM_FN(set_blocks_locked)(size_t n) { __atomic_store_n(&SM_FN(obj).blocks, n, __ATOMIC_RELAXED); }

#define SM_DECAY_CACHE_PARTS 1
#include "decay_cache/chores.h"
#undef SM_DECAY_CACHE_PARTS

SM_SLOWPATH bool SM_FN(keep)(sm_mctx_t *c, size_t size);

/* Critical sections of the request paths go to the sync policy's atomic_exec, which may run them
 * on another thread (a combining policy): they set no errno and raise nothing; results travel back
 * in the argument. Release passes and flushes take the lock (off the request paths). */
struct SM_FN(cs_take) { size_t need, align; char *ptr; size_t size; bool zero, grown; };
SM_INLINE void SM_FN(cs_take)(void *arg)
{
    struct SM_FN(cs_take) *t = (struct SM_FN(cs_take) *)arg;
    size_t need = t->need, align = t->align;
    struct SM_FN(slot) *best = NULL, *grow = NULL;
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
        struct SM_FN(slot) *s = &SM_FN(slots)[i];
        if ((s->state != SM_FN(s_dirty) && s->state != SM_FN(s_purged)) || s->size < need ||
            !sm_ptr_aligned(s->ptr, align))
            continue;
        /* Best fit; among equal sizes prefer a dirty block (no faults), then the most recent. */
        if (!best || s->size < best->size ||
            (s->size == best->size && (s->state < best->state ||
                                       (s->state == best->state && s->since_ms > best->since_ms))))
            best = s;
    }
    if (!best && SM_OPT_GROW && align <= (size_t)SM_PROP(SM_NEXT, min_align)) {
        /* Nothing large enough: take the largest dirty block and grow it (moved by the next layer's
         * remap, which moves page tables, not bytes). Its resident pages serve the front of the
         * request without faults, only the difference faults in, and the cache stops holding it:
         * separate mappings cannot coalesce, and this is how they still add up to a larger one. */
        for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
            struct SM_FN(slot) *s = &SM_FN(slots)[i];
            if (s->state == SM_FN(s_dirty) && (!grow || s->size > grow->size))
                grow = s;
        }
        best = grow;
    }
    if (!best) {
        t->ptr = NULL;
        return;
    }
    t->ptr = best->ptr;
    t->size = best->size;
    t->zero = best->state == SM_FN(s_purged) && !SM_OPT_PURGE_LAZY;
    t->grown = best == grow;
    SM_FN(set_blocks_locked)(SM_FN(obj).blocks - 1);
    SM_FN(obj).bytes -= best->size;
    best->ptr = NULL, best->size = 0, best->state = SM_FN(s_empty);
}

/* Find and take a cached block for c; false on a miss. */
SM_SLOWPATH bool SM_FN(take)(sm_mctx_t *c)
{
    uint64_t now = SM_FN(now_ms)();
    if (SM_FN(due)(now))
        SM_FN(decay)(now);
    if (!__atomic_load_n(&SM_FN(obj).blocks, __ATOMIC_RELAXED))
        return false;
    size_t need = c->size, align = c->align < SM_MIN_ALIGN ? SM_MIN_ALIGN : c->align;
    size_t waste_ok = need / 100 * (SM_OPT_MAX_WASTE) + need % 100 * (SM_OPT_MAX_WASTE) / 100;
    struct SM_FN(cs_take) t = { need, align, NULL, 0, false, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_take), &t);
    if (!t.ptr)
        return false;
    char *p = t.ptr;
    size_t size = t.size;
    bool zero = t.zero;
    c->ptr = p;
    if (SM_OPT_GROW && t.grown) {
        if (!SM_NEXT_FN(remap)(c, need)) { /* left as it was: return it, and the caller maps anew */
            SM_FN(give_back)(p, size);
            c->ptr = NULL;
            return false;
        }
        c->flags &= ~(unsigned)SM_F_FRESH; /* dirty front */
        return true;
    }
    /* Too large: cut it to the request (the next layer unmaps the tail), so a small request does not
     * pin a huge block's pages. If the next layer cannot, the whole block is still a valid answer. */
    if (size - need > waste_ok) {
        /* Cut the tail off and keep it: its resident pages stay reusable instead of unmapped. */
        char *tail = SM_OPT_GROW ? (char *)SM_NEXT_FN(split)(c, need) : NULL;
        if (tail) {
            size_t head = (size_t)(tail - p);
            sm_mctx_t t = sm_mctx_block(tail, size - head, SM_F_SIZED);
            if (!(size - head >= (size_t)(SM_OPT_MIN_CACHED) && SM_FN(keep)(&t, size - head)))
                SM_NEXT_FN(free)(&t);
        } else {
            (void)SM_NEXT_FN(resize)(c, need);
        }
    }
    c->flags = zero ? c->flags | SM_F_FRESH : c->flags & ~(unsigned)SM_F_FRESH;
    return true;
}

/* Give every cached block that is not busy back to the next layer; returns their bytes (0: there was
 * none). Called when the next layer is out of memory, for malloc_trim, and by tests. */
SM_SLOWPATH size_t SM_FN(flush)(void)
{
    if (!__atomic_load_n(&SM_FN(obj).blocks, __ATOMIC_RELAXED))
        return 0;
    struct SM_FN(chores) w;
    w.purge_count = w.return_count = 0;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
        struct SM_FN(slot) *s = &SM_FN(slots)[i];
        if (s->state == SM_FN(s_dirty) || s->state == SM_FN(s_purged))
            SM_FN(evict_locked)(s, &w);
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return SM_FN(do_chores)(&w);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (c->size >= (size_t)(SM_OPT_MIN_CACHED) && SM_FN(take)(c))
        return c->ptr;
    for (;;) { /* one pass-down call site, retried after the cache is handed back */
        void *p = SM_NEXT_FN(alloc)(c);
        if (sm_likely(p != NULL) || !SM_FN(flush)())
            return p;
    }
}

struct SM_FN(cs_keep) { char *ptr; size_t size; uint64_t now; struct SM_FN(chores) *w; bool twice, kept; };

/* A block freed next to cached ones becomes one block with them (the next layer's join): a tail cut
 * off a cached block for a smaller request grows back into it when the head comes back, so a loop of
 * large blocks of changing sizes keeps one block of the largest size instead of a growing set of
 * pieces, each resident and each too small for the next large request (large-loop peaked at 136 MiB
 * for one live 32 MiB block). A neighbour being purged (busy) is left alone; the joined block is
 * dirty if any part of it was, and its clock starts now. The next layer's registry lock is taken
 * under the cache lock here (lock order: cache -> next layer). */
SM_INLINE void SM_FN(join_neighbours_locked)(struct SM_FN(cs_keep) *k, struct SM_FN(slot) **free_slot)
{
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
        struct SM_FN(slot) *s = &SM_FN(slots)[i];
        if (s->state != SM_FN(s_dirty) && s->state != SM_FN(s_purged))
            continue;
        sm_mctx_t m;
        if (s->ptr + s->size == k->ptr) { /* s, then the freed block */
            m = sm_mctx_block(s->ptr, s->size, SM_F_SIZED);
            if (!SM_NEXT_FN(join)(&m, k->ptr))
                continue;
            k->ptr = s->ptr;
        } else if (k->ptr + k->size == s->ptr) { /* the freed block, then s */
            m = sm_mctx_block(k->ptr, k->size, SM_F_SIZED);
            if (!SM_NEXT_FN(join)(&m, s->ptr))
                continue;
        } else {
            continue;
        }
        k->size += s->size;
        SM_FN(set_blocks_locked)(SM_FN(obj).blocks - 1);
        s->ptr = NULL, s->size = 0, s->state = SM_FN(s_empty);
        if (s < *free_slot)
            *free_slot = s;
    }
}
SM_INLINE void SM_FN(cs_keep)(void *arg)
{
    struct SM_FN(cs_keep) *k = (struct SM_FN(cs_keep) *)arg;
    size_t size = k->size;
    uint64_t now = k->now;
    struct SM_FN(slot) *free_slot = NULL;
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
        struct SM_FN(slot) *s = &SM_FN(slots)[i];
        if (s->ptr == k->ptr && s->state != SM_FN(s_empty)) {
            k->twice = true;
            return;
        }
        if (s->state == SM_FN(s_empty) && !free_slot)
            free_slot = s;
    }
    /* Over a bound: return the oldest blocks first (purging would keep their address space). */
    while (SM_FN(obj).blocks && (!free_slot || SM_FN(obj).bytes + size > (size_t)(SM_OPT_MAX_BYTES))) {
        struct SM_FN(slot) *oldest = NULL;
        for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
            struct SM_FN(slot) *s = &SM_FN(slots)[i];
            if ((s->state == SM_FN(s_dirty) || s->state == SM_FN(s_purged)) &&
                (!oldest || s->since_ms < oldest->since_ms))
                oldest = s;
        }
        if (!oldest)
            break; /* only busy blocks left */
        SM_FN(evict_locked)(oldest, k->w);
        if (!free_slot)
            free_slot = oldest;
    }
    if (free_slot && SM_FN(obj).bytes + size <= (size_t)(SM_OPT_MAX_BYTES)) {
        if (SM_OPT_GROW)
            SM_FN(join_neighbours_locked)(k, &free_slot);
        free_slot->ptr = k->ptr;
        free_slot->size = k->size;
        free_slot->since_ms = now;
        free_slot->state = SM_FN(s_dirty);
        SM_FN(set_blocks_locked)(SM_FN(obj).blocks + 1);
        SM_FN(obj).bytes += size;
        k->kept = true;
        if (now + SM_FN(decay_ms) < SM_FN(obj).next_deadline)
            __atomic_store_n(&SM_FN(obj).next_deadline, now + SM_FN(decay_ms), __ATOMIC_RELAXED);
    }
    if (SM_FN(due)(now))
        SM_FN(collect_due_locked)(now, k->w);
}

/* Keep the block c->ptr of `size` bytes; false if it must go down instead. */
SM_SLOWPATH bool SM_FN(keep)(sm_mctx_t *c, size_t size)
{
    struct SM_FN(chores) w;
    w.purge_count = w.return_count = 0;
    struct SM_FN(cs_keep) k = { (char *)c->ptr, size, SM_FN(now_ms)(), &w, false, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_keep), &k);
    if (k.kept)
        sm_release_note(); /* after the section: the first note after an idle period wakes the clock */
    SM_FN(do_chores)(&w);
    if (k.twice) {
        SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, c->ptr, "block already freed (held in the decay cache)");
        return true; /* ignored: the cached copy stays */
    }
    return k.kept;
}

/* Decay runs on frees of small blocks too, while anything is cached. */
SM_SLOWPATH void SM_FN(tick)(void)
{
    uint64_t now = SM_FN(now_ms)();
    if (SM_FN(due)(now))
        SM_FN(decay)(now);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    sm_mctx_t m = *c;
    if (SM_NEXT_FN(getmeta)(&m) && m.usable >= (size_t)(SM_OPT_MIN_CACHED) &&
        (!(c->flags & SM_F_SIZED) || c->size <= m.usable) && m.usable <= (size_t)(SM_OPT_MAX_BLOCK)) {
        if (SM_FN(keep)(c, m.usable))
            return;
    } else if (__atomic_load_n(&SM_FN(obj).blocks, __ATOMIC_RELAXED)) {
        SM_FN(tick)();
    }
    SM_NEXT_FN(free)(c);
}

SM_SLOWPATH bool SM_FN(is_cached)(const void *p)
{
    bool found = false;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS && !found; i++)
        found = SM_FN(slots)[i].ptr == p && SM_FN(slots)[i].state != SM_FN(s_empty);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return found;
}

/* A cached block is free, so nobody owns it: false, like any free block. Checked only for blocks
 * large enough to be cached and only while the cache holds something, so other lookups pay one load. */
SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    if (!SM_NEXT_FN(getmeta)(c))
        return false;
    if (c->usable >= (size_t)(SM_OPT_MIN_CACHED) && __atomic_load_n(&SM_FN(obj).blocks, __ATOMIC_RELAXED) &&
        SM_FN(is_cached)(c->ptr)) {
        c->usable = 0, c->owner = NULL;
        return false;
    }
    return true;
}

#if SM_OPT_GROW
/* Take the cached block that starts at `at` out of the cache if it holds at least `need` bytes. */
struct SM_FN(cs_adjacent) { char *at; size_t need, size; bool found; };
SM_INLINE void SM_FN(cs_adjacent)(void *arg)
{
    struct SM_FN(cs_adjacent) *a = (struct SM_FN(cs_adjacent) *)arg;
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++) {
        struct SM_FN(slot) *s = &SM_FN(slots)[i];
        if (s->ptr != a->at || (s->state != SM_FN(s_dirty) && s->state != SM_FN(s_purged)))
            continue;
        if (s->size >= a->need) {
            a->size = s->size;
            a->found = true;
            SM_FN(set_blocks_locked)(SM_FN(obj).blocks - 1);
            SM_FN(obj).bytes -= s->size;
            s->ptr = NULL, s->size = 0, s->state = SM_FN(s_empty);
        }
        return;
    }
}

/* A growth the next layer cannot make in place, because the pages after the block are mapped, can
 * still be made in place when those pages are a cached block: a buffer grown by realloc leaves its
 * previous copy, freed into this cache, right after the new one (the kernel places mappings
 * top-down), and the next growths take that copy's pages (joined, the rest cut off and kept)
 * instead of moving the buffer, and copying it, at every step. */
SM_SLOWPATH bool SM_FN(grow_into_cached)(sm_mctx_t *c, size_t n)
{
    sm_mctx_t m = sm_mctx_block(c->ptr, 0, 0);
    if (!__atomic_load_n(&SM_FN(obj).blocks, __ATOMIC_RELAXED) || !SM_NEXT_FN(getmeta)(&m) || n <= m.usable)
        return false;
    struct SM_FN(cs_adjacent) a = { (char *)c->ptr + m.usable, n - m.usable, 0, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_adjacent), &a);
    if (!a.found)
        return false;
    sm_mctx_t b = sm_mctx_block(c->ptr, m.usable, SM_F_SIZED);
    if (!SM_NEXT_FN(join)(&b, a.at)) { /* not joinable after all: it goes back to the cache */
        sm_mctx_t t = sm_mctx_block(a.at, a.size, SM_F_SIZED);
        if (!SM_FN(keep)(&t, a.size))
            SM_NEXT_FN(free)(&t);
        return false;
    }
    char *tail = (char *)SM_NEXT_FN(split)(&b, n);
    if (tail) {
        size_t rest = (size_t)((char *)c->ptr + m.usable + a.size - tail);
        sm_mctx_t t = sm_mctx_block(tail, rest, SM_F_SIZED);
        if (!(rest >= (size_t)(SM_OPT_MIN_CACHED) && SM_FN(keep)(&t, rest)))
            SM_NEXT_FN(free)(&t);
    }
    return true;
}
#endif

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    if (SM_NEXT_FN(resize)(c, n))
        return true;
#if SM_OPT_GROW
    return SM_FN(grow_into_cached)(c, n);
#else
    return false;
#endif
}

/* A live block moved by the next layer's remap (capability MAPPING): its pages move, nothing is
 * copied. The cache holds only free blocks, so it has nothing to follow. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(remap)(c, n); }

/* Live blocks belong to the layers above: their purges go to the layer that mapped them. */
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    if (r->how == SM_RELEASE_ALL)
        r->released += SM_FN(flush)();
    else if (SM_FN(due)(r->now_ms))
        r->released += SM_FN(decay)(r->now_ms);
    sm_release_due(r, __atomic_load_n(&SM_FN(obj).next_deadline, __ATOMIC_RELAXED));
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

/* Cached blocks are the next layer's, held here: dirty ones still backed, purged ones not. */
SM_INLINE void SM_FN(cs_stats)(void *arg)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    l->blocks = SM_FN(obj).blocks;
    l->held = SM_FN(obj).bytes;
    for (unsigned i = 0; i < SM_OPT_MAX_BLOCKS; i++)
        if (SM_FN(slots)[i].state == SM_FN(s_dirty))
            l->dirty += SM_FN(slots)[i].size;
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_stats), sm_stats_layer(s, SM_LAYER_NAME));
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

SM_INLINE void SM_FN(fork_prepare)(void)
{
    SM_SYNC_FN(fork_lock)(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    SM_SYNC_FN(fork_unlock)(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_parent)();
}
/* A block busy in another thread at fork stays busy in the child (never reused, never returned):
 * its memory is lost to the child, which is safe; that thread no longer exists there to finish. */
SM_INLINE void SM_FN(fork_child)(void)
{
    SM_SYNC_FN(fork_reinit)(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_child)();
}

#undef SM_OPT_MIN_CACHED
#undef SM_OPT_MAX_WASTE
#undef SM_OPT_DECAY_MS
#undef SM_OPT_PURGE_LAZY
#undef SM_OPT_MAX_BLOCKS
#undef SM_OPT_GROW
#undef SM_OPT_MAX_BYTES
#undef SM_OPT_MAX_BLOCK
#define SM_LAYER_OFFERS SM_CAP_MOVE
#include "../../core/layer_end.h"
