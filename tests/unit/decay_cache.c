/* Unit test of the decay_cache add-on layer, over the real mmap_heap (through a counting layer, so
 * the test sees every map, unmap and purge) and over fake_next (out of memory). Ends with the
 * malloc-large loop (blocks of 5-25 MiB replaced at random, every page touched) timed on this
 * layer, on plain mmap_heap and on the C library's malloc: its page faults are what the layer is for.
 * DECAY_LARGE_ITERS sets the loop's length (default 300; the report used 2000). */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/mutex.h>

/* mmap_heap, seen through a layer that counts what reaches it. */
#define SM_LAYER mm
#define SM_ERR callback
#include <sunmao/os/mmap_heap.h>

/* frees counts only blocks the decay cache could have kept, so the small blocks poke() frees do not. */
static struct { unsigned long allocs, frees, purges, remaps, splits, joins; bool refuse_joins; } counts;
enum { cnt_thread_safe = 1, cnt_min_align = mm_min_align, cnt_zeroed = mm_zeroed, cnt_caps = SM_CAP_MAPPING };
static inline int cnt_create(void) { return mm_create(); }
static inline void *cnt_alloc(sm_mctx_t *c)
{
    __atomic_fetch_add(&counts.allocs, 1, __ATOMIC_RELAXED);
    return mm_alloc(c);
}
static inline void cnt_free(sm_mctx_t *c)
{
    sm_mctx_t m = *c;
    if (mm_getmeta(&m) && m.usable >= ((size_t)64 << 10))
        __atomic_fetch_add(&counts.frees, 1, __ATOMIC_RELAXED);
    mm_free(c);
}
static inline bool cnt_purge(sm_mctx_t *c)
{
    __atomic_fetch_add(&counts.purges, 1, __ATOMIC_RELAXED);
    return mm_purge(c);
}
static inline bool cnt_remap(sm_mctx_t *c, size_t n)
{
    __atomic_fetch_add(&counts.remaps, 1, __ATOMIC_RELAXED);
    return mm_remap(c, n);
}
static inline void *cnt_split(sm_mctx_t *c, size_t n)
{
    __atomic_fetch_add(&counts.splits, 1, __ATOMIC_RELAXED);
    return mm_split(c, n);
}
/* Blocks the kernel mapped next to each other are joined too: cases about other things refuse joins,
 * so what they count does not depend on where the kernel put their blocks. */
static inline bool cnt_join(sm_mctx_t *c, void *next)
{
    if (counts.refuse_joins)
        return false;
    bool ok = mm_join(c, next);
    if (ok)
        __atomic_fetch_add(&counts.joins, 1, __ATOMIC_RELAXED);
    return ok;
}
static inline bool cnt_getmeta(sm_mctx_t *c) { return mm_getmeta(c); }
static inline bool cnt_resize(sm_mctx_t *c, size_t n) { return mm_resize(c, n); }
static inline void cnt_release(sm_release_t *r) { mm_release(r); }
static inline void cnt_thread_exit(void) { mm_thread_exit(); }
static inline void cnt_stats(sm_stats_t *s) { mm_stats(s); }
static inline void cnt_fork_prepare(void) { mm_fork_prepare(); }
static inline void cnt_fork_parent(void) { mm_fork_parent(); }
static inline void cnt_fork_child(void) { mm_fork_child(); }
static inline void *cnt_meta_alloc(sm_mctx_t *c) { return mm_meta_alloc(c); }
static inline void cnt_meta_free(sm_mctx_t *c) { mm_meta_free(c); }

/* The instance under test: short decay so the test waits milliseconds, small bounds to hit them. */
#define SM_LAYER dc
#define SM_NEXT cnt
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_DECAY_MS 50
#define SM_OPT_MAX_BLOCKS 8
#define SM_OPT_MAX_BYTES ((size_t)96 << 20)
#define SM_OPT_MAX_BLOCK ((size_t)64 << 20)
#include <sunmao/layers/addon/decay_cache.h>

/* Lazy purging (MADV_FREE): purged blocks are not promised to read as zero. */
#define SM_LAYER dl
#define SM_NEXT cnt
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_DECAY_MS 50
#define SM_OPT_PURGE_LAZY 1
#include <sunmao/layers/addon/decay_cache.h>

/* Growing and splitting (SM_OPT_GROW), counted: dc's bounds and decay. */
#define SM_LAYER dg
#define SM_NEXT cnt
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_DECAY_MS 50
#define SM_OPT_MAX_BLOCKS 8
#define SM_OPT_MAX_BYTES ((size_t)96 << 20)
#define SM_OPT_GROW 1
#include <sunmao/layers/addon/decay_cache.h>

/* Defaults and growing, over a mmap_heap of its own: what libsunmao composes. */
#define SM_LAYER mb
#define SM_ERR callback
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER dd
#define SM_NEXT mb
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_GROW 1
#include <sunmao/layers/addon/decay_cache.h>

