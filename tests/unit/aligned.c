/* Unit test of the aligned add-on layer: every request reaching the fake next layer has a size and
 * an alignment that are multiples of the granule, contents survive, getmeta and usable agree, and
 * the capabilities forwarded depend on the granule.
 *     al64 :: fk (fake_next)          granule 64
 *     al16 :: fb (fake_batch, tc)     granule 16: HIT/BATCH/OWNER forwarded
 *     alpg :: fb                      granule 4096: BATCH and HIT not offered */
#include <errno.h>
#include <stdint.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

#define SM_LAYER al64
#define SM_NEXT fk
#define SM_OPT_GRANULE 64
#include <sunmao/layers/addon/aligned.h>
#define SM_LAYER al16
#define SM_NEXT fb
#include <sunmao/layers/addon/aligned.h>
#define SM_LAYER alpg
#define SM_NEXT fb
#define SM_OPT_GRANULE 4096
#include <sunmao/layers/addon/aligned.h>

_Static_assert(al64_min_align == 64 && al64_thread_safe == 1 && al64_zeroed == 0, "properties");
_Static_assert(al64_caps == 0 && al16_caps == (SM_CAP_BATCH | SM_CAP_OWNER) && alpg_caps == SM_CAP_OWNER,
               "capabilities: sized ones only when the granule is at most 16");
_Static_assert(alpg_min_align == 4096 && al16_min_align == 16, "min_align");

static void every_block_below_is_granular(void)
{
    enum { N = 300 };
    void *p[N];
    size_t asked[N];
    for (int i = 0; i < N; i++) {
        asked[i] = (size_t)(i * 7) % 1000;
        size_t al = (i % 5 == 0) ? 256 : 0;
        sm_mctx_t c = sm_mctx_alloc(asked[i], al, SM_F_USER);
        p[i] = al64_alloc(&c);
        CHECK(p[i] != NULL);
        CHECKF(((uintptr_t)p[i] & (al ? al - 1 : 63)) == 0, "block %d misaligned", i);
        check_fill(p[i], asked[i], (unsigned)i);
    }
    /* the fake's table: every block's size is a multiple of 64 */
    size_t bad = 0;
    for (size_t k = 0; k < fk_obj.live_blocks; k++)
        bad += (fk_obj.blocks[k].size % 64) != 0 || ((uintptr_t)fk_obj.blocks[k].ptr % 64) != 0;
    CHECKF(fk_obj.live_blocks == N && bad == 0, "%zu live, %zu not granular", fk_obj.live_blocks, bad);
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(p[i], asked[i], (unsigned)i), "block %d lost its contents", i);
        sm_mctx_t m = sm_mctx_block(p[i], 0, 0);
        CHECK(al64_getmeta(&m));
        size_t want = asked[i] ? (asked[i] + 63) / 64 * 64 : 64;
        CHECKF(m.usable == want, "usable %zu for %zu", m.usable, asked[i]);
        CHECK(al64_resize(&m, m.usable - 1) && !al64_resize(&m, m.usable + 1));
    }
    unsigned long frees = fk_obj.frees;
    for (int i = 0; i < N; i++) { /* sized frees: the fake would count a size above its block */
        sm_mctx_t f = sm_mctx_block(p[i], asked[i], SM_F_SIZED);
        al64_free(&f);
    }
    CHECK(fk_obj.frees == frees + N && fk_obj.bad_frees == 0 && fk_obj.live_blocks == 0);
}

static void overflow_fails_cleanly(void)
{
    unsigned long failed = fk_obj.failed;
    sm_mctx_t c = sm_mctx_alloc(SIZE_MAX - 10, 0, 0);
    errno = 0;
    CHECK(al64_alloc(&c) == NULL && errno == ENOMEM);
    CHECK(fk_obj.failed == failed); /* never reached the fake as a wrapped small size */
}

static void granule16_forwards_hits_and_batches(void)
{
    void *out[4];
    sm_mctx_t c = sm_mctx_alloc(40, 0, 0);
    unsigned got = al16_alloc_batch(&c, out, 4);
    CHECK(got == 4 && c.size == 48);
    al16_free_batch(out, got);
    sm_mctx_t p = sm_mctx_alloc(100, 0, 0);
    void *q = alpg_alloc(&p);
    CHECK(q && ((uintptr_t)q & 4095) == 0 && p.size == 4096);
    sm_mctx_t f = sm_mctx_block(q, 100, SM_F_SIZED);
    alpg_free(&f);
    CHECK(fb_obj.bad_frees == 0);
}

int main(void)
{
    check_begin("aligned");
    RUN_CASE(every_block_below_is_granular);
    RUN_CASE(overflow_fails_cleanly);
    RUN_CASE(granule16_forwards_hits_and_batches);
    return check_end();
}
