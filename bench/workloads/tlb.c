/* tlb: page locality of a per-thread array cache, tarrcache (LIFO) against slab_arrcache (sorted,
 * densest page first), each composed here over its own slab_lk (spinlock, tc) over mmap_heap: the
 * same next layer, the same work. Not an LD_PRELOAD workload (it composes its allocators itself,
 * so bench/harness.py does not run it); run it alone:  build/bench/tlb [rounds=20] [structs=64]
 * and under `perf stat -e dTLB-load-misses` where the counters exist.
 *
 * The work: S structures (linked lists) of 512 nodes of 64 bytes. Each round frees every structure
 * node by node, interleaved (node i of each structure in turn: the frees mix every structure's
 * pages, as a program tearing down many small containers at once does), then rebuilds them one
 * after another and walks each list 20 times. The array caches hold the freed nodes (cap 4096 per
 * class, enough for the whole round's 64-byte nodes with S = 8; above that they spill), so where
 * the rebuilt nodes come from is the caches' order. Metrics per allocator:
 *   <a>_pages_per_struct   distinct 4 KiB pages one rebuilt structure spans (8 is the least)
 *   <a>_walk_ms            the walks' time, <a>_total_ms the whole run's
 * Prints `metric <name> <value>` lines like the other workloads (bench/README.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER mm1
#define SM_ERR warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER sl1
#define SM_NEXT mm1
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR warn
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER ta
#define SM_NEXT sl1
#define SM_SIZECLASS tc
#define SM_ERR warn
#define SM_OPT_CAP 4096
#define SM_OPT_CLASS_BYTES (1u << 20)
#define SM_OPT_DOUBLE_FREE_CHECK 0 /* its linear scan of a 4096-entry array would dominate the time */
#include <sunmao/layers/addon/tarrcache.h>

#define SM_LAYER mm2
#define SM_ERR warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER sl2
#define SM_NEXT mm2
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR warn
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER sa
#define SM_NEXT sl2
#define SM_SIZECLASS tc
#define SM_ERR warn
#define SM_OPT_CAP 4096
#define SM_OPT_CLASS_BYTES (1u << 20)
#include <sunmao/layers/addon/slab_arrcache.h>

enum { NODES = 512, WALKS = 20 };
struct node { struct node *next; uint64_t payload[7]; };

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static int cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

#define RUN(L)                                                                                          \
    static void run_##L(int rounds, int S)                                                              \
    {                                                                                                   \
        struct node ***v = malloc(sizeof *v * (size_t)S);                                               \
        uintptr_t *pg = malloc(sizeof *pg * NODES);                                                     \
        for (int s = 0; s < S; s++) {                                                                   \
            v[s] = malloc(sizeof **v * NODES);                                                          \
            for (int i = 0; i < NODES; i++) {                                                           \
                sm_mctx_t c = sm_mctx_alloc(sizeof(struct node), 0, SM_F_USER);                         \
                v[s][i] = L##_alloc(&c);                                                                \
            }                                                                                           \
        }                                                                                               \
        double t0 = now_ms(), walk = 0, pages = 0;                                                      \
        uint64_t sum = 0;                                                                               \
        for (int r = 0; r < rounds; r++) {                                                              \
            for (int i = 0; i < NODES; i++)                                                             \
                for (int s = 0; s < S; s++) {                                                           \
                    sm_mctx_t f = sm_mctx_block(v[s][i], 0, 0);                                         \
                    L##_free(&f);                                                                       \
                }                                                                                       \
            for (int s = 0; s < S; s++) {                                                               \
                for (int i = 0; i < NODES; i++) {                                                       \
                    sm_mctx_t c = sm_mctx_alloc(sizeof(struct node), 0, SM_F_USER);                     \
                    struct node *n = L##_alloc(&c);                                                     \
                    n->payload[0] = (uint64_t)i;                                                        \
                    n->next = i ? v[s][i - 1] : NULL;                                                   \
                    v[s][i] = n;                                                                        \
                    pg[i] = (uintptr_t)n >> 12;                                                         \
                }                                                                                       \
                qsort(pg, NODES, sizeof *pg, cmp);                                                      \
                int d = 1;                                                                              \
                for (int i = 1; i < NODES; i++)                                                         \
                    d += pg[i] != pg[i - 1];                                                            \
                pages += d;                                                                             \
            }                                                                                           \
            double w0 = now_ms();                                                                       \
            for (int s = 0; s < S; s++)                                                                 \
                for (int k = 0; k < WALKS; k++)                                                         \
                    for (struct node *n = v[s][NODES - 1]; n; n = n->next)                              \
                        sum += n->payload[0];                                                           \
            walk += now_ms() - w0;                                                                      \
        }                                                                                               \
        double total = now_ms() - t0;                                                                   \
        printf("metric " #L "_pages_per_struct %.1f\n", pages / ((double)rounds * S));                  \
        printf("metric " #L "_walk_ms %.1f\n", walk);                                                   \
        printf("metric " #L "_total_ms %.1f\n", total);                                                 \
        if (sum == 42)                                                                                  \
            puts("");                                                                                   \
        for (int s = 0; s < S; s++) {                                                                   \
            for (int i = 0; i < NODES; i++) {                                                           \
                sm_mctx_t f = sm_mctx_block(v[s][i], 0, 0);                                             \
                L##_free(&f);                                                                           \
            }                                                                                           \
            free(v[s]);                                                                                 \
        }                                                                                               \
        free(v), free(pg);                                                                              \
    }
RUN(ta)
RUN(sa)

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20, S = argc > 2 ? atoi(argv[2]) : 64;
    const char *which = argc > 3 ? argv[3] : "both";
    if (mm1_create() || mm2_create())
        return 1;
    if (which[0] != 's')
        run_ta(rounds, S);
    if (which[0] != 't')
        run_sa(rounds, S);
    return 0;
}
