/* Unit test of the decay_cache add-on layer over fake next layers instead of the real mmap_heap
 * (tests/unit/decay_cache.c covers that): time is synthetic (L_release with the clock a test names,
 * sm_release_request(now_ms, how)), and the fakes count every call and fail on demand.
 *     dg :: fm   decay_cache(SM_OPT_GROW 1) over fake_mapping (split and remap, by copying)
 *     dp :: fk   decay_cache(SM_OPT_GROW 0) over fake_next (no capability at all)
 * Both: decay 1 s, at most 4 blocks and 16 MiB cached, blocks of 64 KiB and more. */
#include <pthread.h>
#include <time.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/mutex.h>

#define SM_LAYER fm
#include "tests/support/fake_mapping.h"
#define SM_LAYER dg
#define SM_NEXT fm
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_GROW 1
#define SM_OPT_MAX_BLOCKS 4
#define SM_OPT_MAX_BYTES ((size_t)16 << 20)
#include <sunmao/layers/addon/decay_cache.h>

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER dp
#define SM_NEXT fk
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_MAX_BLOCKS 4
#define SM_OPT_MAX_BYTES ((size_t)16 << 20)
#include <sunmao/layers/addon/decay_cache.h>

_Static_assert(dg_caps == SM_CAP_MOVE && dp_caps == SM_CAP_MOVE && fm_caps == SM_CAP_MAPPING,
               "decay_cache offers MOVE only");
_Static_assert(dg_min_align == 4096 && dp_min_align == 16 && !dg_zeroed, "properties follow the next layer");

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)
enum { DECAY = 1000 };

static int errors[SM_ERR_KIND_COUNT];
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors[kind], 1, __ATOMIC_RELAXED);
}
static int error_total(void)
{
    int n = 0;
    for (int k = 0; k < SM_ERR_KIND_COUNT; k++)
        n += errors[k];
    return n;
}

#define ALLOC(inst, sz) ({ sm_mctx_t c_ = sm_mctx_alloc((sz), 16, 0); inst##_alloc(&c_); c_; })
#define FREE(inst, p) do { sm_mctx_t f_ = sm_mctx_block((p), 0, 0); inst##_free(&f_); } while (0)
#define USABLE(inst, p) ({ sm_mctx_t m_ = sm_mctx_block((p), 0, 0); inst##_getmeta(&m_) ? m_.usable : 0; })
#define RELEASE(inst, now, how) ({ sm_release_t r_ = sm_release_request((now), (how)); inst##_release(&r_); r_; })
/* When the block at p entered the cache (its decay deadlines count from there); 0 if not cached. */
#define SINCE(inst, p)                                                                                               \
    ({                                                                                                               \
        uint64_t s_ = 0;                                                                                             \
        for (unsigned i_ = 0; i_ < 4; i_++)                                                                          \
            if (inst##_slots[i_].ptr == (char *)(p) && inst##_slots[i_].state != inst##_s_empty)             \
                s_ = inst##_slots[i_].since_ms;                                                                  \
        s_;                                                                                                          \
    })

/* Patterns on 64 bytes of every page and on the last 64: multi-megabyte blocks checked quickly. */
static void fill(void *p, size_t n, unsigned seed)
{
    for (size_t off = 0; off < n; off += 4096)
        check_fill((char *)p + off, n - off < 64 ? n - off : 64, seed + (unsigned)(off >> 12));
    if (n >= 64)
        check_fill((char *)p + n - 64, 64, seed ^ 0x5555u);
}
/* The page patterns alone: also for a page-aligned part [p, p + n) of a block filled from p - off
 * (then seed + off / 4096). */
static bool verify_pages(const void *p, size_t n, unsigned seed)
{
    for (size_t off = 0; off < n; off += 4096)
        if (!check_verify((const char *)p + off, n - off < 64 ? n - off : 64, seed + (unsigned)(off >> 12)))
            return false;
    return true;
}
static bool verify(const void *p, size_t n, unsigned seed)
{
    return verify_pages(p, n, seed) && (n < 64 || check_verify((const char *)p + n - 64, 64, seed ^ 0x5555u));
}
/* The same check for bytes that moved: the pattern was laid down at `was`, the bytes are now at p. */
static bool verify_moved(const void *p, const void *was, size_t n, unsigned seed)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t off = 0; off < n; off += 4096)
        for (size_t i = 0; i < 64 && off + i < n; i++)
            if (b[off + i] != check_pattern_byte((const char *)was + off, i, seed + (unsigned)(off >> 12)))
                return false;
    return true;
}
static bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i += 61)
        if (b[i])
            return false;
    return b[n - 1] == 0;
}
static void sleep_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}
static void start_clean(void)
{
    dg_flush();
    dp_flush();
    /* a clock past every deadline, with nothing cached: no deadline is left over from earlier cases */
    RELEASE(dg, UINT64_MAX / 2, SM_RELEASE_DECAYED);
    RELEASE(dp, UINT64_MAX / 2, SM_RELEASE_DECAYED);
    memset(errors, 0, sizeof errors);
    fm_obj.limit_bytes = 0, fm_obj.fail_split = 0, fm_obj.fail_remap = 0, fm_obj.fail_join = 0;
    fk_obj.limit_bytes = 0;
}
/* After a case: everything handed back leaves the fakes holding nothing, and nothing reached them that
 * breaks the contract. */
