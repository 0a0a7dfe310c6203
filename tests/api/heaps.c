/* First-class heaps through a preloaded instance (tests/api/heaps.sh runs it with
 * LD_PRELOAD=lib<inst>.so): every block filled with a pattern and checked; the plain calls
 * (free, free_sized, realloc, malloc_usable_size, C++-style sized frees) on heap blocks; reset,
 * destroy, limits, a heap inside the caller's memory, threads sharing a heap, fork, the spec's two
 * spellings and its errors; double and invalid frees reported, counted once. The API is resolved
 * with dlsym, so glibc alone fails with one line per case. usage: heaps [case] */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/sunmao/heap.h"
#include "tests/support/check.h"

#define API(name) static __typeof__(name) *p_##name
API(sunmao_heap_create);
API(sunmao_heap_create_in);
API(sunmao_heap_destroy);
API(sunmao_heap_reset);
API(sunmao_heap_malloc);
API(sunmao_heap_calloc);
API(sunmao_heap_aligned_alloc);
API(sunmao_heap_realloc);
API(sunmao_heap_free);
API(sunmao_heap_of);
API(sunmao_heap_stats);
static void (*p_free_sized)(void *, size_t);
static void (*p_stats_print)(void (*)(void *, const char *), void *, const char *);
static int (*p_mallctl)(const char *, void *, size_t *, void *, size_t);

static bool resolve(void)
{
#define R(name) (p_##name = (__typeof__(p_##name))dlsym(RTLD_DEFAULT, #name)) != NULL
    return R(sunmao_heap_create) && R(sunmao_heap_create_in) && R(sunmao_heap_destroy) && R(sunmao_heap_reset) &&
           R(sunmao_heap_malloc) && R(sunmao_heap_calloc) && R(sunmao_heap_aligned_alloc) &&
           R(sunmao_heap_realloc) && R(sunmao_heap_free) && R(sunmao_heap_of) && R(sunmao_heap_stats) && R(free_sized) &&
           (p_stats_print = (__typeof__(p_stats_print))dlsym(RTLD_DEFAULT, "sunmao_stats_print")) != NULL &&
           (p_mallctl = (__typeof__(p_mallctl))dlsym(RTLD_DEFAULT, "sunmao_mallctl")) != NULL;
#undef R
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void fill(void *p, size_t n, unsigned seed)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(((uintptr_t)p >> 4) + i * 7 + seed);
}
static bool filled(const void *p, size_t n, unsigned seed)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(((uintptr_t)p >> 4) + i * 7 + seed))
            return false;
    return true;
}

/* The same without the address, for contents that move (realloc). */
static void fill_moving(void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)p)[i] = (unsigned char)(i * 11 + seed);
}
static bool filled_moving(const void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != (unsigned char)(i * 11 + seed))
            return false;
    return true;
}
/* through a volatile pointer: the compiler does not see the frees the cases make on purpose */
static void (*volatile release)(void *) = free;

static struct sunmao_heap_stats stats_of(sunmao_heap_t *h)
{
    struct sunmao_heap_stats s;
    memset(&s, 0xff, sizeof s);
    CHECK(p_sunmao_heap_stats(h, &s) == 0);
    return s;
}

enum { N = 6000 };
static void *blk[N];
static size_t len[N];

/* Random sizes to 5000 B (and some to 300 KiB), half freed in random order, refilled, all checked;
 * the statistics follow the usable sizes exactly. */
