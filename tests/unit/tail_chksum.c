/* Unit test of the tail_chksum add-on layer, once per chksum policy (magic, xor, crc32c):
 *     t_magic / t_xor / t_crc (err callback) :: pad :: fake
 * `pad` rounds each request up to a multiple of pad_round (so the block below has slack past T),
 * hides 64 more bytes after every block so that an overflow of up to 64 bytes stays inside memory
 * the fake owns, can grow a block in place up to 256 bytes (or refuse every resize), can place a
 * block 16 bytes before a page boundary (so the user's pointer starts a page and the layer must ask
 * pad where the block is), returns zero-filled blocks with SM_F_FRESH when pad_fresh is set, and
 * can keep freed blocks the ways other layers do (pad_keep). The fake's live-block and bad-free
 * counts show whether a block was passed down; err_record.h counts reports by kind. Also over pad:
 * t_fatal (crc32c, fatal: a child must abort with the one-line report) and t_lazy (xor,
 * SM_OPT_CHECK_REALLOC 0: only free compares the check value); and t_hit (xor) over hc, a next
 * layer with hit paths (as a thread cache has) over pad, driven as the socket drives them. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/chksum/crc32c.h>
#include <sunmao/policies/chksum/magic.h>
#include <sunmao/policies/chksum/xor.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/err/fatal.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

/* ---- pad: a next layer with slack, a hidden red zone, in-place growth and page-end blocks ---- */
enum { PAD_REDZONE = 64, PAD_GROW = 256, PAD_MAX = 8192, PAGE = 4096 };
static size_t pad_round = 1;  /* usable sizes are multiples of this (a power of two) */
static int pad_page_end;      /* 1: blocks of alignment 16 start 16 bytes before a page boundary */
static int pad_no_resize;     /* 1: every resize is refused */
static int pad_keep;          /* what a free does instead of giving the block back: */
enum {
    KEEP_LINKS = 1,  /* a thread cache over a slab: the block stays live to getmeta, its first 16
                      * bytes overwritten with links */
    KEEP_QUIET = 2,  /* a slab that cannot tell free from live and writes nothing into the block */
    KEEP_FORGET = 3, /* a quarantine: the block is no longer live to getmeta, its first 16 bytes
                      * overwritten; the memory stays (given back at the next reset) */
};
static unsigned long pad_kept;
static int pad_fresh;         /* 1: blocks come back zero-filled, with SM_F_FRESH */
static size_t pad_last_sized; /* the size of the last SM_F_SIZED free that reached pad, */
static int pad_last_unsized;  /* or 1 if it was unsized */
struct pad_block { void *p, *raw; size_t usable, cap; };
static struct pad_block pad_blocks[PAD_MAX], pad_forgotten[PAD_MAX];
static unsigned pad_n, pad_nforgotten;
static pthread_mutex_t pad_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t pad_up(size_t n) { return (n + pad_round - 1) & ~(pad_round - 1); }
static long pad_find(const void *p)
{
    for (unsigned i = 0; i < pad_n; i++)
        if (pad_blocks[i].p == p)
            return (long)i;
    return -1;
}
static void pad_give_back(void *raw)
{
    sm_mctx_t f = sm_mctx_block(raw, 0, 0);
    fk_free(&f);
}

#define SM_LAYER pad
#define SM_NEXT fk
enum { pad_thread_safe = 1, pad_min_align = 16, pad_zeroed = 0 };
static inline int pad_create(void) { return fk_create(); }
static inline void *pad_alloc(sm_mctx_t *c)
{
    size_t usable = pad_up(c->size), cap = usable + PAD_GROW;
    int at_end = pad_page_end && c->align <= 16;
    sm_mctx_t f = sm_mctx_alloc(cap + PAD_REDZONE + (at_end ? PAGE : 0), at_end ? PAGE : c->align, 0);
    char *raw = fk_alloc(&f);
    if (!raw)
        return c->ptr = NULL;
    char *p = at_end ? raw + PAGE - 16 : raw;
    if (pad_fresh) {
        memset(p, 0, cap + PAD_REDZONE);
        c->flags |= SM_F_FRESH;
    } else {
        c->flags &= ~(unsigned)SM_F_FRESH;
    }
    pthread_mutex_lock(&pad_lock);
    if (pad_n < PAD_MAX)
        pad_blocks[pad_n++] = (struct pad_block){ p, raw, usable, cap };
    pthread_mutex_unlock(&pad_lock);
    return c->ptr = p;
}
static inline void pad_free(sm_mctx_t *c)
{
    if (pad_keep == KEEP_LINKS || pad_keep == KEEP_QUIET) {
        if (pad_keep == KEEP_LINKS)
            memset(c->ptr, 0xEE, 16);
        pad_kept++;
        return;
    }
    pthread_mutex_lock(&pad_lock);
    long i = pad_find(c->ptr);
    void *raw = c->ptr; /* a pointer pad does not know goes down too: the fake counts it as a bad free */
    if (i >= 0) {
        pad_last_sized = (c->flags & SM_F_SIZED) ? c->size : 0;
        pad_last_unsized = !(c->flags & SM_F_SIZED);
        raw = pad_blocks[i].raw;
        if (pad_keep == KEEP_FORGET) {
            memset(c->ptr, 0xEE, 16);
            pad_forgotten[pad_nforgotten++] = pad_blocks[i];
            pad_kept++;
            raw = NULL;
        }
        pad_blocks[i] = pad_blocks[--pad_n];
    }
    pthread_mutex_unlock(&pad_lock);
    if (raw)
        pad_give_back(raw);
}
static inline bool pad_getmeta(sm_mctx_t *c)
{
    pthread_mutex_lock(&pad_lock);
    long i = pad_find(c->ptr);
    if (i >= 0)
        c->usable = pad_blocks[i].usable, c->owner = "pad";
    pthread_mutex_unlock(&pad_lock);
    return i >= 0;
}
static inline bool pad_resize(sm_mctx_t *c, size_t n)
{
    pthread_mutex_lock(&pad_lock);
    long i = pad_find(c->ptr);
    bool ok = i >= 0 && !pad_no_resize && pad_up(n) <= pad_blocks[i].cap;
    if (ok)
        pad_blocks[i].usable = pad_up(n);
    pthread_mutex_unlock(&pad_lock);
    return ok;
}
/* The pages of a block, moved (as mmap_heap's remap moves a large block's): a new block of n, the
 * old one's bytes copied, the old one given back. */
