/* wcet_stat: an add-on layer that measures the latency of the requests it passes down (the Mortise
 * paper's wcet_stat, §4.3): one request in SM_OPT_SAMPLE_EVERY is timed with the cycle counter and
 * counted in a histogram, per operation (malloc, free). It changes nothing it passes on.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: none.
 * Options:
 *   SM_OPT_SAMPLE_EVERY    time one request in this many, per thread (a power of two; default 8)
 *   SM_OPT_REPORT_AT_EXIT  1 (default): print the percentiles to stderr when the process exits
 * Properties, capabilities: the next layer's (it forwards everything; offers none of its own).
 *
 * The histogram: buckets of cycles, exact below 16, then 8 per power of two (12.5% apart) up to
 * 2^22 cycles (1.4 ms at 3 GHz; the paper caps its histogram near 1 ms), and one bucket above.
 * Each thread counts into its own histogram (from the metadata route on its first sample: no lock,
 * no atomic on the request path), added to the process's (relaxed atomic adds) when the thread
 * exits and when a report is made. A percentile is reported as its bucket's upper bound, converted
 * to nanoseconds with the cycle counter's rate measured between the layer's creation and the
 * report (against CLOCK_MONOTONIC). Percentiles: p90, p99, p99.9 ... p99.9999; one that needs more
 * samples than were taken is marked with '*'.
 * API beyond the contract: L_wcet_flush() adds the calling thread's counts to the process's;
 * L_wcet_samples(op) and L_wcet_quantile(op, ppm) (cycles, of the process's counts; op 0 malloc,
 * 1 free); L_wcet_format(buf, n) the report's text; L_wcet_report() prints it.
 * @model: name=wcet_stat kind=addon alias=wacet_stat
 * @model: key sample_every int key report_at_exit bool
 * @check: SM_LAYER=t
 * @check-next: fake */
#include "../../core/bits.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "wcet_stat: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "wcet_stat: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_OPT_SAMPLE_EVERY
#define SM_OPT_SAMPLE_EVERY 8
#endif
#ifndef SM_OPT_REPORT_AT_EXIT
#define SM_OPT_REPORT_AT_EXIT 1
#endif
#include "../../core/meta_route.h"
_Static_assert((SM_OPT_SAMPLE_EVERY) >= 1 && ((SM_OPT_SAMPLE_EVERY) & ((SM_OPT_SAMPLE_EVERY) - 1)) == 0,
               "wcet_stat: SM_OPT_SAMPLE_EVERY must be a power of two");

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = SM_PROP(SM_NEXT, zeroed),
    SM_FN(top_log) = 22,                                  /* the last power of two with buckets */
    SM_FN(buckets) = 16 + (SM_FN(top_log) - 3) * 8 + 1, /* ... and the one above the cap */
};

struct SM_FN(hist) { uint64_t n[2][SM_FN(buckets)]; };

static struct {
    struct SM_FN(hist) total; /* the exited threads', and flushed counts (relaxed atomic adds) */
    uint64_t start_cycles, start_ns;
    sm_plat_once_t once;
} SM_FN(obj) = { .once = SM_PLAT_ONCE_INIT };

/* Default TLS model: the library stays loadable with dlopen. */
static __thread struct { unsigned count[2]; struct SM_FN(hist) *hist; } SM_FN(thread);

SM_INLINE unsigned SM_FN(bucket_of)(uint64_t cycles)
{
    if (cycles < 16)
        return (unsigned)cycles;
    unsigned e = sm_log2_floor(cycles);
    if (e > SM_FN(top_log))
        return SM_FN(buckets) - 1;
    return 16 + (e - 4) * 8 + (unsigned)((cycles >> (e - 3)) & 7);
}

/* The largest cycle count bucket b holds (UINT64_MAX for the one above the cap). */
SM_INLINE uint64_t SM_FN(bucket_top)(unsigned b)
{
    if (b < 16)
        return b;
    if (b == SM_FN(buckets) - 1)
        return UINT64_MAX;
    unsigned e = 4 + (b - 16) / 8, sub = (b - 16) % 8;
    return ((uint64_t)(9 + sub) << (e - 3)) - 1;
}

