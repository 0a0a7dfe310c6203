/* micro: malloc/free pairs on T threads; reports the fast-path pair cost in ns.
 * usage: micro [threads=1] [pairs_per_thread=10000000] [size=64] */
#include "common.h"

static long N, S;
typedef struct { long id; double secs; uint64_t sum; } targ;

static void *work(void *a) {
    targ *t = a;
    uint64_t sum = 0;
    double t0 = now_s();
    for (long i = 0; i < N; i++) {
        size_t sz = (size_t)S + (size_t)(i & 7) * 8;  /* a few neighbouring size classes */
        volatile unsigned char *p = xmalloc(sz);
        p[0] = (unsigned char)i;
        p[sz - 1] = (unsigned char)(i >> 8);
        sum += p[0] + p[sz - 1];
        free((void *)p);
    }
    t->secs = now_s() - t0;
    t->sum = sum;
    return NULL;
}

int main(int argc, char **argv) {
    long T = arg_l(argc, argv, 1, 1);
    N = arg_l(argc, argv, 2, 10000000);
    S = arg_l(argc, argv, 3, 64);
    if (T < 1 || N < 1 || S < 1) FAIL("bad arguments");
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) ta[i].id = i;
    run_threads(T, work, ta, sizeof *ta);
    uint64_t expect = 0;
    for (long i = 0; i < N; i++) expect += (unsigned char)i + (unsigned char)(i >> 8);
    double ns = 0;
    for (long i = 0; i < T; i++) {
        if (ta[i].sum != expect) FAIL("thread %ld checksum %llu != %llu", i, (unsigned long long)ta[i].sum, (unsigned long long)expect);
        ns += ta[i].secs * 1e9 / N;
    }
    printf("metric ns_per_pair %.2f\n", ns / T);
    free(ta);
    return 0;
}