/* fake_next (its purge zeroes the fake's memory, which is not the OS's). */
#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER df
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/layers/addon/decay_cache.h>

_Static_assert(dc_thread_safe && !dc_zeroed && (int)dc_min_align == (int)mm_min_align, "decay_cache properties");

#define MiB ((size_t)1 << 20)

static int errors[SM_ERR_KIND_COUNT];
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors[kind], 1, __ATOMIC_RELAXED);
}

#define ALLOC(inst, sz, al) ({ sm_mctx_t c_ = sm_mctx_alloc((sz), (al), 0); inst##_alloc(&c_); c_; })
#define FREE(inst, p) do { sm_mctx_t f_ = sm_mctx_block((p), 0, 0); inst##_free(&f_); } while (0)

static bool is_mapped(void *p, size_t len) { return msync(p, len, MS_ASYNC) == 0; }
static bool unmapped(void *p) { return msync(p, 4096, MS_ASYNC) != 0 && errno == ENOMEM; }
static size_t resident_pages(void *p, size_t len)
{
    size_t page = sm_plat_page_size(), n = (len + page - 1) / page, r = 0;
    unsigned char vec[4096];
    for (size_t done = 0; done < n; done += sizeof vec) {
        size_t k = n - done < sizeof vec ? n - done : sizeof vec;
        if (mincore((char *)p + done * page, k * page, vec) != 0)
            return SIZE_MAX;
        for (size_t i = 0; i < k; i++)
            r += vec[i] & 1;
    }
    return r;
}
static void sleep_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}
/* Decay runs on the layer's own calls: a free of a small block is one. */
static void poke(void)
{
    sm_mctx_t c = ALLOC(dc, 4096, 16);
    FREE(dc, c.ptr);
}
/* One word per page, so multi-megabyte blocks are checked without writing every byte. */
static void fill_pages(void *p, size_t n, unsigned seed)
{
    for (size_t off = 0; off + sizeof(size_t) <= n; off += 4096)
        *(size_t *)((char *)p + off) = ((size_t)p + off) ^ seed;
}
static bool pages_ok(void *p, size_t n, unsigned seed)
{
    for (size_t off = 0; off + sizeof(size_t) <= n; off += 4096)
        if (*(size_t *)((char *)p + off) != (((size_t)p + off) ^ seed))
            return false;
    return true;
}
static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 509)
        if (p[i])
            return false;
    return p[n - 1] == 0;
}
static void start_clean(void)
{
    dc_flush();
    dl_flush();
    dg_flush();
    memset(errors, 0, sizeof errors);
    counts.refuse_joins = false;
}

static void freed_block_is_reused_without_a_new_mapping(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dc, 20 * MiB, 16);
    CHECK(a.ptr && (a.flags & SM_F_FRESH));
    check_fill(a.ptr, 20 * MiB, 1);
    FREE(dc, a.ptr);
    CHECK(is_mapped(a.ptr, 20 * MiB) && resident_pages(a.ptr, 20 * MiB) > 0);
    unsigned long allocs = counts.allocs, frees = counts.frees;
    sm_mctx_t b = ALLOC(dc, 16 * MiB, 16);
    CHECK(b.ptr == a.ptr && counts.allocs == allocs && counts.frees == frees);
    CHECK(!(b.flags & SM_F_FRESH)); /* dirty: still holds the old pattern */
    CHECK(check_verify(b.ptr, 16 * MiB, 1));
    check_fill(b.ptr, 16 * MiB, 2);
    CHECK(check_verify(b.ptr, 16 * MiB, 2));
    sm_mctx_t m = sm_mctx_block(b.ptr, 0, 0);
    CHECK(dc_getmeta(&m) && m.usable == 20 * MiB); /* 25% waste allowed: kept whole */
    FREE(dc, b.ptr);
    CHECK(counts.frees == frees);
}

static void too_large_block_is_shrunk(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dc, 40 * MiB, 16);
    fill_pages(a.ptr, 40 * MiB, 3);
    FREE(dc, a.ptr);
    unsigned long allocs = counts.allocs;
    sm_mctx_t b = ALLOC(dc, 8 * MiB, 16);
    CHECK(b.ptr == a.ptr && counts.allocs == allocs);
    sm_mctx_t m = sm_mctx_block(b.ptr, 0, 0);
    CHECK(dc_getmeta(&m) && m.usable == 8 * MiB);
    CHECK(unmapped((char *)b.ptr + 8 * MiB) && pages_ok(b.ptr, 8 * MiB, 3));
    FREE(dc, b.ptr);
}

static void idle_blocks_are_purged_then_returned(void)
{
    start_clean();
    size_t n = 8 * MiB;
    sm_mctx_t a = ALLOC(dc, n, 16);
    memset(a.ptr, 0x77, n);
    unsigned long purges = counts.purges, frees = counts.frees;
    FREE(dc, a.ptr);
    poke();
    CHECK(counts.purges == purges && resident_pages(a.ptr, n) == n / sm_plat_page_size());
    sleep_ms(80);
    poke();
    CHECKF(counts.purges == purges + 1, "%lu purges", counts.purges - purges);
    CHECK(is_mapped(a.ptr, n) && counts.frees == frees);
    CHECKF(resident_pages(a.ptr, n) == 0, "%zu pages resident after purge", resident_pages(a.ptr, n));
    sleep_ms(60);
    poke();
    CHECK(counts.frees == frees + 1 && unmapped(a.ptr));
    CHECK(dc_obj.blocks == 0 && dc_obj.bytes == 0);
}