static int pad_no_move;       /* 1: every move is refused */
static unsigned long pad_moves;
static inline bool pad_move(sm_mctx_t *c, size_t n)
{
    pthread_mutex_lock(&pad_lock);
    long i = pad_find(c->ptr);
    struct pad_block old = i >= 0 ? pad_blocks[i] : (struct pad_block){ 0 };
    if (i >= 0 && !pad_no_move)
        pad_blocks[i] = pad_blocks[--pad_n];
    pthread_mutex_unlock(&pad_lock);
    if (i < 0 || pad_no_move)
        return false;
    sm_mctx_t a = sm_mctx_alloc(n, 16, 0);
    char *q = pad_alloc(&a);
    if (!q)
        return false;
    memcpy(q, old.p, old.cap + PAD_REDZONE < pad_up(n) ? old.cap + PAD_REDZONE : pad_up(n));
    pad_give_back(old.raw);
    c->ptr = q;
    pad_moves++;
    return true;
}
static inline bool pad_purge(sm_mctx_t *c) { return fk_purge(c); }
static inline void pad_release(sm_release_t *r) { fk_release(r); }
static inline void pad_thread_exit(void) { fk_thread_exit(); }
static inline void pad_fork_prepare(void) { fk_fork_prepare(); }
static inline void pad_fork_parent(void) { fk_fork_parent(); }
static inline void pad_fork_child(void) { fk_fork_child(); }
#define SM_LAYER_OFFERS SM_CAP_MOVE
#include <sunmao/core/layer_end.h>

/* The test gives a block the layer kept (leaked) back itself: the block below starts `off` before. */
static void pad_drop(void *p, size_t off)
{
    sm_mctx_t f = sm_mctx_block((char *)p - off, 0, 0);
    pad_free(&f);
}

/* ---- hc: a next layer with hit paths, as a thread cache has (single-threaded) ----
 * A LIFO list per 64-byte class up to 512 bytes, of at most hc_limit blocks: free_hit writes its
 * link over the block's first 16 bytes (the layer's header) and keeps it live in pad; an unsized
 * free_hit reads an owner word (pad's usable size, encoded), which free_miss checks it gets back
 * for the same block. Blocks of other sizes and alignments go to pad. */
enum { HC_CLASSES = 8, HC_MAX = 16 };
static void *hc_list[HC_CLASSES][HC_MAX];
static unsigned hc_count[HC_CLASSES], hc_limit = HC_MAX;
static unsigned long hc_alloc_hits, hc_free_hits, hc_sized, hc_owner_reads, hc_owner_passed, hc_owner_wrong;
static int hc_class(size_t size) { return size && size <= 64 * HC_CLASSES ? (int)((size + 63) / 64) - 1 : -1; }
static uintptr_t hc_owner(const void *p)
{
    sm_mctx_t m = sm_mctx_block((void *)p, 0, 0);
    return pad_getmeta(&m) ? (uintptr_t)m.usable << 1 | 1 : 0;
}

#define SM_LAYER hc
#define SM_NEXT pad
enum { hc_thread_safe = 0, hc_min_align = 16, hc_zeroed = 0 };
static inline int hc_create(void) { return pad_create(); }
static inline void *hc_alloc_hit(size_t size)
{
    int cls = hc_class(size);
    if (cls < 0 || !hc_count[cls])
        return NULL;
    hc_alloc_hits++;
    return hc_list[cls][--hc_count[cls]];
}
static inline void *hc_alloc_miss(sm_mctx_t *c)
{
    int cls = hc_class(c->size);
    if (cls >= 0 && c->align <= 16)
        c->size = (size_t)(cls + 1) * 64; /* the whole class: a sized free will be trusted to hold it */
    return pad_alloc(c);
}
static inline bool hc_free_hit(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (flags & SM_F_SIZED) {
        hc_sized++;
    } else {
        *owner_word = hc_owner(p);
        hc_owner_reads++;
        size = *owner_word >> 1;
    }
    int cls = hc_class(size);
    if (cls < 0 || hc_count[cls] >= hc_limit)
        return false;
    memset(p, 0xEE, 16);
    hc_list[cls][hc_count[cls]++] = p;
    hc_free_hits++;
    return true;
}
static inline void hc_free_miss(sm_mctx_t *c)
{
    if (c->flags & SM_F_OWNER) {
        hc_owner_passed++;
        hc_owner_wrong += c->owner_word != hc_owner(c->ptr);
    }
    pad_free(c);
}
/* The whole requests, for a layer above that does not use the hit paths (the layer under test does). */
static inline __attribute__((unused)) void *hc_alloc(sm_mctx_t *c)
{
    void *p = c->align <= 16 ? hc_alloc_hit(c->size) : NULL;
    return p ? (c->ptr = p) : hc_alloc_miss(c);
}
static inline __attribute__((unused)) void hc_free(sm_mctx_t *c)
{
    uintptr_t w = SM_OWNER_UNKNOWN;
    if (!hc_free_hit(c->ptr, c->size, c->flags, &w))
        hc_free_miss(c);
}
/* The rest is pad's. */
#define hc_getmeta pad_getmeta
#define hc_resize pad_resize
#define hc_purge pad_purge
#define hc_release pad_release
#define hc_thread_exit pad_thread_exit
#define hc_fork_prepare pad_fork_prepare
#define hc_fork_parent pad_fork_parent
#define hc_fork_child pad_fork_child
#define SM_LAYER_OFFERS SM_CAP_HIT
#include <sunmao/core/layer_end.h>

/* Gives every cached block back to pad. */
static void hc_flush(void)
{
    for (int cls = 0; cls < HC_CLASSES; cls++)
        while (hc_count[cls]) {
            sm_mctx_t f = sm_mctx_block(hc_list[cls][--hc_count[cls]], 0, 0);
            pad_free(&f);
        }
}

/* ---- the layers under test ---- */
#define SM_LAYER t_magic
#define SM_NEXT pad
#define SM_CHKSUM magic
#define SM_ERR callback
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER t_xor
#define SM_NEXT pad
#define SM_CHKSUM xor
#define SM_ERR callback
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER t_crc
#define SM_NEXT pad
#define SM_CHKSUM crc32c
#define SM_ERR callback
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER t_fatal
#define SM_NEXT pad
#define SM_CHKSUM crc32c
#define SM_ERR fatal
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER t_lazy
#define SM_NEXT pad
#define SM_CHKSUM xor
#define SM_ERR callback
#define SM_OPT_CHECK_REALLOC 0
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER t_hit
#define SM_NEXT hc
#define SM_CHKSUM xor
#define SM_ERR callback
#include <sunmao/layers/addon/tail_chksum.h>

