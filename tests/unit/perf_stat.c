/* Unit test of the perf_stat add-on layer:
 *     pf, pft, pfp :: fk          call counts, threads (2 exited, 2 running), stats, the exit report
 *     pfs :: slow :: fk           a layer below that spins SLOW_CYCLES on every SLOW_EVERY-th alloc:
 *                                 the max must show the spin and the mean must lie between
 *     pfh :: tarrcache :: fk      the HIT paths forwarded (a hit that misses is not a call)
 * Counts are exact: every call that went down is counted once, exited threads' included. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

enum { SLOW_EVERY = 100, SLOW_CYCLES = 200000 };
static unsigned slow_calls;
#define SM_LAYER slow
#define SM_NEXT fk
enum { slow_thread_safe = 1, slow_min_align = 16, slow_zeroed = 0 };
static inline int slow_create(void) { return fk_create(); }
static inline void *slow_alloc(sm_mctx_t *c)
{
    if (++slow_calls % SLOW_EVERY == 0) {
        uint64_t t0 = sm_plat_cycles();
        while (sm_plat_cycles() - t0 < SLOW_CYCLES)
            ;
    }
    return fk_alloc(c);
}
static inline void slow_free(sm_mctx_t *c) { fk_free(c); }
static inline bool slow_getmeta(sm_mctx_t *c) { return fk_getmeta(c); }
static inline bool slow_resize(sm_mctx_t *c, size_t n) { return fk_resize(c, n); }
static inline bool slow_purge(sm_mctx_t *c) { return fk_purge(c); }
static inline void slow_release(sm_release_t *r) { fk_release(r); }
static inline void slow_thread_exit(void) { fk_thread_exit(); }
static inline void slow_fork_prepare(void) { fk_fork_prepare(); }
static inline void slow_fork_parent(void) { fk_fork_parent(); }
static inline void slow_fork_child(void) { fk_fork_child(); }
#include <sunmao/core/layer_end.h>

#define SM_LAYER pf
#define SM_NEXT fk
#include <sunmao/layers/addon/perf_stat.h>

#define SM_LAYER pft
#define SM_NEXT fk
#include <sunmao/layers/addon/perf_stat.h>

#define SM_LAYER pfs
#define SM_NEXT slow
#include <sunmao/layers/addon/perf_stat.h>

#define SM_LAYER pfp
#define SM_NEXT fk
#define SM_OPT_PRINT_AT_EXIT 1
#include <sunmao/layers/addon/perf_stat.h>

#define SM_LAYER tac
#define SM_NEXT fk
#define SM_SIZECLASS tc
#define SM_ERR warn
#include <sunmao/layers/addon/tarrcache.h>
#define SM_LAYER pfh
#define SM_NEXT tac
#include <sunmao/layers/addon/perf_stat.h>

_Static_assert((long)pf_caps == (long)fk_caps && (long)pfh_caps == (long)tac_caps,
               "perf_stat offers exactly its next layer's capabilities");

/* n allocations of varied sizes, filled, checked, freed (sized and unsized in turn) through L. */
#define PAIRS(L, n)                                                                                \
    for (unsigned i_ = 0; i_ < (n); i_++) {                                                        \
        size_t s_ = 16 + (i_ * 37) % 3000;                                                         \
        sm_mctx_t a_ = sm_mctx_alloc(s_, 16, 0);                                                   \
        void *p_ = L##_alloc(&a_);                                                                 \
        CHECK(p_ != NULL);                                                                         \
        check_fill(p_, s_, i_);                                                                    \
        CHECK(check_verify(p_, s_, i_));                                                           \
        sm_mctx_t f_ = sm_mctx_block(p_, (i_ & 1) ? s_ : 0, (i_ & 1) ? SM_F_SIZED : 0);             \
        L##_free(&f_);                                                                             \
    }

/* calls == want for both operations, and max >= mean > 0 in cycles and ns. */
#define EXPECT_SANE(r, want)                                                                       \
    for (unsigned op_ = 0; op_ < 2; op_++) {                                                       \
        CHECKF((r).calls[op_] == (want), "op %u: %llu calls, want %llu", op_,                      \
               (unsigned long long)(r).calls[op_], (unsigned long long)(want));                    \
        CHECKF((r).mean_cycles[op_] > 0 && (r).max_cycles[op_] >= (r).mean_cycles[op_] &&           \
                   (r).cycles[op_] >= (r).max_cycles[op_] && (r).max_ns[op_] >= (r).mean_ns[op_] && \
                   (r).rate_known,                                                                 \
               "op %u: mean %llu max %llu sum %llu cycles, mean %llu max %llu ns", op_,            \
               (unsigned long long)(r).mean_cycles[op_], (unsigned long long)(r).max_cycles[op_],  \
               (unsigned long long)(r).cycles[op_], (unsigned long long)(r).mean_ns[op_],          \
               (unsigned long long)(r).max_ns[op_]);                                               \
    }

static void counts_and_sane_times(void)
{
    CHECK(pf_create() == 0);
    struct pf_perf r;
    pf_perf_read(&r);
    CHECK(r.calls[0] == 0 && r.calls[1] == 0 && r.max_cycles[0] == 0 && r.mean_ns[1] == 0);
    unsigned long allocs = fk_obj.allocs;
    PAIRS(pf, 1000)
    CHECK(fk_obj.allocs - allocs == 1000 && fk_obj.bad_frees == 0);
    pf_perf_read(&r);
    EXPECT_SANE(r, 1000u)
    /* the batch calls of a next layer without BATCH: one call each, whatever they move */
    void *out[4];
    sm_mctx_t a = sm_mctx_alloc(64, 16, 0);
    CHECK(pf_alloc_batch(&a, out, 4) == 0);
    pf_perf_read(&r);
    CHECK(r.calls[0] == 1001 && r.calls[1] == 1000);
}

