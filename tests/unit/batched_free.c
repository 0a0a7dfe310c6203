/* Unit test of the batched_free add-on layer: frees reach the next layer in batches of exactly
 * SM_OPT_BATCH (one free_batch call each when it offers BATCH, one free each when it does not), and
 * the rest on release and on thread exit; a batched block is still live below (getmeta answers);
 * a double free reaches the next layer, which reports it at the flush.
 *     bf :: fb (fake_batch, tc)      batch 8
 *     bf1 :: fk (fake_next)          batch 4, no BATCH below */
#include <pthread.h>
#include <stdint.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"
#define SM_LAYER fk
#include "tests/support/fake_next.h"

#define SM_LAYER bf
#define SM_NEXT fb
#define SM_OPT_BATCH 8
#include <sunmao/layers/addon/batched_free.h>
#define SM_LAYER bf1
#define SM_NEXT fk
#define SM_OPT_BATCH 4
#include <sunmao/layers/addon/batched_free.h>

_Static_assert(bf_caps == (SM_CAP_BATCH | SM_CAP_OWNER) && bf1_caps == 0, "capabilities forwarded");

#define FB(field) FAKE_BATCH_GET(fb, field)

static void *in_thread_run(void *fn)
{
    ((void (*)(void))fn)();
    return NULL;
}
static void in_thread(void (*fn)(void))
{
    pthread_t t;
    pthread_create(&t, NULL, in_thread_run, (void *)fn);
    pthread_join(t, NULL);
}

static void *blk[64];
static void take(void)
{
    for (int i = 0; i < 64; i++) {
        sm_mctx_t c = sm_mctx_alloc(64, 0, SM_F_USER);
        blk[i] = bf_alloc(&c);
        check_fill(blk[i], 64, (unsigned)i);
    }
}
static void give(int i)
{
    sm_mctx_t f = sm_mctx_block(blk[i], 0, 0);
    bf_free(&f);
}

static void batches_body(void)
{
    take();
    unsigned long calls = FB(free_batch_calls), objs = FB(free_batch_objs), frees = FB(frees);
    for (int i = 0; i < 7; i++)
        give(i);
    CHECKF(FB(free_batch_calls) == calls && FB(frees) == frees, "a free went down before the batch filled");
    int live = 0;
    for (int i = 0; i < 7; i++)
        live += fb_is_live(blk[i]);
    CHECK(live == 7);
    sm_mctx_t m = sm_mctx_block(blk[3], 0, 0); /* a batched block: live below, as the contract allows */
    CHECK(bf_getmeta(&m) && m.usable == 64);
    CHECK(check_verify(blk[3], 64, 3)); /* nothing written into it */
    give(7);
    CHECKF(FB(free_batch_calls) == calls + 1 && FB(free_batch_objs) == objs + 8, "%lu calls, %lu objects",
           FB(free_batch_calls) - calls, FB(free_batch_objs) - objs);
    live = 0;
    for (int i = 0; i < 8; i++)
        live += fb_is_live(blk[i]);
    CHECK(live == 0);
    /* three more, then malloc_trim: one batch of exactly those three */
    for (int i = 8; i < 11; i++)
        give(i);
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    bf_release(&r);
    CHECK(FB(free_batch_calls) == calls + 2 && FB(free_batch_objs) == objs + 11 && !fb_is_live(blk[10]));
    CHECK(fb_is_live(blk[11]));
    /* five more, then the thread exits (the case ends): the exit flushes them */
    for (int i = 11; i < 16; i++)
        give(i);
    CHECK(FB(free_batch_calls) == calls + 2);
}
static void flush_on_full_release_and_exit(void)
{
    unsigned long calls = FB(free_batch_calls), objs = FB(free_batch_objs);
    in_thread(batches_body);
    CHECKF(FB(free_batch_calls) == calls + 3 && FB(free_batch_objs) == objs + 16, "thread exit: %lu calls, %lu objects",
           FB(free_batch_calls) - calls, FB(free_batch_objs) - objs);
    for (int i = 16; i < 64; i++) {
        sm_mctx_t f = sm_mctx_block(blk[i], 0, 0);
        fb_free(&f);
    }
    CHECK(FB(live_objs) == 0 && FB(bad_frees) == 0);
}

static void double_free_body(void)
{
    sm_mctx_t c = sm_mctx_alloc(64, 0, SM_F_USER);
    void *p = bf_alloc(&c);
    sm_mctx_t f = sm_mctx_block(p, 0, 0);
    bf_free(&f);
    f = sm_mctx_block(p, 0, 0);
    bf_free(&f);
    CHECK(FB(double_frees) == 0); /* not yet: both sit in the batch */
}
static void double_free_reaches_next_layer(void)
{
    unsigned long d = FB(double_frees), objs = FB(free_batch_objs);
    in_thread(double_free_body);
    CHECKF(FB(double_frees) == d + 1 && FB(free_batch_objs) == objs + 2, "%lu double frees reported below",
           FB(double_frees) - d);
}

static void no_batch_below_body(void)
{
    void *p[6];
    for (int i = 0; i < 6; i++) {
        sm_mctx_t c = sm_mctx_alloc(100, 0, SM_F_USER);
        p[i] = bf1_alloc(&c);
    }
    unsigned long frees = fk_obj.frees;
    for (int i = 0; i < 3; i++) {
        sm_mctx_t f = sm_mctx_block(p[i], 0, 0);
        bf1_free(&f);
    }
    CHECK(fk_obj.frees == frees);
    sm_mctx_t f = sm_mctx_block(p[3], 100, SM_F_SIZED);
    bf1_free(&f);
    CHECKF(fk_obj.frees == frees + 4, "%lu plain frees", fk_obj.frees - frees);
    for (int i = 4; i < 6; i++) {
        sm_mctx_t g = sm_mctx_block(p[i], 0, 0);
        bf1_free(&g);
    }
}
static void one_by_one_without_batch(void)
{
    unsigned long frees = fk_obj.frees;
    in_thread(no_batch_below_body);
    CHECK(fk_obj.frees == frees + 6 && fk_obj.live_blocks == 0 && fk_obj.bad_frees == 0);
}

int main(void)
{
    check_begin("batched_free");
    RUN_CASE(flush_on_full_release_and_exit);
    RUN_CASE(double_free_reaches_next_layer);
    RUN_CASE(one_by_one_without_batch);
    return check_end();
}
