/* Unit test of the segfit_lf core layer (lock-free segregated fit) over the fake next layer
 * (tests/support/fake_next.h). Two instances: sg (log2b classes, 4 MiB chunks) and sm (tc classes,
 * 64 KiB chunks, so chunks come often, region installs race, and blocks above 32 KiB are direct).
 * After most cases the free stacks are walked: every block on a class's stack is free and of the
 * class's block size, and once every block is freed the stacks hold every byte ever carved: a
 * block lost or pushed twice by a racing operation shows as a difference. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sg
#define SM_NEXT fk
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include <sunmao/layers/core/segfit_lf.h>

#define SM_LAYER fm
#include "tests/support/fake_next.h"
#define SM_LAYER sm
#define SM_NEXT fm
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CHUNK_SIZE (64u << 10)
#include <sunmao/layers/core/segfit_lf.h>

_Static_assert(sg_min_align == 4096 && sg_classes == 17 && sm_classes == 52, "options and policies reach the instance");

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static struct {
    int calls;
    sm_err_kind_t kind;
    const void *ptr;
} errs;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)detail;
    errs.calls++;
    errs.kind = kind;
    errs.ptr = ptr;
}

#define HELPERS(L, F)                                                                              \
    SM_UNUSED static void *L##_t_alloc(size_t size, size_t align)                                  \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_alloc(size, align, 0);                                               \
        return L##_alloc(&c);                                                                      \
    }                                                                                              \
    SM_UNUSED static void L##_t_free(void *p)                                                      \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                      \
        L##_free(&c);                                                                              \
    }                                                                                              \
    SM_UNUSED static size_t L##_t_usable(void *p)                                                  \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                      \
        return L##_getmeta(&c) ? c.usable : 0;                                                     \
    }                                                                                              \
    /* Walks the lists (nothing else running): each block free and of its class's block size;     \
     * returns the free bytes, or SIZE_MAX after a failed check. */                                \
    SM_UNUSED static size_t L##_free_bytes(void)                                                   \
    {                                                                                              \
        size_t bytes = 0;                                                                          \
        for (unsigned i = 0; i < L##_classes; i++) {                                               \
            size_t n = 0;                                                                          \
            for (sm_tnode_t *b = (sm_tnode_t *)L##_obj.cls[i].free.lo; b && n <= L##_obj.carved / 4096; \
                 b = b->next, n++) {                                                               \
                uintptr_t w = L##_word(b);                                                         \
                size_t size = w & ~(uintptr_t)63; /* state 2 (free), maybe aged and purged */     \
                if ((w & 15) != 2 || L##_block_size(i) != size) {                                  \
                    check_fail_at(__FILE__, __LINE__, "list %u: block %p word %#lx", i, (void *)b,  \
                                  (unsigned long)w);                                               \
                    return SIZE_MAX;                                                               \
                }                                                                                  \
                bytes += size;                                                                     \
            }                                                                                      \
            if (n > L##_obj.carved / L##_block_size(i)) { /* a cycle: a block pushed twice */     \
                check_fail_at(__FILE__, __LINE__, "list %u: %zu blocks", i, n);                   \
                return SIZE_MAX;                                                                   \
            }                                                                                      \
        }                                                                                          \
        return bytes;                                                                              \
    }
HELPERS(sg, fk)
HELPERS(sm, fm)

