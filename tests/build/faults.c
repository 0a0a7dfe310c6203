/* OS failures: one prefixed allocator, built with the platform's failure injection
 * (-DSM_PLAT_FAULTS: platform/linux.h asks sm_plat_fault_due, defined here, before each map, remap,
 * purge and break call), must answer every request it cannot serve with NULL + ENOMEM (posix_memalign:
 * ENOMEM returned, *out untouched; realloc: the old block kept, contents intact), keep every live
 * block intact, and serve again once the OS does. Built and run per instance by
 * tests/build/faults.sh:
 *   cc -DSM_PLAT_FAULTS -DSM_PREFIX=sm_<inst>_ -c instances/<inst>.c
 *   cc -DSM_TEST_PREFIX=sm_<inst>_ -DSM_TEST_NAME='"<inst>"' faults.c <inst>.o
 * Cases:
 *   big_requests_fail   with every map/remap/break failing, requests of 80 MiB and up (after a
 *                       malloc_trim: nothing cached) through every API function fail as above,
 *                       and the injector saw the calls (the path is hooked)
 *   exhaustion          with every call failing, small and medium requests until the allocator's
 *                       held memory runs out (or 96 MiB): each answer a block or NULL + ENOMEM,
 *                       every block intact
 *   nth_call_fails      a mixed workload (small, medium, large, realloc growth across ranges) with
 *                       only the Nth OS call failing, N = 1..40; then the same workload with no
 *                       failure serves every request
 *   purge_fails         frees, trims and the release clock with every purge failing: no block is
 *                       lost or damaged, and the allocator serves again afterwards
 *   break_refused       with only the break refusing to move, every request is served (brk_heap
 *                       goes on in mapped pages)
 *   usable_after        every size range served and verified once the OS answers again */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sunmao/sockets/custom_api.h>
#include "tests/support/check.h"

#ifndef SM_TEST_PREFIX
#error "define SM_TEST_PREFIX (e.g. sm_tlsf_) and SM_TEST_NAME (e.g. \"tlsf\")"
#endif
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define A(fn) SM_CAT(SM_TEST_PREFIX, fn)

/* The platform's operations (platform/linux.h, enum sm_plat_op), in its order. */
enum { OP_MAP, OP_REMAP, OP_PURGE, OP_SBRK, OPS };
#define BIT(op) (1u << (op))
#define GROWTH (BIT(OP_MAP) | BIT(OP_REMAP) | BIT(OP_SBRK))

/* The injector. The allocator's release thread calls purge beside the test: atomics. */
static atomic_uint fail_mask;    /* operations that fail every time */
static atomic_uint nth_mask;     /* operations counted toward the one failure below */
static atomic_long nth_left;     /* calls of nth_mask before the failing one; <0: none pending */
static atomic_long calls[OPS], injected[OPS];

bool sm_plat_fault_due(int op);
bool sm_plat_fault_due(int op)
{
    atomic_fetch_add(&calls[op], 1);
    bool fail = atomic_load(&fail_mask) & BIT(op);
    if (!fail && (atomic_load(&nth_mask) & BIT(op)) && atomic_fetch_sub(&nth_left, 1) == 0)
        fail = true;
    if (fail)
        atomic_fetch_add(&injected[op], 1);
    return fail;
}
static void faults_off(void)
{
    atomic_store(&fail_mask, 0);
    atomic_store(&nth_mask, 0);
    atomic_store(&nth_left, -1);
}
static long injected_growth(void)
{
    return atomic_load(&injected[OP_MAP]) + atomic_load(&injected[OP_REMAP]) + atomic_load(&injected[OP_SBRK]);
}

/* Blocks: the whole block filled when small, its first and last KiB when larger (the pages
 * between are not touched, so 96 MiB of requests do not cost 96 MiB of RSS). The pattern depends
 * on the offset and a seed, not on the address, so a block realloc moved keeps verifying. */