static void purged_block_comes_back_fresh_and_zero(void)
{
    start_clean();
    size_t n = 6 * MiB;
    sm_mctx_t a = ALLOC(dc, n, 16);
    memset(a.ptr, 0x5a, n);
    FREE(dc, a.ptr);
    sleep_ms(80);
    poke();
    sm_mctx_t b = ALLOC(dc, n, 16);
    CHECK(b.ptr == a.ptr && (b.flags & SM_F_FRESH) && all_zero(b.ptr, n));
    FREE(dc, b.ptr);

    /* Lazily purged: reused, but not promised zero. */
    unsigned long purges = counts.purges;
    sm_mctx_t l = ALLOC(dl, n, 16);
    memset(l.ptr, 0x5a, n);
    FREE(dl, l.ptr);
    sleep_ms(80);
    sm_mctx_t k = ALLOC(dl, n, 16); /* the miss path runs the decay first */
    CHECK(counts.purges == purges + 1);
    CHECK(k.ptr == l.ptr && !(k.flags & SM_F_FRESH));
    FREE(dl, k.ptr);
}

static void bounds_on_blocks_and_bytes_hold(void)
{
    start_clean();
    enum { N = 10 };
    void *p[N];
    unsigned long frees = counts.frees;
    for (int i = 0; i < N; i++)
        p[i] = ALLOC(dc, MiB, 16).ptr;
    for (int i = 0; i < N; i++) {
        FREE(dc, p[i]);
        sleep_ms(i < 3 ? 5 : 0); /* distinct stamps for the oldest (the clock is coarse) */
    }
    CHECK(dc_obj.blocks == 8 && counts.frees == frees + 2);
    CHECK(unmapped(p[0]) && unmapped(p[1]) && is_mapped(p[2], MiB)); /* oldest first */

    start_clean();
    void *q[5];
    frees = counts.frees;
    for (int i = 0; i < 5; i++)
        q[i] = ALLOC(dc, 30 * MiB, 16).ptr;
    for (int i = 0; i < 5; i++) {
        FREE(dc, q[i]);
        sleep_ms(5);
        CHECK(dc_obj.bytes <= 96 * MiB);
    }
    CHECK(dc_obj.blocks == 3 && counts.frees == frees + 2 && unmapped(q[0]) && unmapped(q[1]));

    /* A block larger than the whole cache goes straight down. */
    frees = counts.frees;
    sm_mctx_t big = ALLOC(dc, 100 * MiB, 16);
    FREE(dc, big.ptr);
    CHECK(counts.frees == frees + 1 && dc_obj.blocks == 3);
    start_clean();
}

/* SM_OPT_MAX_BLOCK (64 MiB in dc): a block above it goes down at once although the cache has room
 * for its bytes, and evicts nothing; one of exactly the bound is kept. The small block is freed
 * after the large one's pages were written, so nothing slow runs while it is cached: a 64 MiB fill
 * under AddressSanitizer on a loaded machine outlasted the 50 ms decay, which returned it. */
static void blocks_above_max_block_go_down(void)
{
    start_clean();
    sm_mctx_t over = ALLOC(dc, 64 * MiB + 4096, 16);
    CHECK(over.ptr != NULL);
    fill_pages(over.ptr, 64 * MiB + 4096, 7);
    void *small = ALLOC(dc, 8 * MiB, 16).ptr;
    FREE(dc, small);
    CHECK(dc_obj.blocks == 1 && dc_obj.bytes == 8 * MiB);
    unsigned long frees = counts.frees;
    FREE(dc, over.ptr);
    CHECK(counts.frees == frees + 1 && unmapped(over.ptr));
    CHECK(dc_obj.blocks == 1 && dc_obj.bytes == 8 * MiB && is_mapped(small, 8 * MiB));
    sm_mctx_t at = ALLOC(dc, 64 * MiB, 16);
    CHECK(at.ptr != NULL && at.ptr != small);
    FREE(dc, at.ptr);
    CHECK(counts.frees == frees + 1 && dc_obj.blocks == 2 && dc_obj.bytes == 72 * MiB && is_mapped(at.ptr, 64 * MiB));
    start_clean();
}