static void slow_requests_show(void)
{
    CHECK(pfs_create() == 0);
    PAIRS(pfs, 10 * SLOW_EVERY)
    struct pfs_perf r;
    pfs_perf_read(&r);
    EXPECT_SANE(r, 10u * SLOW_EVERY)
    /* 10 of 1000 allocs spun SLOW_CYCLES: mean >= 10 * SLOW_CYCLES / 1000, max >= SLOW_CYCLES */
    CHECKF(r.max_cycles[0] >= SLOW_CYCLES && r.mean_cycles[0] >= SLOW_CYCLES / SLOW_EVERY &&
               r.mean_cycles[0] < r.max_cycles[0] && r.max_cycles[1] < SLOW_CYCLES,
           "alloc mean %llu max %llu, free max %llu cycles (spin %d)", (unsigned long long)r.mean_cycles[0],
           (unsigned long long)r.max_cycles[0], (unsigned long long)r.max_cycles[1], SLOW_CYCLES);
}

static pthread_barrier_t parked, resume;
static void *pairs_thread(void *arg)
{
    PAIRS(pft, 500)
    if ((intptr_t)arg >= 2) {
        pthread_barrier_wait(&parked);
        pthread_barrier_wait(&resume);
    }
    return NULL;
}

/* 4 threads: 2 exited, 2 parked when read; then all exited. */
static void merged_over_threads(void)
{
    CHECK(pft_create() == 0);
    PAIRS(pft, 100)
    pthread_t t[4];
    for (intptr_t i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, pairs_thread, (void *)i) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(pthread_barrier_init(&parked, NULL, 3) == 0 && pthread_barrier_init(&resume, NULL, 3) == 0);
    for (intptr_t i = 2; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, pairs_thread, (void *)i) == 0);
    pthread_barrier_wait(&parked);
    struct pft_perf r;
    pft_perf_read(&r);
    EXPECT_SANE(r, 100u + 4 * 500)
    unsigned linked = 0;
    for (struct pft_tls_t *b = pft_obj.head; b; b = b->next)
        linked++;
    CHECKF(linked == 3, "%u blocks linked", linked);
    pthread_barrier_wait(&resume);
    for (int i = 2; i < 4; i++)
        pthread_join(t[i], NULL);
    pft_perf_read(&r);
    EXPECT_SANE(r, 100u + 4 * 500)
    CHECK(pft_obj.head == &pft_tls && pft_tls.next == NULL);
    pthread_barrier_destroy(&parked);
    pthread_barrier_destroy(&resume);
    /* the stats entry: the call counts */
    static sm_stats_t s;
    memset(&s, 0, sizeof s);
    pft_stats(&s);
    CHECK(s.nlayers == 2 && strcmp(s.layer[0].name, "pft") == 0 && s.layer[0].nmalloc == 100 + 4 * 500 &&
          s.layer[0].nfree == 100 + 4 * 500 && s.layer[0].in_use == 0);
}

/* Through tarrcache's HIT paths, as a socket calls them: each request one call. */
static void hit_paths_one_call_each(void)
{
    CHECK(pfh_create() == 0);
    enum { N = 40, ROUNDS = 3 };
    void *p[N];
    unsigned hits = 0;
    for (unsigned round = 0; round < ROUNDS; round++) {
        for (unsigned i = 0; i < N; i++) {
            if (!(p[i] = pfh_alloc_hit(48))) {
                sm_mctx_t a = sm_mctx_alloc(48, 16, 0);
                p[i] = pfh_alloc_miss(&a);
            } else {
                hits++;
            }
            CHECK(p[i] != NULL);
        }
        for (unsigned i = 0; i < N; i++) {
            uintptr_t w = SM_OWNER_UNKNOWN;
            if (!pfh_free_hit(p[i], 48, SM_F_SIZED, &w)) {
                sm_mctx_t f = sm_mctx_block(p[i], 48, SM_F_SIZED);
                pfh_free_miss(&f);
            }
        }
    }
    CHECK(hits > 0);
    struct pfh_perf r;
    pfh_perf_read(&r);
    EXPECT_SANE(r, (unsigned)(N * ROUNDS))
}

/* SM_OPT_PRINT_AT_EXIT 1: a child that exits normally prints its two lines on stderr. */
static void report_at_exit(void)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (pfp_create() != 0)
            _exit(3);
        PAIRS(pfp, 80)
        exit(0);
    }
    close(fd[1]);
    char text[1024] = { 0 };
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof text && (r = read(fd[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)r;
    close(fd[0]);
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECKF(strstr(text, "perf_stat pfp alloc: 80 calls, mean ") && strstr(text, "perf_stat pfp free: 80 calls, mean ") &&
               strstr(text, " ns (") && strstr(text, " cycles), max "),
           "child's stderr: %s", text);
}

int main(void)
{
    check_begin("perf_stat");
    RUN_CASE(counts_and_sane_times);
    RUN_CASE(slow_requests_show);
    RUN_CASE(merged_over_threads);
    RUN_CASE(hit_paths_one_call_each);
    RUN_CASE(report_at_exit);
    return check_end();
}
