/* Unit test of the guard add-on layer over the fake next layer (tests/support/fake_next.h):
 *     g1 (every request that fits sampled, 8 slots) :: fk
 *     g3 (every request, slots of 3 pages) :: fk3      gc (every request; children only) :: fkc
 *     g4 (one request in 4) :: fk4
 * and over a next layer with capability HIT, a real thread cache, driven through the hit paths as
 * the socket drives them (hit, else the miss with the request's one context), with a pass-through
 * between them that counts the hit-path calls reaching the cache:
 *     gh (one request in 4) :: hch (counts) :: tch :: slh (slab_lk) :: fkh
 *     ge (every request, 8 slots) :: hce (counts) :: tce :: sle (slab_lk) :: fke
 * Blocks are filled with patterns and verified; accessibility is probed with write(2) from the
 * address into a pipe (EFAULT: inaccessible) so no fault is needed to see a guard page. The faults
 * themselves are made in forked children whose stderr comes back through a pipe: one report line,
 * naming the kind, the address, the block and the call sites the layer recorded, then death by the
 * signal (or the previous handler, when the program had one). Errors reported through the err slot
 * are counted exactly (tests/support/err_record.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER fk3
#include "tests/support/fake_next.h"
#define SM_LAYER fk4
#include "tests/support/fake_next.h"
#define SM_LAYER fkc
#include "tests/support/fake_next.h"

#define SM_LAYER g1
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 1
#define SM_OPT_SLOTS 8
#include <sunmao/layers/addon/guard.h>

#define SM_LAYER g3
#define SM_NEXT fk3
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 1
#define SM_OPT_SLOTS 4
#define SM_OPT_MAX_SIZE (12u << 10)
#include <sunmao/layers/addon/guard.h>

#define SM_LAYER g4
#define SM_NEXT fk4
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 4
#include <sunmao/layers/addon/guard.h>

#define SM_LAYER gc
#define SM_NEXT fkc
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 1
#include <sunmao/layers/addon/guard.h>

/* Over a thread cache: thread_cache :: slab_lk :: fake, as tests/unit/thread_cache.c composes them. */
#define SM_LAYER fkh
#include "tests/support/fake_next.h"
#define SM_LAYER slh
#define SM_NEXT fkh
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tch
#define SM_NEXT slh
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>

/* A pass-through that offers what its next layer offers and counts, per thread, the hit-path
 * calls crossing it (and how many the hits answered). */
