/* Unit test of the slab_wf core layer (wait-free slab) over segfit_lf over the fake next layer
 * (tests/support/fake_next.h). Two stacks: sw (prime classes, 64 KiB slabs, 40 thread slabs) and
 * st (tc classes, 16 KiB slabs, 2 thread slabs: evictions and detaches all the time). The
 * concurrent cases end with a census: every slab the layer ever made is found again, in the empty
 * stack, a partial stack or a thread's hands, and every one not in a thread's hands holds no live
 * object; a slab lost by a race between a detach and the frees, or pushed twice, shows there. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/prime.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sf
#define SM_NEXT fk
#define SM_SIZECLASS log2b
#define SM_ERR callback
#define SM_OPT_CHUNK_SIZE ((size_t)1 << 20)
#include <sunmao/layers/core/segfit_lf.h>
#define SM_LAYER sw
#define SM_NEXT sf
#define SM_SIZECLASS prime
#define SM_ERR callback
#include <sunmao/layers/core/slab_wf.h>

#define SM_LAYER ft
#include "tests/support/fake_next.h"
#define SM_LAYER tf
#define SM_NEXT ft
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include <sunmao/layers/core/segfit_lf.h>
#define SM_LAYER st
#define SM_NEXT tf
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SLAB_SIZE ((size_t)16 << 10)
#define SM_OPT_TLLABS 2
#include <sunmao/layers/core/slab_wf.h>

#define KiB ((size_t)1 << 10)


static unsigned rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

#define HELPERS(L)                                                                                 \
    SM_UNUSED static void *L##_t_alloc(size_t size)                                                \
    {                                                                                              \
        sm_mctx_t c = sm_mctx_alloc(size, 16, 0);                                                  \
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
    /* Slabs found in a stack (nothing else running); counts them, checks each is all free. */     \
    SM_UNUSED static size_t L##_walk(sm_tstack_t *stack, size_t *not_free)                         \
    {                                                                                              \
        size_t n = 0;                                                                              \
        for (sm_tnode_t *x = (sm_tnode_t *)stack->lo; x && n <= L##_obj.slabs; x = x->next, n++) { \
            struct L##_slab *s = (struct L##_slab *)x;                                             \
            uintptr_t w = sm_pagemap_get(&L##_obj.map, L##_shift, s);                              \
            if (!w || L##_free_objects(s, &L##_obj.geo[w - 1]) != L##_obj.geo[w - 1].count)         \
                (*not_free)++;                                                                     \
        }                                                                                          \
        return n;                                                                                  \
    }                                                                                              \
    /* The census (see the top); `held`: slabs the calling thread still owns. */                  \
    SM_UNUSED static bool L##_census(size_t *found, size_t *busy)                                  \
    {                                                                                              \
        size_t empty_busy = 0, partial_busy = 0, n = L##_walk(&L##_obj.empty, &empty_busy);         \
        for (unsigned i = 0; i < L##_classes; i++)                                                 \
            n += L##_walk(&L##_obj.cls[i].partial, &partial_busy);                                 \
        if (L##_tls)                                                                               \
            n += L##_tls->owned;                                                                   \
        *found = n, *busy = empty_busy + partial_busy;                                             \
        return n == L##_obj.slabs && *busy == 0;                                                   \
    }
HELPERS(sw)
HELPERS(st)

static void test_classes_and_contents(void)
{
    CHECKF(sw_obj.max_size >= 16000 && sw_obj.max_size <= 16384 && st_obj.max_size >= 2048,
           "served up to %zu / %zu", sw_obj.max_size, st_obj.max_size);
    unsigned seed = 1;
    for (size_t size = 1; size <= sw_obj.max_size; size += 1 + size / 5) {
        enum { N = 300 };
        char *p[N];
        unsigned cls = sm_sizeclass_prime_size_to_class(size);
        size_t want = sm_sizeclass_prime_class_to_size(cls);
        for (int i = 0; i < N; i++) {
            p[i] = sw_t_alloc(size);
            CHECKF(p[i] && sm_ptr_aligned(p[i], 16) && sw_t_usable(p[i]) == want, "size %zu: %p usable %zu", size,
                   (void *)p[i], p[i] ? sw_t_usable(p[i]) : 0);
            if (!p[i])
                return;
            check_fill(p[i], want, (unsigned)(size + (size_t)i));
        }
        for (int i = 0; i < N; i++) {
            CHECKF(check_verify(p[i], want, (unsigned)(size + (size_t)i)), "size %zu object %d overwritten", size, i);
            rnd(&seed);
        }
        for (int i = 0; i < N; i++) { /* in a shuffled order */
            int j = (int)(rnd(&seed) % N);
            char *x = p[i];
            p[i] = p[j], p[j] = x;
        }
        for (int i = 0; i < N; i++) {
            sw_t_free(p[i]);
            CHECK(sw_t_usable(p[i]) == 0);
        }
    }
    /* Above the served classes, or aligned beyond 16: segfit_lf's blocks. */
    char *big = sw_t_alloc(sw_obj.max_size + 1);
    sm_mctx_t a = sm_mctx_alloc(64, 64, 0);
    char *aligned = sw_alloc(&a);
    CHECK(big && sw_t_usable(big) % 4096 == 0 && aligned && sm_ptr_aligned(aligned, 64));
    sw_t_free(big);
    sw_t_free(aligned);
    CHECK(fk_obj.bad_frees == 0 && errs.calls == 0);
}

static void test_bad_frees(void)
{
    sm_err_callback_set(on_error);
    memset(&errs, 0, sizeof errs);
    char *p = sw_t_alloc(100), *q = sw_t_alloc(100);
    size_t n = sw_t_usable(p);
    check_fill(q, n, 5);
    sw_t_free(p + 16);
    CHECK(errs.calls == 1 && errs.kind == SM_ERR_INVALID_FREE && errs.ptr == p + 16);
    sm_mctx_t sized = sm_mctx_block(p, n + 1, SM_F_SIZED);
    sw_free(&sized);
    CHECK(errs.calls == 2 && errs.kind == SM_ERR_INVALID_FREE);
    sw_t_free(p);
    CHECK(errs.calls == 2);
    sw_t_free(p);
    CHECK(errs.calls == 3 && errs.kind == SM_ERR_DOUBLE_FREE && errs.ptr == p);
    /* Nothing handed out twice after the double free, and the neighbour untouched. */
    char *x = sw_t_alloc(100), *y = sw_t_alloc(100);
    CHECK(x && y && x != y && y != q && x != q && check_verify(q, n, 5));
    sw_t_free(x);
    sw_t_free(y);
    sw_t_free(q);
    /* Not a slab of ours: down through segfit_lf to the fake, which counts it. */
    int local;
    unsigned long bad = fk_obj.bad_frees;
    sw_t_free(&local);
    CHECK(errs.calls == 3 && fk_obj.bad_frees == bad + 1);
    fk_obj.bad_frees = bad;
    sm_err_callback_set(NULL);
}

/* One thread allocates, another frees everything: the slabs come back empty, and another class
 * takes them instead of new ones. */
static char *handed[4096];
static void *free_all(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    for (size_t i = 0; i < n; i++) {
        if (!check_verify(handed[i], 48, (unsigned)i))
            return (void *)1;
        sw_t_free(handed[i]);
    }
    return NULL;
}
static void test_remote_frees_recycle_slabs(void)
{
    size_t n = sizeof handed / sizeof handed[0];
    for (size_t i = 0; i < n; i++) {
        handed[i] = sw_t_alloc(48);
        CHECK(handed[i] != NULL);
        check_fill(handed[i], 48, (unsigned)i);
    }
    size_t slabs = sw_obj.slabs;
    pthread_t t;
    void *r = (void *)1;
    CHECK(pthread_create(&t, NULL, free_all, (void *)(uintptr_t)n) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    size_t emptied = 0;
    for (unsigned i = 0; i < sw_classes; i++)
        emptied += sw_obj.cls[i].emptied;
    CHECKF(sw_obj.empties + emptied >= 2, "%zu empty slabs after %zu remote frees", sw_obj.empties + emptied, n);
    char *p[2048];
    for (int i = 0; i < 2048; i++) {
        p[i] = sw_t_alloc(96);
        CHECK(p[i] != NULL);
    }
    CHECKF(sw_obj.slabs <= slabs + 1, "slabs %zu -> %zu: empty ones not reused", slabs, sw_obj.slabs);
    for (int i = 0; i < 2048; i++)
        sw_t_free(p[i]);
    size_t found, busy;
    CHECKF(sw_census(&found, &busy), "census: %zu of %zu slabs found, %zu with live objects", found, sw_obj.slabs, busy);
}

/* Two thread slabs at most: using five classes, the thread never holds more. */
static void test_tllabs_bound(void)
{
    char *p[5][40];
    for (int r = 0; r < 40; r++)
        for (int k = 0; k < 5; k++) {
            p[k][r] = st_t_alloc((size_t)16 << k);
            CHECK(p[k][r] != NULL && st_tls && st_tls->owned <= 2);
            check_fill(p[k][r], (size_t)16 << k, (unsigned)(k * 40 + r));
        }
    for (int r = 0; r < 40; r++)
        for (int k = 0; k < 5; k++) {
            CHECK(check_verify(p[k][r], (size_t)16 << k, (unsigned)(k * 40 + r)));
            st_t_free(p[k][r]);
        }
    size_t found, busy;
    CHECKF(st_census(&found, &busy), "census: %zu of %zu slabs found, %zu with live objects", found, st_obj.slabs, busy);
}

/* Eight threads on two cores, half of the frees remote through shared slots (tests/support/
 * handover_stress.h), on the stack that detaches all the time; every object filled and checked; a
 * count of live objects; the census. */
#define HANDOVER_ALLOC(n) ((char *)st_t_alloc(n))
#define HANDOVER_FREE(p)  st_t_free(p)
#include "tests/support/handover_stress.h"
static void test_threads(void)
{
    memset(&errs, 0, sizeof errs);
    check_threads(8, handover_stress);
    CHECK(handover_drain() == 0);
    CHECKF(atomic_load(&handover_live) == 0 && errs.calls == 0 && ft_obj.bad_frees == 0,
           "live %ld, errors %d (kind %d), bad frees below %lu", atomic_load(&handover_live), errs.calls, (int)errs.kind,
           ft_obj.bad_frees);
    size_t found, busy;
    CHECKF(st_census(&found, &busy), "census: %zu of %zu slabs found, %zu with live objects", found, st_obj.slabs, busy);
}

/* Empty slabs are purged past their header by release(ALL), and work after. */
static void test_release(void)
{
    char *p[1000];
    for (int i = 0; i < 1000; i++)
        p[i] = sw_t_alloc(200);
    pthread_t t;
    memcpy(handed, p, sizeof p);
    for (int i = 0; i < 1000; i++)
        check_fill(handed[i], 48, (unsigned)i);
    void *r = (void *)1;
    CHECK(pthread_create(&t, NULL, free_all, (void *)(uintptr_t)1000) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    unsigned long purges = fk_obj.purges;
    sm_release_t rq = sm_release_request(0, SM_RELEASE_ALL);
    sw_release(&rq);
    CHECKF(fk_obj.purges > purges && rq.released >= 60 * KiB && fk_obj.bad_purges == 0, "purges %lu -> %lu, %zu bytes",
           purges, fk_obj.purges, rq.released);
    for (int i = 0; i < 1000; i++) {
        p[i] = sw_t_alloc(200);
        CHECK(p[i] != NULL);
        check_fill(p[i], 200, (unsigned)i);
    }
    for (int i = 0; i < 1000; i++) {
        CHECK(check_verify(p[i], 200, (unsigned)i));
        sw_t_free(p[i]);
    }
}

static void test_fork(void)
{
    char *before = sw_t_alloc(64);
    check_fill(before, 64, 9);
    sw_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        sw_fork_child();
        char *p = sw_t_alloc(64);
        int ok = p && p != before && check_verify(before, 64, 9);
        sw_t_free(p);
        sw_t_free(before);
        _exit(ok ? 0 : 1);
    }
    sw_fork_parent();
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sw_t_free(before);
}

int main(void)
{
    check_begin("slab_wf");
    CHECK(sw_create() == 0 && st_create() == 0);
    RUN_CASE(test_classes_and_contents);
    RUN_CASE(test_bad_frees);
    RUN_CASE(test_remote_frees_recycle_slabs);
    RUN_CASE(test_tllabs_bound);
    RUN_CASE(test_threads);
    RUN_CASE(test_release);
    RUN_CASE(test_fork);
    return check_end();
}