static void double_free_is_reported_once(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dc, MiB, 16);
    FREE(dc, a.ptr);
    sm_mctx_t m = sm_mctx_block(a.ptr, 0, 0);
    CHECK(!dc_getmeta(&m)); /* a cached block is free: nobody owns it */
    FREE(dc, a.ptr);
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1 && errors[SM_ERR_INVALID_FREE] == 0);
    sm_mctx_t b = ALLOC(dc, MiB, 16), c = ALLOC(dc, MiB, 16);
    CHECK(b.ptr == a.ptr && c.ptr != a.ptr); /* the second free did not cache it twice */
    m = sm_mctx_block(b.ptr, 0, 0);
    CHECK(dc_getmeta(&m) && m.usable == MiB);
    FREE(dc, b.ptr);
    FREE(dc, c.ptr);
    int on_stack;
    FREE(dc, &on_stack); /* foreign: passed down, mmap_heap reports it */
    CHECK(errors[SM_ERR_INVALID_FREE] == 1 && errors[SM_ERR_DOUBLE_FREE] == 1);
    start_clean();
}

static void alignment_is_honoured(void)
{
    start_clean();
    static const size_t aligns[] = { 16, 4096, 65536, MiB, 4 * MiB };
    unsigned long allocs = counts.allocs;
    for (int round = 0; round < 3; round++)
        for (size_t j = 0; j < sizeof aligns / sizeof *aligns; j++) {
            sm_mctx_t c = ALLOC(dc, 4 * MiB, aligns[j]);
            CHECKF(c.ptr && sm_ptr_aligned(c.ptr, aligns[j]), "align %zu -> %p", aligns[j], c.ptr);
            fill_pages(c.ptr, 4 * MiB, 5);
            FREE(dc, c.ptr);
        }
    CHECKF(counts.allocs - allocs < 15, "%lu of 15 requests mapped", counts.allocs - allocs);
    start_clean();
}

static void out_of_memory_hands_the_cache_back(void)
{
    fk_obj.limit_bytes = 4 * MiB;
    sm_mctx_t a = ALLOC(df, 2 * MiB, 16);
    CHECK(a.ptr);
    FREE(df, a.ptr);
    CHECK(fk_obj.frees == 0 && df_obj.blocks == 1);
    sm_mctx_t b = ALLOC(df, 3 * MiB, 16); /* misses; the fake refuses until the cache is returned */
    CHECK(b.ptr && fk_obj.frees == 1 && df_obj.blocks == 0);
    errno = 0;
    sm_mctx_t c = ALLOC(df, 8 * MiB, 16);
    CHECK(!c.ptr && errno == ENOMEM);
    FREE(df, b.ptr);
    df_flush();
    CHECK(fk_obj.live_blocks == 0 && fk_obj.bad_frees == 0);
    fk_obj.limit_bytes = 0;
}

enum { THREADS = 4, LIVE = 4, ROUNDS = 250 };
static void *hammer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    void *p[LIVE] = { 0 };
    size_t n[LIVE] = { 0 };
    long bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 16) % LIVE);
        if (p[k]) {
            bad += !pages_ok(p[k], n[k], (unsigned)k + 100 * (unsigned)(uintptr_t)arg);
            FREE(dc, p[k]);
            p[k] = NULL;
        }
        n[k] = MiB + (seed >> 3) % (5 * MiB);
        sm_mctx_t c = ALLOC(dc, n[k], (seed & 1) ? 16 : 2 * MiB);
        if (!c.ptr)
            return (void *)-1L;
        p[k] = c.ptr;
        fill_pages(p[k], n[k], (unsigned)k + 100 * (unsigned)(uintptr_t)arg);
    }
    for (int k = 0; k < LIVE; k++)
        if (p[k]) {
            bad += !pages_ok(p[k], n[k], (unsigned)k + 100 * (unsigned)(uintptr_t)arg);
            FREE(dc, p[k]);
        }
    return (void *)bad;
}

static void threads_share_the_cache(void)
{
    start_clean();
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, hammer, (void *)i);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECKF(r == NULL, "thread %d: %ld corrupted blocks or OOM", i, (long)r);
    }
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
    CHECK(dc_obj.blocks <= 8 && dc_obj.bytes <= 96 * MiB);
    start_clean();
}

static void fork_hooks_leave_both_sides_usable(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dc, 2 * MiB, 16);
    FREE(dc, a.ptr);
    dc_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        dc_fork_child();
        sm_mctx_t c = ALLOC(dc, 2 * MiB, 16);
        _exit(c.ptr == a.ptr ? 0 : 1);
    }
    dc_fork_parent();
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sm_mctx_t b = ALLOC(dc, 2 * MiB, 16);
    CHECK(b.ptr == a.ptr);
    FREE(dc, b.ptr);
    start_clean();
}

/* SM_OPT_GROW: a miss larger than every cached block grows the largest dirty one with remap. */
static size_t cnt_usable(void *p)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    return mm_getmeta(&m) ? m.usable : 0;
}

