/* Large and medium blocks from many threads at once: usage  large_race [threads=16] [ms=2000] [seed=1] [large|mixed|both]
 *
 * Each thread keeps up to 8 live blocks and replaces a random one in a loop: free + malloc, or
 * realloc growing or shrinking it. Sizes straddle the boundaries where blocks change hands between
 * layers: 8 KiB (slabs / TLSF), 64 KiB (the decay cache's smallest block), 2 MiB (TLSF / large),
 * 4 MiB (TLSF regions, buddy chunks) and up to 12 MiB. Every block carries a pattern in its first
 * and last bytes and one word per 4 MiB, checked before it is freed or resized.
 *
 * This is the workload that found a race in the large-block path: mmap_heap's remap moved a block
 * with mremap(MREMAP_FIXED) and cleared the old address's registry entry only afterwards, so a
 * mapping another thread got at that address in between lost its entry, and its free was then
 * reported as invalid (and the block leaked). So besides the patterns, the test checks that
 * malloc_usable_size of every live block covers its size (a lost registry entry reads as 0), and
 * captures the allocator's own stderr: any report from it on this valid program fails the run.
 *
 * Built plain (run it under LD_PRELOAD=lib<inst>.so), or with -DSM_TEST_PREFIX=sm_<inst>_ against
 * libsm_<inst>.a. Cases: patterns_intact, usable_size_covers, realloc_preserves, no_reports. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sunmao/core/compiler.h>

#include "tests/support/check.h"

#ifdef SM_TEST_PREFIX
#include <sunmao/sockets/custom_api.h>
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define ALLOC(name) SM_CAT(SM_TEST_PREFIX, name)
#define PROGRAM     "large_race_linked"
#else
#include <malloc.h>
#define ALLOC(name) name
#define PROGRAM     "large_race"
#endif

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)
#define LIVE 8
#define STRIDE (4096 * KiB)

struct block { unsigned char *p; size_t n; uint64_t key; };

/* large: every thread does what the original report did (free + malloc of 2-12 MiB), the busiest
 * way through mmap, mremap and the decay cache's grow path; mixed: every size, and realloc across
 * the boundaries; both: half the threads each. */
