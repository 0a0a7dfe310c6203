/* Unit test of the first-class heaps' core (sockets/heap/heap.h), without a socket: after every step of
 * random work the tlsf kind's invariants are walked (blocks end to end to each span's sentinel, no
 * two free blocks adjacent, prev_size and PREV_FREE right, every free block listed once in the list
 * of its size, the bitmaps agree, at most one empty mapped span); the region kind's stack
 * discipline, and a big block's span given back only when the block had it alone; reset and its
 * retain, over the OS and over a caller's range of old bytes; the limit; the spec parser; bad frees
 * raised exactly once. */
#include <stdint.h>
#include <sys/mman.h>
#include <sunmao/policies/err/callback.h>
#define SM_HEAP_RAISE sm_err_callback_raise
#include <sunmao/sockets/heap/heap.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static sm_heap_t *make(const char *spec)
{
    sm_heap_spec_t s;
    const char *at;
    const char *err = sm_heap_spec_parse(spec, &s, &at);
    CHECKF(!err, "spec %s: %s", spec, err);
    return err ? NULL : sm_heap_new(&s, NULL, 0);
}

/* Walks every span of a tlsf heap; the first broken invariant fails the case. most_empty: the
 * empty spans allowed (frees keep one; a reset keeps those used in the cycle and `retain`). */
static void tlsf_check_with(sm_heap_t *h, size_t most_empty)
{
    size_t free_blocks = 0, listed = 0, empty = 0, live = 0, usable = 0, mapped = 0, quick = 0;
    for (sm_heap_span_t *s = h->spans; s; s = s->next) {
        mapped += s->bytes;
        sm_ht_block_t *b = (sm_ht_block_t *)((char *)s + SM_HEAP_SPAN_HDR);
        if (s->solo) { /* its one block, aligned somewhere in the registered page */
            while ((uintptr_t)b < s->solo + 4096 && !((b->size & SM_HT_FIRST) && sm_ht_tag_ok(h, b) &&
                                                       sm_ht_span_of(b) == s))
                b = (sm_ht_block_t *)((char *)b + 16);
            CHECKF(sm_heaps_owner(sm_ht_next(b)) == NULL || sm_ht_size(sm_ht_next(b)) == 0,
                   "solo span %p: pages beyond its block's registered", (void *)s);
            CHECKF(sm_heaps_owner((char *)b + SM_HT_HDR) == h, "solo span %p: its block's page is not registered", (void *)s);
        }
        CHECKF((b->size & SM_HT_FIRST) && sm_ht_span_of(b) == s, "span %p: its first block does not name it", (void *)s);
        bool prev_free = false;
        size_t prev_size = 0;
        for (;;) {
            CHECKF(sm_ht_tag_ok(h, b), "block %p: tag", (void *)b);
            CHECKF(!!(b->size & SM_HT_PREV_FREE) == prev_free, "block %p: PREV_FREE %d, the block before free %d",
                   (void *)b, !!(b->size & SM_HT_PREV_FREE), prev_free);
            if (prev_free)
                CHECKF(b->prev_size == prev_size, "block %p: prev_size %zu, want %zu", (void *)b, (size_t)b->prev_size, prev_size);
            if (sm_ht_size(b) == 0)
                break; /* the sentinel */
            CHECKF((char *)b + sm_ht_size(b) <= (char *)s + s->bytes, "block %p runs past its span", (void *)b);
            bool is_free = b->size & SM_HT_FREE;
            CHECKF(!(is_free && prev_free), "two free blocks adjacent at %p", (void *)b);
            CHECKF(!(is_free && (b->size & SM_HT_QUICK)), "block %p free and quick", (void *)b);
            if (is_free) {
                free_blocks++;
                if (sm_ht_whole_span(b))
                    empty++;
            } else if (b->size & SM_HT_QUICK) {
                quick++;
            } else {
                live++;
                usable += sm_ht_size(b) - SM_HT_HDR;
            }
            prev_free = is_free, prev_size = sm_ht_size(b);
            if (check_case_failed)
                return;
            b = sm_ht_next(b);
        }
    }
    for (unsigned fl = 0; fl < SM_HT_FL_COUNT; fl++)
        for (unsigned sl = 0; sl < SM_HT_SL_COUNT; sl++) {
            bool bit = (h->u.t.fl_map >> fl & 1) && (h->u.t.sl_map[fl] >> sl & 1);
            CHECKF(bit == (h->u.t.heads[fl][sl] != NULL), "list (%u, %u): bitmap %d", fl, sl, bit);
            for (sm_ht_block_t *b = h->u.t.heads[fl][sl]; b; b = b->next_free) {
                unsigned f, l;
                sm_ht_mapping(sm_ht_size(b), &f, &l);
                CHECKF(f == fl && l == sl && (b->size & SM_HT_FREE), "block %p in list (%u, %u)", (void *)b, fl, sl);
                listed++;
                if (listed > free_blocks)
                    break;
            }
        }
    CHECKF(listed == free_blocks, "%zu free blocks, %zu listed", free_blocks, listed);
    size_t quick_listed = 0;
    for (unsigned q = 0; q < SM_HT_QUICK_CLASSES; q++) {
        size_t n = 0;
        for (sm_ht_block_t *b = h->u.t.quick[q]; b && n <= SM_HT_QUICK_MAX; b = b->next_free, n++)
            CHECKF((b->size & SM_HT_QUICK) && sm_ht_size(b) == 32u + 16u * q, "block %p on quick list %u", (void *)b, q);
        CHECKF(n == h->u.t.quick_n[q] && n <= SM_HT_QUICK_MAX, "quick list %u: %zu blocks, counted %u", q, n, h->u.t.quick_n[q]);
        quick_listed += n;
    }
    CHECKF(quick == quick_listed, "%zu quick blocks in the spans, %zu listed", quick, quick_listed);
    CHECKF(empty == h->u.t.empty_spans && empty <= most_empty, "%zu empty spans, counted %zu", empty, h->u.t.empty_spans);
    CHECKF(live == h->stats.blocks && usable == h->stats.allocated && mapped == h->stats.mapped,
           "live %zu/%zu usable %zu/%zu mapped %zu/%zu", live, h->stats.blocks, usable, h->stats.allocated, mapped,
           h->stats.mapped);
}