static void end_clean(void)
{
    dg_flush();
    dp_flush();
    CHECKF(fm_obj.live_blocks == 0 && fm_obj.regions == 0 && fk_obj.live_blocks == 0,
           "left below: %zu blocks (%zu regions) and %zu blocks", fm_obj.live_blocks, fm_obj.regions, fk_obj.live_blocks);
    CHECKF(fm_obj.bad_frees == 0 && fm_obj.bad_purges == 0 && fk_obj.bad_frees == 0 && fk_obj.bad_purges == 0,
           "contract violations below: %lu %lu %lu %lu", fm_obj.bad_frees, fm_obj.bad_purges, fk_obj.bad_frees,
           fk_obj.bad_purges);
}

/* A freed large block is kept and handed out again (dirty, contents intact) without the next layer;
 * while cached it is nobody's block; small blocks pass straight through. */
#define REUSE_CASE(inst, fake)                                                                                       \
    do {                                                                                                             \
        start_clean();                                                                                               \
        sm_mctx_t a = ALLOC(inst, MiB);                                                                              \
        CHECK(a.ptr != NULL);                                                                                        \
        fill(a.ptr, MiB, 1);                                                                                         \
        unsigned long allocs = fake##_obj.allocs, frees = fake##_obj.frees;                                          \
        FREE(inst, a.ptr);                                                                                           \
        CHECK(fake##_obj.frees == frees && inst##_obj.blocks == 1 && inst##_is_cached(a.ptr));                       \
        CHECK(USABLE(inst, a.ptr) == 0);                                                                             \
        sm_mctx_t b = ALLOC(inst, 800 * KiB);                                                                        \
        CHECK(b.ptr == a.ptr && fake##_obj.allocs == allocs && !(b.flags & SM_F_FRESH));                             \
        CHECK(verify(b.ptr, MiB, 1) && USABLE(inst, b.ptr) == MiB && inst##_obj.blocks == 0);                        \
        fill(b.ptr, MiB, 2);                                                                                         \
        FREE(inst, b.ptr);                                                                                           \
        sm_mctx_t s = ALLOC(inst, 60 * KiB);                                                                         \
        CHECK(s.ptr && fake##_obj.allocs == allocs + 1);                                                             \
        fill(s.ptr, 60 * KiB, 3);                                                                                    \
        CHECK(verify(s.ptr, 60 * KiB, 3));                                                                           \
        FREE(inst, s.ptr);                                                                                           \
        CHECK(fake##_obj.frees == frees + 1 && inst##_obj.blocks == 1 && verify(a.ptr, MiB, 2));                     \
        CHECK(error_total() == 0);                                                                                   \
        end_clean();                                                                                                 \
    } while (0)
static void reuse_over_mapping(void) { REUSE_CASE(dg, fm); }
static void reuse_over_plain(void) { REUSE_CASE(dp, fk); }

/* SM_OPT_GROW 1: a cached block far larger than the request is split; the head is handed out, the
 * tail stays cached with its contents, and serves the next request. If the split fails, the block
 * is shrunk with resize instead. */
static void split_of_oversize_block(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dg, 8 * MiB);
    char *p = (char *)a.ptr;
    fill(p, 8 * MiB, 11);
    FREE(dg, p);
    unsigned long allocs = fm_obj.allocs, splits = fm_obj.splits, frees = fm_obj.frees;
    sm_mctx_t b = ALLOC(dg, 2 * MiB);
    CHECK(b.ptr == p && fm_obj.splits == splits + 1 && fm_obj.allocs == allocs && fm_obj.frees == frees);
    CHECKF(USABLE(fm, p) == 2 * MiB && USABLE(dg, p) == 2 * MiB, "head usable %zu", USABLE(fm, p));
    char *tail = p + 2 * MiB;
    CHECKF(USABLE(fm, tail) == 6 * MiB && dg_is_cached(tail) && dg_obj.blocks == 1 && dg_obj.bytes == 6 * MiB,
           "tail usable %zu, cached %d", USABLE(fm, tail), dg_is_cached(tail));
    CHECK(verify(p, 8 * MiB, 11)); /* both pieces kept their bytes */
    fill(p, 2 * MiB, 12);
    sm_mctx_t c = ALLOC(dg, 5 * MiB); /* within the waste bound: the tail whole */
    CHECK(c.ptr == tail && fm_obj.allocs == allocs && fm_obj.splits == splits + 1 && dg_obj.blocks == 0);
    CHECK(verify_pages(tail, 6 * MiB, 11 + 512));
    fill(tail, 6 * MiB, 13);
    CHECK(verify(p, 2 * MiB, 12));
    /* freed, the pieces are one block again: an 8 MiB request takes it whole, nothing mapped */
    unsigned long joins = fm_obj.joins;
    FREE(dg, p);
    FREE(dg, tail);
    CHECKF(dg_obj.blocks == 1 && dg_obj.bytes == 8 * MiB && fm_obj.frees == frees && fm_obj.joins == joins + 1 &&
               dg_is_cached(p) && !dg_is_cached(tail) && fm_obj.live_blocks == 1,
           "blocks %zu, joins %lu", dg_obj.blocks, fm_obj.joins - joins);
    sm_mctx_t j = ALLOC(dg, 8 * MiB);
    CHECK(j.ptr == p && USABLE(dg, p) == 8 * MiB && fm_obj.allocs == allocs && !(j.flags & SM_F_FRESH));
    CHECK(verify(p, 2 * MiB, 12) && verify(tail, 6 * MiB, 13));
    FREE(dg, p);
    dg_flush();
    CHECK(fm_obj.frees == frees + 1 && fm_obj.live_blocks == 0 && fm_obj.regions == 0);

    /* the split refused: the block is cut down with resize; nothing is cached */
    sm_mctx_t d = ALLOC(dg, 8 * MiB);
    fill(d.ptr, 8 * MiB, 14);
    FREE(dg, d.ptr);
    fm_obj.fail_split = 1;
    unsigned long fails = fm_obj.split_fails, resizes = fm_obj.resizes;
    sm_mctx_t e = ALLOC(dg, 2 * MiB);
    CHECK(e.ptr == d.ptr && fm_obj.split_fails == fails + 1 && fm_obj.resizes == resizes + 1);
    CHECKF(USABLE(fm, e.ptr) == 2 * MiB && dg_obj.blocks == 0, "usable %zu", USABLE(fm, e.ptr));
    CHECK(verify_pages(e.ptr, 2 * MiB, 14));
    FREE(dg, e.ptr);
    CHECK(error_total() == 0);
    end_clean();
}

/* SM_OPT_GROW 1: a head freed in front of its cached tail is joined with it, even when the tail was
 * purged meanwhile: the block is dirty (not SM_F_FRESH), the head keeps its bytes and the tail reads
 * zero. A join the next layer refuses leaves two cached blocks. */
static void join_of_neighbours(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dg, 8 * MiB);
    char *p = (char *)a.ptr, *tail = p + 2 * MiB;
    FREE(dg, p);
    sm_mctx_t b = ALLOC(dg, 2 * MiB);
    CHECK(b.ptr == p && dg_is_cached(tail));
    fill(p, 2 * MiB, 21);
    sm_release_t r = RELEASE(dg, SINCE(dg, tail) + DECAY, SM_RELEASE_DECAYED);
    CHECK(r.released == 6 * MiB && all_zero(tail, 6 * MiB));
    unsigned long joins = fm_obj.joins, allocs = fm_obj.allocs;
    FREE(dg, p);
    CHECKF(dg_obj.blocks == 1 && dg_obj.bytes == 8 * MiB && fm_obj.joins == joins + 1 && !dg_is_cached(tail),
           "blocks %zu, bytes %zu", dg_obj.blocks, dg_obj.bytes);
    sm_mctx_t j = ALLOC(dg, 8 * MiB);
    CHECK(j.ptr == p && !(j.flags & SM_F_FRESH) && fm_obj.allocs == allocs);
    CHECK(verify(p, 2 * MiB, 21) && all_zero(tail, 6 * MiB));

    /* refused: head and tail stay two blocks, and both are handed back by a flush */
    FREE(dg, p);
    sm_mctx_t k = ALLOC(dg, 2 * MiB);
    CHECK(k.ptr == p && dg_is_cached(tail));
    fm_obj.fail_join = 1;
    unsigned long fails = fm_obj.join_fails, frees = fm_obj.frees;
    FREE(dg, p);
    CHECK(dg_obj.blocks == 2 && dg_obj.bytes == 8 * MiB && fm_obj.join_fails == fails + 1);
    CHECK(dg_is_cached(p) && dg_is_cached(tail));
    dg_flush();
    CHECK(fm_obj.frees == frees + 2 && fm_obj.live_blocks == 0);
    CHECK(error_total() == 0);
    end_clean();
}

/* SM_OPT_GROW 0 over a next layer with no MAPPING: the oversize block is handed out whole (the
 * fake's resize cannot shrink it), nothing is split or cached. */
static void oversize_block_without_mapping(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dp, 8 * MiB);
    fill(a.ptr, 8 * MiB, 21);
    FREE(dp, a.ptr);
    unsigned long allocs = fk_obj.allocs;
    sm_mctx_t b = ALLOC(dp, 2 * MiB);
    CHECK(b.ptr == a.ptr && fk_obj.allocs == allocs && dp_obj.blocks == 0);
    CHECKF(USABLE(dp, b.ptr) == 8 * MiB, "usable %zu", USABLE(dp, b.ptr));
    CHECK(verify(b.ptr, 8 * MiB, 21));
    /* a request larger than anything cached is a plain miss: the cached block stays */
    FREE(dp, b.ptr);
    sm_mctx_t c = ALLOC(dp, 9 * MiB);
    CHECK(c.ptr && c.ptr != a.ptr && fk_obj.allocs == allocs + 1 && dp_is_cached(a.ptr));
    FREE(dp, c.ptr);
    CHECK(error_total() == 0);
    end_clean();
}

/* SM_OPT_GROW 1: a miss larger than every cached block grows the largest dirty one with remap (here
 * a move: its bytes copied); a refused remap gives that block back and maps anew. */
static void remap_growth(void)
{
    start_clean();
    sm_mctx_t a = ALLOC(dg, 2 * MiB), s = ALLOC(dg, MiB);
    fill(a.ptr, 2 * MiB, 31);
    fill(s.ptr, MiB, 32);
    FREE(dg, a.ptr);
    FREE(dg, s.ptr);
    CHECK(dg_obj.blocks == 2);
    unsigned long allocs = fm_obj.allocs, remaps = fm_obj.remaps, moves = fm_obj.remap_moves, frees = fm_obj.frees;
    sm_mctx_t g = ALLOC(dg, 3 * MiB);
    CHECK(g.ptr && fm_obj.remaps == remaps + 1 && fm_obj.remap_moves == moves + 1 && fm_obj.allocs == allocs);
    CHECK(!(g.flags & SM_F_FRESH)); /* a dirty front */
    CHECKF(USABLE(fm, g.ptr) == 3 * MiB && USABLE(fm, a.ptr) == 0, "grown %zu, old %zu", USABLE(fm, g.ptr),
           USABLE(fm, a.ptr));
    CHECK(verify_moved(g.ptr, a.ptr, 2 * MiB, 31));
    CHECK(dg_obj.blocks == 1 && dg_is_cached(s.ptr) && verify(s.ptr, MiB, 32));
    fill(g.ptr, 3 * MiB, 33);
    FREE(dg, g.ptr);
    CHECK(fm_obj.frees == frees && dg_obj.blocks == 2 && dg_obj.bytes == 4 * MiB);
    dg_flush();

    /* the remap refused: that block goes back, and the request is mapped anew */
    sm_mctx_t b = ALLOC(dg, 2 * MiB);
    FREE(dg, b.ptr);
    fm_obj.fail_remap = 1;
    allocs = fm_obj.allocs, frees = fm_obj.frees;
    unsigned long fails = fm_obj.remap_fails;
    sm_mctx_t h = ALLOC(dg, 3 * MiB);
    CHECK(h.ptr && fm_obj.remap_fails == fails + 1 && fm_obj.frees == frees + 1 && fm_obj.allocs == allocs + 1);
    CHECK(USABLE(dg, h.ptr) == 3 * MiB && dg_obj.blocks == 0);
    fill(h.ptr, 3 * MiB, 34);
    CHECK(verify(h.ptr, 3 * MiB, 34));
    FREE(dg, h.ptr);
    CHECK(error_total() == 0);
    end_clean();
}

/* Decay on the release clock, with synthetic time: nothing before the decay time; at it the block's
 * pages are purged (zeroed: SM_F_ZERO) and it stays cached; at twice the decay it goes back to the
 * next layer. The release reports the bytes and the next time it wants to run. A purged block comes
 * back SM_F_FRESH and zero. A release of everything hands every cached block back. */
#define DECAY_CASE(inst, fake)                                                                                       \
    do {                                                                                                             \
        start_clean();                                                                                               \
        sm_mctx_t a = ALLOC(inst, 2 * MiB);                                                                          \
        fill(a.ptr, 2 * MiB, 41);                                                                                    \
        FREE(inst, a.ptr);                                                                                           \
        uint64_t since = SINCE(inst, a.ptr);                                                                         \
        CHECK(since != 0);                                                                                           \
        unsigned long purges = fake##_obj.purges, frees = fake##_obj.frees, releases = fake##_obj.releases;          \
        sm_release_t r = RELEASE(inst, since + DECAY - 1, SM_RELEASE_DECAYED);                                       \
        CHECKF(r.released == 0 && r.next_ms == since + DECAY && fake##_obj.purges == purges,                         \
               "early: released %zu, next %llu (want %llu)", r.released, (unsigned long long)r.next_ms,              \
               (unsigned long long)(since + DECAY));                                                                 \
        CHECK(verify(a.ptr, 2 * MiB, 41));                                                                           \
        r = RELEASE(inst, since + DECAY, SM_RELEASE_DECAYED);                                                        \
        CHECKF(r.released == 2 * MiB && fake##_obj.purges == purges + 1 && r.next_ms == since + 2 * DECAY,           \
               "purge: released %zu, %lu purges, next %llu", r.released, fake##_obj.purges - purges,                 \
               (unsigned long long)r.next_ms);                                                                       \
        CHECK(inst##_is_cached(a.ptr) && fake##_obj.frees == frees && all_zero(a.ptr, 2 * MiB));                     \
        r = RELEASE(inst, since + 2 * DECAY - 1, SM_RELEASE_DECAYED);                                                \
        CHECK(r.released == 0 && fake##_obj.purges == purges + 1 && inst##_is_cached(a.ptr));                        \
        r = RELEASE(inst, since + 2 * DECAY, SM_RELEASE_DECAYED);                                                    \
        CHECKF(r.released == 2 * MiB && fake##_obj.frees == frees + 1 && !inst##_is_cached(a.ptr) &&                 \
                   r.next_ms == UINT64_MAX && inst##_obj.blocks == 0,                                                \
               "return: released %zu, %lu frees", r.released, fake##_obj.frees - frees);                             \
        CHECK(fake##_obj.releases == releases + 4); /* every release reached the next layer */                      \
        /* purged, then reused: fresh and zero */                                                                    \
        sm_mctx_t b = ALLOC(inst, 2 * MiB);                                                                          \
        fill(b.ptr, 2 * MiB, 42);                                                                                    \
        FREE(inst, b.ptr);                                                                                           \
        since = SINCE(inst, b.ptr);                                                                                  \
        RELEASE(inst, since + DECAY, SM_RELEASE_DECAYED);                                                            \
        sm_mctx_t c = ALLOC(inst, 2 * MiB);                                                                          \
        CHECK(c.ptr == b.ptr && (c.flags & SM_F_FRESH) && all_zero(c.ptr, 2 * MiB));                                 \
        fill(c.ptr, 2 * MiB, 43);                                                                                    \
        /* a release of everything */                                                                                \
        sm_mctx_t d = ALLOC(inst, MiB);                                                                              \
        FREE(inst, c.ptr);                                                                                           \
        FREE(inst, d.ptr);                                                                                           \
        frees = fake##_obj.frees;                                                                                    \
        r = RELEASE(inst, sm_plat_now_ms(), SM_RELEASE_ALL);                                                         \
        CHECKF(r.released == 3 * MiB && fake##_obj.frees == frees + 2 && inst##_obj.blocks == 0 &&                   \
                   inst##_obj.bytes == 0,                                                                            \
               "release all: %zu bytes, %lu frees", r.released, fake##_obj.frees - frees);                           \
        CHECK(error_total() == 0);                                                                                   \
        end_clean();                                                                                                 \
    } while (0)
static void decay_on_release_over_mapping(void) { DECAY_CASE(dg, fm); }
static void decay_on_release_over_plain(void) { DECAY_CASE(dp, fk); }

/* At most 4 blocks and 16 MiB cached: the oldest go back first; a block larger than the whole cache
 * goes straight down. */
#define BOUNDS_CASE(inst, fake)                                                                                      \
    do {                                                                                                             \
        start_clean();                                                                                               \
        void *p[6];                                                                                                  \
        for (int i = 0; i < 6; i++) {                                                                                \
            p[i] = ALLOC(inst, MiB).ptr;                                                                             \
            fill(p[i], MiB, 50 + (unsigned)i);                                                                       \
        }                                                                                                            \
        unsigned long frees = fake##_obj.frees;                                                                      \
        for (int i = 0; i < 6; i++) {                                                                                \
            FREE(inst, p[i]);                                                                                        \
            sleep_ms(15); /* distinct stamps for the oldest (the clock is coarse) */                                 \
            CHECK(inst##_obj.blocks <= 4);                                                                           \
        }                                                                                                            \
        CHECKF(inst##_obj.blocks == 4 && fake##_obj.frees == frees + 2, "%zu cached, %lu returned",                  \
               inst##_obj.blocks, fake##_obj.frees - frees);                                                         \
        CHECK(!inst##_is_cached(p[0]) && !inst##_is_cached(p[1]) && USABLE(fake, p[0]) == 0);                        \
        for (int i = 2; i < 6; i++)                                                                                  \
            CHECK(inst##_is_cached(p[i]) && verify(p[i], MiB, 50 + (unsigned)i));                                   \
        start_clean();                                                                                               \
        frees = fake##_obj.frees;                                                                                    \
        sm_mctx_t big = ALLOC(inst, 20 * MiB); /* first: with GROW 1 it would grow a cached block */                 \
        FREE(inst, big.ptr);                                                                                         \
        CHECK(fake##_obj.frees == frees + 1 && inst##_obj.blocks == 0);                                              \
        void *q[3];                                                                                                  \
        for (int i = 0; i < 3; i++)                                                                                  \
            q[i] = ALLOC(inst, 6 * MiB).ptr;                                                                         \
        frees = fake##_obj.frees;                                                                                    \
        for (int i = 0; i < 3; i++) {                                                                                \
            FREE(inst, q[i]);                                                                                        \
            sleep_ms(15);                                                                                            \
            CHECK(inst##_obj.bytes <= 16 * MiB);                                                                     \
        }                                                                                                            \
        CHECK(inst##_obj.blocks == 2 && fake##_obj.frees == frees + 1 && !inst##_is_cached(q[0]));                   \
        CHECK(error_total() == 0);                                                                                   \
        end_clean();                                                                                                 \
    } while (0)
static void bounds_over_mapping(void) { BOUNDS_CASE(dg, fm); }
static void bounds_over_plain(void) { BOUNDS_CASE(dp, fk); }

/* A second free of a cached block is reported once and ignored: the block is cached once. */
#define DOUBLE_CASE(inst, fake)                                                                                      \
    do {                                                                                                             \
        start_clean();                                                                                               \
        sm_mctx_t a = ALLOC(inst, MiB);                                                                              \
        FREE(inst, a.ptr);                                                                                           \
        unsigned long frees = fake##_obj.frees;                                                                      \
        FREE(inst, a.ptr);                                                                                           \
        CHECKF(errors[SM_ERR_DOUBLE_FREE] == 1 && error_total() == 1, "%d reports", error_total());                  \
        CHECK(fake##_obj.frees == frees && fake##_obj.bad_frees == 0 && inst##_obj.blocks == 1);                     \
        sm_mctx_t b = ALLOC(inst, MiB), c = ALLOC(inst, MiB);                                                        \
        CHECK(b.ptr == a.ptr && c.ptr != a.ptr);                                                                     \
        FREE(inst, b.ptr);                                                                                           \
        FREE(inst, c.ptr);                                                                                           \
        memset(errors, 0, sizeof errors);                                                                            \
        end_clean();                                                                                                 \
    } while (0)
static void double_free_over_mapping(void) { DOUBLE_CASE(dg, fm); }
static void double_free_over_plain(void) { DOUBLE_CASE(dp, fk); }

/* The next layer out of memory: the cache is handed back and the request retried (over fake_mapping
 * the grow's move is what fails, and the block goes back the same way); when even that is not enough,
 * NULL with ENOMEM, and nothing is left behind. */
#define OOM_CASE(inst, fake)                                                                                         \
    do {                                                                                                             \
        start_clean();                                                                                               \
        fake##_obj.limit_bytes = 4 * MiB;                                                                            \
        sm_mctx_t a = ALLOC(inst, 2 * MiB);                                                                          \
        CHECK(a.ptr != NULL);                                                                                        \
        FREE(inst, a.ptr);                                                                                           \
        unsigned long frees = fake##_obj.frees;                                                                      \
        sm_mctx_t b = ALLOC(inst, 3 * MiB);                                                                          \
        CHECKF(b.ptr && fake##_obj.frees == frees + 1 && inst##_obj.blocks == 0, "%p, %lu frees, %zu cached", b.ptr,  \
               fake##_obj.frees - frees, inst##_obj.blocks);                                                         \
        fill(b.ptr, 3 * MiB, 61);                                                                                    \
        errno = 0;                                                                                                   \
        sm_mctx_t c = ALLOC(inst, 8 * MiB);                                                                          \
        CHECKF(!c.ptr && errno == ENOMEM, "%p, errno %d", c.ptr, errno);                                             \
        CHECK(verify(b.ptr, 3 * MiB, 61));                                                                           \
        FREE(inst, b.ptr);                                                                                           \
        fake##_obj.limit_bytes = 0;                                                                                  \
        CHECK(error_total() == 0);                                                                                   \
        end_clean();                                                                                                 \
    } while (0)
static void out_of_memory_over_mapping(void) { OOM_CASE(dg, fm); }
static void out_of_memory_over_plain(void) { OOM_CASE(dp, fk); }

int main(void)
{
    check_begin("decay_cache_fake");
    sm_err_callback_set(on_error);
    CHECK(dg_create() == 0 && dp_create() == 0 && fm_obj.creates == 1 && fk_obj.creates == 1);
    RUN_CASE(reuse_over_mapping);
    RUN_CASE(reuse_over_plain);
    RUN_CASE(split_of_oversize_block);
    RUN_CASE(join_of_neighbours);
    RUN_CASE(oversize_block_without_mapping);
    RUN_CASE(remap_growth);
    RUN_CASE(decay_on_release_over_mapping);
    RUN_CASE(decay_on_release_over_plain);
    RUN_CASE(bounds_over_mapping);
    RUN_CASE(bounds_over_plain);
    RUN_CASE(double_free_over_mapping);
    RUN_CASE(double_free_over_plain);
    RUN_CASE(out_of_memory_over_mapping);
    RUN_CASE(out_of_memory_over_plain);
    return check_end();
}
