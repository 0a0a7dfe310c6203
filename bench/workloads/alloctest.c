/* alloctest: random replacement in a working set with Pareto-distributed sizes
 * (many small blocks, a heavy tail of big ones), on T threads.
 * usage: alloctest [threads=2] [ops_per_thread=2000000] [slots=4096] [max=65536] */
#include "common.h"
#include <math.h>

static long T, OPS, K, MAXS;
typedef struct { long id; } targ;

static size_t pareto(uint64_t *rs) {
    double u = ((rnd(rs) >> 11) + 1) * (1.0 / 9007199254740993.0);   /* (0,1] */
    double s = 16.0 / pow(u, 1.0 / 1.2);                                /* xm=16, alpha=1.2 */
    return s > (double)MAXS ? (size_t)MAXS : (size_t)s;
}

static void *work(void *a) {
    targ *t = a;
    uint64_t rs = seed_for((uint64_t)t->id);
    void **p = calloc((size_t)K, sizeof *p);
    size_t *n = calloc((size_t)K, sizeof *n);
    for (long i = 0; i < OPS; i++) {
        long j = (long)(rnd(&rs) % (uint64_t)K);
        if (p[j]) {
            if (!stamp_ok(p[j], n[j], (uint64_t)j * 31 + n[j])) FAIL("alloctest: corrupted block");
            free(p[j]);
        }
        n[j] = pareto(&rs);
        p[j] = xmalloc(n[j]);
        stamp(p[j], n[j], (uint64_t)j * 31 + n[j]);
    }
    for (long j = 0; j < K; j++)
        if (p[j]) {
            if (!stamp_ok(p[j], n[j], (uint64_t)j * 31 + n[j])) FAIL("alloctest: corrupted block");
            free(p[j]);
        }
    free(p); free(n);
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 2); OPS = arg_l(argc, argv, 2, 2000000); K = arg_l(argc, argv, 3, 4096); MAXS = arg_l(argc, argv, 4, 65536);
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) ta[i].id = i;
    run_threads(T, work, ta, sizeof *ta);
    free(ta);
    return 0;
}