static void tlsf_check(sm_heap_t *h) { tlsf_check_with(h, 1); }

enum { SLOTS = 3000 };
static void *slot[SLOTS];
static size_t slot_len[SLOTS];

static void fill(void *p, size_t n, size_t seed) { memset(p, (int)(seed * 31 + 7), n); }
static bool filled(const void *p, size_t n, size_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != (unsigned char)(seed * 31 + 7))
            return false;
    return true;
}

/* The random tests' steps on slot i: realloc to n bytes (the common part kept, the block filled
 * again), and free (its contents checked first). */
static void resize_slot(sm_heap_t *h, int i, size_t n)
{
    void *q = sm_heap_resize(h, slot[i], n, "test");
    size_t keep = n < slot_len[i] ? n : slot_len[i];
    CHECKF(q && filled(q, keep, (size_t)i), "realloc %zu -> %zu lost the contents", slot_len[i], n);
    slot[i] = q, slot_len[i] = n;
    if (q)
        fill(q, n, (size_t)i);
}
static void free_slot(sm_heap_t *h, int i)
{
    CHECKF(filled(slot[i], slot_len[i], (size_t)i), "block %d changed", i);
    sm_heap_release(h, slot[i], "test");
    slot[i] = NULL;
}

/* Random mallocs (some aligned, some beyond a chunk), frees and reallocs, invariants walked
 * every 500 steps and contents checked at every free. */
