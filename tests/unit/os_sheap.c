/* Unit test of the sheap OS layer (static pool): a .bss pool with a lock, a user-supplied buffer,
 * and a freestanding-style instance whose error policy is local, which must not pull in any
 * Linux header (checked below: platform/linux.h must not have been included by then). */
#include <stdbool.h>
#include <stddef.h>

/* An error policy of our own, so nothing OS-specific is included before the first instance. */
static int tiny_errors;
static inline void sm_err_tiny_raise(int kind, const char *layer, const void *ptr, const char *detail)
{
    (void)kind, (void)layer, (void)ptr, (void)detail;
    tiny_errors++;
}
#include <sunmao/policies/sync/none.h>
#define SM_LAYER bare
#define SM_SYNC none
#define SM_ERR tiny
#define SM_OPT_POOL_SIZE 4096
#include <sunmao/os/sheap.h>
#ifdef SUNMAO_PLATFORM_LINUX_H
#error "sheap pulled in platform/linux.h: it must build without an operating system"
#endif

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER sh
#define SM_SYNC spinlock
#define SM_ERR callback
#define SM_OPT_POOL_SIZE ((size_t)4 << 20)
#include <sunmao/os/sheap.h>

static unsigned char user_buffer[100000 + 3];
#define SM_LAYER shu
#define SM_SYNC none
#define SM_ERR callback
#define SM_OPT_POOL (user_buffer + 3) /* deliberately misaligned: the layer aligns it */
#define SM_OPT_POOL_SIZE 100000
#include <sunmao/os/sheap.h>

_Static_assert(sh_thread_safe && !shu_thread_safe && !bare_thread_safe && sh_min_align == 16 && !sh_zeroed,
               "sheap properties follow the sync policy");

static int errors[SM_ERR_KIND_COUNT];
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors[kind], 1, __ATOMIC_RELAXED);
}
static void reset_errors(void) { memset(errors, 0, sizeof errors); }

#define ALLOC(inst, sz, al) ({ sm_mctx_t c_ = sm_mctx_alloc((sz), (al), 0); inst##_alloc(&c_); c_; })
#define FREE(inst, p, sz, fl) do { sm_mctx_t f_ = sm_mctx_block((p), (sz), (fl)); inst##_free(&f_); } while (0)
static size_t sh_usable(void *p)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    return sh_getmeta(&m) ? m.usable : 0;
}
static bool in_pool(const void *p, size_t n, const void *pool, size_t pool_size)
{
    return (const char *)p >= (const char *)pool && (const char *)p + n <= (const char *)pool + pool_size;
}

/* Every byte of the pool can be handed out again once everything is freed: nothing leaked,
 * all neighbours merged. */
static void whole_pool_is_one_block_again(void)
{
    sm_mctx_t c = ALLOC(sh, ((size_t)4 << 20) - 64, 16);
    CHECKF(c.ptr != NULL, "pool fragmented or leaking");
    if (c.ptr)
        FREE(sh, c.ptr, 0, 0);
}

static void alignment_and_sizes(void)
{
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 4096, 5000, 65536, 300000 };
    static const size_t aligns[] = { 16, 32, 64, 4096, 65536, 1u << 20 };
    void *live[10 * 6];
    size_t n[10 * 6];
    int k = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof aligns / sizeof *aligns; j++) {
            sm_mctx_t c = ALLOC(sh, sizes[i], aligns[j]);
            if (!c.ptr) /* 1 MiB alignment in a 4 MiB pool may run out: allowed, but only then */
                CHECKF(aligns[j] >= 65536 && errno == ENOMEM, "size %zu align %zu", sizes[i], aligns[j]);
            if (!c.ptr)
                continue;
            CHECKF(sm_ptr_aligned(c.ptr, aligns[j]), "size %zu align %zu -> %p", sizes[i], aligns[j], c.ptr);
            n[k] = sh_usable(c.ptr);
            CHECK(n[k] >= sizes[i] && in_pool(c.ptr, n[k], sh_pool, sizeof sh_pool));
            check_fill(c.ptr, n[k], (unsigned)k);
            live[k++] = c.ptr;
        }
    for (int i = 0; i < k; i++)
        CHECKF(check_verify(live[i], n[i], (unsigned)i), "block %d overwritten", i);
    for (int i = 0; i < k; i += 2)
        FREE(sh, live[i], 0, 0);
    for (int i = 1; i < k; i += 2)
        FREE(sh, live[i], n[i], SM_F_SIZED);
    whole_pool_is_one_block_again();
}