struct hit_calls { unsigned long alloc_hit, alloc_hit_got, alloc_miss, free_hit, free_hit_got, free_miss; };
#define COUNTING_LAYER(L, N)                                                                            \
    static __thread struct hit_calls L##_calls;                                                        \
    enum { L##_thread_safe = N##_thread_safe, L##_min_align = N##_min_align, L##_zeroed = N##_zeroed,  \
           L##_caps = N##_caps };                                                                     \
    static inline int L##_create(void) { return N##_create(); }                                       \
    static inline void *L##_alloc(sm_mctx_t *c) { return N##_alloc(c); }                              \
    static inline void L##_free(sm_mctx_t *c) { N##_free(c); }                                        \
    static inline void *L##_meta_alloc(sm_mctx_t *c) { return N##_meta_alloc(c); }                   \
    static inline void L##_meta_free(sm_mctx_t *c) { N##_meta_free(c); }                              \
    static inline bool L##_getmeta(sm_mctx_t *c) { return N##_getmeta(c); }                          \
    static inline bool L##_resize(sm_mctx_t *c, size_t n) { return N##_resize(c, n); }                \
    static inline bool L##_move(sm_mctx_t *c, size_t n) { return N##_move(c, n); }                  \
    static inline bool L##_purge(sm_mctx_t *c) { return N##_purge(c); }                              \
    static inline void L##_release(sm_release_t *r) { N##_release(r); }                               \
    static inline void L##_thread_exit(void) { N##_thread_exit(); }                                   \
    static inline void L##_stats(sm_stats_t *s) { N##_stats(s); }                                     \
    static inline void L##_fork_prepare(void) { N##_fork_prepare(); }                                 \
    static inline void L##_fork_parent(void) { N##_fork_parent(); }                                   \
    static inline void L##_fork_child(void) { N##_fork_child(); }                                    \
    static inline void *L##_alloc_hit(size_t n)                                                       \
    {                                                                                                 \
        void *p = N##_alloc_hit(n);                                                                   \
        L##_calls.alloc_hit++;                                                                        \
        L##_calls.alloc_hit_got += p != NULL;                                                         \
        return p;                                                                                     \
    }                                                                                                 \
    static inline void *L##_alloc_miss(sm_mctx_t *c)                                                  \
    {                                                                                                 \
        L##_calls.alloc_miss++;                                                                       \
        return N##_alloc_miss(c);                                                                     \
    }                                                                                                 \
    static inline bool L##_free_hit(void *p, size_t n, unsigned f, uintptr_t *w)                      \
    {                                                                                                 \
        bool got = N##_free_hit(p, n, f, w);                                                          \
        L##_calls.free_hit++;                                                                         \
        L##_calls.free_hit_got += got;                                                                \
        return got;                                                                                   \
    }                                                                                                 \
    static inline void L##_free_miss(sm_mctx_t *c)                                                    \
    {                                                                                                 \
        L##_calls.free_miss++;                                                                        \
        N##_free_miss(c);                                                                             \
    }
COUNTING_LAYER(hch, tch)

#define SM_LAYER gh
#define SM_NEXT hch
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 4
#include <sunmao/layers/addon/guard.h>

#define SM_LAYER fke
#include "tests/support/fake_next.h"
#define SM_LAYER sle
#define SM_NEXT fke
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tce
#define SM_NEXT sle
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>
COUNTING_LAYER(hce, tce)
#define SM_LAYER ge
#define SM_NEXT hce
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 1
#define SM_OPT_SLOTS 8
#include <sunmao/layers/addon/guard.h>

/* fkm: the fake with a move (capability MOVE), as mmap_heap's remap gives one to a large block. */
#define SM_LAYER fkm
#define FAKE_MOVE 1
#include "tests/support/fake_next.h"
#define SM_LAYER gm
#define SM_NEXT fkm
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_SAMPLE_EVERY 1
#define SM_OPT_SLOTS 4
#include <sunmao/layers/addon/guard.h>

/* HIT and MOVE where the next layer has them, and nothing else; nothing over the fake. */
_Static_assert((tch_caps & SM_CAP_HIT) && (int)hch_caps == (int)tch_caps, "the thread cache offers HIT");
_Static_assert((int)gh_caps == (int)(tch_caps & (SM_CAP_HIT | SM_CAP_MOVE)) && (int)ge_caps == (int)gh_caps,
               "guard over a thread cache offers HIT, and MOVE if the cache does, only");
_Static_assert(gm_caps == SM_CAP_MOVE, "guard over a layer that moves blocks offers MOVE");
_Static_assert(g1_caps == 0 && g4_caps == 0, "guard over the fake offers nothing");

/* Address and thread sanitizers install a SIGSEGV handler of their own before main. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

#define GALLOC(L, n, a, f) L##_alloc(&(sm_mctx_t){ (n), (a), (f), -1, NULL, 0, NULL, 0 })
#define GFREE(L, p)        L##_free(&(sm_mctx_t){ 0, SM_MIN_ALIGN, 0, -1, (p), 0, NULL, 0 })

static size_t page;
static int probe_fd[2];

/* Whether byte p can be read, asked of the kernel (write(2) from it fails with EFAULT if not). */
static bool readable(const void *p)
{
    ssize_t w = write(probe_fd[1], p, 1);
    if (w == 1) {
        char c;
        CHECK(read(probe_fd[0], &c, 1) == 1);
        return true;
    }
    CHECKF(errno == EFAULT, "write from %p: %s", p, strerror(errno));
    return false;
}

static char *page_end(const char *p) { return (char *)(((uintptr_t)p | (page - 1)) + 1); }

/* An allocation whose caller's return address is known: the second frame the layer records. */
static void *alloc_site;
static __attribute__((noinline)) char *alloc_at_known_site(size_t n)
{
    alloc_site = __builtin_return_address(0);
    char *p = GALLOC(g1, n, SM_MIN_ALIGN, 0);
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
    return p;
}

/* ---- forked children ---- */

struct child { int status; char out[4096]; };

static void run_child(void (*fn)(void), struct child *r)
{
    int fd[2];
    memset(r, 0, sizeof *r);
    if (pipe(fd) != 0) {
        CHECK(!"pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit none = { 0, 0 };
        setrlimit(RLIMIT_CORE, &none); /* the children die of SIGSEGV on purpose */
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        fn();
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < sizeof r->out && (n = read(fd[0], r->out + got, sizeof r->out - 1 - got)) > 0)
        got += (size_t)n;
    close(fd[0]);
    CHECK(waitpid(pid, &r->status, 0) == pid);
}

/* The child died of its fault: by the signal, or (under a sanitizer, whose handler was there
 * first and gets the fault back) by the sanitizer's exit. */
static bool died_of_fault(int status)
{
    if (WIFSIGNALED(status))
        return WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS;
    return UNDER_SANITIZER && WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

static unsigned report_lines(const char *out)
{
    unsigned n = 0;
    for (const char *s = out; (s = strstr(s, "sunmao: guard ")); s++)
        n++;
    return n;
}

static void *volatile target;   /* what the child touches */
static volatile char sink;

static void child_write_target(void) { *(volatile char *)target = 1; }
static void child_read_target(void) { sink = *(volatile char *)target; }

/* The program's own handler, there before the pool: it must see the faults after the report. */
static void prior_handler(int sig)
{
    (void)sig;
    static const char msg[] = "prior handler ran\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(42);
}
static void install_prior(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = prior_handler;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

static void child_prior_then_overflow(void)
{
    install_prior();
    char *p = GALLOC(gc, 16, SM_MIN_ALIGN, 0);
    if (!gc_guard_owns(p))
        _exit(3);
    p[16] = 1;
}

static void child_prior_then_wild(void)
{
    install_prior();
    char *p = GALLOC(gc, 16, SM_MIN_ALIGN, 0); /* maps the pool: the layer's handler goes in */
    if (!gc_guard_owns(p))
        _exit(3);
    char *none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    none[5] = 1;
}

/* Run first, before any pool of this process is mapped (the layer's handler is installed once). */
static void prior_handler_sees_the_fault_after_the_report(void)
{
    struct child r;
    run_child(child_prior_then_overflow, &r);
    CHECKF(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 42, "status %#x, stderr: %s", r.status, r.out);
    CHECKF(report_lines(r.out) == 1 && strstr(r.out, "heap buffer overflow") &&
               strstr(r.out, "prior handler ran") > strstr(r.out, "sunmao: guard gc:"),
           "stderr: %s", r.out);
}

static void faults_outside_the_pool_go_to_the_prior_handler(void)
{
    struct child r;
    run_child(child_prior_then_wild, &r);
    CHECKF(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 42, "status %#x, stderr: %s", r.status, r.out);
    CHECKF(report_lines(r.out) == 0 && strstr(r.out, "prior handler ran"), "stderr: %s", r.out);
}

/* A string of the recorded call sites, as the report prints them. */
static void sites_text(void *p, bool freed, char *buf, size_t n)
{
    void *pcs[8];
    unsigned k = g1_guard_sites(p, freed, pcs, 8);
    size_t at = (size_t)snprintf(buf, n, "; %s at", freed ? "freed" : "allocated");
    for (unsigned i = 0; i < k && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, " %p", pcs[i]);
}

static void overflow_by_one_byte_faults_and_is_reported(void)
{
    char *p = alloc_at_known_site(32);
    CHECK(g1_guard_owns(p) && p + 32 == page_end(p));
    void *pcs[8];
    unsigned k = g1_guard_sites(p, false, pcs, 8);
    CHECKF(k >= 2 && pcs[1] == alloc_site, "%u allocation frames, the second %p, the caller's return address %p", k,
           k >= 2 ? pcs[1] : NULL, alloc_site);
    target = p + 32;
    struct child r;
    run_child(child_write_target, &r);
    char want[256], sites[256];
    snprintf(want, sizeof want, "sunmao: guard g1: heap buffer overflow at %p, 0 bytes after the end of block %p (32 bytes)",
             (void *)(p + 32), (void *)p);
    sites_text(p, false, sites, sizeof sites);
    CHECKF(died_of_fault(r.status), "status %#x, stderr: %s", r.status, r.out);
    CHECKF(report_lines(r.out) == 1 && strstr(r.out, want) && strstr(r.out, sites) && !strstr(r.out, "freed at"),
           "stderr: %swanted: %s%s", r.out, want, sites);
    GFREE(g1, p);
    CHECK(err_total() == 0);
}

static void read_after_free_faults_and_names_the_free_site(void)
{
    char *p = GALLOC(g1, 100, SM_MIN_ALIGN, 0);
    CHECK(g1_guard_owns(p));
    GFREE(g1, p);
    CHECK(!readable(p) && !readable(p + 99));
    target = p + 10;
    struct child r;
    run_child(child_read_target, &r);
    char want[256], alloc_sites[256], free_sites[256];
    snprintf(want, sizeof want, "use after free at %p, 10 bytes into block %p (100 bytes, freed)", (void *)(p + 10), (void *)p);
    sites_text(p, false, alloc_sites, sizeof alloc_sites);
    sites_text(p, true, free_sites, sizeof free_sites);
    CHECKF(died_of_fault(r.status), "status %#x, stderr: %s", r.status, r.out);
    CHECKF(report_lines(r.out) == 1 && strstr(r.out, want) && strstr(r.out, alloc_sites) && strstr(r.out, free_sites) &&
               strlen(free_sites) > strlen("; freed at"),
           "stderr: %swanted: %s%s%s", r.out, want, alloc_sites, free_sites);
    CHECK(err_total() == 0);
}

/* Below a block's page: the guard page before its slot (one-page slots), or its slot's own lower
 * pages (g3's three-page slots). */
static void underflow_below_the_page_faults(void)
{
    char *p = GALLOC(g1, 100, SM_MIN_ALIGN, 0);
    char *below = (char *)((uintptr_t)p & ~(page - 1)) - 1;
    CHECK(g1_guard_owns(p) && !readable(below));
    target = below;
    struct child r;
    run_child(child_write_target, &r);
    char want[256];
    snprintf(want, sizeof want, "heap buffer underflow at %p, %zu bytes before block %p (100 bytes)", (void *)below,
             (size_t)(p - below), (void *)p);
    CHECKF(died_of_fault(r.status), "status %#x, stderr: %s", r.status, r.out);
    CHECKF(report_lines(r.out) == 1 && strstr(r.out, want), "stderr: %swanted: %s", r.out, want);
    GFREE(g1, p);

    char *q = GALLOC(g3, 100, SM_MIN_ALIGN, 0);
    below = (char *)((uintptr_t)q & ~(page - 1)) - 1;
    CHECK(g3_guard_owns(q) && g3_guard_owns(below) && !readable(below) && !readable(below - page));
    target = below - page;
    run_child(child_write_target, &r);
    snprintf(want, sizeof want, "heap buffer underflow at %p, %zu bytes before block %p (100 bytes)",
             (void *)(below - page), (size_t)(q - below + page), (void *)q);
    CHECKF(died_of_fault(r.status) && report_lines(r.out) == 1 && strstr(r.out, want), "status %#x, stderr: %swanted: %s",
           r.status, r.out, want);
    GFREE(g3, q);
    CHECK(err_total() == 0);
}

/* ---- in-process cases ---- */

static void blocks_end_at_the_guard_page(void)
{
    static const size_t sizes[] = { 16, 32, 48, 256, 4000, 4096 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = GALLOC(g1, sizes[i], SM_MIN_ALIGN, 0);
        CHECKF(g1_guard_owns(p) && p + sizes[i] == page_end(p), "%zu bytes at %p", sizes[i], (void *)p);
        CHECK(readable(p) && readable(p + sizes[i] - 1) && !readable(p + sizes[i]));
        GFREE(g1, p);
    }
    /* 13 bytes: the end is 3 bytes short of the page, at the 16-byte alignment. */
    char *p = GALLOC(g1, 13, SM_MIN_ALIGN, 0);
    CHECK(p + 16 == page_end(p) && readable(p + 15) && !readable(p + 16));
    GFREE(g1, p);
    CHECK(err_total() == 0 && fk_obj.allocs == 0);
}

static void fill_pattern_round_trips(void)
{
    enum { LIVE = 6, ROUNDS = 1500 };
    struct { char *p; size_t n, align; unsigned seed; } b[LIVE] = { { 0, 0, 0, 0 } };
    uint64_t x = 88172645463325252ull;
    unsigned long allocs = fk_obj.allocs, served = g1_obj.served;
    for (unsigned r = 0; r < ROUNDS; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned i = (unsigned)(x % LIVE);
        if (b[i].p) {
            CHECKF(check_verify(b[i].p, b[i].n, b[i].seed), "block %p of %zu bytes changed", (void *)b[i].p, b[i].n);
            GFREE(g1, b[i].p);
            b[i].p = NULL;
            continue;
        }
        b[i].n = 1 + (size_t)((x >> 8) % page);
        b[i].align = (size_t)16 << ((x >> 20) % 9); /* 16 .. 4096 */
        b[i].seed = (unsigned)(x >> 32);
        b[i].p = GALLOC(g1, b[i].n, b[i].align, 0);
        char *p = b[i].p;
        sm_mctx_t m = sm_mctx_block(p, 0, 0);
        CHECKF(g1_guard_owns(p) && ((uintptr_t)p & (b[i].align - 1)) == 0 && g1_getmeta(&m) && m.usable == b[i].n &&
                   !strcmp(m.owner, "g1") && page_end(p) - (p + b[i].n) < (ptrdiff_t)b[i].align,
               "%zu bytes aligned to %zu at %p", b[i].n, b[i].align, (void *)p);
        check_fill(p, b[i].n, b[i].seed);
    }
    for (unsigned i = 0; i < LIVE; i++)
        if (b[i].p) {
            CHECK(check_verify(b[i].p, b[i].n, b[i].seed));
            GFREE(g1, b[i].p);
        }
    CHECKF(err_total() == 0 && fk_obj.allocs == allocs && g1_obj.served > served + ROUNDS / 3,
           "%lu errors, %lu passed down, %lu served", err_total(), fk_obj.allocs - allocs, g1_obj.served - served);
}

/* Freed slots are reused least recently freed first, only after the never-used ones. */
static void freed_slots_are_reused_in_fifo_order(void)
{
    char *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = GALLOC(g1, 64, SM_MIN_ALIGN, 0);
    for (int i = 0; i < 8; i++)
        CHECK(g1_guard_owns(p[i]));
    static const int order[8] = { 5, 2, 7, 0, 1, 6, 3, 4 };
    for (int i = 0; i < 8; i++)
        GFREE(g1, p[order[i]]);
    for (int i = 0; i < 8; i++) {
        char *q = GALLOC(g1, 64, SM_MIN_ALIGN, 0);
        CHECKF(q == p[order[i]], "allocation %d got %p, the %d-th freed block was %p", i, (void *)q, i, (void *)p[order[i]]);
        p[order[i]] = q;
    }
    for (int i = 0; i < 8; i++)
        GFREE(g1, p[i]);
    CHECK(err_total() == 0);
}

/* The kernel's mappings that cover any of [lo, hi), from /proc/self/maps. */
static int mappings_over(uintptr_t lo, uintptr_t hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    int n = 0;
    unsigned long a, b;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a < hi && b > lo)
            n++;
    fclose(f);
    return n;
}

/* The guard pages are mappings of their own, so a sampled pair protects a slot's pages without
 * the kernel splitting or merging anything: the pool is 2 x 8 + 1 mappings, whatever is live. */
static void sampled_pairs_leave_the_mappings_alone(void)
{
    char *p = GALLOC(g1, 64, SM_MIN_ALIGN, 0);
    CHECK(g1_guard_owns(p));
    uintptr_t lo = g1_obj.base, hi = lo + g1_obj.span;
    int live = mappings_over(lo, hi);
    GFREE(g1, p);
    int freed = mappings_over(lo, hi);
    char *q[3];
    for (int i = 0; i < 3; i++)
        q[i] = GALLOC(g1, 100, SM_MIN_ALIGN, 0);
    int three = mappings_over(lo, hi);
    for (int i = 0; i < 3; i++)
        GFREE(g1, q[i]);
    CHECKF(live == 17 && freed == 17 && three == 17, "mappings over the pool: %d with a live block, %d after its free, %d with three",
           live, freed, three);
    CHECK(err_total() == 0);
}

static void calloc_of_a_reused_slot_gets_zeroes(void)
{
    char *p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = GALLOC(g1, 200, SM_MIN_ALIGN, 0);
        memset(p[i], 0xAB, 200);
    }
    for (int i = 0; i < 8; i++)
        GFREE(g1, p[i]);
    for (int i = 0; i < 8; i++) {
        sm_mctx_t c = sm_mctx_alloc(200, SM_MIN_ALIGN, SM_F_ZERO);
        p[i] = g1_alloc(&c);
        bool zero = true;
        for (int j = 0; j < 200; j++)
            zero &= p[i][j] == 0;
        CHECKF(g1_guard_owns(p[i]) && zero && (c.flags & SM_F_FRESH), "block %d at %p", i, (void *)p[i]);
    }
    for (int i = 0; i < 8; i++)
        GFREE(g1, p[i]);
    CHECK(err_total() == 0);
}

static void overflow_into_the_slack_is_reported_at_free(void)
{
    err_reset();
    char *p = GALLOC(g1, 13, SM_MIN_ALIGN, 0);
    memset(p, 7, 13);
    for (int j = 13; j < 16; j++)
        p[j] ^= (char)0xff; /* differs from whatever the pattern put there */
    GFREE(g1, p);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu corruption reports, %lu in all",
           err_counts[SM_ERR_CORRUPTION], err_total());
    /* Before the block, in its page. */
    p = GALLOC(g1, 100, SM_MIN_ALIGN, 0);
    p[-1] ^= (char)0xff;
    GFREE(g1, p);
    CHECK(err_counts[SM_ERR_CORRUPTION] == 2 && err_total() == 2);
    /* An intact block: nothing. */
    p = GALLOC(g1, 13, SM_MIN_ALIGN, 0);
    memset(p, 0xff, 13);
    GFREE(g1, p);
    CHECK(err_total() == 2);
    err_reset();
}

static void double_and_interior_frees_are_reported_once(void)
{
    err_reset();
    unsigned long frees = fk_obj.frees;
    char *p = GALLOC(g1, 40, SM_MIN_ALIGN, 0);
    GFREE(g1, p);
    GFREE(g1, p);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu double frees, %lu in all",
           err_counts[SM_ERR_DOUBLE_FREE], err_total());
    err_reset();
    p = GALLOC(g1, 40, SM_MIN_ALIGN, 0);
    GFREE(g1, p + 1);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 1);
    GFREE(g1, (char *)((uintptr_t)p & ~(page - 1)) - 8); /* a guard page */
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 2 && err_total() == 2);
    CHECK(readable(p) && readable(p + 39)); /* still live */
    GFREE(g1, p);
    CHECK(err_total() == 2 && !readable(p) && fk_obj.frees == frees && fk_obj.bad_frees == 0);
    err_reset();
}

