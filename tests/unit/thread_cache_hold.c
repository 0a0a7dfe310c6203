/* Unit test of thread_cache's hold (SM_OPT_HOLD_BYTES: a quarantine in the lists themselves) with
 * its words 16 bytes into each object (SM_OPT_LINK_AT, where tail_chksum's header leaves the
 * program's first bytes), over a real slab_lk over the fake next layer:
 *     th (harden=1, hold 1 KiB a list, link_at 16) :: s :: fake
 * Each case runs in a fresh thread (a fresh cache) and asserts exact counts: how long a freed
 * object is held, the order objects come back in, and the reports (err policy `callback`) for
 * writes after free, double frees and a tag defeated then freed twice, with nothing handed out
 * twice and no pointer the slab did not give. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"
#include "tests/support/cache_rounds.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

#define SM_LAYER s
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER th
#define SM_NEXT s
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_HARDEN 1
#define SM_OPT_HOLD_BYTES 1024
#define SM_OPT_LINK_AT 16
#include <sunmao/layers/addon/thread_cache.h>

enum { SIZE = 64, HOLD = 1024 / SIZE, N = 48 };

static void *a(size_t n) { sm_mctx_t c = sm_mctx_alloc(n, SM_MIN_ALIGN, 0); return th_alloc(&c); }
static void f(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); th_free(&c); }
static bool owned(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); return s_getmeta(&c); }
static struct th_list *list64(void) { return &th_tls->list[sm_sizeclass_tc_size_to_class(SIZE)]; }

/* Rounds of N allocations then N frees, until the list has its room (slow start). */
static void warm(void) { alloc_free_rounds(a, f, SIZE, N, 8, NULL); }

/* Takes n objects and frees them: each the slab's, 16-aligned, none twice among them and `held`;
 * how many broke the rule. */
static unsigned take(unsigned n, void **held, unsigned nheld)
{
    return take_checked(a, f, owned, SIZE, n, held, nheld, NULL, 0);
}

/* The hold is 1 KiB / 64 B, and a freed object comes back only after at least that many later
 * frees of its class (malloc+free pairs here); it does come back, once the objects ahead of it went. */
static void held_for_hold_frees_body(void)
{
    warm();
    struct th_list *l = list64();
    CHECKF(l->hold == HOLD && l->limit > HOLD, "hold %u (want %d), limit %u", (unsigned)l->hold, HOLD,
           (unsigned)l->limit);
    void *x = a(SIZE);
    unsigned before = l->count;
    f(x);
    int back = 0;
    for (int i = 1; i <= 4 * N && !back; i++) {
        void *q = a(SIZE);
        if (q == x)
            back = i;
        f(q);
    }
    CHECKF(back > HOLD && back == (int)before + 1, "came back after %d pairs (hold %d, %u ahead of it)", back, HOLD,
           before);
    CHECK(err_total() == 0);
}
static void held_for_hold_frees(void) { in_thread(held_for_hold_frees_body); }

/* Frees come back in the order they were made (FIFO), never more than the list's count - hold at
 * a time without a refill in front of them. */
static void fifo_order_body(void)
{
    warm();
    void *p[N], *q[N];
    for (int i = 0; i < N; i++)
        p[i] = a(SIZE);
    unsigned ahead = list64()->count; /* these come out first */
    for (int i = 0; i < N; i++)
        f(p[i]);
    for (unsigned i = 0; i < ahead; i++)
        (void)a(SIZE);
    for (int i = 0; i < N - HOLD; i++)
        q[i] = a(SIZE);
    CHECKF(memcmp(p, q, sizeof(void *) * (N - HOLD)) == 0, "not in the order freed");
    CHECKF(list64()->count == HOLD, "%u left, hold %d", (unsigned)list64()->count, HOLD);
    CHECK(err_total() == 0);
}
static void fifo_order(void) { in_thread(fifo_order_body); }

/* A write after free of the program's first bytes (16 into the object) of a held object: reported
 * once when it reaches the head, nothing but the slab's objects handed out. */
static void write_after_free_body(void)
{
    warm();
    void *x = a(SIZE);
    f(x);
    *(uintptr_t *)((char *)x + 16) = (uintptr_t)x; /* a dangling pointer's first word */
    CHECK(err_total() == 0);
    CHECK(take(N, NULL, 0) == 0);
    CHECK(take(N, NULL, 0) == 0);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu corruption reports, %lu in all",
           err_counts[SM_ERR_CORRUPTION], err_total());
}
static void write_after_free(void) { in_thread(write_after_free_body); }

/* The object a free would append to (the tail) damaged: the free reports it once, and the list
 * starts anew with the freed object. */
