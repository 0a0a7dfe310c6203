/* Unit test of the mmap_heap OS layer: a plain instance (one mapping per block), a thread-heap
 * instance (per-thread carving, reuse of freed blocks, tails of exited threads adopted), a
 * huge-page instance and an FAA-growth instance (thread regions from shared arenas), side by side
 * in one translation unit. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>

#define SM_LAYER mm
#define SM_ERR callback
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER mmt
#define SM_ERR callback
#define SM_SYNC mutex
#include <sunmao/policies/sync/mutex.h>
#define SM_OPT_THREAD_HEAP_SIZE ((size_t)64 << 20)
#define SM_OPT_THREAD_HEAP_MAX_BLOCK ((size_t)256 << 10)
#include <sunmao/os/mmap_heap.h>

/* Thread heaps whose free lists only thread_heap_cuts_larger_freed_blocks uses. */
#define SM_LAYER mmc
#define SM_ERR callback
#define SM_SYNC mutex
#define SM_OPT_THREAD_HEAP_SIZE ((size_t)16 << 20)
#include <sunmao/os/mmap_heap.h>

/* Thread heaps that nothing frees into, so every block is carved from a region (lifecycle case). */
#define SM_LAYER mml
#define SM_ERR callback
#define SM_SYNC mutex
#define SM_OPT_THREAD_HEAP_SIZE ((size_t)16 << 20)
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER mmh
#define SM_ERR callback
#define SM_OPT_HUGE_PAGES 1
#define SM_OPT_GROWTH ((size_t)64 << 10)
#include <sunmao/os/mmap_heap.h>

/* FAA growth (SM_OPT_FAA_GROWTH): 1 MiB regions, four to an arena, so the tests use up arenas.
 * Its sync policy, `spy` (test only), is a mutex that after every critical section, still holding
 * the lock, lets the test read the arena's top: arenas are reserved only in sections, so the test
 * sees each one as it appears and keeps a list of them (faa_arena_log). */
typedef struct { pthread_mutex_t m; } sm_sync_spy_t;
#define SM_SYNC_spy_INIT { PTHREAD_MUTEX_INITIALIZER }
enum { sm_sync_spy_thread_safe = 1 };
static void spy_after_section(void);
SM_UNUSED static inline void sm_sync_spy_lock(sm_sync_spy_t *l) { pthread_mutex_lock(&l->m); }
SM_UNUSED static inline void sm_sync_spy_unlock(sm_sync_spy_t *l) { pthread_mutex_unlock(&l->m); }
SM_UNUSED static inline bool sm_sync_spy_trylock(sm_sync_spy_t *l) { return pthread_mutex_trylock(&l->m) == 0; }
SM_UNUSED static inline void sm_sync_spy_reinit(sm_sync_spy_t *l) { pthread_mutex_init(&l->m, NULL); }
#include <sunmao/policies/sync/owner.h>
SM_SYNC_FORK_PLAIN(spy) /* a test policy: no fork from a signal handler here */
SM_UNUSED static inline void sm_sync_spy_atomic_exec(sm_sync_spy_t *l, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&l->m);
    fn(arg);
    spy_after_section();
    pthread_mutex_unlock(&l->m);
}

#define SM_LAYER mmf
#define SM_ERR callback
#define SM_SYNC spy
#define SM_OPT_THREAD_HEAP_SIZE ((size_t)1 << 20)
#define SM_OPT_FAA_GROWTH 1
#define SM_OPT_FAA_ARENA_REGIONS 4
#include <sunmao/os/mmap_heap.h>

_Static_assert(mm_thread_safe && mmt_thread_safe && mm_zeroed && mm_min_align >= 4096, "mmap_heap properties");
_Static_assert(mmf_thread_safe && mmf_zeroed, "mmap_heap properties with FAA growth");

static int errors[SM_ERR_KIND_COUNT];
static const void *last_error_ptr;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)detail;
    __atomic_fetch_add(&errors[kind], 1, __ATOMIC_RELAXED);
    last_error_ptr = ptr;
}
static void reset_errors(void) { memset(errors, 0, sizeof errors); }

static bool is_mapped(void *p, size_t len) { return msync(p, len, MS_ASYNC) == 0; }
static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 61)
        if (p[i])
            return false;
    return n == 0 || p[n - 1] == 0;
}

#define ALLOC(inst, sz, al) ({ sm_mctx_t c_ = sm_mctx_alloc((sz), (al), 0); inst##_alloc(&c_); c_; })
#define FREE(inst, p, sz, fl) do { sm_mctx_t f_ = sm_mctx_block((p), (sz), (fl)); inst##_free(&f_); } while (0)

static const size_t sizes[] = { 0, 1, 16, 100, 4095, 4096, 5000, 65536, 200000, (1u << 20) + 3, 3u << 20 };
static const size_t aligns[] = { 16, 64, 4096, 65536, 1u << 20, 2u << 20 };

#define ALIGNMENT_CASE(inst)                                                                                      \
    static void inst##_alignment_and_sizes(void)                                                                 \
    {                                                                                                            \
        size_t page = sm_plat_page_size();                                                                         \
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)                                                \
            for (size_t j = 0; j < sizeof aligns / sizeof *aligns; j++) {                                        \
                sm_mctx_t c = ALLOC(inst, sizes[i], aligns[j]);                                                  \
                CHECKF(c.ptr && sm_ptr_aligned(c.ptr, aligns[j]) && sm_ptr_aligned(c.ptr, page),                 \
                       "size %zu align %zu -> %p", sizes[i], aligns[j], c.ptr);                                  \
                if (!c.ptr)                                                                                      \
                    continue;                                                                                    \
                CHECK(c.flags & SM_F_FRESH);                                                                     \
                CHECK(all_zero(c.ptr, sizes[i]));                                                                \
                sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);                                                        \
                CHECK(inst##_getmeta(&m) && m.usable >= sizes[i] && m.owner && !strcmp(m.owner, #inst));         \
                check_fill(c.ptr, m.usable, (unsigned)i);                                                        \
                CHECK(check_verify(c.ptr, m.usable, (unsigned)i));                                               \
                FREE(inst, c.ptr, sizes[i], (i & 1) ? SM_F_SIZED : 0);                                           \
            }                                                                                                    \
    }
ALIGNMENT_CASE(mm)
ALIGNMENT_CASE(mmt)
ALIGNMENT_CASE(mmh)
ALIGNMENT_CASE(mmf)

static void many_live_blocks_keep_their_patterns(void)
{
    enum { N = 300 };
    void *p[N];
    size_t n[N];
    unsigned seed = 7;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        n[i] = (seed >> 8) % 70000 + 1;
        sm_mctx_t c = ALLOC(mmt, n[i], 16);
        p[i] = c.ptr;
        CHECK(p[i]);
        if (p[i])
            check_fill(p[i], n[i], (unsigned)i);
    }
    for (int i = 0; i < N; i++)
        CHECKF(p[i] && check_verify(p[i], n[i], (unsigned)i), "block %d of %zu bytes corrupted", i, n[i]);
    for (int i = 0; i < N; i += 2)
        FREE(mmt, p[i], 0, 0);
    for (int i = 1; i < N; i += 2)
        CHECK(check_verify(p[i], n[i], (unsigned)i));
    for (int i = 1; i < N; i += 2)
        FREE(mmt, p[i], n[i], SM_F_SIZED);
}

static void free_unmaps_direct_mappings(void)
{
    size_t len = (size_t)5 << 20;
    sm_mctx_t c = ALLOC(mm, len, 16);
    CHECK(c.ptr && is_mapped(c.ptr, len));
    memset(c.ptr, 0x5a, len);
    FREE(mm, c.ptr, 0, 0);
    CHECK(!is_mapped(c.ptr, sm_plat_page_size()));
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    CHECK(!mm_getmeta(&m));
}

static void getmeta_rejects_foreign_pointers(void)
{
    int on_stack;
    sm_mctx_t c = ALLOC(mm, 3 * 4096, 16);
    void *heap = malloc(64);
    void *bad[] = { NULL, &on_stack, heap, (char *)c.ptr + 16, (char *)c.ptr + 4096, (void *)((uintptr_t)1 << 50) };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sm_mctx_t m = sm_mctx_block(bad[i], 0, 0);
        CHECKF(!mm_getmeta(&m) && !mmt_getmeta(&m), "pointer %zu claimed", i);
    }
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    CHECK(mm_getmeta(&m) && m.usable == sm_align_up(3 * 4096, sm_plat_page_size()));
    CHECK(!mmt_getmeta(&m)); /* each instance knows only its own blocks */
    free(heap);
    FREE(mm, c.ptr, 0, 0);
}

static void invalid_and_double_free_are_reported_once(void)
{
    reset_errors();
    int on_stack;
    FREE(mm, &on_stack, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && last_error_ptr == &on_stack);
    sm_mctx_t c = ALLOC(mm, 8192, 16);
    FREE(mm, (char *)c.ptr + 4096, 0, 0); /* interior pointer */
    CHECK(errors[SM_ERR_INVALID_FREE] == 2 && is_mapped(c.ptr, 8192));
    FREE(mm, c.ptr, 1u << 20, SM_F_SIZED); /* sized larger than the block: refused */
    CHECK(errors[SM_ERR_INVALID_FREE] == 3 && is_mapped(c.ptr, 8192));
    FREE(mm, c.ptr, 0, 0);
    FREE(mm, c.ptr, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 4);

    reset_errors();
    sm_mctx_t t = ALLOC(mmt, 100, 16);
    FREE(mmt, t.ptr, 0, 0);
    FREE(mmt, t.ptr, 0, 0);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1 && errors[SM_ERR_INVALID_FREE] == 0);
    sm_mctx_t a = ALLOC(mmt, 100, 16), b = ALLOC(mmt, 100, 16);
    CHECK(a.ptr != b.ptr); /* the double free did not put the block on the free list twice */
    FREE(mmt, a.ptr, 0, 0);
    FREE(mmt, b.ptr, 0, 0);
    reset_errors();
}

