/* Threads by the hundred thousand: usage  thread_churn [threads=100000] [concurrent=8]
 *
 * Creates `threads` threads, `concurrent` at a time; each allocates blocks of every range (small,
 * medium, large), checks and frees most of them itself, and leaves one small and one medium block
 * to the main thread, which checks and frees them after the thread has exited (objects outliving
 * their thread). A thread's caches and per-thread state must go back when it exits: the resident
 * size after all the threads may exceed the resident size after the first tenth of them by at
 * most 24 MiB (a leak of one page per thread would be 390 MiB at 100,000).
 * Cases: blocks_intact (every block kept its pattern), outlived_intact (the blocks left behind,
 * checked by the main thread), rss_bounded. Plain malloc & co.: run it under LD_PRELOAD. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/check.h"

enum { LEFT = 2 };
struct work {
    unsigned id;
    void *left[LEFT];
    size_t left_size[LEFT];
    int bad;
};

static const size_t sizes[] = { 16, 48, 130, 700, 3000, 12000, 70000, 300000, 3u << 20 };

static void *thread_main(void *arg)
{
    struct work *w = arg;
    void *p[sizeof sizes / sizeof *sizes];
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i] + w->id % 64;
        p[i] = malloc(n);
        if (!p[i]) {
            w->bad++;
            continue;
        }
        check_fill(p[i], n < 4096 ? n : 4096, w->id + i);
    }
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i] + w->id % 64;
        if (!p[i])
            continue;
        if (!check_verify(p[i], n < 4096 ? n : 4096, w->id + i))
            w->bad++;
        if (i == 1 || i == 5) { /* one small, one medium: the main thread frees them later */
            unsigned k = i == 1 ? 0 : 1;
            w->left[k] = p[i];
            w->left_size[k] = n < 4096 ? n : 4096;
        } else {
            free(p[i]);
        }
    }
    return NULL;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static unsigned total = 100000, concurrent = 8;
static int bad_blocks, bad_outlived;
static long rss_early, rss_end;

static void churn(void)
{
    struct work *w = calloc(concurrent, sizeof *w);
    pthread_t *t = calloc(concurrent, sizeof *t);
    CHECK(w && t);
    if (!w || !t)
        return;
    for (unsigned started = 0; started < total; started += concurrent) {
        unsigned n = total - started < concurrent ? total - started : concurrent;
        for (unsigned i = 0; i < n; i++) {
            memset(&w[i], 0, sizeof w[i]);
            w[i].id = started + i;
            if (pthread_create(&t[i], NULL, thread_main, &w[i]) != 0) {
                CHECKF(0, "pthread_create failed at thread %u", started + i);
                return;
            }
        }
        for (unsigned i = 0; i < n; i++) {
            pthread_join(t[i], NULL);
            bad_blocks += w[i].bad;
            for (unsigned k = 0; k < LEFT; k++) {
                if (!w[i].left[k])
                    continue;
                if (!check_verify(w[i].left[k], w[i].left_size[k], w[i].id + (k ? 5 : 1)))
                    bad_outlived++;
                free(w[i].left[k]);
            }
        }
        if (started < total / 10 && started + concurrent >= total / 10)
            rss_early = rss_kib();
    }
    rss_end = rss_kib();
    free(w);
    free(t);
}

static void blocks_intact(void) { CHECKF(bad_blocks == 0, "%d blocks damaged or not served", bad_blocks); }
static void outlived_intact(void) { CHECKF(bad_outlived == 0, "%d blocks left by exited threads damaged", bad_outlived); }
static void rss_bounded(void)
{
    printf("# %u threads: RSS %ld KiB after the first tenth, %ld KiB at the end\n", total, rss_early, rss_end);
    CHECKF(rss_end <= rss_early + 24 * 1024, "RSS grew from %ld KiB to %ld KiB over %u threads", rss_early, rss_end,
           total);
}

int main(int argc, char **argv)
{
    check_begin("thread_churn");
    if (argc > 1)
        total = (unsigned)strtoul(argv[1], NULL, 10);
    if (argc > 2)
        concurrent = (unsigned)strtoul(argv[2], NULL, 10);
    if (total < 10 * concurrent || concurrent == 0) {
        fprintf(stderr, "usage: thread_churn [threads >= 10 x concurrent] [concurrent >= 1]\n");
        return 2;
    }
    churn();
    RUN_CASE(blocks_intact);
    RUN_CASE(outlived_intact);
    RUN_CASE(rss_bounded);
    return check_end();
}