static void exhaustion_is_null_and_enomem(void)
{
    enum { MAX = 2000 };
    static void *p[MAX];
    int n = 0;
    errno = 0;
    for (; n < MAX; n++) {
        sm_mctx_t c = ALLOC(sh, 4000, 16);
        if (!c.ptr)
            break;
        p[n] = c.ptr;
        check_fill(p[n], 4000, (unsigned)n);
    }
    CHECK(n < MAX && errno == ENOMEM);
    CHECKF((size_t)n * 4000 > ((size_t)4 << 20) * 95 / 100, "only %d blocks of 4000 bytes fit", n);
    errno = 0;
    sm_mctx_t big = ALLOC(sh, (size_t)1 << 40, 16);
    CHECK(!big.ptr && errno == ENOMEM);
    big = ALLOC(sh, SIZE_MAX, 16);
    CHECK(!big.ptr && errno == ENOMEM);
    for (int i = 0; i < n; i++)
        CHECK(check_verify(p[i], 4000, (unsigned)i));
    for (int i = n - 1; i >= 0; i -= 2) /* free in an order that needs merging both ways */
        FREE(sh, p[i], 0, 0);
    for (int i = n - 2; i >= 0; i -= 2)
        FREE(sh, p[i], 0, 0);
    whole_pool_is_one_block_again();
}

static void freed_memory_is_reused(void)
{
    sm_mctx_t a = ALLOC(sh, 1000, 16), b = ALLOC(sh, 1000, 16);
    FREE(sh, a.ptr, 0, 0);
    sm_mctx_t c = ALLOC(sh, 900, 16);
    CHECK(c.ptr == a.ptr);
    FREE(sh, b.ptr, 0, 0);
    FREE(sh, c.ptr, 0, 0);
    whole_pool_is_one_block_again();
}

static void bad_frees_are_reported_once(void)
{
    reset_errors();
    int on_stack;
    sm_mctx_t a = ALLOC(sh, 256, 16), b = ALLOC(sh, 256, 16);
    check_fill(b.ptr, 256, 2);
    void *bad[] = { NULL, &on_stack, (char *)a.ptr + 16, (char *)a.ptr + 8, sh_pool, sh_pool + sizeof sh_pool - 16 };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sm_mctx_t m = sm_mctx_block(bad[i], 0, 0);
        CHECKF(!sh_getmeta(&m), "pointer %zu claimed", i);
        FREE(sh, bad[i], 0, 0);
        CHECKF(errors[SM_ERR_INVALID_FREE] == (int)i + 1, "pointer %zu", i);
    }
    FREE(sh, a.ptr, 1000, SM_F_SIZED); /* larger than the block */
    CHECK(errors[SM_ERR_INVALID_FREE] == 7 && sh_usable(a.ptr) >= 256);
    FREE(sh, a.ptr, 0, 0);
    FREE(sh, a.ptr, 0, 0);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1 && errors[SM_ERR_INVALID_FREE] == 7);
    FREE(sh, b.ptr, 0, 0); /* b merges with the free a before it */
    FREE(sh, b.ptr, 0, 0);
    FREE(sh, a.ptr, 0, 0);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 3 && errors[SM_ERR_INVALID_FREE] == 7);
    whole_pool_is_one_block_again();
    reset_errors();
}

static void resize_in_place(void)
{
    sm_mctx_t a = ALLOC(sh, 1000, 16), b = ALLOC(sh, 100, 16);
    check_fill(a.ptr, 1000, 3);
    sm_mctx_t r = sm_mctx_block(a.ptr, 0, 0);
    CHECK(sh_resize(&r, 200) && sh_usable(a.ptr) >= 200 && sh_usable(a.ptr) < 1000);
    CHECK(sh_resize(&r, 1000) && sh_usable(a.ptr) >= 1000); /* takes back the freed tail */
    CHECK(!sh_resize(&r, 100000));                          /* b is in the way */
    CHECK(check_verify(a.ptr, 200, 3));
    r = sm_mctx_block(b.ptr, 0, 0);
    CHECK(sh_resize(&r, 100000) && sh_usable(b.ptr) >= 100000); /* the rest of the pool follows b */
    memset(b.ptr, 1, 100000);
    CHECK(check_verify(a.ptr, 200, 3));
    FREE(sh, a.ptr, 0, 0);
    FREE(sh, b.ptr, 0, 0);
    whole_pool_is_one_block_again();
}

