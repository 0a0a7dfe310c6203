/* prof: heap profiling and leak reports, an add-on layer for the top of a composition (jemalloc's
 * prof.* options and dump files; docs/operations.md, Heap profiles and leaks).
 *
 * It samples allocations at a mean of one per 2^lg_prof_sample bytes, records the stack of each
 * sampled one, and writes profiles that jeprof, google-pprof and Go pprof read (prof/dump.h): on
 * demand (prof.dump), every 2^lg_prof_interval bytes, on new highs of sampled live bytes
 * (prof_gdump), at exit (prof_final), and with a leak summary at exit (prof_leak). All of it reads
 * sm_conf (core/conf.h) in create; with prof:false the layer is one test of a byte on each hit
 * path.
 *
 * Parameters: SM_LAYER, SM_NEXT (must offer HIT: it sits on a thread cache), SM_SYNC (the lock of
 * the records, taken on samples, dumps and frees of sampled blocks only), SM_ERR (bad frees of
 * sampled blocks).
 * Options:
 *   SM_OPT_LG_RANGE  log2 of the address space reserved for sampled blocks, each in a slot of its
 *                    own (default 36: 64 GiB, PROT_NONE until used); a sample that does not fit is
 *                    served unsampled
 *   SM_OPT_DEPTH     most frames kept per sampled stack, the innermost after the allocator's own
 *                    frames are dropped (default 64); deeper stacks are cut
 * Offers HIT (its own, over the next layer's) and nothing else. Properties: the next layer's;
 * thread-safe with its lock.
 *
 * The hit paths:
 *   malloc  if counting: left -= size, and if (left < 0) miss; then the next layer's hit.
 *           (counting: set in create when profiling is on; left: the thread's bytes to its next
 *           sample, initial-exec TLS)
 *   free    if counting and p is in the sampled range: miss; else the next layer's hit.
 * A miss with left < 0 is a sample: the block gets a slot of its own in the sampled range
 * (prof/slots.h: page-rounded, no header, so free, getmeta, resize and aligned requests need no
 * lookup beyond its address) and its stack a record (prof/stacks.h). A thread's first allocation
 * misses too (left starts at 0) and draws its first countdown (prof/sample.h); so does one made
 * while this thread is sampling (the unwinder's first use may allocate): it is served unsampled.
 *
 * The stack: libgcc's unwinder (sm_plat_backtrace), then every frame inside the shared object that
 * holds this code is dropped, whatever the compiler inlined: the first address is in malloc's
 * caller. Linked statically (the code is in the program itself) nothing is dropped; the readers then
 * show the socket's own frames (sm_socket_alloc_miss) innermost. Fork: the child keeps the records
 * (its copy of every sampled block is live in it too), under a re-created lock, and names its files
 * with its own pid. prof.reset forgets every count (a new epoch: blocks sampled before it are freed
 * without touching the new counts). Nothing is kept per thread but the TLS scalars.
 *
 * @model: name=prof kind=addon slot sync slot err key lg_range int key depth int
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sync/mutex.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/addon/thread_cache.h> SM_LAYER=p SM_NEXT=t SM_SYNC=mutex SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/prof_hooks.h"
#include "../../core/secret.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "prof: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "prof: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "prof: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "prof: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_LG_RANGE
#define SM_OPT_LG_RANGE 36
#endif
#ifndef SM_OPT_DEPTH
#define SM_OPT_DEPTH 64
#endif
SM_REQUIRE_CAP(HIT, "prof samples on its next layer's hit path");

enum {
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe) && SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
};

/* The thread's state: the countdown first (the hit path's one load and store). */
static __thread struct {
    int64_t left;
    uint64_t rng;
    unsigned char armed, busy;
} SM_FN(tls) __attribute__((tls_model("initial-exec")));

/* The sampled range's start. Until it is reserved, the top 2^SM_OPT_LG_RANGE bytes of the address
 * space (the kernel's, never a user pointer), so the free test needs no "reserved yet?" branch. */
