/* Unit test of the tarrcache add-on layer (per-thread array cache) over capability fakes:
 *     tc8 :: fb (fake_batch, tc: BATCH and OWNER)    cap 8
 *     tcp :: fk (fake_next: neither)                  cap 8: refills one by one, getmeta for classes
 * Exact batch counts, LIFO order, no write into a cached block, double free, thread exit. */
#include <pthread.h>
#include <stdint.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"
#define SM_LAYER fk
#include "tests/support/fake_next.h"

#define SM_LAYER tc8
#define SM_NEXT fb
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CAP 8
#include <sunmao/layers/addon/tarrcache.h>
#define SM_LAYER tcp
#define SM_NEXT fk
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CAP 8
#include <sunmao/layers/addon/tarrcache.h>

_Static_assert(tc8_caps == (SM_CAP_HIT | SM_CAP_MOVE) && tc8_zeroed == 0 && tc8_thread_safe == 1, "properties");

#define FB(field) FAKE_BATCH_GET(fb, field)
static void *run(void *fn) { ((void (*)(void))fn)(); return NULL; }
static void in_thread(void (*fn)(void))
{
    pthread_t t;
    pthread_create(&t, NULL, run, (void *)fn);
    pthread_join(t, NULL);
}
static void *m8(size_t n) { sm_mctx_t c = sm_mctx_alloc(n, 0, SM_F_USER); return tc8_alloc(&c); }
static void f8(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); tc8_free(&c); }

static void counts_body(void)
{
    unsigned long ab = FB(alloc_batch_calls), fbc = FB(free_batch_calls), fbo = FB(free_batch_objs);
    fb_log_reset();
    void *p[13];
    p[0] = m8(64);
    CHECKF(FB(alloc_batch_calls) == ab + 1 && fb_obj.log_n == 1 && fb_obj.log[0].want == 4 && fb_obj.log[0].got == 4,
           "first refill: %lu calls", FB(alloc_batch_calls) - ab);
    for (int i = 1; i < 4; i++)
        p[i] = m8(64); /* hits */
    CHECK(FB(alloc_batch_calls) == ab + 1);
    for (int i = 4; i < 13; i++)
        p[i] = m8(60);
    CHECKF(FB(alloc_batch_calls) == ab + 4, "%lu refills for 13 objects", FB(alloc_batch_calls) - ab); /* 4+4+4+4 */
    for (int i = 0; i < 13; i++)
        check_fill(p[i], 64, (unsigned)i);
    unsigned cls = sm_sizeclass_tc_size_to_class(64);
    CHECK(tc8_tls->a[cls].n == 3);
    for (int i = 0; i < 5; i++) /* three left from the last refill + 5: the array (8) is full */
        f8(p[i]);
    CHECKF(tc8_tls->a[cls].n == 8 && FB(free_batch_calls) == fbc, "n %u", tc8_tls->a[cls].n);
    for (int i = 0; i < 5; i++) /* no link, no tag: a cached block keeps what the program wrote */
        CHECKF(check_verify(p[i], 64, (unsigned)i), "cached block %d written", i);
    f8(p[5]); /* full: the older half (4) goes down in one batch */
    CHECKF(FB(free_batch_calls) == fbc + 1 && FB(free_batch_objs) == fbo + 4 && tc8_tls->a[cls].n == 5,
           "spill: %lu calls %lu objects", FB(free_batch_calls) - fbc, FB(free_batch_objs) - fbo);
    CHECK(m8(64) == p[5] && m8(64) == p[4]); /* LIFO */
    f8(p[5]);
    f8(p[4]);
    err_reset();
    f8(p[4]); /* double free: caught in the array, nothing reaches the fake */
    CHECK(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1 && FB(double_frees) == 0);
    for (int i = 6; i < 13; i++) {
        sm_mctx_t c = sm_mctx_block(p[i], 64, SM_F_SIZED);
        tc8_free(&c);
    }
    CHECK(FB(owner_lookups) > 0);
}
static void exact_batches_and_exit(void)
{
    sm_err_callback_set(on_error);
    size_t live = FB(live_objs);
    in_thread(counts_body);
    CHECKF(FB(live_objs) == live, "thread exit left %ld objects", (long)FB(live_objs) - (long)live);
    CHECK(FB(bad_frees) == 0);
}

static void release_body(void)
{
    void *p = m8(200);
    f8(p);
    unsigned long fbc = FB(free_batch_calls);
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    tc8_release(&r);
    CHECK(FB(free_batch_calls) == fbc + 1 && r.released == 4 * sm_sizeclass_tc_class_to_size(sm_sizeclass_tc_size_to_class(200)));
    CHECK(!fb_is_live(p));
}
static void release_empties_the_thread(void) { in_thread(release_body); }

static void plain_body(void)
{
    unsigned long allocs = fk_obj.allocs;
    sm_mctx_t c = sm_mctx_alloc(100, 0, SM_F_USER);
    void *p = tcp_alloc(&c);
    /* the cache struct and 4 blocks of the 112-byte class, one alloc each */
    CHECKF(fk_obj.allocs == allocs + 5, "%lu allocs", fk_obj.allocs - allocs);
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    CHECK(tcp_getmeta(&m) && m.usable == 112);
    sm_mctx_t f = sm_mctx_block(p, 0, 0); /* unsized: class from getmeta */
    tcp_free(&f);
    CHECK(tcp_tls->a[sm_sizeclass_tc_size_to_class(112)].n == 4);
    sm_mctx_t big = sm_mctx_alloc(100000, 0, SM_F_USER); /* not a cached size: straight down */
    void *b = tcp_alloc(&big);
    sm_mctx_t g = sm_mctx_block(b, 0, 0);
    unsigned long frees = fk_obj.frees;
    tcp_free(&g);
    CHECK(fk_obj.frees == frees + 1);
}
static void without_capabilities_below(void)
{
    in_thread(plain_body);
    CHECK(fk_obj.live_blocks == 0 && fk_obj.bad_frees == 0);
}

int main(void)
{
    check_begin("tarrcache");
    RUN_CASE(exact_batches_and_exit);
    RUN_CASE(release_empties_the_thread);
    RUN_CASE(without_capabilities_below);
    return check_end();
}