static void tlsf_fill_free_refill(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create(NULL);
    CHECK(h != NULL);
    if (!h)
        return;
    for (int round = 0; round < 3; round++) {
        size_t usable_sum = 0, live = 0;
        for (int i = 0; i < N; i++) {
            len[i] = i % 97 == 0 ? 1 + next_rand() % (300u << 10) : 1 + next_rand() % 5000;
            blk[i] = p_sunmao_heap_malloc(h, len[i]);
            CHECKF(blk[i] && ((uintptr_t)blk[i] & 15) == 0, "block %d of %zu bytes: %p", i, len[i], blk[i]);
            if (!blk[i])
                return;
            CHECK(p_sunmao_heap_of(blk[i]) == h);
            CHECK(malloc_usable_size(blk[i]) >= len[i]);
            fill(blk[i], len[i], (unsigned)i);
        }
        for (int i = 0; i < N; i++)
            if (next_rand() & 1) {
                if (i & 2)
                    free(blk[i]);
                else
                    p_sunmao_heap_free(h, blk[i]);
                blk[i] = NULL;
            }
        for (int i = 0; i < N; i++) {
            if (!blk[i]) {
                len[i] = 1 + next_rand() % 3000;
                blk[i] = p_sunmao_heap_malloc(h, len[i]);
                CHECK(blk[i] != NULL);
                fill(blk[i], len[i], (unsigned)i);
            }
            usable_sum += malloc_usable_size(blk[i]);
            live++;
        }
        struct sunmao_heap_stats s = stats_of(h);
        CHECKF(s.allocated == usable_sum && s.blocks == live, "allocated %zu (want %zu), blocks %zu (want %zu)",
               s.allocated, usable_sum, s.blocks, live);
        for (int i = 0; i < N; i++) {
            CHECKF(filled(blk[i], len[i], (unsigned)i), "block %d (%zu bytes) changed", i, len[i]);
            free(blk[i]);
        }
        s = stats_of(h);
        CHECKF(s.allocated == 0 && s.blocks == 0, "after freeing all: allocated %zu, blocks %zu", s.allocated, s.blocks);
        CHECKF(s.mapped <= (2u << 20) + (1u << 20), "empty heap still maps %zu bytes", s.mapped);
    }
    p_sunmao_heap_destroy(h);
}

/* realloc keeps a block in its heap, in place where the next block is free; contents kept. */
static void plain_calls_route_to_the_heap(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create("kind:tlsf");
    CHECK(h != NULL);
    if (!h)
        return;
    char *p = p_sunmao_heap_malloc(h, 24);
    fill_moving(p, 24, 1);
    for (size_t n = 40; n <= 40000; n += n / 3) {
        char *q = realloc(p, n);
        CHECKF(q && p_sunmao_heap_of(q) == h, "realloc to %zu left the heap", n);
        CHECKF(filled_moving(q, 24, 1), "realloc to %zu lost the contents", n);
        CHECK(malloc_usable_size(q) >= n);
        p = q;
    }
    /* a block at the end of the heap's memory grows in place */
    char *a = p_sunmao_heap_malloc(h, 64);
    void *grown = realloc(a, 4000);
    CHECK(grown == a);
    free(grown);
    free(p);
    /* sized frees (free_sized, what C++ sized delete calls) of heap blocks */
    for (int i = 0; i < 200; i++) {
        void *x = p_sunmao_heap_malloc(h, 48);
        p_free_sized(x, 48);
    }
    struct sunmao_heap_stats s = stats_of(h);
    CHECKF(s.blocks == 0 && s.frees == s.allocs, "blocks %zu, allocs %llu, frees %llu", s.blocks,
           (unsigned long long)s.allocs, (unsigned long long)s.frees);
    /* and malloc's blocks are not heaps' */
    void *m = malloc(48);
    CHECK(p_sunmao_heap_of(m) == NULL);
    /* sunmao_heap_realloc moves malloc's block into the heap */
    fill_moving(m, 48, 3);
    void *moved = p_sunmao_heap_realloc(h, m, 100);
    CHECK(moved && p_sunmao_heap_of(moved) == h && filled_moving(moved, 48, 3));
    free(moved);
    p_sunmao_heap_destroy(h);
}

