/* guard: an add-on layer that serves a random sample of small requests from a pool of pages
 * fenced by inaccessible ones, so that an overflow, an underflow or a use after free of a sampled
 * block faults at the bad access and is reported with the block and its call sites (the idea of
 * sampled guard pages, which production allocators use to find memory errors in the field for a
 * few percent of allocation time). Why it is built this way, its defaults, with the measurements:
 * docs/layers.md, `guard`.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required: one lock over the pool's slots, taken by
 * sampled requests only), err (required: double and invalid frees of pool blocks, and overwritten
 * fill bytes, found at free). Goes directly under the socket: it sees the program's requests.
 * Options:
 *   SM_OPT_SAMPLE_EVERY  one eligible request in this many, per thread, is served from the pool
 *                        (default 5000; 1: every request that fits). Exactly one in each run of
 *                        this many a thread makes, at a random place in the run. SUNMAO_CONF's
 *                        guard_sample overrides it at run time (0: no sampling; core/conf.h)
 *   SM_OPT_SLOTS         blocks the pool holds, live and freed (default 64)
 *   SM_OPT_MAX_SIZE      largest request sampled, in bytes (default 4096; each slot has this
 *                        rounded up to pages)
 * Properties: thread_safe when the sync policy and the next layer are; min_align of the next layer
 * (pool blocks are aligned to at least it); zeroed 0 (a reused slot holds old data: SM_F_ZERO is
 * honoured, and answered with SM_F_FRESH). Capabilities: needs none; offers HIT when the next layer
 * does (a thread cache: the socket keeps its inlined hit paths), and MOVE for the next layer's
 * blocks when it has it (a pool block is copied), nothing else. alloc_hit counts
 * the request and misses for the one to sample, which alloc_miss then serves from the pool (an
 * aligned request, whose hit is not tried, is counted there); free_hit misses for a pool pointer.
 * Static TLS: one 8-byte initial-exec word per instance, a thread's whole sampling state (its
 * countdown is the allocation's only per-thread access). So a drop-in library with this layer has
 * 8 bytes of static TLS more than one without (docs/architecture.md: why the project counts them),
 * still well within what glibc keeps for a library dlopen'ed late (tests/api/early_dlopen.c).
 * API beyond the contract: L_guard_owns(p) (p inside the pool), L_guard_sites(p, freed, pcs, n)
 * (the call sites recorded for the pool block at p), L_obj.served (blocks served from the pool).
 *
 * Invariants:
 * - The pool is one mapping, made on the first sampled request: a guard page, then per slot its
 *   data pages (MAX_SIZE rounded up) and guard pages up to a power-of-two stride (so a pointer's
 *   slot is a shift, not a division). Only a live block's pages are accessible; the rest faults.
 *   The guard pages are set apart (sm_plat_protect_apart): protecting a slot never splits or
 *   merges the kernel's mappings, and the pool takes 2 x SLOTS + 1 of them.
 * - A block ends as near its following guard page as its alignment (that of the request, at
 *   least 16 and min_align) allows; the bytes between its end and the guard page, and before it
 *   in its first page, hold a pattern checked at free (and resize).
 * - Unsampled requests cost a thread-local decrement (allocation) or one range check (free,
 *   getmeta, resize); they and every request when no slot is left go to the next layer unchanged.
 * - Each eligible request is counted once, by the hit or, when it was not tried, by the miss: a
 *   countdown below zero between the two marks the request to sample (exact 1-in-N either way).
 * - A slot is empty (never used), live, freeing (between the two sections of a free) or freed;
 *   never-used slots go first, then the freed ones, least recently freed first, so a freed block
 *   stays inaccessible as long as the pool allows. A free of a non-live block's start is a double
 *   free, of any other pool address an invalid free: reported once, then ignored.
 * - A SIGSEGV/SIGBUS inside the pool is reported in one line on stderr (kind, address, block,
 *   call sites of its allocation and free), then the process dies of it as it would have without
 *   the layer (platform: sm_plat_fault_hook). The handler takes no lock and allocates nothing.
 * Lock order: pool lock -> next layer's locks in the fork hooks only; elsewhere the lock is taken
 * for a few stores (sections via atomic_exec), never around a system call or the next layer.
 * @model: name=guard kind=addon flag secure slot sync slot err
 * @model: key sample_every int key slots int key max_size size
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/msg.h"
#include "../../core/secret.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "guard: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "guard: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "guard: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "guard: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif

#ifndef SM_OPT_SAMPLE_EVERY
#define SM_OPT_SAMPLE_EVERY 5000
#endif
#ifndef SM_OPT_SLOTS
#define SM_OPT_SLOTS 64
#endif
#ifndef SM_OPT_MAX_SIZE
#define SM_OPT_MAX_SIZE 4096
#endif
_Static_assert((SM_OPT_SAMPLE_EVERY) >= 1 && (SM_OPT_SAMPLE_EVERY) <= (1 << 30), "guard: SM_OPT_SAMPLE_EVERY must be 1..2^30");
_Static_assert((SM_OPT_SLOTS) >= 1 && (SM_OPT_SLOTS) <= 4096, "guard: SM_OPT_SLOTS must be 1..4096 (each slot is two of the kernel's mappings)");
_Static_assert((SM_OPT_MAX_SIZE) >= 1 && (SM_OPT_MAX_SIZE) <= (1 << 20), "guard: SM_OPT_MAX_SIZE must be 1..1 MiB");

enum {
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe) && SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
    SM_FN(frames) = 8, /* return addresses kept per call site */
    /* Slot states. */
    SM_FN(s_empty) = 0,
    SM_FN(s_live) = 1,
    SM_FN(s_freeing) = 2,
    SM_FN(s_freed) = 3,
};
#define SM_GUARD_NONE UINT32_MAX

