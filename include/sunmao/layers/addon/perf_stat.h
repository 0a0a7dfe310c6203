/* perf_stat: an add-on layer that measures the time the requests passing it spend below it (the
 * Mortise paper's Table 2 `perf_stat`: the mean request time of the layers between it and the OS):
 * per operation (alloc, free), the number of calls, their total and their largest time, per thread,
 * merged on read. It changes nothing it passes on, so it can sit above any layer.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: none.
 * Options:
 *   SM_OPT_PRINT_AT_EXIT  1: print the calls, mean and max of each operation on stderr at normal
 *                         exit (default 0)
 * Properties, capabilities: the next layer's (every capability is forwarded; offers what it offers).
 *
 * What is timed: every call of the next layer's alloc, alloc_miss, alloc_batch (an alloc call), free,
 * free_miss and free_batch (a free call), and every hit (alloc_hit, free_hit) that the next layer
 * took; a hit that misses is not a call (its few cycles are lost; the miss that follows is timed).
 * A batch is one call, however many objects it moves: the time a cache above waits for its refill.
 * getmeta, resize, purge, split, remap and release are not timed. Time is the cycle counter
 * (sm_plat_cycles: the TSC on x86, which a hypervisor may make coarse), converted to nanoseconds
 * on reading with the rate measured between create and the reading against CLOCK_MONOTONIC; a
 * measurement includes the two counter reads (some 20 cycles on x86).
 * Per thread: one initial-exec TLS block (calls, total, max per operation: 48 bytes and the
 * registry links) written with plain adds and stores (relaxed loads and stores: no locked
 * instruction on a request path). A thread's first call attaches it to the lifecycle service
 * (platform/lifecycle.h) and links its block into the layer's registry, under the registry lock:
 * the only times a request takes it. At thread exit the block is added to the process total and
 * unlinked, under the lock; a thread that could not attach, or one that calls again after its exit
 * (a later destructor), adds straight into the total (relaxed atomic adds, a compare-and-swap loop
 * for the max), so no call is lost. A fork child keeps only the forking thread's block linked.
 * Reading (L_perf_read, L_stats, the exit line): under the registry lock, the total plus every
 * linked block, read with relaxed loads.
 * Statistics: the layer's entry (core/stats.h) carries the call counts as nmalloc/nfree; the entry
 * has no field for a latency, so the times are read with L_perf_read or the exit report. (What
 * core/stats.h would need: per layer, `uint64_t ncycles[2], maxcycles[2]` beside nmalloc/nfree,
 * and the rate `ns_per_cycle` once in sm_stats_t.)
 * API beyond the contract: L_perf_read(struct L_perf *out): calls[op], cycles[op] (their sum),
 * max_cycles[op], mean_cycles[op], and mean_ns[op], max_ns[op] at the measured rate (the cycle
 * figures when no rate is known yet); op 0 alloc, 1 free. L_perf_format(buf, n) the report's text;
 * L_perf_print() writes it to stderr (no allocation).
 * @model: name=perf_stat kind=addon key print_at_exit bool
 * @check: SM_LAYER=t
 * @check-next: fake */
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "perf_stat: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "perf_stat: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_OPT_PRINT_AT_EXIT
#define SM_OPT_PRINT_AT_EXIT 0
#endif

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = SM_PROP(SM_NEXT, zeroed),
};

struct SM_FN(times) { uint64_t calls[2], cycles[2], max[2]; };

/* A thread's block: its times, its registry links, its state (0 new, 1 linked, 2 retired). */
struct SM_FN(tls_t) {
    struct SM_FN(times) m;
    struct SM_FN(tls_t) *next, *prev;
    unsigned state;
};
static __thread struct SM_FN(tls_t) SM_FN(tls) __attribute__((tls_model("initial-exec")));

static struct {
    sm_plat_lock_t lock;          /* the registry: taken at a thread's first call and exit */
    struct SM_FN(tls_t) *head;    /* linked blocks (the lock) */
    struct SM_FN(times) total;    /* exited and retired threads' (relaxed atomics) */
    uint64_t start_cycles, start_ns;
    sm_plat_once_t once;
} SM_FN(obj) = { SM_PLAT_LOCK_INIT, NULL, { { 0, 0 }, { 0, 0 }, { 0, 0 } }, 0, 0, SM_PLAT_ONCE_INIT };