#define EDGE 1024
static unsigned char pattern_byte(size_t i, unsigned seed)
{
    size_t x = (i * 0x9e3779b1u) ^ ((size_t)seed * 0x85ebca6bu);
    return (unsigned char)(x ^ (x >> 11) ^ (x >> 23));
}
static void fill_range(unsigned char *b, size_t from, size_t to, unsigned seed)
{
    for (size_t i = from; i < to; i++)
        b[i] = pattern_byte(i, seed);
}
static bool range_intact(const unsigned char *b, size_t from, size_t to, unsigned seed)
{
    for (size_t i = from; i < to; i++)
        if (b[i] != pattern_byte(i, seed))
            return false;
    return true;
}
static void fill(void *p, size_t n, unsigned seed)
{
    if (n <= 2 * EDGE) {
        fill_range(p, 0, n, seed);
    } else {
        fill_range(p, 0, EDGE, seed);
        fill_range(p, n - EDGE, n, seed);
    }
}
static bool intact(const void *p, size_t n, unsigned seed)
{
    if (n <= 2 * EDGE)
        return range_intact(p, 0, n, seed);
    return range_intact(p, 0, EDGE, seed) && range_intact(p, n - EDGE, n, seed);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A failed request's answer: NULL with errno ENOMEM, errno set before to something else. */
#define EXPECT_ENOMEM(call_expr, what)                                                         \
    do {                                                                                       \
        errno = 0;                                                                             \
        void *r_ = (call_expr);                                                                \
        CHECKF(r_ == NULL, "%s: served %p with the OS failing", what, r_);                     \
        CHECKF(errno == ENOMEM, "%s: errno %d (%s), not ENOMEM", what, errno, strerror(errno)); \
        if (r_)                                                                                \
            A(free)(r_);                                                                       \
    } while (0)

static void big_requests_fail(void)
{
    size_t small = 200;
    char *keep = A(malloc)(small);
    CHECK(keep != NULL);
    if (!keep)
        return;
    fill(keep, small, 7);
    /* What the warm-up freed goes back first: a cache that joins freed neighbours (decay_cache) may
     * otherwise hold 80 MiB in one block, and this case is about requests only the OS can serve. */
    A(malloc_trim)(0);
    long before = injected_growth();
    atomic_store(&fail_mask, GROWTH);
    for (size_t mib = 80; mib <= 320; mib *= 2) {
        size_t n = (mib << 20) + 4096 * (rnd() % 7);
        char what[64];
        snprintf(what, sizeof what, "malloc(%zu MiB)", mib);
        EXPECT_ENOMEM(A(malloc)(n), what);
        EXPECT_ENOMEM(A(calloc)(1, n), "calloc");
        EXPECT_ENOMEM(A(aligned_alloc)(4096, n), "aligned_alloc");
        EXPECT_ENOMEM(A(memalign)(1 << 16, n), "memalign");
        EXPECT_ENOMEM(A(valloc)(n), "valloc");
        void *out = (void *)0x1234;
        errno = 0;
        int rc = A(posix_memalign)(&out, 2 << 20, n);
        CHECKF(rc == ENOMEM, "posix_memalign: returned %d, not ENOMEM", rc);
        CHECKF(out == (void *)0x1234, "posix_memalign: *out changed on failure");
        errno = 0;
        char *r = A(realloc)(keep, n);
        CHECKF(r == NULL && errno == ENOMEM, "realloc(200 B -> %zu MiB): %p, errno %d", mib, (void *)r, errno);
        if (r)
            keep = r;
        CHECKF(intact(keep, small, 7), "realloc's failure changed the old block");
    }
    faults_off();
    CHECKF(injected_growth() > before, "no map, remap or break call was asked: the path is not hooked");
    /* The allocator is whole: the kept block grows now. */
    char *r = A(realloc)(keep, 3 << 20);
    CHECK(r != NULL);
    if (r) {
        CHECK(range_intact((unsigned char *)r, 0, small, 7));
        A(free)(r);
    }
}

#define MAX_LIVE 20000
static void *live[MAX_LIVE];
static size_t live_size[MAX_LIVE];
static unsigned live_n;

static void free_all_checked(const char *when)
{
    unsigned bad = 0;
    for (unsigned i = 0; i < live_n; i++) {
        if (!intact(live[i], live_size[i], i))
            bad++;
        A(free)(live[i]);
    }
    CHECKF(bad == 0, "%s: %u of %u blocks damaged", when, bad, live_n);
    live_n = 0;
}

static void exhaustion(void)
{
    atomic_store(&fail_mask, GROWTH);
    size_t requested = 0;
    unsigned nulls = 0, bad_errno = 0, streak = 0;
    while (requested < (96u << 20) && live_n < MAX_LIVE && streak < 64) {
        size_t n = rnd() % 8 ? 16 + rnd() % 2000 : 4096 + rnd() % (300 << 10);
        errno = 0;
        void *p = A(malloc)(n);
        if (!p) {
            nulls++;
            streak++;
            bad_errno += errno != ENOMEM;
            continue;
        }
        streak = 0;
        requested += n;
        fill(p, n, live_n);
        live_size[live_n] = n;
        live[live_n++] = p;
    }
    faults_off();
    CHECKF(bad_errno == 0, "%u of %u failed requests left errno other than ENOMEM", bad_errno, nulls);
    printf("# %s exhaustion: %u blocks (%zu KiB) served from held memory, %u refused\n", SM_TEST_NAME,
           live_n, requested >> 10, nulls);
    free_all_checked("after the exhaustion");
}

/* One pass of a mixed workload; returns the requests refused. Every refusal must be NULL + ENOMEM
 * (counted in *bad otherwise); realloc keeps the block it could not move. */
static unsigned workload(unsigned *bad)
{
    unsigned refused = 0;
    static const size_t sizes[] = { 24, 200, 3000, 9000, 40000, 150000, 700000, 3u << 20, 9u << 20 };
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            for (unsigned j = 0; j < 4 && live_n < MAX_LIVE; j++) {
                size_t n = sizes[k] + rnd() % 64;
                errno = 0;
                void *p = (j & 1) ? A(calloc)(1, n) : A(malloc)(n);
                if (!p) {
                    refused++;
                    *bad += errno != ENOMEM;
                    continue;
                }
                if ((j & 1) && !(((unsigned char *)p)[0] == 0 && ((unsigned char *)p)[n - 1] == 0))
                    (*bad)++; /* calloc's block not zeroed */
                fill(p, n, live_n);
                live_size[live_n] = n;
                live[live_n++] = p;
            }
        }
        /* Grow some blocks across the ranges, in steps. */
        for (unsigned i = round; i < live_n; i += 7) {
            size_t n = live_size[i] * 3 + 100;
            if (n > (24u << 20))
                continue;
            size_t keep = live_size[i] < n ? live_size[i] : n;
            if (!intact(live[i], live_size[i], i)) {
                (*bad)++;
                continue;
            }
            errno = 0;
            void *r = A(realloc)(live[i], n);
            if (!r) {
                refused++;
                *bad += errno != ENOMEM;
                *bad += !intact(live[i], live_size[i], i);
                continue;
            }
            /* the old contents moved with the block: its first KiB (all of it if smaller) */
            if (!range_intact(r, 0, keep < EDGE ? keep : EDGE, i))
                (*bad)++;
            live[i] = r;
            live_size[i] = n;
            fill(r, n, i);
        }
        /* Free a third at random. */
        for (unsigned i = 0; i < live_n;) {
            if (rnd() % 3 == 0) {
                *bad += !intact(live[i], live_size[i], i);
                A(free)(live[i]);
                live[i] = live[live_n - 1];
                live_size[i] = live_size[live_n - 1];
                live_n--;
                if (i < live_n)
                    fill(live[i], live_size[i], i); /* its index, hence its seed, changed */
            } else {
                i++;
            }
        }
    }
    return refused;
}

