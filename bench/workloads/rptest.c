/* rptest: mixed aligned allocations (posix_memalign, aligned_alloc, memalign, calloc,
 * malloc) of 16 B .. 64 KiB with alignments 16 .. 4096, with cross-thread frees through
 * a shared exchange table. Checks alignment, calloc zeroing and block contents.
 * usage: rptest [threads=2] [ops_per_thread=1000000] [slots=2048] */
#include "common.h"
#include <malloc.h>

typedef struct { void *p; uint32_t n; uint32_t align; uint64_t tag; int api; } blk;
static const char *api_name[] = {"posix_memalign", "aligned_alloc", "memalign", "calloc", "malloc"};
static long T, OPS, K;
static blk *xchg;             /* shared table, one lock per stripe */
static pthread_mutex_t locks[64];

static void check_free(blk *b) {
    if (((uintptr_t)b->p & (b->align - 1)) != 0) FAIL("rptest: %s(%u, %u) returned a block misaligned by %u", api_name[b->api], b->align, b->n, (unsigned)((uintptr_t)b->p & (b->align - 1)));
    if (!stamp_ok(b->p, b->n, b->tag)) FAIL("rptest: corrupted block");
    free(b->p);
}

static void *work(void *a) {
    uint64_t rs = seed_for((uint64_t)(uintptr_t)a);
    for (long i = 0; i < OPS; i++) {
        blk b;
        uint64_t r = rnd(&rs);
        b.n = (uint32_t)((r % 16 == 0) ? rnd_range(&rs, 4096, 65536) : rnd_range(&rs, 16, 1024));
        b.align = 16u << (r >> 8) % 9;   /* 16 .. 4096 */
        b.tag = rnd(&rs);
        void *p = NULL;
        b.api = (int)((r >> 16) % 5);
        switch (b.api) {
        case 0: if (posix_memalign(&p, b.align, b.n)) p = NULL; break;
        case 1: p = aligned_alloc(b.align, (b.n + b.align - 1) / b.align * b.align); break;
        case 2: p = memalign(b.align, b.n); break;
        case 3: p = calloc(1, b.n); b.align = 16;
                if (p) for (uint32_t k = 0; k < b.n; k += 61) if (((unsigned char *)p)[k]) FAIL("rptest: calloc not zeroed");
                break;
        default: p = malloc(b.n); b.align = 16; break;
        }
        if (!p) FAIL("rptest: allocation of %u (align %u) failed", b.n, b.align);
        b.p = p;
        stamp(p, b.n, b.tag);
        long j = (long)(rnd(&rs) % (uint64_t)K);
        pthread_mutex_t *m = &locks[j % 64];
        pthread_mutex_lock(m);
        blk old = xchg[j];
        xchg[j] = b;
        pthread_mutex_unlock(m);
        if (old.p) check_free(&old);
    }
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 2); OPS = arg_l(argc, argv, 2, 1000000); K = arg_l(argc, argv, 3, 2048);
    for (int i = 0; i < 64; i++) pthread_mutex_init(&locks[i], NULL);
    xchg = calloc((size_t)K, sizeof *xchg);
    pthread_t *th = calloc((size_t)T, sizeof *th);
    for (long i = 0; i < T; i++) pthread_create(&th[i], NULL, work, (void *)(uintptr_t)(i + 1));
    for (long i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (long j = 0; j < K; j++) if (xchg[j].p) check_free(&xchg[j]);
    free(xchg); free(th);
    return 0;
}