/* region: bump allocation, the last block's free gives its memory back, reset starts over. */
static void region_bump_and_reset(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create("region(chunk=64KB)");
    CHECK(h != NULL);
    if (!h)
        return;
    char *a = p_sunmao_heap_malloc(h, 100), *b = p_sunmao_heap_malloc(h, 100);
    CHECKF(b > a && (size_t)(b - a) == 112, "second block at %td from the first", b - a);
    p_sunmao_heap_free(h, b);
    char *c = p_sunmao_heap_malloc(h, 50);
    CHECK(c == b); /* the last block's memory came back */
    uintptr_t c_at = (uintptr_t)c;
    CHECK((uintptr_t)realloc(c, 1000) == c_at); /* the last block grows in place */
    void *big = p_sunmao_heap_malloc(h, 200000); /* a span of its own */
    CHECK(big && p_sunmao_heap_of(big) == h);
    fill(big, 200000, 9);
    char *d = p_sunmao_heap_malloc(h, 16);
    CHECKF((uintptr_t)d > c_at && (uintptr_t)d - c_at < 2048, "the big block moved the current span: %p", (void *)d);
    CHECK(filled(big, 200000, 9));
    struct sunmao_heap_stats s = stats_of(h);
    size_t mapped_with_big = s.mapped;
    free(big); /* its span goes back */
    s = stats_of(h);
    CHECKF(s.mapped + 200000 <= mapped_with_big, "mapped %zu, with the big block %zu", s.mapped, mapped_with_big);
    for (int i = 0; i < 5000; i++) {
        blk[i] = p_sunmao_heap_malloc(h, 1 + i % 200);
        fill(blk[i], 1 + i % 200, (unsigned)i);
    }
    for (int i = 0; i < 5000; i++)
        CHECK(filled(blk[i], 1 + i % 200, (unsigned)i));
    p_sunmao_heap_reset(h);
    p_sunmao_heap_reset(h); /* what the first cycle used is kept once, then given back */
    s = stats_of(h);
    CHECKF(s.allocated == 0 && s.blocks == 0 && s.resets == 2 && s.mapped <= (64u << 10), "after reset: %zu %zu %llu %zu",
           s.allocated, s.blocks, (unsigned long long)s.resets, s.mapped);
    char *e = p_sunmao_heap_malloc(h, 100);
    CHECK(e && p_sunmao_heap_of(e) == h);
    fill(e, 100, 5);
    CHECK(filled(e, 100, 5));
    p_sunmao_heap_destroy(h);
}

/* reset of a tlsf heap with many live blocks; destroy forgets every page. */
static void reset_then_destroy(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create("kind:tlsf,chunk:256KB,name:t");
    CHECK(h != NULL);
    if (!h)
        return;
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < N; i++) {
            blk[i] = p_sunmao_heap_malloc(h, 1 + (size_t)(i * 37) % 2000);
            fill(blk[i], 1 + (size_t)(i * 37) % 2000, (unsigned)(i + r));
        }
        for (int i = 0; i < N; i++)
            CHECK(filled(blk[i], 1 + (size_t)(i * 37) % 2000, (unsigned)(i + r)));
        struct sunmao_heap_stats s = stats_of(h);
        size_t used = s.mapped;
        p_sunmao_heap_reset(h);
        s = stats_of(h);
        CHECKF(s.blocks == 0 && s.allocated == 0 && s.mapped == used, "after reset %d: blocks %zu mapped %zu of %zu", r,
               s.blocks, s.mapped, used);
        p_sunmao_heap_reset(h);
        s = stats_of(h);
        CHECKF(s.mapped <= (256u << 10), "after an idle cycle %d: mapped %zu", r, s.mapped);
    }
    void *kept = p_sunmao_heap_malloc(h, 10);
    p_sunmao_heap_destroy(h);
    CHECK(p_sunmao_heap_of(kept) == NULL);
}

/* Two heaps (and malloc) side by side: a reset or a destroy of one leaves the other's blocks and
 * malloc's intact, and each block stays its own heap's. */