static void grow_reuses_the_largest_dirty_block(void)
{
    start_clean();
    counts.refuse_joins = true;
    sm_mctx_t a = ALLOC(dg, 2 * MiB, 16), b = ALLOC(dg, 4 * MiB, 16), small = ALLOC(dg, MiB, 16);
    CHECK(a.ptr && b.ptr && small.ptr);
    fill_pages(a.ptr, 2 * MiB, 61);
    fill_pages(b.ptr, 4 * MiB, 62);
    fill_pages(small.ptr, MiB, 63);
    FREE(dg, a.ptr);
    FREE(dg, b.ptr);
    FREE(dg, small.ptr);
    CHECK(dg_obj.blocks == 3 && dg_obj.bytes == 7 * MiB);
    unsigned long allocs = counts.allocs, frees = counts.frees, remaps = counts.remaps, splits = counts.splits;
    size_t resident_before = resident_pages(b.ptr, 4 * MiB);
    sm_mctx_t g = ALLOC(dg, 6 * MiB, 16); /* larger than anything cached */
    CHECK(g.ptr && counts.remaps == remaps + 1 && counts.allocs == allocs && counts.frees == frees);
    CHECK(counts.splits == splits);
    if (!g.ptr)
        return;
    char *q = (char *)g.ptr;
    /* It is the 4 MiB block, in place or moved; either way the old address is no block any more. */
    CHECKF(q == (char *)b.ptr || (cnt_usable(b.ptr) == 0 && unmapped(b.ptr)), "got %p from %p", (void *)q, b.ptr);
    CHECK(q != (char *)a.ptr && q != (char *)small.ptr);
    CHECKF(cnt_usable(q) == 6 * MiB, "usable %zu", cnt_usable(q));
    if (cnt_usable(q) != 6 * MiB || (q != (char *)b.ptr && !unmapped(b.ptr)))
        return; /* the wrong block grew: what follows would read unmapped pages */
    sm_mctx_t m = sm_mctx_block(q, 0, 0);
    CHECK(dg_getmeta(&m) && m.usable == 6 * MiB); /* owned, not reported as cached */
    CHECK(!(g.flags & SM_F_FRESH)); /* dirty front */
    /* The front holds the old block's pages (fill_pages keys on the address: compare the old one). */
    bool front = true;
    for (size_t off = 0; off < 4 * MiB; off += 4096)
        front = front && *(size_t *)(q + off) == (((size_t)b.ptr + off) ^ 62);
    CHECK(front);
    CHECKF(resident_pages(q, 4 * MiB) == resident_before, "%zu of %zu pages resident after the grow",
           resident_pages(q, 4 * MiB), resident_before);
    CHECK(all_zero((unsigned char *)q + 4 * MiB, 2 * MiB));
    /* The others stay cached, untouched. */
    CHECK(dg_obj.blocks == 2 && dg_obj.bytes == 3 * MiB);
    CHECK(pages_ok(a.ptr, 2 * MiB, 61) && pages_ok(small.ptr, MiB, 63));
    fill_pages(q, 6 * MiB, 64);
    /* A second miss takes the next largest (2 MiB), not the 1 MiB one. */
    remaps = counts.remaps;
    sm_mctx_t h = ALLOC(dg, 5 * MiB, 16);
    CHECK(h.ptr && counts.remaps == remaps + 1 && counts.allocs == allocs && cnt_usable(h.ptr) == 5 * MiB);
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == MiB && dg_is_cached(small.ptr));
    CHECK(pages_ok(q, 6 * MiB, 64));
    /* Freed again, the grown blocks are cached at their new sizes. */
    FREE(dg, q);
    FREE(dg, h.ptr);
    CHECK(dg_obj.blocks == 3 && dg_obj.bytes == 12 * MiB && counts.frees == frees);
    sm_mctx_t again = ALLOC(dg, 6 * MiB, 16);
    CHECK(again.ptr == q && counts.remaps == remaps + 1 && counts.allocs == allocs && pages_ok(q, 6 * MiB, 64));
    FREE(dg, again.ptr);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);
    start_clean();
    CHECK(unmapped(q) && unmapped(h.ptr) && unmapped(small.ptr));
}

static void grow_skips_purged_and_overaligned(void)
{
    start_clean();
    counts.refuse_joins = true;
    sm_mctx_t a = ALLOC(dg, 2 * MiB, 16);
    memset(a.ptr, 0x3c, 2 * MiB);
    FREE(dg, a.ptr);
    sleep_ms(80);
    sm_mctx_t tick = ALLOC(dg, 4096, 16); /* small frees run the decay: the block gets purged */
    FREE(dg, tick.ptr);
    CHECK(dg_obj.blocks == 1 && resident_pages(a.ptr, 2 * MiB) == 0);
    unsigned long allocs = counts.allocs, remaps = counts.remaps;
    sm_mctx_t b = ALLOC(dg, 3 * MiB, 16); /* a purged block has nothing worth growing */
    CHECK(b.ptr && b.ptr != a.ptr && counts.allocs == allocs + 1 && counts.remaps == remaps);
    CHECK(dg_obj.blocks == 1 && dg_is_cached(a.ptr));
    FREE(dg, b.ptr);
    /* Alignment beyond the next layer's: mapped anew, the dirty 3 MiB block is not grown. */
    allocs = counts.allocs;
    sm_mctx_t c = ALLOC(dg, 5 * MiB, 4 * MiB);
    CHECK(c.ptr && sm_ptr_aligned(c.ptr, 4 * MiB) && counts.allocs == allocs + 1 && counts.remaps == remaps);
    CHECK(dg_obj.blocks == 2 && dg_is_cached(b.ptr));
    FREE(dg, c.ptr);
    start_clean();
}