_Static_assert(t_crc_thread_safe == 1 && t_crc_min_align == 16 && t_crc_zeroed == 0, "properties");
_Static_assert(t_crc_caps == SM_CAP_MOVE && t_hit_caps == SM_CAP_HIT,
               "tail_chksum offers HIT and MOVE where its next layer does");

/* The last report's detail, besides the counts. */
static char last_detail[256];
static const void *last_ptr;
static void on_error_detail(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    on_error(kind, layer, ptr, detail);
    snprintf(last_detail, sizeof last_detail, "%s", detail ? detail : "");
    last_ptr = ptr;
}

/* One layer's operations, so each case runs over every policy. */
struct layer {
    const char *name;
    void *(*alloc)(sm_mctx_t *);
    void (*free)(sm_mctx_t *);
    bool (*getmeta)(sm_mctx_t *);
    bool (*resize)(sm_mctx_t *, size_t);
    bool (*move)(sm_mctx_t *, size_t);
};
#define LAYER(L) { #L, L##_alloc, L##_free, L##_getmeta, L##_resize, L##_move }
static const struct layer layers[] = { LAYER(t_magic), LAYER(t_xor), LAYER(t_crc) };
static const struct layer lazy = LAYER(t_lazy);
static const struct layer *cur;

/* noinline: gcc, seeing a block start 16 bytes before the end of a page in pad, took the writes
 * past it for writes out of bounds (-Wstringop-overflow). */
static __attribute__((noinline)) void *get(const struct layer *l, size_t n, size_t align, unsigned flags)
{
    sm_mctx_t c = sm_mctx_alloc(n, align, flags);
    void *p = l->alloc(&c);
    CHECKF(p != NULL && c.ptr == p, "%s: alloc of %zu bytes failed", l->name, n);
    CHECKF(c.size == n, "%s: alloc changed the request's size to %zu", l->name, c.size);
    return p;
}
static void put(const struct layer *l, void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    l->free(&c);
}
static size_t usable(const struct layer *l, void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    return l->getmeta(&c) ? c.usable : (size_t)-1;
}
static bool resize(const struct layer *l, void *p, size_t n)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    return l->resize(&c, n);
}
/* The block p moved to n bytes by the layer's move, or NULL if it was not moved. */
static void *move(const struct layer *l, void *p, size_t n)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    bool moved = l->move(&c, n);
    CHECKF(moved ? c.ptr != p : c.ptr == p, "%s: move answered %d but the pointer says otherwise", l->name, moved);
    return moved ? c.ptr : NULL;
}
/* Writes k bytes past the end of block p of n bytes, each different from what was there. */
static void overflow(void *p, size_t n, size_t k, unsigned seed)
{
    unsigned char *b = (unsigned char *)p + n;
    for (size_t i = 0; i < k; i++)
        b[i] ^= (unsigned char)(1 + (seed * 31 + i * 7) % 255);
}
/* Changes the k bytes right before block p (k <= 16: the header), each differently. */
static void underflow(void *p, size_t k, unsigned seed)
{
    unsigned char *b = (unsigned char *)p;
    for (size_t i = 1; i <= k; i++)
        b[-(ptrdiff_t)i] ^= (unsigned char)(1 + (seed * 37 + i * 11) % 255);
}
/* What the layer asks of the next layer for n bytes at alignment align, and its offset there. */
static size_t offset_of(size_t align) { return align <= 16 ? 16 : align; }
static size_t footprint(size_t n, size_t align) { return offset_of(align) + (n < 8 ? 8 : n) + 8; }
/* The size a block of n bytes is taken to have once its header is damaged: all pad holds past the
 * header, less T. */
static size_t damaged_size(size_t n) { return pad_up(footprint(n, 16)) - 24; }

static void forget_all(void)
{
    for (unsigned i = 0; i < pad_nforgotten; i++)
        pad_give_back(pad_forgotten[i].raw);
    pad_nforgotten = 0;
}
static void reset(size_t round)
{
    err_reset();
    last_detail[0] = 0;
    pad_round = round;
    pad_fresh = 0;
    pad_keep = 0;
    pad_kept = 0;
    pad_page_end = 0;
    pad_no_resize = 0;
    pad_no_move = 0;
    forget_all();
    /* The layers remember the last blocks found with a damaged header, which stay leaked for good
     * in a program; a test gives them back itself, and their addresses come round again. */
    memset(&t_magic_obj, 0, sizeof t_magic_obj);
    memset(&t_xor_obj, 0, sizeof t_xor_obj);
    memset(&t_crc_obj, 0, sizeof t_crc_obj);
    memset(&t_lazy_obj, 0, sizeof t_lazy_obj);
}

/* Every size 0..300 and a few large ones, at alignments 16 .. 8 KiB, over blocks below with and
 * without slack, and (page_end) with every pointer of alignment 16 at the start of a page: aligned,
 * usable size the request exactly, patterns intact, no report, every block passed down: sized with
 * what was asked of pad when its alignment is 16 (whatever the program's free was), else unsized. */
