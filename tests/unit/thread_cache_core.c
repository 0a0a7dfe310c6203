/* Unit test of the thread cache's core-aware budget (SM_OPT_CORE_AWARE, the paper's
 * coreaware_cachesize) and of the core table it reads (platform/core_table.h):
 *     tcore(256 KiB, core-aware) :: slab_lk :: fake
 * Two CPUs are told apart with SUNMAO_CORE_CACHE (one 1 MiB of level-2 cache, the other 256 KiB),
 * set before the cache's first slow path. A thread pinned to the small core gets a quarter of the
 * budget; moved to the large core it gets the whole of it within SM_OPT_GC_EVENTS slow-path events
 * and caches more; moved back, it gives the excess back at the 64th slow-path event. Objects held throughout keep their
 * contents. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/cpus.h"
#include "tests/support/layer_calls.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tcore
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#define SM_OPT_CACHE_BYTES (256u << 10)
#define SM_OPT_CORE_AWARE 1
#include <sunmao/layers/addon/thread_cache.h>

enum { FULL = 256 << 10, HELD = 64 };
static int cpu[2]; /* cpu[0]: the large core, cpu[1]: the small one */

LAYER_CALLS(t, tcore)
CACHE_BYTES(t, tcore)
/* Slow-path events and a full cache: many objects of three classes taken, then given back. */
static void churn(void)
{
    enum { N = 1500 };
    static void *p[N];
    static const size_t sizes[] = { 64, 512, 2048 };
    for (unsigned round = 0; round < 3; round++)
        for (unsigned k = 0; k < 3; k++) {
            for (unsigned i = 0; i < N; i++)
                p[i] = t_malloc(sizes[k]);
            for (unsigned i = 0; i < N; i++)
                t_free(p[i]);
        }
}

static void budget_follows_the_core_body(void *unused)
{
    (void)unused;
    void *held[HELD];
    for (unsigned i = 0; i < HELD; i++) {
        held[i] = t_malloc(300);
        check_fill(held[i], 300, i);
    }
    churn();
    struct tcore_cache *c = tcore_tls;
    CHECKF(c->budget == FULL / 4 && c->capacity <= c->budget && t_cached_bytes() <= c->budget,
           "small core: budget %zu (want %d), capacity %zu, cached %zu", c->budget, FULL / 4, c->capacity, t_cached_bytes());
    size_t small_capacity = c->capacity;
    if (!cpus_move_to(cpu[0])) {
        CHECKF(0, "could not move to CPU %d", cpu[0]);
        return;
    }
    churn();
    CHECKF(c->budget == FULL && c->capacity > small_capacity && c->capacity <= FULL,
           "large core: budget %zu (want %d), capacity %zu (was %zu)", c->budget, FULL, c->capacity, small_capacity);
    if (!cpus_move_to(cpu[1])) {
        CHECKF(0, "could not move to CPU %d", cpu[1]);
        return;
    }
    size_t before = t_cached_bytes();
    /* The slow-path events the layer counts (a refill or an overflow each), without the lists
     * changing: the budget is looked at again within SM_OPT_GC_EVENTS (64) of them. */
    unsigned events = 0;
    while (c->budget == FULL && events < 64) {
        tcore_event(c);
        events++;
    }
    CHECKF(c->budget == FULL / 4 && c->capacity <= FULL / 4 && t_cached_bytes() <= FULL / 4 && before > FULL / 4,
           "back on the small core, after %u events: budget %zu, capacity %zu, cached %zu (was %zu)", events,
           c->budget, c->capacity, t_cached_bytes(), before);
    for (unsigned i = 0; i < HELD; i++) {
        CHECKF(check_verify(held[i], 300, i), "held object %u lost its contents", i);
        t_free(held[i]);
    }
    CHECK(fk_obj.bad_frees == 0);
}

static void budget_follows_the_core(void)
{
    if (!run_on_cpu(cpu[1], budget_follows_the_core_body, NULL))
        CHECKF(0, "could not run on CPU %d", cpu[1]);
}

static void core_table_parses(void)
{
    uint32_t kib[8] = { 0 };
    CHECK(sm_core_table_parse("0-2:1M,5:512K,7:4096", kib, 8));
    CHECK(kib[0] == 1024 && kib[2] == 1024 && kib[3] == 0 && kib[5] == 512 && kib[7] == 4);
    CHECK(!sm_core_table_parse("1:2M,x", kib, 8) && kib[1] == 2048);
    CHECK(!sm_core_table_parse("3-1:1M", kib, 8) && !sm_core_table_parse("2:", kib, 8) && !sm_core_table_parse("2:1G", kib, 8));
    CHECK(sm_core_table_parse("100:1M", kib, 8)); /* beyond the table: ignored */
}

int main(void)
{
    check_begin("thread_cache_core");
    RUN_CASE(core_table_parses);
    int c2[2];
    if (!cpus_of_both_parities(c2)) {
        printf("skip thread_cache_core: budget_follows_the_core: needs two CPUs\n");
        return check_end();
    }
    cpu[0] = c2[0], cpu[1] = c2[1];
    char env[64];
    snprintf(env, sizeof env, "%d:1M,%d:256K", cpu[0], cpu[1]);
    setenv("SUNMAO_CORE_CACHE", env, 1);
    RUN_CASE(budget_follows_the_core);
    return check_end();
}
