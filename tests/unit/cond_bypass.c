/* Unit test of the cond_bypass add-on layer: the predicate routes exactly the requests it selects
 * past the next layer, and every free reaches the layer that owns its block.
 *     by :: mid (fake_batch, tc, objects up to 256 KiB) :: bot (fake_next)
 *     by's bypass target: bot; predicate: sizes in [100, 200], or a request whose cpu is 7
 *     bm :: pm (passthrough) :: fkm (fake_next with a move): bypass target fkm, sizes >= 1024 */
#include <stdint.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER bot
#include "tests/support/fake_next.h"
#define SM_LAYER mid
#define SM_NEXT bot
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

static unsigned long pred_calls;
static bool pick(sm_mctx_t *c)
{
    pred_calls++;
    return (c->size >= 100 && c->size <= 200) || c->cpu == 7;
}

#define SM_LAYER by
#define SM_NEXT mid
#define SM_BYPASS_TO bot
#define SM_OPT_PREDICATE pick
#include <sunmao/layers/addon/cond_bypass.h>

#define SM_LAYER fkm
#define FAKE_MOVE 1
#include "tests/support/fake_next.h"
#define SM_LAYER pm
#define SM_NEXT fkm
#include <sunmao/layers/addon/passthrough.h>
static bool big(sm_mctx_t *c) { return c->size >= 1024; }
#define SM_LAYER bm
#define SM_NEXT pm
#define SM_BYPASS_TO fkm
#define SM_OPT_PREDICATE big
#include <sunmao/layers/addon/cond_bypass.h>

_Static_assert(by_caps == 0 && by_thread_safe == 1 && by_min_align == 16, "properties");
_Static_assert(bm_caps == SM_CAP_MOVE, "MOVE where the next layer has it");

#define MID(field) FAKE_BATCH_GET(mid, field)

static void routes_exactly_the_selected(void)
{
    enum { N = 400 };
    void *p[N + 1];
    unsigned long mid_allocs = MID(allocs), bot_allocs = bot_obj.allocs;
    for (int s = 1; s <= N; s++) {
        sm_mctx_t c = sm_mctx_alloc((size_t)s, 0, SM_F_USER);
        p[s] = by_alloc(&c);
        CHECK(p[s] != NULL);
        check_fill(p[s], (size_t)s, (unsigned)s);
    }
    CHECKF(pred_calls == N, "predicate asked %lu times", pred_calls);
    CHECKF(bot_obj.allocs - bot_allocs == 101, "%lu requests bypassed", bot_obj.allocs - bot_allocs);
    CHECKF(MID(allocs) - mid_allocs == N - 101, "%lu requests served by the next layer", MID(allocs) - mid_allocs);
    CHECK(MID(passed_down) == 0);
    /* getmeta through the next layer finds both kinds, each at its owner */
    sm_mctx_t m = sm_mctx_block(p[150], 0, 0);
    CHECK(by_getmeta(&m) && m.usable == 150 && m.owner && !strcmp(m.owner, "bot"));
    m = sm_mctx_block(p[50], 0, 0);
    CHECK(by_getmeta(&m) && m.usable >= 50 && m.owner && !strcmp(m.owner, "mid"));
    /* a request the predicate selects by its cpu */
    sm_mctx_t c7 = sm_mctx_alloc(64, 0, SM_F_USER);
    c7.cpu = 7;
    void *q = by_alloc(&c7);
    CHECK(q && bot_obj.allocs - bot_allocs == 102);
    unsigned long bot_frees = bot_obj.frees, mid_frees = MID(frees), passed = MID(passed_down);
    for (int s = 1; s <= N; s++) {
        CHECKF(check_verify(p[s], (size_t)s, (unsigned)s), "block of %d damaged", s);
        sm_mctx_t f = sm_mctx_block(p[s], 0, 0);
        by_free(&f);
    }
    sm_mctx_t f7 = sm_mctx_block(q, 64, SM_F_SIZED);
    by_free(&f7);
    CHECKF(bot_obj.frees - bot_frees == 102, "%lu frees reached the bypass target", bot_obj.frees - bot_frees);
    /* every free entered the next layer; it kept its own 299 and passed the bypassed 102 down */
    CHECKF(MID(frees) - mid_frees == N + 1, "%lu frees at the next layer", MID(frees) - mid_frees);
    CHECK(MID(passed_down) - passed == 102);
    CHECK(bot_obj.bad_frees == 0 && MID(bad_frees) == 0 && bot_obj.live_blocks == 0 && MID(live_blocks) == 0);
}

/* realloc's move of a large growth goes down through the next layer to the owner, for a bypassed
 * block as for one the next layer served: contents come along, and the old blocks go back. */
static void move_reaches_the_owner(void)
{
    unsigned char *p[2];
    size_t n[2] = { 100, 5000 }; /* served through pm, and bypassed */
    for (int i = 0; i < 2; i++) {
        sm_mctx_t c = sm_mctx_alloc(n[i], 0, 0);
        p[i] = bm_alloc(&c);
        CHECK(p[i] != NULL);
        for (size_t k = 0; k < n[i]; k++) /* check_fill's pattern follows the address: not this one */
            p[i][k] = (unsigned char)(k * 13 + 1);
    }
    for (int i = 0; i < 2; i++) {
        sm_mctx_t c = sm_mctx_block(p[i], 0, 0);
        unsigned long moves = fkm_obj.moves;
        CHECK(bm_move(&c, 3 * n[i]) && c.ptr != p[i] && fkm_obj.moves == moves + 1);
        unsigned char *q = (unsigned char *)c.ptr;
        size_t same = 0;
        for (size_t k = 0; k < n[i]; k++)
            same += q[k] == (unsigned char)(k * 13 + 1);
        CHECKF(same == n[i], "%zu of %zu bytes came along", same, n[i]);
        sm_mctx_t m = sm_mctx_block(q, 0, 0);
        CHECK(bm_getmeta(&m) && m.usable == 3 * n[i]);
        sm_mctx_t f = sm_mctx_block(q, 0, 0);
        bm_free(&f);
    }
    CHECK(fkm_obj.bad_frees == 0 && fkm_obj.live_blocks == 0);
}

int main(void)
{
    check_begin("cond_bypass");
    RUN_CASE(routes_exactly_the_selected);
    RUN_CASE(move_reaches_the_owner);
    return check_end();
}
