/* Unit test of the slab_arrcache add-on layer over a capability fake (fake_batch, tc), beside
 * tarrcache over the same kind of fake: blocks of two pages freed alternately come back from one
 * page at a time (the densest first), where the LIFO array alternates; the array stays sorted; a
 * full array gives back its upper half; double free; thread exit returns everything.
 *     sa :: fb  (cap 64)        ta :: fb2 (cap 64) */
#include <pthread.h>
#include <stdint.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"
#define SM_LAYER fb2
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

#define SM_LAYER sa
#define SM_NEXT fb
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CAP 64
#include <sunmao/layers/addon/slab_arrcache.h>
#define SM_LAYER ta
#define SM_NEXT fb2
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CAP 64
#include <sunmao/layers/addon/tarrcache.h>

_Static_assert(sa_caps == (SM_CAP_HIT | SM_CAP_MOVE), "capabilities");
#define FB(field) FAKE_BATCH_GET(fb, field)
static void *run(void *fn) { ((void (*)(void))fn)(); return NULL; }
static void in_thread(void (*fn)(void))
{
    pthread_t t;
    pthread_create(&t, NULL, run, (void *)fn);
    pthread_join(t, NULL);
}

/* 20 blocks of page A and 20 of page B (64-byte objects straight from the fake, ascending), freed
 * A, B, A, B, ...; then 20 allocations: how many distinct pages they span. */
#define PAGES_CASE(L, F)                                                                               \
    static unsigned L##_pages_after_interleaved_frees(void)                                           \
    {                                                                                                  \
        void *o[128];                                                                                  \
        for (int i = 0; i < 128; i++) {                                                                \
            sm_mctx_t c = sm_mctx_alloc(64, 0, 0);                                                     \
            o[i] = F##_alloc(&c);                                                                      \
        }                                                                                              \
        void *a[20], *b[20];                                                                           \
        int na = 0, nb = 0;                                                                            \
        uintptr_t pa = (uintptr_t)o[0] >> 12;                                                          \
        for (int i = 0; i < 128 && (na < 20 || nb < 20); i++) {                                        \
            uintptr_t pg = (uintptr_t)o[i] >> 12;                                                      \
            if (pg == pa && na < 20)                                                                   \
                a[na++] = o[i], o[i] = NULL;                                                           \
            else if (pg == pa + 1 && nb < 20)                                                          \
                b[nb++] = o[i], o[i] = NULL;                                                           \
        }                                                                                              \
        CHECK(na == 20 && nb == 20);                                                                   \
        for (int i = 0; i < 20; i++) {                                                                 \
            sm_mctx_t f = sm_mctx_block(a[i], 0, 0);                                                   \
            L##_free(&f);                                                                              \
            f = sm_mctx_block(b[i], 0, 0);                                                             \
            L##_free(&f);                                                                              \
        }                                                                                              \
        uintptr_t seen[20];                                                                            \
        void *got[20];                                                                                 \
        unsigned pages = 0;                                                                            \
        for (int i = 0; i < 20; i++) {                                                                 \
            sm_mctx_t c = sm_mctx_alloc(64, 0, SM_F_USER);                                             \
            got[i] = L##_alloc(&c);                                                                    \
            uintptr_t pg = (uintptr_t)got[i] >> 12;                                                    \
            unsigned k = 0;                                                                            \
            while (k < pages && seen[k] != pg)                                                         \
                k++;                                                                                   \
            if (k == pages)                                                                            \
                seen[pages++] = pg;                                                                    \
        }                                                                                              \
        for (int i = 0; i < 20; i++) {                                                                 \
            sm_mctx_t f = sm_mctx_block(got[i], 0, 0);                                                 \
            L##_free(&f);                                                                              \
        }                                                                                              \
        for (int i = 0; i < 128; i++)                                                                  \
            if (o[i]) {                                                                                \
                sm_mctx_t f = sm_mctx_block(o[i], 0, 0);                                               \
                F##_free(&f);                                                                          \
            }                                                                                          \
        return pages;                                                                                  \
    }
PAGES_CASE(sa, fb)
PAGES_CASE(ta, fb2)

static unsigned sa_pages, ta_pages;
static void sa_body(void) { sa_pages = sa_pages_after_interleaved_frees(); }
static void ta_body(void) { ta_pages = ta_pages_after_interleaved_frees(); }
static void one_page_at_a_time(void)
{
    in_thread(sa_body);
    in_thread(ta_body);
    CHECKF(sa_pages == 1 && ta_pages == 2, "20 allocations span %u pages (slab_arrcache), %u (tarrcache)", sa_pages,
           ta_pages);
    CHECK(FB(live_objs) == 0 && FB(bad_frees) == 0);
}

static void order_body(void)
{
    unsigned cls = sm_sizeclass_tc_size_to_class(32);
    void *p[70];
    for (int i = 0; i < 70; i++) {
        sm_mctx_t c = sm_mctx_alloc(32, 0, SM_F_USER);
        p[i] = sa_alloc(&c);
    }
    CHECK(sa_tls->a[cls].n == 26); /* 3 refills of 32 = 96, 70 taken */
    unsigned long fbc = FB(free_batch_calls), fbo = FB(free_batch_objs);
    for (int i = 69; i >= 32; i--) { /* 26 + 38 = 64: full, no spill yet */
        sm_mctx_t f = sm_mctx_block(p[i], 0, 0);
        sa_free(&f);
    }
    CHECK(sa_tls->a[cls].n == 64 && FB(free_batch_calls) == fbc);
    int sorted = 1;
    for (unsigned i = 1; i < 64; i++)
        sorted &= (uintptr_t)sa_tls->slot[cls][i - 1] < (uintptr_t)sa_tls->slot[cls][i];
    CHECK(sorted);
    void *top = sa_tls->slot[cls][63];
    sm_mctx_t f = sm_mctx_block(p[31], 0, 0);
    sa_free(&f); /* full: the upper 32 by address go down, in one batch */
    CHECK(FB(free_batch_calls) == fbc + 1 && FB(free_batch_objs) == fbo + 32 && sa_tls->a[cls].n == 33);
    CHECK(!fb_is_live(top));
    err_reset();
    f = sm_mctx_block(p[31], 0, 0);
    sa_free(&f);
    CHECK(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1);
    for (int i = 0; i < 31; i++) {
        sm_mctx_t g = sm_mctx_block(p[i], 32, SM_F_SIZED);
        sa_free(&g);
    }
}
static void sorted_spill_and_double_free(void)
{
    sm_err_callback_set(on_error);
    in_thread(order_body);
    CHECK(FB(live_objs) == 0 && FB(bad_frees) == 0);
}

int main(void)
{
    check_begin("slab_arrcache");
    RUN_CASE(one_page_at_a_time);
    RUN_CASE(sorted_spill_and_double_free);
    return check_end();
}
