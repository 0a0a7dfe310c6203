/* wcet: tail latency of malloc and free (after the Mortise paper's wcet_test, §4.2-4.3).
 * One thread per hardware thread, each pinned to its CPU. Thread i allocates batches of
 * size classes 16..2048 whose length depends on i (asymmetric load), shuffles them, frees
 * half locally and sends the other half to thread i+1, which frees them (shuffled remote
 * frees; threads resynchronise every 16 rounds). One call in 8 is timed with the cycle counter (rdtsc). Prints percentiles
 * 90 .. 99.9999 of the sampled cycles for malloc and for free.
 * usage: wcet [rounds=200] [batch=2000] [threads=ncpus] */
#include "common.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t cycles(void) { _mm_lfence(); uint64_t t = __rdtsc(); _mm_lfence(); return t; }
#define CLOCK_NAME "rdtsc"
#else
static inline uint64_t cycles(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000ull + ts.tv_nsec; }
#define CLOCK_NAME "ns"
#endif

typedef struct { void *p; uint32_t n; } blk;
typedef struct {
    long id;
    pthread_mutex_t mu;
    blk *inbox; long nin, cap;          /* blocks other threads ask us to free */
    uint32_t *ms, *fs; long nm, nf, capm, capf;
} targ;
static targ *ta;
static long T, R, B;
static pthread_barrier_t bar;

static void rec(uint32_t **v, long *n, long *cap, uint64_t c) {
    if (*n == *cap) { *cap = *cap ? *cap * 2 : 4096; *v = realloc(*v, (size_t)*cap * sizeof **v); if (!*v) FAIL("realloc samples"); }
    (*v)[(*n)++] = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}
static void timed_free(targ *t, blk *b, long k) {
    if (((unsigned char *)b->p)[b->n - 1] != (unsigned char)b->n) FAIL("wcet: corrupted block");
    if ((k & 7) == 0) { uint64_t c0 = cycles(); free(b->p); uint64_t c1 = cycles(); rec(&t->fs, &t->nf, &t->capf, c1 - c0); }
    else free(b->p);
}

static void *work(void *a) {
    targ *t = a;
    cpu_set_t set; CPU_ZERO(&set); CPU_SET((int)(t->id % ncpus()), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);   /* best effort */
    uint64_t rs = seed_for((uint64_t)t->id + 11);
    long mine = B * (1 + (t->id % 3)) / 2 + 1;                      /* asymmetric batches */
    blk *v = xmalloc((size_t)(B * 2 + 2) * sizeof *v);
    blk *tmp = NULL; long tcap = 0;
    targ *next = &ta[(t->id + 1) % T];
    pthread_barrier_wait(&bar);
    long k = 0;
    for (long r = 0; r < R; r++) {
        for (long i = 0; i < mine; i++, k++) {
            uint32_t n = (uint32_t)(16 << (rnd(&rs) % 8));                /* 16 .. 2048 */
            n += (uint32_t)(rnd(&rs) % 2) * (n / 2);                        /* and halfway classes */
            if (n > 2048) n = 2048;
            void *p;
            if ((k & 7) == 0) { uint64_t c0 = cycles(); p = malloc(n); uint64_t c1 = cycles(); rec(&t->ms, &t->nm, &t->capm, c1 - c0); }
            else p = malloc(n);
            if (!p) FAIL("wcet: malloc(%u) failed", n);
            ((unsigned char *)p)[n - 1] = (unsigned char)n;
            v[i].p = p; v[i].n = n;
        }
        for (long i = mine - 1; i > 0; i--) { long j = (long)(rnd(&rs) % (uint64_t)(i + 1)); blk x = v[i]; v[i] = v[j]; v[j] = x; }
        long half = mine / 2;
        if (T > 1) {   /* send half to the next thread */
            pthread_mutex_lock(&next->mu);
            if (next->nin + half > next->cap) { next->cap = (next->nin + half) * 2; next->inbox = realloc(next->inbox, (size_t)next->cap * sizeof(blk)); if (!next->inbox) FAIL("realloc inbox"); }
            memcpy(next->inbox + next->nin, v, (size_t)half * sizeof(blk));
            next->nin += half;
            pthread_mutex_unlock(&next->mu);
        } else half = 0;
        for (long i = half; i < mine; i++, k++) timed_free(t, &v[i], k);
        /* free what others sent us */
        pthread_mutex_lock(&t->mu);
        long n = t->nin;
        if (n > tcap) { tcap = n * 2; tmp = realloc(tmp, (size_t)tcap * sizeof(blk)); if (!tmp) FAIL("realloc tmp"); }
        memcpy(tmp, t->inbox, (size_t)n * sizeof(blk));
        t->nin = 0;
        pthread_mutex_unlock(&t->mu);
        for (long i = 0; i < n; i++, k++) timed_free(t, &tmp[i], k);
        /* resynchronise every 16 rounds so the faster threads cannot pile up an unbounded
         * backlog in a slower thread's inbox (the remote-free queue stays bounded) */
        if ((r & 15) == 15) pthread_barrier_wait(&bar);
    }
    pthread_barrier_wait(&bar);
    pthread_mutex_lock(&t->mu);
    for (long i = 0; i < t->nin; i++, k++) timed_free(t, &t->inbox[i], k);
    t->nin = 0;
    pthread_mutex_unlock(&t->mu);
    free(v); free(tmp);
    return NULL;
}

static int cmp32(const void *a, const void *b) { uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b; return (x > y) - (x < y); }
static void report(const char *what, uint32_t *v, long n) {
    static const double pc[] = {90, 99, 99.9, 99.99, 99.999, 99.9999};
    static const char *nm[] = {"p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999"};
    qsort(v, (size_t)n, sizeof *v, cmp32);
    printf("metric %s_samples %ld\n", what, n);
    for (int i = 0; i < 6; i++) {
        long idx = (long)(pc[i] / 100.0 * (double)n);
        if (idx >= n) idx = n - 1;
        printf("metric %s_%s %u\n", what, nm[i], n ? v[idx] : 0);
    }
    printf("metric %s_max %u\n", what, n ? v[n - 1] : 0);
}

int main(int argc, char **argv) {
    R = arg_l(argc, argv, 1, 200); B = arg_l(argc, argv, 2, 2000); T = arg_l(argc, argv, 3, ncpus());
    if (T < 1 || B < 2) FAIL("bad arguments");
    ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) { ta[i].id = i; pthread_mutex_init(&ta[i].mu, NULL); }
    pthread_barrier_init(&bar, NULL, (unsigned)T);
    run_threads(T, work, ta, sizeof *ta);
    long nm = 0, nf = 0;
    for (long i = 0; i < T; i++) { nm += ta[i].nm; nf += ta[i].nf; }
    uint32_t *m = xmalloc((size_t)(nm + 1) * 4), *f = xmalloc((size_t)(nf + 1) * 4);
    nm = nf = 0;
    for (long i = 0; i < T; i++) {
        memcpy(m + nm, ta[i].ms, (size_t)ta[i].nm * 4); nm += ta[i].nm;
        memcpy(f + nf, ta[i].fs, (size_t)ta[i].nf * 4); nf += ta[i].nf;
        free(ta[i].ms); free(ta[i].fs); free(ta[i].inbox);
    }
    printf("metric clock_%s 1\n", CLOCK_NAME);
    report("malloc", m, nm);
    report("free", f, nf);
    free(m); free(f); free(ta);
    return 0;
}