static void tail_damaged_body(void)
{
    warm();
    void *x = a(SIZE), *y = a(SIZE);
    f(x); /* x is the tail */
    ((uint8_t *)x)[16 + 8] ^= 1;
    f(y);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
    CHECK(list64()->count == 1 && list64()->head == y);
    CHECK(take(N, NULL, 0) == 0);
    CHECK(err_total() == 1);
}
static void tail_damaged(void) { in_thread(tail_damaged_body); }

/* Malloc+free pairs until x comes back (kept, not freed again); how many times it came in `pairs`. */
static int pairs_meeting(void *x, unsigned pairs, void *const *never, int nnever, int *met_never)
{
    int seen = 0;
    for (unsigned i = 0; i < pairs; i++) {
        void *q = a(SIZE);
        for (int k = 0; k < nnever; k++)
            *met_never += q == never[k];
        if (q == x) {
            seen++;
            continue;
        }
        f(q);
    }
    return seen;
}

/* A held object freed again: one double-free report, the object handed out once. */
static void double_free_body(void)
{
    warm();
    void *x = a(SIZE);
    f(x);
    f(x);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu reports", err_total());
    int none = 0, seen = pairs_meeting(x, 4u * list64()->count, NULL, 0, &none);
    CHECKF(seen == 1, "handed out %d times", seen);
    CHECK(err_total() == 1);
}
static void double_free(void) { in_thread(double_free_body); }

/* The tag defeated (its mark word cleared), then the object freed again while held: appended a
 * second time, it ends the chain at its first place, so the objects queued after that are cut off.
 * Nothing here can tell (its words were rewritten by the second free; a layer above with a header,
 * tail_chksum, reports the double free at once): x is handed out once, the cut-off objects never,
 * and the thread's exit, walking the list, finds it short and reports that once. */
static void *cut_x, *cut_after[4];
static int cut_seen, cut_lost;
static void tag_defeat_body(void)
{
    warm();
    cut_x = a(SIZE);
    f(cut_x);
    for (int i = 0; i < 4; i++)
        f(cut_after[i] = a(SIZE)); /* behind x: cut off */
    ((uintptr_t *)((char *)cut_x + 16))[1] = 0;
    f(cut_x);
    cut_lost = 0;
    cut_seen = pairs_meeting(cut_x, 4u * list64()->count, cut_after, 4, &cut_lost);
    CHECK(err_total() == 0);
}
static void tag_defeat(void)
{
    in_thread(tag_defeat_body);
    CHECKF(cut_seen == 1 && cut_lost == 0, "x handed out %d times, %d cut-off objects handed out", cut_seen, cut_lost);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports at exit", err_total());
}

/* Collections (every 64 slow-path events) never give back a busy list's held objects: the reclaim
 * policy sees only what lies beyond the hold. x, freed and then followed by no other free of its
 * class, must stay held through 40 rounds of another class's churn while its list is in use. */
static void hold_survives_collections_body(void)
{
    warm();
    void *x = a(SIZE);
    f(x);
    static void *big[400], *kept[40];
    int met = 0;
    for (int round = 0; round < 40; round++) { /* 40 x 400 x 2 requests of another class: many
                                                 * refills and overflows, so many collections */
        for (int i = 0; i < 400; i++)
            big[i] = a(2048);
        for (int i = 0; i < 400; i++)
            f(big[i]);
        met += (kept[round] = a(SIZE)) == x; /* the 64-byte list stays in use */
    }
    CHECKF(met == 0 && list64()->count >= HOLD, "x handed out %d times with no later free; %u held, hold %d", met,
           (unsigned)list64()->count, HOLD);
    for (int round = 0; round < 40; round++)
        f(kept[round]);
    CHECK(err_total() == 0);
}
static void hold_survives_collections(void) { in_thread(hold_survives_collections_body); }

/* Classes too small for the words at 16 (the 16-byte class) are not cached: served by the slab. */
static void small_class_uncached_body(void)
{
    void *p = a(16);
    CHECK(p && owned(p));
    f(p);
    CHECK(th_tls->list[sm_sizeclass_tc_size_to_class(16)].limit == 0);
}
static void small_class_uncached(void) { in_thread(small_class_uncached_body); }

int main(void)
{
    check_begin("thread_cache_hold");
    sm_err_callback_set(on_error);
    CHECK(th_create() == 0);
    RUN_CASE(held_for_hold_frees);
    RUN_CASE(fifo_order);
    RUN_CASE(write_after_free);
    RUN_CASE(tail_damaged);
    RUN_CASE(double_free);
    RUN_CASE(tag_defeat);
    RUN_CASE(hold_survives_collections);
    RUN_CASE(small_class_uncached);
    return check_end();
}