static void getmeta_and_resize(void)
{
    err_reset();
    char *p = GALLOC(g1, 100, SM_MIN_ALIGN, 0);
    sm_mctx_t m = sm_mctx_block(p + 16, 0, 0);
    CHECK(!g1_getmeta(&m)); /* inside a block: no block starts there, and no layer below is asked */
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(g1_resize(&r, 50));
    m = sm_mctx_block(p, 0, 0);
    CHECK(g1_getmeta(&m) && m.usable == 50);
    CHECK(g1_resize(&r, (size_t)(page_end(p) - p)) && !g1_resize(&r, (size_t)(page_end(p) - p) + 1));
    CHECK(g1_resize(&r, 60) && err_total() == 0);
    p[60] ^= (char)0xff; /* the new slack */
    GFREE(g1, p);
    CHECK(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1);
    err_reset();
    /* Not the pool's: the next layer answers. */
    char *big = GALLOC(g1, 5000, SM_MIN_ALIGN, 0);
    m = sm_mctx_block(big, 0, 0);
    CHECK(!g1_guard_owns(big) && g1_getmeta(&m) && m.usable == 5000 && !strcmp(m.owner, "fk"));
    GFREE(g1, big);
    CHECK(fk_obj.bad_frees == 0 && fk_obj.live_blocks == 0);
}

