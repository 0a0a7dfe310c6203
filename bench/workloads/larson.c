/* larson: server-like churn. Each thread owns a region of slots and replaces random
 * blocks (random sizes); after each round the threads exit and new threads take over
 * the regions of *other* threads, so blocks are freed by threads that did not allocate
 * them (and whose allocator thread state is gone).
 * usage: larson [threads=2] [rounds=10] [slots_per_thread=1000] [ops_per_round=200000] [min=8] [max=1024] */
#include "common.h"

typedef struct { void *p; uint32_t n; uint64_t tag; } slot;
static slot *slots;
static long T, R, K, OPS, MIN, MAX;
typedef struct { long id, round; } targ;

static void *work(void *a) {
    targ *t = a;
    long region = (t->id + t->round) % T;
    slot *s = slots + region * K;
    uint64_t rs = seed_for((uint64_t)(t->id * 1000 + t->round));
    for (long i = 0; i < OPS; i++) {
        slot *x = &s[rnd(&rs) % K];
        if (x->p) {
            if (!stamp_ok(x->p, x->n, x->tag)) FAIL("larson: corrupted block (size %u)", x->n);
            free(x->p);
        }
        x->n = (uint32_t)rnd_range(&rs, MIN, MAX);
        x->tag = rnd(&rs);
        x->p = xmalloc(x->n);
        stamp(x->p, x->n, x->tag);
    }
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 2); R = arg_l(argc, argv, 2, 10); K = arg_l(argc, argv, 3, 1000);
    OPS = arg_l(argc, argv, 4, 200000); MIN = arg_l(argc, argv, 5, 8); MAX = arg_l(argc, argv, 6, 1024);
    slots = calloc((size_t)(T * K), sizeof *slots);
    targ *ta = calloc((size_t)T, sizeof *ta);
    if (!slots || !ta) FAIL("calloc");
    for (long r = 0; r < R; r++) {
        for (long i = 0; i < T; i++) { ta[i].id = i; ta[i].round = r; }
        run_threads(T, work, ta, sizeof *ta);
    }
    long live = 0;
    for (long i = 0; i < T * K; i++)
        if (slots[i].p) {
            if (!stamp_ok(slots[i].p, slots[i].n, slots[i].tag)) FAIL("larson: corrupted block at end");
            free(slots[i].p);
            live++;
        }
    printf("metric live_at_end %ld\n", live);
    free(slots); free(ta);
    return 0;
}
