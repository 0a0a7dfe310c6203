/* glibc: shapes of glibc's own malloc benchmarks.
 * simple: one thread, bursts of N same-size blocks allocated then freed, over sizes 16..1024.
 * thread: T threads, each replaces random entries of a private working set with blocks
 *         of skewed random sizes (mostly small).
 * usage: glibc simple [rounds=2000] [burst=1000]
 *        glibc thread [threads=2] [ops_per_thread=4000000] [working_set=1000] */
#include "common.h"

static long T, OPS, W;
typedef struct { long id; } targ;

static void *thread_work(void *a) {
    targ *t = a;
    uint64_t rs = seed_for((uint64_t)t->id);
    void **p = calloc((size_t)W, sizeof *p);
    uint32_t *n = calloc((size_t)W, sizeof *n);
    for (long i = 0; i < OPS; i++) {
        long j = (long)(rnd(&rs) % (uint64_t)W);
        if (p[j]) { if (!stamp_ok(p[j], n[j], (uint64_t)j)) FAIL("glibc-thread: corrupted block"); free(p[j]); }
        uint64_t r = rnd(&rs);
        n[j] = (uint32_t)(4 + (r >> 20) % (8u << (r % 10)));   /* 4 .. ~4 KiB, skewed small */
        p[j] = xmalloc(n[j]);
        stamp(p[j], n[j], (uint64_t)j);
    }
    for (long j = 0; j < W; j++) if (p[j]) free(p[j]);
    free(p); free(n);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) FAIL("usage: glibc simple|thread ...");
    if (!strcmp(argv[1], "simple")) {
        long R = arg_l(argc, argv, 2, 2000), N = arg_l(argc, argv, 3, 1000);
        void **p = calloc((size_t)N, sizeof *p);
        for (long r = 0; r < R; r++) {
            size_t sz = 16 + (size_t)(r % 64) * 16;
            for (long i = 0; i < N; i++) { p[i] = xmalloc(sz); stamp(p[i], sz, (uint64_t)i); }
            for (long i = 0; i < N; i++) { if (!stamp_ok(p[i], sz, (uint64_t)i)) FAIL("glibc-simple: corrupted block"); free(p[i]); }
        }
        free(p);
        return 0;
    }
    T = arg_l(argc, argv, 2, 2); OPS = arg_l(argc, argv, 3, 4000000); W = arg_l(argc, argv, 4, 1000);
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) ta[i].id = i;
    run_threads(T, thread_work, ta, sizeof *ta);
    free(ta);
    return 0;
}
