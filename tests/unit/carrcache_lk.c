/* Unit test of the carrcache_lk add-on layer (per-CPU array cache) over a capability fake
 * (fake_batch, tc), with the request's CPU set explicitly in the context (mctx.cpu):
 *     cc :: fb     4 CPUs' arrays, cap 32, spinlock
 * Blocks freed on CPU 1 are served again on CPU 1 (and on CPU 5, which shares its arrays), not on
 * CPU 0; exact batch counts; release; fork hooks; threads hammering with fill patterns. */
#include <pthread.h>
#include <stdint.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

#define SM_LAYER cc
#define SM_NEXT fb
#define SM_SIZECLASS tc
#define SM_SYNC spinlock
#define SM_ERR callback
#define SM_OPT_CPUS 4
#define SM_OPT_CAP 32
#include <sunmao/layers/addon/carrcache_lk.h>

_Static_assert(cc_caps == SM_CAP_MOVE && cc_thread_safe == 1 && cc_cpus == 4, "properties");
#define FB(field) FAKE_BATCH_GET(fb, field)

static void *on_cpu(int cpu, size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n, 0, SM_F_USER);
    c.cpu = cpu;
    return cc_alloc(&c);
}
static void free_on(int cpu, void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    c.cpu = cpu;
    cc_free(&c);
}
static unsigned n_of(int cpu, size_t size)
{
    return cc_obj.arr[(unsigned)cpu * cc_class_count + sm_sizeclass_tc_size_to_class(size)].n;
}

static void freed_on_cpu1_served_on_cpu1(void)
{
    unsigned long ab = FB(alloc_batch_calls);
    fb_log_reset();
    void *p = on_cpu(1, 64);
    CHECKF(FB(alloc_batch_calls) == ab + 1 && fb_obj.log[0].want == 16 && fb_obj.log[0].got == 16 && n_of(1, 64) == 15,
           "refill on CPU 1: %lu calls, %u in its array", FB(alloc_batch_calls) - ab, n_of(1, 64));
    check_fill(p, 64, 7);
    free_on(1, p);
    CHECK(n_of(1, 64) == 16 && n_of(0, 64) == 0);
    CHECK(check_verify(p, 64, 7)); /* an array cache writes nothing into a cached block */
    void *q = on_cpu(0, 64); /* CPU 0's array is empty: its own refill, not CPU 1's block */
    CHECK(q != p && FB(alloc_batch_calls) == ab + 2 && n_of(0, 64) == 15);
    void *r = on_cpu(1, 64);
    CHECK(r == p && FB(alloc_batch_calls) == ab + 2);
    free_on(5, r); /* CPU 5 shares CPU 1's arrays (5 & 3 == 1) */
    CHECK(n_of(1, 64) == 16 && on_cpu(1, 64) == p);
    free_on(1, p);
    free_on(0, q);
    err_reset();
    free_on(1, p); /* double free, caught in the array */
    CHECK(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1 && FB(double_frees) == 0);
}

static void full_array_spills_half(void)
{
    void *p[40];
    for (int i = 0; i < 40; i++)
        p[i] = on_cpu(2, 32);
    unsigned long fbc = FB(free_batch_calls), fbo = FB(free_batch_objs);
    unsigned n0 = n_of(2, 32);
    int i = 0;
    for (; n_of(2, 32) < 32; i++)
        free_on(2, p[i]);
    CHECK(FB(free_batch_calls) == fbc);
    free_on(2, p[i++]);
    CHECKF(FB(free_batch_calls) == fbc + 1 && FB(free_batch_objs) == fbo + 16 && n_of(2, 32) == 17,
           "spill: %lu objects, %u left (had %u)", FB(free_batch_objs) - fbo, n_of(2, 32), n0);
    for (; i < 40; i++)
        free_on(2, p[i]);
}

static void release_returns_every_array(void)
{
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    cc_release(&r);
    CHECKF(FB(live_objs) == 0 && r.released > 0, "%zu objects still out", (size_t)FB(live_objs));
    for (unsigned k = 0; k < cc_arrays; k++)
        CHECK(cc_obj.arr[k].n == 0);
}

static void fork_hooks_take_every_lock(void)
{
    unsigned long forks = FB(forks);
    cc_fork_prepare();
    int held = 1;
    for (unsigned k = 0; k < cc_arrays; k++)
        held &= !sm_sync_spinlock_trylock(&cc_obj.arr[k].lock);
    cc_fork_parent();
    int free_again = 1;
    for (unsigned k = 0; k < cc_arrays; k++) {
        free_again &= sm_sync_spinlock_trylock(&cc_obj.arr[k].lock);
        sm_sync_spinlock_unlock(&cc_obj.arr[k].lock);
    }
    CHECK(held && free_again && FB(forks) == forks + 1);
}

static void *hammer(void *arg)
{
    int cpu = (int)(intptr_t)arg, bad = 0;
    void *p[64];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 64; i++) {
            size_t n = 16 + (size_t)((i * 37 + round) % 500);
            p[i] = on_cpu(cpu + round % 3, n);
            if (!p[i])
                return (void *)-1;
            check_fill(p[i], n, (unsigned)(round * 64 + i));
        }
        for (int i = 0; i < 64; i++) {
            size_t n = 16 + (size_t)((i * 37 + round) % 500);
            bad += !check_verify(p[i], n, (unsigned)(round * 64 + i));
            free_on(cpu + i % 5, p[i]);
        }
    }
    return (void *)(intptr_t)bad;
}
static void threads_share_cpus_with_patterns(void)
{
    check_threads(6, hammer);
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    cc_release(&r);
    CHECK(FB(live_objs) == 0 && FB(bad_frees) == 0);
}

int main(void)
{
    check_begin("carrcache_lk");
    sm_err_callback_set(on_error);
    RUN_CASE(freed_on_cpu1_served_on_cpu1);
    RUN_CASE(full_array_spills_half);
    RUN_CASE(release_returns_every_array);
    RUN_CASE(fork_hooks_take_every_lock);
    RUN_CASE(threads_share_cpus_with_patterns);
    return check_end();
}