static void round_trips_at(int page_end)
{
    static const size_t rounds[] = { 1, 8, 64, 4096 };
    static const size_t aligns[] = { 16, 32, 64, 256, 4096, 8192 };
    enum { N = 340 };
    static void *blocks[N];
    static size_t sizes[N];
    for (unsigned r = 0; r < 4; r++) {
        reset(rounds[r]);
        pad_page_end = page_end;
        size_t live0 = fk_obj.live_blocks, bad0 = fk_obj.bad_frees;
        for (unsigned i = 0; i < N; i++) {
            sizes[i] = i <= 300 ? i : (size_t)1 << (i - 300) % 20;
            size_t align = aligns[i % 6];
            blocks[i] = get(cur, sizes[i], align, 0);
            if (!blocks[i])
                return;
            CHECKF((uintptr_t)blocks[i] % align == 0, "%p not aligned to %zu", blocks[i], align);
            if (page_end && align == 16)
                CHECKF((uintptr_t)blocks[i] % PAGE == 0, "%p does not start a page", blocks[i]);
            CHECKF(usable(cur, blocks[i]) == sizes[i], "usable %zu, asked %zu", usable(cur, blocks[i]), sizes[i]);
            check_fill(blocks[i], sizes[i], i);
        }
        for (unsigned i = 0; i < N; i++)
            CHECKF(check_verify(blocks[i], sizes[i], i), "block %u of %zu bytes changed", i, sizes[i]);
        for (unsigned i = 0; i < N; i++) {
            sm_mctx_t c = sm_mctx_block(blocks[i], i % 2 ? sizes[i] : 0, i % 2 ? SM_F_SIZED : 0);
            cur->free(&c);
            size_t want = aligns[i % 6] == 16 ? footprint(sizes[i], 16) : 0;
            CHECKF(pad_last_unsized == !want && pad_last_sized == want,
                   "free of %zu bytes (align %zu) passed down as %zu, want %zu", sizes[i], aligns[i % 6], pad_last_sized, want);
        }
        CHECKF(err_total() == 0, "%lu reports on clean blocks (%s)", err_total(), last_detail);
        CHECKF(fk_obj.live_blocks == live0, "%zu blocks not passed down", fk_obj.live_blocks - live0);
        CHECK(fk_obj.bad_frees == bad0);
    }
}
static void round_trips(void) { round_trips_at(0); }
static void round_trips_page_start(void) { round_trips_at(1); }

/* An overflow of k bytes, k = 1..64, on blocks of several sizes (their pointers inside a page, and
 * at its start): one report each, of kind corruption, naming the size; the block stays below
 * (leaked), a second free is a double free, and a clean neighbour is not reported. */
static void overflow_reported_once(void)
{
    static const size_t sizes[] = { 0, 1, 8, 24, 40, 100, 1000, 4096 };
    static const size_t rounds[] = { 1, 64 };
    for (unsigned r = 0; r < 3; r++) {
        for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            for (size_t k = 1; k <= 64; k++) {
                reset(rounds[r % 2]);
                pad_page_end = r == 2;
                size_t n = sizes[s];
                void *clean = get(cur, n, 16, 0), *p = get(cur, n, 16, 0);
                if (!clean || !p)
                    return;
                check_fill(p, n, (unsigned)k);
                check_fill(clean, n, (unsigned)k + 1);
                size_t live = fk_obj.live_blocks;
                overflow(p, n, k, (unsigned)(s * 64 + k));
                put(cur, p);
                CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1,
                       "size %zu, round %zu, %zu bytes over: %lu corruption reports, %lu in all", n, rounds[r % 2], k,
                       err_counts[SM_ERR_CORRUPTION], err_total());
                CHECKF(last_ptr == p, "reported %p, overflowed %p", last_ptr, p);
                CHECKF(fk_obj.live_blocks == live, "size %zu, %zu bytes over: the block was passed down", n, k);
                char want[160];
                snprintf(want, sizeof want,
                         "tail check value overwritten: block of %zu bytes, overflow past its end (found by free)", n);
                CHECKF(strcmp(last_detail, want) == 0, "got '%s', want '%s'", last_detail, want);
                CHECKF(check_verify(p, n, (unsigned)k), "the overflowed block's own bytes changed");
                CHECKF(check_verify(clean, n, (unsigned)k + 1), "the clean block changed");
                put(cur, clean);
                CHECKF(err_total() == 1, "the clean block was reported: '%s'", last_detail);
                CHECKF(fk_obj.live_blocks == live - 1, "the clean block was not passed down");
                /* the leaked block: a second free is a double free, the block still stays */
                put(cur, p);
                CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 2, "second free: %lu double-free reports",
                       err_counts[SM_ERR_DOUBLE_FREE]);
                CHECK(fk_obj.live_blocks == live - 1);
                CHECK(usable(cur, p) == (size_t)-1 && !resize(cur, p, 8));
                CHECK(err_total() == 2);
                pad_drop(p, 16);
                if (check_case_failed)
                    return;
            }
        }
    }
}

/* The header overwritten from below (k = 1..16 bytes before the pointer), on blocks of several
 * sizes, in a page and at its start: found by free, or by getmeta first (as realloc does; then
 * resize refuses and free is silent), one report of kind corruption with the most the block can
 * hold; the block stays below and none of its bytes is written; a second free is a double free. */
static void underflow_reported_once(void)
{
    static const size_t sizes[] = { 0, 7, 8, 40, 1000 };
    for (unsigned mode = 0; mode < 4; mode++) {
        int by_getmeta = mode & 1;
        for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            for (size_t k = 1; k <= 16; k++) {
                reset(mode & 2 ? 1 : 64);
                pad_page_end = (mode & 2) != 0;
                size_t n = sizes[s];
                unsigned char *p = get(cur, n, 16, 0);
                if (!p)
                    return;
                check_fill(p, n, (unsigned)k);
                size_t live = fk_obj.live_blocks;
                underflow(p, k, (unsigned)(s * 16 + k));
                unsigned char below[16];
                memcpy(below, p - 16, 16);
                const char *found_by = by_getmeta ? "realloc or malloc_usable_size" : "free";
                if (by_getmeta) {
                    CHECKF(usable(cur, p) == damaged_size(n), "getmeta of a damaged block: %zu, want %zu", usable(cur, p),
                           damaged_size(n));
                    CHECK(!resize(cur, p, 1) && usable(cur, p) == damaged_size(n));
                }
                put(cur, p);
                CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1,
                       "size %zu, %zu bytes under, %s: %lu corruption reports, %lu in all", n, k, found_by,
                       err_counts[SM_ERR_CORRUPTION], err_total());
                char want[200];
                snprintf(want, sizeof want,
                         "header overwritten: block of at most %zu bytes, underflow before its start (found by %s)",
                         damaged_size(n), found_by);
                CHECKF(strcmp(last_detail, want) == 0, "got '%s', want '%s'", last_detail, want);
                CHECKF(last_ptr == p, "reported %p, underflowed %p", last_ptr, p);
                CHECKF(fk_obj.live_blocks == live, "size %zu, %zu bytes under: the block was passed down", n, k);
                CHECKF(memcmp(below, p - 16, 16) == 0 && check_verify(p, n, (unsigned)k), "the damaged block was written");
                put(cur, p);
                CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 2, "second free: %lu reports ('%s')",
                       err_total(), last_detail);
                CHECK(usable(cur, p) == (size_t)-1 && !resize(cur, p, 8) && err_total() == 2);
                CHECK(fk_obj.live_blocks == live);
                pad_drop(p, 16);
                if (check_case_failed)
                    return;
            }
        }
    }
}