/* SM_OPT_GROW: a block much larger than the request is split; the tail stays cached. */
static void split_keeps_the_tail_cached(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dg, 40 * MiB, 16);
    char *p = (char *)a.ptr;
    fill_pages(p, 40 * MiB, 71);
    FREE(dg, p);
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 40 * MiB);
    unsigned long allocs = counts.allocs, frees = counts.frees, remaps = counts.remaps, splits = counts.splits;
    sm_mctx_t b = ALLOC(dg, 8 * MiB, 16);
    CHECK(b.ptr == p && counts.allocs == allocs && counts.splits == splits + 1 && counts.remaps == remaps);
    CHECK(!(b.flags & SM_F_FRESH));
    CHECKF(cnt_usable(p) == 8 * MiB, "head %zu", cnt_usable(p));
    char *tail = p + 8 * MiB;
    CHECKF(cnt_usable(tail) == 32 * MiB, "tail %zu", cnt_usable(tail));
    if (cnt_usable(p) != 8 * MiB || cnt_usable(tail) != 32 * MiB)
        return; /* what follows would read unmapped pages */
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 32 * MiB && dg_is_cached(tail) && !dg_is_cached(p));
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    CHECK(dg_getmeta(&m) && m.usable == 8 * MiB); /* the head is the user's */
    m = sm_mctx_block(tail, 0, 0);
    CHECK(!dg_getmeta(&m)); /* the tail is free */
    CHECK(is_mapped(p, 40 * MiB) && counts.frees == frees); /* nothing unmapped */
    CHECK(pages_ok(p, 40 * MiB, 71)); /* both pieces kept their pages */
    fill_pages(p, 8 * MiB, 72);
    /* The tail serves the next request, without a mapping. */
    sm_mctx_t c = ALLOC(dg, 30 * MiB, 16);
    CHECK(c.ptr == tail && counts.allocs == allocs && counts.splits == splits + 1);
    CHECK(dg_obj.blocks == 0 && dg_obj.bytes == 0 && cnt_usable(tail) == 32 * MiB);
    CHECK(pages_ok(tail, 32 * MiB, 71) && pages_ok(p, 8 * MiB, 72));
    fill_pages(tail, 32 * MiB, 73);
    CHECK(pages_ok(p, 8 * MiB, 72));
    /* Each piece is freed on its own; the second is joined with the first, cached: one 40 MiB block
     * again, which a 40 MiB request takes whole, without a mapping. */
    unsigned long joins = counts.joins;
    FREE(dg, p);
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 8 * MiB && pages_ok(tail, 32 * MiB, 73));
    FREE(dg, tail);
    CHECKF(dg_obj.blocks == 1 && dg_obj.bytes == 40 * MiB && counts.frees == frees && counts.joins == joins + 1,
           "blocks %zu, joins %lu", dg_obj.blocks, counts.joins - joins);
    CHECK(dg_is_cached(p) && !dg_is_cached(tail) && cnt_usable(p) == 40 * MiB && cnt_usable(tail) == 0);
    FREE(dg, p); /* cached: a double free is caught */
    CHECK(errors[SM_ERR_DOUBLE_FREE] == 1 && dg_obj.blocks == 1);
    sm_mctx_t whole = ALLOC(dg, 40 * MiB, 16);
    CHECK(whole.ptr == p && counts.allocs == allocs && !(whole.flags & SM_F_FRESH));
    CHECK(pages_ok(p, 8 * MiB, 72) && pages_ok(tail, 32 * MiB, 73));
    FREE(dg, p);
    frees = counts.frees;
    dg_flush();
    CHECK(counts.frees == frees + 1 && unmapped(p) && unmapped(tail) && unmapped(p + 40 * MiB - 4096));
    CHECK(errors[SM_ERR_INVALID_FREE] == 0);

    /* Within the waste bound the block is handed out whole, not split. */
    sm_mctx_t w = ALLOC(dg, 10 * MiB, 16);
    FREE(dg, w.ptr);
    splits = counts.splits;
    sm_mctx_t x = ALLOC(dg, 6 * MiB, 16);
    CHECK(x.ptr == w.ptr && counts.splits == splits && cnt_usable(x.ptr) == 10 * MiB && dg_obj.blocks == 0);
    FREE(dg, x.ptr);
    start_clean();
}

/* A growth that the pages after the block cannot give in place is made with the cached block that
 * starts there (a realloc-grown buffer's previous copy): joined, the rest cut off and kept cached;
 * the block keeps its address and contents and nothing is mapped. */