static void out_of_memory_is_null_and_enomem(void)
{
    size_t absurd[] = { SIZE_MAX / 2, SIZE_MAX, SIZE_MAX - 4096, (size_t)1 << 47 };
    for (size_t i = 0; i < sizeof absurd / sizeof *absurd; i++) {
        errno = 0;
        sm_mctx_t c = ALLOC(mm, absurd[i], 16);
        CHECKF(!c.ptr && errno == ENOMEM, "size %zx: %p errno %d", absurd[i], c.ptr, errno);
        errno = 0;
        c = ALLOC(mmt, absurd[i], 16);
        CHECK(!c.ptr && errno == ENOMEM);
    }
    errno = 0;
    sm_mctx_t c = ALLOC(mm, 4096, (size_t)1 << 62);
    CHECK(!c.ptr && errno == ENOMEM);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0);
}

static void resize_shrinks_and_grows_in_place(void)
{
    size_t page = sm_plat_page_size(), big = (size_t)1 << 20;
    sm_mctx_t c = ALLOC(mm, big, 16);
    check_fill(c.ptr, 64 << 10, 1);
    sm_mctx_t r = sm_mctx_block(c.ptr, 0, 0);
    CHECK(mm_resize(&r, 64 << 10));
    CHECK(!is_mapped((char *)c.ptr + (64 << 10), page));
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    CHECK(mm_getmeta(&m) && m.usable == (64u << 10));
    CHECK(mm_resize(&r, 100)); /* shrink to one page */
    CHECK(mm_resize(&r, big)); /* the pages just given back are still free */
    CHECK(mm_getmeta(&m) && m.usable == big && check_verify(c.ptr, 100, 1));
    memset((char *)c.ptr + big - 4096, 1, 4096);
    FREE(mm, c.ptr, 0, 0);
    CHECK(!is_mapped(c.ptr, big));

    sm_mctx_t t = ALLOC(mmt, 3 * page, 16);
    r = sm_mctx_block(t.ptr, 0, 0);
    CHECK(mmt_resize(&r, page) && mmt_resize(&r, 3 * page) && !mmt_resize(&r, 4 * page));
    FREE(mmt, t.ptr, 0, 0);
}

static void thread_heap_reuses_purged_blocks(void)
{
    size_t page = sm_plat_page_size();
    sm_mctx_t a = ALLOC(mmt, 5 * page, 16);
    sm_mctx_t b = ALLOC(mmt, 5 * page, 16);
    CHECK(a.ptr && b.ptr && sm_ptr_aligned(a.ptr, page));
    sm_mctx_t ma = sm_mctx_block(a.ptr, 0, 0);
    CHECK(mmt_getmeta(&ma) && ma.usable >= 5 * page); /* more if it reused a larger freed block */
    memset(a.ptr, 0xab, 5 * page);
    FREE(mmt, a.ptr, 0, 0);
    unsigned char vec[5];
    CHECK(mincore(a.ptr, 5 * page, vec) == 0);
    int resident = 0;
    for (int i = 1; i < 5; i++) /* page 0 holds the free-list link */
        resident += vec[i] & 1;
    CHECKF(resident == 0, "%d purged pages still resident", resident);
    sm_mctx_t c = ALLOC(mmt, 4 * page + 1, 16);
    CHECK(c.ptr == a.ptr && (c.flags & SM_F_FRESH) && all_zero(c.ptr, 5 * page));
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    CHECKF(mmt_getmeta(&m) && m.usable == ma.usable, "usable %zu", m.usable);
    FREE(mmt, b.ptr, 0, 0);
    FREE(mmt, c.ptr, 0, 0);
}

/* A freed block larger than a request is cut: the request gets what it asked for (in pages), the
 * rest stays free and serves the next request, purged and zero. */
static void thread_heap_cuts_larger_freed_blocks(void)
{
    size_t page = sm_plat_page_size();
    /* The 9-page request finds nothing in [8, 16) pages and takes the 24-page block. */
    sm_mctx_t big = ALLOC(mmc, 24 * page, 16);
    CHECK(big.ptr != NULL);
    memset(big.ptr, 0x5a, 24 * page);
    FREE(mmc, big.ptr, 0, 0);
    sm_mctx_t head = ALLOC(mmc, 8 * page + 100, 16);
    sm_mctx_t m = sm_mctx_block(head.ptr, 0, 0);
    bool meta = mmc_getmeta(&m);
    CHECKF(head.ptr == big.ptr && meta && m.usable == 9 * page,
           "a 9-page request got %p (freed block %p), usable %zu pages", head.ptr, big.ptr, m.usable / page);
    sm_mctx_t tail = ALLOC(mmc, 15 * page, 16);
    CHECKF(tail.ptr == (char *)big.ptr + 9 * page, "the rest was not reused: %p", tail.ptr);
    CHECK(tail.ptr && (tail.flags & SM_F_FRESH) && all_zero(tail.ptr, 15 * page));
    check_fill(head.ptr, 9 * page, 3);
    check_fill(tail.ptr, 15 * page, 4);
    CHECK(check_verify(head.ptr, 9 * page, 3) && check_verify(tail.ptr, 15 * page, 4));
    FREE(mmc, head.ptr, 0, 0);
    FREE(mmc, tail.ptr, 0, 0);
}

/* Threads: each allocates and frees with pattern checks, across both instances. */
enum { THREADS = 4, ROUNDS = 3000, LIVE = 64 };
static void *hammer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    void *p[LIVE] = { 0 };
    size_t n[LIVE] = { 0 };
    bool threaded[LIVE] = { 0 };
    long bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % LIVE);
        if (p[k]) {
            bad += !check_verify(p[k], n[k], (unsigned)k);
            if (threaded[k])
                FREE(mmt, p[k], n[k], SM_F_SIZED);
            else
                FREE(mm, p[k], 0, 0);
            p[k] = NULL;
        } else {
            n[k] = (seed >> 4) % 20000 + 1;
            threaded[k] = (seed & 1) != 0;
            sm_mctx_t c = threaded[k] ? ALLOC(mmt, n[k], 16) : ALLOC(mm, n[k], 16);
            if (!c.ptr)
                return (void *)-1L;
            p[k] = c.ptr;
            check_fill(p[k], n[k], (unsigned)k);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (p[k]) {
            bad += !check_verify(p[k], n[k], (unsigned)k);
            sm_mctx_t f = sm_mctx_block(p[k], 0, 0);
            threaded[k] ? mmt_free(&f) : mm_free(&f);
        }
    mmt_thread_exit();
    mm_thread_exit();
    return (void *)bad;
}