static uintptr_t SM_FN(base) = (uintptr_t)0 - ((uintptr_t)1 << SM_OPT_LG_RANGE);

/* Whether the hit paths do any of this layer's work: set once, in create, when profiling is on
 * (no sampled block can exist before). Off, malloc's hit path reads this byte instead of storing
 * the countdown, and free's instead of testing the range: 6 instructions fewer a pair. */
static bool SM_FN(counting);

SM_HOT bool SM_FN(in_range)(const void *p) { return (((uintptr_t)p - SM_FN(base)) >> SM_OPT_LG_RANGE) == 0; }

struct SM_FN(slot);
struct SM_FN(rec);
static struct {
    SM_SYNC_FN(t) lock;
    bool enabled, active, gdump, failed, module_known, module_ok;
    unsigned lg_sample, format;
    int64_t lg_interval;
    unsigned lg_page, epoch;
    struct SM_FN(slot) *table;           /* slots.h */
    uintptr_t front, committed, free_head[40];
    struct SM_FN(rec) **buckets, *all;   /* stacks.h */
    char *arena;
    size_t arena_left, nrecs;
    uint64_t live_b, interval_acc, gdump_mark, seq, kseq[3]; /* dump.h */
    size_t slot_usable, slot_dirty, meta_bytes; /* statistics: live slots (getmeta's sizes), kept free slots */
    uint64_t last_give_ms;               /* the last sampled free: kept slots decay from it */
    uintptr_t mod_lo, mod_hi;
    char prefix[256], last_dump[320];
} SM_FN(obj) = { .lock = SM_SYNC_INIT };

#define SM_PROF_PARTS 1
#include "prof/sample.h"
#include "prof/slots.h"
#include "prof/stacks.h"
#include "prof/dump.h"
#include "prof/leak.h"
#undef SM_PROF_PARTS

/* The stack of the allocation being sampled, the allocator's own frames left out; how many. */
static __attribute__((noinline)) unsigned SM_FN(stack)(void **pcs)
{
    void *raw[SM_OPT_DEPTH + 24];
    if (!__atomic_load_n(&SM_FN(obj).module_known, __ATOMIC_ACQUIRE)) {
        uintptr_t lo = 0, hi = 0;
        bool ok = sm_plat_code_module((const void *)(uintptr_t)SM_FN(stack), &lo, &hi);
        SM_FN(obj).mod_lo = lo, SM_FN(obj).mod_hi = hi, SM_FN(obj).module_ok = ok; /* racers agree */
        __atomic_store_n(&SM_FN(obj).module_known, true, __ATOMIC_RELEASE);
    }
    unsigned n = sm_plat_backtrace(raw, SM_OPT_DEPTH + 24, 0), i = 0;
    if (SM_FN(obj).module_ok)
        while (i < n && (uintptr_t)raw[i] >= SM_FN(obj).mod_lo && (uintptr_t)raw[i] < SM_FN(obj).mod_hi)
            i++;
    if (i == n) /* all ours (or the unwinder stopped): keep what there is rather than nothing */
        i = 0;
    unsigned k = 0;
    for (; i < n && k < SM_OPT_DEPTH; i++)
        pcs[k++] = raw[i];
    return k;
}

/* Under the lock, after a sample: the automatic dumps it makes due. */
SM_INLINE void SM_FN(auto_dumps)(void)
{
    if (!SM_FN(obj).prefix[0])
        return;
    if (SM_FN(obj).lg_interval >= 0) {
        SM_FN(obj).interval_acc += (uint64_t)1 << SM_FN(obj).lg_sample; /* a sample stands for R bytes */
        if (SM_FN(obj).interval_acc >= (uint64_t)1 << SM_FN(obj).lg_interval) {
            SM_FN(obj).interval_acc = 0;
            (void)SM_FN(dump_locked)(NULL, 'i');
        }
    }
    /* A new high of sampled live bytes, at most one dump per doubling: a growing heap would
     * otherwise write a file per sample. */
    if (SM_FN(obj).gdump && SM_FN(obj).live_b > SM_FN(obj).gdump_mark) {
        SM_FN(obj).gdump_mark = SM_FN(obj).live_b * 2;
        (void)SM_FN(dump_locked)(NULL, 'u');
    }
}