struct SM_FN(slot) {
    char *ptr;     /* the block (live or freed), NULL if none yet */
    size_t size;   /* its size as requested (resize changes it) */
    uint32_t next; /* the next slot in the queue of freed ones */
    uint8_t state, used, nalloc, nfree;
    void *alloc_at[SM_FN(frames)], *free_at[SM_FN(frames)];
};

static struct {
    SM_SYNC_FN(t) lock;
    uintptr_t base;           /* the pool: [base, base + span), span 0 until it is mapped */
    size_t span, page, data;  /* data: bytes of a slot's data pages */
    unsigned shift;           /* log2 of a slot's stride */
    uint8_t key;              /* the fill pattern's */
    bool off;                 /* no pool here (no memory, no page protection): sampling stops */
    uint32_t fresh;           /* slots [fresh, SLOTS) were never used */
    uint32_t head, tail;      /* the queue of freed slots, least recently freed at head */
    unsigned long served;     /* blocks served from the pool (under the lock) */
    sm_plat_once_t once;
    struct SM_FN(slot) slots[SM_OPT_SLOTS];
} SM_FN(obj) = { .lock = SM_SYNC_INIT, .head = SM_GUARD_NONE, .tail = SM_GUARD_NONE, .once = SM_PLAT_ONCE_INIT };

/* The calling thread's sampling state, all of it in one 8-byte initial-exec word. skip: eligible
 * requests to pass before the next sampled one; 0 at a thread's start, so its first eligible
 * request takes the slow path, which starts the schedule (and the hit path misses on a thread not
 * set up). pos: the next sampled request's place in its run of SAMPLE_EVERY; ready: the schedule
 * has started; busy: the thread is inside the layer's slow path (the unwinder may allocate: that
 * request passes down). Initial-exec: in a shared library the default model calls __tls_get_addr
 * on every malloc, which cost more than all the rest of an unsampled request (docs/layers.md,
 * guard). One word, no generator state beside it (the place is a hash, see place()): a library
 * with any initial-exec access gets its whole TLS segment in static TLS when it is dlopen'ed, so a
 * default-model variable here would take static TLS all the same. */
static __thread struct { int32_t skip; unsigned pos : 30, ready : 1, busy : 1; } SM_FN(tls)
    __attribute__((tls_model("initial-exec")));
_Static_assert(sizeof SM_FN(tls) == 8, "guard: a thread's state is one 8-byte word of static TLS");

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* Set once (base, then span), read without the lock: relaxed atomics, plain loads on the hot path. */
SM_INLINE uintptr_t SM_FN(base)(void) { return __atomic_load_n(&SM_FN(obj).base, __ATOMIC_RELAXED); }
SM_INLINE size_t SM_FN(span)(void) { return __atomic_load_n(&SM_FN(obj).span, __ATOMIC_RELAXED); }

