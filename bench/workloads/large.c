/* large: blocks of 1 .. 32 MiB; each is touched on every page, verified and freed,
 * with a few blocks live at a time, on T threads.
 * usage: large [threads=2] [blocks_per_thread=400] [live=4] [max_mib=32] */
#include "common.h"

static long T, NB, LIVE, MAXMIB;
typedef struct { long id; } targ;

static void *work(void *a) {
    targ *t = a;
    uint64_t rs = seed_for((uint64_t)t->id + 100);
    unsigned char **p = calloc((size_t)LIVE, sizeof *p);
    size_t *n = calloc((size_t)LIVE, sizeof *n);
    for (long i = 0; i < NB; i++) {
        long j = i % LIVE;
        if (p[j]) {
            for (size_t k = 0; k < n[j]; k += 4096) if (p[j][k] != (unsigned char)(k >> 12 ^ j)) FAIL("large: corrupted page");
            free(p[j]);
        }
        n[j] = (size_t)rnd_range(&rs, 1 << 20, (uint64_t)MAXMIB << 20);
        p[j] = xmalloc(n[j]);
        for (size_t k = 0; k < n[j]; k += 4096) p[j][k] = (unsigned char)(k >> 12 ^ j);
    }
    for (long j = 0; j < LIVE; j++) free(p[j]);
    free(p); free(n);
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 2); NB = arg_l(argc, argv, 2, 400); LIVE = arg_l(argc, argv, 3, 4); MAXMIB = arg_l(argc, argv, 4, 32);
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) ta[i].id = i;
    run_threads(T, work, ta, sizeof *ta);
    free(ta);
    return 0;
}