/* A miss with the countdown run out: arm a fresh thread, or sample this request (NULL: not
 * sampled, the next layer serves it). */
static __attribute__((noinline, cold)) void *SM_FN(sample)(sm_mctx_t *c)
{
    if (SM_FN(tls).busy)
        return NULL; /* an allocation made while sampling: the outer sample redraws the countdown */
    if (!SM_FN(obj).enabled) {
        SM_FN(tls).left = INT64_MAX;
        return NULL;
    }
    unsigned lg = __atomic_load_n(&SM_FN(obj).lg_sample, __ATOMIC_RELAXED);
    SM_FN(tls).left = SM_FN(draw)(lg);
    if (!SM_FN(tls).armed) { /* the thread's first request: its first countdown, no sample */
        SM_FN(tls).armed = 1;
        return NULL;
    }
    if (!__atomic_load_n(&SM_FN(obj).active, __ATOMIC_RELAXED))
        return NULL;
    SM_FN(tls).busy = 1;
    void *pcs[SM_OPT_DEPTH];
    unsigned n = SM_FN(stack)(pcs);
    void *p = NULL;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    struct SM_FN(rec) *r = SM_FN(rec_find)(pcs, n);
    if (r)
        p = SM_FN(slot_take)(c->size, c->align, r);
    if (p) {
        r->live_n++, r->live_b += c->size, r->total_n++, r->total_b += c->size;
        SM_FN(obj).live_b += c->size;
        SM_FN(auto_dumps)();
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    SM_FN(tls).busy = 0;
    if (p) /* thread.allocated (core/stats.h): the thread cache below never sees this block */
        sm_stats_thread_bytes[0] += sm_align_up(c->size, (size_t)1 << SM_FN(obj).lg_page);
    return p;
}

/* A sampled block's free (p in the range). */
static __attribute__((noinline)) void SM_FN(sample_free)(void *p)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    struct SM_FN(slot) *s = SM_FN(slot_live)(p);
    if (s) {
        uint64_t size = s->word >> 16;
        sm_stats_thread_bytes[1] += sm_align_up((size_t)size, (size_t)1 << SM_FN(obj).lg_page);
        if (((s->word >> 8) & 0xff) == (SM_FN(obj).epoch & 0xff)) {
            s->rec->live_n--, s->rec->live_b -= size;
            SM_FN(obj).live_b -= size;
        }
        SM_FN(slot_give)(s, (uintptr_t)p);
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (!s) /* inside the range but no live block starts here: freed already, or an interior pointer */
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, SM_LAYER_NAME, p, "not a live sampled block");
}

/* ---- The hit paths (see the header comment) ---- */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (sm_unlikely(SM_FN(counting))) {
        int64_t left = (int64_t)((uint64_t)SM_FN(tls).left - size);
        SM_FN(tls).left = left;
        if (sm_unlikely(left < 0))
            return NULL;
    }
    return SM_NEXT_FN(alloc_hit)(size);
}

SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (sm_unlikely(SM_FN(counting)) && SM_FN(in_range)(p))
        return false;
    return SM_NEXT_FN(free_hit)(p, size, flags, owner_word);
}

/* An aligned request: the next layer's aligned hit while profiling is off; on, it misses, and the
 * miss counts it down. */
SM_HOT void *SM_FN(aligned_hit)(size_t size, size_t align)
{
    if (sm_unlikely(SM_FN(counting)))
        return NULL;
    return SM_NEXT_FN(aligned_hit)(size, align);
}

/* A sampled block's size is its slot's (getmeta, below); any other block's, the next layer's. */
SM_HOT size_t SM_FN(usable_hit)(const void *p)
{
    if (sm_unlikely(SM_FN(in_range)(p)))
        return 0;
    return SM_NEXT_FN(usable_hit)(p);
}