SM_INLINE bool SM_FN(guard_owns)(const void *p) { return (uintptr_t)p - SM_FN(base)() < SM_FN(span)(); }

/* ---- the pool's geometry ---- */

SM_INLINE char *SM_FN(data_of)(uint32_t i)
{
    return (char *)SM_FN(base)() + SM_FN(obj).page + ((size_t)i << SM_FN(obj).shift);
}

/* The slot whose data pages hold p, or SM_GUARD_NONE for a guard page or outside the pool (the
 * range check again: a racing first mapping may have let a wild pointer through guard_owns). */
SM_INLINE uint32_t SM_FN(slot_of)(const void *p)
{
    uintptr_t rel = (uintptr_t)p - SM_FN(base)();
    if (rel < SM_FN(obj).page || rel >= SM_FN(span)())
        return SM_GUARD_NONE;
    rel -= SM_FN(obj).page;
    if ((rel & (((uintptr_t)1 << SM_FN(obj).shift) - 1)) >= SM_FN(obj).data)
        return SM_GUARD_NONE;
    return (uint32_t)(rel >> SM_FN(obj).shift);
}

/* The fill pattern: one byte, the pool's key (secret-derived, never 0, the most common stray
 * write). A pattern that varied with the address would catch no more single-byte overwrites (one
 * in 256 matches either way) and need a byte-at-a-time loop: with one, a sampled malloc+free pair
 * took 16-20 us; with memset and word compares, 7-8 us (docs/layers.md). */
SM_INLINE void SM_FN(fill)(char *from, char *to) { __builtin_memset(from, SM_FN(obj).key, (size_t)(to - from)); }
SM_INLINE bool SM_FN(intact)(const char *from, const char *to)
{
    uint8_t key = SM_FN(obj).key;
    uint64_t want = 0x0101010101010101ull * key, diff = 0, w;
    for (; from < to && ((uintptr_t)from & 7); from++)
        diff |= (uint8_t)*from ^ key;
    for (; to - from >= 8; from += 8) {
        __builtin_memcpy(&w, from, 8);
        diff |= w ^ want;
    }
    for (; from < to; from++)
        diff |= (uint8_t)*from ^ key;
    return diff == 0;
}
/* The first byte of the block's first accessible page. */
SM_INLINE char *SM_FN(page_of)(const char *p)
{
    return (char *)sm_align_down((uintptr_t)p, SM_FN(obj).page);
}

SM_SLOWPATH bool SM_FN(on_fault)(void *addr);

/* Maps the pool, all of it inaccessible, and installs the fault report. */
SM_SLOWPATH void SM_FN(setup)(void)
{
    size_t page = sm_plat_page_size();
    size_t data = sm_align_up((size_t)(SM_OPT_MAX_SIZE), page);
    unsigned shift = sm_log2_ceil(data + page); /* at least one guard page after the data */
    size_t span = page + ((size_t)(SM_OPT_SLOTS) << shift);
    char *pool = NULL;
    if (sm_plat_protect(NULL, 0, false) == 0 && (pool = (char *)sm_plat_map(span)) != NULL &&
        sm_plat_protect(pool, span, false) != 0) {
        (void)sm_plat_unmap(pool, span);
        pool = NULL;
    }
    if (!pool) {
        __atomic_store_n(&SM_FN(obj).off, true, __ATOMIC_RELAXED);
        return;
    }
    /* The guard pages in mappings of their own: a slot's pages, protected and unprotected on each
     * sampled request, then never merge with them, which took the kernel's splits and merges of
     * the pool's mapping out of every sampled pair (docs/layers.md, guard). Failure: slower only. */
    (void)sm_plat_protect_apart(pool, page);
    for (uint32_t i = 0; i < (SM_OPT_SLOTS); i++)
        (void)sm_plat_protect_apart(pool + page + ((size_t)i << shift) + data, ((size_t)1 << shift) - data);
    SM_FN(obj).page = page;
    SM_FN(obj).data = data;
    SM_FN(obj).shift = shift;
    uint8_t key = (uint8_t)sm_mix64(sm_secret() ^ (uintptr_t)pool);
    SM_FN(obj).key = key ? key : 0xa5;
    __atomic_store_n(&SM_FN(obj).base, (uintptr_t)pool, __ATOMIC_RELAXED);
    (void)sm_plat_fault_hook(SM_FN(on_fault)); /* without it, faults still kill, unexplained */
    __atomic_store_n(&SM_FN(obj).span, span, __ATOMIC_RELEASE);
}