static void tlsf_invariants_under_random_work(void)
{
    sm_heap_t *h = make("tlsf(chunk=64KB)");
    if (!h)
        return;
    for (int step = 0; step < 60000 && !check_case_failed; step++) {
        int i = (int)(rnd() % SLOTS);
        uint64_t r = rnd();
        if (!slot[i]) {
            size_t n = r % 50 == 0 ? 1 + r % (200u << 10) : 1 + r % 1500;
            size_t align = r % 13 == 0 ? (size_t)32 << (r % 8) : 16;
            slot[i] = sm_heap_alloc(h, n, align);
            CHECKF(slot[i] && ((uintptr_t)slot[i] & (align - 1)) == 0, "alloc %zu align %zu", n, align);
            slot_len[i] = n;
            if (slot[i])
                fill(slot[i], n, (size_t)i);
        } else if (r % 4 == 0) {
            resize_slot(h, i, 1 + rnd() % 4000);
        } else {
            free_slot(h, i);
        }
        if (step % 500 == 0)
            tlsf_check(h);
    }
    for (int i = 0; i < SLOTS; i++)
        if (slot[i])
            sm_heap_release(h, slot[i], "test"), slot[i] = NULL;
    tlsf_check(h);
    CHECKF(h->stats.mapped <= (64u << 10), "all free: %zu bytes still mapped (one empty chunk is kept)", h->stats.mapped);
    sm_heap_delete(h);
}

static void tlsf_reset_keeps_retain(void)
{
    sm_heap_t *h = make("kind:tlsf,chunk:64KB,retain:128KB");
    if (!h)
        return;
    for (int i = 0; i < 2000; i++)
        CHECK(sm_heap_alloc(h, 500, 16) != NULL);
    size_t before = h->stats.mapped;
    CHECK(before >= (1u << 20));
    sm_heap_empty(h); /* every span served since create: all kept */
    tlsf_check_with(h, SIZE_MAX);
    CHECKF(h->stats.mapped == before && h->stats.blocks == 0, "after reset: %zu mapped, %zu before", h->stats.mapped, before);
    CHECK(sm_heap_alloc(h, 100, 16) != NULL); /* one span used in this cycle */
    sm_heap_empty(h);
    tlsf_check_with(h, 3);
    CHECKF(h->stats.mapped == (64u << 10) + (128u << 10), "after an idle cycle: %zu mapped", h->stats.mapped);
    sm_heap_empty(h);
    CHECKF(h->stats.mapped == (128u << 10), "after two idle cycles: %zu mapped", h->stats.mapped);
    /* two empty spans are kept by the reset itself (retain), and both are served from */
    CHECK(h->u.t.empty_spans == 2);
    void *a = sm_heap_alloc(h, 60000, 16), *b = sm_heap_alloc(h, 60000, 16);
    CHECK(a && b && h->stats.mapped == (128u << 10));
    sm_heap_delete(h);
}

static void region_stack_discipline(void)
{
    sm_heap_t *h = make("region(chunk=64KB)");
    if (!h)
        return;
    char *a = sm_heap_alloc(h, 1, 16), *b = sm_heap_alloc(h, 24, 16), *c = sm_heap_alloc(h, 100, 64);
    CHECK(a && b && c);
    CHECKF(b - a == 16 && sm_hr_usable(a) == 8 && sm_hr_usable(b) == 24, "a %p b %p", (void *)a, (void *)b);
    CHECK(((uintptr_t)c & 63) == 0);
    sm_heap_release(h, c, "test");
    CHECK(sm_heap_alloc(h, 24, 16) == c); /* c was the last block: its memory came back */
    sm_heap_release(h, b, "test");     /* not the last: its memory waits for the reset */
    CHECK(sm_heap_alloc(h, 8, 16) == c + 32);
    CHECK(h->stats.blocks == 3 && h->stats.allocated == 8 + 24 + 8);
    /* spans in a row, each block inside one */
    for (int i = 0; i < 3000; i++) {
        char *p = sm_heap_alloc(h, 100, 16);
        CHECK(p && h->u.r.at && p > (char *)h->u.r.at && p + 100 <= (char *)h->u.r.at + h->u.r.at->bytes);
    }
    size_t before = h->stats.mapped;
    CHECK(before >= 4 * (64u << 10));
    sm_heap_empty(h); /* all used this cycle: kept */
    CHECK(h->stats.mapped == before && h->u.r.cur == (char *)h->u.r.at + SM_HEAP_SPAN_HDR + 8);
    sm_heap_empty(h); /* idle for a cycle: one chunk (retain) kept */
    CHECK(h->stats.mapped == (64u << 10) && h->u.r.cur == (char *)h->u.r.at + SM_HEAP_SPAN_HDR + 8);
    sm_heap_delete(h);
}