/* What L_perf_read gives: op 0 alloc, 1 free. */
struct SM_FN(perf) {
    uint64_t calls[2], cycles[2], max_cycles[2], mean_cycles[2];
    uint64_t mean_ns[2], max_ns[2];
    bool rate_known; /* false: the _ns figures are cycles (no time has passed since create) */
};

SM_INLINE void SM_FN(thread_exit)(void);
SM_SLOWPATH SM_UNUSED void SM_FN(perf_print)(void);
SM_SLOWPATH void SM_FN(print_at_exit)(void) { SM_FN(perf_print)(); }

SM_SLOWPATH void SM_FN(start)(void)
{
    SM_FN(obj).start_cycles = sm_plat_cycles();
    SM_FN(obj).start_ns = sm_plat_now_ns();
    if (SM_OPT_PRINT_AT_EXIT)
        (void)sm_plat_at_exit(SM_FN(print_at_exit));
}

SM_INLINE int SM_FN(create)(void)
{
    sm_plat_once(&SM_FN(obj).once, SM_FN(start));
    return SM_NEXT_FN(create)();
}

SM_INLINE void SM_FN(atomic_max)(uint64_t *w, uint64_t v)
{
    uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(w, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The calling thread's first call: link its block, or retire it when no exit hook is left. */
SM_SLOWPATH bool SM_FN(enter)(struct SM_FN(tls_t) *t)
{
    if (t->state != 0)
        return false;
    if (!sm_thread_attach(SM_FN(thread_exit))) {
        t->state = 2;
        return false;
    }
    sm_plat_lock(&SM_FN(obj).lock);
    t->prev = NULL;
    t->next = SM_FN(obj).head;
    if (t->next)
        t->next->prev = t;
    SM_FN(obj).head = t;
    t->state = 1;
    sm_plat_unlock(&SM_FN(obj).lock);
    return true;
}

SM_SLOWPATH void SM_FN(record_total)(unsigned op, uint64_t cycles)
{
    __atomic_add_fetch(&SM_FN(obj).total.calls[op], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&SM_FN(obj).total.cycles[op], cycles, __ATOMIC_RELAXED);
    SM_FN(atomic_max)(&SM_FN(obj).total.max[op], cycles);
}

/* Only this thread writes its words; readers load them racily, hence atomic, but no RMW. */
SM_INLINE void SM_FN(record)(unsigned op, uint64_t cycles)
{
    struct SM_FN(tls_t) *t = &SM_FN(tls);
    if (sm_unlikely(t->state != 1) && !SM_FN(enter)(t)) {
        SM_FN(record_total)(op, cycles);
        return;
    }
    struct SM_FN(times) *m = &t->m;
    __atomic_store_n(&m->calls[op], __atomic_load_n(&m->calls[op], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&m->cycles[op], __atomic_load_n(&m->cycles[op], __ATOMIC_RELAXED) + cycles, __ATOMIC_RELAXED);
    if (cycles > __atomic_load_n(&m->max[op], __ATOMIC_RELAXED))
        __atomic_store_n(&m->max[op], cycles, __ATOMIC_RELAXED);
}

/* Adds t's times to the total and unlinks t (the registry lock held). */
SM_SLOWPATH void SM_FN(fold_locked)(struct SM_FN(tls_t) *t)
{
    for (unsigned op = 0; op < 2; op++) {
        __atomic_add_fetch(&SM_FN(obj).total.calls[op], __atomic_load_n(&t->m.calls[op], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
        __atomic_add_fetch(&SM_FN(obj).total.cycles[op], __atomic_load_n(&t->m.cycles[op], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
        SM_FN(atomic_max)(&SM_FN(obj).total.max[op], __atomic_load_n(&t->m.max[op], __ATOMIC_RELAXED));
        t->m.calls[op] = t->m.cycles[op] = t->m.max[op] = 0;
    }
    if (t->prev)
        t->prev->next = t->next;
    else
        SM_FN(obj).head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->next = t->prev = NULL;
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    uint64_t t0 = sm_plat_cycles();
    void *p = SM_NEXT_FN(alloc)(c);
    SM_FN(record)(0, sm_plat_cycles() - t0);
    return p;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    uint64_t t0 = sm_plat_cycles();
    SM_NEXT_FN(free)(c);
    SM_FN(record)(1, sm_plat_cycles() - t0);
}

/* HIT, forwarded: timed only when the next layer offers it (else its hit misses at once). */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT))
        return NULL;
    uint64_t t0 = sm_plat_cycles();
    void *p = SM_NEXT_FN(alloc_hit)(size);
    if (p)
        SM_FN(record)(0, sm_plat_cycles() - t0);
    return p;
}

SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT))
        return false;
    uint64_t t0 = sm_plat_cycles();
    if (!SM_NEXT_FN(free_hit)(p, size, flags, owner_word))
        return false;
    SM_FN(record)(1, sm_plat_cycles() - t0);
    return true;
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    uint64_t t0 = sm_plat_cycles();
    void *p = SM_NEXT_FN(alloc_miss)(c);
    SM_FN(record)(0, sm_plat_cycles() - t0);
    return p;
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    uint64_t t0 = sm_plat_cycles();
    SM_NEXT_FN(free_miss)(c);
    SM_FN(record)(1, sm_plat_cycles() - t0);
}

enum { SM_FN(batch_classes) = SM_PROP(SM_NEXT, batch_classes), SM_FN(batch_max_size) = SM_PROP(SM_NEXT, batch_max_size) };
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    uint64_t t0 = sm_plat_cycles();
    unsigned got = SM_NEXT_FN(alloc_batch)(c, out, n);
    SM_FN(record)(0, sm_plat_cycles() - t0);
    return got;
}

SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n)
{
    uint64_t t0 = sm_plat_cycles();
    SM_NEXT_FN(free_batch)(blocks, n);
    SM_FN(record)(1, sm_plat_cycles() - t0);
}

SM_HOT uintptr_t SM_FN(block_owner)(const void *p) { return SM_NEXT_FN(block_owner)(p); }
SM_HOT unsigned SM_FN(owner_slot)(const void *p, uintptr_t w) { return SM_NEXT_FN(owner_slot)(p, w); }
SM_INLINE bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c) { return SM_NEXT_FN(owner_local)(p, w, c); }
SM_INLINE uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c) { return SM_NEXT_FN(owner_foreign)(c); }
SM_INLINE void *SM_FN(split)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(split)(c, n); }
SM_INLINE bool SM_FN(remap)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(remap)(c, n); }
enum { SM_FN(stable_max) = SM_PROP(SM_NEXT, stable_max) };

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }

/* Retired before the fold: a call a later destructor makes adds into the total. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(tls_t) *t = &SM_FN(tls);
    if (t->state == 1) {
        sm_plat_lock(&SM_FN(obj).lock);
        SM_FN(fold_locked)(t);
        sm_plat_unlock(&SM_FN(obj).lock);
    }
    t->state = 2;
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void)
{
    sm_plat_lock(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    sm_plat_unlock(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_parent)();
}
/* The child has one thread: every other block is folded before the C library reuses its memory. */
SM_INLINE void SM_FN(fork_child)(void)
{
    struct SM_FN(tls_t) *t = SM_FN(obj).head;
    while (t) {
        struct SM_FN(tls_t) *next = t->next;
        if (t != &SM_FN(tls))
            SM_FN(fold_locked)(t);
        t = next;
    }
    sm_plat_lock_reinit(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_child)();
}

/* ---- Reading ---- */

SM_SLOWPATH SM_UNUSED void SM_FN(merged)(struct SM_FN(times) *out)
{
    sm_plat_lock(&SM_FN(obj).lock);
    for (unsigned op = 0; op < 2; op++) {
        uint64_t calls = __atomic_load_n(&SM_FN(obj).total.calls[op], __ATOMIC_RELAXED);
        uint64_t cycles = __atomic_load_n(&SM_FN(obj).total.cycles[op], __ATOMIC_RELAXED);
        uint64_t max = __atomic_load_n(&SM_FN(obj).total.max[op], __ATOMIC_RELAXED);
        for (struct SM_FN(tls_t) *t = SM_FN(obj).head; t; t = t->next) {
            uint64_t m = __atomic_load_n(&t->m.max[op], __ATOMIC_RELAXED);
            calls += __atomic_load_n(&t->m.calls[op], __ATOMIC_RELAXED);
            cycles += __atomic_load_n(&t->m.cycles[op], __ATOMIC_RELAXED);
            max = m > max ? m : max;
        }
        out->calls[op] = calls;
        out->cycles[op] = cycles;
        out->max[op] = max;
    }
    sm_plat_unlock(&SM_FN(obj).lock);
}