/* ---- allocation ---- */

/* The run length in force: SUNMAO_CONF's guard_sample, else the compiled one; 0: no sampling.
 * Read by the slow path only (the configuration is read before the first request). */
SM_INLINE uint32_t SM_FN(every)(void)
{
    int64_t v = sm_conf.guard_sample;
    return v == SM_CONF_DEFAULT ? (uint32_t)(SM_OPT_SAMPLE_EVERY) : (uint32_t)v;
}

/* A place in a run of `every`, uniform (multiply and shift: no division). A hash of the secret,
 * the thread, its previous place and the cycle counter rather than a generator: samples are rare,
 * and a generator's state would not fit the thread's word. */
SM_INLINE unsigned SM_FN(place)(uint32_t every)
{
    uint64_t x = sm_mix64(sm_secret() ^ (uintptr_t)&SM_FN(tls) ^ ((uint64_t)SM_FN(tls).pos << 32) ^ sm_plat_cycles());
    return (unsigned)(((x & 0xffffffffu) * (uint64_t)every) >> 32);
}

/* True if this eligible request is the sampled one of its run; sets the skip count to the next. */
SM_INLINE bool SM_FN(schedule)(void)
{
    uint32_t every = SM_FN(every)();
    if (every <= 1) { /* off (the countdown's whole range before the next look), or every request */
        SM_FN(tls).skip = every ? 0 : INT32_MAX;
        return every == 1;
    }
    if (sm_unlikely(!SM_FN(tls).ready)) { /* this request is place 0 of the thread's first run */
        unsigned first = SM_FN(place)(every);
        SM_FN(tls).ready = 1;
        SM_FN(tls).pos = first;
        if (first) {
            SM_FN(tls).skip = (int32_t)first - 1;
            return false;
        }
    }
    unsigned next = SM_FN(place)(every); /* what is left of this run, then the next run up to its place */
    int64_t skip = (int64_t)every - 1 - SM_FN(tls).pos + next; /* below 0 after a shorter run was set */
    SM_FN(tls).skip = (int32_t)(skip < 0 ? 0 : skip);
    SM_FN(tls).pos = next;
    return true;
}

struct SM_FN(cs_take) { size_t size, align; uint32_t slot; bool reused; char *ptr; };
SM_INLINE void SM_FN(cs_take)(void *arg)
{
    struct SM_FN(cs_take) *t = (struct SM_FN(cs_take) *)arg;
    uint32_t i = SM_FN(obj).fresh;
    if (i < (SM_OPT_SLOTS)) {
        SM_FN(obj).fresh = i + 1;
    } else if ((i = SM_FN(obj).head) != SM_GUARD_NONE) {
        SM_FN(obj).head = SM_FN(obj).slots[i].next;
        if (SM_FN(obj).head == SM_GUARD_NONE)
            SM_FN(obj).tail = SM_GUARD_NONE;
    } else {
        t->slot = SM_GUARD_NONE; /* the pool is used up */
        return;
    }
    struct SM_FN(slot) *s = &SM_FN(obj).slots[i];
    char *end = SM_FN(data_of)(i) + SM_FN(obj).data;
    t->slot = i;
    t->reused = s->used;
    t->ptr = (char *)sm_align_down((uintptr_t)(end - t->size), t->align);
    s->ptr = t->ptr;
    s->size = t->size;
    s->used = 1;
    s->nfree = 0;
    __atomic_store_n(&s->state, (uint8_t)SM_FN(s_live), __ATOMIC_RELAXED);
    SM_FN(obj).served++;
}

