/* Unit test of the hugepage_glk core layer over the fake next layer (tests/support/fake_next.h).
 * Instances: hg (defaults, mutex), hs (spinlock, 2 MiB regions, one set, spans up to 1 MiB, hints
 * after 1 MiB in use, decay 10 ms). After most cases every hugepage is walked and checked against
 * its lists and bitmaps. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER hg
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/layers/core/hugepage_glk.h>

#define SM_LAYER fs
#include "tests/support/fake_next.h"
#define SM_LAYER hs
#define SM_NEXT fs
#define SM_SYNC spinlock
#define SM_ERR callback
#define SM_OPT_REGION_SIZE ((size_t)2 << 20)
#define SM_OPT_SPAN_MAX ((size_t)1 << 20)
#define SM_OPT_LIFETIME_SETS 0
#define SM_OPT_HUGE_AFTER ((size_t)1 << 20)
#define SM_OPT_DECAY_MS 10
#include <sunmao/layers/core/hugepage_glk.h>

_Static_assert(hg_thread_safe == 1 && hs_thread_safe == 1, "thread_safe follows the sync policy");
_Static_assert(hg_zeroed == 0 && hg_min_align == 16, "not zeroed; min_align bounded by the fake's 16");
_Static_assert(hg_sets == 2 && hs_sets == 1, "lifetime sets follow the option");

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGES 512u

#define REQUIRE(cond, ...)                                                                             \
    if (!(cond)) {                                                                                     \
        check_fail_at(__FILE__, __LINE__, __VA_ARGS__);                                                \
        return;                                                                                        \
    }


/* Helpers and the invariant walker, one set per instance. */
#define DEFINE_HELPERS(L, F)                                                                           \
    static void *L##_t_alloc(size_t size, size_t align, unsigned flags)                                \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_alloc(size, align, flags);                                               \
        void *p = L##_alloc(&c);                                                                       \
        CHECK(p == c.ptr);                                                                             \
        return p;                                                                                      \
    }                                                                                                  \
    static void L##_t_free(void *p)                                                                    \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                          \
        L##_free(&c);                                                                                  \
    }                                                                                                  \
    SM_UNUSED static size_t L##_t_usable(void *p)                                                      \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                          \
        return L##_getmeta(&c) ? c.usable : 0;                                                         \
    }                                                                                                  \
    static void L##_check_heap(void)                                                                   \
    {                                                                                                  \
        size_t hugepages = 0, used = 0, listed = 0;                                                    \
        for (struct L##_region *g = L##_obj.regions; g; g = g->next) {                                 \
            REQUIRE(sm_ptr_aligned(g->base, 2 * MiB), "region %p misaligned", (void *)g->base);        \
            for (size_t k = 0; k < g->count; k++) {                                                    \
                struct L##_hp *hp = &g->hp[k];                                                         \
                hugepages++;                                                                           \
                REQUIRE(hp->base == g->base + k * 2 * MiB, "hugepage %zu of %p: wrong base", k, (void *)g->base); \
                REQUIRE(L##_hp_of(hp->base) == hp && L##_hp_of(hp->base + 2 * MiB - 1) == hp,          \
                        "page map does not lead to hugepage %p", (void *)hp->base);                    \
                unsigned in_spans = 0;                                                                 \
                uint64_t bits[8] = { 0 };                                                              \
                for (unsigned i = 0; i < PAGES;) {                                                     \
                    unsigned n = hp->span[i];                                                          \
                    if (!n) { i++; continue; }                                                         \
                    REQUIRE(i + n <= PAGES, "span at page %u of %p runs past the hugepage", i, (void *)hp->base); \
                    L##_set_range(bits, i, i + n, true);                                               \
                    for (unsigned j = i + 1; j < i + n; j++)                                           \
                        REQUIRE(!hp->span[j], "span starts inside a span at page %u", j);              \
                    in_spans += n;                                                                     \
                    i += n;                                                                            \
                }                                                                                      \
                REQUIRE(!memcmp(bits, hp->taken, sizeof bits), "hugepage %p: taken pages are not its spans", \
                        (void *)hp->base);                                                             \
                REQUIRE(in_spans == hp->used, "hugepage %p: used %u, spans %u", (void *)hp->base, hp->used, in_spans); \
                unsigned purged = 0;                                                                   \
                for (unsigned w = 0; w < 8; w++) {                                                     \
                    purged += (unsigned)__builtin_popcountll(hp->purged[w]);                           \
                    REQUIRE(!(hp->purged[w] & hp->taken[w]), "hugepage %p: a taken page is purged", (void *)hp->base); \
                }                                                                                      \
                REQUIRE(purged == hp->npurged, "hugepage %p: npurged %u, bits %u", (void *)hp->base, hp->npurged, purged); \
                REQUIRE(hp->longest == L##_longest_run(hp->taken), "hugepage %p: stale longest run", (void *)hp->base); \
                unsigned want = hp->longest == 0 ? L##_on_none : hp->longest == PAGES                \
                                ? (hp->npurged == PAGES ? L##_on_clean : L##_on_dirty) : L##_on_partial; \
                REQUIRE(hp->list == want, "hugepage %p on list %u, belongs on %u", (void *)hp->base, hp->list, want); \
                REQUIRE(hp->list != L##_on_partial || hp->bucket == L##_bucket_of(hp), "hugepage %p: stale bucket", \
                        (void *)hp->base);                                                             \
                used += hp->used;                                                                      \
                listed += hp->list != L##_on_none;                                                     \
            }                                                                                          \
        }                                                                                              \
        REQUIRE(hugepages == L##_obj.hugepages && used == L##_obj.used_pages, "totals disagree");       \
        size_t on_lists = 0;                                                                           \
        for (struct L##_hp *hp = L##_obj.dirty; hp; hp = hp->next, on_lists++)                         \
            REQUIRE(hp->list == L##_on_dirty && (!hp->next || hp->next->prev == hp), "dirty list broken"); \
        for (struct L##_hp *hp = L##_obj.clean; hp; hp = hp->next, on_lists++)                         \
            REQUIRE(hp->list == L##_on_clean && (!hp->next || hp->next->prev == hp), "clean list broken"); \
        for (unsigned s = 0; s < L##_sets; s++)                                                        \
            for (unsigned b = 0; b < L##_classes * L##_tiers; b++) {                                   \
                REQUIRE(!!L##_obj.partial[s][b] == !!(L##_obj.nonempty[s] >> b & 1), "nonempty bit %u wrong", b); \
                for (struct L##_hp *hp = L##_obj.partial[s][b]; hp; hp = hp->next, on_lists++)         \
                    REQUIRE(hp->list == L##_on_partial && hp->set == s && hp->bucket == b &&           \
                                (!hp->next || hp->next->prev == hp), "partial list %u/%u broken", s, b); \
            }                                                                                          \
        REQUIRE(on_lists == listed, "%zu hugepages on lists, %zu say they are", on_lists, listed);     \
        CHECK(F##_obj.bad_frees == 0 && F##_obj.bad_purges == 0);                                      \
    }                                                                                                  \
    /* Frees every span and releases everything: back to clean hugepages only. */                     \
    static void L##_drain(void **blocks, size_t n)                                                     \
    {                                                                                                  \
        for (size_t i = 0; i < n; i++)                                                                 \
            if (blocks[i])                                                                             \
                L##_t_free(blocks[i]);                                                                 \
        sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);                                        \
        L##_release(&r);                                                                               \
        CHECK(L##_obj.used_pages == 0 && L##_obj.dirty == NULL);                                       \
        L##_check_heap();                                                                              \
    }
DEFINE_HELPERS(hg, fk)
DEFINE_HELPERS(hs, fs)

static struct hg_hp *hg_hp(void *p) { return hg_hp_of(p); }

/* Spans of every page count up to a hugepage, with alignments; contents checked after the rest. */
static void test_spans_and_alignment(void)
{
    enum { n = 64 };
    void *b[n];
    size_t size[n];
    for (int i = 0; i < n; i++) {
        size[i] = (size_t)(i * 37 % 512 + 1) * 4096 - (size_t)(i % 3) * 100;
        size_t align = i % 4 == 0 ? 64 * KiB : i % 4 == 1 ? 4096 : 16;
        b[i] = hg_t_alloc(size[i], align, 0);
        CHECKF(b[i] && sm_ptr_aligned(b[i], align), "span %d of %zu bytes aligned %zu: %p", i, size[i], align, b[i]);
        CHECK(hg_t_usable(b[i]) == sm_align_up(size[i], 4096));
        check_fill(b[i], size[i], (unsigned)i);
    }
    hg_check_heap();
    for (int i = 0; i < n; i++)
        CHECKF(check_verify(b[i], size[i], (unsigned)i), "span %d overwritten", i);
    void *whole = hg_t_alloc(2 * MiB, 2 * MiB, 0);
    CHECK(whole && sm_ptr_aligned(whole, 2 * MiB) && hg_hp(whole)->used == PAGES);
    hg_t_free(whole);
    hg_drain(b, n);
}

/* 64 KiB slabs fill one hugepage before the next, and a new span goes to the fullest hugepage. */
static void test_dense_packing_prefers_fullest(void)
{
    void *b[96];
    for (int i = 0; i < 96; i++)
        b[i] = hg_t_alloc(64 * KiB, 64 * KiB, 0);
    for (int h = 0; h < 3; h++)
        for (int i = 1; i < 32; i++)
            CHECKF(hg_hp(b[h * 32 + i]) == hg_hp(b[h * 32]), "slab %d is not in hugepage %d", h * 32 + i, h);
    CHECK(hg_hp(b[0]) != hg_hp(b[32]) && hg_hp(b[32]) != hg_hp(b[64]));
    /* Hugepage 0 keeps 28 slabs, hugepage 1 keeps 4: the next slabs go to hugepage 0. */
    for (int i = 0; i < 4; i++) {
        hg_t_free(b[i * 2]);
        b[i * 2] = NULL;
    }
    for (int i = 36; i < 64; i++) {
        hg_t_free(b[i]);
        b[i] = NULL;
    }
    hg_check_heap();
    for (int i = 0; i < 4; i++) {
        b[i * 2] = hg_t_alloc(64 * KiB, 64 * KiB, 0);
        CHECKF(hg_hp(b[i * 2]) == hg_hp(b[1]), "slab %d went to a sparser hugepage", i);
    }
    hg_check_heap();
    hg_drain(b, 96);
}

/* Among hugepages that fit, the one with the shortest longest free run. */
static void test_best_fit_by_longest_run(void)
{
    void *a[PAGES], *c[PAGES];
    for (unsigned i = 0; i < PAGES; i++)
        a[i] = hg_t_alloc(4096, 0, 0); /* hugepage A full */
    for (unsigned i = 0; i < PAGES; i++)
        c[i] = hg_t_alloc(4096, 0, 0); /* hugepage C full */
    CHECK(hg_hp(a[0]) != hg_hp(c[0]));
    for (unsigned i = 100; i < 104; i++) { /* A: a run of 4 free pages */
        hg_t_free(a[i]);
        a[i] = NULL;
    }
    for (unsigned i = 200; i < 400; i++) { /* C: a run of 200 */
        hg_t_free(c[i]);
        c[i] = NULL;
    }
    void *p = hg_t_alloc(3 * 4096, 0, 0);
    CHECK(p == (char *)hg_hp(a[0])->base + 100 * 4096);
    void *q = hg_t_alloc(5 * 4096, 0, 0);
    CHECK(q == (char *)hg_hp(c[0])->base + 200 * 4096);
    hg_check_heap();
    hg_t_free(p);
    hg_t_free(q);
    for (unsigned i = 0; i < PAGES; i++)
        if (c[i])
            hg_t_free(c[i]);
    hg_drain(a, PAGES);
}

/* The program's spans and the layers' spans do not share a hugepage. */
static void test_lifetime_sets_apart(void)
{
    void *slab = hg_t_alloc(64 * KiB, 64 * KiB, 0);
    void *user = hg_t_alloc(64 * KiB, 0, SM_F_USER);
    void *slab2 = hg_t_alloc(64 * KiB, 64 * KiB, 0);
    CHECK(hg_hp(slab) != hg_hp(user) && hg_hp(slab) == hg_hp(slab2));
    CHECK(hg_hp(slab)->set == 0 && hg_hp(user)->set == 1);
    void *one[2] = { slab, user };
    hg_t_free(slab2);
    hg_check_heap();
    hg_drain(one, 2);
    /* One set: they share. */
    void *x = hs_t_alloc(64 * KiB, 0, 0), *y = hs_t_alloc(64 * KiB, 0, SM_F_USER);
    CHECK(hs_hp_of(x) == hs_hp_of(y));
    void *two[2] = { x, y };
    hs_drain(two, 2);
}

/* Random spans, frees and resizes, the heap walked every 50 steps: the longest free run kept
 * incrementally must match a full scan, and every span keeps its contents. */
static void test_random_sequences(void)
{
    enum { n = 400 };
    void *b[n] = { 0 };
    size_t size[n] = { 0 };
    unsigned s = 12345;
    for (int step = 0; step < 8000; step++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        unsigned k = s % n;
        if (b[k] && (s >> 9) % 4 == 0) {
            size_t want = (size_t)((s >> 12) % 64 + 1) * 4096;
            sm_mctx_t c = sm_mctx_block(b[k], 0, 0);
            if (hg_resize(&c, want)) {
                size_t keep = want < size[k] ? want : size[k];
                CHECKF(check_verify(b[k], keep, k), "span %u lost its contents in a resize", k);
                size[k] = want;
                check_fill(b[k], want, k);
            }
        } else if (b[k]) {
            CHECKF(check_verify(b[k], size[k], k), "span %u overwritten", k);
            hg_t_free(b[k]);
            b[k] = NULL;
        } else {
            size[k] = (s >> 8) % 3 ? (size_t)((s >> 12) % 16 + 1) * 4096 : (size_t)((s >> 12) % 300 + 1) * 4096;
            b[k] = hg_t_alloc(size[k], (s >> 20) % 2 ? 64 * KiB : 0, (s >> 22) % 2 ? SM_F_USER : 0);
            CHECK(b[k]);
            if (b[k])
                check_fill(b[k], size[k], k);
        }
        if (step % 50 == 0)
            hg_check_heap();
    }
    hg_drain(b, n);
}

/* Each bad free is reported exactly once, names its kind, and changes nothing. */
static void test_bad_frees_reported(void)
{
    sm_err_callback_set(on_error);
    char *p = hg_t_alloc(16 * KiB, 0, 0), *q = hg_t_alloc(8 * KiB, 0, 0);
    hg_check_heap();
    size_t used = hg_obj.used_pages;
    struct { void *ptr; size_t sized; sm_err_kind_t kind; } bad[] = {
        { p + 4096, 0, SM_ERR_INVALID_FREE },  /* inside a span */
        { p + 8, 0, SM_ERR_INVALID_FREE },     /* not page-aligned */
        { p, 17 * KiB, SM_ERR_INVALID_FREE },  /* sized free larger than the span */
        { p + 64 * KiB, 0, SM_ERR_DOUBLE_FREE }, /* never allocated: a free page */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errs.calls = 0;
        sm_mctx_t c = sm_mctx_block(bad[i].ptr, bad[i].sized, bad[i].sized ? SM_F_SIZED : 0);
        hg_free(&c);
        CHECKF(errs.calls == 1 && errs.kind == bad[i].kind && errs.ptr == bad[i].ptr,
               "bad free %zu: %d reports, kind %d", i, errs.calls, (int)errs.kind);
        CHECK(hg_obj.used_pages == used);
    }
    hg_t_free(q);
    errs.calls = 0;
    hg_t_free(q);
    CHECK(errs.calls == 1 && errs.kind == SM_ERR_DOUBLE_FREE && hg_obj.used_pages == used - 2);
    hg_check_heap();
    sm_err_callback_set(NULL);
    void *rest[1] = { p };
    hg_drain(rest, 1);
}

/* Free hugepages are purged whole one decay after a pass saw them, sparse used ones have their free
 * runs purged, dense ones keep theirs until SM_RELEASE_ALL; live spans keep their contents. */
static void test_release_decay(void)
{
    void *b[96];
    for (int i = 0; i < 96; i++) {
        b[i] = hs_t_alloc(64 * KiB, 64 * KiB, 0);
        check_fill(b[i], 64 * KiB, (unsigned)i);
    }
    /* Hugepage 0: dense (30 of 32 slabs); 1: sparse (2 of 32); 2: free. */
    struct hs_hp *h0 = hs_hp_of(b[0]), *h1 = hs_hp_of(b[32]), *h2 = hs_hp_of(b[64]);
    for (int i = 0; i < 96; i++)
        if ((i < 32 && i % 16 == 5) || (i >= 32 && i < 64 && i != 40 && i != 50) || i >= 64) {
            hs_t_free(b[i]);
            b[i] = NULL;
        }
    CHECK(h2->list == hs_on_dirty && h1->used == 32 && h0->used == 480);
    sm_release_t r = sm_release_request(1000, SM_RELEASE_DECAYED);
    hs_release(&r);
    CHECK(r.released == 0 && r.next_ms == 1010); /* stamped, due one decay later */
    r = sm_release_request(1005, SM_RELEASE_DECAYED);
    hs_release(&r);
    CHECK(r.released == 0);
    r = sm_release_request(1010, SM_RELEASE_DECAYED);
    hs_release(&r);
    CHECKF(r.released == (512 + 480) * 4096u, "released %zu", r.released);
    CHECK(h2->list == hs_on_clean && h1->npurged == 480 && h0->npurged == 0);
    hs_check_heap();
    r = sm_release_request(2000, SM_RELEASE_ALL);
    hs_release(&r);
    CHECK(r.released == 32 * 4096u && h0->npurged == 32);
    hs_check_heap();
    for (int i = 0; i < 64; i++)
        CHECKF(!b[i] || check_verify(b[i], 64 * KiB, (unsigned)i), "slab %d overwritten by a purge", i);
    /* A reused purged run no longer counts as purged. */
    void *again = hs_t_alloc(64 * KiB, 64 * KiB, 0);
    CHECK(hs_hp_of(again) == h0 && h0->npurged == 16);
    hs_t_free(again);
    hs_drain(b, 96);
}

/* Pages a pass is purging are taken: no span is carved from them meanwhile. */
static void test_taken_runs_not_reused(void)
{
    void *p = hs_t_alloc(64 * KiB, 0, 0);
    struct hs_hp *h = hs_hp_of(p);
    hs_t_free(p);
    struct hs_run runs[4];
    unsigned n = 0;
    hs_take_runs(h, runs, &n, 4, 1);
    CHECK(n == 1 && h->longest == 0 && h->list == hs_on_none);
    void *q = hs_t_alloc(64 * KiB, 0, 0);
    CHECK(q && hs_hp_of(q) != h);
    hs_set_range(h->taken, runs[0].at, runs[0].at + runs[0].n, false);
    hs_refresh(h);
    void *rest[1] = { q };
    hs_drain(rest, 1);
}

static void test_resize_in_place(void)
{
    char *p = hg_t_alloc(16 * KiB, 0, 0);
    check_fill(p, 16 * KiB, 7);
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    CHECK(hg_resize(&c, 40 * KiB) && hg_t_usable(p) == 40 * KiB);
    CHECK(check_verify(p, 16 * KiB, 7));
    CHECK(hg_resize(&c, 8 * KiB) && hg_t_usable(p) == 8 * KiB);
    hg_check_heap();
    char *q = hg_t_alloc(4096, 0, 0);
    CHECK(q == p + 8 * KiB); /* the freed tail is reused */
    CHECK(!hg_resize(&c, 16 * KiB)); /* q is in the way */
    CHECK(!hg_resize(&c, 4 * MiB));
    hg_check_heap();
    void *rest[2] = { p, q };
    hg_drain(rest, 2);
}

/* Beyond a hugepage, or an alignment above 2 MiB: the next layer's. Out of memory: NULL, ENOMEM. */
static void test_next_layer_and_oom(void)
{
    unsigned long before = fs_obj.allocs;
    void *big = hs_t_alloc(MiB + 1, 0, 0);
    CHECK(big && fs_obj.allocs == before + 1 && !hs_hp_of(big));
    hs_t_free(big);
    CHECK(fs_obj.frees >= 1 && fs_obj.bad_frees == 0);
    void *keep[600];
    size_t n = 0;
    fs_obj.limit_bytes = fs_obj.live_bytes; /* no new region */
    while (n < 600 && (keep[n] = hs_t_alloc(64 * KiB, 0, 0)) != NULL)
        n++;
    CHECK(n < 600 && errno == ENOMEM);
    fs_obj.limit_bytes = 0;
    hs_drain(keep, n);
}

/* thp:default hints a hugepage taken into use once HUGE_AFTER bytes are in use; thp:never never. */
static void test_huge_hint_threshold(void)
{
    size_t hinted = hs_obj.hinted_count;
    void *b[64] = { 0 };
    for (int i = 0; i < 8; i++)
        b[i] = hs_t_alloc(128 * KiB, 0, 0); /* 1 MiB: the first hugepage was taken before it */
    b[8] = hs_t_alloc(MiB, 0, 0);          /* fills the first hugepage */
    b[9] = hs_t_alloc(4096, 0, 0);         /* a new hugepage, with 2 MiB in use */
    CHECK(hs_hp_of(b[9]) != hs_hp_of(b[0]));
    /* Runs first, on fresh hugepages: the first was taken with nothing in use. */
    CHECK(!hs_hp_of(b[0])->hinted && hs_hp_of(b[9])->hinted && hs_obj.hinted_count == hinted + 1);
    hs_drain(b, 10);
    sm_conf.thp = SM_CONF_THP_NEVER;
    void *p = hg_t_alloc(4096, 0, 0);
    size_t before = hg_obj.hinted_count;
    void *many[8];
    for (int i = 0; i < 8; i++)
        many[i] = hg_t_alloc(2 * MiB, 0, 0);
    CHECK(hg_obj.hinted_count == before);
    sm_conf.thp = SM_CONF_THP_DEFAULT;
    hg_t_free(p);
    hg_drain(many, 8);
}

/* Threads allocate, fill, check and free, half of them each other's spans. */
#define THREADS 4
static void *volatile handoff[THREADS][64];
static void *thread_body(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, s = id * 2654435761u + 1;
    void *mine[32] = { 0 };
    size_t sz[32] = { 0 };
    for (int round = 0; round < 3000; round++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        unsigned k = s % 32;
        if (mine[k]) {
            if (!check_verify(mine[k], sz[k], id * 100 + k))
                CHECK(!"span overwritten");
            void *other = __atomic_exchange_n(&handoff[(id + 1) % THREADS][k], mine[k], __ATOMIC_ACQ_REL);
            if (other)
                hs_t_free(other);
            mine[k] = NULL;
        } else {
            sz[k] = (s >> 8) % (256 * KiB) + 1;
            mine[k] = hs_t_alloc(sz[k], s & 64 ? 64 * KiB : 0, 0);
            CHECK(mine[k]);
            if (mine[k])
                check_fill(mine[k], sz[k], id * 100 + k);
        }
    }
    for (int k = 0; k < 32; k++)
        if (mine[k])
            hs_t_free(mine[k]);
    return NULL;
}
static void test_threads(void)
{
    check_threads(THREADS, thread_body);
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < 64; k++)
            if (handoff[t][k]) {
                hs_t_free(handoff[t][k]);
                handoff[t][k] = NULL;
            }
    hs_drain(NULL, 0);
}

/* A child after fork allocates and frees: the lock was taken around the fork. */
static void test_fork(void)
{
    void *p = hg_t_alloc(64 * KiB, 0, 0);
    check_fill(p, 64 * KiB, 3);
    hg_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        hg_fork_child();
        void *q = hg_t_alloc(64 * KiB, 0, 0);
        int ok = q && check_verify(p, 64 * KiB, 3);
        hg_t_free(q);
        hg_t_free(p);
        _exit(ok && hg_obj.used_pages == 0 ? 0 : 1);
    }
    hg_fork_parent();
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    void *rest[1] = { p };
    hg_drain(rest, 1);
}

int main(void)
{
    check_begin("hugepage_glk");
    CHECK(hg_create() == 0 && hs_create() == 0);
    RUN_CASE(test_huge_hint_threshold);
    RUN_CASE(test_spans_and_alignment);
    RUN_CASE(test_dense_packing_prefers_fullest);
    RUN_CASE(test_best_fit_by_longest_run);
    RUN_CASE(test_lifetime_sets_apart);
    RUN_CASE(test_random_sequences);
    RUN_CASE(test_bad_frees_reported);
    RUN_CASE(test_release_decay);
    RUN_CASE(test_taken_runs_not_reused);
    RUN_CASE(test_resize_in_place);
    RUN_CASE(test_next_layer_and_oom);
    RUN_CASE(test_threads);
    RUN_CASE(test_fork);
    return check_end();
}