static void nth_call_fails(void)
{
    unsigned bad = 0, refused = 0;
    long before = injected_growth();
    for (long n = 0; n < 40; n++) {
        atomic_store(&nth_left, n);
        atomic_store(&nth_mask, GROWTH);
        refused += workload(&bad);
        faults_off();
        free_all_checked("after a workload with one OS call failing");
        A(malloc_trim)(0); /* give memory back, so the next pass asks the OS again */
    }
    CHECKF(bad == 0, "%u wrong answers (errno not ENOMEM, calloc not zeroed, or a block damaged)", bad);
    printf("# %s nth_call_fails: %ld calls failed, %u requests refused\n", SM_TEST_NAME, injected_growth() - before,
           refused);
    unsigned clean_refused = workload(&bad);
    CHECKF(clean_refused == 0, "%u requests refused with the OS answering again", clean_refused);
    CHECKF(bad == 0, "%u wrong answers with the OS answering again", bad);
    free_all_checked("after the clean workload");
}

static void purge_fails(void)
{
    atomic_store(&fail_mask, BIT(OP_PURGE));
    unsigned bad = 0;
    for (int round = 0; round < 3; round++) {
        (void)workload(&bad);
        free_all_checked("with purges failing");
        A(malloc_trim)(0);
        struct timespec t = { 0, 30 * 1000000 }; /* let a release clock tick */
        nanosleep(&t, NULL);
    }
    faults_off();
    CHECKF(bad == 0, "%u wrong answers with purges failing", bad);
    printf("# %s purge_fails: %ld purges failed\n", SM_TEST_NAME, atomic_load(&injected[OP_PURGE]));
}

/* The break refuses to move (RLIMIT_DATA, a mapping above it, valgrind's fixed break segment):
 * instances over brk_heap go on in mapped pages; the others never ask for the break. */
static void break_refused(void)
{
    atomic_store(&fail_mask, BIT(OP_SBRK));
    unsigned bad = 0;
    unsigned refused = workload(&bad);
    faults_off();
    CHECKF(refused == 0 && bad == 0, "%u refused, %u wrong with only the break refused (%ld sbrk calls failed)",
           refused, bad, atomic_load(&injected[OP_SBRK]));
    free_all_checked("with the break refused");
    printf("# %s break_refused: %ld sbrk calls failed\n", SM_TEST_NAME,
           atomic_load(&injected[OP_SBRK]));
}

static void usable_after(void)
{
    faults_off();
    unsigned bad = 0;
    unsigned refused = workload(&bad);
    CHECKF(refused == 0 && bad == 0, "%u refused, %u wrong", refused, bad);
    free_all_checked("at the end");
    void *p = NULL;
    CHECK(A(posix_memalign)(&p, 1 << 21, 5u << 20) == 0 && p && ((uintptr_t)p & ((1u << 21) - 1)) == 0);
    if (p) {
        fill(p, 5u << 20, 3);
        CHECK(intact(p, 5u << 20, 3));
        A(free)(p);
    }
}

int main(void)
{
    check_begin("faults/" SM_TEST_NAME);
    faults_off();
    /* Warm up: the allocator starts and holds a little of every range. */
    unsigned bad = 0;
    (void)workload(&bad);
    free_all_checked("warm-up");
    RUN_CASE(big_requests_fail);
    RUN_CASE(exhaustion);
    RUN_CASE(nth_call_fails);
    RUN_CASE(purge_fails);
    RUN_CASE(break_refused);
    RUN_CASE(usable_after);
    return check_end();
}