/* Puts slot i at the tail of the freed queue (least recently freed at the head). */
SM_INLINE void SM_FN(cs_queue)(void *arg)
{
    uint32_t i = *(uint32_t *)arg;
    SM_FN(obj).slots[i].next = SM_GUARD_NONE;
    if (SM_FN(obj).tail == SM_GUARD_NONE)
        SM_FN(obj).head = i;
    else
        SM_FN(obj).slots[SM_FN(obj).tail].next = i;
    SM_FN(obj).tail = i;
    __atomic_store_n(&SM_FN(obj).slots[i].state, (uint8_t)SM_FN(s_freed), __ATOMIC_RELAXED);
}

/* An eligible request that the countdown reached: serve it from the pool, or NULL to pass it down
 * (not its turn in the schedule, no slot left, an alignment above a page, no pool). */
SM_SLOWPATH void *SM_FN(sample)(sm_mctx_t *c)
{
    if (!SM_FN(schedule)() || SM_FN(tls).busy)
        return NULL;
    int saved = errno;
    sm_plat_once(&SM_FN(obj).once, SM_FN(setup));
    if (__atomic_load_n(&SM_FN(obj).off, __ATOMIC_RELAXED)) {
        SM_FN(tls).skip = INT32_MAX; /* this thread stops trying */
        errno = saved;
        return NULL;
    }
    size_t align = c->align > SM_MIN_ALIGN ? c->align : SM_MIN_ALIGN;
    if (align < (size_t)SM_FN(min_align))
        align = (size_t)SM_FN(min_align);
    if (align > SM_FN(obj).page) {
        errno = saved;
        return NULL;
    }
    struct SM_FN(cs_take) t = { c->size ? c->size : 1, align, SM_GUARD_NONE, false, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_take), &t);
    if (t.slot == SM_GUARD_NONE) {
        errno = saved;
        return NULL;
    }
    struct SM_FN(slot) *s = &SM_FN(obj).slots[t.slot];
    char *first = SM_FN(page_of)(t.ptr), *end = SM_FN(data_of)(t.slot) + SM_FN(obj).data;
    if (sm_plat_protect(first, (size_t)(end - first), true) != 0) {
        s->ptr = NULL;
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_queue), &t.slot);
        errno = saved;
        return NULL;
    }
    SM_FN(fill)(first, t.ptr);
    SM_FN(fill)(t.ptr + t.size, end);
    if (c->flags & SM_F_ZERO) { /* a never-used slot's pages are as the kernel gave them */
        if (t.reused)
            __builtin_memset(t.ptr, 0, t.size);
        c->flags |= SM_F_FRESH;
    }
    SM_FN(tls).busy = 1;
    s->nalloc = (uint8_t)sm_plat_backtrace(s->alloc_at, SM_FN(frames), 0);
    SM_FN(tls).busy = 0;
    errno = saved;
    return c->ptr = t.ptr;
}

/* The request counts (it fits the pool) and the countdown reached it. */
#define SM_GUARD_COUNT(size) ((size) <= (size_t)(SM_OPT_MAX_SIZE) && sm_unlikely(--SM_FN(tls).skip < 0))

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (SM_GUARD_COUNT(c->size)) {
        void *p = SM_FN(sample)(c);
        if (p)
            return p;
    }
    return SM_NEXT_FN(alloc)(c); /* the one pass-down call site */
}

/* ---- capability HIT, over a next layer that has it (else the defaults: always miss, then L_alloc
 * and L_free) ---- */

/* Counts the request, as L_alloc would; the one to sample misses, leaving the countdown below zero
 * for the miss to see. A fresh thread's countdown is 0: its first request misses, before create too. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT) || SM_GUARD_COUNT(size))
        return NULL;
    return SM_NEXT_FN(alloc_hit)(size);
}

/* After the hit missed: this layer's miss (countdown below zero: sample it) or the next layer's.
 * An aligned request's hit was not tried (core/capability.h): it is counted here. */
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT))
        return SM_FN(alloc)(c);
    bool counted = c->align <= SM_MIN_ALIGN;
    if (c->size <= (size_t)(SM_OPT_MAX_SIZE) &&
        sm_unlikely(counted ? SM_FN(tls).skip < 0 : --SM_FN(tls).skip < 0)) {
        void *p = SM_FN(sample)(c); /* resets the countdown, whatever it answers */
        if (p)
            return p;
        /* Not served here (not its turn after all, the pool used up, the unwinder's own request):
         * the next layer's hit was never asked, and its miss is only the rest of its L_alloc. */
        if (counted && (p = SM_NEXT_FN(alloc_hit)(c->size)) != NULL)
            return c->ptr = p;
    }
    return SM_NEXT_FN(alloc_miss)(c);
}

