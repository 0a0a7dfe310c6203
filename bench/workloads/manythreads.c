/* manythreads: many threads alive at once, each after a burst of small objects — the memory that
 * per-thread caches hold when a process has more threads than cores (servers with thread pools).
 * Each round starts T threads; each allocates about `bytes` of objects of 16..4096 bytes (stamped),
 * frees them, does it again with half as many, then waits until every thread of the round is done,
 * so all caches are full at the same moment. Thread 0 reads the resident set there.
 * Metric: idle_rss_kib, the largest such reading over the rounds.
 * usage: manythreads [threads=64] [rounds=3] [bytes=4194304] */
#include "common.h"

static long T, ROUNDS, BYTES;
static pthread_barrier_t all_done;
static long idle_rss_kib;

static long rss_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void burst(uint64_t *seed, long bytes)
{
    size_t cap = (size_t)bytes / 16 + 1, n = 0;
    void **p = xmalloc(cap * sizeof *p);
    size_t *sz = xmalloc(cap * sizeof *sz);
    for (long used = 0; used < bytes && n < cap; n++) {
        sz[n] = (size_t)rnd_range(seed, 16, (n & 7) ? 256 : 4096);
        p[n] = xmalloc(sz[n]);
        stamp(p[n], sz[n], (uint64_t)n * 31 + 7);
        used += (long)sz[n];
    }
    for (size_t i = 0; i < n; i++) {
        if (!stamp_ok(p[i], sz[i], (uint64_t)i * 31 + 7)) FAIL("object %zu of %zu bytes overwritten", i, sz[i]);
        free(p[i]);
    }
    free(sz);
    free(p);
}

static void *work(void *arg)
{
    long id = *(long *)arg;
    uint64_t seed = seed_for((uint64_t)id);
    burst(&seed, BYTES);
    burst(&seed, BYTES / 2);
    pthread_barrier_wait(&all_done);
    if (id == 0) {
        long kib = rss_kib();
        if (kib > idle_rss_kib) idle_rss_kib = kib;
    }
    pthread_barrier_wait(&all_done); /* nobody exits before the reading */
    return NULL;
}

int main(int argc, char **argv)
{
    T = arg_l(argc, argv, 1, 64);
    ROUNDS = arg_l(argc, argv, 2, 3);
    BYTES = arg_l(argc, argv, 3, 4 << 20);
    if (T < 1 || ROUNDS < 1 || BYTES < 16) FAIL("bad arguments");
    long *ids = xmalloc((size_t)T * sizeof *ids);
    for (long i = 0; i < T; i++) ids[i] = i;
    for (long r = 0; r < ROUNDS; r++) {
        if (pthread_barrier_init(&all_done, NULL, (unsigned)T)) FAIL("barrier");
        run_threads(T, work, ids, sizeof *ids);
        pthread_barrier_destroy(&all_done);
    }
    free(ids);
    printf("metric idle_rss_kib %ld\n", idle_rss_kib);
    return 0;
}