static void threads_alloc_and_free_concurrently(void)
{
    reset_errors();
    check_threads(THREADS, hammer);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* A thread carves a block and exits; the next thread adopts the rest of its region. */
static void *carve_one(void *out)
{
    sm_mctx_t c = ALLOC(mmt, 10000, 16);
    if (c.ptr)
        check_fill(c.ptr, 10000, 3);
    *(void **)out = c.ptr;
    mmt_thread_exit();
    return NULL;
}

static void exited_threads_regions_are_adopted(void)
{
    enum { N = 20 };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        pthread_t t;
        pthread_create(&t, NULL, carve_one, &blocks[i]);
        pthread_join(t, NULL);
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < N; i++) {
        CHECK(blocks[i] && check_verify(blocks[i], 10000, 3));
        lo = blocks[i] && (uintptr_t)blocks[i] < lo ? (uintptr_t)blocks[i] : lo;
        hi = (uintptr_t)blocks[i] > hi ? (uintptr_t)blocks[i] : hi;
    }
    /* One region served them all, rather than 20 regions of 64 MiB. */
    CHECKF(hi - lo < ((size_t)64 << 20), "blocks span %zu bytes", (size_t)(hi - lo));
    for (int i = 0; i < N; i++) /* freed by a thread that did not carve them */
        FREE(mmt, blocks[i], 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* The same without calling thread_exit, over an instance nothing is freed into (every block is
 * carved): carving attached the thread to the lifecycle service, whose exit hook puts the region's
 * tail on the orphan list, and the next thread adopts it. */
static void *carve_one_and_leave(void *out)
{
    sm_mctx_t c = ALLOC(mml, 10000, 16);
    if (c.ptr)
        check_fill(c.ptr, 10000, 4);
    *(void **)out = c.ptr;
    return NULL;
}

/* This file composes several stacks in one translation unit, which share one lifecycle service:
 * as a socket does for its composition, the test names the exit, here every instance's. */
static void every_instance_exit(void)
{
    mm_thread_exit();
    mmt_thread_exit();
    mml_thread_exit();
    mmh_thread_exit();
    mmf_thread_exit();
}

static void regions_handed_on_at_thread_exit(void)
{
    sm_thread_exit_top = every_instance_exit;
    enum { N = 20 };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        pthread_t t;
        pthread_create(&t, NULL, carve_one_and_leave, &blocks[i]);
        pthread_join(t, NULL);
        CHECKF(mml_obj.orphans != NULL, "thread %d exited and its region's tail is not on the orphan list", i);
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < N; i++) {
        CHECK(blocks[i] && check_verify(blocks[i], 10000, 4));
        lo = blocks[i] && (uintptr_t)blocks[i] < lo ? (uintptr_t)blocks[i] : lo;
        hi = (uintptr_t)blocks[i] > hi ? (uintptr_t)blocks[i] : hi;
    }
    CHECKF(hi - lo < ((size_t)16 << 20), "blocks span %zu bytes: each thread reserved its own region",
           (size_t)(hi - lo));
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

static void fork_hooks_leave_both_sides_usable(void)
{
    sm_mctx_t before = ALLOC(mmt, 5000, 16);
    check_fill(before.ptr, 5000, 9);
    mm_fork_prepare(), mmt_fork_prepare(), mmh_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        mm_fork_child(), mmt_fork_child(), mmh_fork_child();
        sm_mctx_t c = ALLOC(mm, 10000, 16), d = ALLOC(mmt, 10000, 16);
        int ok = c.ptr && d.ptr && check_verify(before.ptr, 5000, 9);
        if (ok) {
            check_fill(d.ptr, 10000, 1);
            FREE(mm, c.ptr, 0, 0);
            FREE(mmt, d.ptr, 0, 0);
            FREE(mmt, before.ptr, 0, 0);
        }
        _exit(ok ? 0 : 1);
    }
    mm_fork_parent(), mmt_fork_parent(), mmh_fork_parent();
    CHECK(pid > 0);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sm_mctx_t c = ALLOC(mm, 100, 16);
    CHECK(c.ptr && check_verify(before.ptr, 5000, 9));
    FREE(mm, c.ptr, 0, 0);
    FREE(mmt, before.ptr, 0, 0);
}

static size_t resident_pages(void *p, size_t len)
{
    size_t page = sm_plat_page_size(), n = len / page, r = 0;
    unsigned char vec[256];
    if (n > sizeof vec || mincore(p, len, vec) != 0)
        return SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        r += vec[i] & 1;
    return r;
}

/* purge (asked for by decay_cache): pages go, the mapping and the block stay. */
static void purge_drops_pages_but_keeps_the_block(void)
{
    size_t page = sm_plat_page_size(), len = 64 * page;
    sm_mctx_t c = ALLOC(mm, len, 16);
    memset(c.ptr, 0x6b, len);
    CHECK(resident_pages(c.ptr, len) == 64);
    sm_mctx_t p = sm_mctx_block(c.ptr, 2 * page - 1, SM_F_ZERO); /* rounded up to two pages */
    CHECK(mm_purge(&p));
    CHECK(all_zero(c.ptr, 2 * page) && ((unsigned char *)c.ptr)[2 * page] == 0x6b);
    p = sm_mctx_block(c.ptr, 0, SM_F_ZERO); /* 0: the whole block */
    CHECK(mm_purge(&p) && resident_pages(c.ptr, len) == 0 && is_mapped(c.ptr, len));
    CHECK(all_zero(c.ptr, len));
    p = sm_mctx_block(c.ptr, len * 4, 0); /* past the end: clipped to the block; lazy may keep data */
    CHECK(mm_purge(&p) && is_mapped(c.ptr, len));
    sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
    CHECK(mm_getmeta(&m) && m.usable == len);
    /* A range inside a block its caller holds (tlsf_glk purges the middle of its free blocks). */
    memset(c.ptr, 0x6b, len);
    sm_mctx_t inner = sm_mctx_block((char *)c.ptr + page, 2 * page, SM_F_ZERO);
    CHECK(mm_purge(&inner));
    CHECKF(resident_pages(c.ptr, len) == 62, "%zu resident", (size_t)resident_pages(c.ptr, len));
    CHECK(all_zero((unsigned char *)c.ptr + page, 2 * page)); /* read after the count: reads map pages */
    CHECK(((unsigned char *)c.ptr)[page - 1] == 0x6b && ((unsigned char *)c.ptr)[3 * page] == 0x6b);
    int on_stack;
    sm_mctx_t bad = sm_mctx_block(&on_stack, page, SM_F_ZERO), whole_inner = sm_mctx_block((char *)c.ptr + page, 0, 0);
    CHECK(!mm_purge(&bad) && !mm_purge(&whole_inner)); /* unaligned; no size and not a block start */
    FREE(mm, c.ptr, 0, 0);
    p = sm_mctx_block(c.ptr, 0, SM_F_ZERO);
    CHECK(!mm_purge(&p)); /* freed: not this layer's block any more */
    sm_mctx_t t = ALLOC(mmt, 3 * page, 16); /* carved blocks can be purged too */
    memset(t.ptr, 1, 3 * page);
    p = sm_mctx_block(t.ptr, 0, SM_F_ZERO);
    CHECK(mm_purge(&p) == false && mmt_purge(&p) && all_zero(t.ptr, 3 * page));
    FREE(mmt, t.ptr, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

static void huge_mappings_are_huge_aligned(void)
{
    sm_mctx_t c = ALLOC(mmh, (size_t)4 << 20, 16);
    CHECK(c.ptr && sm_ptr_aligned(c.ptr, (size_t)2 << 20));
    sm_mctx_t small = ALLOC(mmh, 100, 16);
    sm_mctx_t m = sm_mctx_block(small.ptr, 0, 0);
    CHECK(mmh_getmeta(&m) && m.usable == (64u << 10)); /* rounded to SM_OPT_GROWTH */
    FREE(mmh, c.ptr, 0, 0);
    FREE(mmh, small.ptr, 0, 0);
}

/* ---- split and remap (beyond the contract, for decay_cache) ---- */

static bool unmapped(void *p) { return msync(p, sm_plat_page_size(), MS_ASYNC) != 0 && errno == ENOMEM; }
static size_t usable_of(bool (*getmeta)(sm_mctx_t *), void *p)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    return getmeta(&m) ? m.usable : 0; /* 0: not a live block */
}
static bool mm_getmeta_fn(sm_mctx_t *c) { return mm_getmeta(c); }
static bool mmt_getmeta_fn(sm_mctx_t *c) { return mmt_getmeta(c); }
static bool mmh_getmeta_fn(sm_mctx_t *c) { return mmh_getmeta(c); }
static bool mmf_getmeta_fn(sm_mctx_t *c) { return mmf_getmeta(c); }
#define MM_USABLE(p) usable_of(mm_getmeta_fn, (p))

/* The pages right after [p, p + len), mapped by hand so nothing can grow into them; NULL if the
 * kernel had already put something there (the caller skips). */
static void *guard_after(void *p, size_t len, size_t guard)
{
    char *want = (char *)p + len;
    void *g = mmap(want, guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (g == MAP_FAILED)
        return NULL;
    if (g != want) { /* a kernel before 4.17 treats the flag as a hint */
        munmap(g, guard);
        return NULL;
    }
    return g;
}

static void split_makes_two_independent_blocks(void)
{
    reset_errors();
    size_t page = sm_plat_page_size(), len = (size_t)4 << 20, head = (size_t)1 << 20;
    sm_mctx_t c = ALLOC(mm, len, 16);
    CHECK(c.ptr && MM_USABLE(c.ptr) == len);
    if (!c.ptr)
        return;
    char *p = (char *)c.ptr;
    check_fill(p, head, 11);
    check_fill(p + head, len - head, 12);
    sm_mctx_t s = sm_mctx_block(p, 0, 0);
    char *tail = (char *)mm_split(&s, head);
    CHECK(tail == p + head && s.ptr == p);
    if (tail != p + head)
        return;
    CHECKF(MM_USABLE(p) == head, "head %zu", MM_USABLE(p));
    CHECKF(MM_USABLE(tail) == len - head, "tail %zu", MM_USABLE(tail));
    sm_mctx_t m = sm_mctx_block(tail, 0, 0);
    CHECK(mm_getmeta(&m) && m.owner && !strcmp(m.owner, "mm"));
    CHECK(check_verify(p, head, 11) && check_verify(tail, len - head, 12)); /* no bytes moved */
    CHECK(is_mapped(p, len));
    /* Each part is a block: the head frees alone, by size, and the tail is untouched. */
    FREE(mm, p, head, SM_F_SIZED);
    CHECK(unmapped(p) && unmapped(p + head - page) && MM_USABLE(p) == 0);
    CHECK(MM_USABLE(tail) == len - head && is_mapped(tail, len - head) && check_verify(tail, len - head, 12));
    /* A sized free of the tail larger than it is refused (it knows its own size, not the old one). */
    FREE(mm, tail, len, SM_F_SIZED);
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && is_mapped(tail, len - head));
    FREE(mm, tail, 0, 0);
    CHECK(unmapped(tail) && unmapped(tail + (len - head) - page) && MM_USABLE(tail) == 0);
    FREE(mm, tail, 0, 0); /* gone: a second free is reported, not obeyed */
    CHECK(errors[SM_ERR_INVALID_FREE] == 2 && errors[SM_ERR_DOUBLE_FREE] == 0);

    /* The other order: the tail first, then the head; and a tail split again. */
    c = ALLOC(mm, len, 16);
    p = (char *)c.ptr;
    check_fill(p, len, 13);
    s = sm_mctx_block(p, 0, 0);
    tail = (char *)mm_split(&s, 3 * page);
    CHECK(tail == p + 3 * page && MM_USABLE(p) == 3 * page);
    sm_mctx_t st = sm_mctx_block(tail, 0, 0);
    char *tail2 = tail ? (char *)mm_split(&st, 5 * page) : NULL;
    CHECK(tail2 == p + 8 * page && MM_USABLE(tail) == 5 * page && MM_USABLE(tail2) == len - 8 * page);
    CHECK(check_verify(p, len, 13));
    FREE(mm, tail2, 0, 0);
    CHECK(unmapped(tail2) && is_mapped(p, 8 * page) && check_verify(p, 8 * page, 13));
    FREE(mm, tail, 0, 0);
    CHECK(unmapped(tail) && is_mapped(p, 3 * page) && check_verify(p, 3 * page, 13));
    FREE(mm, p, 0, 0);
    CHECK(unmapped(p) && MM_USABLE(p) == 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 2 && errors[SM_ERR_DOUBLE_FREE] == 0);
    reset_errors();
}

/* join undoes a split: the pieces are one block again (usable, a free unmaps all of it, no bytes
 * moved); it refuses blocks that do not touch, a block that is not live and direct, and a carved one. */
static void join_makes_one_block_of_two(void)
{
    reset_errors();
    size_t page = sm_plat_page_size(), len = 32 * page;
    sm_mctx_t c = ALLOC(mm, len, 16);
    char *p = (char *)c.ptr;
    check_fill(p, len, 61);
    sm_mctx_t s = sm_mctx_block(p, 0, 0);
    char *mid = (char *)mm_split(&s, 8 * page);
    sm_mctx_t sm = sm_mctx_block(mid, 0, 0);
    char *end = mid ? (char *)mm_split(&sm, 8 * page) : NULL;
    CHECK(mid == p + 8 * page && end == p + 16 * page);
    if (!end)
        return;
    sm_mctx_t j = sm_mctx_block(p, 0, 0);
    CHECK(!mm_join(&j, end) && MM_USABLE(p) == 8 * page); /* not adjacent */
    CHECK(!mm_join(&j, p + page) && !mm_join(&j, NULL));  /* not a block */
    sm_mctx_t t = ALLOC(mmt, 8 * page, 16);
    sm_mctx_t jt = sm_mctx_block(t.ptr, 0, 0);
    CHECK(!mmt_join(&jt, (char *)t.ptr + 8 * page) && !mm_join(&j, t.ptr)); /* carved */
    CHECK(mm_join(&j, mid) && j.ptr == p && MM_USABLE(p) == 16 * page && MM_USABLE(mid) == 0);
    sm_mctx_t je = sm_mctx_block(mid, 0, 0);
    CHECK(!mm_join(&je, end)); /* mid is no longer a block */
    CHECK(mm_join(&j, end) && MM_USABLE(p) == len && MM_USABLE(end) == 0);
    CHECK(check_verify(p, len, 61) && is_mapped(p, len));
    /* One block: a sized free of the whole length is accepted and unmaps every page. */
    FREE(mm, p, len, SM_F_SIZED);
    CHECK(unmapped(p) && unmapped(mid) && unmapped(p + len - page) && MM_USABLE(p) == 0);
    FREE(mm, mid, 0, 0); /* not a block of its own any more: reported, not obeyed */
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && errors[SM_ERR_DOUBLE_FREE] == 0);
    FREE(mmt, t.ptr, 0, 0);
    reset_errors();
}

/* A range of two kernel mappings (as join leaves one) grows in place where the pages after it are
 * free, although mremap refuses such a range (EFAULT), and not where they are taken. */
static void remap_inplace_grows_a_range_of_two_mappings(void)
{
    size_t page = sm_plat_page_size();
    char *p = (char *)mmap(NULL, 16 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED)
        return;
    munmap(p + 8 * page, 8 * page); /* free pages after the range */
    /* Two mappings: different flags keep the kernel from merging the halves. */
    CHECK(madvise(p + 4 * page, 4 * page, MADV_DONTFORK) == 0);
    check_fill(p, 8 * page, 91);
    errno = 0;
    CHECK(mremap(p, 8 * page, 10 * page, 0) == MAP_FAILED && errno == EFAULT); /* what the kernel says */
    CHECK(sm_plat_remap_inplace(p, 8 * page, 10 * page) == 0);
    memset(p + 8 * page, 0x5a, 2 * page);
    CHECK(check_verify(p, 8 * page, 91) && is_mapped(p, 10 * page));
    /* Taken: refused, nothing mapped over what is there. */
    char *g = (char *)guard_after(p, 10 * page, page);
    if (g) {
        g[0] = 7;
        errno = 0;
        CHECK(sm_plat_remap_inplace(p, 10 * page, 12 * page) == -1 && errno == ENOMEM && g[0] == 7);
        munmap(g, page);
    }
    CHECK(check_verify(p, 8 * page, 91) && p[9 * page] == 0x5a);
    munmap(p, 10 * page);
}

static void split_refuses_what_it_cannot_cut(void)
{
    reset_errors();
    size_t page = sm_plat_page_size(), len = 16 * page;
    sm_mctx_t c = ALLOC(mm, len, 16);
    char *p = (char *)c.ptr;
    check_fill(p, len, 21);
    int on_stack;
    void *heap = malloc(64);
    /* Nothing to cut: n at or past the end (rounding included), or absurd. */
    size_t too_big[] = { len, len - page + 1, len + 1, 2 * len, SIZE_MAX / 2, SIZE_MAX / 2 + 1, SIZE_MAX };
    for (size_t i = 0; i < sizeof too_big / sizeof *too_big; i++) {
        sm_mctx_t s = sm_mctx_block(p, 0, 0);
        CHECKF(mm_split(&s, too_big[i]) == NULL && s.ptr == p, "n %zx cut", too_big[i]);
    }
    /* Not a live direct block of this instance: foreign, interior, carved, another instance's. */
    sm_mctx_t t = ALLOC(mmt, 8 * page, 16);
    sm_mctx_t h = ALLOC(mmh, (size_t)1 << 20, 16);
    void *bad[] = { NULL, &on_stack, heap, p + 16, p + page, p + 8 * page, t.ptr };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sm_mctx_t s = sm_mctx_block(bad[i], 0, 0);
        CHECKF(mm_split(&s, page) == NULL, "pointer %zu cut", i);
        CHECKF(mmt_split(&s, page) == NULL, "pointer %zu cut by mmt", i);
    }
    sm_mctx_t s = sm_mctx_block(h.ptr, 0, 0);
    CHECK(mm_split(&s, page) == NULL && usable_of(mmh_getmeta_fn, h.ptr) == ((size_t)1 << 20));
    CHECK(usable_of(mmt_getmeta_fn, t.ptr) >= 8 * page && usable_of(mmt_getmeta_fn, (char *)t.ptr + page) == 0);
    /* Nothing changed: the block is whole, no page inside it became a block. */
    CHECK(MM_USABLE(p) == len && check_verify(p, len, 21));
    for (size_t off = page; off < len; off += page)
        CHECKF(MM_USABLE(p + off) == 0, "page %zu became a block", off / page);
    /* A freed block cannot be cut either. */
    sm_mctx_t d = ALLOC(mm, len, 16);
    void *dp = d.ptr;
    FREE(mm, dp, 0, 0);
    s = sm_mctx_block(dp, 0, 0);
    CHECK(mm_split(&s, page) == NULL && MM_USABLE(dp) == 0 && MM_USABLE((char *)dp + page) == 0);
    /* n not a page multiple is rounded up (documented), never cut mid-page. */
    s = sm_mctx_block(p, 0, 0);
    char *tail = (char *)mm_split(&s, page + 1);
    CHECK(tail == p + 2 * page && MM_USABLE(p) == 2 * page && MM_USABLE(tail) == len - 2 * page);
    CHECK(check_verify(p, len, 21));
    /* The growth granularity rounds too: mmh cuts at 64 KiB. */
    s = sm_mctx_block(h.ptr, 0, 0);
    char *htail = (char *)mmh_split(&s, page);
    CHECK(htail == (char *)h.ptr + (64 << 10) && usable_of(mmh_getmeta_fn, h.ptr) == (64u << 10) &&
          usable_of(mmh_getmeta_fn, htail) == ((size_t)1 << 20) - (64 << 10));
    FREE(mmh, htail, 0, 0);
    FREE(mmh, h.ptr, 0, 0);
    FREE(mm, tail, 0, 0);
    FREE(mm, p, 0, 0);
    FREE(mmt, t.ptr, 0, 0);
    free(heap);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

static void remap_grows_in_place_when_the_pages_are_free(void)
{
    reset_errors();
    size_t len = (size_t)1 << 20, big = (size_t)8 << 20;
    /* Map 8 MiB and give back all but the first 1 MiB: the pages after the block are free. */
    sm_mctx_t c = ALLOC(mm, big, 16);
    char *p = (char *)c.ptr;
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(mm_resize(&r, len) && MM_USABLE(p) == len && unmapped(p + len));
    check_fill(p, len, 31);
    r = sm_mctx_block(p, 0, 0);
    CHECK(mm_remap(&r, 4 * len + 100)); /* rounded up to a page */
    size_t want = sm_align_up(4 * len + 100, sm_plat_page_size());
    CHECKF(r.ptr == p, "moved from %p to %p although the pages after it were free", (void *)p, r.ptr);
    if (r.ptr != p) {
        FREE(mm, r.ptr, 0, 0);
        return;
    }
    CHECK(MM_USABLE(p) == want && is_mapped(p, want));
    CHECK(check_verify(p, len, 31) && all_zero((unsigned char *)p + len, want - len));
    /* Shrinking through remap is a resize: the tail goes, the block stays. */
    r = sm_mctx_block(p, 0, 0);
    CHECK(mm_remap(&r, 2 * len) && r.ptr == p && MM_USABLE(p) == 2 * len && unmapped(p + 2 * len));
    r = sm_mctx_block(p, 0, 0);
    CHECK(mm_remap(&r, 2 * len) && r.ptr == p && MM_USABLE(p) == 2 * len); /* same size: nothing */
    CHECK(check_verify(p, len, 31));
    FREE(mm, p, 0, 0);
    CHECK(unmapped(p) && unmapped(p + len) && MM_USABLE(p) == 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0);
}

static void remap_moves_when_the_next_pages_are_taken(void)
{
    reset_errors();
    size_t page = sm_plat_page_size(), len = (size_t)1 << 20, big = (size_t)2 << 20;
    sm_mctx_t c = ALLOC(mm, big, 16);
    char *p = (char *)c.ptr;
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(mm_resize(&r, len));
    void *guard = guard_after(p, len, page);
    if (!guard) {
        check_skip("remap_moves_when_the_next_pages_are_taken", "could not map a guard after the block");
        FREE(mm, p, 0, 0);
        return;
    }
    memset(guard, 0xee, page);
    check_fill(p, len, 41);
    r = sm_mctx_block(p, 0, 0);
    CHECK(!mm_resize(&r, 3 * len) && MM_USABLE(p) == len); /* in place is impossible */
    r = sm_mctx_block(p, 0, 0);
    CHECK(mm_remap(&r, 3 * len));
    char *q = (char *)r.ptr;
    CHECK(q && q != p);
    if (!q || q == p) {
        munmap(guard, page);
        return;
    }
    CHECK(MM_USABLE(p) == 0 && unmapped(p) && unmapped(p + len - page)); /* the old address is gone */
    CHECKF(MM_USABLE(q) == 3 * len, "new block %zu bytes", MM_USABLE(q));
    sm_mctx_t m = sm_mctx_block(q, 0, 0);
    CHECK(mm_getmeta(&m) && m.owner && !strcmp(m.owner, "mm"));
    /* Contents moved with the page tables: check_fill's pattern depends on the address, so compare
     * against a copy written at the old address. */
    bool same = true;
    for (size_t i = 0; i < len && same; i++)
        same = (unsigned char)q[i] == check_pattern_byte(p, i, 41);
    CHECK(same && all_zero((unsigned char *)q + len, 2 * len));
    CHECK(resident_pages(q, len) == len / page); /* resident pages moved, not refaulted */
    unsigned char *g = (unsigned char *)guard;
    CHECK(g[0] == 0xee && g[page - 1] == 0xee); /* the neighbour was not touched */
    check_fill(q, 3 * len, 42);
    /* Free at the new address unmaps all of it; the old address stays foreign. */
    FREE(mm, p, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && is_mapped(q, 3 * len));
    FREE(mm, q, 0, 0);
    CHECK(unmapped(q) && unmapped(q + 3 * len - page) && MM_USABLE(q) == 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && errors[SM_ERR_DOUBLE_FREE] == 0);
    munmap(guard, page);

    /* The guard can be a block of the same layer: the tail of a split. */
    c = ALLOC(mm, 2 * len, 16);
    p = (char *)c.ptr;
    check_fill(p, len, 43);
    sm_mctx_t s = sm_mctx_block(p, 0, 0);
    char *tail = (char *)mm_split(&s, len);
    check_fill(tail, len, 44);
    r = sm_mctx_block(p, 0, 0);
    CHECK(tail && mm_remap(&r, 2 * len) && r.ptr != p && MM_USABLE(r.ptr) == 2 * len && MM_USABLE(p) == 0);
    CHECK(MM_USABLE(tail) == len && check_verify(tail, len, 44));
    FREE(mm, tail, 0, 0);
    FREE(mm, r.ptr, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && errors[SM_ERR_DOUBLE_FREE] == 0);
    reset_errors();
}

static long minor_faults(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : 0;
}

/* The platform's move by pieces, on a range of three kernel mappings (a read-only page between two
 * writable parts): every byte arrives, the old range is gone, and at most the piece that straddles
 * the mappings is copied (a copy of the whole would fault in every page; Linux 6.17 and later move
 * that piece too). */
static void move_pieces_carries_a_range_of_three_mappings(void)
{
    size_t page = sm_plat_page_size(), len = (size_t)12 << 20, ro = (size_t)3 << 20;
    char *src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dest = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(src != MAP_FAILED && dest != MAP_FAILED);
    if (src == MAP_FAILED || dest == MAP_FAILED)
        return;
    (void)madvise(src, len, MADV_NOHUGEPAGE); /* a fault per page: a copy shows in the count */
    (void)madvise(dest, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += 8)
        *(size_t *)(src + i) = i * 0x9e3779b97f4a7c15ull;
    CHECK(mprotect(src + ro, page, PROT_READ) == 0);
    long before = minor_faults();
    sm_plat_move_pieces(src, len, dest);
    long faults = minor_faults() - before;
    bool same = true;
    for (size_t i = 0; i < len && same; i += 8)
        same = *(size_t *)(dest + i) == i * 0x9e3779b97f4a7c15ull;
    CHECK(same && unmapped(src) && unmapped(src + ro) && unmapped(src + len - page));
    CHECKF(faults < (long)(len / page / 2), "%ld minor faults moving %zu pages", faults, len / page);
    munmap(dest, len);
}

/* A block moved once spans two kernel mappings (the moved pages, the fresh tail), which mremap
 * before Linux 6.17 refuses whole (EFAULT): its next move still moves its pages (by pieces there),
 * taking a fraction of the faults a copy would. */
static void remap_moves_a_block_of_two_mappings_again(void)
{
    reset_errors();
    size_t page = sm_plat_page_size(), len = (size_t)8 << 20;
    sm_mctx_t c = ALLOC(mm, 2 * len, 16);
    char *p = (char *)c.ptr;
    sm_mctx_t h = sm_mctx_block(p, 0, 0);
    CHECK(p && mm_resize(&h, len)); /* its freed tail leaves room for the guard */
    void *g1 = p ? guard_after(p, len, page) : NULL;
    if (!p || !g1) {
        check_skip("remap_moves_a_block_of_two_mappings_again", "could not map a guard after the block");
        if (p)
            FREE(mm, p, 0, 0);
        return;
    }
    check_fill(p, len, 51);
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(mm_remap(&r, 2 * len) && r.ptr != p); /* moved: [moved 8 MiB][fresh 8 MiB] */
    char *q = (char *)r.ptr;
    errno = 0;
    CHECK(mremap(q, 2 * len, 2 * len + page, 0) == MAP_FAILED && errno == EFAULT); /* two mappings */
    check_fill(q, 2 * len, 52);
    void *g2 = guard_after(q, 2 * len, page); /* NULL: the pages after it are taken already */
    long before = minor_faults();
    r = sm_mctx_block(q, 0, 0);
    CHECK(mm_remap(&r, 3 * len));
    long faults = minor_faults() - before;
    char *q2 = (char *)r.ptr;
    if (q2 == q) { /* grew in place after all: the pages after it were free */
        check_skip("remap_moves_a_block_of_two_mappings_again", "the moved block grew in place");
        FREE(mm, q, 0, 0);
        munmap(g1, page);
        if (g2)
            munmap(g2, page);
        return;
    }
    CHECK(unmapped(q) && unmapped(q + 2 * len - page) && MM_USABLE(q2) == 3 * len);
    bool same = true;
    for (size_t i = 0; i < 2 * len && same; i += 61)
        same = (unsigned char)q2[i] == check_pattern_byte(q, i, 52);
    CHECK(same && all_zero((unsigned char *)q2 + 2 * len, len));
    /* A copy of 16 MiB faults 4096 pages in; the pieces move with at most one 2 MiB piece copied. */
    CHECKF(faults < (long)(len / page), "%ld minor faults moving a block of %zu pages", faults, 2 * len / page);
    check_fill(q2, 3 * len, 53);
    CHECK(check_verify(q2, 3 * len, 53));
    FREE(mm, q2, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
    munmap(g1, page);
    if (g2)
        munmap(g2, page);
}

static void remap_failure_leaves_the_block_intact(void)
{
    reset_errors();
    size_t page = sm_plat_page_size(), len = 64 * page;
    sm_mctx_t c = ALLOC(mm, len, 16);
    char *p = (char *)c.ptr;
    check_fill(p, len, 51);
    size_t absurd[] = { SIZE_MAX / 4, SIZE_MAX / 2 - page, SIZE_MAX / 2 + 1, SIZE_MAX - page, SIZE_MAX };
    for (size_t i = 0; i < sizeof absurd / sizeof *absurd; i++) {
        sm_mctx_t r = sm_mctx_block(p, 0, 0);
        CHECKF(!mm_remap(&r, absurd[i]) && r.ptr == p, "remap to %zx", absurd[i]);
    }
    CHECK(MM_USABLE(p) == len && is_mapped(p, len) && check_verify(p, len, 51));
    /* Not a live direct block: foreign, interior, carved (mmt), freed. */
    int on_stack;
    sm_mctx_t t = ALLOC(mmt, 4 * page, 16);
    check_fill(t.ptr, 4 * page, 52);
    void *bad[] = { NULL, &on_stack, p + page, t.ptr };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sm_mctx_t r = sm_mctx_block(bad[i], 0, 0);
        CHECKF(!mm_remap(&r, 2 * len) && r.ptr == bad[i], "pointer %zu remapped", i);
        r = sm_mctx_block(bad[i], 0, 0);
        CHECKF(!mmt_remap(&r, 2 * len) && r.ptr == bad[i], "pointer %zu remapped by mmt", i);
    }
    CHECK(usable_of(mmt_getmeta_fn, t.ptr) >= 4 * page && check_verify(t.ptr, 4 * page, 52));
    CHECK(MM_USABLE(p) == len && MM_USABLE(p + page) == 0 && check_verify(p, len, 51));
    FREE(mmt, t.ptr, 0, 0);
    FREE(mm, p, 0, 0);
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(!mm_remap(&r, 2 * len) && MM_USABLE(p) == 0 && unmapped(p));
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* MOVE of a carved block (a realloc's growth past the thread heap): its pages go to a mapping of
 * their own, not copied; its carved range stays mapped, empty, and goes back to the heap for reuse.
 * The new block is a direct one from then on (freed by unmapping). */
static void move_carries_a_carved_block_out(void)
{
    size_t page = sm_plat_page_size(), len = 128 << 10;
    sm_mctx_t t = ALLOC(mmt, len, 16);
    CHECK(t.ptr != NULL && usable_of(mmt_getmeta_fn, t.ptr) == len);
    check_fill_movable(t.ptr, len, 61);
    sm_mctx_t r = sm_mctx_block(t.ptr, 0, 0);
    if (!mmt_move(&r, 4 * len + 1)) {
        CHECK(r.ptr == t.ptr && usable_of(mmt_getmeta_fn, t.ptr) == len && check_verify_moved(t.ptr, len, 61));
        check_skip("move_carries_a_carved_block_out", "this kernel cannot move part of a mapping (MREMAP_DONTUNMAP)");
        FREE(mmt, t.ptr, 0, 0);
        return;
    }
    char *q = (char *)r.ptr;
    CHECK(q != t.ptr && usable_of(mmt_getmeta_fn, q) == sm_align_up(4 * len + 1, page));
    CHECK(check_verify_moved(q, len, 61) && resident_pages(q, len) == len / page); /* moved, resident */
    char *tail = q + len; /* the rest is fresh, zero */
    size_t zero = 0;
    for (size_t i = 0; i < 3 * len; i++)
        zero += tail[i] == 0;
    CHECK(zero == 3 * len);
    CHECKF(is_mapped(t.ptr, len) && resident_pages(t.ptr, len) <= 1 /* the bin's link */ && usable_of(mmt_getmeta_fn, t.ptr) == 0,
           "old range: mapped %d, %zu pages resident, usable %zu", is_mapped(t.ptr, len), (size_t)resident_pages(t.ptr, len),
           usable_of(mmt_getmeta_fn, t.ptr));
    sm_mctx_t again = ALLOC(mmt, len, 16); /* the carved range is free for reuse */
    CHECKF(again.ptr == t.ptr, "the old range %p was not reused (got %p)", t.ptr, again.ptr);
    FREE(mmt, again.ptr, 0, 0);
    FREE(mmt, q, 0, 0);
    CHECK(unmapped(q) && errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* Remap moves a block and leaves its old pages to the kernel, which may hand them to another
 * thread's mapping at once. The old address's registry entry must be gone before that can happen:
 * cleared after the move, it erased the new block's fresh entry, whose free was then reported as
 * invalid (and leaked). Movers grow blocks by remap while mappers take blocks of exactly the sizes
 * the movers vacate and check their registration; before the fix this failed within a second. */
static atomic_int race_stop;
static atomic_ulong race_lost, race_moves, race_maps;
static void *race_mover(void *arg)
{
    size_t page = sm_plat_page_size(), len = (size_t)(uintptr_t)arg * page;
    while (!atomic_load(&race_stop)) {
        sm_mctx_t c = ALLOC(mm, len, 16);
        if (!c.ptr)
            continue;
        sm_mctx_t r = sm_mctx_block(c.ptr, 0, 0);
        if (mm_remap(&r, 4 * len) && r.ptr != c.ptr)
            atomic_fetch_add(&race_moves, 1);
        if (MM_USABLE(r.ptr) != 4 * len)
            atomic_fetch_add(&race_lost, 1);
        FREE(mm, r.ptr, 0, 0);
    }
    return NULL;
}
static void *race_mapper(void *arg)
{
    size_t page = sm_plat_page_size(), len = (size_t)(uintptr_t)arg * page;
    while (!atomic_load(&race_stop)) {
        sm_mctx_t c = ALLOC(mm, len, 16);
        if (!c.ptr)
            continue;
        sched_yield(); /* let a mover finish a move meanwhile */
        if (MM_USABLE(c.ptr) != len)
            atomic_fetch_add(&race_lost, 1);
        FREE(mm, c.ptr, 0, 0);
        atomic_fetch_add(&race_maps, 1);
    }
    return NULL;
}
static void remap_racing_maps_keep_their_registration(void)
{
    reset_errors();
    enum { PAIRS = 4 };
    pthread_t t[2 * PAIRS];
    atomic_store(&race_stop, 0);
    for (uintptr_t i = 0; i < PAIRS; i++) {
        pthread_create(&t[2 * i], NULL, race_mover, (void *)(16 + 16 * i));
        pthread_create(&t[2 * i + 1], NULL, race_mapper, (void *)(16 + 16 * i));
    }
    usleep(800 * 1000);
    atomic_store(&race_stop, 1);
    for (int i = 0; i < 2 * PAIRS; i++)
        pthread_join(t[i], NULL);
    CHECKF(race_moves > 0, "no remap moved a block (nothing was tested)");
    CHECKF(race_lost == 0 && errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0,
           "%lu live blocks lost their registration, %d invalid and %d double frees reported "
           "(%lu moves, %lu maps)", (unsigned long)race_lost, errors[SM_ERR_INVALID_FREE],
           errors[SM_ERR_DOUBLE_FREE], (unsigned long)race_moves, (unsigned long)race_maps);
}

/* ---- FAA growth (mmf): regions taken from arenas by fetch-and-add ----
 * The cases run in order and share the instance's state: the first four take regions from a
 * layer with nothing to reuse (no freed block, no orphan tail), so the number of arenas is exact. */
enum { FAA_REGIONS = 4, FAA_LOG = 4096 };
#define FAA_REGION ((size_t)1 << 20)
#define FAA_ARENA (FAA_REGIONS * FAA_REGION)
#define FAA_BLOCK (FAA_REGION / 4) /* mmf's largest carved block: four fill a region */

static char *faa_arena_log[FAA_LOG];
static size_t faa_arenas_logged;
static unsigned long spy_sections;

static void spy_after_section(void)
{
    spy_sections++;
    uint64_t w = __atomic_load_n(&mmf_obj.arena_top, __ATOMIC_RELAXED); /* others add to it meanwhile */
    char *base = mmf_faa_base(w);
    if (w && (!faa_arenas_logged || faa_arena_log[faa_arenas_logged - 1] != base) && faa_arenas_logged < FAA_LOG)
        faa_arena_log[faa_arenas_logged++] = base;
}

/* The logged arena holding p, -1 if none. */
static long faa_arena_of(const void *p)
{
    for (size_t i = 0; i < faa_arenas_logged; i++)
        if ((const char *)p >= faa_arena_log[i] && (const char *)p < faa_arena_log[i] + FAA_ARENA)
            return (long)i;
    return -1;
}
/* r starts a region of an arena (so the whole region lies inside it). */
static bool faa_region_ok(const void *r)
{
    long a = faa_arena_of(r);
    return a >= 0 && (size_t)((const char *)r - faa_arena_log[a]) % FAA_REGION == 0;
}
/* Regions of the current arena handed out (all of them when there is none yet). */
static size_t faa_used(void)
{
    uint64_t w = __atomic_load_n(&mmf_obj.arena_top, __ATOMIC_RELAXED);
    return !w || mmf_faa_index(w) > FAA_REGIONS ? FAA_REGIONS : (size_t)mmf_faa_index(w);
}
/* The arenas there must be once `taken` more regions came from the top: none lost, none twice. */
static size_t faa_expected_arenas(size_t arenas, size_t used, size_t taken)
{
    size_t left = FAA_REGIONS - used;
    return taken <= left ? arenas : arenas + (taken - left + FAA_REGIONS - 1) / FAA_REGIONS;
}
static int faa_by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(char *const *)a, y = (uintptr_t)*(char *const *)b;
    return x < y ? -1 : x > y;
}
/* The n ranges [v[i], v[i] + len) are pairwise disjoint (v is sorted). */
static bool faa_disjoint(char **v, size_t n, size_t len)
{
    qsort(v, n, sizeof *v, faa_by_address);
    for (size_t i = 1; i < n; i++)
        if ((size_t)(v[i] - v[i - 1]) < len)
            return false;
    return true;
}

/* (d) One thread uses up an arena: 16 blocks fill its four regions, in order, taking the lock only
 * to reserve the arena; the 17th block needs a fifth region, so a second arena is reserved and its
 * first region is the reserving thread's. */
static char *faa_main_blocks[4 * FAA_REGIONS + 1];
enum { FAA_MAIN = 4 * FAA_REGIONS + 1 };
static void faa_used_up_arena_is_followed_by_a_new_one(void)
{
    reset_errors();
    CHECK(mmf_obj.arenas == 0 && mmf_obj.arena_top == 0 && faa_arenas_logged == 0);
    for (size_t i = 0; i < FAA_MAIN; i++) {
        sm_mctx_t c = ALLOC(mmf, FAA_BLOCK - (i & 1) * 100, 16); /* rounded up to the same pages */
        faa_main_blocks[i] = c.ptr;
        CHECKF(c.ptr && (c.flags & SM_F_FRESH) && all_zero(c.ptr, FAA_BLOCK), "block %zu: %p", i, c.ptr);
        if (!c.ptr)
            return;
        check_fill(c.ptr, FAA_BLOCK, 100 + (unsigned)i);
        size_t want_arenas = i < 4 * FAA_REGIONS ? 1 : 2;
        CHECKF(mmf_obj.arenas == want_arenas && faa_arenas_logged == want_arenas, "block %zu: %zu arenas, %zu seen",
               i, mmf_obj.arenas, faa_arenas_logged);
        if (faa_arenas_logged != want_arenas)
            return;
        char *want = i < 4 * FAA_REGIONS ? faa_arena_log[0] + i * FAA_BLOCK : faa_arena_log[1];
        CHECKF(c.ptr == want, "block %zu at %p, not %p", i, c.ptr, (void *)want);
    }
    CHECKF(spy_sections == 2, "%lu critical sections for 5 regions: taking a region took the lock", spy_sections);
    CHECK(mmf_faa_index(mmf_obj.arena_top) == 1); /* the reserving thread took region 0 itself */
    char *a0 = faa_arena_log[0], *a1 = faa_arena_log[1];
    CHECK(a1 >= a0 + FAA_ARENA || a0 >= a1 + FAA_ARENA);
    for (size_t i = 0; i < FAA_MAIN; i++) {
        sm_mctx_t m = sm_mctx_block(faa_main_blocks[i], 0, 0);
        CHECKF(mmf_getmeta(&m) && m.usable == FAA_BLOCK && !strcmp(m.owner, "mmf"), "block %zu usable %zu", i, m.usable);
        CHECKF(check_verify(faa_main_blocks[i], FAA_BLOCK, 100 + (unsigned)i), "block %zu corrupted", i);
    }
    /* Larger than a thread heap serves: a mapping of its own, outside the arenas. */
    sm_mctx_t d = ALLOC(mmf, FAA_BLOCK + 1, 16);
    sm_mctx_t m = sm_mctx_block(d.ptr, 0, 0);
    CHECK(d.ptr && faa_arena_of(d.ptr) < 0 && mmf_getmeta(&m) && m.usable == FAA_BLOCK + sm_plat_page_size());
    FREE(mmf, d.ptr, 0, 0);
    CHECK(mmf_obj.freed_count == 0 && mmf_obj.arenas == 2);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* The race reasoning on the layer's own functions, with the interleavings a test cannot time: a
 * fetch-and-add result names a region only below its arena's end, whatever the overshoot; a
 * thread that overshot an arena another thread has replaced meanwhile reserves nothing when it
 * gets the lock (it retries); one that overshot the current arena reserves the next and gets its
 * first region, and the top then names the region after it. */
static void faa_overshoot_names_no_region(void)
{
    reset_errors();
    CHECK(faa_arenas_logged >= 2); /* after the case above */
    if (faa_arenas_logged < 2)
        return;
    char *old = faa_arena_log[0], *high = (char *)(((uintptr_t)1 << 47) - FAA_ARENA);
    for (uint64_t i = 0; i < FAA_REGIONS; i++) {
        CHECK(mmf_faa_region_of(mmf_faa_word(old, i)) == old + i * FAA_REGION);
        CHECK(mmf_faa_base(mmf_faa_word(high, i)) == high && mmf_faa_index(mmf_faa_word(high, i)) == i);
    }
    const uint64_t past[] = { FAA_REGIONS, FAA_REGIONS + 1, FAA_REGIONS + 1000, ((uint64_t)1 << 28) - 1 };
    for (size_t i = 0; i < sizeof past / sizeof *past; i++)
        CHECKF(mmf_faa_region_of(mmf_faa_word(old, past[i])) == NULL &&
                   mmf_faa_base(mmf_faa_word(high, past[i])) == high,
               "index %llu", (unsigned long long)past[i]);
    CHECK(mmf_faa_region_of(0) == NULL); /* no arena yet */

    uint64_t top = mmf_obj.arena_top;
    size_t arenas = mmf_obj.arenas;
    struct mmf_cs_arena late = { mmf_faa_word(old, FAA_REGIONS + 2), NULL, false };
    sm_sync_spy_atomic_exec(&mmf_obj.lock, mmf_cs_arena, &late);
    CHECK(late.retry && !late.region && mmf_obj.arena_top == top && mmf_obj.arenas == arenas);

    /* Use up the current arena by hand (the regions are lost: address space only), overshoot it. */
    uint64_t w;
    while (mmf_faa_region_of(w = __atomic_fetch_add(&mmf_obj.arena_top, 1, __ATOMIC_ACQUIRE)) != NULL)
        ;
    struct mmf_cs_arena first = { w, NULL, false };
    sm_sync_spy_atomic_exec(&mmf_obj.lock, mmf_cs_arena, &first);
    CHECK(!first.retry && first.region && mmf_obj.arenas == arenas + 1 && faa_arenas_logged == arenas + 1);
    CHECK(first.region == faa_arena_log[faa_arenas_logged - 1] && faa_region_ok(first.region));
    CHECK(mmf_obj.arena_top == mmf_faa_word(first.region, 1));
    CHECK(mmf_faa_region_of(mmf_obj.arena_top) == first.region + FAA_REGION);
    /* The other overshooter of that arena, after it: the top names the new arena, so it retries. */
    struct mmf_cs_arena second = { w + 1, NULL, false };
    sm_sync_spy_atomic_exec(&mmf_obj.lock, mmf_cs_arena, &second);
    CHECK(second.retry && !second.region && mmf_obj.arenas == arenas + 1);
    /* The region handed out is recorded nowhere yet, but its page-map nodes exist: a record is one store. */
    CHECK(mmf_record(first.region, FAA_BLOCK | mmf_w_carved) && usable_of(mmf_getmeta_fn, first.region) == FAA_BLOCK);
    CHECK(mmf_record(first.region, 0) && usable_of(mmf_getmeta_fn, first.region) == 0); /* lost, as above */
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* (a) Threads start together and each takes one region (four blocks fill it: no tail is left at
 * exit), fills its blocks, waits until all have, and checks them. */
enum { FAA_THREADS = 16 };
static char *faa_thread_blocks[FAA_THREADS][4];
static pthread_barrier_t faa_start, faa_filled;
static void *faa_fill_a_region(void *arg)
{
    long t = (long)(intptr_t)arg, bad = 0;
    pthread_barrier_wait(&faa_start);
    for (int k = 0; k < 4; k++) {
        sm_mctx_t c = ALLOC(mmf, FAA_BLOCK, 16);
        faa_thread_blocks[t][k] = c.ptr;
        if (!c.ptr) {
            bad = -1;
            break;
        }
        bad += !all_zero(c.ptr, FAA_BLOCK);
        check_fill(c.ptr, FAA_BLOCK, (unsigned)(t * 4 + k));
    }
    pthread_barrier_wait(&faa_filled); /* a block handed out twice shows now */
    for (int k = 0; k < 4 && bad >= 0; k++)
        bad += !check_verify(faa_thread_blocks[t][k], FAA_BLOCK, (unsigned)(t * 4 + k));
    return (void *)bad;
}

static void faa_threads_take_disjoint_regions_inside_arenas(void)
{
    reset_errors();
    size_t arenas = mmf_obj.arenas, used = faa_used();
    pthread_barrier_init(&faa_start, NULL, FAA_THREADS);
    pthread_barrier_init(&faa_filled, NULL, FAA_THREADS);
    check_threads(FAA_THREADS, faa_fill_a_region);
    pthread_barrier_destroy(&faa_start);
    pthread_barrier_destroy(&faa_filled);
    size_t want = faa_expected_arenas(arenas, used, FAA_THREADS);
    CHECKF(mmf_obj.arenas == want && faa_arenas_logged == want, "%zu arenas (%zu seen), %zu expected",
           mmf_obj.arenas, faa_arenas_logged, want);
    char *regions[FAA_THREADS + FAA_MAIN / 4 + 1];
    size_t n = 0;
    for (int t = 0; t < FAA_THREADS; t++) {
        char *r = faa_thread_blocks[t][0];
        CHECKF(r && faa_region_ok(r), "thread %d: region %p is not a region of an arena", t, (void *)r);
        for (int k = 1; k < 4; k++) /* carved in order from one region */
            CHECKF(faa_thread_blocks[t][k] == r + k * FAA_BLOCK, "thread %d block %d", t, k);
        regions[n++] = r;
    }
    for (size_t i = 0; i < FAA_MAIN; i += 4)
        regions[n++] = faa_main_blocks[i];
    CHECK(faa_disjoint(regions, n, FAA_REGION));
    CHECK(mmf_obj.orphans == NULL && mmf_obj.freed_count == 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* Threads take regions as fast as they can (blocks carved, never touched or freed), so the top is
 * used up while others add to it, over and over: every region must be handed out once, inside an
 * arena, and the arenas must be exactly as many as the regions need. */
enum { FAA_RACERS = 4, FAA_RACE_REGIONS = 256 };
static char *faa_race_blocks[FAA_RACERS][4 * FAA_RACE_REGIONS];
static void *faa_race(void *arg)
{
    long t = (long)(intptr_t)arg;
    pthread_barrier_wait(&faa_start);
    for (int i = 0; i < 4 * FAA_RACE_REGIONS; i++) {
        sm_mctx_t c = ALLOC(mmf, FAA_BLOCK, 16);
        if (!c.ptr)
            return (void *)-1L;
        faa_race_blocks[t][i] = c.ptr; /* untouched: a page fault per block would space the adds out */
    }
    return NULL;
}

static void faa_racing_threads_never_share_a_region(void)
{
    reset_errors();
    size_t arenas = mmf_obj.arenas, used = faa_used();
    unsigned long sections = spy_sections;
    pthread_barrier_init(&faa_start, NULL, FAA_RACERS);
    check_threads(FAA_RACERS, faa_race);
    pthread_barrier_destroy(&faa_start);
    size_t want = faa_expected_arenas(arenas, used, FAA_RACERS * FAA_RACE_REGIONS);
    CHECKF(mmf_obj.arenas == want && faa_arenas_logged == want, "%zu arenas (%zu seen), %zu expected",
           mmf_obj.arenas, faa_arenas_logged, want);
    static char *regions[FAA_RACERS * FAA_RACE_REGIONS];
    size_t n = 0, bad = 0;
    for (int t = 0; t < FAA_RACERS; t++)
        for (int i = 0; i < 4 * FAA_RACE_REGIONS; i++) {
            char *p = faa_race_blocks[t][i];
            bad += !p;
            if (!p)
                continue;
            if (i % 4 == 0) {
                bad += !faa_region_ok(p);
                regions[n++] = p;
            } else {
                bad += p != faa_race_blocks[t][i - 1] + FAA_BLOCK;
            }
        }
    CHECKF(bad == 0, "%zu blocks missing, outside an arena or out of order", bad);
    CHECK(faa_disjoint(regions, n, FAA_REGION));
    /* Sections beyond the reservations: threads that found the arena used up and already replaced. */
    unsigned long retries = spy_sections - sections - (unsigned long)(want - arenas);
    printf("# os_mmap_heap: %zu arenas for %zu regions, %lu retries after a used-up arena\n", want - arenas, n, retries);
    CHECK(mmf_obj.orphans == NULL && errors[SM_ERR_INVALID_FREE] == 0);
}

/* Orphan tails work as without FAA growth: each thread carves a block and exits, the next adopts
 * the rest of its region, so ten threads use one region. */
static void *faa_carve_and_exit(void *out)
{
    sm_mctx_t c = ALLOC(mmf, 10000, 16);
    if (c.ptr)
        check_fill(c.ptr, 10000, 5);
    *(void **)out = c.ptr;
    return NULL; /* the lifecycle service runs mmf_thread_exit */
}

static void faa_exited_threads_tails_are_adopted(void)
{
    reset_errors();
    enum { N = 10 };
    void *blocks[N];
    size_t arenas = mmf_obj.arenas;
    for (int i = 0; i < N; i++) {
        pthread_t t;
        pthread_create(&t, NULL, faa_carve_and_exit, &blocks[i]);
        pthread_join(t, NULL);
        CHECKF(mmf_obj.orphans != NULL, "thread %d left no tail", i);
    }
    CHECK(blocks[0] && faa_region_ok(blocks[0]) && mmf_obj.arenas <= arenas + 1);
    for (int i = 0; i < N; i++) {
        CHECKF(blocks[i] && check_verify(blocks[i], 10000, 5), "block %d", i);
        CHECKF(blocks[i] && (size_t)((char *)blocks[i] - (char *)blocks[0]) < FAA_REGION,
               "block %d outside the first thread's region", i);
    }
    for (int i = 0; i < N; i++)
        FREE(mmf, blocks[i], 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* (b) Blocks carved by threads now gone (and by this one) are freed by other threads, then
 * allocated again by others: every block comes back from the freed ones, zeroed, and no region or
 * arena is taken meanwhile. */
enum { FAA_FREED = FAA_MAIN + 4 * FAA_THREADS, FAA_WORKERS = 4 };
static char *faa_freed[FAA_FREED], *faa_again[FAA_FREED];
static void *faa_free_share(void *arg)
{
    long w = (long)(intptr_t)arg, bad = 0;
    for (int i = (int)w; i < FAA_FREED; i += FAA_WORKERS) {
        unsigned seed = i < FAA_MAIN ? 100 + (unsigned)i : (unsigned)(i - FAA_MAIN);
        bad += !check_verify(faa_freed[i], FAA_BLOCK, seed);
        FREE(mmf, faa_freed[i], FAA_BLOCK, (i & 1) ? SM_F_SIZED : 0);
    }
    return (void *)bad;
}
static void *faa_alloc_share(void *arg)
{
    long w = (long)(intptr_t)arg, bad = 0;
    for (int i = (int)w; i < FAA_FREED; i += FAA_WORKERS) {
        sm_mctx_t c = ALLOC(mmf, FAA_BLOCK, 16);
        faa_again[i] = c.ptr;
        if (!c.ptr)
            return (void *)-1L;
        bad += !(c.flags & SM_F_FRESH) || !all_zero(c.ptr, FAA_BLOCK);
        check_fill(c.ptr, FAA_BLOCK, 7);
    }
    return (void *)bad;
}

static void faa_frees_from_other_threads_are_reused(void)
{
    reset_errors();
    for (size_t i = 0; i < FAA_MAIN; i++)
        faa_freed[i] = faa_main_blocks[i];
    for (int t = 0; t < FAA_THREADS; t++)
        for (int k = 0; k < 4; k++)
            faa_freed[FAA_MAIN + 4 * t + k] = faa_thread_blocks[t][k];
    size_t arenas = mmf_obj.arenas;
    size_t freed_before = mmf_obj.freed_count; /* the small blocks of the orphan case */
    check_threads(FAA_WORKERS, faa_free_share);
    CHECKF(mmf_obj.freed_count == freed_before + FAA_FREED, "%zu freed blocks", mmf_obj.freed_count);
    for (size_t i = 0; i < FAA_FREED; i++) {
        sm_mctx_t m = sm_mctx_block(faa_freed[i], 0, 0);
        CHECKF(!mmf_getmeta(&m), "freed block %zu still a block", i);
    }
    check_threads(FAA_WORKERS, faa_alloc_share);
    static char *sorted_freed[FAA_FREED], *sorted_again[FAA_FREED];
    memcpy(sorted_freed, faa_freed, sizeof faa_freed);
    memcpy(sorted_again, faa_again, sizeof faa_again);
    CHECK(faa_disjoint(sorted_again, FAA_FREED, FAA_BLOCK)); /* no block handed to two threads */
    faa_disjoint(sorted_freed, FAA_FREED, FAA_BLOCK);
    CHECK(!memcmp(sorted_freed, sorted_again, sizeof sorted_freed)); /* exactly the freed blocks */
    CHECK(mmf_obj.arenas == arenas && mmf_obj.freed_count == freed_before);
    for (size_t i = 0; i < FAA_FREED; i++)
        CHECKF(check_verify(faa_again[i], FAA_BLOCK, 7) && usable_of(mmf_getmeta_fn, faa_again[i]) == FAA_BLOCK,
               "block %zu", i);
    FREE(mmf, faa_again[0], 0, 0);
    FREE(mmf, faa_again[0], 0, 0);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1 && errors[SM_ERR_INVALID_FREE] == 0);
    for (size_t i = 1; i < FAA_FREED; i++)
        FREE(mmf, faa_again[i], 0, 0);
    for (int t = 0; t < FAA_RACERS; t++) /* the race's blocks, too */
        for (int i = 0; i < 4 * FAA_RACE_REGIONS; i++)
            FREE(mmf, faa_race_blocks[t][i], FAA_BLOCK, SM_F_SIZED);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1 && errors[SM_ERR_INVALID_FREE] == 0);
    reset_errors();
}

/* (c) getmeta: carved blocks (inside an arena, page-rounded, at most the largest carved size,
 * more than asked only when a larger freed block was reused), direct ones exact and outside;
 * interior pointers and other instances' blocks are not mmf's. */
static void faa_getmeta_and_usable_sizes(void)
{
    reset_errors();
    size_t page = sm_plat_page_size();
    const size_t sz[] = { 1, 100, 4095, 4096, 5000, 65536, 200000, FAA_BLOCK, FAA_BLOCK + 1, (size_t)3 << 20 };
    for (size_t i = 0; i < sizeof sz / sizeof *sz; i++) {
        sm_mctx_t c = ALLOC(mmf, sz[i], 16);
        CHECKF(c.ptr, "size %zu", sz[i]);
        if (!c.ptr)
            continue;
        size_t rounded = sm_align_up(sz[i], page), u = usable_of(mmf_getmeta_fn, c.ptr);
        if (sz[i] <= FAA_BLOCK)
            CHECKF(faa_arena_of(c.ptr) >= 0 && u >= rounded && u <= FAA_BLOCK && u % page == 0,
                   "size %zu: usable %zu, arena %ld", sz[i], u, faa_arena_of(c.ptr));
        else
            CHECKF(faa_arena_of(c.ptr) < 0 && u == rounded, "size %zu: usable %zu", sz[i], u);
        check_fill(c.ptr, u, 9);
        sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
        CHECK(mmf_getmeta(&m) && m.owner && !strcmp(m.owner, "mmf") && !mmt_getmeta(&m) && !mm_getmeta(&m));
        if (u > page)
            CHECK(usable_of(mmf_getmeta_fn, (char *)c.ptr + page) == 0);
        CHECK(usable_of(mmf_getmeta_fn, (char *)c.ptr + 16) == 0);
        sm_mctx_t r = sm_mctx_block(c.ptr, 0, 0);
        if (sz[i] <= FAA_BLOCK)
            CHECK(mmf_resize(&r, u) && !mmf_resize(&r, u + 1) && usable_of(mmf_getmeta_fn, c.ptr) == u);
        CHECK(check_verify(c.ptr, u, 9));
        FREE(mmf, c.ptr, sz[i], SM_F_SIZED);
        CHECK(usable_of(mmf_getmeta_fn, c.ptr) == 0);
    }
    sm_mctx_t t = ALLOC(mmt, 5000, 16);
    CHECK(usable_of(mmf_getmeta_fn, t.ptr) == 0);
    FREE(mmt, t.ptr, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

/* (e) A fork child allocates until it has reserved two arenas of its own, and its blocks hold. */
static void faa_fork_child_allocates(void)
{
    reset_errors();
    sm_mctx_t before = ALLOC(mmf, 5000, 16);
    check_fill(before.ptr, 5000, 11);
    mmf_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        mmf_fork_child();
        size_t arenas = mmf_obj.arenas;
        enum { MAX = 20000 };
        static char *p[MAX];
        int n = 0, code = 0;
        while (mmf_obj.arenas < arenas + 2 && n < MAX) {
            sm_mctx_t c = ALLOC(mmf, FAA_BLOCK, 16);
            if (!c.ptr || faa_arena_of(c.ptr) < 0) {
                code = 2;
                break;
            }
            p[n++] = c.ptr;
            *(uintptr_t *)c.ptr = (uintptr_t)c.ptr * 3;
        }
        if (!code && mmf_obj.arenas < arenas + 2)
            code = 3;
        for (int i = 0; i < n && !code; i++)
            if (*(uintptr_t *)p[i] != (uintptr_t)p[i] * 3)
                code = 4;
        if (!code && !check_verify(before.ptr, 5000, 11))
            code = 5;
        if (!code && errors[SM_ERR_INVALID_FREE] + errors[SM_ERR_DOUBLE_FREE])
            code = 6;
        _exit(code);
    }
    mmf_fork_parent();
    CHECK(pid > 0);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    sm_mctx_t c = ALLOC(mmf, FAA_BLOCK, 16);
    CHECK(c.ptr && faa_arena_of(c.ptr) >= 0 && check_verify(before.ptr, 5000, 11));
    FREE(mmf, c.ptr, 0, 0);
    FREE(mmf, before.ptr, 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
}

int main(void)
{
    check_begin("os_mmap_heap");
    sm_err_callback_set(on_error);
    CHECK(mm_create() == 0 && mmt_create() == 0 && mmc_create() == 0 && mml_create() == 0 && mmh_create() == 0 && mmf_create() == 0);
    RUN_CASE(mm_alignment_and_sizes);
    RUN_CASE(mmt_alignment_and_sizes);
    RUN_CASE(mmh_alignment_and_sizes);
    RUN_CASE(many_live_blocks_keep_their_patterns);
    RUN_CASE(free_unmaps_direct_mappings);
    RUN_CASE(getmeta_rejects_foreign_pointers);
    RUN_CASE(invalid_and_double_free_are_reported_once);
    RUN_CASE(out_of_memory_is_null_and_enomem);
    RUN_CASE(resize_shrinks_and_grows_in_place);
    RUN_CASE(thread_heap_reuses_purged_blocks);
    RUN_CASE(thread_heap_cuts_larger_freed_blocks);
    RUN_CASE(threads_alloc_and_free_concurrently);
    RUN_CASE(exited_threads_regions_are_adopted);
    RUN_CASE(regions_handed_on_at_thread_exit);
    RUN_CASE(fork_hooks_leave_both_sides_usable);
    RUN_CASE(huge_mappings_are_huge_aligned);
    RUN_CASE(purge_drops_pages_but_keeps_the_block);
    RUN_CASE(split_makes_two_independent_blocks);
    RUN_CASE(split_refuses_what_it_cannot_cut);
    RUN_CASE(join_makes_one_block_of_two);
    RUN_CASE(remap_inplace_grows_a_range_of_two_mappings);
    RUN_CASE(remap_grows_in_place_when_the_pages_are_free);
    RUN_CASE(remap_moves_when_the_next_pages_are_taken);
    RUN_CASE(remap_moves_a_block_of_two_mappings_again);
    RUN_CASE(move_pieces_carries_a_range_of_three_mappings);
    RUN_CASE(remap_failure_leaves_the_block_intact);
    RUN_CASE(move_carries_a_carved_block_out);
    RUN_CASE(remap_racing_maps_keep_their_registration);
    RUN_CASE(faa_used_up_arena_is_followed_by_a_new_one); /* these share mmf's state, in this order */
    RUN_CASE(faa_overshoot_names_no_region);
    RUN_CASE(faa_threads_take_disjoint_regions_inside_arenas);
    RUN_CASE(faa_racing_threads_never_share_a_region);
    RUN_CASE(faa_exited_threads_tails_are_adopted);
    RUN_CASE(faa_frees_from_other_threads_are_reused);
    RUN_CASE(faa_getmeta_and_usable_sizes);
    RUN_CASE(mmf_alignment_and_sizes);
    RUN_CASE(faa_fork_child_allocates);
    return check_end();
}