/* ---- free, getmeta, resize of pool addresses ---- */

/* The fill bytes around a live block: which side was overwritten (1 before, 2 after), 0 if none. */
SM_INLINE unsigned SM_FN(damage)(uint32_t i, const char *p, size_t size)
{
    const char *end = SM_FN(data_of)(i) + SM_FN(obj).data;
    return (SM_FN(intact)(SM_FN(page_of)(p), p) ? 0u : 1u) | (SM_FN(intact)(p + size, end) ? 0u : 2u);
}

SM_SLOWPATH void SM_FN(report_damage)(const void *p, unsigned damage)
{
    SM_ERR_FN(raise)(SM_ERR_CORRUPTION, SM_LAYER_NAME, p,
                     damage == 1 ? "bytes before the block in its page were overwritten (an underflow)"
                     : damage == 2 ? "bytes after the block, before the guard page, were overwritten (an overflow)"
                                   : "bytes before and after the block were overwritten");
}

struct SM_FN(cs_free) { uint32_t slot; const char *ptr; int verdict; size_t size; };
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    struct SM_FN(slot) *s = &SM_FN(obj).slots[f->slot];
    if (s->ptr != f->ptr || s->state == SM_FN(s_empty)) {
        f->verdict = SM_ERR_INVALID_FREE;
    } else if (s->state != SM_FN(s_live)) {
        f->verdict = SM_ERR_DOUBLE_FREE;
    } else {
        f->verdict = -1;
        f->size = s->size;
        __atomic_store_n(&s->state, (uint8_t)SM_FN(s_freeing), __ATOMIC_RELAXED);
    }
}

SM_SLOWPATH void SM_FN(free_pool)(sm_mctx_t *c)
{
    int saved = errno;
    struct SM_FN(cs_free) f = { SM_FN(slot_of)(c->ptr), (const char *)c->ptr, SM_ERR_INVALID_FREE, 0 };
    if (f.slot != SM_GUARD_NONE)
        SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_free), &f);
    if (f.verdict >= 0) {
        SM_ERR_FN(raise)((sm_err_kind_t)f.verdict, SM_LAYER_NAME, c->ptr,
                         f.verdict == SM_ERR_DOUBLE_FREE ? "guarded block freed twice"
                                                         : "not the start of a guarded block (ignored)");
        errno = saved;
        return;
    }
    struct SM_FN(slot) *s = &SM_FN(obj).slots[f.slot];
    unsigned damage = SM_FN(damage)(f.slot, f.ptr, f.size);
    SM_FN(tls).busy = 1;
    s->nfree = (uint8_t)sm_plat_backtrace(s->free_at, SM_FN(frames), 0);
    SM_FN(tls).busy = 0;
    char *first = SM_FN(page_of)(f.ptr), *end = SM_FN(data_of)(f.slot) + SM_FN(obj).data;
    (void)sm_plat_protect(first, (size_t)(end - first), false); /* on failure: only less detection */
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_queue), &f.slot);
    if (damage)
        SM_FN(report_damage)(c->ptr, damage);
    errno = saved;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (sm_unlikely(SM_FN(guard_owns)(c->ptr))) {
        SM_FN(free_pool)(c);
        return;
    }
    SM_NEXT_FN(free)(c);
}

/* A pool block misses (nothing read of its owner: the word is left alone); the rest is the next
 * layer's hit. */
SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT) || sm_unlikely(SM_FN(guard_owns)(p)))
        return false;
    return SM_NEXT_FN(free_hit)(p, size, flags, owner_word);
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT)) {
        SM_FN(free)(c);
        return;
    }
    if (sm_unlikely(SM_FN(guard_owns)(c->ptr))) {
        SM_FN(free_pool)(c);
        return;
    }
    SM_NEXT_FN(free_miss)(c);
}