SM_SLOWPATH SM_UNUSED void SM_FN(perf_read)(struct SM_FN(perf) *out)
{
    struct SM_FN(times) m;
    SM_FN(merged)(&m);
    uint64_t cycles = sm_plat_cycles() - SM_FN(obj).start_cycles, ns = sm_plat_now_ns() - SM_FN(obj).start_ns;
    bool started = SM_FN(obj).start_cycles != 0;
    out->rate_known = started && cycles && ns;
    double rate = out->rate_known ? (double)ns / (double)cycles : 1.0; /* a slow path: floating point is fine */
    for (unsigned op = 0; op < 2; op++) {
        out->calls[op] = m.calls[op];
        out->cycles[op] = m.cycles[op];
        out->max_cycles[op] = m.max[op];
        /* Rounded up: a call that took any time has a mean above 0. */
        out->mean_cycles[op] = m.calls[op] ? (m.cycles[op] + m.calls[op] - 1) / m.calls[op] : 0;
        out->mean_ns[op] = (uint64_t)((double)out->mean_cycles[op] * rate + 0.5);
        out->max_ns[op] = (uint64_t)((double)m.max[op] * rate + 0.5);
    }
}

SM_SLOWPATH SM_UNUSED void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    struct SM_FN(times) m;
    SM_FN(merged)(&m);
    l->nmalloc = m.calls[0];
    l->nfree = m.calls[1];
    SM_NEXT_FN(stats)(s);
}

SM_INLINE size_t SM_FN(put)(char *buf, size_t at, size_t n, const char *s)
{
    while (*s && at + 1 < n)
        buf[at++] = *s++;
    if (n)
        buf[at < n ? at : n - 1] = 0;
    return at;
}

SM_INLINE size_t SM_FN(put_u64)(char *buf, size_t at, size_t n, uint64_t v)
{
    char d[24];
    unsigned i = sizeof d - 1;
    d[i] = 0;
    do
        d[--i] = (char)('0' + v % 10);
    while ((v /= 10) && i);
    return SM_FN(put)(buf, at, n, d + i);
}

/* The report: one line per operation, e.g.
 *   perf_stat t alloc: 125000 calls, mean 41 ns (118 cycles), max 9000 ns (25800 cycles)
 * ("cycles" only, when no rate is known yet). Returns its length. */
SM_SLOWPATH SM_UNUSED size_t SM_FN(perf_format)(char *buf, size_t n)
{
    struct SM_FN(perf) r;
    SM_FN(perf_read)(&r);
    size_t at = 0;
    if (n)
        buf[0] = 0;
    for (unsigned op = 0; op < 2; op++) {
        at = SM_FN(put)(buf, at, n, "perf_stat " SM_LAYER_NAME);
        at = SM_FN(put)(buf, at, n, op ? " free: " : " alloc: ");
        at = SM_FN(put_u64)(buf, at, n, r.calls[op]);
        at = SM_FN(put)(buf, at, n, " calls, mean ");
        for (unsigned k = 0; k < 2; k++) {
            if (k)
                at = SM_FN(put)(buf, at, n, ", max ");
            if (r.rate_known) {
                at = SM_FN(put_u64)(buf, at, n, k ? r.max_ns[op] : r.mean_ns[op]);
                at = SM_FN(put)(buf, at, n, " ns (");
            }
            at = SM_FN(put_u64)(buf, at, n, k ? r.max_cycles[op] : r.mean_cycles[op]);
            at = SM_FN(put)(buf, at, n, r.rate_known ? " cycles)" : " cycles");
        }
        at = SM_FN(put)(buf, at, n, "\n");
    }
    return at;
}

SM_SLOWPATH SM_UNUSED void SM_FN(perf_print)(void)
{
    char text[256];
    size_t len = SM_FN(perf_format)(text, sizeof text);
    sm_plat_write_stderr(text, len);
}

#undef SM_OPT_PRINT_AT_EXIT
#define SM_LAYER_OFFERS SM_CAP_ALL
#define SM_LAYER_CAPS   SM_CAPS(SM_NEXT)
#define SM_LAYER_STATS  1
#include "../../core/layer_end.h"
