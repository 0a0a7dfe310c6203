/* The array caches and batched_free in a real composition (no fakes), with threads and fill
 * patterns:
 *     mm (mmap_heap) :: sl (slab_lk, spinlock, tc) :: bf (batched_free) :: ta (tarrcache)
 *     and, over the same slab layer, sa (slab_arrcache) and al (aligned, 64) :: cc (carrcache_lk)
 * Each thread allocates blocks of mixed sizes, fills them, verifies, frees them in a shuffled order;
 * no error may reach the err policy (a double or invalid free below would).  */
#include <pthread.h>
#include <stdint.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"

#define SM_LAYER mm
#define SM_ERR callback
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER sl
#define SM_NEXT mm
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER bf
#define SM_NEXT sl
#include <sunmao/layers/addon/batched_free.h>
#define SM_LAYER ta
#define SM_NEXT bf
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/addon/tarrcache.h>
#define SM_LAYER sa
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/addon/slab_arrcache.h>
#define SM_LAYER cc
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_SYNC spinlock
#define SM_ERR callback
#include <sunmao/layers/addon/carrcache_lk.h>
#define SM_LAYER al
#define SM_NEXT cc
#define SM_OPT_GRANULE 64
#include <sunmao/layers/addon/aligned.h>

_Static_assert(bf_caps == (SM_CAP_BATCH | SM_CAP_OWNER | SM_CAP_MOVE) && ta_caps == (SM_CAP_HIT | SM_CAP_MOVE), "capabilities");

static unsigned long errors;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)kind, (void)layer, (void)ptr, (void)detail;
    __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
}

#define WORKER(L)                                                                                  \
    static void *L##_worker(void *arg)                                                             \
    {                                                                                              \
        unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1, bad = 0;                       \
        enum { N = 256 };                                                                          \
        void *p[N];                                                                                \
        size_t n[N];                                                                               \
        for (int round = 0; round < 100; round++) {                                                \
            for (int i = 0; i < N; i++) {                                                          \
                seed = seed * 1103515245u + 12345u;                                                \
                n[i] = 1 + (seed >> 8) % ((seed & 7) ? 256 : 9000);                                \
                sm_mctx_t c = sm_mctx_alloc(n[i], 0, SM_F_USER);                                   \
                if (!(p[i] = L##_alloc(&c)))                                                       \
                    return (void *)-1;                                                             \
                check_fill(p[i], n[i], seed);                                                      \
                n[i] |= (size_t)seed << 32;                                                        \
            }                                                                                      \
            for (int i = 0; i < N; i++) {                                                          \
                int j = (i * 97 + round) % N; /* 97 is prime to 256: a permutation */               \
                size_t len = n[j] & 0xffffffffu;                                                   \
                bad += !check_verify(p[j], len, (unsigned)(n[j] >> 32));                           \
                sm_mctx_t f = sm_mctx_block(p[j], (j & 1) ? len : 0, (j & 1) ? SM_F_SIZED : 0);    \
                L##_free(&f);                                                                      \
            }                                                                                      \
        }                                                                                          \
        return (void *)(uintptr_t)bad;                                                             \
    }
WORKER(ta)
WORKER(sa)
WORKER(al)

static void tarrcache_over_batched_free_over_slab(void)
{
    check_threads(4, ta_worker);
    CHECK(errors == 0);
}
static void slab_arrcache_over_slab(void)
{
    check_threads(4, sa_worker);
    CHECK(errors == 0);
}
static void aligned_over_carrcache_over_slab(void)
{
    check_threads(4, al_worker);
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    al_release(&r);
    CHECK(errors == 0);
}
int main(void)
{
    check_begin("arrcache_compose");
    sm_err_callback_set(on_error);
    if (mm_create() != 0) {
        check_skip("all", "mmap_heap create failed");
        return 0;
    }
    RUN_CASE(tarrcache_over_batched_free_over_slab);
    RUN_CASE(slab_arrcache_over_slab);
    RUN_CASE(aligned_over_carrcache_over_slab);
    return check_end();
}