/* realloc's move of a large growth: a pool block stays in its slot (the socket copies it out); any
 * other block goes to the next layer, which moves it with its contents. */
static void move_passes_down_all_but_pool_blocks(void)
{
    err_reset();
    char *p = GALLOC(gm, 100, SM_MIN_ALIGN, 0);
    check_fill(p, 100, 7);
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    CHECK(gm_guard_owns(p) && !gm_move(&c, 20000) && c.ptr == p && fkm_obj.moves == 0);
    CHECK(check_verify(p, 100, 7));
    GFREE(gm, p);
    unsigned char *big = GALLOC(gm, 5000, SM_MIN_ALIGN, 0), *moved;
    for (size_t i = 0; i < 5000; i++) /* check_fill's pattern follows the address: not this one */
        big[i] = (unsigned char)(i * 13 + i / 256);
    c = sm_mctx_block(big, 0, 0);
    CHECK(!gm_guard_owns(big) && gm_move(&c, 20000) && c.ptr != big && fkm_obj.moves == 1);
    moved = c.ptr;
    size_t same = 0;
    for (size_t i = 0; i < 5000; i++)
        same += moved[i] == (unsigned char)(i * 13 + i / 256);
    CHECKF(same == 5000, "%zu of 5000 bytes came along", same);
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    CHECK(gm_getmeta(&m) && m.usable == 20000);
    GFREE(gm, c.ptr);
    CHECK(err_total() == 0 && fkm_obj.bad_frees == 0 && fkm_obj.live_blocks == 0);
}