/* Random work on a region heap: small blocks, big ones (a quarter of a chunk and more, some past a
 * chunk), frees in any order, reallocs, and a reset every so often; every live block's contents
 * are checked after each free and before each reset, so memory given back under a live block
 * faults or breaks a pattern. */
static void region_random_work(void)
{
    sm_heap_t *h = make("region(chunk=64KB)");
    if (!h)
        return;
    enum { N = 200 };
    for (int step = 0; step < 40000 && !check_case_failed; step++) {
        int i = (int)(rnd() % N);
        uint64_t r = rnd();
        if (step % 500 == 499) {
            for (int j = 0; j < N; j++) {
                if (slot[j])
                    CHECKF(filled(slot[j], slot_len[j], (size_t)j), "block %d changed before a reset", j);
                slot[j] = NULL;
            }
            sm_heap_empty(h);
        } else if (!slot[i]) {
            /* big: a quarter of a chunk and more, or a chunk to within a page (it may fill a span), or
             * more than a chunk (a solo span) */
            size_t n = r % 20 == 0 ? (16u << 10) + r % (48u << 10) : r % 20 == 1 ? 61400 + r % 4000
                     : r % 97 == 0 ? (70u << 10) + r % 4096 : 1 + r % 700;
            slot[i] = sm_heap_alloc(h, n, r % 11 == 0 ? 64 : 16);
            CHECKF(slot[i] != NULL, "alloc %zu", n);
            slot_len[i] = n;
            if (slot[i])
                fill(slot[i], n, (size_t)i);
        } else if (r % 5 == 0) {
            resize_slot(h, i, 1 + rnd() % 3000);
        } else {
            free_slot(h, i);
            for (int j = 0; j < N && !check_case_failed; j++)
                if (slot[j])
                    CHECKF(filled(slot[j], slot_len[j], (size_t)j), "block %d changed after block %d's free", j, i);
        }
    }
    for (int j = 0; j < N; j++)
        slot[j] = NULL;
    sm_heap_delete(h);
}

/* A big block carved at the start of the current span (one a reset kept) shares that span with the
 * blocks carved after it: its free leaves them their memory. A big block given a span of its own
 * gives the span back at its free. */
static void region_big_block_frees_only_its_own_span(void)
{
    sm_heap_t *h = make("region(chunk=64KB)");
    if (!h)
        return;
    CHECK(sm_heap_alloc(h, 100, 16) != NULL);
    sm_heap_empty(h); /* the span is kept and current again, empty */
    sm_heap_span_t *kept = h->u.r.at;
    char *big = sm_heap_alloc(h, 62000, 16), *small = sm_heap_alloc(h, 100, 16);
    CHECKF(big == (char *)kept + SM_HEAP_SPAN_HDR + 16 && small > big && small < (char *)kept + kept->bytes,
           "big %p small %p span %p", (void *)big, (void *)small, (void *)kept);
    if (check_case_failed)
        return;
    fill(small, 100, 5);
    CHECK(sm_heap_alloc(h, 8000, 16) != NULL && h->u.r.at != kept); /* no room left: a new current span */
    size_t mapped = h->stats.mapped;
    sm_heap_release(h, big, "test");
    CHECKF(h->stats.mapped == mapped, "the shared span went back with the big block: %zu -> %zu mapped", mapped,
           h->stats.mapped);
    CHECK(filled(small, 100, 5));
    char *alone = sm_heap_alloc(h, 62000, 16); /* the current span has no room: a span of its own */
    CHECK(alone && h->stats.mapped == mapped + (64u << 10));
    sm_heap_release(h, alone, "test");
    CHECKF(h->stats.mapped == mapped, "a big block's own span stayed: %zu mapped, %zu before", h->stats.mapped, mapped);
    CHECK(filled(small, 100, 5));
    sm_heap_delete(h);
}