/* An overflow seen by realloc (getmeta, then resize, then the free of the old block, as the socket
 * does) is reported once; resize refuses to grow it; its free leaks it. Also resize alone. */
static void overflow_detected_by_realloc(void)
{
    reset(64);
    for (int path = 0; path < 2; path++) {
        err_reset();
        void *p = get(cur, 40, 16, 0);
        if (!p)
            return;
        check_fill(p, 40, 3);
        size_t live = fk_obj.live_blocks;
        overflow(p, 40, 1, 9);
        if (path == 0) {
            CHECKF(usable(cur, p) == 40, "getmeta of an overwritten block: %zu", usable(cur, p));
            CHECKF(err_counts[SM_ERR_CORRUPTION] == 1, "getmeta: %lu reports", err_counts[SM_ERR_CORRUPTION]);
            CHECKF(strcmp(last_detail, "tail check value overwritten: block of 40 bytes, overflow past its end "
                                       "(found by realloc or malloc_usable_size)") == 0,
                   "got '%s'", last_detail);
        }
        CHECK(!resize(cur, p, 48)); /* room in place below, yet refused */
        CHECK(!resize(cur, p, 20));
        CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "path %d: %lu reports after resize", path,
               err_total());
        if (path == 1)
            CHECKF(strstr(last_detail, "block of 40 bytes, overflow past its end (found by realloc)") != NULL, "got '%s'",
                   last_detail);
        CHECK(usable(cur, p) == 40 && check_verify(p, 40, 3));
        put(cur, p);
        CHECKF(err_total() == 1, "path %d: the free reported again", path);
        CHECKF(fk_obj.live_blocks == live, "path %d: the overwritten block was passed down", path);
        CHECK(usable(cur, p) == (size_t)-1); /* leaked: no longer the program's */
        put(cur, p);
        CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 2, "path %d: a second free: %lu reports", path,
               err_total());
        pad_drop(p, 16);
    }
}

/* resize on clean blocks: in place by the next layer's resize (growing and shrinking), T moved (an
 * overflow past the new end is caught, none before it is); a shrink the next layer refuses stays in
 * place; a resized block's free goes down unsized. */
static void resize_moves_the_tail(void)
{
    reset(64);
    void *p = get(cur, 10, 16, 0); /* 34 -> 64 below, capacity 64 + 256 */
    if (!p)
        return;
    check_fill(p, 10, 1);
    CHECK(resize(cur, p, 40) && usable(cur, p) == 40); /* within the block below */
    check_fill(p, 40, 2);
    CHECK(resize(cur, p, 200) && usable(cur, p) == 200); /* the next layer grows it */
    CHECK(check_verify(p, 40, 2));
    check_fill(p, 200, 3);
    CHECK(!resize(cur, p, 1000) && usable(cur, p) == 200); /* too far: unchanged */
    CHECK(resize(cur, p, 5) && usable(cur, p) == 5);       /* shrink */
    CHECK(check_verify(p, 5, 3));
    CHECKF(err_total() == 0, "%lu reports: '%s'", err_total(), last_detail);
    overflow(p, 5, 1, 4);
    size_t live = fk_obj.live_blocks;
    put(cur, p);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && strstr(last_detail, "block of 5 bytes") != NULL, "got '%s'", last_detail);
    CHECK(fk_obj.live_blocks == live);
    pad_drop(p, 16);

    /* the next layer refuses: a shrink stays in place, a growth fails; a block once resized is
     * freed unsized (the next layer's block may no longer be what its size would say) */
    err_reset();
    p = get(cur, 100, 16, 0);
    check_fill(p, 100, 5);
    pad_no_resize = 1;
    CHECK(!resize(cur, p, 101) && usable(cur, p) == 100);
    CHECK(resize(cur, p, 70) && usable(cur, p) == 70 && check_verify(p, 70, 5));
    /* one that frees more than half the block: no, the socket moves it (core/release.h) */
    CHECK(!resize(cur, p, 10) && usable(cur, p) == 70 && check_verify(p, 70, 5));
    pad_no_resize = 0;
    void *q = get(cur, 100, 16, 0);
    CHECK(resize(cur, q, 31));
    put(cur, p);
    CHECKF(pad_last_unsized, "the free after a refused shrink went down sized (%zu)", pad_last_sized);
    put(cur, q);
    CHECKF(pad_last_unsized, "the free after a resize went down sized (%zu)", pad_last_sized);
    CHECKF(err_total() == 0, "%lu reports: '%s'", err_total(), last_detail);
    CHECK(fk_obj.live_blocks == live - 1);
}

/* calloc: the socket clears the user's bytes unless the block below is fresh; either way they are
 * zero and the words past them are intact. */
/* realloc's move of a large growth: the next layer moves the pages, and the block is sealed again
 * at its new address (the check values depend on it): its contents, size and tail hold there, a
 * later overflow is caught, and it is freed unsized. A damaged block is not moved, and reported
 * once; a block the next layer cannot move stays as it was. */
static void move_seals_the_block_where_it_lands(void)
{
    reset(64);
    pad_moves = 0;
    size_t live = fk_obj.live_blocks;
    unsigned char *p = get(cur, 100, 16, 0);
    for (size_t i = 0; i < 100; i++) /* check_fill's pattern follows the address: not this one */
        p[i] = (unsigned char)(i * 7 + 3);
    unsigned char *q = move(cur, p, 3000);
    CHECKF(q && pad_moves == 1 && usable(cur, q) == 3000, "%s: moved %p, %lu moves", cur->name, (void *)q, pad_moves);
    if (!q)
        return;
    size_t same = 0;
    for (size_t i = 0; i < 100; i++)
        same += q[i] == (unsigned char)(i * 7 + 3);
    CHECKF(same == 100, "%zu of 100 bytes came along", same);
    check_fill(q, 3000, 4);
    CHECK(resize(cur, q, 3000) && check_verify(q, 3000, 4));
    put(cur, q);
    CHECKF(err_total() == 0 && pad_last_unsized, "%lu reports ('%s'), freed sized %zu", err_total(), last_detail, pad_last_sized);
    CHECK(fk_obj.live_blocks == live);

    q = move(cur, get(cur, 200, 16, 0), 5000);
    overflow(q, 5000, 1, 9);
    put(cur, q);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && strstr(last_detail, "block of 5000 bytes") != NULL,
           "an overflow past the moved end: '%s'", last_detail);
    pad_drop(q, 16);

    err_reset();
    p = get(cur, 100, 16, 0);
    overflow(p, 100, 1, 5);
    CHECK(move(cur, p, 3000) == NULL && pad_moves == 2);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "damaged: %lu reports ('%s')", err_total(), last_detail);
    put(cur, p); /* reported already: leaked, silently */
    CHECK(err_total() == 1);
    pad_drop(p, 16);

    err_reset();
    pad_no_move = 1;
    p = get(cur, 100, 16, 0);
    check_fill(p, 100, 6);
    CHECK(move(cur, p, 3000) == NULL && usable(cur, p) == 100 && check_verify(p, 100, 6));
    put(cur, p);
    CHECK(err_total() == 0 && fk_obj.live_blocks == live);
}

