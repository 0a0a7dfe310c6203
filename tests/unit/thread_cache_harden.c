/* Unit test of thread_cache's hardened lists (SM_OPT_HARDEN, docs/security.md) over a real slab_lk
 * over the fake next layer:
 *     th1 (harden=1) :: s1 :: fake        th2 (harden=2) :: s2 :: fake2
 * Each case damages free objects in a fresh thread's cache the way an exploit or a buggy program
 * would and asserts the exact count of reports (err policy `callback`), that no pointer the cache
 * did not get from its slab is handed out, and that nothing is handed out twice. */
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
#define SM_LAYER fk2
#include "tests/support/fake_next.h"

#define SM_LAYER s1
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER th1
#define SM_NEXT s1
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_HARDEN 1
#include <sunmao/layers/addon/thread_cache.h>

#define SM_LAYER s2
#define SM_NEXT fk2
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER th2
#define SM_NEXT s2
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_HARDEN 2
#include <sunmao/layers/addon/thread_cache.h>

enum { SIZE = 64, N = 32 };
static char target[256] __attribute__((aligned(64)));

static void *a1(size_t n) { sm_mctx_t c = sm_mctx_alloc(n, SM_MIN_ALIGN, 0); return th1_alloc(&c); }
static void f1(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); th1_free(&c); }
static void *a2(size_t n) { sm_mctx_t c = sm_mctx_alloc(n, SM_MIN_ALIGN, 0); return th2_alloc(&c); }
static void f2(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); th2_free(&c); }
static bool owned1(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); return s1_getmeta(&c); }
static bool owned2(void *p) { sm_mctx_t c = sm_mctx_block(p, 0, 0); return s2_getmeta(&c); }

static unsigned cls64(void) { return sm_sizeclass_tc_size_to_class(SIZE); }

/* Fills th1's list of 64-byte objects with N objects (slow start needs a few rounds); out: them,
 * in list order (out[0] the head). */
static void warm1(void **out)
{
    void *p[N];
    alloc_free_rounds(a1, f1, SIZE, N, 6, p);
    for (int i = 0; i < N; i++)
        out[i] = p[N - 1 - i]; /* LIFO: the last freed is the head */
}

/* Takes n objects (kept): each the slab's own, 16-aligned, not the target, none twice among them
 * and `held`; how many broke that rule. */
static unsigned take(void *(*alloc)(size_t), bool (*owned)(void *), unsigned n, void **held, unsigned nheld)
{
    return take_checked(alloc, NULL, owned, SIZE, n, held, nheld, target, sizeof target);
}

static void link_overwritten_body(void)
{
    void *list[N];
    warm1(list);
    struct th1_list *l = &th1_tls->list[cls64()];
    CHECKF(l->count >= N && l->head == list[0], "list holds %u, not %d", (unsigned)l->count, N);
    *(uintptr_t *)list[0] = (uintptr_t)target; /* the write after free of the head's link */
    CHECK(take(a1, owned1, 100, NULL, 0) == 0);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu corruption reports, %lu in all",
           err_counts[SM_ERR_CORRUPTION], err_total());
}
static void link_overwritten(void) { in_thread(link_overwritten_body); }

/* A damaged object in the middle: the objects above it are handed out, then one report, then the
 * list is gone (refills from the slab). */
static void middle_object_body(void)
{
    void *list[N];
    warm1(list);
    ((uint8_t *)list[10])[8] ^= 1; /* one bit of its second word: a 1-byte overflow of its neighbour would do */
    void *got[10];
    for (int i = 0; i < 10; i++)
        got[i] = a1(SIZE);
    CHECK(memcmp(got, list, sizeof got) == 0);
    CHECK(err_total() == 0);
    CHECK(take(a1, owned1, 50, got, 10) == 0);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
    CHECK(th1_tls->list[cls64()].count < N);
}
static void middle_object(void) { in_thread(middle_object_body); }

/* Thread exit drains every list: the objects above a damaged one go back to the slab, the report is
 * made once, naming the objects dropped, and the damaged one and those after it are not given to the
 * slab. A list of 32-byte objects is drained first into the same batch, so the damage lies past the
 * batch's first hand-over. */
static void *drained[N];
static void drain_stops_body(void)
{
    alloc_free_rounds(a1, f1, 32, 24, 6, NULL);
    unsigned small = th1_tls->list[sm_sizeclass_tc_size_to_class(32)].count;
    CHECKF(small > N - 20 && small < N, "%u objects of 32 bytes cached", small);
    warm1(drained);
    ((uint8_t *)drained[20])[0] ^= 0x40;
    char dropped[64];
    snprintf(dropped, sizeof dropped, "; %u cached objects dropped", th1_tls->list[cls64()].count - 20);
    memset(&errs, 0, sizeof errs);
    th1_thread_exit();
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
    CHECKF(strstr(errs.detail, dropped) != NULL, "report: %s; want%s", errs.detail, dropped);
}
/* Another thread takes objects from the slab: it meets the 20 objects above the damage again (they
 * went back) and never the damaged one or those after it (lost: their links cannot be trusted). */
