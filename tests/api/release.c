/* Memory goes back to the OS after a phase of frees, for small, medium and large blocks, even while
 * the program is idle or only makes small requests: usage  release [wait_ms=2500]
 *
 * Each phase allocates and touches tens of MiB, frees it all, then waits (sleeping, or churning small
 * blocks for the large phase: requests that never reach the layers holding the freed memory) and
 * reads RSS from /proc/self/statm every 25 ms. A case passes when RSS comes back within
 * 10% of the phase's growth (plus 4 MiB of slack for the machine's noise and the caches' bounded
 * residue: objects the freeing thread still caches pin their slabs) before wait_ms; it reports how
 * long that took. Then malloc_trim(0) must not raise RSS and must leave it at the phase's base or
 * lower (within slack).
 *
 * Built plain (run it under LD_PRELOAD=lib<inst>.so), or with -DSM_TEST_PREFIX=sm_<inst>_ against
 * libsm_<inst>.a. A second argument raises the slack (MiB) for an allocator that pins more by
 * design (a quarantine of freed blocks: release.sh), a third the bound of regrow_after_shrink (peak
 * over live bytes, default 1.6) for one whose classes never merge, a fourth the MiB of a phase
 * whose frees the next phase must reuse (default 0: that case skipped). Cases:
 * medium_shrunk_returned_first, medium_returned, large_returned_during_small_churn, small_returned,
 * medium_shrunk_returned, shrunk_to_fit_kept, malloc_trim_returns, next_phase_reuses, large_growth,
 * regrow_after_shrink. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sunmao/core/compiler.h>

#include "tests/support/check.h"

#ifdef SM_TEST_PREFIX
#include <sunmao/sockets/custom_api.h>
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define ALLOC(name) SM_CAT(SM_TEST_PREFIX, name)
#define PROGRAM     "release_linked"
#else
#include <malloc.h>
#define ALLOC(name) name
#define PROGRAM     "release"
#endif

#define MiB (1024.0 * 1024.0)
static int wait_ms = 2500;
static double slack_mib = 4.0;
static double regrow_max = 1.6; /* regrow_after_shrink's bound: peak over the live bytes */
static long reuse_mib = 0;      /* next_phase_reuses: the phase's size; 0 skips the case */

static double rss_mib(void)
{
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / MiB;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Small churn that must not keep the freed memory resident: a few hundred live blocks of 16-256 B. */
static void *churn_live[256];
static void churn_for(double seconds, uint64_t *seed, double *rss_at, double target, double *reached)
{
    double t0 = now_s(), next_read = t0;
    while (now_s() - t0 < seconds) {
        for (int i = 0; i < 1000; i++) {
            unsigned j = (unsigned)(rnd(seed) % 256);
            ALLOC(free)(churn_live[j]);
            churn_live[j] = ALLOC(malloc)(16 + (size_t)(rnd(seed) % 241));
            if (churn_live[j])
                memset(churn_live[j], (int)j, 16);
        }
        if (now_s() >= next_read) {
            *rss_at = rss_mib();
            if (*reached < 0 && *rss_at <= target)
                *reached = now_s() - t0;
            next_read += 0.025;
        }
    }
}

/* Waits (sleeping, or churning small blocks) until RSS falls to `target` or wait_ms passes;
 * returns the seconds it took, or -1. *last is the last reading. */
static double wait_for_rss(double target, int churn, uint64_t *seed, double *last)
{
    double reached = -1;
    if (churn) {
        churn_for(wait_ms / 1000.0, seed, last, target, &reached);
        return reached;
    }
    double t0 = now_s();
    while (now_s() - t0 < wait_ms / 1000.0) {
        *last = rss_mib();
        if (*last <= target)
            return now_s() - t0;
        usleep(25 * 1000);
    }
    *last = rss_mib();
    return *last <= target ? now_s() - t0 : -1;
}

/* n blocks of sizes from size_fn, every page written: block i with (i & 0xff) | 1. */
static void fill_blocks(const char *what, char **blocks, size_t n, size_t (*size_fn)(uint64_t *), uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) {
        size_t sz = size_fn(seed);
        blocks[i] = ALLOC(malloc)(sz);
        CHECKF(blocks[i] != NULL, "%s: malloc(%zu) failed", what, sz);
        if (blocks[i])
            memset(blocks[i], (int)(i & 0xff) | 1, sz);
    }
}

