/* Unit test of the malloc_heap OS layer: over glibc's __libc_* functions, and over functions of
 * our own named through the options (to check they are the ones called). */
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>

#define SM_LAYER mh
#define SM_ERR callback
#include <sunmao/os/malloc_heap.h>

static long counted_mallocs, counted_memaligns, counted_frees;
static void *counting_malloc(size_t n) { __atomic_fetch_add(&counted_mallocs, 1, __ATOMIC_RELAXED); return malloc(n); }
static void *counting_memalign(size_t a, size_t n) { __atomic_fetch_add(&counted_memaligns, 1, __ATOMIC_RELAXED); return memalign(a, n); }
static void counting_free(void *p) { __atomic_fetch_add(&counted_frees, 1, __ATOMIC_RELAXED); free(p); }
#define SM_LAYER mhc
#define SM_ERR callback
#define SM_OPT_MALLOC_FN counting_malloc
#define SM_OPT_FREE_FN counting_free
#define SM_OPT_MEMALIGN_FN counting_memalign
#include <sunmao/os/malloc_heap.h>

/* Under AddressSanitizer the layer sits on ASan's malloc, which aborts on absurd sizes unless told
 * to return NULL as malloc(3) does. */
const char *__asan_default_options(void);
SM_EXPORT const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

_Static_assert(mh_thread_safe && mh_min_align == 16 && !mh_zeroed, "malloc_heap properties");

static int errors[SM_ERR_KIND_COUNT];
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors[kind], 1, __ATOMIC_RELAXED);
}
static void reset_errors(void) { memset(errors, 0, sizeof errors); }

#define ALLOC(inst, sz, al) ({ sm_mctx_t c_ = sm_mctx_alloc((sz), (al), 0); inst##_alloc(&c_); c_; })
#define FREE(inst, p, sz, fl) do { sm_mctx_t f_ = sm_mctx_block((p), (sz), (fl)); inst##_free(&f_); } while (0)

static void alignment_sizes_and_patterns(void)
{
    static const size_t sizes[] = { 0, 1, 15, 16, 17, 100, 4096, 5000, 65536, 300000, (1u << 20) + 5 };
    static const size_t aligns[] = { 1, 16, 32, 64, 4096, 65536, 1u << 20 };
    enum { N = sizeof sizes / sizeof *sizes * (sizeof aligns / sizeof *aligns) };
    void *live[N];
    size_t n[N];
    int k = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof aligns / sizeof *aligns; j++) {
            sm_mctx_t c = ALLOC(mh, sizes[i], aligns[j]);
            CHECKF(c.ptr && sm_ptr_aligned(c.ptr, aligns[j] < 16 ? 16 : aligns[j]), "size %zu align %zu -> %p",
                   sizes[i], aligns[j], c.ptr);
            if (!c.ptr)
                continue;
            sm_mctx_t m = sm_mctx_block(c.ptr, 0, 0);
            CHECK(mh_getmeta(&m) && m.usable == sizes[i] && !strcmp(m.owner, "mh"));
            n[k] = sizes[i];
            check_fill(c.ptr, n[k], (unsigned)k);
            live[k++] = c.ptr;
        }
    for (int i = 0; i < k; i++)
        CHECKF(check_verify(live[i], n[i], (unsigned)i), "block %d overwritten", i);
    for (int i = 0; i < k; i++)
        FREE(mh, live[i], (i & 1) ? n[i] : 0, (i & 1) ? SM_F_SIZED : 0);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0);
}

