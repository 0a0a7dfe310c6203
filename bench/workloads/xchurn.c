/* xchurn: server churn where every object is freed by another thread than the one that
 * allocated it. Each of T threads owns a region of K slots and only it fills them (an empty
 * slot of its own region, picked at random, gets a new object of a random size 16..max,
 * uniform); the other threads empty them: each step a thread also takes the object out of a
 * random slot of another thread's region (atomic exchange) and verifies and frees it. About
 * half the slots are full in the steady state; each thread makes `objects` objects and keeps
 * emptying the others' slots until every thread has made its share; threads live through the
 * whole run, so it is the remote-free path of live heaps (larson's churn stays mostly within
 * a thread).
 * usage: xchurn [threads=2] [objects_per_thread=4000000] [slots_per_thread=2000] [max=4096] */
#include "common.h"

static _Atomic(uint64_t *) *slots;
static long T, STEPS, K, MAXS;
static atomic_long made, freed, nfinished;
typedef struct { long id; } targ;

static size_t size_of(uint64_t tag) { return 16 + (tag >> 16) % (uint64_t)(MAXS - 15); }

static void release(uint64_t *o) {
    uint64_t tag = o[0];
    if (!stamp_ok(o, size_of(tag), tag)) FAIL("xchurn: corrupted object");
    free(o);
}

static void *work(void *a) {
    targ *t = a;
    uint64_t rs = seed_for((uint64_t)t->id + 99);
    long nmade = 0, nfreed = 0;
    _Atomic(uint64_t *) *own = slots + t->id * K;
    int finished = 0, idle = 0;
    while (nmade < STEPS || atomic_load_explicit(&nfinished, memory_order_relaxed) < T) {
        uint64_t r = rnd(&rs);
        long u = (t->id + 1 + (long)((r >> 40) % (uint64_t)(T - 1))) % T;   /* another thread */
        uint64_t *o = atomic_exchange_explicit(&slots[u * K + (long)(r % (uint64_t)K)], NULL, memory_order_acquire);
        int progress = o != NULL;
        if (o) { release(o); nfreed++; }
        _Atomic(uint64_t *) *s = &own[(r >> 20) % (uint64_t)K];
        if (nmade < STEPS && !atomic_load_explicit(s, memory_order_relaxed)) {   /* only this thread fills it */
            uint64_t tag = rnd(&rs);
            size_t n = size_of(tag);
            uint64_t *p = xmalloc(n);
            stamp(p, n, tag);
            progress = 1;
            atomic_store_explicit(s, p, memory_order_release);
            if (++nmade == STEPS && !finished) { finished = 1; atomic_fetch_add(&nfinished, 1); }
        }
        /* nothing to take and nothing to fill: the others are not running (more threads than
         * cores, or done); give them the CPU rather than spin */
        if (progress) idle = 0;
        else if (++idle >= 64) { idle = 0; sched_yield(); }
    }
    atomic_fetch_add(&made, nmade);
    atomic_fetch_add(&freed, nfreed);
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 2); STEPS = arg_l(argc, argv, 2, 4000000);
    K = arg_l(argc, argv, 3, 2000); MAXS = arg_l(argc, argv, 4, 4096);
    if (T < 2) T = 2;
    if (STEPS < 1 || K < 1) FAIL("bad arguments");
    if (MAXS < 32) MAXS = 32;
    slots = calloc((size_t)(T * K), sizeof *slots);
    targ *ta = calloc((size_t)T, sizeof *ta);
    if (!slots || !ta) FAIL("calloc");
    for (long i = 0; i < T; i++) ta[i].id = i;
    run_threads(T, work, ta, sizeof *ta);
    long left = 0;
    for (long i = 0; i < T * K; i++) {
        uint64_t *o = slots[i];
        if (o) { release(o); left++; }
    }
    if (made != freed + left) FAIL("xchurn: made %ld, freed %ld + %ld left", (long)made, (long)freed, left);
    printf("metric remote_frees %ld\n", (long)freed);
    free((void *)slots); free(ta);
    return 0;
}
