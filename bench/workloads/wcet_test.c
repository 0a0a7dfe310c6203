/* wcet_test: tail latency of malloc and free, the Mortise paper's wcet_test (§4.2-4.3).
 *
 * One thread per hardware thread, each pinned to its own CPU (the process's allowed CPUs, in
 * order). Each thread performs about `ops` operations (a malloc or a free each; the paper: 10^7),
 * split evenly over eight groups, one size class per group: 16, 32, 64, ..., 2048 bytes. A group is
 * a number of rounds; in a round
 *   1. every thread allocates a batch of the group's size, filling every block with a pattern
 *      word; batches are asymmetric: thread t's is (T - t) / T of the most a thread may hold live,
 *      8 MiB (scaled down alike for all threads when the group's share of `ops` needs less), so
 *      with 2 threads one allocates twice as much as the other;
 *   2. barrier: the round's objects form one global list. Each thread shuffled its own batch,
 *      and its batch is dealt out in T-1 equal slices, one to every other thread;
 *   3. every thread gathers the slices dealt to it (all allocated by other threads), shuffles them
 *      and frees them, checking each block's pattern first (FAIL on a corrupted block);
 *   4. barrier, next round.
 * With one thread the thread frees its own (shuffled) batch. One malloc in 8 and one free in 8
 * (counted per thread and operation) are timed with the cycle counter (rdtsc between lfences on
 * x86; clock_gettime(CLOCK_MONOTONIC) elsewhere). Cycles are converted to nanoseconds with the
 * counter's rate, calibrated against CLOCK_MONOTONIC at start (100 ms). The timed region includes
 * the timer's own cost (printed as timer_overhead_ns, not subtracted).
 *
 * Output ("metric <name> <value>" lines, nanoseconds): malloc_/free_ samples, p90, p99, p99.9,
 * p99.99, p99.999, p99.9999 and max, over all sampled calls of all threads; and threads, pinned,
 * ops_per_thread_min/max, tsc_ghz, timer_overhead_ns.
 * usage: wcet_test [ops_per_thread=10000000] [threads=CPUs this process may run on] [live_mib=8] */
#include "common.h"
#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t ticks(void)
{
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}
#define TICKS_NAME "rdtsc"
#else
static inline uint64_t ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#define TICKS_NAME "clock_gettime"
#endif

enum { GROUPS = 8, MIN_SIZE = 16 };

typedef struct { void *p; uint64_t pat; } obj;

typedef struct {
    long id;
    int cpu;                      /* the CPU it is pinned to, -1 when pinning failed */
    uint64_t rs;
    obj *mine;                    /* this round's batch, in allocation order, then shuffled */
    obj *todo;                    /* the slices dealt to this thread */
    uint32_t *ms, *fs;            /* sampled cycles */
    long nm, nf, capm, capf;
    long ops;
    unsigned km, kf;              /* per-operation sampling counters */
} targ;

static targ *ta;
static long T, R[GROUPS];
static long *batch;               /* batch[g * T + t] */
static pthread_barrier_t bar;
static int *cpus;
static int ncpu_allowed;

static size_t size_of(int g) { return (size_t)MIN_SIZE << g; }

/* Thread j's batch is dealt in T-1 slices; the slice for thread t (t != j) is [lo, hi). */
static void slice_of(long g, long j, long t, long *lo, long *hi)
{
    long b = batch[g * T + j];
    long k = t < j ? t : t - 1; /* t's rank among the threads other than j */
    *lo = b * k / (T - 1);
    *hi = b * (k + 1) / (T - 1);
}

static long todo_count(long g, long t)
{
    if (T == 1)
        return batch[g];
    long n = 0;
    for (long j = 0; j < T; j++) {
        if (j == t)
            continue;
        long lo, hi;
        slice_of(g, j, t, &lo, &hi);
        n += hi - lo;
    }
    return n;
}

static void shuffle(obj *v, long n, uint64_t *rs)
{
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(rnd(rs) % (uint64_t)(i + 1));
        obj x = v[i];
        v[i] = v[j];
        v[j] = x;
    }
}

static void fill(void *p, size_t n, uint64_t pat)
{
    uint64_t *w = p;
    for (size_t i = 0; i < n / 8; i++)
        w[i] = pat;
}

static int intact(const void *p, size_t n, uint64_t pat)
{
    const uint64_t *w = p;
    uint64_t bad = 0;
    for (size_t i = 0; i < n / 8; i++)
        bad |= w[i] ^ pat;
    return bad == 0;
}

static inline uint32_t clamp32(uint64_t c) { return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c; }