static void requests_pass_down_when_the_pool_is_used_up(void)
{
    unsigned long allocs = fk_obj.allocs, frees = fk_obj.frees;
    char *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = GALLOC(g1, 24, SM_MIN_ALIGN, 0);
    CHECK(fk_obj.allocs == allocs);
    char *q = GALLOC(g1, 24, SM_MIN_ALIGN, 0);
    char *big = GALLOC(g1, 4097, SM_MIN_ALIGN, 0);
    CHECK(q && big && !g1_guard_owns(q) && !g1_guard_owns(big) && fk_obj.allocs == allocs + 2);
    GFREE(g1, q);
    GFREE(g1, big);
    CHECK(fk_obj.frees == frees + 2);
    GFREE(g1, p[3]);
    q = GALLOC(g1, 24, SM_MIN_ALIGN, 0);
    CHECK(q == p[3] && fk_obj.allocs == allocs + 2);
    for (int i = 0; i < 8; i++)
        GFREE(g1, p[i]);
    CHECK(err_total() == 0 && fk_obj.bad_frees == 0);
}

/* One in 4 of the eligible requests a thread makes, exactly: one in each run of 4 from its first,
 * at a place that varies; larger requests do not count. */
static void *sample_one_in_four(void *arg)
{
    enum { N = 4000 };
    static __thread unsigned place_seen[4];
    unsigned long *sampled = (unsigned long *)arg;
    memset(place_seen, 0, sizeof place_seen);
    unsigned in_run = 0;
    for (unsigned i = 0; i < N; i++) {
        if (i % 3 == 1) { /* too large: not eligible */
            char *b = GALLOC(g4, 4097, SM_MIN_ALIGN, 0);
            if (g4_guard_owns(b))
                return (void *)1;
            GFREE(g4, b);
        }
        char *p = GALLOC(g4, 24, SM_MIN_ALIGN, 0);
        if (g4_guard_owns(p)) {
            in_run++;
            place_seen[i % 4]++;
            (*sampled)++;
        }
        GFREE(g4, p);
        if (i % 4 == 3) {
            if (in_run != 1)
                return (void *)2;
            in_run = 0;
        }
    }
    unsigned places = 0;
    for (int k = 0; k < 4; k++)
        places += place_seen[k] > 0;
    return places >= 2 ? NULL : (void *)3;
}

/* guard_sample (SUNMAO_CONF) sets the run length of every guard layer of the composition at run
 * time: g1, compiled to sample every request, with guard_sample:4 samples exactly one of each 4 of
 * a fresh thread's requests, and none with guard_sample:0. */
static void *conf_rate_thread(void *arg)
{
    unsigned long *served = (unsigned long *)arg, runs_bad = 0;
    unsigned in_run = 0;
    for (unsigned i = 0; i < 4000; i++) {
        char *p = GALLOC(g1, 40, SM_MIN_ALIGN, 0);
        if (!p)
            return (void *)1;
        memset(p, 0x3c, 40);
        if (g1_guard_owns(p)) {
            in_run++;
            (*served)++;
        }
        GFREE(g1, p);
        if (i % 4 == 3) {
            runs_bad += in_run != 1;
            in_run = 0;
        }
    }
    served[1] = runs_bad;
    return NULL;
}
static void guard_sample_sets_the_rate_at_run_time(void)
{
    unsigned long four[2] = { 0, 0 }, off[2] = { 0, 0 };
    void *r1, *r2;
    pthread_t t;
    sm_conf.guard_sample = 4;
    pthread_create(&t, NULL, conf_rate_thread, four);
    pthread_join(t, &r1);
    sm_conf.guard_sample = 0;
    pthread_create(&t, NULL, conf_rate_thread, off);
    pthread_join(t, &r2);
    sm_conf.guard_sample = SM_CONF_DEFAULT;
    CHECKF(r1 == NULL && four[0] == 1000 && four[1] == 0, "guard_sample:4: %lu of 4000 served, %lu runs without exactly one",
           four[0], four[1]);
    CHECKF(r2 == NULL && off[0] == 0, "guard_sample:0: %lu of 4000 served", off[0]);
    char *p = GALLOC(g1, 40, SM_MIN_ALIGN, 0); /* the compiled rate again: every request */
    CHECK(g1_guard_owns(p));
    GFREE(g1, p);
    CHECK(err_total() == 0);
}

