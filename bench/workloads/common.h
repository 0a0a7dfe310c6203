/* Shared helpers for sunmao's benchmark workloads (our own code).
 * Every workload checks its own result and exits non-zero (status 3) on error,
 * so a broken allocator shows up as FAIL in the harness, never as a time.
 * Extra numbers are printed as lines "metric <name> <value>" on stdout. */
#ifndef SM_BENCH_COMMON_H
#define SM_BENCH_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); exit(3); } while (0)

static inline uint64_t rnd(uint64_t *s) { /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static inline uint64_t rnd_range(uint64_t *s, uint64_t lo, uint64_t hi) { /* [lo, hi] */
    return lo + rnd(s) % (hi - lo + 1);
}
static inline uint64_t seed_for(uint64_t i) { return 0x9E3779B97F4A7C15ULL * (i + 1) | 1; }

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* Positional integer argument i (1-based) with a default. */
static inline long arg_l(int argc, char **argv, int i, long def) {
    return i < argc ? strtol(argv[i], NULL, 0) : def;
}
static inline long ncpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* Stamp a block with a tag at its head, middle and tail; verify it before freeing. */
static inline void stamp(void *p, size_t n, uint64_t tag) {
    unsigned char *b = p;
    if (n >= 16) {
        memcpy(b, &tag, 8);
        b[n / 2] = (unsigned char)(tag >> 8);
        b[n - 1] = (unsigned char)(tag >> 16);
    } else {
        for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(tag + i);
    }
}
static inline int stamp_ok(const void *p, size_t n, uint64_t tag) {
    const unsigned char *b = p;
    if (n >= 16) {
        uint64_t t;
        memcpy(&t, b, 8);
        return t == tag && b[n / 2] == (unsigned char)(tag >> 8) && b[n - 1] == (unsigned char)(tag >> 16);
    }
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(tag + i)) return 0;
    return 1;
}
static inline void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p && n) FAIL("malloc(%zu) returned NULL", n);
    return p;
}

/* Run fn(i) on T threads and join them. */
typedef void *(*thread_fn)(void *);
static inline void run_threads(long T, thread_fn fn, void *args, size_t arg_size) {
    pthread_t *th = calloc((size_t)T, sizeof *th);
    if (!th) FAIL("calloc threads");
    for (long i = 0; i < T; i++)
        if (pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * arg_size)) FAIL("pthread_create");
    for (long i = 0; i < T; i++) pthread_join(th[i], NULL);
    free(th);
}
#endif