static void calloc_stays_zero(void)
{
    for (int fresh = 0; fresh < 2; fresh++) {
        reset(64);
        pad_fresh = fresh;
        for (size_t n = 0; n < 200; n += 13) {
            sm_mctx_t c = sm_mctx_alloc(n, 16, SM_F_ZERO | SM_F_USER);
            unsigned char *p = (unsigned char *)cur->alloc(&c);
            if (!p)
                return;
            CHECKF(!!(c.flags & SM_F_FRESH) == fresh, "SM_F_FRESH %s", fresh ? "lost" : "made up");
            if (!(c.flags & SM_F_FRESH))
                memset(p, 0, n); /* what the socket does */
            for (size_t i = 0; i < n; i++)
                CHECKF(p[i] == 0, "byte %zu of %zu is %#x", i, n, p[i]);
            put(cur, p);
        }
        CHECKF(err_total() == 0, "%lu reports: '%s'", err_total(), last_detail);
    }
    pad_fresh = 0;
}

/* Pointers that are not this layer's blocks go down for the next layer to report, and nothing is
 * reported here: unmapped at the start of a page (nothing read: pad is asked), not a block, not
 * aligned, inside a live block, and an aligned block whose header was overwritten (its offset cannot
 * be told, so it reads as a pointer not ours). getmeta and resize say "no block". */
static void bad_frees_go_down(void)
{
    reset(1);
    unsigned long bad = fk_obj.bad_frees;
    static char not_a_block[64] __attribute__((aligned(64)));
    char *live = get(cur, 100, 16, 0), *aligned = get(cur, 24, 64, 0);
    char *ptrs[] = { (char *)(uintptr_t)0x1000, not_a_block + 16, not_a_block + 17, live + 32, aligned };
    underflow(aligned, 1, 1);
    for (unsigned i = 0; i < sizeof ptrs / sizeof *ptrs; i++) {
        sm_mctx_t c = sm_mctx_block(ptrs[i], 0, 0);
        CHECKF(!cur->getmeta(&c) && !cur->resize(&c, 8), "pointer %u: a block", i);
        put(cur, ptrs[i]);
        CHECKF(fk_obj.bad_frees == bad + i + 1, "pointer %u: the fake saw %lu bad frees", i, fk_obj.bad_frees - bad);
    }
    CHECKF(err_total() == 0, "%lu reports here: '%s'", err_total(), last_detail);
    CHECK(usable(cur, live) == 100);
    put(cur, live);
    pad_drop(aligned, 64);
    CHECK(err_total() == 0);
}

/* Double frees, however the next layer keeps a freed block: writing nothing into it, or its links
 * over the header (still live to its getmeta: then the freed stamp tells), at the start of a page
 * too: reported here once, never passed down again; getmeta and resize say "no block". A next layer
 * that no longer calls it live and overwrote the header gets the second free to report. */
static void double_frees(void)
{
    static const int keeps[] = { KEEP_QUIET, KEEP_LINKS };
    static const size_t sizes[] = { 0, 7, 8, 24, 300 };
    for (unsigned m = 0; m < 4; m++) {
        for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            reset(1);
            pad_page_end = m >= 2;
            void *p = get(cur, sizes[s], 16, 0);
            check_fill(p, sizes[s], 9);
            pad_keep = keeps[m % 2];
            put(cur, p);
            CHECK(pad_kept == 1 && err_total() == 0);
            CHECKF(usable(cur, p) == (size_t)-1, "getmeta of a freed block: %zu", usable(cur, p));
            CHECK(!resize(cur, p, 8));
            put(cur, p);
            CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "keep %d, size %zu: %lu reports ('%s')",
                   pad_keep, sizes[s], err_total(), last_detail);
            char want[64];
            snprintf(want, sizeof want, "block of %zu bytes freed twice", sizes[s]);
            CHECKF(strcmp(last_detail, want) == 0, "got '%s'", last_detail);
            CHECKF(pad_kept == 1, "the double free went down (%lu)", pad_kept);
            pad_keep = 0;
            pad_drop(p, 16);
            if (check_case_failed)
                return;
        }
    }
    reset(1);
    unsigned long bad = fk_obj.bad_frees;
    void *p = get(cur, 24, 16, 0);
    pad_keep = KEEP_FORGET;
    put(cur, p);
    put(cur, p);
    CHECKF(err_total() == 0 && fk_obj.bad_frees == bad + 1, "%lu reports here, %lu bad frees below", err_total(),
           fk_obj.bad_frees - bad);
    reset(1);
}

/* A header changed to another size that would fit, or another offset: it no longer verifies
 * (under `magic` too), is reported once as a damaged header, and no tag is written into the user's
 * bytes at the size it now says. */
static void header_change_in_range(void)
{
    static const struct { int byte, bit; } changes[] = { { -7, 8 }, { -7, 1 }, { -8, 1 }, { -16, 4 } };
    for (unsigned i = 0; i < 8; i++) {
        int by_free = i & 1;
        reset(1);
        unsigned char *p = get(cur, 40, 16, 0);
        check_fill(p, 40, 7);
        p[changes[i / 2].byte] ^= (unsigned char)changes[i / 2].bit; /* e.g. size 40 -> 32 */
        size_t live = fk_obj.live_blocks;
        if (by_free)
            put(cur, p);
        else
            CHECKF(usable(cur, p) == damaged_size(40), "usable %zu", usable(cur, p));
        CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
        CHECKF(strstr(last_detail, "header overwritten: block of at most 40 bytes, underflow before its start") == last_detail,
               "got '%s'", last_detail);
        CHECKF(check_verify(p, 40, 7), "the user's bytes changed");
        if (!by_free)
            put(cur, p);
        CHECK(err_total() == 1 && fk_obj.live_blocks == live);
        pad_drop(p, 16);
    }
}