static void foreign_pointers_are_not_ours(void)
{
    reset_errors();
    void *libc_block = malloc(100);
    _Alignas(16) unsigned char stack_buffer[64] = { 0 };
    sm_mctx_t a = ALLOC(mh, 256, 16);
    void *foreign[] = { NULL, libc_block, stack_buffer + 32, (char *)a.ptr + 16, (char *)a.ptr + 8 };
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        sm_mctx_t m = sm_mctx_block(foreign[i], 0, 0);
        CHECKF(!mh_getmeta(&m), "pointer %zu claimed", i);
        FREE(mh, foreign[i], 0, 0);
        CHECKF(errors[SM_ERR_INVALID_FREE] == (int)i + 1, "pointer %zu", i);
    }
    sm_mctx_t m = sm_mctx_block(a.ptr, 0, 0);
    CHECK(!mhc_getmeta(&m)); /* another instance's block is foreign too: the tag has the address */
    CHECK(mh_getmeta(&m) && m.usable == 256);
    FREE(mh, a.ptr, 1000, SM_F_SIZED); /* larger than the block: refused */
    CHECK(errors[SM_ERR_INVALID_FREE] == 6 && mh_getmeta(&m));
    FREE(mh, a.ptr, 0, 0);
    FREE(mh, a.ptr, 0, 0); /* the tag was wiped by the first free */
    CHECK(errors[SM_ERR_INVALID_FREE] == 7);
    free(libc_block);
    reset_errors();
}

static void out_of_memory_is_null_and_enomem(void)
{
    size_t absurd[] = { SIZE_MAX / 2, SIZE_MAX, SIZE_MAX - 15, (size_t)1 << 50 };
    for (size_t i = 0; i < sizeof absurd / sizeof *absurd; i++) {
        errno = 0;
        sm_mctx_t c = ALLOC(mh, absurd[i], 16);
        CHECKF(!c.ptr && errno == ENOMEM, "size %zx", absurd[i]);
        errno = 0;
        c = ALLOC(mh, absurd[i], 4096);
        CHECKF(!c.ptr && errno == ENOMEM, "size %zx aligned", absurd[i]);
    }
}

static void resize_accepts_only_what_fits(void)
{
    sm_mctx_t a = ALLOC(mh, 1000, 16);
    sm_mctx_t r = sm_mctx_block(a.ptr, 0, 0);
    CHECK(mh_resize(&r, 10) && mh_resize(&r, 1000) && !mh_resize(&r, 1001));
    _Alignas(16) unsigned char stack_buffer[64] = { 0 };
    r = sm_mctx_block(stack_buffer + 32, 0, 0);
    CHECK(!mh_resize(&r, 1));
    FREE(mh, a.ptr, 0, 0);
}

static void options_name_the_functions_used(void)
{
    long m0 = counted_mallocs, a0 = counted_memaligns, f0 = counted_frees;
    sm_mctx_t a = ALLOC(mhc, 100, 16), b = ALLOC(mhc, 100, 4096);
    CHECK(a.ptr && b.ptr && sm_ptr_aligned(b.ptr, 4096));
    CHECK(counted_mallocs == m0 + 1 && counted_memaligns == a0 + 1);
    check_fill(b.ptr, 100, 1);
    CHECK(check_verify(b.ptr, 100, 1));
    FREE(mhc, a.ptr, 0, 0);
    FREE(mhc, b.ptr, 100, SM_F_SIZED);
    CHECK(counted_frees == f0 + 2);
}

/* Threads allocating and freeing concurrently (sized and unsized, aligned, across threads, with
 * resizes): tests/unit/conformance.c, malloc_heap/hammer, runs that on this same instance shape. */

static void fork_hooks_leave_both_sides_usable(void)
{
    sm_mctx_t a = ALLOC(mh, 5000, 16);
    check_fill(a.ptr, 5000, 8);
    mh_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        mh_fork_child();
        sm_mctx_t c = ALLOC(mh, 7000, 16);
        int ok = c.ptr && check_verify(a.ptr, 5000, 8);
        if (ok)
            FREE(mh, c.ptr, 0, 0);
        _exit(ok ? 0 : 1);
    }
    mh_fork_parent();
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FREE(mh, a.ptr, 0, 0);
}

int main(void)
{
    check_begin("os_malloc_heap");
    sm_err_callback_set(on_error);
    CHECK(mh_create() == 0 && mhc_create() == 0);
    RUN_CASE(alignment_sizes_and_patterns);
    RUN_CASE(foreign_pointers_are_not_ours);
    RUN_CASE(out_of_memory_is_null_and_enomem);
    RUN_CASE(resize_accepts_only_what_fits);
    RUN_CASE(options_name_the_functions_used);
    RUN_CASE(fork_hooks_leave_both_sides_usable);
    return check_end();
}
