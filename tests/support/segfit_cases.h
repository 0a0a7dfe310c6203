/* The cases segfit_lk's and segfit_lf's unit tests share: the same algorithm, one with a lock per
 * class, one without (tests/unit/segfit_lk.c, tests/unit/segfit_lf.c). Include it after defining
 * the instances sg (log2b classes, 4 MiB chunks, over the fake fk) and sm (tc classes, 64 KiB chunks,
 * over fm), SEGFIT_TEST_THREADS, and sg_free_bytes / sm_free_bytes: the walk of each instance's
 * free lists (nothing else running), which checks every listed block and returns the free bytes,
 * or SIZE_MAX after a failed check. */
#ifndef SUNMAO_TEST_SEGFIT_CASES_H
#define SUNMAO_TEST_SEGFIT_CASES_H

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#include "tests/support/err_record.h"

#define SEGFIT_HELPERS(L)                                                                              \
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
    }
SEGFIT_HELPERS(sg)
SEGFIT_HELPERS(sm)
static size_t sg_free_bytes(void);
static size_t sm_free_bytes(void);

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

/* Capability MOVE, over a next layer that has it (sm over fm) and one that has not (sg over fk): a
 * direct block moves with its word (registered at its new address when the granule allows, else
 * the next layer's from then on), its contents intact and its old word gone; a class block, a
 * refused move and a layer below without MOVE leave the block where and as it was; a block of the
 * next layer's own is forwarded. */
_Static_assert(SM_HAS_CAP(sm, SM_CAP_MOVE) && !SM_HAS_CAP(sg, SM_CAP_MOVE), "MOVE offered as the next layer has it");
static void test_move(void)
{
    size_t carved = sm_obj.carved;
    for (int aligned = 1; aligned >= 0; aligned--) {
        fm_obj.move_align = aligned ? 4096 : 0;
        char *p = sm_t_alloc(200 * KiB, 16); /* above half a 64 KiB chunk: direct */
        check_fill_movable(p, 200 * KiB, 3);
        unsigned long moves = fm_obj.moves;
        sm_mctx_t c = sm_mctx_block(p, 0, 0);
        CHECK(sm_move(&c, 300 * KiB + 1) && c.ptr != p && fm_obj.moves == moves + 1);
        CHECK(check_verify_moved(c.ptr, 200 * KiB, 3));
        CHECKF(sm_word(p) == 0, "old word %#lx", (unsigned long)sm_word(p));
        if (aligned)
            CHECKF(sm_word(c.ptr) != 0 && sm_t_usable(c.ptr) == 304 * KiB, "moved block: word %#lx, usable %zu",
                   (unsigned long)sm_word(c.ptr), sm_t_usable(c.ptr));
        else
            CHECK(sm_word(c.ptr) == 0 && sm_t_usable(c.ptr) >= 300 * KiB + 1); /* the next layer's now */
        memset((char *)c.ptr + 200 * KiB, 5, 100 * KiB + 1);
        sm_mctx_t again = c; /* and once more, from where it is now */
        CHECK(sm_move(&again, 400 * KiB) && again.ptr != c.ptr && check_verify_moved(again.ptr, 200 * KiB, 3));
        sm_t_free(again.ptr);
    }
    fm_obj.move_align = 0;

    char *k = sm_t_alloc(16 * KiB, 16); /* a class block stays */
    check_fill_movable(k, 16 * KiB, 4);
    sm_mctx_t ck = sm_mctx_block(k, 0, 0);
    CHECK(!sm_move(&ck, 64 * KiB) && ck.ptr == k && sm_t_usable(k) == 16 * KiB && check_verify_moved(k, 16 * KiB, 4));
    sm_t_free(k);

    char *d = sm_t_alloc(100 * KiB, 16); /* a refused move leaves the block ours */
    check_fill_movable(d, 100 * KiB, 6);
    fm_obj.refuse_moves = true;
    sm_mctx_t cd = sm_mctx_block(d, 0, 0);
    CHECK(!sm_move(&cd, 200 * KiB) && cd.ptr == d && sm_t_usable(d) == 100 * KiB && check_verify_moved(d, 100 * KiB, 6));
    fm_obj.refuse_moves = false;
    sm_t_free(d);
    CHECK(sm_word(d) == 0);

    sm_mctx_t f = sm_mctx_alloc(8 * KiB, 16, 0); /* the next layer's own block: forwarded */
    char *own = fm_alloc(&f);
    check_fill_movable(own, 8 * KiB, 8);
    sm_mctx_t co = sm_mctx_block(own, 0, 0);
    CHECK(sm_move(&co, 16 * KiB) && co.ptr != own && check_verify_moved(co.ptr, 8 * KiB, 8));
    sm_mctx_t fo = sm_mctx_block(co.ptr, 0, 0);
    fm_free(&fo);

    char *g = sg_t_alloc(3 * MiB, 16); /* no MOVE below: declined */
    check_fill_movable(g, 3 * MiB, 9);
    sm_mctx_t cg = sm_mctx_block(g, 0, 0);
    CHECK(!sg_move(&cg, 5 * MiB) && cg.ptr == g && sg_t_usable(g) == 3 * MiB && check_verify_moved(g, 3 * MiB, 9));
    sg_t_free(g);
    CHECK(sm_free_bytes() == sm_obj.carved && sm_obj.carved >= carved);
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

/* SEGFIT_TEST_THREADS threads; a quarter of the frees are of blocks another thread allocated (a shared slot). */
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

static void test_threads(void)
{
    check_threads(SEGFIT_TEST_THREADS, stress);
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

#endif