/* Requests the next layer cannot serve, sizes that would wrap, alignments too large. */
static void out_of_memory(void)
{
    reset(1);
    sm_mctx_t c = sm_mctx_alloc(SIZE_MAX - 8, 16, 0);
    CHECK(cur->alloc(&c) == NULL && c.ptr == NULL && c.size == SIZE_MAX - 8);
    c = sm_mctx_alloc(16, (size_t)1 << 41, 0);
    CHECK(cur->alloc(&c) == NULL && c.ptr == NULL);
    fk_obj.limit_bytes = fk_obj.live_bytes + 100;
    c = sm_mctx_alloc(1000, 16, 0);
    CHECK(cur->alloc(&c) == NULL && c.ptr == NULL && c.size == 1000);
    fk_obj.limit_bytes = 0;
    void *p = get(cur, 10, 16, 0);
    CHECK(!resize(cur, p, SIZE_MAX - 4));
    put(cur, p);
    CHECK(err_total() == 0);
}

/* Threads allocating, filling, verifying and freeing through the layer: no report, nothing lost. */
static void *thread_body(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *b[32];
    intptr_t bad = 0;
    for (unsigned round = 0; round < 200; round++) {
        for (unsigned i = 0; i < 32; i++) {
            sm_mctx_t c = sm_mctx_alloc((i * 37 + round) % 300, i % 4 ? 16 : 64, 0);
            if (!(b[i] = cur->alloc(&c)))
                return (void *)(intptr_t)-1;
            check_fill(b[i], (i * 37 + round) % 300, seed + i);
        }
        for (unsigned i = 0; i < 32; i++) {
            bad += !check_verify(b[i], (i * 37 + round) % 300, seed + i);
            put(cur, b[i]);
        }
    }
    return (void *)bad;
}
static void threads_no_false_reports(void)
{
    reset(16);
    size_t live = fk_obj.live_blocks;
    check_threads(4, thread_body);
    CHECKF(err_total() == 0, "%lu reports: '%s'", err_total(), last_detail);
    CHECK(fk_obj.live_blocks == live);
}

/* The fatal policy: the child's free of an overflowed block prints one line and aborts. */
static void free_overflowed(void *unused)
{
    (void)unused;
    sm_mctx_t c = sm_mctx_alloc(40, 16, 0);
    char *p = t_fatal_alloc(&c);
    memset(p, 'a', 40);
    p[40] ^= 0x5a; /* one byte too many, unlike the check byte there (a constant matched it 1 time in 256) */
    sm_mctx_t f = sm_mctx_block(p, 0, 0);
    t_fatal_free(&f); /* does not return */
}
static void fatal_aborts_with_one_line(void)
{
    reset(1);
    char out[512];
    int status = check_in_child(free_overflowed, NULL, 20, out, sizeof out);
    size_t len = strlen(out);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    const char *head = "sunmao: t_fatal: heap corruption (0x";
    const char *tail = "): tail check value overwritten: block of 40 bytes, overflow past its end (found by free)\n";
    CHECKF(strncmp(out, head, strlen(head)) == 0 && len > strlen(tail) && strcmp(out + len - strlen(tail), tail) == 0 &&
               strchr(out, '\n') == out + len - 1,
           "child's stderr: '%s'", out);
}

/* SM_OPT_CHECK_REALLOC 0: getmeta does not compare the check value, free still does; a damaged
 * header is still seen by getmeta (it must read the size there). */
static void check_realloc_off(void)
{
    reset(64);
    void *p = get(&lazy, 40, 16, 0);
    overflow(p, 40, 1, 5);
    CHECK(usable(&lazy, p) == 40);
    CHECKF(err_total() == 0, "getmeta reported: '%s'", last_detail);
    size_t live = fk_obj.live_blocks;
    put(&lazy, p);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu reports", err_total());
    CHECK(fk_obj.live_blocks == live);
    pad_drop(p, 16);
    err_reset();
    p = get(&lazy, 40, 16, 0);
    underflow(p, 1, 6);
    CHECK(usable(&lazy, p) == damaged_size(40) && err_counts[SM_ERR_CORRUPTION] == 1);
    CHECKF(strstr(last_detail, "header overwritten: block of at most 40 bytes") != NULL, "got '%s'", last_detail);
    put(&lazy, p);
    CHECK(err_total() == 1 && fk_obj.live_blocks == live);
    pad_drop(p, 16);
}

/* ---- t_hit :: hc: the hit paths, driven as the socket drives them ---- */

/* malloc: the hit path for the default alignment, else (or on a miss) the miss; or, `whole`, the
 * layer's alloc, as a layer above calls it. */
static int whole;
static void *hit_get(size_t n, size_t align)
{
    if (whole) {
        sm_mctx_t c = sm_mctx_alloc(n, align, 0);
        void *p = t_hit_alloc(&c);
        CHECKF(p != NULL && c.ptr == p && c.size == n, "alloc of %zu bytes", n);
        return p;
    }
    void *p = align <= 16 ? t_hit_alloc_hit(n) : NULL;
    if (!p) {
        sm_mctx_t c = sm_mctx_alloc(n, align, 0);
        p = t_hit_alloc_miss(&c);
        CHECKF(p != NULL && c.ptr == p && c.size == n, "alloc_miss of %zu bytes", n);
    }
    return p;
}
/* free: the hit path, else the miss with the owner word the hit read. */
static void hit_put(void *p)
{
    if (whole) {
        sm_mctx_t c = sm_mctx_block(p, 0, 0);
        t_hit_free(&c);
        return;
    }
    uintptr_t w = SM_OWNER_UNKNOWN;
    if (t_hit_free_hit(p, 0, 0, &w))
        return;
    sm_mctx_t c = sm_mctx_block(p, 0, w != SM_OWNER_UNKNOWN ? SM_F_OWNER : 0);
    c.owner_word = w;
    t_hit_free_miss(&c);
}
static void hit_reset(unsigned limit)
{
    hc_flush();
    reset(1);
    hc_limit = limit;
    hc_alloc_hits = hc_free_hits = hc_sized = hc_owner_reads = hc_owner_passed = hc_owner_wrong = 0;
}
static size_t hit_usable(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    return t_hit_getmeta(&c) ? c.usable : (size_t)-1;
}