/* A heap over the caller's range reads nothing of the range's old bytes as its own state: the
 * range, written all over before, is still the heap's one span after resets. */
static void range_with_old_bytes(void)
{
    static char range[256u << 10] __attribute__((aligned(4096)));
    const char *specs[] = { "tlsf", "region" };
    for (int k = 0; k < 2 && !check_case_failed; k++) {
        memset(range, 0x5a, sizeof range);
        sm_heap_spec_t s;
        const char *at;
        CHECK(sm_heap_spec_parse(specs[k], &s, &at) == NULL);
        sm_heap_t *h = sm_heap_new(&s, range, sizeof range);
        CHECKF(h != NULL, "%s: no heap over the range", specs[k]);
        if (!h)
            return;
        size_t mapped = h->stats.mapped;
        for (int cycle = 0; cycle < 3; cycle++) {
            char *p = sm_heap_alloc(h, 1000, 16);
            CHECKF(p && p > range && p + 1000 <= range + sizeof range, "%s cycle %d: block %p outside the range",
                   specs[k], cycle, (void *)p);
            if (p)
                fill(p, 1000, 9);
            sm_heap_empty(h);
            CHECKF(h->stats.mapped == mapped && h->spans && !h->spans->next, "%s cycle %d: %zu mapped, %zu before",
                   specs[k], cycle, h->stats.mapped, mapped);
        }
        sm_heap_delete(h);
    }
}

/* A heap reset per request maps nothing after the first cycle: each kind reuses what it kept. */
static void cycles_reuse_kept_spans(void)
{
    const char *specs[] = { "tlsf(chunk=64KB)", "region(chunk=64KB)" };
    for (int k = 0; k < 2; k++) {
        sm_heap_t *h = make(specs[k]);
        if (!h)
            return;
        size_t mapped = 0;
        for (int cycle = 0; cycle < 6; cycle++) {
            for (int i = 0; i < 20000; i++) {
                void *p = sm_heap_alloc(h, 16 + (size_t)(i * 7) % 200, 16);
                CHECK(p != NULL);
                if (i % 500 == 0)
                    CHECK(sm_heap_alloc(h, 40000, 16) != NULL); /* a span of its own (region) */
            }
            if (cycle == 1)
                mapped = h->stats.mapped;
            else if (cycle > 1)
                CHECKF(h->stats.mapped == mapped, "%s cycle %d: %zu mapped, %zu after cycle 1", specs[k], cycle,
                       h->stats.mapped, mapped);
            sm_heap_empty(h);
        }
        sm_heap_delete(h);
    }
}

/* Four threads share a heap and free each other's blocks; a fifth makes and destroys heaps of its
 * own meanwhile (the registry and the list change under the others' lookups). Under
 * ThreadSanitizer too (tests/build/tsan.sh). */