static void *work(void *a)
{
    targ *t = a;
    if (t->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            t->cpu = -1;
    }
    pthread_barrier_wait(&bar);
    uint64_t seq = 0;
    for (int g = 0; g < GROUPS; g++) {
        size_t n = size_of(g);
        long b = batch[g * T + t->id];
        for (long r = 0; r < R[g]; r++) {
            /* 1. allocate this thread's batch */
            for (long i = 0; i < b; i++) {
                void *p;
                if ((++t->km & 7) == 0) {
                    uint64_t c0 = ticks();
                    p = malloc(n);
                    uint64_t c1 = ticks();
                    if (t->nm < t->capm)
                        t->ms[t->nm++] = clamp32(c1 - c0);
                } else {
                    p = malloc(n);
                }
                if (!p)
                    FAIL("wcet_test: malloc(%zu) returned NULL", n);
                uint64_t pat = (++seq * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)t->id << 56) ^ (uint64_t)(uintptr_t)p;
                fill(p, n, pat);
                t->mine[i].p = p;
                t->mine[i].pat = pat;
            }
            t->ops += b;
            shuffle(t->mine, b, &t->rs);
            /* 2. the round's objects are all allocated: the global list */
            pthread_barrier_wait(&bar);
            /* 3. gather the slices the other threads dealt to us, shuffle, check and free */
            long m = 0;
            if (T == 1) {
                memcpy(t->todo, t->mine, (size_t)b * sizeof(obj));
                m = b;
            } else {
                for (long j = 0; j < T; j++) {
                    if (j == t->id)
                        continue;
                    long lo, hi;
                    slice_of(g, j, t->id, &lo, &hi);
                    memcpy(t->todo + m, ta[j].mine + lo, (size_t)(hi - lo) * sizeof(obj));
                    m += hi - lo;
                }
            }
            shuffle(t->todo, m, &t->rs);
            for (long i = 0; i < m; i++) {
                obj *o = &t->todo[i];
                if (!intact(o->p, n, o->pat))
                    FAIL("wcet_test: corrupted block %p of %zu bytes (thread %ld, group %d, round %ld)", o->p, n,
                         t->id, g, r);
                if ((++t->kf & 7) == 0) {
                    uint64_t c0 = ticks();
                    free(o->p);
                    uint64_t c1 = ticks();
                    if (t->nf < t->capf)
                        t->fs[t->nf++] = clamp32(c1 - c0);
                } else {
                    free(o->p);
                }
            }
            t->ops += m;
            /* 4. nobody reads our batch any more once everyone has gathered */
            pthread_barrier_wait(&bar);
        }
    }
    return NULL;
}

static int cmp32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, uint32_t *v, long n, double ns_per_tick)
{
    static const double pc[] = { 90, 99, 99.9, 99.99, 99.999, 99.9999 };
    static const char *nm[] = { "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999" };
    qsort(v, (size_t)n, sizeof *v, cmp32);
    printf("metric %s_samples %ld\n", what, n);
    for (int i = 0; i < 6; i++) {
        /* nearest rank: the smallest value with at least pc% of the samples at or below it */
        long idx = (long)ceil(pc[i] / 100.0 * (double)n) - 1;
        if (idx < 0)
            idx = 0;
        if (idx >= n)
            idx = n - 1;
        printf("metric %s_%s %.1f\n", what, nm[i], n ? v[idx] * ns_per_tick : 0.0);
    }
    printf("metric %s_max %.1f\n", what, n ? v[n - 1] * ns_per_tick : 0.0);
}

/* Ticks per nanosecond, against CLOCK_MONOTONIC over about 100 ms. */
static double calibrate(void)
{
#if defined(__x86_64__) || defined(__i386__)
    double s0 = now_s();
    uint64_t c0 = ticks();
    struct timespec d = { 0, 100000000 };
    while (nanosleep(&d, &d) != 0)
        ;
    uint64_t c1 = ticks();
    double s1 = now_s();
    double ghz = (double)(c1 - c0) / ((s1 - s0) * 1e9);
    if (!(ghz > 0.01))
        FAIL("wcet_test: cannot calibrate the cycle counter");
    return ghz;
#else
    return 1.0;
#endif
}

