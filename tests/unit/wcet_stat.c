/* Unit test of the wcet_stat add-on layer over a layer that is slow on purpose:
 *     ws1 (every request timed) / ws8 (one in 8) :: slow :: fake
 * `slow` spins SLOW_CYCLES on every SLOW_EVERY-th malloc, so the malloc percentiles at and above
 * 1 - 1/SLOW_EVERY must show it and those below must not; frees are never slowed. Counts are
 * exact: every timed request is in the histogram once, including those of exited threads. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sunmao/platform/platform.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

enum { SLOW_EVERY = 200, SLOW_CYCLES = 400000 };
static atomic_uint slow_calls;
static void slow_spin(void)
{
    if (atomic_fetch_add(&slow_calls, 1) % SLOW_EVERY != SLOW_EVERY - 1)
        return;
    uint64_t t0 = sm_plat_cycles();
    while (sm_plat_cycles() - t0 < SLOW_CYCLES)
        ;
}

/* The slow layer: the fake, with a spin on some mallocs. */
#define SM_LAYER slow
#define SM_NEXT fk
enum { slow_thread_safe = 1, slow_min_align = 16, slow_zeroed = 0 };
static inline int slow_create(void) { return fk_create(); }
static inline void *slow_alloc(sm_mctx_t *c)
{
    slow_spin();
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

#define SM_LAYER ws1
#define SM_NEXT slow
#define SM_OPT_SAMPLE_EVERY 1
#define SM_OPT_REPORT_AT_EXIT 0
#include <sunmao/layers/addon/wcet_stat.h>

#define SM_LAYER ws8
#define SM_NEXT fk
#define SM_OPT_REPORT_AT_EXIT 0
#include <sunmao/layers/addon/wcet_stat.h>

#define SM_LAYER wsr
#define SM_NEXT fk
#include <sunmao/layers/addon/wcet_stat.h>

#define PAIRS(L, n)                                                                                \
    for (unsigned i_ = 0; i_ < (n); i_++) {                                                        \
        sm_mctx_t a_ = sm_mctx_alloc(64 + i_ % 200, 16, 0);                                        \
        void *p_ = L##_alloc(&a_);                                                                 \
        CHECK(p_ != NULL);                                                                         \
        memset(p_, 0x5a, 64);                                                                      \
        sm_mctx_t f_ = sm_mctx_block(p_, 0, 0);                                                    \
        L##_free(&f_);                                                                             \
    }

static void buckets_cover_every_value(void)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 4000; i++, v = v * 3 / 2 + 1 + (i & 7)) {
        unsigned b = ws1_bucket_of(v);
        CHECKF(b < ws1_buckets && ws1_bucket_top(b) >= v && (b == 0 || ws1_bucket_top(b - 1) < v),
               "value %llu in bucket %u [%llu, %llu]", (unsigned long long)v, b,
               (unsigned long long)(b ? ws1_bucket_top(b - 1) + 1 : 0), (unsigned long long)ws1_bucket_top(b));
        if (b == ws1_buckets - 1)
            break;
    }
    CHECK(ws1_bucket_of(UINT64_MAX) == ws1_buckets - 1 && ws1_bucket_top(ws1_buckets - 1) == UINT64_MAX);
}

static void percentiles_show_the_slow_requests(void)
{
    enum { N = 20000 };
    CHECK(ws1_create() == 0);
    PAIRS(ws1, N)
    ws1_wcet_flush();
    CHECKF(ws1_wcet_samples(0) == N && ws1_wcet_samples(1) == N, "samples %llu / %llu of %d",
           (unsigned long long)ws1_wcet_samples(0), (unsigned long long)ws1_wcet_samples(1), N);
    uint64_t p90 = ws1_wcet_quantile(0, 900000), p999 = ws1_wcet_quantile(0, 999000), f999 = ws1_wcet_quantile(1, 999000);
    CHECKF(p90 < SLOW_CYCLES / 4 && p999 >= SLOW_CYCLES && f999 < SLOW_CYCLES,
           "malloc p90 %llu, p99.9 %llu, free p99.9 %llu cycles (slow: %d)", (unsigned long long)p90,
           (unsigned long long)p999, (unsigned long long)f999, SLOW_CYCLES);
    char text[512];
    size_t len = ws1_wcet_format(text, sizeof text);
    CHECKF(len == strlen(text) && strstr(text, "wcet_stat ws1 malloc: 20000 samples, ns p90 ") &&
               strstr(text, "wcet_stat ws1 free: 20000 samples") && strstr(text, " p99.9999 ") &&
               strstr(text, "*\n"),
           "report: %s", text);
}

static void *pairs_thread(void *arg)
{
    (void)arg;
    PAIRS(ws8, 8000)
    return NULL;
}

/* One in eight of each operation; exited threads' counts are kept. */
static void sampling_and_exited_threads(void)
{
    CHECK(ws8_create() == 0);
    PAIRS(ws8, 800)
    ws8_wcet_flush();
    CHECK(ws8_wcet_samples(0) == 100 && ws8_wcet_samples(1) == 100);
    check_threads(4, pairs_thread);
    CHECKF(ws8_wcet_samples(0) == 100 + 4 * 1000 && ws8_wcet_samples(1) == 100 + 4 * 1000, "samples %llu / %llu",
           (unsigned long long)ws8_wcet_samples(0), (unsigned long long)ws8_wcet_samples(1));
    CHECK(fk_obj.bad_frees == 0);
}

/* SM_OPT_REPORT_AT_EXIT: a process that exits normally prints its report on stderr. */
static void report_at_exit(void)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (wsr_create() != 0)
            _exit(3);
        PAIRS(wsr, 80)
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
    CHECKF(strstr(text, "wcet_stat wsr malloc: 10 samples, ns p90 ") && strstr(text, "wcet_stat wsr free: 10 samples"),
           "child's stderr: %s", text);
}

int main(void)
{
    check_begin("wcet_stat");
    RUN_CASE(buckets_cover_every_value);
    RUN_CASE(percentiles_show_the_slow_requests);
    RUN_CASE(sampling_and_exited_threads);
    RUN_CASE(report_at_exit);
    return check_end();
}