static void unsampled_requests_go_down_three_in_four(void)
{
    unsigned long sampled = 0, allocs = fk4_obj.allocs;
    void *r = sample_one_in_four(&sampled);
    CHECKF(r == NULL, "schedule broken (%ld)", (long)(intptr_t)r);
    CHECKF(sampled == 1000 && fk4_obj.allocs - allocs == 3000 + 4000 / 3, "%lu sampled, %lu passed down", sampled,
           fk4_obj.allocs - allocs);
    /* Other threads: their own schedules. */
    static unsigned long per[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, sample_one_in_four, &per[i]);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], &r);
        CHECKF(r == NULL && per[i] == 1000, "thread %d: %lu sampled (%ld)", i, per[i], (long)(intptr_t)r);
    }
    CHECK(err_total() == 0 && fk4_obj.bad_frees == 0 && fk4_obj.live_blocks == 0);
}

/* ---- over a thread cache, through the hit paths ---- */

/* What sockets/libc_api.h does with a top layer that has HIT: the hit for plain alignments, else
 * the miss with the request's one context; a free's hit, else its miss with the owner word the hit
 * read. *hit: whether the hit path answered. */
#define HMALLOC(L, n, a, hit) hmalloc_##L(n, a, hit)
#define HFREE(L, p, n, f, hit) hfree_##L(p, n, f, hit)
#define DEFINE_HIT_DRIVER(L)                                                                  \
    static void *hmalloc_##L(size_t n, size_t align, bool *hit)                               \
    {                                                                                         \
        *hit = false;                                                                         \
        if (align <= SM_MIN_ALIGN) {                                                          \
            void *p = L##_alloc_hit(n);                                                       \
            if (p) {                                                                          \
                *hit = true;                                                                  \
                return p;                                                                     \
            }                                                                                 \
        }                                                                                     \
        sm_mctx_t c = sm_mctx_alloc(n ? n : 1, align, SM_F_USER);                             \
        return L##_alloc_miss(&c);                                                            \
    }                                                                                         \
    static void hfree_##L(void *p, size_t n, unsigned flags, bool *hit)                       \
    {                                                                                         \
        uintptr_t w = SM_OWNER_UNKNOWN;                                                       \
        if ((*hit = L##_free_hit(p, n, flags, &w)))                                           \
            return;                                                                           \
        if (L##_guard_owns(p) && w != SM_OWNER_UNKNOWN)                                       \
            hit_owner_read++; /* a pool block's miss must read nothing of its owner */         \
        sm_mctx_t c = sm_mctx_block(p, n, w != SM_OWNER_UNKNOWN ? flags | SM_F_OWNER : flags); \
        c.owner_word = w;                                                                     \
        L##_free_miss(&c);                                                                    \
    }
static __thread unsigned long hit_owner_read;
DEFINE_HIT_DRIVER(gh)
DEFINE_HIT_DRIVER(ge)

/* Before create, on a fresh thread: every hit path misses and touches nothing below (the socket
 * calls them before start-up). A fresh thread's countdown is 0, so its first eligible request is
 * the schedule's start: the hit misses without asking the thread cache. */
static void *hit_before_create_thread(void *arg)
{
    (void)arg;
    uintptr_t w = SM_OWNER_UNKNOWN;
    char local[64] = { 0 };
    bool ok = gh_alloc_hit(24) == NULL && gh_alloc_hit(5000) == NULL && gh_alloc_hit(0) == NULL &&
              !gh_free_hit(local, 64, SM_F_SIZED, &w) && ge_alloc_hit(64) == NULL && ge_alloc_hit(6000) == NULL;
    return ok ? NULL : (void *)1;
}

static void hit_paths_miss_before_create(void)
{
    pthread_t t;
    void *r = (void *)2;
    pthread_create(&t, NULL, hit_before_create_thread, NULL);
    pthread_join(t, &r);
    CHECK(r == NULL && fkh_obj.creates == 0 && fkh_obj.allocs == 0 && fke_obj.allocs == 0 && gh_obj.served == 0);
}

/* One in 4 of the eligible requests, exactly, through hit and miss: plain ones are counted by the
 * hit (which misses for the sampled one), aligned ones (no hit tried) by the miss, requests above
 * MAX_SIZE by neither. Every other request reaches the thread cache exactly once (its hit, then its
 * miss if that missed), and pool blocks never do, at allocation or free. */
struct hit_counts { unsigned long sampled, aligned_sampled, alloc_hits, free_hits; struct hit_calls below; };
static void *hit_sample_one_in_four(void *arg)
{
    enum { N = 4000 };
    struct hit_counts *k = (struct hit_counts *)arg;
    unsigned place_seen[4] = { 0 }, in_run = 0;
    bool hit;
    memset(k, 0, sizeof *k);
    memset(&hch_calls, 0, sizeof hch_calls);
    hit_owner_read = 0;
    for (unsigned i = 0; i < N; i++) {
        if (i % 3 == 1) { /* too large for the pool: not counted */
            char *b = HMALLOC(gh, 4097, SM_MIN_ALIGN, &hit);
            if (!b || gh_guard_owns(b))
                return (void *)1;
            k->alloc_hits += hit;
            HFREE(gh, b, 0, 0, &hit);
            k->free_hits += hit;
        }
        size_t align = i % 5 == 2 ? 64 : SM_MIN_ALIGN, n = i % 2 ? 24 : 100;
        char *p = HMALLOC(gh, n, align, &hit);
        if (!p || ((uintptr_t)p & (align - 1)))
            return (void *)2;
        memset(p, (int)i, n);
        bool pool = gh_guard_owns(p);
        if (pool) {
            if (hit)
                return (void *)3;
            in_run++;
            place_seen[i % 4]++;
            k->sampled++;
            k->aligned_sampled += align > SM_MIN_ALIGN;
        }
        k->alloc_hits += hit;
        HFREE(gh, p, i % 7 == 0 ? n : 0, i % 7 == 0 ? SM_F_SIZED : 0, &hit);
        if (pool && hit)
            return (void *)4; /* a pool block taken by the cache (its pages: other threads reuse the slot) */
        k->free_hits += hit;
        if (i % 4 == 3) {
            if (in_run != 1)
                return (void *)5;
            in_run = 0;
        }
    }
    k->below = hch_calls;
    unsigned places = 0;
    for (int j = 0; j < 4; j++)
        places += place_seen[j] > 0;
    return places >= 2 && hit_owner_read == 0 ? NULL : (void *)6;
}

static void hit_paths_sample_exactly_one_in_four(void)
{
    enum { ELIGIBLE = 4000, ALIGNED = 800, LARGE = 1333, REQUESTS = ELIGIBLE + LARGE, PLAIN = REQUESTS - ALIGNED };
    err_reset();
    unsigned long served = gh_obj.served;
    static struct hit_counts k[4];
    void *r = hit_sample_one_in_four(&k[0]);
    CHECKF(r == NULL, "schedule broken (%ld)", (long)(intptr_t)r);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, hit_sample_one_in_four, &k[i + 1]);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], &r);
        CHECKF(r == NULL, "thread %d: schedule broken (%ld)", i, (long)(intptr_t)r);
    }
    for (int i = 0; i < 4; i++) {
        const struct hit_counts *x = &k[i];
        const struct hit_calls *b = &x->below;
        unsigned long down = REQUESTS - x->sampled, plain_sampled = x->sampled - x->aligned_sampled;
        /* Both routes sampled (a sampled request is aligned one time in 5). */
        CHECKF(x->sampled == ELIGIBLE / 4 && x->aligned_sampled > 0 && x->aligned_sampled < ELIGIBLE / 4,
               "thread %d: %lu sampled, %lu of them aligned", i, x->sampled, x->aligned_sampled);
        /* The cache's hit was asked once per plain request that was not sampled (the thread's first
         * request, when the schedule starts past it, by the miss: the cache is empty then). */
        CHECKF(b->alloc_hit == PLAIN - plain_sampled && b->alloc_hit_got + b->alloc_miss == down &&
                   b->alloc_hit_got == x->alloc_hits,
               "thread %d: below, %lu alloc hits (%lu answered), %lu misses; want %lu, %lu in all, %lu", i, b->alloc_hit,
               b->alloc_hit_got, b->alloc_miss, PLAIN - plain_sampled, down, x->alloc_hits);
        CHECKF(b->free_hit == down && b->free_hit_got + b->free_miss == down && b->free_hit_got == x->free_hits,
               "thread %d: below, %lu free hits (%lu answered), %lu misses; want %lu, %lu", i, b->free_hit,
               b->free_hit_got, b->free_miss, down, x->free_hits);
        /* And the hits do the work: all but the cache's refills and flushes. */
        CHECKF(x->alloc_hits + 100 > PLAIN - plain_sampled && x->free_hits + 100 > down,
               "thread %d: %lu alloc hits, %lu free hits", i, x->alloc_hits, x->free_hits);
    }
    CHECKF(gh_obj.served - served == 4 * ELIGIBLE / 4 && err_total() == 0 && fkh_obj.bad_frees == 0,
           "%lu served, %lu errors, %lu bad frees below", gh_obj.served - served, err_total(), fkh_obj.bad_frees);
}