static unsigned rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void test_sizes_and_reuse(void)
{
    size_t sizes[] = { 1, 4096, 4097, 60000, 64 * KiB, 100 * KiB, 1 * MiB, 1 * MiB + 1, 3 * MiB };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = sg_t_alloc(sizes[i], 16);
        size_t page = sm_align_up(sizes[i], 4096);
        size_t want = page <= 1 * MiB ? (size_t)1 << sm_log2_ceil(page) : page; /* log2b, or direct */
        CHECKF(p && sm_ptr_aligned(p, 4096) && sg_t_usable(p) == want, "size %zu: %p usable %zu", sizes[i], (void *)p,
               p ? sg_t_usable(p) : 0);
        if (!p)
            return;
        check_fill(p, want, i);
        CHECK(check_verify(p, want, i));
        sg_t_free(p);
        CHECK(sg_t_usable(p) == 0);
    }
    CHECK(sg_free_bytes() == sg_obj.carved);
    /* A freed 64 KiB block is the next 64 KiB block; a 16 KiB request takes a block of its own
     * class, never part of it; blocks of one class are carved side by side. */
    char *a = sg_t_alloc(64 * KiB, 16);
    sg_t_free(a);
    char *b = sg_t_alloc(33 * KiB, 16), *c = sg_t_alloc(16 * KiB, 16), *d = sg_t_alloc(64 * KiB, 16);
    CHECKF(b == a && c && (c + 16 * KiB <= a || c >= a + 64 * KiB) && d && sm_ptr_aligned(d, 64 * KiB),
           "reuse: %p %p %p from %p", (void *)b, (void *)c, (void *)d, (void *)a);
    sg_t_free(b);
    sg_t_free(c);
    sg_t_free(d);
    CHECK(sg_free_bytes() == sg_obj.carved && fk_obj.bad_frees == 0);
}

static void test_alignment(void)
{
    for (size_t align = 8 * KiB; align <= 2 * MiB; align <<= 1) {
        char *p = sg_t_alloc(5000, align), *q = sg_t_alloc(align + 1, align);
        CHECKF(p && q && sm_ptr_aligned(p, align) && sm_ptr_aligned(q, align) && sg_t_usable(p) == (align <= 1 * MiB ? align : 8 * KiB),
               "align %zu: %p %p", align, (void *)p, (void *)q);
        if (!p || !q)
            return;
        check_fill(q, align + 1, 3);
        sg_t_free(p);
        CHECK(check_verify(q, align + 1, 3));
        sg_t_free(q);
    }
    CHECK(sg_free_bytes() == sg_obj.carved);
}

static void test_bad_frees(void)
{
    sm_err_callback_set(on_error);
    char *p = sg_t_alloc(16 * KiB, 16);
    check_fill(p, 16 * KiB, 7);
    memset(&errs, 0, sizeof errs);
    sg_t_free(p + 4 * KiB);
    CHECK(errs.calls == 1 && errs.kind == SM_ERR_INVALID_FREE && errs.ptr == p + 4 * KiB);
    sg_t_free(p + 100);
    CHECK(errs.calls == 2 && errs.kind == SM_ERR_INVALID_FREE);
    sm_mctx_t sized = sm_mctx_block(p, 16 * KiB + 1, SM_F_SIZED);
    sg_free(&sized);
    CHECK(errs.calls == 3 && errs.kind == SM_ERR_INVALID_FREE && check_verify(p, 16 * KiB, 7));
    sg_t_free(p);
    CHECK(errs.calls == 3);
    sg_t_free(p);
    CHECK(errs.calls == 4 && errs.kind == SM_ERR_DOUBLE_FREE && errs.ptr == p);
    /* Not ours: passed to the next layer, which counts it as a free it never gave out. */
    int local;
    unsigned long bad = fk_obj.bad_frees;
    sg_t_free(&local);
    CHECK(errs.calls == 4 && fk_obj.bad_frees == bad + 1);
    fk_obj.bad_frees = bad;
    /* Nothing handed out twice after the double free. */
    char *x = sg_t_alloc(16 * KiB, 16), *y = sg_t_alloc(16 * KiB, 16);
    CHECK(x && y && x != y);
    sg_t_free(x);
    sg_t_free(y);
    CHECK(sg_free_bytes() == sg_obj.carved);
    sm_err_callback_set(NULL);
}

static void test_resize(void)
{
    char *p = sg_t_alloc(40 * KiB, 16);
    check_fill(p, 20 * KiB, 4);
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    CHECK(sg_resize(&c, 64 * KiB) && !sg_resize(&c, 64 * KiB + 1));
    CHECK(sg_resize(&c, 20 * KiB) && sg_t_usable(p) == 64 * KiB && check_verify(p, 20 * KiB, 4));
    sg_t_free(p);
    CHECK(sg_free_bytes() == sg_obj.carved);
}