/* The live block starting at p, or NULL; p is in the pool. For the block's owner only. */
SM_INLINE struct SM_FN(slot) *SM_FN(live)(const void *p)
{
    uint32_t i = SM_FN(slot_of)(p);
    if (i == SM_GUARD_NONE)
        return NULL;
    struct SM_FN(slot) *s = &SM_FN(obj).slots[i];
    return __atomic_load_n(&s->state, __ATOMIC_RELAXED) == SM_FN(s_live) && s->ptr == (const char *)p ? s : NULL;
}

SM_SLOWPATH bool SM_FN(getmeta_pool)(sm_mctx_t *c)
{
    struct SM_FN(slot) *s = SM_FN(live)(c->ptr);
    if (!s)
        return false;
    c->usable = s->size; /* the slack after it is not the program's: it is checked at free */
    c->owner = SM_LAYER_NAME;
    return true;
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    if (sm_unlikely(SM_FN(guard_owns)(c->ptr)))
        return SM_FN(getmeta_pool)(c);
    return SM_NEXT_FN(getmeta)(c);
}

/* In place up to the guard page; the fill bytes are checked, then laid after the new end. */
SM_SLOWPATH bool SM_FN(resize_pool)(sm_mctx_t *c, size_t n)
{
    struct SM_FN(slot) *s = SM_FN(live)(c->ptr);
    char *p = (char *)c->ptr;
    if (!s)
        return false;
    uint32_t i = SM_FN(slot_of)(p);
    char *end = SM_FN(data_of)(i) + SM_FN(obj).data;
    if (n == 0 || n > (size_t)(end - p))
        return false;
    unsigned damage = SM_FN(damage)(i, p, s->size);
    s->size = n;
    SM_FN(fill)(p + n, end);
    if (damage)
        SM_FN(report_damage)(p, damage);
    return true;
}

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    if (sm_unlikely(SM_FN(guard_owns)(c->ptr)))
        return SM_FN(resize_pool)(c, n);
    return SM_NEXT_FN(resize)(c, n);
}

/* A pool block stays in its slot (the socket copies it out); any other is the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return !SM_FN(guard_owns)(c->ptr) && SM_NEXT_FN(move)(c, n); }

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c)
{
    if (sm_unlikely(SM_FN(guard_owns)(c->ptr)))
        return false; /* a page or less, never worth it */
    return SM_NEXT_FN(purge)(c);
}

SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }
SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }
SM_FORK_HOOKS_ONE_LOCK(&SM_FN(obj).lock)

/* The call sites recorded for the pool block at p (its allocation's, or with `freed` its free's):
 * up to n return addresses into pcs, innermost first; how many. */
SM_SLOWPATH SM_UNUSED unsigned SM_FN(guard_sites)(const void *p, bool freed, void **pcs, unsigned n)
{
    if (!SM_FN(guard_owns)(p))
        return 0;
    uint32_t i = SM_FN(slot_of)(p);
    if (i == SM_GUARD_NONE || SM_FN(obj).slots[i].ptr != (const char *)p)
        return 0;
    struct SM_FN(slot) *s = &SM_FN(obj).slots[i];
    unsigned have = freed ? s->nfree : s->nalloc;
    unsigned k = 0;
    for (; k < have && k < n; k++)
        pcs[k] = freed ? s->free_at[k] : s->alloc_at[k];
    return k;
}

/* ---- the fault report (in the signal handler: no lock, no allocation, little stack) ---- */

SM_INLINE size_t SM_FN(put_sites)(char *line, size_t at, size_t cap, const char *what, void *const *pcs, unsigned n)
{
    at += sm_msg_format(line + at, cap - at, "; %s at", what);
    if (!n)
        at += sm_msg_format(line + at, cap - at, " (unknown)");
    for (unsigned k = 0; k < n && k < SM_FN(frames); k++)
        at += sm_msg_format(line + at, cap - at, " %p", pcs[k]);
    return at;
}