/* One phase: n blocks of sizes from size_fn, every page touched, freed, then RSS watched. */
static void phase(const char *what, size_t n, size_t (*size_fn)(uint64_t *), int churn, double keep)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ n;
    char **blocks = ALLOC(calloc)(n, sizeof *blocks);
    CHECK(blocks != NULL);
    if (!blocks)
        return;
    double base = rss_mib();
    fill_blocks(what, blocks, n, size_fn, &seed);
    double peak = rss_mib();
    for (size_t i = 0; i < n; i++) {
        if (blocks[i] && blocks[i][0] != (char)((i & 0xff) | 1))
            CHECKF(0, "%s: block %zu overwritten", what, i);
        ALLOC(free)(blocks[i]);
    }
    ALLOC(free)(blocks);
    double after_free = rss_mib(), target = base + (peak - base) * keep + slack_mib, last = after_free;
    double took = wait_for_rss(target, churn, &seed, &last);
    printf("# %s: base %.1f MiB, peak %.1f, right after the frees %.1f, after waiting %.1f (target %.1f): %s\n",
           what, base, peak, after_free, last, target, took >= 0 ? "reached" : "not reached");
    if (took >= 0)
        printf("# %s: back within %.0f ms\n", what, took * 1000);
    CHECKF(peak - base > 20, "%s: the phase grew RSS by only %.1f MiB (nothing measured)", what, peak - base);
    CHECKF(took >= 0, "%s: RSS %.1f MiB %d ms after freeing %.1f MiB (base %.1f, target %.1f)", what, last,
           wait_ms, peak - base, base, target);
}

static size_t medium_size(uint64_t *s) { return 100000 + (size_t)(rnd(s) % 500000); }
static size_t large_size(uint64_t *s) { (void)s; return (size_t)10 << 20; }
static size_t small_size(uint64_t *s) { return 16 + (size_t)(rnd(s) % 497); }

static void medium_returned(void) { phase("medium", 400, medium_size, 0, 0.10); }
static void large_returned_during_small_churn(void) { phase("large", 10, large_size, 1, 0.10); }
static void small_returned(void) { phase("small", 250000, small_size, 0, 0.10); }

/* Blocks shrunk in place by realloc free their tails: those pages go back as a free's do, with the
 * blocks still live and no request after the shrinks. Run first, before any free has started the
 * release clock, and again after the other phases, with the clock asleep. */
static void shrink_phase(const char *what)
{
    enum { N = 150 };
    uint64_t seed = 0x51ab;
    char *blocks[N];
    double base = rss_mib();
    fill_blocks(what, blocks, N, medium_size, &seed);
    double peak = rss_mib();
    for (size_t i = 0; i < N; i++) {
        char *p = blocks[i] ? ALLOC(realloc)(blocks[i], 4096) : NULL;
        CHECKF(!blocks[i] || p != NULL, "%s: realloc(%p, 4096) failed", what, (void *)blocks[i]);
        if (p) {
            blocks[i] = p;
            for (size_t j = 0; j < 4096; j += 512)
                CHECKF(p[j] == (char)((i & 0xff) | 1), "%s: block %zu lost byte %zu in the shrink", what, i, j);
        }
    }
    double after = rss_mib(), target = base + (peak - base) * 0.10 + slack_mib, last = after;
    double took = wait_for_rss(target, 0, &seed, &last);
    printf("# %s: base %.1f MiB, peak %.1f, right after the shrinks %.1f, after waiting %.1f (target %.1f): %s\n", what,
           base, peak, after, last, target, took >= 0 ? "reached" : "not reached");
    CHECKF(peak - base > 20, "%s: the phase grew RSS by only %.1f MiB (nothing measured)", what, peak - base);
    CHECKF(took >= 0, "%s: RSS %.1f MiB %d ms after shrinking %.1f MiB of blocks to 4 KiB each (base %.1f, target %.1f)",
           what, last, wait_ms, peak - base, base, target);
    for (size_t i = 0; i < N; i++)
        ALLOC(free)(blocks[i]);
}
static void medium_shrunk_returned_first(void) { shrink_phase("shrunk, first"); }
static void medium_shrunk_returned(void) { shrink_phase("shrunk"); }

