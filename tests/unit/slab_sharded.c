/* Unit test of the slab_sharded core layer (thread-owned slabs, a free list per slab) over the fake
 * next layer (tests/support/fake_next.h). Two stacks: ss (tc classes, 64 KiB slabs, the defaults)
 * and sk (16 KiB slabs, no emptied slab kept by a thread, small carves: slabs change hands all the
 * time). The concurrent cases end with a census: every slab the layer made is found again, in a
 * heap's hands, an abandoned list or an empty list, and the live objects it counts match the test's. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER ss
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_sharded.h>

#define SM_LAYER ft
#include "tests/support/fake_next.h"
#define SM_LAYER sk
#define SM_NEXT ft
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SLAB_SIZE ((size_t)16 << 10)
#define SM_OPT_KEEP_EMPTY 0
#define SM_OPT_CARVE_BYTES 256
#include <sunmao/layers/core/slab_sharded.h>

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
        void *p = L##_alloc_hit(size);                                                             \
        if (p)                                                                                     \
            return p;                                                                              \
        sm_mctx_t c = sm_mctx_alloc(size, 16, 0);                                                  \
        return L##_alloc_miss(&c);                                                                 \
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
    /* Slabs in a list linked through next (NULL-ended), each checked to be all free or not. */    \
    SM_UNUSED static size_t L##_walk(struct L##_slab *s, size_t *busy)                             \
    {                                                                                              \
        size_t n = 0;                                                                              \
        for (; s && n <= L##_obj.slabs; s = s->next, n++)                                          \
            *busy += s->used != 0;                                                                 \
        return n;                                                                                  \
    }                                                                                              \
    /* A heap's circular list. */                                                                 \
    SM_UNUSED static size_t L##_ring(struct L##_slab *head, size_t *live)                          \
    {                                                                                              \
        size_t n = 0;                                                                              \
        struct L##_slab *s = head;                                                                 \
        if (s)                                                                                     \
            do {                                                                                   \
                n++, *live += s->used;                                                             \
                s = s->next;                                                                       \
            } while (s != head && n <= L##_obj.slabs);                                             \
        return n;                                                                                  \
    }                                                                                              \
    /* The census (see the top), nothing else running: slabs found, and the live objects of the   \
     * calling thread's heap and of the abandoned slabs (the empty ones must hold none). */       \
    SM_UNUSED static bool L##_census(size_t *found, size_t *live, size_t *empty_busy)              \
    {                                                                                              \
        size_t n = 0, l = 0, busy = 0;                                                             \
        n += L##_walk(L##_obj.purged, &busy);                                                      \
        for (unsigned i = 0; i < L##_classes; i++) {                                               \
            n += L##_walk(L##_obj.empties[i], &busy);                                              \
            size_t before = busy;                                                                  \
            size_t k = L##_walk(L##_obj.abandoned[i], &busy);                                      \
            n += k;                                                                                \
            for (struct L##_slab *s = L##_obj.abandoned[i]; s; s = s->next)                        \
                l += s->used;                                                                      \
            busy = before;                                                                         \
        }                                                                                          \
        struct L##_heap *t = L##_tls;                                                              \
        if (t != &L##_none_heap)                                                                   \
            for (unsigned i = 0; i < L##_classes; i++) {                                           \
                if (t->cur[i] != &L##_none_slab)                                                   \
                    n++, l += t->cur[i]->used;                                                     \
                n += L##_ring(t->avail[i], &l) + L##_ring(t->full[i], &l) + L##_ring(t->spare[i], &l); \
            }                                                                                      \
        *found = n, *live = l, *empty_busy = busy;                                                 \
        return n == L##_obj.slabs && busy == 0;                                                    \
    }
HELPERS(ss)
HELPERS(sk)

#define KiB ((size_t)1 << 10)

static void *alloc_big(void *arg)
{
    (void)arg;
    char *small = ss_t_alloc(32);
    for (size_t size = ss_obj.max_size + 1; size <= ((size_t)8 << 20); size *= 4) {
        unsigned long allocs = fk_obj.allocs;
        char *big = ss_t_alloc(size);
        if (!big || fk_obj.allocs != allocs + 1 || ss_t_usable(big) < size)
            return (void *)1;
        check_fill(big, size, 1);
        ss_t_free(big);
    }
    ss_t_free(small);
    return NULL;
}

static void test_classes_and_contents(void)
{
    CHECKF(ss_obj.max_size >= 8 * KiB && sk_obj.max_size >= 2 * KiB, "served up to %zu / %zu", ss_obj.max_size,
           sk_obj.max_size);
    unsigned seed = 1;
    for (size_t size = 1; size <= ss_obj.max_size; size += 1 + size / 5) {
        enum { N = 300 };
        char *p[N];
        size_t want = sm_sizeclass_tc_class_to_size(sm_sizeclass_tc_size_to_class(size));
        for (int i = 0; i < N; i++) {
            p[i] = ss_t_alloc(size);
            CHECKF(p[i] && sm_ptr_aligned(p[i], 16) && ss_t_usable(p[i]) == want, "size %zu: %p usable %zu", size,
                   (void *)p[i], p[i] ? ss_t_usable(p[i]) : 0);
            if (!p[i])
                return;
            check_fill(p[i], want, (unsigned)(size + (size_t)i));
        }
        for (int i = 0; i < N; i++)
            CHECKF(check_verify(p[i], want, (unsigned)(size + (size_t)i)), "size %zu object %d overwritten", size, i);
        for (int i = 0; i < N; i++) { /* freed in a shuffled order */
            int j = (int)(rnd(&seed) % N);
            char *x = p[i];
            p[i] = p[j], p[j] = x;
        }
        for (int i = 0; i < N; i++)
            ss_t_free(p[i]);
    }
    /* Aligned requests: a class whose size is a multiple of the alignment. */
    for (size_t align = 32; align <= 4096; align *= 2) {
        sm_mctx_t a = sm_mctx_alloc(align / 2 + 1, align, 0);
        char *p = ss_alloc(&a);
        CHECKF(p && sm_ptr_aligned(p, align) && ss_t_usable(p) >= align / 2 + 1, "align %zu: %p", align, (void *)p);
        check_fill(p, align / 2 + 1, 3);
        CHECK(check_verify(p, align / 2 + 1, 3));
        ss_t_free(p);
    }
    /* Above the served classes, and above the size-class policy's largest class (the hit path
     * must not look a class up for those): the next layer's. In a thread of its own, whose heap has
     * nothing but a current slab of one class. */
    pthread_t t;
    void *r = (void *)1;
    CHECK(pthread_create(&t, NULL, alloc_big, NULL) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    CHECK(fk_obj.bad_frees == 0 && errs.calls == 0);
}

/* The owner's free of an object of its current slab is the next one handed out (it is in the
 * cache); a slab's objects all freed make it empty, kept by the thread, and taken again before any
 * new slab. */
static void test_reuse(void)
{
    char *p = ss_t_alloc(100);
    ss_t_free(p);
    CHECK(ss_t_alloc(100) == p);
    ss_t_free(p);
    size_t slabs = ss_obj.slabs;
    for (int round = 0; round < 20; round++) {
        char *q[2000];
        for (int i = 0; i < 2000; i++) {
            q[i] = ss_t_alloc(200);
            check_fill(q[i], 200, (unsigned)(round * 2000 + i));
        }
        for (int i = 0; i < 2000; i++) {
            CHECK(check_verify(q[i], 200, (unsigned)(round * 2000 + i)));
            ss_t_free(q[i]);
        }
    }
    CHECKF(ss_obj.slabs <= slabs + 8, "slabs %zu -> %zu for 2000 objects of 208 bytes a round", slabs, ss_obj.slabs);
    size_t found, live, busy;
    CHECKF(ss_census(&found, &live, &busy) && live == 0, "census: %zu of %zu slabs, %zu live, %zu empty ones busy",
           found, ss_obj.slabs, live, busy);
}

static void test_bad_frees(void)
{
    sm_err_callback_set(on_error);
    memset(&errs, 0, sizeof errs);
    char *p = ss_t_alloc(100), *q = ss_t_alloc(100);
    size_t n = ss_t_usable(p);
    check_fill(q, n, 5);
    ss_t_free(p + 16);
    CHECK(errs.calls == 1 && errs.kind == SM_ERR_INVALID_FREE && errs.ptr == p + 16);
    sm_mctx_t sized = sm_mctx_block(p, n + 1, SM_F_SIZED);
    ss_free(&sized);
    CHECK(errs.calls == 2 && errs.kind == SM_ERR_INVALID_FREE);
    ss_t_free(p);
    CHECK(errs.calls == 2);
    ss_t_free(p);
    CHECK(errs.calls == 3 && errs.kind == SM_ERR_DOUBLE_FREE && errs.ptr == p);
    /* Nothing handed out twice after the double free, and the neighbour untouched. */
    char *x = ss_t_alloc(100), *y = ss_t_alloc(100);
    CHECK(x && y && x != y && y != q && x != q && check_verify(q, n, 5));
    ss_t_free(x);
    ss_t_free(y);
    ss_t_free(q);
    /* Not a slab of ours: to the fake, which counts it. */
    int local;
    unsigned long bad = fk_obj.bad_frees;
    ss_t_free(&local);
    CHECK(errs.calls == 3 && fk_obj.bad_frees == bad + 1);
    fk_obj.bad_frees = bad;
    sm_err_callback_set(NULL);
}

/* One thread allocates, another frees everything (remote frees): the objects come back to their
 * slabs and are handed out again, no new slab made. A double free by the other thread is caught. */
static char *handed[4096];
static void (*handed_free)(void *) = ss_t_free; /* the stack handed[] came from */
static void *free_all(void *arg)
{
    size_t n = (size_t)(uintptr_t)arg;
    for (size_t i = 0; i < n; i++) {
        if (!check_verify(handed[i], 48, (unsigned)i))
            return (void *)1;
        handed_free(handed[i]);
    }
    return NULL;
}
static void *free_again(void *arg)
{
    ss_t_free(arg);
    return NULL;
}
static void test_remote_frees(void)
{
    size_t n = sizeof handed / sizeof handed[0];
    for (size_t i = 0; i < n; i++) {
        handed[i] = ss_t_alloc(48);
        CHECK(handed[i] != NULL);
        check_fill(handed[i], 48, (unsigned)i);
    }
    size_t slabs = ss_obj.slabs;
    pthread_t t;
    void *r = (void *)1;
    CHECK(pthread_create(&t, NULL, free_all, (void *)(uintptr_t)n) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    /* The other thread's frees are on the slabs' remote lists, not on the owner's lists. */
    struct ss_slab *s0;
    CHECK(ss_locate(handed[0], &s0) && s0->remote != 0 && s0->used > 0);
    sm_stats_t st;
    memset(&st, 0, sizeof st);
    ss_stats(&st);
    CHECKF(st.layer[0].in_use == 0, "%zu bytes in use after every object was freed remotely", st.layer[0].in_use);
    char *p[4096];
    for (size_t i = 0; i < n; i++) {
        p[i] = ss_t_alloc(48);
        CHECK(p[i] != NULL);
        check_fill(p[i], 48, (unsigned)i + 7);
    }
    CHECKF(ss_obj.slabs == slabs, "slabs %zu -> %zu: remotely freed objects not reused", slabs, ss_obj.slabs);
    sm_err_callback_set(on_error);
    memset(&errs, 0, sizeof errs);
    ss_t_free(p[5]);
    CHECK(pthread_create(&t, NULL, free_again, p[5]) == 0 && pthread_join(t, NULL) == 0);
    CHECK(errs.calls == 1 && errs.kind == SM_ERR_DOUBLE_FREE && errs.ptr == p[5]);
    sm_err_callback_set(NULL);
    for (size_t i = 0; i < n; i++) {
        if (i != 5) {
            CHECK(check_verify(p[i], 48, (unsigned)i + 7));
            ss_t_free(p[i]);
        }
    }
    size_t found, live, busy;
    CHECKF(ss_census(&found, &live, &busy) && live == 0, "census: %zu of %zu slabs, %zu live", found, ss_obj.slabs, live);
}

/* A write into a free object (its link, its tag, or a one-byte overflow of its neighbour) is
 * reported once when the object comes up, and no pointer outside the slab is ever handed out. */
static void test_write_after_free(void)
{
    sm_err_callback_set(on_error);
    for (int kind = 0; kind < 3; kind++) {
        memset(&errs, 0, sizeof errs);
        memset(err_counts, 0, sizeof err_counts);
        enum { N = 64 };
        char *p[N];
        for (int i = 0; i < N; i++)
            p[i] = ss_t_alloc(64);
        /* the victim: an object whose neighbour below is one of ours too */
        int v = -1;
        for (int i = 0; i < N && v < 0; i++)
            for (int j = 0; j < N && v < 0; j++)
                if (p[j] == p[i] + 64)
                    v = j;
        CHECK(v >= 0);
        if (v < 0)
            return;
        char *victim = p[v], *below = victim - 64;
        for (int i = N - 1; i >= 0; i--)
            ss_t_free(p[i]);
        if (kind == 0)
            memset(victim, 0x41, 8); /* the link: the first 8 bytes */
        else if (kind == 1)
            victim[8] ^= 1; /* the tag */
        else
            below[64] = 0x7f; /* one byte past the neighbour below: the victim's link */
        bool outside = false;
        char *q[2 * N];
        for (int i = 0; i < 2 * N; i++) {
            q[i] = ss_t_alloc(64);
            outside |= !q[i] || ss_t_usable(q[i]) != 64;
        }
        CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && errs.calls == 1 && !outside, "kind %d: %lu reports, outside %d",
               kind, err_counts[SM_ERR_CORRUPTION], outside);
        for (int i = 0; i < 2 * N; i++)
            ss_t_free(q[i]);
        CHECK(errs.calls == 1);
    }
    sm_err_callback_set(NULL);
}

/* A thread exits holding live objects: its slabs are abandoned; freed from here, and another
 * thread adopts them instead of making new ones; release empties the ones all came back to. */
static char *left[600];
static void *alloc_and_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < 600; i++) {
        left[i] = sk_t_alloc(100);
        if (!left[i])
            return (void *)1;
        check_fill(left[i], 100, (unsigned)i);
    }
    return NULL;
}
static void *alloc_some(void *arg)
{
    char *p[300];
    for (int i = 0; i < 300; i++)
        if (!(p[i] = sk_t_alloc(100)))
            return (void *)1;
    *(size_t *)arg = sk_obj.slabs;
    for (int i = 0; i < 300; i++)
        sk_t_free(p[i]);
    return NULL;
}
static void test_thread_exit(void)
{
    pthread_t t;
    void *r = (void *)1;
    CHECK(pthread_create(&t, NULL, alloc_and_exit, NULL) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    size_t slabs = sk_obj.slabs, abandoned = 0;
    for (unsigned i = 0; i < sk_classes; i++)
        abandoned += sk_obj.nabandoned[i];
    CHECKF(abandoned >= 3, "%zu slabs abandoned of %zu", abandoned, slabs);
    for (int i = 0; i < 300; i++) { /* half of them freed: the slabs stay abandoned */
        CHECK(check_verify(left[i], 100, (unsigned)i));
        sk_t_free(left[i]);
    }
    size_t seen = 0;
    CHECK(pthread_create(&t, NULL, alloc_some, &seen) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    CHECKF(seen == slabs, "slabs %zu -> %zu: the abandoned ones not adopted", slabs, seen);
    for (int i = 300; i < 600; i++) {
        CHECK(check_verify(left[i], 100, (unsigned)i));
        sk_t_free(left[i]);
    }
    sm_release_t rq = sm_release_request(0, SM_RELEASE_ALL);
    sk_release(&rq);
    size_t found, live, busy;
    CHECKF(sk_census(&found, &live, &busy) && live == 0, "census: %zu of %zu slabs, %zu live, %zu empty ones busy",
           found, sk_obj.slabs, live, busy);
    for (unsigned i = 0; i < sk_classes; i++)
        CHECKF(sk_obj.abandoned[i] == NULL, "class %u: an abandoned slab whose objects all came back", i);
}

/* A thread's slabs of one class all freed by another thread, then the thread allocates only
 * another class: before it has taken many more slabs, it finds the first class's slabs empty (a
 * collection) and they serve the new class, no remote free left waiting in its full slabs. */
static void test_collect(void)
{
    sk_thread_exit(); /* a heap of its own for this case */
    for (size_t i = 0; i < 2000; i++) {
        CHECK((handed[i] = sk_t_alloc(48)) != NULL);
        check_fill(handed[i], 48, (unsigned)i);
    }
    size_t before = sk_obj.slabs;
    pthread_t t;
    void *r = (void *)1;
    handed_free = sk_t_free;
    CHECK(pthread_create(&t, NULL, free_all, (void *)(uintptr_t)2000) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    handed_free = ss_t_free;
    enum { BIG = 640 }; /* 40 slabs' worth of 1 KiB objects */
    static char *big[BIG];
    for (int i = 0; i < BIG; i++) {
        CHECK((big[i] = sk_t_alloc(1024)) != NULL);
        check_fill(big[i], 1024, (unsigned)i);
    }
    size_t made = sk_obj.slabs - before;
    CHECKF(made <= 40 - 4, "%zu new slabs for 40 slabs' worth: the emptied ones not collected", made);
    for (int i = 0; i < BIG; i++) {
        CHECK(check_verify(big[i], 1024, (unsigned)i));
        sk_t_free(big[i]);
    }
}

/* Eight threads on two cores, half of the frees remote through shared slots (tests/support/
 * handover_stress.h), on the stack whose slabs change hands all the time; every object filled and
 * checked; a count of live objects; the statistics while objects wait in the slots; the census. */
#define HANDOVER_ALLOC(n) ((char *)sk_t_alloc(n))
#define HANDOVER_FREE(p)  sk_t_free(p)
#include "tests/support/handover_stress.h"
static void test_threads(void)
{
    memset(&errs, 0, sizeof errs);
    sm_err_callback_set(on_error);
    check_threads(8, handover_stress);
    size_t want = 0, kept = 0;
    for (unsigned k = 0; k < 128; k++) {
        char *p = atomic_load(&handover_shared[k]);
        if (p)
            want += sk_t_usable(p), kept++;
    }
    sm_stats_t st;
    memset(&st, 0, sizeof st);
    sk_stats(&st);
    CHECKF(st.layer[0].in_use == want, "stats: %zu bytes in use, %zu held in %zu handed-over objects",
           st.layer[0].in_use, want, kept);
    CHECK(handover_drain() == 0);
    CHECKF(atomic_load(&handover_live) == 0 && errs.calls == 0 && ft_obj.bad_frees == 0,
           "live %ld, errors %d (kind %d), bad frees below %lu", atomic_load(&handover_live), errs.calls, (int)errs.kind,
           ft_obj.bad_frees);
    sm_err_callback_set(NULL);
    sm_release_t rq = sm_release_request(0, SM_RELEASE_ALL);
    sk_release(&rq);
    size_t found, live, busy;
    CHECKF(sk_census(&found, &live, &busy) && live == 0, "census: %zu of %zu slabs, %zu live, %zu empty ones busy",
           found, sk_obj.slabs, live, busy);
}

/* Empty slabs are purged by release(ALL), and work after (formatted again). */
static void test_release(void)
{
    char *p[1000];
    for (int i = 0; i < 1000; i++)
        p[i] = sk_t_alloc(200);
    memcpy(handed, p, sizeof p);
    for (int i = 0; i < 1000; i++)
        check_fill(handed[i], 48, (unsigned)i);
    pthread_t t;
    void *r = (void *)1;
    /* freed by a thread of its own, which then exits: the slabs are emptied through their remote
     * lists, then abandoned, then found empty by release */
    handed_free = sk_t_free;
    CHECK(pthread_create(&t, NULL, free_all, (void *)(uintptr_t)1000) == 0 && pthread_join(t, &r) == 0 && r == NULL);
    handed_free = ss_t_free;
    sk_thread_exit();
    unsigned long purges = ft_obj.purges;
    sm_release_t rq = sm_release_request(0, SM_RELEASE_ALL);
    sk_release(&rq);
    CHECKF(ft_obj.purges > purges && rq.released >= 100 * KiB && ft_obj.bad_purges == 0, "purges %lu -> %lu, %zu bytes",
           purges, ft_obj.purges, rq.released);
    for (int i = 0; i < 1000; i++) {
        p[i] = sk_t_alloc(200);
        CHECK(p[i] != NULL);
        check_fill(p[i], 200, (unsigned)i);
    }
    for (int i = 0; i < 1000; i++) {
        CHECK(check_verify(p[i], 200, (unsigned)i));
        sk_t_free(p[i]);
    }
}

static void test_fork(void)
{
    char *before = ss_t_alloc(64);
    check_fill(before, 64, 9);
    ss_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        ss_fork_child();
        char *p = ss_t_alloc(64);
        int ok = p && p != before && check_verify(before, 64, 9);
        ss_t_free(p);
        ss_t_free(before);
        _exit(ok ? 0 : 1);
    }
    ss_fork_parent();
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ss_t_free(before);
}

int main(void)
{
    check_begin("slab_sharded");
    CHECK(ss_create() == 0 && sk_create() == 0);
    RUN_CASE(test_classes_and_contents);
    RUN_CASE(test_reuse);
    RUN_CASE(test_bad_frees);
    RUN_CASE(test_remote_frees);
    RUN_CASE(test_write_after_free);
    RUN_CASE(test_thread_exit);
    RUN_CASE(test_collect);
    RUN_CASE(test_threads);
    RUN_CASE(test_release);
    RUN_CASE(test_fork);
    return check_end();
}
