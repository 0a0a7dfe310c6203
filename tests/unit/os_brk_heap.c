/* Unit test of the brk_heap OS layer: carving from the break, lowering it again, first-fit reuse
 * with coalescing, a break moved by someone else, sbrk refusing, and the usual contract checks. */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/mutex.h>

#define SM_LAYER bk
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/os/brk_heap.h>

_Static_assert(bk_thread_safe && !bk_zeroed && bk_min_align >= 4096, "brk_heap properties");

static int errors[SM_ERR_KIND_COUNT];
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors[kind], 1, __ATOMIC_RELAXED);
}
static void reset_errors(void) { memset(errors, 0, sizeof errors); }

#define ALLOC(sz, al) ({ sm_mctx_t c_ = sm_mctx_alloc((sz), (al), 0); bk_alloc(&c_); c_; })
#define FREE(p, sz, fl) do { sm_mctx_t f_ = sm_mctx_block((p), (sz), (fl)); bk_free(&f_); } while (0)
static size_t usable(void *p)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    return bk_getmeta(&m) ? m.usable : 0;
}
static char *brk_now(void) { return (char *)sbrk(0); }

static void alignment_and_sizes(void)
{
    static const size_t sizes[] = { 0, 1, 16, 4095, 4097, 65536, 300000, (1u << 20) + 1 };
    static const size_t aligns[] = { 16, 256, 4096, 65536, 1u << 20 };
    size_t page = sm_plat_page_size();
    void *live[8 * 5];
    int n = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof aligns / sizeof *aligns; j++) {
            sm_mctx_t c = ALLOC(sizes[i], aligns[j]);
            CHECKF(c.ptr && sm_ptr_aligned(c.ptr, aligns[j]) && sm_ptr_aligned(c.ptr, page), "size %zu align %zu",
                   sizes[i], aligns[j]);
            if (!c.ptr)
                continue;
            size_t u = usable(c.ptr);
            CHECK(u >= sizes[i] && u % page == 0);
            check_fill(c.ptr, u, (unsigned)n);
            live[n++] = c.ptr;
        }
    for (int k = 0; k < n; k++)
        CHECKF(check_verify(live[k], usable(live[k]), (unsigned)k), "block %d overwritten", k);
    for (int k = 0; k < n; k++)
        FREE(live[k], 0, 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0);
}

static void fresh_break_memory_is_flagged(void)
{
    sm_mctx_t c = ALLOC(100000, 16);
    CHECK(c.ptr);
    if (c.flags & SM_F_FRESH)
        for (size_t i = 0; i < 100000; i++)
            if (((unsigned char *)c.ptr)[i]) {
                CHECKF(0, "byte %zu of a block flagged fresh is not zero", i);
                break;
            }
    memset(c.ptr, 0xee, 100000);
    sm_mctx_t d = ALLOC(5000, 16);
    FREE(d.ptr, 0, 0);
    FREE(c.ptr, 0, 0);
    sm_mctx_t e = ALLOC(100000, 16); /* reuses dirty memory: must not claim to be fresh */
    CHECK(e.ptr && (!(e.flags & SM_F_FRESH) || ((unsigned char *)e.ptr)[0] == 0));
    FREE(e.ptr, 0, 0);
}

static void freeing_the_top_lowers_the_break(void)
{
    char *before = brk_now();
    sm_mctx_t a = ALLOC(1 << 20, 16), b = ALLOC(3 << 20, 16);
    CHECK(a.ptr && b.ptr && brk_now() >= before + (4 << 20));
    memset(a.ptr, 1, 1 << 20);
    memset(b.ptr, 2, 3 << 20);
    FREE(a.ptr, 1 << 20, SM_F_SIZED); /* below the top: stays ours, on the free list */
    CHECK(brk_now() >= (char *)b.ptr + (3 << 20));
    FREE(b.ptr, 0, 0); /* the top: it and the free block below go back to the kernel */
    CHECKF(brk_now() <= before + (64 << 10), "break %p, was %p", (void *)brk_now(), (void *)before);
}

static void first_fit_reuse_and_coalescing(void)
{
    size_t page = sm_plat_page_size();
    sm_mctx_t a = ALLOC(3 * page, 16), b = ALLOC(3 * page, 16), c = ALLOC(3 * page, 16), guard = ALLOC(page, 16);
    CHECK((char *)b.ptr == (char *)a.ptr + 3 * page && (char *)c.ptr == (char *)b.ptr + 3 * page);
    FREE(b.ptr, 0, 0);
    sm_mctx_t d = ALLOC(2 * page, 16);
    CHECK(d.ptr == b.ptr); /* first fit, split */
    CHECK(usable(d.ptr) == 2 * page);
    FREE(a.ptr, 0, 0);
    FREE(d.ptr, 0, 0); /* a, d and the page after d merge into 6 pages */
    sm_mctx_t e = ALLOC(6 * page, 16);
    CHECK(e.ptr == a.ptr);
    check_fill(e.ptr, 6 * page, 4);
    CHECK(check_verify(e.ptr, 6 * page, 4));
    FREE(c.ptr, 0, 0);
    FREE(e.ptr, 0, 0);
    FREE(guard.ptr, 0, 0);
}