SM_SLOWPATH bool SM_FN(on_fault)(void *addr)
{
    uintptr_t a = (uintptr_t)addr, base = SM_FN(base)();
    if (a - base >= __atomic_load_n(&SM_FN(obj).span, __ATOMIC_ACQUIRE))
        return false;
    /* The slot the access was meant for: the one whose data holds it, else the nearer of the two
     * the guard pages separate (an overflow of the one below or an underflow of the one above),
     * else the one of them that ever held a block. */
    uint32_t i = SM_FN(slot_of)(addr);
    if (i == SM_GUARD_NONE) {
        uintptr_t rel = a - base, page = SM_FN(obj).page, stride = (uintptr_t)1 << SM_FN(obj).shift;
        uint32_t below = rel < page ? SM_GUARD_NONE : (uint32_t)((rel - page) >> SM_FN(obj).shift);
        uint32_t above = below == SM_GUARD_NONE ? 0 : below + 1 < (SM_OPT_SLOTS) ? below + 1 : SM_GUARD_NONE;
        bool near_above = below == SM_GUARD_NONE ||
                          ((rel - page) & (stride - 1)) - SM_FN(obj).data >= (stride - SM_FN(obj).data) / 2;
        i = near_above && above != SM_GUARD_NONE ? above : below;
        uint32_t other = i == above ? below : above;
        if (other != SM_GUARD_NONE && !SM_FN(obj).slots[i].used && SM_FN(obj).slots[other].used)
            i = other;
    }
    const struct SM_FN(slot) *s = &SM_FN(obj).slots[i];
    uint8_t state = __atomic_load_n(&s->state, __ATOMIC_RELAXED);
    const char *p = s->ptr;
    size_t size = s->size;
    char line[640];
    size_t at, cap = sizeof line;
    if (!p || state == SM_FN(s_empty)) {
        at = sm_msg_format(line, cap, "sunmao: guard %s: invalid access at %p, in the guarded pool outside any block\n",
                           SM_LAYER_NAME, addr);
        sm_plat_write_stderr(line, at);
        return true;
    }
    bool freed = state != SM_FN(s_live);
    const char *kind, *where;
    size_t dist;
    if ((const char *)addr >= p + size)
        kind = "heap buffer overflow", where = "after the end of", dist = (size_t)((const char *)addr - (p + size));
    else if ((const char *)addr < p)
        kind = "heap buffer underflow", where = "before", dist = (size_t)(p - (const char *)addr);
    else
        kind = freed ? "use after free" : "invalid access", where = "into", dist = (size_t)((const char *)addr - p);
    at = sm_msg_format(line, cap, "sunmao: guard %s: %s at %p, %zu bytes %s block %p (%zu bytes%s)", SM_LAYER_NAME,
                       kind, addr, dist, where, (const void *)p, size, freed ? ", freed" : "");
    at = SM_FN(put_sites)(line, at, cap, "allocated", s->alloc_at, s->nalloc);
    if (freed)
        at = SM_FN(put_sites)(line, at, cap, "freed", s->free_at, s->nfree);
    if (at + 1 < cap)
        line[at++] = '\n';
    else
        line[cap - 2] = '\n', at = cap - 1;
    sm_plat_write_stderr(line, at);
    return true;
}

/* HIT's functions are defined above (forwarding the next layer's, or missing without it); the
 * instance offers HIT and MOVE only where its next layer does, and no other capability. */
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAPS(SM_NEXT) & (SM_CAP_HIT | SM_CAP_MOVE))

/* Pool blocks are this layer's own (its mapping, not the next layer's), counted under the pool's
 * lock; every other block passes through unchanged and is counted where it lives, so the hit
 * paths count nothing. */
SM_INLINE void SM_FN(cs_stats)(void *arg)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    for (uint32_t i = 0; i < SM_FN(obj).fresh && i < (SM_OPT_SLOTS); i++) {
        if (SM_FN(obj).slots[i].state == SM_FN(s_live))
            l->in_use += SM_FN(obj).slots[i].size;
        l->resident += SM_FN(obj).data; /* a used slot's data pages stay backed */
    }
    l->mapped = SM_FN(span)();
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_stats), sm_stats_layer(s, SM_LAYER_NAME));
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

#undef SM_GUARD_COUNT
#undef SM_GUARD_NONE
#undef SM_OPT_SAMPLE_EVERY
#undef SM_OPT_SLOTS
#undef SM_OPT_MAX_SIZE

#include "../../core/layer_end.h"
