/* pareto: many small objects whose sizes *and* lifetimes are Pareto-distributed, on T threads
 * (each thread its own objects). Sizes: Pareto(8 B, alpha=1.2), capped at `max` (median ~14 B,
 * 0.3% above 1 KiB, a few up to 64 KiB). Lifetimes, in allocations of the same thread:
 * Pareto(4, alpha=0.4), capped at `horizon` (half die within ~23 allocations, 2% live past
 * 65536 and ~0.5% to the cap) — so a few long-lived objects are scattered among the short-lived.
 * Each step allocates one object and frees the objects whose time is up (a timing wheel: exact
 * below 4096 steps, in 1024-step buckets above); every object is stamped and checked before
 * its free. Sizes and lifetimes come from inverse-CDF tables (no pow() in the loop).
 * usage: pareto [threads=1] [steps_per_thread=10000000] [horizon=4194304] [max=65536] */
#include "common.h"
#include <math.h>
#include <sys/mman.h>

#define TAB 65536
#define FINE 4096                 /* exact wheel: lifetimes below this */
#define COARSE_G 1024             /* coarse wheel bucket width (steps) */
static uint32_t size_tab[TAB], life_tab[TAB];
static long T, STEPS, H, MAXS;

typedef struct rec { struct rec *next; void *p; uint32_t n; uint32_t tag; } rec;
typedef struct { long id; long live_max; uint64_t allocs; } targ;

static void *bk_alloc(size_t bytes) {   /* bookkeeping outside the allocator under test */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) FAIL("mmap %zu", bytes);
    return p;
}

static void *work(void *a) {
    targ *t = a;
    uint64_t rs = seed_for((uint64_t)t->id + 4242);
    long NC = H / COARSE_G;
    long cap = STEPS < H ? STEPS + 1 : H + 1;   /* at most one new object per step lives */
    rec **fine = bk_alloc(FINE * sizeof(rec *)), **coarse = bk_alloc((size_t)NC * sizeof(rec *));
    rec *pool = bk_alloc((size_t)cap * sizeof(rec)), *freel = NULL;
    long used = 0, live = 0, live_max = 0;
    uint64_t allocs = 0; /* the shared targ array is written once, at the end: its elements share a
                          * cache line, and a per-step store there measured where the allocator put
                          * the array (false sharing), not the allocator's requests */
    for (long s = 0; s <= STEPS + H; s++) {
        /* free what expires now: the exact bucket, and at bucket starts the coarse one */
        rec **lists[2] = { &fine[s % FINE], (s % COARSE_G == 0) ? &coarse[(s / COARSE_G) % NC] : NULL };
        for (int k = 0; k < 2; k++) {
            if (!lists[k]) continue;
            rec *r = *lists[k];
            *lists[k] = NULL;
            while (r) {
                rec *nx = r->next;
                if (!stamp_ok(r->p, r->n, r->tag)) FAIL("pareto: corrupted object (size %u)", r->n);
                free(r->p);
                r->next = freel; freel = r; live--;
                r = nx;
            }
        }
        if (s >= STEPS) {   /* drain: no more allocations */
            if (live == 0) break;
            continue;
        }
        uint64_t x = rnd(&rs);
        rec *r = freel ? freel : &pool[used++];
        if (r == freel) freel = r->next;
        if (used > cap) FAIL("pareto: bookkeeping overflow");
        r->n = size_tab[x & (TAB - 1)];
        r->tag = (uint32_t)(x >> 32);
        long L = life_tab[(x >> 16) & (TAB - 1)];
        r->p = xmalloc(r->n);
        stamp(r->p, r->n, r->tag);
        if (L < FINE) {
            rec **l = &fine[(s + L) % FINE];
            r->next = *l; *l = r;
        } else {
            if (L > H - 2 * COARSE_G) L = H - 2 * COARSE_G;
            rec **l = &coarse[((s + L) / COARSE_G) % NC];
            r->next = *l; *l = r;
        }
        if (++live > live_max) live_max = live;
        allocs++;
    }
    t->allocs = allocs;
    if (live != 0) FAIL("pareto: %ld objects never freed", live);
    t->live_max = live_max;
    munmap(fine, FINE * sizeof(rec *)); munmap(coarse, (size_t)NC * sizeof(rec *));
    munmap(pool, (size_t)cap * sizeof(rec));
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_l(argc, argv, 1, 1); STEPS = arg_l(argc, argv, 2, 10000000);
    H = arg_l(argc, argv, 3, 4194304); MAXS = arg_l(argc, argv, 4, 65536);
    if (T < 1 || STEPS < 1 || MAXS < 8) FAIL("bad arguments");
    if (H < 4 * FINE) H = 4 * FINE;
    H = (H + COARSE_G - 1) / COARSE_G * COARSE_G;
    for (long i = 0; i < TAB; i++) {   /* quantile (i + 0.5) / TAB of the upper tail */
        double u = (i + 0.5) / TAB;
        double sz = 8.0 / pow(u, 1.0 / 1.2), lf = 4.0 / pow(u, 1.0 / 0.4);
        size_tab[i] = sz > (double)MAXS ? (uint32_t)MAXS : (uint32_t)sz;
        life_tab[i] = lf > (double)H ? (uint32_t)H : (uint32_t)lf;
    }
    targ *ta = calloc((size_t)T, sizeof *ta);
    for (long i = 0; i < T; i++) ta[i].id = i;
    run_threads(T, work, ta, sizeof *ta);
    long lm = 0;
    for (long i = 0; i < T; i++) {
        if (ta[i].allocs != (uint64_t)STEPS) FAIL("pareto: thread %ld made %llu objects", i, (unsigned long long)ta[i].allocs);
        if (ta[i].live_max > lm) lm = ta[i].live_max;
    }
    printf("metric live_max %ld\n", lm);
    free(ta);
    return 0;
}