static void resize_in_place(void)
{
    size_t page = sm_plat_page_size();
    sm_mctx_t a = ALLOC(4 * page, 16), b = ALLOC(page, 16);
    check_fill(a.ptr, 2 * page, 5);
    sm_mctx_t r = sm_mctx_block(a.ptr, 0, 0);
    CHECK(bk_resize(&r, 2 * page) && usable(a.ptr) == 2 * page);
    CHECK(bk_resize(&r, 4 * page) && usable(a.ptr) == 4 * page); /* the freed tail follows it */
    CHECK(!bk_resize(&r, 5 * page));                              /* b is in the way */
    CHECK(check_verify(a.ptr, 2 * page, 5));
    r = sm_mctx_block(b.ptr, 0, 0);
    CHECK(bk_resize(&r, 40 * page) && usable(b.ptr) == 40 * page); /* the top: moves the break */
    memset(b.ptr, 3, 40 * page);
    FREE(a.ptr, 0, 0);
    FREE(b.ptr, 0, 0);
}

static void foreign_break_moves_start_a_new_run(void)
{
    sm_mctx_t a = ALLOC(10000, 16);
    check_fill(a.ptr, 10000, 6);
    char *foreign = (char *)sbrk(3 * 4096 + 8); /* someone else, leaving the break unaligned */
    CHECK(foreign != (char *)-1);
    memset(foreign, 0x77, 3 * 4096 + 8);
    sm_mctx_t b = ALLOC(200000, 4096);
    CHECK(b.ptr && (char *)b.ptr >= foreign + 3 * 4096 + 8 && sm_ptr_aligned(b.ptr, sm_plat_page_size()));
    check_fill(b.ptr, 200000, 7);
    CHECK(check_verify(a.ptr, 10000, 6) && check_verify(b.ptr, 200000, 7));
    for (int i = 0; i < 3 * 4096 + 8; i++)
        if ((unsigned char)foreign[i] != 0x77) {
            CHECKF(0, "foreign byte %d overwritten", i);
            break;
        }
    char *top = brk_now();
    FREE(b.ptr, 0, 0);
    CHECK(brk_now() < top && brk_now() >= foreign + 3 * 4096 + 8); /* lowered, never into foreign memory */
    FREE(a.ptr, 0, 0);
    CHECK(brk_now() >= foreign + 3 * 4096 + 8);
}

static void sbrk_failure_is_null_and_enomem(void)
{
    errno = 0;
    sm_mctx_t c = ALLOC(SIZE_MAX / 2, 16);
    CHECK(!c.ptr && errno == ENOMEM);
    /* 64 TiB: the break cannot move that far, and the layer then asks for pages of the request's
     * own (a direct block, brk_heap.h). Whether the kernel grants 64 TiB of address space
     * (MAP_NORESERVE) depends on the machine (ASan's runtime changes the answer): refused, it is
     * NULL + ENOMEM; granted, a block whose last page can be written, unmapped when freed. */
    errno = 0;
    c = ALLOC((size_t)1 << 46, 16);
    if (c.ptr) {
        ((volatile char *)c.ptr)[((size_t)1 << 46) - 1] = 1;
        FREE(c.ptr, 0, 0);
    } else {
        CHECK(errno == ENOMEM);
    }
    struct rlimit old;
    getrlimit(RLIMIT_DATA, &old);
    struct rlimit tight = old;
    tight.rlim_cur = 64 << 20;
    if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < tight.rlim_cur) {
        check_skip("sbrk_failure_is_null_and_enomem", "RLIMIT_DATA already low");
        return;
    }
    setrlimit(RLIMIT_DATA, &tight);
    errno = 0;
    c = ALLOC((size_t)512 << 20, 16);
    setrlimit(RLIMIT_DATA, &old);
    CHECK(!c.ptr && errno == ENOMEM);
    c = ALLOC(4096, 16); /* and it still works afterwards */
    CHECK(c.ptr);
    FREE(c.ptr, 0, 0);
}