/* Small chunks: requests above a chunk get their own; running out is ENOMEM, then recovers. */
static void test_growth_and_out_of_memory(void)
{
    char *big = sm_t_alloc(200 * KiB, 16);
    CHECK(big && sm_t_usable(big) == 200 * KiB);
    check_fill(big, 200 * KiB, 1);
    void *held[64];
    int got = 0;
    fm_obj.limit_bytes = fm_obj.live_bytes + 512 * KiB; /* chunks, and the map nodes they need */
    while (got < 64 && (held[got] = sm_t_alloc(40 * KiB, 16)) != NULL)
        got++;
    CHECKF(got >= 2 && got < 64 && errno == ENOMEM, "%d blocks of 40 KiB under a 512 KiB limit", got);
    fm_obj.limit_bytes = 0;
    void *more = sm_t_alloc(40 * KiB, 16);
    CHECK(more != NULL);
    sm_t_free(more);
    for (int i = 0; i < got; i++)
        sm_t_free(held[i]);
    CHECK(check_verify(big, 200 * KiB, 1));
    sm_t_free(big);
    CHECK(sm_free_bytes() == sm_obj.carved && fm_obj.bad_frees == 0);
}

/* A quarter of the frees are of blocks another thread allocated (a shared slot). */
static _Atomic(char *) shared[64]; /* a handed-over block holds its size in its first word */
static void *stress(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    enum { SLOTS = 32, OPS = 8000 };
    char *ptr[SLOTS] = { 0 };
    size_t size[SLOTS];
    long bad = 0;
    for (int op = 0; op < OPS; op++) {
        unsigned i = rnd(&seed) % SLOTS;
        if (ptr[i]) {
            if (size[i] >= 16 && rnd(&seed) % 4 == 0) { /* hand it over, free what was there */
                unsigned k = rnd(&seed) % 64;
                size_t n = size[i];
                bad += !check_verify(ptr[i], n, i);
                char *old = atomic_exchange(&shared[k], NULL);
                if (old) {
                    size_t on;
                    memcpy(&on, old, sizeof on);
                    bad += !check_verify(old + 8, on - 8, (unsigned)(on & 0xffff));
                    sm_t_free(old);
                }
                memcpy(ptr[i], &n, sizeof n);
                check_fill(ptr[i] + 8, n - 8, (unsigned)(n & 0xffff));
                char *expect = NULL;
                if (!atomic_compare_exchange_strong(&shared[k], &expect, ptr[i]))
                    sm_t_free(ptr[i]);
            } else {
                bad += !check_verify(ptr[i], size[i], i);
                sm_t_free(ptr[i]);
            }
            ptr[i] = NULL;
        } else {
            size[i] = 1 + rnd(&seed) % (rnd(&seed) % 8 ? 40 * KiB : 300 * KiB);
            ptr[i] = sm_t_alloc(size[i], rnd(&seed) % 8 ? 16 : 32 * KiB);
            if (!ptr[i])
                return (void *)-1;
            check_fill(ptr[i], size[i], i);
        }
    }
    for (unsigned i = 0; i < SLOTS; i++)
        if (ptr[i])
            sm_t_free(ptr[i]);
    return (void *)(intptr_t)bad;
}

/* Eight threads on two cores: preemption between a pop's read and its CAS is common, so an ABA
 * slip (a block handed out twice, a lost block) shows as a pattern mismatch or in the final walk. */
static void test_threads(void)
{
    check_threads(8, stress);
    for (unsigned k = 0; k < 64; k++) {
        char *p = atomic_exchange(&shared[k], NULL);
        if (p) {
            size_t n;
            memcpy(&n, p, sizeof n);
            CHECKF(check_verify(p + 8, n - 8, (unsigned)(n & 0xffff)), "handed-over block %p corrupted", (void *)p);
            sm_t_free(p);
        }
    }
    CHECKF(sm_free_bytes() == sm_obj.carved, "free %zu of %zu carved bytes", sm_free_bytes(), sm_obj.carved);
    CHECK(fm_obj.bad_frees == 0);
}