/* Buffers written whole at 64 KiB and 20,000 bytes, then shrunk to what they hold and kept (a
 * read of unknown length, trimmed to fit): each must then cost about its new size, as a fresh
 * block of that size would. Once libsunmao kept every shrunk block at 8 KiB, its medium heap's
 * smallest block: 165 MB for 20,000 buffers trimmed to 1000 bytes, glibc 21. Measured after the
 * decay wait, as the freed tails go back like any free. */
static void shrunk_to_fit_kept(void)
{
    enum { N = 6000 };
    static const size_t big[2] = { 65536, 20000 }, fit[2] = { 1000, 5000 };
    uint64_t seed = 0x5f17;
    for (int k = 0; k < 2; k++) {
        char **kept = ALLOC(malloc)(N * sizeof *kept);
        CHECK(kept != NULL);
        if (!kept)
            return;
        ALLOC(malloc_trim)(0); /* what the cases before left free is not counted as kept */
        double base = rss_mib();
        for (size_t i = 0; i < N; i++) {
            char *p = ALLOC(malloc)(big[k]);
            CHECKF(p != NULL, "malloc(%zu) failed", big[k]);
            if (!p)
                return;
            memset(p, (int)(i & 0x7f) | 1, big[k]);
            kept[i] = ALLOC(realloc)(p, fit[k]);
            CHECKF(kept[i] != NULL, "realloc(%zu -> %zu) failed", big[k], fit[k]);
            if (!kept[i])
                return;
        }
        double live = N * (double)fit[k] / MiB, target = base + live * 1.5 + slack_mib, last = rss_mib();
        double took = wait_for_rss(target, 0, &seed, &last);
        printf("# shrunk to fit: %d x %zu -> %zu bytes (%.1f MiB), base %.1f MiB, then %.1f (target %.1f): %s\n", N,
               big[k], fit[k], live, base, last, target, took >= 0 ? "reached" : "not reached");
        CHECKF(took >= 0, "RSS %.1f MiB over a base of %.1f for %d buffers of %zu bytes shrunk to %zu (%.1f MiB kept)",
               last, base, N, big[k], fit[k], live);
        bool intact = true;
        for (size_t i = 0; i < N; i++) {
            intact = intact && kept[i][0] == (char)((i & 0x7f) | 1) && kept[i][fit[k] - 1] == (char)((i & 0x7f) | 1);
            ALLOC(free)(kept[i]);
        }
        CHECKF(intact, "a shrunk buffer lost its contents");
        ALLOC(free)(kept);
    }
}

static long minor_faults(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

/* A program that works in phases (a compiler's passes, a batch job's stages) builds reuse_mib of
 * small objects, frees them all and builds as much again in another size class: an allocator that
 * keeps what the first phase freed for its decay time serves the second without faulting its
 * pages in again. Once libsunmao's cache of freed chunks had 64 slots: a 300 MiB phase had 11 of
 * its 75 chunks unmapped and faulted in again (18% of the phase's pages, now under 1%).
 * Counted with getrusage's minor faults; a second try forgives one stall of the machine longer
 * than the decay time between the phases. */
/* One phase of next_phase_reuses: n blocks of `size`, each written whole with its pattern; false if
 * a malloc failed (the blocks made so far are freed). */
static bool phase_build(char **p, size_t n, size_t size, unsigned salt)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = ALLOC(malloc)(size);
        CHECKF(p[i] != NULL, "malloc(%zu) failed after %zu blocks", size, i);
        if (!p[i]) {
            while (i--)
                ALLOC(free)(p[i]);
            return false;
        }
        memset(p[i], (int)((i ^ salt) & 0x7f), size);
    }
    return true;
}
/* Its end: every block checked at both ends and freed; false if one lost its contents. */
static bool phase_drop(char **p, size_t n, size_t size, unsigned salt)
{
    bool intact = true;
    for (size_t i = 0; i < n; i++) {
        char want = (char)((i ^ salt) & 0x7f);
        intact = intact && p[i][0] == want && p[i][size - 1] == want;
        ALLOC(free)(p[i]);
    }
    return intact;
}
static void next_phase_reuses(void)
{
    enum { FIRST = 256, SECOND = 1024 };
    size_t n1 = (size_t)reuse_mib * 1024 * 1024 / FIRST, n2 = (size_t)reuse_mib * 1024 * 1024 / SECOND;
    char **p = ALLOC(malloc)(n1 * sizeof *p);
    CHECK(p != NULL);
    if (!p)
        return;
    double ratio = 1, pages = (double)reuse_mib * 1024 * 1024 / (double)sysconf(_SC_PAGESIZE);
    for (int attempt = 0; attempt < 2 && ratio > 0.05; attempt++) {
        long f0 = minor_faults();
        if (!phase_build(p, n1, FIRST, 0))
            break;
        CHECKF(phase_drop(p, n1, FIRST, 0), "a block of the first phase lost its contents");
        long f1 = minor_faults();
        if (!phase_build(p, n2, SECOND, 0x55))
            break;
        long f2 = minor_faults();
        CHECKF(phase_drop(p, n2, SECOND, 0x55), "a block of the second phase lost its contents");
        ratio = (double)(f2 - f1) / pages;
        printf("# next phase: %ld MiB of %d-byte objects took %ld faults, then as much of %d-byte objects %ld "
               "(%.1f%% of its %.0f pages)\n", reuse_mib, FIRST, f1 - f0, SECOND, f2 - f1, ratio * 100, pages);
    }
    CHECKF(ratio <= 0.05, "the second phase faulted in %.1f%% of its pages (at most 5%%)", ratio * 100);
    ALLOC(free)(p);
}

