/* cache: false sharing between threads (cache-thrash / cache-scratch shapes).
 * thrash: each thread repeatedly allocates a small object and writes it many times; an
 *         allocator that hands neighbouring bytes to different threads makes the cache
 *         lines ping-pong between cores.
 * scratch: the main thread allocates one small object per thread; each thread frees the
 *          object it was given (passive false sharing) and then does the thrash loop.
 * usage: cache thrash|scratch [threads=2] [objects=1000] [writes=1000] [size=8] */
#include "common.h"

static long T, NOBJ, W, SZ;
static int scratch;
typedef struct { long id; void *given; uint64_t sum; } targ;

static void *work(void *a) {
    targ *t = a;
    if (scratch) {
        volatile unsigned char *g = t->given;
        for (long j = 0; j < W; j++) g[j % SZ]++;
        free(t->given);
    }
    uint64_t sum = 0;
    for (long i = 0; i < NOBJ; i++) {
        volatile unsigned char *p = xmalloc((size_t)SZ);
        for (long k = 0; k < SZ; k++) p[k] = 0;
        for (long j = 0; j < W; j++) p[j % SZ]++;
        for (long k = 0; k < SZ; k++) sum += p[k];
        free((void *)p);
    }
    t->sum = sum;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) FAIL("usage: cache thrash|scratch [threads] [objects] [writes] [size]");
    scratch = !strcmp(argv[1], "scratch");
    T = arg_l(argc, argv, 2, 2); NOBJ = arg_l(argc, argv, 3, 1000); W = arg_l(argc, argv, 4, 1000); SZ = arg_l(argc, argv, 5, 8);
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) {
        ta[i].id = i;
        if (scratch) { ta[i].given = xmalloc((size_t)SZ); memset(ta[i].given, 0, (size_t)SZ); }
    }
    run_threads(T, work, ta, sizeof *ta);
    /* each object: sum of bytes = W mod 256 per byte slot accumulated -> compute exactly */
    uint64_t per = 0;
    for (long k = 0; k < SZ; k++) { long c = W / SZ + (k < W % SZ); per += (unsigned char)c; }
    for (long i = 0; i < T; i++)
        if (ta[i].sum != per * (uint64_t)NOBJ) FAIL("cache: thread %ld sum mismatch", i);
    free(ta);
    return 0;
}