/* Every request that fits, 8 slots, through the hit paths: each misses and is served by the miss;
 * a pool block's free misses (its owner word untouched, sized or not) and goes back to the pool;
 * once the pool is used up, the miss asks the thread cache's hit (which its own hit did not) and
 * gets the cache's last freed object; double and invalid frees of pool blocks are reported once
 * and never reach the cache. `below`: the calls the cache got, exactly. */
static void *hit_every_request_thread(void *arg)
{
    (void)arg;
    intptr_t bad = 0;
    bool hit;
    char *p[8];
    hit_owner_read = 0;
    memset(&hce_calls, 0, sizeof hce_calls);
    for (int i = 0; i < 8; i++) {
        p[i] = HMALLOC(ge, i == 7 ? 100 : 64, i == 7 ? 256 : SM_MIN_ALIGN, &hit);
        bad += !ge_guard_owns(p[i]) || hit || (i == 7 && ((uintptr_t)p[i] & 255));
        check_fill(p[i], i == 7 ? 100 : 64, (unsigned)i);
    }
    bad += (hce_calls.alloc_hit || hce_calls.alloc_miss) * 10000;
    /* The pool is used up: the cache serves, and takes back, what fits. The first from its miss
     * (after its hit, asked by ours: an empty cache); the second from its hit, asked by our miss. */
    char *q = HMALLOC(ge, 64, SM_MIN_ALIGN, &hit);
    bad += !q || ge_guard_owns(q) || hit;
    HFREE(ge, q, 0, 0, &hit);
    bad += !hit;
    char *q2 = HMALLOC(ge, 64, SM_MIN_ALIGN, &hit);
    bad += (q2 != q) * 10 + hit;
    bad += (hce_calls.alloc_hit != 2 || hce_calls.alloc_hit_got != 1 || hce_calls.alloc_miss != 1) * 20000;
    HFREE(ge, q2, 64, SM_F_SIZED, &hit);
    bad += !hit;
    /* Above MAX_SIZE: not the guard's; the cache's hit after its first refill. */
    char *big = HMALLOC(ge, 6000, SM_MIN_ALIGN, &hit);
    HFREE(ge, big, 0, 0, &hit);
    char *big2 = HMALLOC(ge, 6000, SM_MIN_ALIGN, &hit);
    bad += (big2 != big || !hit || ge_guard_owns(big)) * 100;
    HFREE(ge, big2, 0, 0, &hit);
    /* Pool blocks back to the pool: a sized free and an unsized one. */
    for (int i = 0; i < 8; i++) {
        bad += !check_verify(p[i], i == 7 ? 100 : 64, (unsigned)i);
        HFREE(ge, p[i], i % 2 ? 64 : 0, i % 2 ? SM_F_SIZED : 0, &hit);
        bad += hit || readable(p[i]);
    }
    /* A slot again, freed twice; an interior pointer. */
    char *d = HMALLOC(ge, 48, SM_MIN_ALIGN, &hit);
    bad += !ge_guard_owns(d) || hit;
    HFREE(ge, d + 16, 0, 0, &hit);
    bad += hit;
    HFREE(ge, d, 0, 0, &hit);
    HFREE(ge, d, 0, 0, &hit);
    bad += hit;
    const struct hit_calls *b = &hce_calls;
    bad += (b->alloc_hit != 4 || b->alloc_hit_got != 2 || b->alloc_miss != 2 || b->free_hit != 4 ||
            b->free_hit_got != 4 || b->free_miss != 0) *
           40000;
    return (void *)(bad + (intptr_t)hit_owner_read * 1000);
}