/* Rounds of blocks of 0..299 bytes, a fifth of them aligned to 64, through the hit paths and the
 * misses (every other round through alloc and free, as a layer above calls them), with lists of 16
 * and of 2 (many free_hit misses, restored and then freed by the miss):
 * patterns kept, usable sizes exact, no report; plain frees reach hc sized, aligned ones unsized
 * with the owner word hc read coming back with the block on a miss; nothing lost. */
static void hit_round_trips(void)
{
    static const unsigned limits[] = { HC_MAX, 2 };
    enum { N = 300 };
    static void *b[N];
    for (unsigned l = 0; l < 2; l++) {
        hit_reset(limits[l]);
        size_t live0 = fk_obj.live_blocks;
        for (unsigned round = 0; round < 4; round++) {
            whole = round & 1;
            for (unsigned i = 0; i < N; i++) {
                size_t n = (i * 7 + round) % N, align = i % 5 ? 16 : 64;
                b[i] = hit_get(n, align);
                CHECKF((uintptr_t)b[i] % align == 0 && hit_usable(b[i]) == n, "block of %zu: %p, usable %zu", n, b[i],
                       hit_usable(b[i]));
                check_fill(b[i], n, i + round);
            }
            for (unsigned i = 0; i < N; i++) {
                CHECKF(check_verify(b[i], (i * 7 + round) % N, i + round), "block %u changed", i);
                hit_put(b[i]);
            }
        }
        whole = 0;
        CHECKF(err_total() == 0, "%lu reports: '%s'", err_total(), last_detail);
        CHECKF(hc_alloc_hits > 0 && hc_free_hits > 0 && hc_sized > 0 && hc_owner_reads > 0,
               "hits %lu/%lu, sized %lu, owner reads %lu", hc_alloc_hits, hc_free_hits, hc_sized, hc_owner_reads);
        if (limits[l] == 2)
            CHECKF(hc_owner_passed > 0, "no owner word came back on a miss");
        CHECKF(hc_owner_wrong == 0, "%lu owner words came back for another block", hc_owner_wrong);
        hc_flush();
        CHECKF(fk_obj.live_blocks == live0, "%zu blocks lost", fk_obj.live_blocks - live0);
    }
}

/* Lists that take nothing: every free_hit misses after tagging the block, restores it, and the miss
 * frees it once, with no report. */
static void hit_miss_restores(void)
{
    hit_reset(0);
    size_t live0 = fk_obj.live_blocks;
    for (size_t n = 0; n < 40; n++) {
        void *p = hit_get(n, 16);
        uintptr_t w = SM_OWNER_UNKNOWN;
        CHECK(!t_hit_free_hit(p, 0, 0, &w));
        CHECKF(hit_usable(p) == n, "after a missed free_hit: usable %zu", hit_usable(p)); /* still live */
        hit_put(p);
    }
    CHECKF(err_total() == 0, "%lu reports: '%s'", err_total(), last_detail);
    CHECKF(fk_obj.live_blocks == live0, "%zu blocks not passed down", fk_obj.live_blocks - live0);
}

/* Damage through the hit paths: free_hit declines a block that is not intact and the miss reports
 * it once: an overflow and an underflow (leaked: neither cached nor passed down), and a double free
 * of a block in hc's list, its header now hc's link (the stamp tells; it is not listed twice). */
static void hit_paths_detect(void)
{
    hit_reset(HC_MAX);
    size_t live0 = fk_obj.live_blocks;
    char *o = hit_get(40, 16), *u = hit_get(40, 16), *d = hit_get(40, 16);
    overflow(o, 40, 1, 1);
    hit_put(o);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && strstr(last_detail, "tail check value overwritten: block of 40") == last_detail,
           "overflow: %lu reports ('%s')", err_total(), last_detail);
    underflow(u, 3, 2);
    hit_put(u);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 2 && strstr(last_detail, "header overwritten") == last_detail,
           "underflow: %lu reports ('%s')", err_total(), last_detail);
    CHECK(hc_count[0] == 0 && fk_obj.live_blocks == live0 + 3);
    hit_put(d);
    CHECK(hc_count[0] == 1);
    hit_put(d);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 3 && hc_count[0] == 1,
           "double free: %lu reports ('%s'), %u listed", err_total(), last_detail, hc_count[0]);
    CHECK(hit_get(40, 16) == d && hit_usable(d) == 40); /* the block comes back once, sound */
    hit_put(d);
    CHECK(err_total() == 3);
    hc_flush();
    pad_drop(o, 16);
    pad_drop(u, 16);
    CHECK(fk_obj.live_blocks == live0);
}

static void run_all(const char *case_name, void (*fn)(void))
{
    static char names[64][96]; /* check.h keeps the case's name while it runs */
    static unsigned used;
    for (unsigned i = 0; i < sizeof layers / sizeof *layers && used < 64; i++, used++) {
        cur = &layers[i];
        snprintf(names[used], sizeof names[used], "%s/%s", cur->name + 2, case_name);
        check_run_case(names[used], fn);
    }
}
#define RUN_ALL(fn) run_all(#fn, fn)

int main(void)
{
    check_begin("tail_chksum");
    sm_err_callback_set(on_error_detail);
    CHECK(t_crc_create() == 0 && t_magic_create() == 0 && t_xor_create() == 0);
    RUN_ALL(round_trips);
    RUN_ALL(round_trips_page_start);
    RUN_ALL(overflow_reported_once);
    RUN_ALL(underflow_reported_once);
    RUN_ALL(overflow_detected_by_realloc);
    RUN_ALL(resize_moves_the_tail);
    RUN_ALL(move_seals_the_block_where_it_lands);
    RUN_ALL(calloc_stays_zero);
    RUN_ALL(bad_frees_go_down);
    RUN_ALL(double_frees);
    RUN_ALL(header_change_in_range);
    RUN_ALL(out_of_memory);
    RUN_ALL(threads_no_false_reports);
    RUN_CASE(fatal_aborts_with_one_line);
    RUN_CASE(check_realloc_off);
    RUN_CASE(hit_round_trips);
    RUN_CASE(hit_miss_restores);
    RUN_CASE(hit_paths_detect);
    return check_end();
}