static void resize_grows_into_a_cached_neighbour(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dg, 40 * MiB, 16);
    char *p = (char *)a.ptr;
    FREE(dg, p);
    sm_mctx_t b = ALLOC(dg, 8 * MiB, 16); /* the head; the 32 MiB tail stays cached right after it */
    CHECK(b.ptr == p && dg_obj.blocks == 1 && dg_obj.bytes == 32 * MiB && dg_is_cached(p + 8 * MiB));
    if (b.ptr != p || cnt_usable(p) != 8 * MiB)
        return;
    fill_pages(p, 8 * MiB, 81);
    unsigned long allocs = counts.allocs, joins = counts.joins, splits = counts.splits;

    /* More than the neighbour holds: refused, and the neighbour stays cached. */
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(!dg_resize(&r, 48 * MiB) && cnt_usable(p) == 8 * MiB);
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 32 * MiB && dg_is_cached(p + 8 * MiB) && counts.joins == joins);

    /* A next layer that refuses the join: refused, and the neighbour goes back to the cache. */
    counts.refuse_joins = true;
    r = sm_mctx_block(p, 0, 0);
    CHECK(!dg_resize(&r, 12 * MiB) && cnt_usable(p) == 8 * MiB);
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 32 * MiB && dg_is_cached(p + 8 * MiB));
    counts.refuse_joins = false;

    /* Grown by 4 MiB: joined, 28 MiB cut off and kept. */
    r = sm_mctx_block(p, 0, 0);
    CHECK(dg_resize(&r, 12 * MiB));
    CHECKF(cnt_usable(p) == 12 * MiB && cnt_usable(p + 12 * MiB) == 28 * MiB, "block %zu, rest %zu",
           cnt_usable(p), cnt_usable(p + 12 * MiB));
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 28 * MiB && dg_is_cached(p + 12 * MiB) && !dg_is_cached(p));
    CHECK(counts.joins == joins + 1 && counts.splits == splits + 1 && counts.allocs == allocs);
    CHECK(pages_ok(p, 8 * MiB, 81));
    fill_pages(p, 12 * MiB, 82);
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    CHECK(dg_getmeta(&m) && m.usable == 12 * MiB);

    /* Grown over the whole rest: nothing left to cache. */
    r = sm_mctx_block(p, 0, 0);
    CHECK(dg_resize(&r, 40 * MiB) && cnt_usable(p) == 40 * MiB && dg_obj.blocks == 0 && dg_obj.bytes == 0);
    CHECK(counts.allocs == allocs && pages_ok(p, 12 * MiB, 82) && is_mapped(p, 40 * MiB));
    fill_pages(p, 40 * MiB, 83);
    CHECK(pages_ok(p, 40 * MiB, 83));
    FREE(dg, p);
    CHECK(dg_obj.blocks == 1 && dg_obj.bytes == 40 * MiB && errors[SM_ERR_INVALID_FREE] == 0);
    start_clean();
}

/* Capability MOVE: a live block the program holds moves with the next layer's remap, its pages
 * carried (resident, not refaulted, not copied), its old address no longer a block; a pointer that
 * is not one of the next layer's blocks is refused and left as it was. */