static void foreign_pointers_and_bad_frees(void)
{
    reset_errors();
    int on_stack;
    sm_mctx_t a = ALLOC(8192, 16), keep = ALLOC(4096, 16);
    void *foreign[] = { NULL, &on_stack, (char *)a.ptr + 16, (char *)a.ptr + 4096, (void *)((uintptr_t)1 << 52) };
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        sm_mctx_t m = sm_mctx_block(foreign[i], 0, 0);
        CHECKF(!bk_getmeta(&m), "pointer %zu claimed", i);
        FREE(foreign[i], 0, 0);
        CHECKF(errors[SM_ERR_INVALID_FREE] == (int)i + 1, "pointer %zu: %d reports", i, errors[SM_ERR_INVALID_FREE]);
    }
    CHECK(usable(a.ptr) == 8192);
    FREE(a.ptr, 0, 0);
    FREE(a.ptr, 0, 0);
    CHECK(errors[SM_ERR_DOUBLE_FREE] + errors[SM_ERR_INVALID_FREE] == 6);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1); /* a sits on the free list, marked free */
    sm_mctx_t b = ALLOC(4096, 16), c = ALLOC(4096, 16);
    CHECK(b.ptr && c.ptr && b.ptr != c.ptr);
    FREE(b.ptr, 0, 0);
    FREE(c.ptr, 0, 0);
    FREE(keep.ptr, 0, 0);
    reset_errors();
}

enum { THREADS = 4, ROUNDS = 2000, LIVE = 32 };
static void *hammer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 7;
    void *p[LIVE] = { 0 };
    size_t n[LIVE] = { 0 };
    long bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % LIVE);
        if (p[k]) {
            bad += !check_verify(p[k], n[k], (unsigned)k + 100 * (unsigned)(uintptr_t)arg);
            FREE(p[k], (seed & 1) ? n[k] : 0, (seed & 1) ? SM_F_SIZED : 0);
            p[k] = NULL;
        } else {
            n[k] = (seed >> 4) % 30000 + 1;
            sm_mctx_t c = ALLOC(n[k], (seed & 2) ? 65536 : 16);
            if (!c.ptr)
                return (void *)-1L;
            p[k] = c.ptr;
            check_fill(p[k], n[k], (unsigned)k + 100 * (unsigned)(uintptr_t)arg);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (p[k]) {
            bad += !check_verify(p[k], n[k], (unsigned)k + 100 * (unsigned)(uintptr_t)arg);
            FREE(p[k], 0, 0);
        }
    bk_thread_exit();
    return (void *)bad;
}

static void *idle(void *arg) { return arg; }

static void threads_alloc_and_free_concurrently(void)
{
    reset_errors();
    pthread_t t[THREADS];
    /* The C library mallocs (from the break) when threads start: let it do so before measuring. */
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, idle, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    char *before = brk_now();
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, hammer, (void *)i);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECKF(r == NULL, "thread %d: %ld corrupted blocks or OOM", i, (long)r);
    }
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
    CHECKF(brk_now() <= before + (64 << 10), "everything freed, yet the break grew by %zu",
           (size_t)(brk_now() - before));
}

static void fork_hooks_leave_both_sides_usable(void)
{
    sm_mctx_t a = ALLOC(5000, 16);
    check_fill(a.ptr, 5000, 8);
    bk_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        bk_fork_child();
        sm_mctx_t c = ALLOC(70000, 16);
        int ok = c.ptr && check_verify(a.ptr, 5000, 8);
        if (ok) {
            memset(c.ptr, 1, 70000);
            FREE(c.ptr, 0, 0);
        }
        _exit(ok ? 0 : 1);
    }
    bk_fork_parent();
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sm_mctx_t c = ALLOC(100, 16);
    CHECK(c.ptr && check_verify(a.ptr, 5000, 8));
    FREE(c.ptr, 0, 0);
    FREE(a.ptr, 0, 0);
}

int main(void)
{
    check_begin("os_brk_heap");
    sm_err_callback_set(on_error);
    CHECK(bk_create() == 0);
    RUN_CASE(alignment_and_sizes);
    RUN_CASE(fresh_break_memory_is_flagged);
    RUN_CASE(freeing_the_top_lowers_the_break);
    RUN_CASE(first_fit_reuse_and_coalescing);
    RUN_CASE(resize_in_place);
    RUN_CASE(foreign_pointers_and_bad_frees);
    RUN_CASE(threads_alloc_and_free_concurrently);
    RUN_CASE(fork_hooks_leave_both_sides_usable);
    RUN_CASE(sbrk_failure_is_null_and_enomem);
    RUN_CASE(foreign_break_moves_start_a_new_run);
    return check_end();
}