enum { MODE_LARGE, MODE_MIXED, MODE_BOTH };
static int nthreads = 16, run_ms = 2000, mode = MODE_BOTH;
static unsigned base_seed = 1;
static atomic_int stop;
static atomic_ulong bad_pattern, bad_usable, bad_realloc, n_ops, n_realloc;
static char first_bad[256];
static pthread_mutex_t first_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((format(printf, 1, 2))) static void note_first(const char *fmt, ...)
{
    pthread_mutex_lock(&first_lock);
    if (!first_bad[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(first_bad, sizeof first_bad, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&first_lock);
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Sizes near the layers' boundaries, and spread over 2-12 MiB as the original report had them. */
static size_t pick_size(uint64_t *s, bool large_only)
{
    if (large_only)
        return 2 * MiB + (size_t)((rnd(s) >> 8) % (10 * MiB));
    static const size_t edges[] = { 8 * KiB, 64 * KiB, 2 * MiB, 4 * MiB, 8 * MiB };
    uint64_t r = rnd(s);
    switch (r % 4) {
    case 0: { /* just below or above an edge */
        size_t e = edges[(r >> 8) % (sizeof edges / sizeof edges[0])];
        size_t d = (size_t)((r >> 16) % (e / 2));
        return (r >> 40) & 1 ? e + d + 1 : e - d;
    }
    case 1: /* medium */
        return 8 * KiB + (size_t)((r >> 8) % (2 * MiB));
    default: /* large, 2-12 MiB */
        return 2 * MiB + (size_t)((r >> 8) % (10 * MiB));
    }
}

static inline uint64_t word_at(uint64_t key, size_t off) { return key ^ (off * 0x9e3779b97f4a7c15ull); }

/* Pattern: the first and last 64 bytes and one word every STRIDE bytes, position-keyed. */
static size_t next_off(size_t off, size_t n)
{
    size_t tail = n >= 64 ? (n - 64) & ~(size_t)7 : 0;
    if (off + 8 < 64 || off >= tail)
        return off + 8;
    return off + STRIDE < tail ? (off + STRIDE) & ~(STRIDE - 1) : tail;
}

static void fill(struct block *b)
{
    for (size_t off = 0; off + 8 <= b->n; off = next_off(off, b->n)) {
        uint64_t w = word_at(b->key, off);
        memcpy(b->p + off, &w, 8);
    }
}

/* Checks the words of b's pattern below `upto` (realloc keeps only the new size's prefix). */
static bool verify(const struct block *b, size_t upto, const char *what)
{
    for (size_t off = 0; off + 8 <= b->n && off + 8 <= upto; off = next_off(off, b->n)) {
        uint64_t w;
        memcpy(&w, b->p + off, 8);
        if (w != word_at(b->key, off)) {
            note_first("%s: block %p (%zu bytes) overwritten at offset %zu", what, (void *)b->p, b->n, off);
            return false;
        }
    }
    return true;
}

static bool usable_ok(const struct block *b)
{
    size_t u = ALLOC(malloc_usable_size)(b->p);
    if (u >= b->n)
        return true;
    note_first("malloc_usable_size(%p) = %zu for a live block of %zu bytes (registry entry lost?)",
               (void *)b->p, u, b->n);
    return false;
}

static void *worker(void *arg)
{
    uint64_t seed = ((uint64_t)base_seed << 32) ^ (uint64_t)(uintptr_t)arg ^ 0x853c49e6748fea9bull;
    struct block live[LIVE] = { { 0 } };
    bool large_only = mode == MODE_LARGE || (mode == MODE_BOTH && (uintptr_t)arg % 2 == 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        struct block *b = &live[rnd(&seed) % LIVE];
        if (b->p) {
            if (!verify(b, b->n, "before free"))
                atomic_fetch_add(&bad_pattern, 1);
            if (!usable_ok(b))
                atomic_fetch_add(&bad_usable, 1);
        }
        size_t n = pick_size(&seed, large_only);
        if (b->p && !large_only && rnd(&seed) % 4 == 0) { /* realloc: grow or shrink across the boundaries */
            unsigned char *q = ALLOC(realloc)(b->p, n);
            if (!q) {
                note_first("realloc(%p, %zu) failed: %s", (void *)b->p, n, strerror(errno));
                atomic_fetch_add(&bad_realloc, 1);
                continue;
            }
            struct block moved = { q, b->n, b->key };
            if (!verify(&moved, n, "after realloc"))
                atomic_fetch_add(&bad_realloc, 1);
            b->p = q, b->n = n, b->key = rnd(&seed);
            atomic_fetch_add_explicit(&n_realloc, 1, memory_order_relaxed);
        } else {
            ALLOC(free)(b->p);
            b->p = ALLOC(malloc)(n);
            if (!b->p) {
                note_first("malloc(%zu) failed: %s", n, strerror(errno));
                atomic_fetch_add(&bad_usable, 1);
                continue;
            }
            b->n = n, b->key = rnd(&seed);
        }
        fill(b);
        if (!usable_ok(b))
            atomic_fetch_add(&bad_usable, 1);
        atomic_fetch_add_explicit(&n_ops, 1, memory_order_relaxed);
    }
    for (int i = 0; i < LIVE; i++) {
        if (live[i].p && !verify(&live[i], live[i].n, "at exit"))
            atomic_fetch_add(&bad_pattern, 1);
        ALLOC(free)(live[i].p);
    }
    return NULL;
}

static char report_path[64];
static int saved_stderr = -1;

static void case_patterns_intact(void) { CHECKF(bad_pattern == 0, "%lu blocks: %s", (unsigned long)bad_pattern, first_bad); }
static void case_usable_size_covers(void) { CHECKF(bad_usable == 0, "%lu checks: %s", (unsigned long)bad_usable, first_bad); }
static void case_realloc_preserves(void) { CHECKF(bad_realloc == 0, "%lu reallocs: %s", (unsigned long)bad_realloc, first_bad); }

/* The allocator writes its reports to fd 2, which the run pointed at a file. */
static void case_no_reports(void)
{
    FILE *f = fopen(report_path, "r");
    CHECKF(f != NULL, "cannot read back the captured stderr %s", report_path);
    if (!f)
        return;
    char line[512], first[512] = "";
    unsigned long reports = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "sunmao") && reports++ == 0)
            snprintf(first, sizeof first, "%s", line);
    fclose(f);
    first[strcspn(first, "\n")] = 0;
    CHECKF(reports == 0, "%lu allocator reports on a valid program, the first: %s", reports, first);
}

int main(int argc, char **argv)
{
    check_begin(PROGRAM);
    if (argc > 1)
        nthreads = atoi(argv[1]);
    if (argc > 2)
        run_ms = atoi(argv[2]);
    if (argc > 3)
        base_seed = (unsigned)strtoul(argv[3], NULL, 10);
    if (argc > 4)
        mode = !strcmp(argv[4], "large") ? MODE_LARGE : !strcmp(argv[4], "mixed") ? MODE_MIXED
             : !strcmp(argv[4], "both")  ? MODE_BOTH  : -1;
    if (nthreads < 1 || nthreads > 256 || run_ms < 1 || mode < 0) {
        fprintf(stderr, "usage: %s [threads 1..256] [ms] [seed] [large|mixed|both]\n", argv[0]);
        return 2;
    }
    /* Capture fd 2 so the allocator's own reports can be counted. */
    snprintf(report_path, sizeof report_path, "/tmp/sm-large-race-%d.err", (int)getpid());
    FILE *cap = fopen(report_path, "w+");
    if (cap) {
        saved_stderr = dup(2);
        dup2(fileno(cap), 2);
        fclose(cap);
    }

    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    if (!t)
        return 2;
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) != 0) {
            nthreads = i;
            break;
        }
    struct timespec ts = { run_ms / 1000, (long)(run_ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    free(t);

    if (saved_stderr >= 0) {
        fflush(stderr);
        dup2(saved_stderr, 2);
        close(saved_stderr);
    }
    RUN_CASE(case_patterns_intact);
    RUN_CASE(case_usable_size_covers);
    RUN_CASE(case_realloc_preserves);
    RUN_CASE(case_no_reports);
    printf("# %d threads, %d ms, %s: %lu operations, %lu reallocs\n", nthreads, run_ms,
           mode == MODE_LARGE ? "large" : mode == MODE_MIXED ? "mixed" : "both", (unsigned long)n_ops,
           (unsigned long)n_realloc);
    unlink(report_path);
    return check_failures_total ? 1 : 0;
}