static void heaps_are_isolated(void)
{
    const char *kinds[] = { "tlsf", "region" };
    for (int k = 0; k < 2; k++) {
        sunmao_heap_t *a = p_sunmao_heap_create(kinds[k]), *b = p_sunmao_heap_create(kinds[1 - k]);
        CHECK(a && b);
        if (!a || !b)
            return;
        enum { M = 2000 };
        static void *va[M], *vb[M], *vm[M];
        for (int i = 0; i < M; i++) {
            va[i] = p_sunmao_heap_malloc(a, 1 + (size_t)i % 700);
            vb[i] = p_sunmao_heap_malloc(b, 1 + (size_t)i % 500);
            vm[i] = malloc(1 + (size_t)i % 300);
            fill(va[i], 1 + (size_t)i % 700, 1);
            fill(vb[i], 1 + (size_t)i % 500, 2);
            fill(vm[i], 1 + (size_t)i % 300, 3);
            CHECK(p_sunmao_heap_of(va[i]) == a && p_sunmao_heap_of(vb[i]) == b && p_sunmao_heap_of(vm[i]) == NULL);
        }
        p_sunmao_heap_reset(a);
        for (int i = 0; i < M; i++) { /* a's memory again, written over */
            va[i] = p_sunmao_heap_malloc(a, 1 + (size_t)i % 700);
            memset(va[i], 0xee, 1 + (size_t)i % 700);
        }
        for (int i = 0; i < M; i++) {
            CHECKF(filled(vb[i], 1 + (size_t)i % 500, 2), "%s: heap b's block %d changed by a's reset", kinds[k], i);
            CHECKF(filled(vm[i], 1 + (size_t)i % 300, 3), "%s: malloc's block %d changed by a's reset", kinds[k], i);
        }
        p_sunmao_heap_destroy(a);
        for (int i = 0; i < M; i++) {
            CHECK(filled(vb[i], 1 + (size_t)i % 500, 2) && filled(vm[i], 1 + (size_t)i % 300, 3));
            free(vm[i]);
        }
        p_sunmao_heap_destroy(b);
    }
}