static sm_heap_t *shared;
static void *volatile handoff[4][256];
static int churn_done;
static void *share_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    long bad = 0;
    for (int round = 0; round < 30; round++) {
        for (int i = 0; i < 256; i++) {
            size_t n = 16 + (size_t)(i * 29 + me) % 3000;
            char *p = sm_heap_alloc(shared, n, 16);
            if (!p)
                return (void *)-1;
            memset(p, me + 1, n);
            char *old = __atomic_exchange_n(&handoff[(me + 1) % 4][i], p, __ATOMIC_ACQ_REL);
            if (old) /* this thread's, not yet taken by the next one */
                sm_heap_release(shared, old, "test");
            char *theirs = __atomic_exchange_n(&handoff[me][i], NULL, __ATOMIC_ACQ_REL);
            if (theirs) { /* the thread before this one's block, freed here */
                bad += sm_heaps_owner(theirs) != shared || theirs[0] != (char)((me + 3) % 4 + 1);
                sm_heap_release(shared, theirs, "test");
            }
        }
    }
    return (void *)bad;
}
static void *churn_worker(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&churn_done, __ATOMIC_ACQUIRE)) {
        sm_heap_t *h = make("region(chunk=64KB)");
        for (int i = 0; h && i < 2000; i++)
            sm_heap_alloc(h, 100, 16);
        if (h)
            sm_heap_delete(h);
    }
    return NULL;
}
static void threads_share_a_heap(void)
{
    shared = make("tlsf(chunk=64KB)");
    if (!shared)
        return;
    pthread_t churn;
    pthread_create(&churn, NULL, churn_worker, NULL);
    check_threads(4, share_worker);
    __atomic_store_n(&churn_done, 1, __ATOMIC_RELEASE);
    pthread_join(churn, NULL);
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 256; i++)
            if (handoff[t][i])
                sm_heap_release(shared, handoff[t][i], "test");
    tlsf_check(shared);
    CHECK(shared->stats.blocks == 0);
    sm_heap_delete(shared);
}

/* A block larger than a chunk gets a solo span: one registry word for its start, whatever its
 * size; it keeps its size when shrunk, goes back when freed, and a reset drops it. */
static void huge_blocks_register_one_page(void)
{
    const char *specs[] = { "tlsf(chunk=64KB)", "region(chunk=64KB)" };
    for (int k = 0; k < 2; k++) {
        sm_heap_t *h = make(specs[k]);
        if (!h)
            return;
        CHECK(sm_heap_alloc(h, 100, 16) != NULL);
        size_t before = h->stats.mapped;
        size_t big = (size_t)8 << 30; /* mapped NORESERVE: only the pages written count */
        char *p = sm_heap_alloc(h, big, 16);
        CHECKF(p != NULL, "%s: no 8 GiB block", specs[k]);
        if (!p)
            return;
        CHECK(sm_heaps_owner(p) == h && sm_heaps_owner(p + ((size_t)1 << 30)) == NULL &&
              sm_heaps_owner(p + big - 1) == NULL);
        CHECK(sm_heap_usable_locked(h, p) >= big);
        p[0] = 1, p[big - 1] = 2;
        CHECK(sm_heap_resize(h, p, 1u << 20, "test") == p && sm_heap_usable_locked(h, p) >= big);
        if (h->kind == SM_HEAP_TLSF)
            tlsf_check(h);
        sm_heap_release(h, p, "test");
        CHECKF(h->stats.mapped == before && sm_heaps_owner(p) == NULL, "%s: %zu mapped after the free, %zu before",
               specs[k], h->stats.mapped, before);
        /* aligned: freed, its span goes back; then one left to a reset */
        char *a = sm_heap_alloc(h, 200u << 10, 1u << 20);
        CHECK(a && ((uintptr_t)a & ((1u << 20) - 1)) == 0 && sm_heaps_owner(a) == h);
        sm_heap_release(h, a, "test");
        CHECKF(h->stats.mapped == before, "%s: an aligned solo block's span stayed: %zu mapped", specs[k], h->stats.mapped);
        char *q = sm_heap_alloc(h, 200u << 10, 1u << 20);
        CHECK(q && ((uintptr_t)q & ((1u << 20) - 1)) == 0 && sm_heaps_owner(q) == h);
        if (h->kind == SM_HEAP_TLSF)
            tlsf_check(h);
        sm_heap_empty(h);
        CHECKF(h->stats.mapped <= before && sm_heaps_owner(q) == NULL, "%s: after reset %zu mapped", specs[k], h->stats.mapped);
        sm_heap_delete(h);
    }
}

static void limit_counts_refusals(void)
{
    sm_heap_t *h = make("kind:region,chunk:64KB,limit:128KB");
    if (!h)
        return;
    int n = 0;
    while (sm_heap_alloc(h, 1000, 16))
        n++;
    CHECKF(n >= 120 && n <= 130 && h->stats.refused == 1 && h->stats.mapped == (128u << 10), "%d blocks, %llu refused", n,
           (unsigned long long)h->stats.refused);
    sm_heap_delete(h);
}