static void move_carries_a_live_block_elsewhere(void)
{
    start_clean();
    counts.refuse_joins = true;
    size_t page = sm_plat_page_size();
    sm_mctx_t a = ALLOC(dg, 8 * MiB, 16);
    char *p = (char *)a.ptr;
    CHECK(p != NULL);
    if (!p)
        return;
    fill_pages(p, 8 * MiB, 91);
    /* The page after the block taken, so that it cannot grow where it is. */
    void *guard = mmap(p + 8 * MiB, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (guard != MAP_FAILED && guard != p + 8 * MiB) { /* a kernel that ignores the flag */
        munmap(guard, page);
        guard = MAP_FAILED;
    }
    unsigned long remaps = counts.remaps;
    size_t resident = resident_pages(p, 8 * MiB);
    sm_mctx_t r = sm_mctx_block(p, 0, 0);
    CHECK(dg_move(&r, 24 * MiB));
    char *q = (char *)r.ptr;
    CHECK(counts.remaps == remaps + 1 && cnt_usable(q) == 24 * MiB);
    if (guard != MAP_FAILED)
        CHECK(q != p && unmapped(p) && cnt_usable(p) == 0);
    bool same = true;
    for (size_t off = 0; off < 8 * MiB && same; off += page)
        same = *(size_t *)(q + off) == (((size_t)p + off) ^ 91);
    CHECK(same && resident_pages(q, 8 * MiB) == resident && all_zero((unsigned char *)q + 8 * MiB, 16 * MiB));
    fill_pages(q, 24 * MiB, 92);
    CHECK(pages_ok(q, 24 * MiB, 92));
    FREE(dg, q);
    CHECK(errors[SM_ERR_INVALID_FREE] == 0 && errors[SM_ERR_DOUBLE_FREE] == 0);

    char local[64];
    r = sm_mctx_block(local, 0, 0);
    CHECK(!dg_move(&r, 24 * MiB) && r.ptr == local && counts.remaps == remaps + 2);
    if (guard != MAP_FAILED)
        munmap(guard, page);
    start_clean();
}

/* The malloc-large shape: 20 slots, each iteration replaces a random one with a new block of
 * 5-25 MiB (allocated before the old one is freed, as `buf[i] = make_unique<char[]>(n)` does) and
 * writes every page of it. Returns seconds; *faults gets the minor page faults taken. */
typedef void *large_alloc_fn(size_t);
typedef void large_free_fn(void *);
static void *dd_malloc(size_t n) { return ALLOC(dd, n, 16).ptr; }
static void *mb_malloc(size_t n) { return ALLOC(mb, n, 16).ptr; }
SM_UNUSED static void libc_free(void *p) { free(p); }

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* *rss gets the resident memory the loop added, measured before its last blocks are freed. */
static double large_loop(large_alloc_fn *alloc, large_free_fn *release, int iterations, long *faults, size_t *rss,
                         bool *ok)
{
    size_t rss0 = rss_bytes();
    enum { SLOTS = 20 };
    void *slot[SLOTS] = { 0 };
    unsigned seed = 42;
    struct rusage r0, r1;
    struct timespec t0, t1;
    getrusage(RUSAGE_SELF, &r0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *ok = true;
    for (int i = 0; i < iterations; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 16) % SLOTS);
        seed = seed * 1103515245u + 12345u;
        size_t n = 5 * MiB + (size_t)(seed >> 4) % (20 * MiB + 1);
        char *p = (char *)alloc(n);
        if (!p) {
            *ok = false;
            break;
        }
        for (size_t off = 0; off < n; off += 4096)
            p[off] = (char)off;
        release(slot[k]);
        slot[k] = p;
    }
    *rss = rss_bytes() - rss0;
    for (int k = 0; k < SLOTS; k++)
        release(slot[k]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &r1);
    *faults = r1.ru_minflt - r0.ru_minflt;
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}
static void dd_drop(void *p) { if (p) FREE(dd, p); }
static void mb_drop(void *p) { if (p) FREE(mb, p); }

static void large_blocks_do_not_thrash(void)
{
    const char *env = getenv("DECAY_LARGE_ITERS");
    int iters = env ? atoi(env) : 300;
    long f_dd, f_mb, f_libc = 0;
    size_t r_dd, r_mb, r_libc = 0;
    bool ok1, ok2, ok3 = true;
    double t_dd = large_loop(dd_malloc, dd_drop, iters, &f_dd, &r_dd, &ok1);
    dd_flush(); /* so the loops after it start from the same state */
    double t_mb = large_loop(mb_malloc, mb_drop, iters, &f_mb, &r_mb, &ok2);
    double t_libc = 0;
#if !defined(__SANITIZE_ADDRESS__) /* ASan's malloc is not the C library's */
    t_libc = large_loop(malloc, libc_free, iters, &f_libc, &r_libc, &ok3);
#endif
    CHECK(ok1 && ok2 && ok3);
    printf("# malloc-large %d iterations (time, minor faults, RSS at the end):\n"
           "#   decay_cache %.3f s %8ld faults %4zu MiB\n#   mmap_heap   %.3f s %8ld faults %4zu MiB\n"
           "#   libc        %.3f s %8ld faults %4zu MiB\n",
           iters, t_dd, f_dd, r_dd >> 20, t_mb, f_mb, r_mb >> 20, t_libc, f_libc, r_libc >> 20);
    CHECKF(f_dd * 4 < f_mb, "decay_cache %ld faults, plain mmap_heap %ld", f_dd, f_mb);
    dd_flush();
}

int main(void)
{
    check_begin("decay_cache");
    sm_err_callback_set(on_error);
    CHECK(dc_create() == 0 && dl_create() == 0 && dg_create() == 0 && dd_create() == 0 && df_create() == 0);
    RUN_CASE(freed_block_is_reused_without_a_new_mapping);
    RUN_CASE(too_large_block_is_shrunk);
    RUN_CASE(idle_blocks_are_purged_then_returned);
    RUN_CASE(purged_block_comes_back_fresh_and_zero);
    RUN_CASE(bounds_on_blocks_and_bytes_hold);
    RUN_CASE(blocks_above_max_block_go_down);
    RUN_CASE(double_free_is_reported_once);
    RUN_CASE(alignment_is_honoured);
    RUN_CASE(out_of_memory_hands_the_cache_back);
    RUN_CASE(threads_share_the_cache);
    RUN_CASE(fork_hooks_leave_both_sides_usable);
    RUN_CASE(grow_reuses_the_largest_dirty_block);
    RUN_CASE(grow_skips_purged_and_overaligned);
    RUN_CASE(split_keeps_the_tail_cached);
    RUN_CASE(resize_grows_into_a_cached_neighbour);
    RUN_CASE(move_carries_a_live_block_elsewhere);
    RUN_CASE(large_blocks_do_not_thrash);
    return check_end();
}