int main(int argc, char **argv)
{
    long ops = arg_l(argc, argv, 1, 10000000);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        ncpu_allowed = CPU_COUNT(&allowed);
    T = arg_l(argc, argv, 2, ncpu_allowed > 0 ? ncpu_allowed : ncpus());
    long live_mib = arg_l(argc, argv, 3, 8);
    if (ops < 16 * GROUPS || T < 1 || T > 1024 || live_mib < 1)
        FAIL("wcet_test: bad arguments (usage: wcet_test [ops_per_thread] [threads] [live_mib])");
    cpus = xmalloc((size_t)T * sizeof *cpus);
    {
        int list[CPU_SETSIZE], k = 0;
        for (int c = 0; c < CPU_SETSIZE && ncpu_allowed > 0; c++)
            if (CPU_ISSET(c, &allowed))
                list[k++] = c;
        for (long t = 0; t < T; t++)
            cpus[t] = k ? list[t % k] : -1;
    }

    /* The plan: per group, the rounds and each thread's batch. The group's share of a thread's
     * operations is ops / GROUPS; a round costs a thread its batch (mallocs) and its gathered
     * slices (frees), on average twice the mean batch. */
    batch = xmalloc((size_t)GROUPS * (size_t)T * sizeof *batch);
    long max_batch = 0, max_todo = 0;
    long long mallocs_max = 0, frees_max = 0;
    for (int g = 0; g < GROUPS; g++) {
        long cap = (live_mib << 20) / (long)size_of(g); /* the most one thread may hold live */
        double mean = 0;
        for (long t = 0; t < T; t++)
            mean += (double)(cap * (T - t) / T);
        mean /= (double)T;
        double share = (double)ops / GROUPS;
        R[g] = (long)ceil(share / (2 * mean));
        if (R[g] < 1)
            R[g] = 1;
        double scale = share / (2 * mean * (double)R[g]); /* <= 1: fewer rounds than the cap allows */
        for (long t = 0; t < T; t++) {
            long b = (long)((double)(cap * (T - t) / T) * scale);
            batch[g * T + t] = b < 1 ? 1 : b;
            if (batch[g * T + t] > max_batch)
                max_batch = batch[g * T + t];
        }
    }
    ta = calloc((size_t)T, sizeof *ta);
    if (!ta)
        FAIL("calloc");
    for (long t = 0; t < T; t++) {
        long long nm = 0, nf = 0;
        for (int g = 0; g < GROUPS; g++) {
            long td = todo_count(g, t);
            if (td > max_todo)
                max_todo = td;
            nm += (long long)R[g] * batch[g * T + t];
            nf += (long long)R[g] * td;
        }
        if (nm > mallocs_max)
            mallocs_max = nm;
        if (nf > frees_max)
            frees_max = nf;
        ta[t].capm = (long)(nm / 8 + 2);
        ta[t].capf = (long)(nf / 8 + 2);
    }
    for (long t = 0; t < T; t++) {
        targ *a = &ta[t];
        a->id = t;
        a->cpu = cpus[t];
        a->rs = seed_for((uint64_t)t + 0x5eed);
        /* everything the measured loop needs, allocated and touched now */
        a->mine = xmalloc((size_t)max_batch * sizeof(obj));
        a->todo = xmalloc((size_t)(max_todo + 1) * sizeof(obj));
        a->ms = xmalloc((size_t)a->capm * sizeof(uint32_t));
        a->fs = xmalloc((size_t)a->capf * sizeof(uint32_t));
        memset(a->mine, 0, (size_t)max_batch * sizeof(obj));
        memset(a->todo, 0, (size_t)(max_todo + 1) * sizeof(obj));
        memset(a->ms, 0, (size_t)a->capm * sizeof(uint32_t));
        memset(a->fs, 0, (size_t)a->capf * sizeof(uint32_t));
    }
    double ghz = calibrate();
    double ns_per_tick = 1.0 / ghz;
    uint64_t overhead = UINT64_MAX; /* the timer's own cost: the least an empty timed region takes */
    for (int i = 0; i < 1000; i++) {
        uint64_t c0 = ticks(), c1 = ticks();
        if (c1 - c0 < overhead)
            overhead = c1 - c0;
    }
    pthread_barrier_init(&bar, NULL, (unsigned)T);
    run_threads(T, work, ta, sizeof *ta);

    long nm = 0, nf = 0, pinned = 0, opsmin = -1, opsmax = 0;
    for (long t = 0; t < T; t++) {
        nm += ta[t].nm;
        nf += ta[t].nf;
        pinned += ta[t].cpu >= 0;
        if (opsmin < 0 || ta[t].ops < opsmin)
            opsmin = ta[t].ops;
        if (ta[t].ops > opsmax)
            opsmax = ta[t].ops;
    }
    uint32_t *m = xmalloc((size_t)(nm + 1) * 4), *f = xmalloc((size_t)(nf + 1) * 4);
    nm = nf = 0;
    for (long t = 0; t < T; t++) {
        memcpy(m + nm, ta[t].ms, (size_t)ta[t].nm * 4);
        nm += ta[t].nm;
        memcpy(f + nf, ta[t].fs, (size_t)ta[t].nf * 4);
        nf += ta[t].nf;
        free(ta[t].ms);
        free(ta[t].fs);
        free(ta[t].mine);
        free(ta[t].todo);
    }
    printf("metric clock_%s 1\n", TICKS_NAME);
    printf("metric threads %ld\n", T);
    printf("metric pinned %ld\n", pinned);
    printf("metric ops_per_thread_min %ld\n", opsmin);
    printf("metric ops_per_thread_max %ld\n", opsmax);
    printf("metric tsc_ghz %.4f\n", ghz);
    printf("metric timer_overhead_ns %.1f\n", (double)overhead * ns_per_tick);
    report("malloc", m, nm, ns_per_tick);
    report("free", f, nf, ns_per_tick);
    free(m);
    free(f);
    free(ta);
    free(batch);
    free(cpus);
    return 0;
}