static void bad_frees_raised_once(void)
{
    sm_err_callback_set(on_error);
    err_reset();
    /* a pointer at the start of a heap's first page, with an unmapped page below: reported, and
     * the header it would have is not read */
    char *guard = sm_plat_map(3 * 4096);
    CHECK(guard && mprotect(guard, 4096, PROT_NONE) == 0);
    sm_heap_spec_t spec;
    const char *at;
    sm_heap_spec_parse("tlsf", &spec, &at);
    sm_heap_t *in = sm_heap_new(&spec, guard + 4096, 2 * 4096);
    CHECK(in && sm_heaps_owner(guard + 4096) == in);
    sm_heap_release(in, guard + 4096, "test");
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 1);
    sm_heap_delete(in);
    sm_plat_unmap(guard, 3 * 4096);
    err_reset();
    const char *specs[] = { "tlsf", "region" };
    for (int k = 0; k < 2; k++) {
        sm_heap_t *h = make(specs[k]);
        if (!h)
            return;
        char *a = sm_heap_alloc(h, 64, 16), *b = sm_heap_alloc(h, 64, 16);
        sm_heap_release(h, a, "test");
        sm_heap_release(h, a, "test");
        sm_heap_release(h, b + 32, "test");
        sm_heap_release(h, b + 1, "test");
        CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == (unsigned long)k + 1 && err_counts[SM_ERR_INVALID_FREE] == 2ul * k + 2 &&
                   err_total() == 3ul * k + 3,
               "%s: %lu double, %lu invalid", specs[k], err_counts[SM_ERR_DOUBLE_FREE], err_counts[SM_ERR_INVALID_FREE]);
        CHECK(h->stats.blocks == 1 && h->stats.frees == 1);
        if (h->kind == SM_HEAP_TLSF)
            tlsf_check(h);
        sm_heap_delete(h);
    }
    sm_err_callback_set(NULL);
}

static void spec_values(void)
{
    sm_heap_spec_t s;
    const char *at;
    CHECK(!sm_heap_spec_parse("region(chunk=2MiB, limit=0x40000000, retain=0, name=abc)", &s, &at));
    CHECK(s.kind == SM_HEAP_REGION && s.chunk == (2u << 20) && s.limit == (1u << 30) && s.retain == 0 &&
          strcmp(s.name, "abc") == 0);
    CHECK(!sm_heap_spec_parse("chunk:100K", &s, &at) && s.chunk == sm_align_up(100u << 10, sm_plat_page_size()) &&
          s.retain == s.chunk && s.kind == SM_HEAP_TLSF);
    CHECK(!sm_heap_spec_parse("limit:3G", &s, &at) && s.limit == (size_t)3 << 30);
    const char *e = sm_heap_spec_parse("kind:tlsf,chunk:64KB,colour:red", &s, &at);
    CHECK(e && strcmp(at, "colour:red") == 0);
    e = sm_heap_spec_parse("slab(chunk=64KB)", &s, &at);
    CHECK(e && strcmp(at, "slab(chunk=64KB)") == 0);
}

int main(void)
{
    check_begin("heaps");
    RUN_CASE(tlsf_invariants_under_random_work);
    RUN_CASE(tlsf_reset_keeps_retain);
    RUN_CASE(region_stack_discipline);
    RUN_CASE(region_random_work);
    RUN_CASE(region_big_block_frees_only_its_own_span);
    RUN_CASE(range_with_old_bytes);
    RUN_CASE(cycles_reuse_kept_spans);
    RUN_CASE(threads_share_a_heap);
    RUN_CASE(huge_blocks_register_one_page);
    RUN_CASE(limit_counts_refusals);
    RUN_CASE(bad_frees_raised_once);
    RUN_CASE(spec_values);
    return check_end();
}