SM_SLOWPATH void SM_FN(start)(void)
{
    SM_FN(obj).start_cycles = sm_plat_cycles();
    SM_FN(obj).start_ns = sm_plat_now_ns();
}

SM_INLINE void SM_FN(wcet_report)(void);
SM_SLOWPATH void SM_FN(report_at_exit)(void) { SM_FN(wcet_report)(); }

SM_INLINE int SM_FN(create)(void)
{
    sm_plat_once(&SM_FN(obj).once, SM_FN(start));
    if (SM_OPT_REPORT_AT_EXIT)
        (void)sm_plat_at_exit(SM_FN(report_at_exit));
    return SM_NEXT_FN(create)();
}

/* Adds h to the process's counts and clears it. */
SM_SLOWPATH void SM_FN(merge)(struct SM_FN(hist) *h)
{
    for (unsigned op = 0; op < 2; op++)
        for (unsigned b = 0; b < SM_FN(buckets); b++)
            if (h->n[op][b]) {
                __atomic_add_fetch(&SM_FN(obj).total.n[op][b], h->n[op][b], __ATOMIC_RELAXED);
                h->n[op][b] = 0;
            }
}

SM_INLINE void SM_FN(thread_exit)(void);

/* The calling thread's histogram, made on its first sample; NULL if none could be had. */
SM_SLOWPATH struct SM_FN(hist) *SM_FN(hist_make)(void)
{
    sm_plat_once(&SM_FN(obj).once, SM_FN(start));
    if (!sm_thread_attach(SM_FN(thread_exit)))
        return NULL; /* counts would be lost at exit: not sampled */
    sm_mctx_t r = sm_mctx_alloc(sizeof(struct SM_FN(hist)), SM_CACHELINE, 0);
    struct SM_FN(hist) *h = (struct SM_FN(hist) *)sm_mctx_zeroed(&r, SM_FN(meta_alloc)(&r));
    return SM_FN(thread).hist = h;
}

SM_SLOWPATH void SM_FN(record)(unsigned op, uint64_t cycles)
{
    struct SM_FN(hist) *h = SM_FN(thread).hist;
    if (!h && !(h = SM_FN(hist_make)()))
        return;
    h->n[op][SM_FN(bucket_of)(cycles)]++;
}

/* One request in SM_OPT_SAMPLE_EVERY of each operation (a counter each: a program that alternates
 * malloc and free would otherwise have only one of them sampled). */
SM_INLINE bool SM_FN(sampled)(unsigned op) { return !(++SM_FN(thread).count[op] & ((SM_OPT_SAMPLE_EVERY) - 1)); }

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (!SM_FN(sampled)(0))
        return SM_NEXT_FN(alloc)(c);
    uint64_t t0 = sm_plat_cycles();
    void *p = SM_NEXT_FN(alloc)(c);
    SM_FN(record)(0, sm_plat_cycles() - t0);
    return p;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (!SM_FN(sampled)(1)) {
        SM_NEXT_FN(free)(c);
        return;
    }
    uint64_t t0 = sm_plat_cycles();
    SM_NEXT_FN(free)(c);
    SM_FN(record)(1, sm_plat_cycles() - t0);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }

SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(hist) *h = SM_FN(thread).hist;
    SM_FN(thread).hist = NULL;
    if (h) {
        SM_FN(merge)(h);
        sm_mctx_t f = sm_mctx_block(h, sizeof *h, SM_F_SIZED);
        SM_FN(meta_free)(&f);
    }
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

/* ---- Reading the counts ---- */

SM_SLOWPATH SM_UNUSED void SM_FN(wcet_flush)(void)
{
    if (SM_FN(thread).hist)
        SM_FN(merge)(SM_FN(thread).hist);
}