static void limit_refuses_then_recovers(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create("kind:tlsf,chunk:64KB,limit:256KB");
    CHECK(h != NULL);
    if (!h)
        return;
    int n = 0;
    void *v[64];
    while (n < 64 && (v[n] = p_sunmao_heap_malloc(h, 30000)) != NULL)
        n++;
    CHECKF(n >= 4 && n < 64, "%d blocks of 30000 under a 256 KiB limit", n);
    errno = 0;
    CHECK(p_sunmao_heap_malloc(h, 30000) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(p_sunmao_heap_malloc(h, (size_t)1 << 40) == NULL && errno == ENOMEM); /* beyond the limit at once */
    struct sunmao_heap_stats s = stats_of(h);
    CHECK(s.refused >= 1 && s.mapped <= (256u << 10));
    free(v[--n]);
    CHECK((v[n] = p_sunmao_heap_malloc(h, 30000)) != NULL);
    for (int i = 0; i <= n; i++)
        free(v[i]);
    p_sunmao_heap_destroy(h);
}

/* A heap inside the caller's memory: every block inside it, blocks larger than the chunk too;
 * nothing mapped. */
static void heap_in_caller_memory(void)
{
    static char pool[1 << 20] __attribute__((aligned(4096)));
    const char *specs[] = { "tlsf(chunk=64KB)", "region(chunk=64KB)" };
    for (int k = 0; k < 2; k++) {
        sunmao_heap_t *h = p_sunmao_heap_create_in(pool, sizeof pool, specs[k]);
        CHECK(h != NULL);
        if (!h)
            return;
        void *big = p_sunmao_heap_malloc(h, 600u << 10); /* above the chunk: the range serves it */
        CHECKF(big && (char *)big >= pool && (char *)big + (600u << 10) <= pool + sizeof pool && p_sunmao_heap_of(big) == h,
               "%s: a 600 KiB block: %p", specs[k], big);
        free(big);
        if (k == 1)
            p_sunmao_heap_reset(h); /* a region's memory comes back at reset */
        int n = 0;
        void *v[4096];
        while (n < 4096 && (v[n] = p_sunmao_heap_malloc(h, 200 + (size_t)n % 300)) != NULL) {
            CHECK((char *)v[n] >= pool && (char *)v[n] + 200 + n % 300 <= pool + sizeof pool);
            fill(v[n], 200 + (size_t)n % 300, (unsigned)n);
            n++;
        }
        CHECKF(n > 1500 && n < 4096, "%s: %d blocks in 1 MiB", specs[k], n);
        for (int i = 0; i < n; i++)
            CHECK(filled(v[i], 200 + (size_t)i % 300, (unsigned)i));
        for (int i = 0; i < n; i++)
            free(v[i]);
        struct sunmao_heap_stats s = stats_of(h);
        CHECK(s.blocks == 0 && s.mapped <= sizeof pool);
        p_sunmao_heap_destroy(h);
        CHECK(p_sunmao_heap_of(pool + 8192) == NULL);
    }
    CHECK(p_sunmao_heap_create_in(pool, 256, NULL) == NULL && errno == EINVAL);
    CHECK(p_sunmao_heap_create_in(pool, (size_t)1 << 40, NULL) == NULL && errno == EINVAL); /* above 64 GiB */
    /* a heap inside another heap's block: its blocks are its own, and the block is the outer
     * heap's again once the inner one is destroyed */
    sunmao_heap_t *outer = p_sunmao_heap_create(NULL);
    char *range = p_sunmao_heap_aligned_alloc(outer, 4096, 256u << 10);
    sunmao_heap_t *inner = p_sunmao_heap_create_in(range, 256u << 10, "region");
    CHECK(outer && range && inner);
    void *x = p_sunmao_heap_malloc(inner, 100);
    CHECK(p_sunmao_heap_of(x) == inner);
    free(x);
    p_sunmao_heap_destroy(inner);
    CHECK(p_sunmao_heap_of(range) == outer && p_sunmao_heap_of(range + (128u << 10)) == outer);
    free(range);
    struct sunmao_heap_stats s = stats_of(outer);
    CHECK(s.blocks == 0);
    p_sunmao_heap_destroy(outer);
}

/* A terabyte from a heap without a limit: served (reserved, not touched) or refused at once,
 * never a wait proportional to its size; the registry holds one page of it. */
static void huge_request_is_quick(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create(NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    char *p = p_sunmao_heap_malloc(h, (size_t)1 << 40);
    int err = errno;
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    CHECKF(s < 1.0, "a 1 TiB request took %.2f s", s);
    if (p) {
        CHECK(p_sunmao_heap_of(p) == h && p_sunmao_heap_of(p + ((size_t)1 << 39)) == NULL);
        p[0] = 1;
        free(p);
    } else {
        CHECK(err == ENOMEM);
    }
    CHECK(p_sunmao_heap_malloc(h, SIZE_MAX / 2) == NULL && errno == ENOMEM);
    p_sunmao_heap_destroy(h);
}

static void aligned_blocks(void)
{
    const char *specs[] = { "tlsf", "region" };
    for (int k = 0; k < 2; k++) {
        sunmao_heap_t *h = p_sunmao_heap_create(specs[k]);
        for (size_t a = 32; a <= (64u << 10); a <<= 1) {
            void *p = p_sunmao_heap_aligned_alloc(h, a, 100 + a / 2);
            CHECKF(p && ((uintptr_t)p & (a - 1)) == 0, "%s: align %zu gave %p", specs[k], a, p);
            fill(p, 100 + a / 2, 2);
            CHECK(filled(p, 100 + a / 2, 2));
            free(p);
        }
        errno = 0;
        CHECK(p_sunmao_heap_aligned_alloc(h, 48, 10) == NULL && errno == EINVAL);
        char *z = p_sunmao_heap_calloc(h, 100, 10);
        CHECK(z != NULL);
        for (int i = 0; z && i < 1000; i++)
            CHECK(z[i] == 0);
        p_sunmao_heap_destroy(h);
    }
}

static sunmao_heap_t *shared;
static void *volatile handoff[4][512];
static void *shared_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    long bad = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 512; i++) {
            size_t n = 16 + (size_t)(i * 13 + me) % 700;
            void *p = p_sunmao_heap_malloc(shared, n);
            if (!p)
                return (void *)-1;
            fill(p, n, (unsigned)me);
            void *old = __atomic_exchange_n(&handoff[(me + 1) % 4][i], p, __ATOMIC_ACQ_REL);
            if (old) /* another thread's block, freed here with plain free() */
                free(old);
        }
        for (int i = 0; i < 512; i++) {
            void *p = __atomic_exchange_n(&handoff[me][i], NULL, __ATOMIC_ACQ_REL);
            if (p) {
                size_t n = 16 + (size_t)(i * 13 + (me + 3) % 4) % 700;
                bad += !filled(p, n, (unsigned)((me + 3) % 4));
                free(p);
            }
        }
    }
    return (void *)bad;
}
static void threads_share_a_heap(void)
{
    shared = p_sunmao_heap_create("tlsf(chunk=128KB)");
    CHECK(shared != NULL);
    if (!shared)
        return;
    check_threads(4, shared_worker);
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 512; i++)
            if (handoff[t][i])
                free(handoff[t][i]), handoff[t][i] = NULL;
    struct sunmao_heap_stats s = stats_of(shared);
    CHECKF(s.blocks == 0 && s.allocated == 0 && s.allocs == s.frees, "blocks %zu allocated %zu", s.blocks, s.allocated);
    p_sunmao_heap_destroy(shared);
}

