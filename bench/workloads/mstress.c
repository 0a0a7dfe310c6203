/* mstress: objects migrate between threads and survive thread exit. A shared table of
 * slots is updated with atomic exchanges by short-lived threads; each thread takes
 * objects allocated by others (often by threads that already exited), verifies them,
 * frees some, keeps some in a private list for a while, and leaves objects of its own
 * in the table when it exits. Sizes are mostly small with occasional large ones.
 * usage: mstress [threads=2] [rounds=20] [slots=20000] [ops_per_thread=100000] */
#include "common.h"

typedef struct obj { uint32_t n; uint32_t pad; uint64_t tag; } obj;   /* header of every block */
static _Atomic(obj *) *table;
static long T, R, K, OPS;
static atomic_long live;

static obj *make(uint64_t *rs) {
    uint64_t r = rnd(rs);
    uint32_t n = (r % 100 == 0) ? (uint32_t)rnd_range(rs, 4096, 256 * 1024) : (uint32_t)rnd_range(rs, 16, 512);
    obj *o = xmalloc(n);
    o->n = n; o->tag = rnd(rs);
    ((unsigned char *)o)[n - 1] = (unsigned char)o->tag;
    atomic_fetch_add(&live, 1);
    return o;
}
static void kill_obj(obj *o) {
    if (((unsigned char *)o)[o->n - 1] != (unsigned char)o->tag) FAIL("mstress: corrupted object");
    free(o);
    atomic_fetch_sub(&live, 1);
}

static void *work(void *a) {
    uint64_t rs = seed_for((uint64_t)(uintptr_t)a);
    obj *keep[64];
    int nk = 0;
    for (long i = 0; i < OPS; i++) {
        long j = (long)(rnd(&rs) % (uint64_t)K);
        obj *o = atomic_exchange(&table[j], make(&rs));
        if (!o) continue;
        if (nk < 64 && (rnd(&rs) & 3) == 0) keep[nk++] = o;   /* hold a foreign object */
        else kill_obj(o);
        if (nk == 64) { while (nk) kill_obj(keep[--nk]); }
    }
    /* leave the held objects to whoever comes next */
    while (nk) {
        obj *o = keep[--nk];
        long j = (long)(rnd(&rs) % (uint64_t)K);
        obj *old = atomic_exchange(&table[j], o);
        if (old) kill_obj(old);
    }
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 2); R = arg_l(argc, argv, 2, 20); K = arg_l(argc, argv, 3, 20000); OPS = arg_l(argc, argv, 4, 100000);
    table = calloc((size_t)K, sizeof *table);
    pthread_t *th = calloc((size_t)T, sizeof *th);
    for (long r = 0; r < R; r++) {
        for (long i = 0; i < T; i++) pthread_create(&th[i], NULL, work, (void *)(uintptr_t)(r * T + i + 1));
        for (long i = 0; i < T; i++) pthread_join(th[i], NULL);
    }
    long n = 0;
    for (long j = 0; j < K; j++) { obj *o = table[j]; if (o) { kill_obj(o); n++; } }
    if (live != 0) FAIL("mstress: %ld objects unaccounted for", (long)live);
    printf("metric survivors %ld\n", n);
    free((void *)table); free(th);
    return 0;
}