static void hit_paths_every_request(void)
{
    err_reset();
    unsigned long served = ge_obj.served;
    pthread_t t;
    void *r = (void *)-1;
    pthread_create(&t, NULL, hit_every_request_thread, NULL);
    pthread_join(t, &r);
    CHECKF(r == NULL, "%ld wrong answers", (long)(intptr_t)r);
    CHECKF(ge_obj.served - served == 9 && err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_counts[SM_ERR_INVALID_FREE] == 1 &&
               err_total() == 2 && fke_obj.bad_frees == 0,
           "%lu served, %lu double frees, %lu invalid frees, %lu errors, %lu bad frees below", ge_obj.served - served,
           err_counts[SM_ERR_DOUBLE_FREE], err_counts[SM_ERR_INVALID_FREE], err_total(), fke_obj.bad_frees);
    err_reset();
}

static void *mixed_thread(void *arg)
{
    enum { LIVE = 4, OPS = 3000 };
    char *b[LIVE] = { 0 };
    size_t n[LIVE] = { 0 };
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    intptr_t bad = 0;
    for (unsigned op = 0; op < OPS; op++) {
        seed = seed * 1103515245u + 12345u;
        unsigned i = (seed >> 16) % LIVE;
        if (b[i]) {
            bad += !check_verify(b[i], n[i], i + 3);
            GFREE(g1, b[i]);
            b[i] = NULL;
        } else {
            n[i] = 1 + (seed >> 8) % 6000;
            if (!(b[i] = GALLOC(g1, n[i], SM_MIN_ALIGN, 0)))
                return (void *)-1;
            check_fill(b[i], n[i], i + 3);
        }
    }
    for (unsigned i = 0; i < LIVE; i++)
        if (b[i]) {
            bad += !check_verify(b[i], n[i], i + 3);
            GFREE(g1, b[i]);
        }
    return (void *)bad;
}

static void threads_share_the_pool(void)
{
    check_threads(4, mixed_thread);
    CHECK(err_total() == 0 && fk_obj.bad_frees == 0 && fk_obj.live_blocks == 0);
}

static void fork_hooks(void)
{
    char *p = GALLOC(g1, 64, SM_MIN_ALIGN, 0);
    g1_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        g1_fork_child();
        char *q = GALLOC(g1, 64, SM_MIN_ALIGN, 0);
        GFREE(g1, p);
        GFREE(g1, q);
        _exit(g1_guard_owns(q) && err_total() == 0 ? 0 : 1);
    }
    g1_fork_parent();
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    GFREE(g1, p);
    CHECK(err_total() == 0);
}

int main(void)
{
    check_begin("guard");
    page = (size_t)sysconf(_SC_PAGESIZE);
    sm_err_callback_set(on_error);
    if (pipe(probe_fd) != 0)
        return 1;
    RUN_CASE(hit_paths_miss_before_create); /* first: before gh's and ge's create */
    CHECK(g1_create() == 0 && g3_create() == 0 && g4_create() == 0 && gc_create() == 0);
    CHECK(gh_create() == 0 && ge_create() == 0 && gm_create() == 0);
    RUN_CASE(prior_handler_sees_the_fault_after_the_report);
    RUN_CASE(faults_outside_the_pool_go_to_the_prior_handler);
    RUN_CASE(blocks_end_at_the_guard_page);
    RUN_CASE(fill_pattern_round_trips);
    RUN_CASE(freed_slots_are_reused_in_fifo_order);
    RUN_CASE(calloc_of_a_reused_slot_gets_zeroes);
    RUN_CASE(sampled_pairs_leave_the_mappings_alone);
    RUN_CASE(overflow_by_one_byte_faults_and_is_reported);
    RUN_CASE(read_after_free_faults_and_names_the_free_site);
    RUN_CASE(underflow_below_the_page_faults);
    RUN_CASE(overflow_into_the_slack_is_reported_at_free);
    RUN_CASE(double_and_interior_frees_are_reported_once);
    RUN_CASE(getmeta_and_resize);
    RUN_CASE(move_passes_down_all_but_pool_blocks);
    RUN_CASE(requests_pass_down_when_the_pool_is_used_up);
    RUN_CASE(unsampled_requests_go_down_three_in_four);
    RUN_CASE(guard_sample_sets_the_rate_at_run_time);
    RUN_CASE(hit_paths_sample_exactly_one_in_four);
    RUN_CASE(hit_paths_every_request);
    RUN_CASE(threads_share_the_pool);
    RUN_CASE(fork_hooks);
    return check_end();
}