SM_SLOWPATH SM_UNUSED uint64_t SM_FN(wcet_samples)(unsigned op)
{
    uint64_t n = 0;
    for (unsigned b = 0; b < SM_FN(buckets); b++)
        n += __atomic_load_n(&SM_FN(obj).total.n[op & 1][b], __ATOMIC_RELAXED);
    return n;
}

/* The cycles under which `ppm` parts per million of op's samples fall (a bucket's top); 0 if none. */
SM_SLOWPATH SM_UNUSED uint64_t SM_FN(wcet_quantile)(unsigned op, uint32_t ppm)
{
    uint64_t n = SM_FN(wcet_samples)(op);
    if (!n)
        return 0;
    uint64_t want = (n * ppm + 999999) / 1000000, seen = 0; /* a slow path: division is fine */
    for (unsigned b = 0; b < SM_FN(buckets); b++) {
        seen += __atomic_load_n(&SM_FN(obj).total.n[op & 1][b], __ATOMIC_RELAXED);
        if (seen >= want && seen)
            return SM_FN(bucket_top)(b);
    }
    return UINT64_MAX;
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
    char digits[24];
    unsigned i = sizeof digits - 1;
    digits[i] = 0;
    do
        digits[--i] = (char)('0' + v % 10);
    while ((v /= 10) && i);
    return SM_FN(put)(buf, at, n, digits + i);
}

/* The report: one line per operation, e.g.
 *   wcet_stat t malloc: 125000 samples, ns p90 41 p99 120 p99.9 800 p99.99 2100 p99.999 9000* ...
 * (the calling thread's counts flushed first). Returns its length. */
SM_SLOWPATH SM_UNUSED size_t SM_FN(wcet_format)(char *buf, size_t n)
{
    static const uint32_t ppm[] = { 900000, 990000, 999000, 999900, 999990, 999999 };
    static const char *const name[] = { "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999" };
    SM_FN(wcet_flush)();
    uint64_t cycles = sm_plat_cycles() - SM_FN(obj).start_cycles, ns = sm_plat_now_ns() - SM_FN(obj).start_ns;
    size_t at = 0;
    if (n)
        buf[0] = 0;
    for (unsigned op = 0; op < 2; op++) {
        uint64_t samples = SM_FN(wcet_samples)(op);
        at = SM_FN(put)(buf, at, n, "wcet_stat " SM_LAYER_NAME);
        at = SM_FN(put)(buf, at, n, op ? " free: " : " malloc: ");
        at = SM_FN(put_u64)(buf, at, n, samples);
        at = SM_FN(put)(buf, at, n, " samples, ns");
        for (unsigned i = 0; i < sizeof ppm / sizeof ppm[0]; i++) {
            uint64_t c = SM_FN(wcet_quantile)(op, ppm[i]);
            at = SM_FN(put)(buf, at, n, " ");
            at = SM_FN(put)(buf, at, n, name[i]);
            at = SM_FN(put)(buf, at, n, " ");
            if (c == UINT64_MAX) {
                at = SM_FN(put)(buf, at, n, "cap");
            } else { /* cycles -> ns at the measured rate; the counter's own unit if it cannot tell */
                uint64_t v = cycles && ns ? (uint64_t)((double)c * (double)ns / (double)cycles) : c;
                at = SM_FN(put_u64)(buf, at, n, v);
            }
            if (samples < 1000000 / (1000000 - ppm[i]))
                at = SM_FN(put)(buf, at, n, "*");
        }
        at = SM_FN(put)(buf, at, n, "\n");
    }
    return at;
}

SM_INLINE void SM_FN(wcet_report)(void)
{
    char line[512];
    size_t len = SM_FN(wcet_format)(line, sizeof line);
    sm_plat_write_stderr(line, len);
}

#undef SM_OPT_SAMPLE_EVERY
#undef SM_OPT_REPORT_AT_EXIT
#define SM_LAYER_OFFERS SM_CAP_MOVE
#include "../../core/layer_end.h"