/* release(ALL) purges free blocks but their first page (the stack's link), keeps them listed. */
static void test_release(void)
{
    char *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = sg_t_alloc(64 * KiB, 16);
        CHECK(p[i] != NULL);
        check_fill(p[i], 64 * KiB, (unsigned)i);
    }
    for (int i = 0; i < 5; i++)
        sg_t_free(p[i]);
    unsigned long purges = fk_obj.purges;
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    sg_release(&r);
    CHECKF(fk_obj.purges >= purges + 5 && r.released >= 5 * 60 * KiB && fk_obj.bad_purges == 0,
           "purges %lu -> %lu, released %zu", purges, fk_obj.purges, r.released);
    CHECK(check_verify(p[5], 64 * KiB, 5));
    CHECK(sg_free_bytes() == sg_obj.carved - 64 * KiB);
    for (int i = 0; i < 5; i++) { /* the same blocks come back, whole */
        char *q = sg_t_alloc(64 * KiB, 16);
        CHECK(q != NULL && sg_t_usable(q) == 64 * KiB);
        check_fill(q, 64 * KiB, 40u + (unsigned)i);
        p[i] = q;
    }
    for (int i = 0; i < 6; i++) {
        CHECK(check_verify(p[i], 64 * KiB, i < 5 ? 40u + (unsigned)i : 5u));
        sg_t_free(p[i]);
    }
    CHECK(sg_free_bytes() == sg_obj.carved);
    /* DECAYED: a first pass ages the free blocks and asks to come back; the next one purges them. */
    char *d = sg_t_alloc(128 * KiB, 16);
    check_fill(d, 128 * KiB, 8);
    sg_t_free(d);
    purges = fk_obj.purges;
    sm_release_t r1 = sm_release_request(100, SM_RELEASE_DECAYED);
    sg_release(&r1);
    CHECKF(fk_obj.purges == purges && r1.released == 0 && r1.next_ms == 1100, "first pass: %lu purges, next %llu",
           fk_obj.purges - purges, (unsigned long long)r1.next_ms);
    sm_release_t r2 = sm_release_request(1100, SM_RELEASE_DECAYED);
    sg_release(&r2);
    CHECKF(fk_obj.purges > purges && r2.released >= 124 * KiB && r2.next_ms == UINT64_MAX, "second pass: %zu bytes",
           r2.released);
    d = sg_t_alloc(128 * KiB, 16); /* aged and purged, whole again */
    CHECK(d && sg_t_usable(d) == 128 * KiB);
    check_fill(d, 128 * KiB, 9);
    CHECK(check_verify(d, 128 * KiB, 9));
    sg_t_free(d);
    CHECK(sg_free_bytes() == sg_obj.carved);
}

static void test_fork(void)
{
    void *before = sg_t_alloc(8 * KiB, 16);
    check_fill(before, 8 * KiB, 9);
    sg_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        sg_fork_child();
        void *p = sg_t_alloc(8 * KiB, 16);
        int ok = p && p != before && check_verify(before, 8 * KiB, 9);
        sg_t_free(p);
        sg_t_free(before);
        _exit(ok ? 0 : 1);
    }
    sg_fork_parent();
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sg_t_free(before);
    CHECK(sg_free_bytes() == sg_obj.carved);
}

int main(void)
{
    check_begin("segfit_lf");
    CHECK(sg_create() == 0 && sm_create() == 0);
    RUN_CASE(test_sizes_and_reuse);
    RUN_CASE(test_alignment);
    RUN_CASE(test_bad_frees);
    RUN_CASE(test_resize);
    RUN_CASE(test_growth_and_out_of_memory);
    RUN_CASE(test_threads);
    RUN_CASE(test_release);
    RUN_CASE(test_fork);
    return check_end();
}