static void *fork_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++)
        free(p_sunmao_heap_malloc(shared, 1 + (size_t)i % 900));
    return NULL;
}
static void fork_while_threads_use_it(void)
{
    shared = p_sunmao_heap_create(NULL);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, fork_worker, NULL);
    for (int f = 0; f < 10; f++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 1000; i++) {
                void *p = p_sunmao_heap_malloc(shared, 64);
                if (!p)
                    _exit(2);
                fill(p, 64, 1);
                if (!filled(p, 64, 1))
                    _exit(3);
                free(p);
            }
            _exit(0);
        }
        int st = -1;
        waitpid(pid, &st, 0);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork %d: child status %d", f, st);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    p_sunmao_heap_destroy(shared);
}

static void specs_accepted_and_refused(void)
{
    const char *good[] = { NULL, "", "tlsf", "region", "kind:region", " kind : tlsf , chunk : 2MiB ",
                           "region(chunk=256KB, limit=64MB, name=req)", "tlsf()", "kind:tlsf,retain:0,limit:0x100000" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        sunmao_heap_t *h = p_sunmao_heap_create(good[i]);
        CHECKF(h != NULL, "spec \"%s\" refused", good[i] ? good[i] : "(null)");
        if (h) {
            void *p = p_sunmao_heap_malloc(h, 100);
            CHECK(p != NULL);
            p_sunmao_heap_destroy(h);
        }
    }
    const char *bad[] = { "kind:slab", "chunk:1KB", "chunk:12XB", "colour:red", "region(chunk=64KB", "tlsf(chunk:1MB)",
                          "kind:tlsf,", "name:abcdefghijklmnopqrstuvwxyz0123456789", "region() x", "limit:-1" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        errno = 0;
        sunmao_heap_t *h = p_sunmao_heap_create(bad[i]);
        CHECKF(h == NULL && errno == EINVAL, "spec \"%s\": %p, errno %d", bad[i], (void *)h, errno);
    }
}

/* A double free and an interior pointer are reported (the script counts the lines) and change
 * nothing: the counts stay exact and the heap's other blocks intact. */
static void bad_frees_reported_once(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create(NULL);
    char *a = p_sunmao_heap_malloc(h, 100), *b = p_sunmao_heap_malloc(h, 100);
    fill(b, 100, 4);
    release(a);
    release(a);
    p_sunmao_heap_free(h, b + 16);
    struct sunmao_heap_stats s = stats_of(h);
    CHECKF(s.frees == 1 && s.blocks == 1, "frees %llu blocks %zu", (unsigned long long)s.frees, s.blocks);
    CHECK(filled(b, 100, 4));
    char *c = p_sunmao_heap_malloc(h, 100), *d = p_sunmao_heap_malloc(h, 100);
    CHECK(c != d && c != b && d != b);
    free(b), free(c), free(d);
    p_sunmao_heap_destroy(h);
}

/* A handle used after its heap's destroy: reported (the script counts the line), NULL + EINVAL,
 * no fault; a new heap works. */