static void malloc_trim_returns(void)
{
    uint64_t seed = 7;
    double base = rss_mib();
    char *keep[64];
    for (int i = 0; i < 64; i++) {
        size_t n = medium_size(&seed);
        keep[i] = ALLOC(malloc)(n);
        CHECK(keep[i] != NULL);
        if (keep[i])
            memset(keep[i], 0x5a, n);
    }
    for (int i = 0; i < 64; i++)
        ALLOC(free)(keep[i]);
    double before = rss_mib();
    ALLOC(malloc_trim)(0);
    double after = rss_mib();
    printf("# malloc_trim: base %.1f MiB, before %.1f, after %.1f\n", base, before, after);
    CHECKF(after <= before + 0.5 && after <= base + slack_mib, "RSS %.1f MiB after malloc_trim (before %.1f, base %.1f)",
           after, before, base);
}

/* The peak resident memory, VmHWM, in MiB; -1 if unknown. */
static double peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = atof(line + 6);
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

/* Resets the peak to the current RSS (Linux's clear_refs); false where it cannot. */
static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* A buffer grown by realloc in 1 MiB steps to 96 MiB: a move copies the block while the old one is
 * live, and the socket gives back the old pages as it copies, so the peak stays near the buffer's
 * size instead of twice the size it had at its last move. */
static void large_growth(void)
{
    enum { STEPS = 96 };
    const size_t step = (size_t)1 << 20;
    CHECK(reset_peak());
    double base = rss_mib();
    char *p = NULL;
    size_t n = 0;
    int moves = 0;
    for (int i = 0; i < STEPS; i++) {
        char *q = ALLOC(realloc)(p, n + step);
        CHECKF(q != NULL, "realloc to %zu MiB failed", (n + step) >> 20);
        if (!q)
            break;
        moves += p && q != p;
        p = q;
        memset(p + n, i | 1, step);
        n += step;
    }
    bool intact = true;
    for (size_t i = 0; i < n && intact; i += 4096)
        intact = p[i] == (char)((i >> 20) | 1);
    CHECKF(intact, "the grown buffer lost its contents");
    double peak = peak_mib();
    printf("# large growth: base %.1f MiB, peak %.1f for a %d MiB buffer, %d moves\n", base, peak, STEPS, moves);
    CHECKF(peak > 0 && peak - base <= STEPS * 1.1 + slack_mib,
           "peak RSS %.1f MiB over a base of %.1f for a %d MiB buffer grown by realloc (%d moves)", peak, base, STEPS,
           moves);
    ALLOC(free)(p);
}

/* Buffers grown by small reallocs, interleaved, then shrunk to a few bytes and grown again, round
 * after round (a line or message buffer reused): a shrink the layer makes in place keeps the
 * buffer where it is, to regrow into its own freed tail; moving every shrunk buffer out places it
 * anew among the others on each round, and the heap fragments (libsunmao peaked at 2.4x the live
 * bytes that way). The peak must stay within regrow_max (1.6) times the live bytes, plus slack. */