static void drain_reuse_body(void)
{
    enum { TAKE = 2048 };
    static void *got[TAKE];
    unsigned above = 0, below = 0;
    for (unsigned i = 0; i < TAKE; i++) {
        got[i] = a1(SIZE);
        for (int k = 0; k < N; k++)
            if (got[i] == drained[k])
                k < 20 ? above++ : below++;
    }
    CHECKF(above == 20 && below == 0, "%u of the 20 given back met again, %u lost ones handed out", above, below);
    for (unsigned i = 0; i < TAKE; i++)
        f1(got[i]);
}
static void drain_stops(void)
{
    in_thread(drain_stops_body);
    in_thread(drain_reuse_body);
    CHECK(err_total() == 0);
}

/* The tag-defeat probe: the second word of a cached object cleared, then the object freed again.
 * It goes on the list twice; the first pop hands it out and clears its pair, so the second finds a
 * broken pair: one report, the object handed out once. */
static void tag_defeat_body(void)
{
    void *list[N];
    warm1(list);
    void *p = list[0];
    ((uintptr_t *)p)[1] = 0;
    f1(p); /* the double free the tag would have caught */
    CHECK(err_total() == 0);
    CHECK(take(a1, owned1, 100, NULL, 0) == 0);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
}
static void tag_defeat(void) { in_thread(tag_defeat_body); }

/* A plain double free of a cached object is still a double free, reported as one. */
static void double_free_body(void)
{
    void *list[N];
    warm1(list);
    f1(list[5]);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu reports", err_total());
    CHECK(take(a1, owned1, 100, NULL, 0) == 0);
    CHECK(err_total() == 1);
}
static void double_free(void) { in_thread(double_free_body); }

/* Thread B frees an object that sits in thread A's cache: the pair's check is the process's, so B
 * sees the object is cached: one report (a double free), B does not take it, A hands it out once. */
static void *cross_victim;
static void *cross_free(void *arg) { (void)arg; f1(cross_victim); void *q = a1(SIZE); return q; }
static void cross_thread_body(void)
{
    void *list[N];
    warm1(list);
    cross_victim = list[3];
    pthread_t t;
    void *from_b;
    pthread_create(&t, NULL, cross_free, NULL);
    pthread_join(t, &from_b);
    CHECK(from_b != cross_victim);
    void *got[N];
    int seen = 0;
    for (int i = 0; i < N; i++)
        seen += (got[i] = a1(SIZE)) == cross_victim;
    CHECKF(seen == 1, "A handed the object out %d times", seen);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu reports", err_total());
}
static void cross_thread(void) { in_thread(cross_thread_body); }

/* harden=2: a pair forged with the cache's own keys (an attacker who leaked them) still cannot make
 * the cache hand out what is not an object of the list's class: the owner map is asked. */
static void forged_pair_body(void)
{
    void *p[N];
    alloc_free_rounds(a2, f2, SIZE, N, 6, NULL);
    struct th2_cache *cache = th2_tls;
    void *head = cache->list[cls64()].head;
    uintptr_t w0 = (uintptr_t)target ^ cache->key; /* head's link forged to the target */
    ((uintptr_t *)head)[0] = w0;
    ((uintptr_t *)head)[1] = w0 ^ cache->check;
    /* the target itself made to look cached, so only the owner map can tell */
    ((uintptr_t *)target)[0] = 0 ^ cache->key;
    ((uintptr_t *)target)[1] = cache->key ^ cache->check;
    CHECK(a2(SIZE) == head);
    CHECK(take(a2, owned2, 100, &head, 1) == 0);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
    /* An interior pointer of a real object, forged the same way, is refused too. */
    err_reset();
    alloc_free_rounds(a2, f2, SIZE, N, 1, p);
    head = cache->list[cls64()].head;
    char *interior = (char *)p[0] + 16;
    w0 = (uintptr_t)interior ^ cache->key;
    ((uintptr_t *)head)[0] = w0;
    ((uintptr_t *)head)[1] = w0 ^ cache->check;
    ((uintptr_t *)interior)[0] = cache->key;
    ((uintptr_t *)interior)[1] = cache->key ^ cache->check;
    CHECK(a2(SIZE) == head);
    void *next = a2(SIZE);
    CHECKF(next != interior, "an interior pointer was handed out");
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
}
static void forged_pair(void) { in_thread(forged_pair_body); }

/* Clean use reports nothing and keeps fill patterns: the encoding is invisible to a correct program. */
static void clean_round_trips_body(void)
{
    void *p[200];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 200; i++) {
            size_t n = 16 + (size_t)((i * 37 + round * 11) % 2000);
            p[i] = (i & 1) ? a1(n) : a2(n);
            memset(p[i], i & 0xff, n < 64 ? n : 64);
        }
        for (int i = 0; i < 200; i++) {
            for (int k = 0; k < 16; k++)
                CHECK(((uint8_t *)p[i])[k] == (i & 0xff));
            (i & 1) ? f1(p[i]) : f2(p[i]);
        }
    }
    CHECK(err_total() == 0);
}
static void clean_round_trips(void) { in_thread(clean_round_trips_body); }

int main(void)
{
    check_begin("thread_cache_harden");
    sm_err_callback_set(on_error);
    CHECK(th1_create() == 0 && th2_create() == 0);
    RUN_CASE(clean_round_trips);
    RUN_CASE(link_overwritten);
    RUN_CASE(middle_object);
    RUN_CASE(drain_stops);
    RUN_CASE(tag_defeat);
    RUN_CASE(double_free);
    RUN_CASE(cross_thread);
    RUN_CASE(forged_pair);
    return check_end();
}