static void stale_handle_reported(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create(NULL);
    p_sunmao_heap_destroy(h);
    errno = 0;
    CHECK(p_sunmao_heap_malloc(h, 10) == NULL && errno == EINVAL);
    struct sunmao_heap_stats s;
    CHECK(p_sunmao_heap_stats(h, &s) == EINVAL);
    sunmao_heap_t *again = p_sunmao_heap_create(NULL);
    void *p = p_sunmao_heap_malloc(again, 10);
    CHECK(p && p_sunmao_heap_of(p) == again);
    p_sunmao_heap_destroy(again);
}

static char printed[16384];
static void collect(void *opaque, const char *s)
{
    (void)opaque;
    strncat(printed, s, sizeof printed - strlen(printed) - 1);
}
/* sunmao_stats_print lists each heap with its figures (text and JSON), and `h` leaves them out. */
static void stats_list_the_heaps(void)
{
    sunmao_heap_t *h = p_sunmao_heap_create("tlsf(name=tenant-a, limit=8MB)");
    for (int i = 0; i < 100; i++)
        blk[i] = p_sunmao_heap_malloc(h, 100);
    for (int i = 0; i < 40; i++)
        free(blk[i]);
    struct sunmao_heap_stats s = stats_of(h);
    char want[256];
    snprintf(want, sizeof want, "  %-20s %-6s %14zu %14zu %12zu %14zu %12llu %12llu %8llu %8llu\n", "tenant-a", "tlsf",
             s.allocated, s.peak_allocated, s.blocks, s.mapped, 100ull, 40ull, 0ull, 0ull);
    printed[0] = 0;
    p_stats_print(collect, NULL, "gab");
    CHECKF(strstr(printed, "\nheaps: ") && strstr(printed, want), "no row \"%s\" in: %s", want, printed);
    printed[0] = 0;
    p_stats_print(collect, NULL, "Jgab");
    snprintf(want, sizeof want, "{\"name\": \"tenant-a\", \"kind\": \"tlsf\", \"allocated\": %zu, ", s.allocated);
    CHECKF(strstr(printed, want), "no JSON row %s in: %s", want, printed);
    printed[0] = 0;
    p_stats_print(collect, NULL, "gabh");
    CHECK(!strstr(printed, "tenant-a"));
    /* mallctl's totals: this heap is the only one */
    size_t count = 0, allocated = 0, mapped = 0, len = sizeof(size_t);
    CHECK(p_mallctl("heaps.count", &count, &len, NULL, 0) == 0 && count == 1);
    CHECK(p_mallctl("heaps.allocated", &allocated, &len, NULL, 0) == 0 && allocated == s.allocated);
    CHECK(p_mallctl("heaps.mapped", &mapped, &len, NULL, 0) == 0 && mapped == s.mapped);
    for (int i = 40; i < 100; i++)
        free(blk[i]);
    p_sunmao_heap_destroy(h);
}

int main(int argc, char **argv)
{
    check_begin("heaps");
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!resolve()) {
        printf("not ok heaps: resolve: the sunmao_heap API is not in this process (no sunmao library preloaded)\n");
        return 1;
    }
#define CASE(fn) if (!only || strcmp(only, #fn) == 0) RUN_CASE(fn)
    CASE(tlsf_fill_free_refill);
    CASE(plain_calls_route_to_the_heap);
    CASE(region_bump_and_reset);
    CASE(reset_then_destroy);
    CASE(heaps_are_isolated);
    CASE(limit_refuses_then_recovers);
    CASE(heap_in_caller_memory);
    CASE(aligned_blocks);
    CASE(huge_request_is_quick);
    CASE(threads_share_a_heap);
    CASE(fork_while_threads_use_it);
    CASE(specs_accepted_and_refused);
    CASE(stats_list_the_heaps);
    if (only && strcmp(only, "bad_frees_reported_once") == 0)
        RUN_CASE(bad_frees_reported_once);
    if (only && strcmp(only, "stale_handle_reported") == 0)
        RUN_CASE(stale_handle_reported);
    return check_end();
}