static void regrow_after_shrink(void)
{
    enum { BUFS = 64, ROUNDS = 10 };
    const size_t max = 250000; /* not a class size: a layer's check bytes after it do not double it */
    uint64_t seed = 0x7e6;
    char *b[BUFS] = { 0 };
    size_t n[BUFS] = { 0 };
    ALLOC(malloc_trim)(0); /* the cases before left free memory resident, which the peak would hide */
    CHECK(reset_peak());
    double base = rss_mib();
    bool intact = true;
    for (int r = 0; r < ROUNDS && intact; r++) {
        for (bool grown = false; !grown && intact;) {
            grown = true;
            for (int i = 0; i < BUFS && intact; i++) {
                if (n[i] >= max)
                    continue;
                grown = false;
                size_t to = n[i] + 1 + (size_t)(rnd(&seed) % (n[i] / 8 + 64));
                to = to < max ? to : max;
                char *q = ALLOC(realloc)(b[i], to);
                CHECKF(q != NULL, "realloc(%zu) failed", to);
                if (!q)
                    return;
                intact = !n[i] || (q[0] == (char)(i | 1) && q[n[i] - 1] == (char)(i | 1));
                memset(q + n[i], i | 1, to - n[i]);
                b[i] = q, n[i] = to;
            }
        }
        for (int i = 0; i < BUFS && intact; i++) {
            size_t to = 1 + (size_t)(rnd(&seed) % 256);
            char *q = ALLOC(realloc)(b[i], to);
            CHECKF(q != NULL, "realloc shrink to %zu failed", to);
            if (!q)
                return;
            intact = q[0] == (char)(i | 1) && q[to - 1] == (char)(i | 1);
            b[i] = q, n[i] = to;
        }
    }
    CHECKF(intact, "a buffer lost its contents in a realloc");
    double peak = peak_mib(), live = BUFS * (double)max / MiB;
    printf("# regrow after shrink: base %.1f MiB, peak %.1f for %.1f MiB of buffers\n", base, peak, live);
    CHECKF(peak > 0 && peak - base <= live * regrow_max + slack_mib,
           "peak RSS %.1f MiB over a base of %.1f for %.1f MiB of buffers grown, shrunk and grown again (at most %.1fx)",
           peak, base, live, regrow_max);
    for (int i = 0; i < BUFS; i++)
        ALLOC(free)(b[i]);
}

int main(int argc, char **argv)
{
    check_begin(PROGRAM);
    if (argc > 1)
        wait_ms = atoi(argv[1]);
    if (argc > 2)
        slack_mib = atof(argv[2]);
    if (argc > 3)
        regrow_max = atof(argv[3]);
    if (argc > 4)
        reuse_mib = atol(argv[4]);
    if (wait_ms < 1 || slack_mib < 0 || regrow_max < 1 || reuse_mib < 0) {
        fprintf(stderr, "usage: %s [wait_ms [slack_mib [regrow_max [reuse_mib]]]]\n", argv[0]);
        return 2;
    }
    void *warm = ALLOC(malloc)(100);
    ALLOC(free)(warm);
    RUN_CASE(medium_shrunk_returned_first);
    RUN_CASE(medium_returned);
    RUN_CASE(large_returned_during_small_churn);
    RUN_CASE(small_returned);
    RUN_CASE(medium_shrunk_returned);
    RUN_CASE(shrunk_to_fit_kept);
    RUN_CASE(malloc_trim_returns);
    if (reuse_mib)
        RUN_CASE(next_phase_reuses);
    else
        check_skip("next_phase_reuses", "this instance keeps less than a phase's memory for the next one");
    if (reset_peak()) {
        RUN_CASE(large_growth);
        RUN_CASE(regrow_after_shrink);
    } else {
        check_skip("large_growth", "/proc/self/clear_refs cannot reset the peak RSS here");
        check_skip("regrow_after_shrink", "/proc/self/clear_refs cannot reset the peak RSS here");
    }
    for (int i = 0; i < 256; i++)
        ALLOC(free)(churn_live[i]);
    return check_failures_total ? 1 : 0;
}