/* The misses. An aligned request's hit was not tried, or missed (aligned_hit): it counts down here. */
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (c->align > SM_MIN_ALIGN)
        SM_FN(tls).left = (int64_t)((uint64_t)SM_FN(tls).left - c->size);
    if (sm_unlikely(SM_FN(tls).left < 0)) {
        void *p = SM_FN(sample)(c);
        if (p)
            return c->ptr = p;
    }
    return SM_NEXT_FN(alloc_miss)(c);
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    if (sm_unlikely(SM_FN(in_range)(c->ptr))) {
        SM_FN(sample_free)(c->ptr);
        return;
    }
    SM_NEXT_FN(free_miss)(c);
}

SM_ALLOC_FREE_BY_HIT()

/* A sampled block's usable size is its size rounded up to pages (what it may write: the slot's
 * pages are committed); the rest of its slot is room to grow in place. */
SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    if (!SM_FN(in_range)(c->ptr))
        return SM_NEXT_FN(getmeta)(c);
    struct SM_FN(slot) *s = SM_FN(slot_live)(c->ptr);
    if (!s)
        return false;
    c->usable = sm_align_up((size_t)(s->word >> 16), (size_t)1 << SM_FN(obj).lg_page);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* A sample is recorded by its slot's address: it stays; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return !SM_FN(in_range)(c->ptr) && SM_NEXT_FN(move)(c, n); }

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    if (!SM_FN(in_range)(c->ptr))
        return SM_NEXT_FN(resize)(c, n);
    bool ok = false;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    struct SM_FN(slot) *s = SM_FN(slot_live)(c->ptr);
    if (s && n && n <= SM_FN(slot_bytes)((unsigned)(s->word >> 1) & 0x7f)) {
        uint64_t old = s->word >> 16;
        if (((s->word >> 8) & 0xff) == (SM_FN(obj).epoch & 0xff)) {
            s->rec->live_b += n - old, s->rec->total_b += n > old ? n - old : 0;
            SM_FN(obj).live_b += n - old;
        }
        size_t page = (size_t)1 << SM_FN(obj).lg_page;
        SM_FN(obj).slot_usable += sm_align_up(n, page) - sm_align_up((size_t)old, page);
        s->word = (s->word & 0xffff) | (uint64_t)n << 16;
        ok = true;
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return ok;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c)
{
    if (!SM_FN(in_range)(c->ptr))
        return SM_NEXT_FN(purge)(c);
    return sm_plat_purge(c->ptr, c->size, false) == 0;
}
/* The free slots kept with their pages give them back: all of them on malloc_trim and
 * arena.<i>.purge, or once no sampled block was freed for the decay time (prof/slots.h). */
SM_INLINE void SM_FN(release)(sm_release_t *r)
{
    if (__atomic_load_n(&SM_FN(obj).slot_dirty, __ATOMIC_RELAXED)) {
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        uint64_t due = SM_FN(obj).last_give_ms + sm_conf_decay_ms(SM_PROF_DECAY_MS);
        if (r->how == SM_RELEASE_ALL || r->now_ms >= due)
            r->released += SM_FN(slots_purge)();
        else
            sm_release_due(r, due);
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    SM_NEXT_FN(release)(r);
}

/* Statistics (core/stats.h): sampled blocks come from this layer's own range, not from below, so
 * their usable sizes are in_use here and nothing is held from the next layer. */
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    l->in_use = SM_FN(obj).slot_usable;
    l->dirty = SM_FN(obj).slot_dirty;
    l->mapped = l->resident = (size_t)SM_FN(obj).committed;
    l->metadata = SM_FN(obj).meta_bytes;
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1
SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }
SM_FORK_HOOKS_ONE_LOCK(&SM_FN(obj).lock)

