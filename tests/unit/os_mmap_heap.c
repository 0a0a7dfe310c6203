/* Unit test of the mmap_heap OS layer: a plain instance (one mapping per block), a thread-heap
 * instance (per-thread carving, reuse of freed blocks, tails of exited threads adopted) and a
 * huge-page instance, side by side in one translation unit. */
#include <pthread.h>
#include <sys/mman.h>
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

#define SM_LAYER mmh
#define SM_ERR callback
#define SM_OPT_HUGE_PAGES 1
#define SM_OPT_GROWTH ((size_t)64 << 10)
#include <sunmao/os/mmap_heap.h>

_Static_assert(mm_thread_safe && mmt_thread_safe && mm_zeroed && mm_min_align >= 4096, "mmap_heap properties");

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
        size_t page = sm_os_page_size();                                                                         \
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
    CHECK(!is_mapped(c.ptr, sm_os_page_size()));
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
    CHECK(mm_getmeta(&m) && m.usable == sm_align_up(3 * 4096, sm_os_page_size()));
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
    size_t page = sm_os_page_size(), big = (size_t)1 << 20;
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
    size_t page = sm_os_page_size();
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
    size_t page = sm_os_page_size(), n = len / page, r = 0;
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
    size_t page = sm_os_page_size(), len = 64 * page;
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
    int on_stack;
    sm_mctx_t bad = sm_mctx_block(&on_stack, page, SM_F_ZERO), inner = sm_mctx_block((char *)c.ptr + page, page, 0);
    CHECK(!mm_purge(&bad) && !mm_purge(&inner));
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

int main(void)
{
    check_begin("os_mmap_heap");
    sm_err_callback_set(on_error);
    CHECK(mm_create() == 0 && mmt_create() == 0 && mmh_create() == 0);
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
    RUN_CASE(threads_alloc_and_free_concurrently);
    RUN_CASE(exited_threads_regions_are_adopted);
    RUN_CASE(fork_hooks_leave_both_sides_usable);
    RUN_CASE(huge_mappings_are_huge_aligned);
    RUN_CASE(purge_drops_pages_but_keeps_the_block);
    return check_end();
}