static void user_buffer_and_bare_pools(void)
{
    CHECK(shu_create() == 0);
    void *p[100];
    int n = 0;
    for (; n < 100; n++) {
        sm_mctx_t c = ALLOC(shu, 3000, 16);
        if (!c.ptr)
            break;
        CHECK(sm_ptr_aligned(c.ptr, 16) && in_pool(c.ptr, 3000, user_buffer + 3, 100000));
        check_fill(c.ptr, 3000, (unsigned)n);
        p[n] = c.ptr;
    }
    CHECK(n >= 30 && n < 100);
    for (int i = 0; i < n; i++)
        CHECK(check_verify(p[i], 3000, (unsigned)i));
    for (int i = 0; i < n; i++)
        FREE(shu, p[i], 0, 0);
    sm_mctx_t all = ALLOC(shu, 99000, 16);
    CHECK(all.ptr);
    FREE(shu, all.ptr, 0, 0);

    sm_mctx_t b = ALLOC(bare, 1000, 16);
    CHECK(b.ptr && in_pool(b.ptr, 1000, bare_pool, sizeof bare_pool));
    errno = 0;
    sm_mctx_t b2 = ALLOC(bare, 4000, 16);
    CHECK(!b2.ptr && errno == ENOMEM);
    FREE(bare, b.ptr, 0, 0);
    FREE(bare, b.ptr, 0, 0);
    CHECK(tiny_errors == 1);
}

enum { THREADS = 4, ROUNDS = 20000, LIVE = 64 };
static void *hammer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 3;
    unsigned tag = 1000 * (unsigned)(uintptr_t)arg;
    void *p[LIVE] = { 0 };
    size_t n[LIVE] = { 0 };
    long bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % LIVE);
        if (p[k]) {
            bad += !check_verify(p[k], n[k], tag + (unsigned)k);
            FREE(sh, p[k], (seed & 1) ? n[k] : 0, (seed & 1) ? SM_F_SIZED : 0);
            p[k] = NULL;
        } else {
            n[k] = (seed >> 4) % 3000 + 1;
            sm_mctx_t c = ALLOC(sh, n[k], (seed & 2) ? 256 : 16);
            if (!c.ptr)
                return (void *)-1L;
            p[k] = c.ptr;
            check_fill(p[k], n[k], tag + (unsigned)k);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (p[k]) {
            bad += !check_verify(p[k], n[k], tag + (unsigned)k);
            FREE(sh, p[k], 0, 0);
        }
    sh_thread_exit();
    return (void *)bad;
}

static void threads_alloc_and_free_concurrently(void)
{
    reset_errors();
    check_threads(THREADS, hammer);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
    whole_pool_is_one_block_again();
}

static void fork_hooks_leave_both_sides_usable(void)
{
    sm_mctx_t a = ALLOC(sh, 5000, 16);
    check_fill(a.ptr, 5000, 8);
    sh_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        sh_fork_child();
        sm_mctx_t c = ALLOC(sh, 7000, 16);
        int ok = c.ptr && check_verify(a.ptr, 5000, 8);
        if (ok)
            FREE(sh, c.ptr, 0, 0);
        _exit(ok ? 0 : 1);
    }
    sh_fork_parent();
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sm_mctx_t c = ALLOC(sh, 100, 16);
    CHECK(c.ptr && check_verify(a.ptr, 5000, 8));
    FREE(sh, c.ptr, 0, 0);
    FREE(sh, a.ptr, 0, 0);
}

int main(void)
{
    check_begin("os_sheap");
    sm_err_callback_set(on_error);
    CHECK(sh_create() == 0);
    RUN_CASE(alignment_and_sizes);
    RUN_CASE(exhaustion_is_null_and_enomem);
    RUN_CASE(freed_memory_is_reused);
    RUN_CASE(bad_frees_are_reported_once);
    RUN_CASE(resize_in_place);
    RUN_CASE(user_buffer_and_bare_pools);
    RUN_CASE(threads_alloc_and_free_concurrently);
    RUN_CASE(fork_hooks_leave_both_sides_usable);
    return check_end();
}