/* ---- prof.* through sunmao_mallctl (core/prof_hooks.h) ---- */
static int SM_FN(hook_dump)(const char *path)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    int rc = SM_FN(dump_locked)(path, 'm');
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return rc;
}
static bool SM_FN(hook_active)(void) { return __atomic_load_n(&SM_FN(obj).active, __ATOMIC_RELAXED); }
static int SM_FN(hook_set_active)(bool on)
{
    if (!SM_FN(obj).enabled)
        return ENOENT;
    __atomic_store_n(&SM_FN(obj).active, on, __ATOMIC_RELAXED);
    return 0;
}
static bool SM_FN(hook_gdump)(void) { return __atomic_load_n(&SM_FN(obj).gdump, __ATOMIC_RELAXED); }
static void SM_FN(hook_set_gdump)(bool on) { __atomic_store_n(&SM_FN(obj).gdump, on, __ATOMIC_RELAXED); }
static int SM_FN(hook_reset)(int64_t lg)
{
    if (lg != -1 && (lg < 0 || lg > 62))
        return EINVAL;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (struct SM_FN(rec) *r = SM_FN(obj).all; r; r = r->next_all)
        r->live_n = r->live_b = r->total_n = r->total_b = 0;
    SM_FN(obj).live_b = SM_FN(obj).interval_acc = SM_FN(obj).gdump_mark = 0;
    SM_FN(obj).epoch++;
    if (lg != -1)
        __atomic_store_n(&SM_FN(obj).lg_sample, (unsigned)lg, __ATOMIC_RELAXED);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return 0;
}
static uint64_t SM_FN(hook_interval)(void)
{
    return SM_FN(obj).lg_interval >= 0 ? (uint64_t)1 << SM_FN(obj).lg_interval : 0;
}
static const sm_prof_hooks_t SM_FN(hooks) = {
    SM_FN(hook_dump), SM_FN(hook_active), SM_FN(hook_set_active), SM_FN(hook_gdump),
    SM_FN(hook_set_gdump), SM_FN(hook_reset), SM_FN(hook_interval),
};

/* At exit: the final profile (prof_final, or prof_leak: the profile of what leaked), then the leak
 * summary (prof_leak). prof_leak alone thus writes the .f.heap file too, as the summary's detail. */
static void SM_FN(at_exit)(void)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    const char *file = NULL;
    if (SM_FN(obj).prefix[0] && SM_FN(dump_locked)(NULL, 'f') == 0)
        file = SM_FN(obj).last_dump;
    if (sm_conf.prof_leak)
        SM_FN(leak_report)(file);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
}

SM_INLINE int SM_FN(create)(void)
{
    if (SM_NEXT_FN(create)() != 0)
        return -1;
    if (!sm_conf.prof)
        return 0;
    SM_FN(obj).lg_sample = sm_conf.lg_prof_sample >= 0 && sm_conf.lg_prof_sample <= 62 ? (unsigned)sm_conf.lg_prof_sample : 19;
    SM_FN(obj).lg_interval = sm_conf.lg_prof_interval <= 62 ? sm_conf.lg_prof_interval : -1;
    SM_FN(obj).format = sm_conf.prof_format;
    SM_FN(obj).active = sm_conf.prof_active;
    SM_FN(obj).gdump = sm_conf.prof_gdump;
    size_t n = strnlen(sm_conf.prof_prefix, sizeof SM_FN(obj).prefix - 1);
    memcpy(SM_FN(obj).prefix, sm_conf.prof_prefix, n);
    SM_FN(obj).prefix[n] = '\0';
    __atomic_store_n(&SM_FN(obj).enabled, true, __ATOMIC_RELEASE);
    __atomic_store_n(&SM_FN(counting), true, __ATOMIC_RELAXED);
    sm_prof_hooks = &SM_FN(hooks);
    if (sm_conf.prof_final || sm_conf.prof_leak)
        (void)sm_plat_at_exit(SM_FN(at_exit));
    return 0;
}

/* HIT only: the batch, owner and mapping interfaces of the next layer know nothing of sampled
 * blocks, so none is offered above this layer (a socket needs only HIT). */
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_ALIGNED_HIT 1
#define SM_LAYER_USABLE_HIT 1

#undef SM_OPT_LG_RANGE
#undef SM_OPT_DEPTH
#include "../../core/layer_end.h"
