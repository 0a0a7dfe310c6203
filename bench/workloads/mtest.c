/* mtest: malloc-test-style scaling. Each of T threads does the same fixed amount of work
 * (weak scaling): it keeps a small ring of blocks of random sizes and replaces the oldest.
 * An allocator that scales keeps the elapsed time flat as T grows.
 * usage: mtest [threads=1] [ops_per_thread=5000000] [ring=64] [max=512] */
#include "common.h"

static long T, OPS, RING, MAXS;
typedef struct { long id; double secs; } targ;

static void *work(void *a) {
    targ *t = a;
    uint64_t rs = seed_for((uint64_t)t->id + 7);
    void **p = calloc((size_t)RING, sizeof *p);
    uint32_t *n = calloc((size_t)RING, sizeof *n);
    double t0 = now_s();
    for (long i = 0; i < OPS; i++) {
        long j = i % RING;
        if (p[j]) { if (((unsigned char *)p[j])[0] != (unsigned char)j) FAIL("mtest: corrupted block"); free(p[j]); }
        n[j] = (uint32_t)rnd_range(&rs, 8, MAXS);
        p[j] = xmalloc(n[j]);
        ((unsigned char *)p[j])[0] = (unsigned char)j;
    }
    t->secs = now_s() - t0;
    for (long j = 0; j < RING; j++) free(p[j]);
    free(p); free(n);
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 1); OPS = arg_l(argc, argv, 2, 5000000); RING = arg_l(argc, argv, 3, 64); MAXS = arg_l(argc, argv, 4, 512);
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) ta[i].id = i;
    double t0 = now_s();
    run_threads(T, work, ta, sizeof *ta);
    double el = now_s() - t0;
    printf("metric mops_per_s %.3f\n", (double)T * OPS / el / 1e6);
    free(ta);
    return 0;
}
