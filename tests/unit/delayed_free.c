/* Unit test of the delayed_free add-on layer (the paper's `delayed`), both names built, each instance
 * over its own fake next layer (tests/support/fake_next.h) and its per-thread state from its own
 * fake metadata layer, so the fakes' counts are exact:
 *     dq  delayed_free.h, 1 KiB quarantine, chksum xor (default), links encoded (default), no fill
 *     dl  delayed.h, the defaults (64 KiB) but chksum magic and SM_OPT_FILL 1
 *     dp  delayed_free.h, 1 KiB, SM_OPT_NODE_XOR 0
 *     df  delayed_free.h, err policy fatal (run in forked children)
 *     dx  delayed_free.h over `loose`: the fake with a getmeta that also says yes inside its blocks
 *         (and counts its calls)
 *     dh  delayed_free.h over `hitn`: the fake with hit paths (capability HIT), as a thread cache
 *     dm  delayed_free.h over the fake with a move (capability MOVE), as mmap_heap for a large block
 * What is checked: the quarantine holds at most its size and passes blocks down oldest first (the
 * fake's live table says which blocks it still has); bypass of blocks larger than the quarantine;
 * byte accounting against the fake's; double and invalid frees (stack, interior, libc, next to
 * unmapped memory, a header copied from another block) each reported once with the right kind and
 * nothing freed twice below; a wild pointer into unmapped memory faults; writes after free into the
 * encoded link or size, words copied or written back, and into filled data, reported once when the
 * block leaves; fill round trips over many sizes and alignments, also over `loose`; calloc; resize
 * in place; a move (capability MOVE) sealed again where it lands; the next layer's getmeta asked
 * only where the header cannot be read directly; the hit paths as the socket calls them, and blocks
 * passed down sized only as allocated; thread exit; the `fatal` policy. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/chksum/magic.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/err/fatal.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fk1
#include "tests/support/fake_next.h"
#define SM_LAYER fm1
#include "tests/support/fake_next.h"
#define SM_LAYER dq
#define SM_NEXT fk1
#define SM_META fm1
#define SM_ERR callback
#define SM_OPT_DELAYED_SIZE 1024
#include <sunmao/layers/addon/delayed_free.h>

#define SM_LAYER fk2
#include "tests/support/fake_next.h"
#define SM_LAYER fm2
#include "tests/support/fake_next.h"
#define SM_LAYER dl
#define SM_NEXT fk2
#define SM_META fm2
#define SM_ERR callback
#define SM_CHKSUM magic
#define SM_OPT_FILL 1
#include <sunmao/layers/addon/delayed.h>

#define SM_LAYER fk3
#include "tests/support/fake_next.h"
#define SM_LAYER fm3
#include "tests/support/fake_next.h"
#define SM_LAYER dp
#define SM_NEXT fk3
#define SM_META fm3
#define SM_ERR callback
#define SM_OPT_DELAYED_SIZE 1024
#define SM_OPT_NODE_XOR 0
#include <sunmao/layers/addon/delayed_free.h>

#define SM_LAYER fk4
#include "tests/support/fake_next.h"
#define SM_LAYER df
#define SM_NEXT fk4
#define SM_ERR fatal
#include <sunmao/layers/addon/delayed_free.h>

/* A next layer whose getmeta also says yes for an address inside one of its live blocks (the rest
 * of the block usable), as a layer that reads a header word before the address (tlsf_glk) may when
 * stale bytes there look like one: the fake, with a looser getmeta. */
#define SM_LAYER fk5
#include "tests/support/fake_next.h"
#define SM_LAYER loose
#define SM_NEXT fk5
enum { loose_thread_safe = 1, loose_min_align = 16, loose_zeroed = 0 };
static unsigned long loose_interior_yes, loose_getmetas;
static inline int loose_create(void) { return fk5_create(); }
static inline void *loose_alloc(sm_mctx_t *c) { return fk5_alloc(c); }
static inline void loose_free(sm_mctx_t *c) { fk5_free(c); }
static inline bool loose_getmeta(sm_mctx_t *c)
{
    loose_getmetas++;
    pthread_mutex_lock(&fk5_obj.lock);
    bool yes = false;
    for (size_t i = 0; i < fk5_obj.live_blocks && !yes; i++) {
        char *b = (char *)fk5_obj.blocks[i].ptr, *p = (char *)c->ptr;
        if (p >= b && p < b + fk5_obj.blocks[i].size) {
            yes = true;
            c->usable = fk5_obj.blocks[i].size - (size_t)(p - b);
            loose_interior_yes += p != b;
        }
    }
    pthread_mutex_unlock(&fk5_obj.lock);
    return yes;
}
static inline bool loose_resize(sm_mctx_t *c, size_t n) { return fk5_resize(c, n); }
static inline bool loose_purge(sm_mctx_t *c) { return fk5_purge(c); }
static inline void loose_release(sm_release_t *r) { fk5_release(r); }
static inline void loose_thread_exit(void) { fk5_thread_exit(); }
static inline void loose_fork_prepare(void) { fk5_fork_prepare(); }
static inline void loose_fork_parent(void) { fk5_fork_parent(); }
static inline void loose_fork_child(void) { fk5_fork_child(); }
#include <sunmao/core/layer_end.h>
#define SM_LAYER dx
#define SM_NEXT loose
#define SM_ERR callback
#define SM_OPT_DELAYED_SIZE 1024
#include <sunmao/layers/addon/delayed_free.h>

/* A next layer with capability HIT, as a thread cache is: the fake, with hit paths that count what
 * they serve and take (and can be told to miss), and a getmeta that counts its calls. */
#define SM_LAYER fk6
#include "tests/support/fake_next.h"
#define SM_LAYER hitn
#define SM_NEXT fk6
enum { hitn_thread_safe = 1, hitn_min_align = 16, hitn_zeroed = 0 };
static unsigned long hitn_alloc_hits, hitn_free_hits, hitn_getmetas;
static size_t hitn_last_sized; /* the size of the last free the hit took, if sized, else 0 */
static bool hitn_miss;
static inline int hitn_create(void) { return fk6_create(); }
static inline SM_UNUSED void *hitn_alloc(sm_mctx_t *c) { return fk6_alloc(c); }
static inline void hitn_free(sm_mctx_t *c) { fk6_free(c); }
static inline bool hitn_getmeta(sm_mctx_t *c)
{
    hitn_getmetas++;
    return fk6_getmeta(c);
}
static inline bool hitn_resize(sm_mctx_t *c, size_t n) { return fk6_resize(c, n); }
static inline bool hitn_purge(sm_mctx_t *c) { return fk6_purge(c); }
static inline void hitn_release(sm_release_t *r) { fk6_release(r); }
static inline void hitn_thread_exit(void) { fk6_thread_exit(); }
static inline void hitn_fork_prepare(void) { fk6_fork_prepare(); }
static inline void hitn_fork_parent(void) { fk6_fork_parent(); }
static inline void hitn_fork_child(void) { fk6_fork_child(); }
static inline void *hitn_alloc_hit(size_t size)
{
    if (hitn_miss)
        return NULL;
    sm_mctx_t c = sm_mctx_alloc(size, 16, 0);
    void *p = fk6_alloc(&c);
    hitn_alloc_hits += p != NULL;
    return p;
}
static inline bool hitn_free_hit(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    (void)owner_word;
    if (hitn_miss)
        return false;
    sm_mctx_t c = sm_mctx_block(p, size, flags);
    fk6_free(&c);
    hitn_free_hits++;
    hitn_last_sized = (flags & SM_F_SIZED) ? size : 0;
    return true;
}
static inline void *hitn_alloc_miss(sm_mctx_t *c) { return fk6_alloc(c); }
static inline void hitn_free_miss(sm_mctx_t *c) { fk6_free(c); }
#define SM_LAYER_OFFERS SM_CAP_HIT
#include <sunmao/core/layer_end.h>
#define SM_LAYER dh
#define SM_NEXT hitn
#define SM_ERR callback
#define SM_OPT_DELAYED_SIZE 1024
#include <sunmao/layers/addon/delayed_free.h>

/* A next layer with capability MOVE (fake_next.h's FAKE_MOVE), as mmap_heap is for a large block. */
#define SM_LAYER fk7
#define FAKE_MOVE 1
#include "tests/support/fake_next.h"
#define SM_LAYER fm7
#include "tests/support/fake_next.h"
#define SM_LAYER dm
#define SM_NEXT fk7
#define SM_META fm7
#define SM_ERR callback
#define SM_OPT_DELAYED_SIZE 1024
#include <sunmao/layers/addon/delayed_free.h>

_Static_assert(dq_min_align == 16 && dq_zeroed == 0 && dq_thread_safe == 1 && dq_caps == SM_CAP_HIT, "dq's properties");
_Static_assert(dm_caps == (SM_CAP_HIT | SM_CAP_MOVE), "MOVE where the next layer has it");

/* The last report, beside err_record.h's counts. */
static char last_detail[256];
static const void *last_ptr;
static void recorder(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    on_error(kind, layer, ptr, detail);
    last_ptr = ptr;
    snprintf(last_detail, sizeof last_detail, "%s: %s", layer, detail);
}

#define HELPERS(L, FK)                                                                                                 \
    static unsigned char *L##_get(size_t n, size_t align)                                                          \
    {                                                                                                              \
        sm_mctx_t c = sm_mctx_alloc(n, align, 0);                                                                  \
        return (unsigned char *)L##_alloc(&c);                                                                     \
    }                                                                                                              \
    static SM_UNUSED void L##_put(void *p)                                                                         \
    {                                                                                                              \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                                      \
        L##_free(&c);                                                                                              \
    }                                                                                                              \
    static SM_UNUSED void L##_flush(void)                                                                          \
    {                                                                                                              \
        sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);                                                    \
        L##_release(&r);                                                                                           \
    }                                                                                                              \
    /* Whether the fake below still has the block of user pointer p (offset 16: unaligned requests). */          \
    static SM_UNUSED bool L##_below(const void *p, size_t offset)                                                  \
    {                                                                                                              \
        sm_mctx_t m = sm_mctx_block((char *)p - offset, 0, 0);                                                     \
        return FK##_getmeta(&m);                                                                                   \
    }                                                                                                              \
    static SM_UNUSED size_t L##_usable(const void *p)                                                              \
    {                                                                                                              \
        sm_mctx_t m = sm_mctx_block((void *)p, 0, 0);                                                              \
        return L##_getmeta(&m) ? m.usable : (size_t)-1;                                                            \
    }
HELPERS(dq, fk1)
HELPERS(dl, fk2)
HELPERS(dp, fk3)
HELPERS(df, fk4)
HELPERS(dx, fk5)
HELPERS(dh, fk6)
HELPERS(dm, fk7)

/* A free as the socket makes it over a top layer with HIT: the hit, else the miss with the context
 * (never the hit twice). True if the hit took it. */
static bool dh_sock_free(void *p, size_t size, unsigned flags)
{
    uintptr_t w = SM_OWNER_UNKNOWN;
    if (dh_free_hit(p, size, flags, &w))
        return true;
    sm_mctx_t c = sm_mctx_block(p, size, flags);
    dh_free_miss(&c);
    return false;
}

static size_t foot(size_t size, size_t align) { return (align <= 16 ? 16 : align) + (size < 16 ? 16 : size); }
static uint64_t word(const void *p, unsigned i)
{
    uint64_t w;
    memcpy(&w, (const char *)p + 8 * i, 8);
    return w;
}
static void poke_word(void *p, unsigned i, uint64_t x)
{
    uint64_t w = word(p, i) ^ x;
    memcpy((char *)p + 8 * i, &w, 8);
}

/* 20 blocks of 112 bytes (128 with the header) through a 1 KiB quarantine: 8 held, then each free
 * pushes the oldest out; the fake has exactly the blocks not yet pushed out. */
static void holds_then_fifo(void)
{
    enum { N = 20, SIZE = 112, HELD = 1024 / 128 };
    unsigned char *b[N];
    unsigned long frees0 = fk1_obj.frees, meta0 = fm1_obj.live_blocks;
    for (int i = 0; i < N; i++) {
        b[i] = dq_get(SIZE, 16);
        CHECK(b[i] && (uintptr_t)b[i] % 16 == 0 && dq_below(b[i], 16));
        CHECKF(dq_usable(b[i]) == SIZE, "usable %zu", dq_usable(b[i]));
        check_fill(b[i], SIZE, 1);
    }
    for (int i = 0; i < N; i++) {
        dq_put(b[i]);
        int held = i + 1 < HELD ? i + 1 : HELD, out = i + 1 - held;
        CHECKF(dq_quarantine_blocks() == (size_t)held && dq_quarantine_bytes() == (size_t)held * 128,
               "after %d frees: %zu blocks, %zu bytes held", i + 1, dq_quarantine_blocks(), dq_quarantine_bytes());
        CHECKF(fk1_obj.frees - frees0 == (unsigned long)out, "after %d frees: %lu passed down", i + 1, fk1_obj.frees - frees0);
        for (int j = 0; j <= i; j++) {
            CHECKF(dq_below(b[j], 16) == (j >= out), "after %d frees: block %d %s below", i + 1, j, j >= out ? "not" : "still");
            CHECKF(dq_usable(b[j]) == (size_t)-1, "block %d, freed, still answers getmeta", j);
        }
        for (int j = i + 1; j < N; j++)
            CHECKF(check_verify(b[j], SIZE, 1), "live block %d changed", j);
    }
    CHECKF(fm1_obj.live_blocks == meta0 + (meta0 == 0), "the thread's queue: %lu metadata blocks", fm1_obj.live_blocks);
    dq_flush();
    CHECK(dq_quarantine_blocks() == 0 && dq_quarantine_bytes() == 0 && fk1_obj.frees - frees0 == N);
    CHECK(err_total() == 0 && fk1_obj.bad_frees == 0);
}

/* A block larger than the quarantine goes down at once and leaves the held ones alone; one of exactly
 * the quarantine's size is held and pushes every older block out. */
static void large_blocks(void)
{
    unsigned char *s[3], *big = dq_get(2000, 16), *whole = dq_get(1024 - 16, 16);
    for (int i = 0; i < 3; i++)
        s[i] = dq_get(112, 16);
    unsigned long frees0 = fk1_obj.frees;
    for (int i = 0; i < 3; i++)
        dq_put(s[i]);
    dq_put(big);
    CHECK(fk1_obj.frees - frees0 == 1 && !dq_below(big, 16) && dq_quarantine_blocks() == 3 && dq_quarantine_bytes() == 384);
    dq_put(whole);
    CHECKF(fk1_obj.frees - frees0 == 4 && dq_quarantine_blocks() == 1 && dq_quarantine_bytes() == 1024 && dq_below(whole, 16),
           "%lu passed down, %zu held", fk1_obj.frees - frees0, dq_quarantine_blocks());
    for (int i = 0; i < 3; i++)
        CHECK(!dq_below(s[i], 16));
    dq_flush();
    CHECK(fk1_obj.frees - frees0 == 5 && err_total() == 0 && fk1_obj.bad_frees == 0);
}

/* Random sizes and alignments freed in random order: the fake holds exactly the live blocks' bytes
 * plus the quarantine's, which never exceeds 1 KiB. */
static void accounting(void)
{
    enum { N = 300 };
    static unsigned char *b[N];
    static size_t sz[N], al[N];
    static const size_t aligns[] = { 16, 16, 16, 32, 64, 256, 4096 };
    uint64_t rng = 12345;
    size_t bytes0 = fk1_obj.live_bytes, live = 0;
    for (int i = 0; i < N; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        sz[i] = (size_t)(rng >> 33) % 700;
        al[i] = aligns[(rng >> 20) % 7];
        b[i] = dq_get(sz[i], al[i]);
        CHECK(b[i] && (uintptr_t)b[i] % al[i] == 0 && dq_usable(b[i]) == sz[i]);
        live += foot(sz[i], al[i]);
    }
    CHECK(fk1_obj.live_bytes - bytes0 == live);
    for (int k = 0; k < N; k++) {
        int i = (k * 7) % N; /* 7 is prime to N: each once */
        dq_put(b[i]);
        live -= foot(sz[i], al[i]);
        CHECKF(dq_quarantine_bytes() <= 1024 && fk1_obj.live_bytes - bytes0 == live + dq_quarantine_bytes(),
               "after %d frees: %zu held, fake %zu, live %zu", k + 1, dq_quarantine_bytes(), fk1_obj.live_bytes - bytes0, live);
    }
    dq_flush();
    CHECK(fk1_obj.live_bytes == bytes0 && err_total() == 0 && fk1_obj.bad_frees == 0);
}

static void double_frees(void)
{
    unsigned long frees0 = fk1_obj.frees;
    /* At once. */
    unsigned char *a = dq_get(100, 16);
    dq_put(a);
    dq_put(a);
    CHECK(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1 && last_ptr == a);
    CHECKF(strstr(last_detail, "dq: block of 100 bytes is already in the quarantine"), "detail: %s", last_detail);
    /* After other frees, and of an aligned block. */
    unsigned char *b = dq_get(64, 16), *c = dq_get(64, 16), *d = dq_get(64, 256);
    dq_put(b);
    dq_put(c);
    dq_put(d);
    dq_put(b);
    dq_put(d);
    dq_put(a);
    CHECK(err_counts[SM_ERR_DOUBLE_FREE] == 4 && err_total() == 4);
    dq_flush();
    CHECKF(fk1_obj.frees - frees0 == 4 && fk1_obj.bad_frees == 0, "%lu passed down", fk1_obj.frees - frees0);
    /* After the block left the quarantine the fake no longer has it: its header (read directly,
     * "gone") is not a live one, and the fake, asked, does not answer for it: an invalid free. */
    dq_put(b);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 5 && fk1_obj.frees - frees0 == 4 && fk1_obj.bad_frees == 0);
}

static void invalid_frees(void)
{
    unsigned long frees0 = fk1_obj.frees;
    _Alignas(64) unsigned char stack[256];
    memset(stack, 0xAB, sizeof stack);
    dq_put(stack + 64);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 1 && last_ptr == stack + 64);
    CHECKF(strstr(last_detail, "no live block of this layer starts here"), "detail: %s", last_detail);
    unsigned char *a = dq_get(200, 16), *b = dq_get(300, 4096);
    check_fill(a, 200, 2);
    check_fill(b, 300, 3);
    dq_put(a + 16); /* its own header's block, 32 below, is live: its bytes are read, do not verify */
    dq_put(a + 32);
    dq_put(a + 8);
    dq_put(b + 64);
    dq_put(b + 4096);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 6 && err_total() == 6);
    void *m = malloc(64);
    dq_put(m);
    free(m);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 7);
    /* A mapped page between two unmapped ones. At its start the header's place is in the page
     * before: not read, only the fake's getmeta is asked; further in, the header is read directly
     * (here a copy of a's, which names another address) and does not verify; at the start of the
     * unmapped page after it, again nothing is read. */
    unsigned char *none = mmap(NULL, 3 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED && mprotect(none + 4096, 4096, PROT_READ | PROT_WRITE) == 0);
    unsigned char *mid = none + 4096;
    memset(mid, 0xAB, 4096);
    memcpy(mid, a - 16, 16);
    memcpy(mid + 4096 - 32, a - 16, 16);
    dq_put(mid);
    dq_put(mid + 16);
    dq_put(mid + 256);
    dq_put(mid + 4096 - 16);
    dq_put(mid + 4096);
    munmap(none, 3 * 4096);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 12 && err_total() == 12);
    /* A live block of the fake 8 KiB below the pointer, 64 bytes long, unmapped memory after it: the
     * candidate's usable size does not cover the header's place, which is not read. */
    unsigned char *area = mmap(NULL, 4 * 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    unsigned char *x = (unsigned char *)(((uintptr_t)area + 8191) & ~(uintptr_t)8191);
    CHECK(mprotect(x + 4096, 4096, PROT_NONE) == 0);
    pthread_mutex_lock(&fk1_obj.lock);
    fk1_obj.blocks[fk1_obj.live_blocks++] = (struct fk1_block){ x, 64, NULL };
    pthread_mutex_unlock(&fk1_obj.lock);
    dq_put(x + 8192);
    pthread_mutex_lock(&fk1_obj.lock);
    long at = fk1_find_locked(x);
    CHECK(at >= 0);
    fk1_obj.blocks[at] = fk1_obj.blocks[--fk1_obj.live_blocks];
    pthread_mutex_unlock(&fk1_obj.lock);
    munmap(area, 4 * 8192);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 13 && err_total() == 13);
    /* A sized free larger than the block. */
    sm_mctx_t s = sm_mctx_block(a, 201, SM_F_SIZED);
    dq_free(&s);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 14 && err_total() == 14);
    CHECK(fk1_obj.frees == frees0 && fk1_obj.bad_frees == 0 && check_verify(a, 200, 2) && check_verify(b, 300, 3));
    s = sm_mctx_block(a, 200, SM_F_SIZED);
    dq_free(&s);
    dq_put(b);
    dq_flush();
    CHECK(fk1_obj.frees - frees0 == 2 && err_total() == 14 && fk1_obj.bad_frees == 0);
}

/* Writes after free into a held block's link or size word: one report when it leaves, the block
 * and those after it leaked (not followed), the quarantine usable again after. */
static void write_after_free_link(void)
{
    unsigned long frees0 = fk1_obj.frees;
    unsigned char *a = dq_get(64, 16), *b = dq_get(64, 16), *c = dq_get(64, 16);
    dq_put(a);
    CHECK(word(a, 0) != 0 && word(a, 1) != 64); /* encoded */
    dq_put(b);
    dq_put(c);
    poke_word(a, 0, 0x40);
    dq_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1 && last_ptr == a);
    CHECKF(strstr(last_detail, "and the 2 blocks queued after it are leaked"), "detail: %s", last_detail);
    CHECK(fk1_obj.frees == frees0 && dq_quarantine_blocks() == 0 && dq_below(a, 16) && dq_below(c, 16));
    /* The size word of a block in the middle. */
    a = dq_get(64, 16), b = dq_get(64, 16), c = dq_get(64, 16);
    dq_put(a);
    dq_put(b);
    dq_put(c);
    poke_word(b, 1, 1);
    dq_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 2 && err_total() == 2 && last_ptr == b);
    CHECK(fk1_obj.frees - frees0 == 1 && !dq_below(a, 16) && dq_below(b, 16) && dq_below(c, 16));
    /* The tail's link, written before the next free rewrites it. */
    a = dq_get(64, 16), b = dq_get(64, 16);
    dq_put(a);
    poke_word(a, 0, 0x10);
    dq_put(b);
    dq_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 3 && err_total() == 3 && last_ptr == a && fk1_obj.frees - frees0 == 1);
    /* A header written over (an overflow from below, while held). */
    a = dq_get(64, 16), b = dq_get(64, 16);
    dq_put(a);
    dq_put(b);
    a[-16] ^= 0x80; /* info's size */
    dq_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 4 && err_total() == 4 && fk1_obj.frees - frees0 == 1);
    /* Without the fill option a write into the data is not seen. */
    a = dq_get(64, 16);
    dq_put(a);
    a[40] ^= 1;
    dq_flush();
    CHECK(err_total() == 4 && fk1_obj.frees - frees0 == 2 && fk1_obj.bad_frees == 0);
    /* A leaked block freed again: still held, a double free. */
    dq_put(c);
    CHECK(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 5);
    /* Both words of one held block copied onto another (a valid pair, of another address). */
    unsigned char *d;
    a = dq_get(64, 16), b = dq_get(64, 16), c = dq_get(64, 16), d = dq_get(64, 16);
    unsigned long frees1 = fk1_obj.frees;
    dq_put(a);
    dq_put(b);
    dq_put(c);
    dq_put(d);
    memcpy(c, a, 16);
    dq_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 5 && err_total() == 6 && last_ptr == c);
    CHECKF(strstr(last_detail, "and the 1 blocks queued after it are leaked"), "detail: %s", last_detail);
    CHECK(fk1_obj.frees - frees1 == 2 && dq_below(c, 16) && dq_below(d, 16));
    /* The tail's words from before the append (its link NULL), written back after it. */
    unsigned char saved[16];
    a = dq_get(64, 16), b = dq_get(64, 16);
    dq_put(a);
    memcpy(saved, a, 16);
    dq_put(b);
    memcpy(a, saved, 16);
    dq_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 6 && err_total() == 7 && last_ptr == a);
    CHECK(fk1_obj.frees - frees1 == 2 && dq_below(a, 16) && dq_below(b, 16) && fk1_obj.bad_frees == 0);
}

/* SM_OPT_NODE_XOR 0: plain words (link, size); the size is still compared when the block leaves. */
static void plain_links(void)
{
    unsigned long frees0 = fk3_obj.frees;
    unsigned char *a = dp_get(64, 16), *b = dp_get(64, 16);
    dp_put(a);
    CHECK(word(a, 0) == 0 && word(a, 1) == 64);
    dp_put(b);
    CHECK(word(a, 0) == (uint64_t)(uintptr_t)b && word(a, 1) == 64 && word(b, 0) == 0);
    poke_word(a, 1, 2);
    dp_flush();
    CHECK(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1 && fk3_obj.frees == frees0);
    a = dp_get(0, 16);
    dp_put(a);
    dp_flush();
    CHECK(err_total() == 1 && fk3_obj.frees - frees0 == 1 && fk3_obj.bad_frees == 0);
}

/* SM_OPT_FILL 1 (dl): a write anywhere in a held block's data is reported once when it leaves; that
 * block alone is leaked, the queue goes on. */
static void write_after_free_fill(void)
{
    static const size_t at[] = { 16, 17, 99, 150, 299 };
    unsigned long frees0 = fk2_obj.frees;
    for (unsigned i = 0; i < sizeof at / sizeof at[0]; i++) {
        unsigned char *x = dl_get(100, 16), *y = dl_get(300, 64), *z = dl_get(100, 16);
        dl_put(x);
        dl_put(y);
        dl_put(z);
        for (size_t j = 16; j < 300; j++)
            CHECKF(y[j] == 0xd7, "byte %zu of a held block is %#x", j, y[j]);
        y[at[i]] ^= 0x20;
        dl_flush();
        CHECKF(err_counts[SM_ERR_CORRUPTION] == i + 1 && err_total() == i + 1 && last_ptr == y, "offset %zu: %lu reports",
               at[i], err_total());
        char want[64];
        snprintf(want, sizeof want, "of 300 bytes was written after free (byte %zu)", at[i]);
        CHECKF(strstr(last_detail, want), "detail: %s", last_detail);
        CHECK(fk2_obj.frees - frees0 == 2 * (i + 1) && !dl_below(x, 16) && dl_below(y, 64) && !dl_below(z, 16));
    }
    CHECK(fk2_obj.bad_frees == 0);
}

/* Many sizes and alignments through dl: aligned, usable == size, the user's pattern intact while
 * live; held blocks filled and verified on leaving without a report; calloc zeroed. */
static void fill_round_trips(void)
{
    static const size_t sizes[] = { 0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 100, 255, 256, 1000, 4095, 4096, 5000, 20000, 70000 };
    static const size_t aligns[] = { 16, 32, 64, 128, 1024, 4096 };
    enum { NS = sizeof sizes / sizeof sizes[0], NA = sizeof aligns / sizeof aligns[0] };
    static unsigned char *b[NS * NA];
    unsigned long live0 = fk2_obj.live_blocks;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < NS * NA; i++) {
            size_t n = sizes[i % NS], a = aligns[i / NS];
            b[i] = dl_get(n, a);
            CHECKF(b[i] && (uintptr_t)b[i] % a == 0 && dl_usable(b[i]) == n && dl_below(b[i], a <= 16 ? 16 : a),
                   "%zu bytes aligned to %zu", n, a);
            check_fill(b[i], n, (unsigned)i + 7u * (unsigned)round);
        }
        for (int i = 0; i < NS * NA; i++)
            CHECKF(check_verify(b[i], sizes[i % NS], (unsigned)i + 7u * (unsigned)round), "block %d changed", i);
        for (int i = 0; i < NS * NA; i++)
            dl_put(b[(i * 5) % (NS * NA)]);
        CHECK(dl_quarantine_bytes() <= ((size_t)64 << 10));
    }
    sm_mctx_t c = sm_mctx_alloc(3000, 16, SM_F_ZERO);
    unsigned char *z = dl_alloc(&c);
    int nonzero = 0;
    for (int i = 0; i < 3000; i++)
        nonzero += z[i] != 0;
    CHECK(nonzero == 0 && (c.flags & SM_F_FRESH));
    dl_put(z);
    dl_flush();
    CHECKF(err_total() == 0 && fk2_obj.live_blocks == live0 && fk2_obj.bad_frees == 0, "%lu errors: %s", err_total(), last_detail);
}

/* Resize in place where the fake can (within its block), the header rewritten. */
static void resize_in_place(void)
{
    unsigned char *a = dq_get(100, 16); /* the fake's block: 116 bytes */
    sm_mctx_t c = sm_mctx_block(a, 0, 0);
    CHECK(dq_resize(&c, 50) && dq_usable(a) == 50);
    CHECK(dq_resize(&c, 100) && dq_usable(a) == 100);
    CHECK(!dq_resize(&c, 101) && dq_usable(a) == 100);
    CHECK(dq_resize(&c, 50) && dq_usable(a) == 50);
    /* a shrink that would leave more than half the fake's block unused: no, the socket moves it
     * (core/release.h), and the block is as it was */
    CHECK(!dq_resize(&c, 10) && dq_usable(a) == 50);
    unsigned long frees0 = fk1_obj.frees;
    dq_put(a);
    CHECK(dq_quarantine_bytes() == 66 && !dq_resize(&c, 20));
    dq_flush();
    CHECK(fk1_obj.frees - frees0 == 1 && err_total() == 0 && fk1_obj.bad_frees == 0);
}

/* realloc's move of a large growth: the next layer moves the pages, the header among them, and the
 * header is sealed again at the new address: the contents and the new size hold there, resize and
 * free work there without a report, and the old block went back once. A held block, or one the
 * next layer will not move, stays as it was. */
static void move_seals_the_header_where_it_lands(void)
{
    unsigned long moves0 = fk7_obj.moves, frees0 = fk7_obj.frees;
    size_t live0 = fk7_obj.live_blocks;
    unsigned char *p = dm_get(100, 16);
    for (size_t i = 0; i < 100; i++) /* check_fill's pattern follows the address: not this one */
        p[i] = (unsigned char)(i * 7 + 3);
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    CHECK(dm_move(&c, 3000) && c.ptr != p && fk7_obj.moves - moves0 == 1);
    unsigned char *q = (unsigned char *)c.ptr;
    CHECKF(dm_usable(q) == 3000 && dm_below(q, 16) && !dm_below(p, 16), "moved: usable %zu", dm_usable(q));
    size_t same = 0;
    for (size_t i = 0; i < 100; i++)
        same += q[i] == (unsigned char)(i * 7 + 3);
    CHECKF(same == 100, "%zu of 100 bytes came along", same);
    check_fill(q, 3000, 8);
    sm_mctx_t r = sm_mctx_block(q, 0, 0);
    CHECK(dm_resize(&r, 2000) && dm_usable(q) == 2000 && check_verify(q, 2000, 8));
    dm_put(q); /* larger than the quarantine: down at once */
    CHECKF(err_total() == 0 && !dm_below(q, 16), "%lu reports ('%s')", err_total(), last_detail);

    unsigned char *h = dm_get(50, 16);
    dm_put(h); /* held */
    sm_mctx_t hc = sm_mctx_block(h, 0, 0);
    CHECK(!dm_move(&hc, 5000) && hc.ptr == h && fk7_obj.moves - moves0 == 1 && dm_quarantine_blocks() == 1);

    unsigned char *s = dm_get(64, 16);
    check_fill(s, 64, 9);
    fk7_obj.refuse_moves = true;
    sm_mctx_t m = sm_mctx_block(s, 0, 0);
    CHECK(!dm_move(&m, 5000) && m.ptr == s && dm_usable(s) == 64 && check_verify(s, 64, 9));
    fk7_obj.refuse_moves = false;
    dm_put(s);
    dm_flush();
    CHECKF(err_total() == 0 && fk7_obj.bad_frees == 0 && fk7_obj.live_blocks == live0 && fk7_obj.frees - frees0 == 4,
           "%lu reports ('%s'), %lu frees below", err_total(), last_detail, fk7_obj.frees - frees0);
}

/* Over a next layer whose getmeta says yes inside its blocks: aligned blocks are still found (the
 * candidate 16 below is inside their own block), foreign and interior pointers still refused. */
static void loose_next_layer(void)
{
    static const size_t aligns[] = { 16, 32, 64, 128, 256, 1024, 4096, 65536 };
    unsigned long frees0 = fk5_obj.frees, held = 0, bypassed = 0;
    for (unsigned i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        for (size_t n = 0; n < 300; n += 37) {
            unsigned char *p = dx_get(n, aligns[i]);
            CHECKF(p && (uintptr_t)p % aligns[i] == 0 && dx_usable(p) == n, "%zu bytes aligned to %zu: usable %zu", n,
                   aligns[i], dx_usable(p));
            check_fill(p, n, 5);
            dx_put(p + 16);
            dx_put(p + 64);
            CHECK(check_verify(p, n, 5));
            dx_put(p);
            /* Held: a double free. Larger than the quarantine, it went down at once: the fake no
             * longer has it; a double free where its gone header is still readable in its page,
             * else an invalid free. Either way reported once. */
            dx_put(p);
            foot(n, aligns[i]) <= 1024 ? held++ : bypassed++;
        }
    }
    dx_flush();
    CHECK(held + bypassed == 8 * 9 && bypassed == 3 * 9); /* aligned to 1024 and more */
    CHECKF(err_counts[SM_ERR_INVALID_FREE] >= 2 * 8 * 9 && err_counts[SM_ERR_DOUBLE_FREE] >= held &&
               err_counts[SM_ERR_INVALID_FREE] + err_counts[SM_ERR_DOUBLE_FREE] == 3 * 8 * 9 && err_total() == 3 * 8 * 9,
           "%lu invalid, %lu double frees", err_counts[SM_ERR_INVALID_FREE], err_counts[SM_ERR_DOUBLE_FREE]);
    CHECK(fk5_obj.frees - frees0 == 8 * 9 && fk5_obj.bad_frees == 0 && loose_interior_yes > 0);
}

/* The hit paths over a next layer with HIT: an unaligned request is its hit plus a header; a free
 * the hit takes is held, and a block leaving goes to the next layer's hit as a sized free of its
 * footprint. Invalid and double frees miss the hit without a report, and the miss reports each
 * once, as the socket calls them. The thread's first free misses (no quarantine yet). */
static void hit_paths(void)
{
    enum { N = 12 };
    unsigned char *b[N];
    unsigned long allocs0 = hitn_alloc_hits, frees0 = hitn_free_hits;
    for (int i = 0; i < N; i++) {
        b[i] = dh_alloc_hit(100);
        CHECK(b[i] && (uintptr_t)b[i] % 16 == 0 && dh_usable(b[i]) == 100 && dh_below(b[i], 16));
        check_fill(b[i], 100, (unsigned)i);
    }
    CHECK(hitn_alloc_hits - allocs0 == N && !dh_alloc_hit((size_t)1 << 56));
    CHECK(!dh_sock_free(b[0], 0, 0) && dh_quarantine_blocks() == 1); /* the first: no quarantine yet */
    for (int i = 1; i < N; i++) {
        CHECK(check_verify(b[i], 100, (unsigned)i));
        CHECKF(dh_sock_free(b[i], i % 2 ? 100 : 0, i % 2 ? SM_F_SIZED : 0), "free %d missed", i);
    }
    /* 1024 / 116: 8 held, 4 left through the next layer's hit, sized with their footprint. */
    CHECKF(dh_quarantine_blocks() == 8 && hitn_free_hits - frees0 == 4 && hitn_last_sized == 116 && !dh_below(b[3], 16) &&
               dh_below(b[4], 16),
           "%zu held, %lu passed down, last sized %zu", dh_quarantine_blocks(), hitn_free_hits - frees0, hitn_last_sized);
    CHECK(!dh_sock_free(b[5], 0, 0) && err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1);
    unsigned char *c = dh_alloc_hit(40);
    CHECK(!dh_sock_free(c + 16, 0, 0) && err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 2);
    CHECK(!dh_sock_free(c, 41, SM_F_SIZED) && err_counts[SM_ERR_INVALID_FREE] == 2 && err_total() == 3);
    CHECK(dh_sock_free(c, 40, SM_F_SIZED));
    /* Aligned requests and calloc through L_alloc: the hit for the latter, the miss for the former. */
    hitn_miss = true;
    CHECK(!dh_alloc_hit(16));
    hitn_miss = false;
    unsigned char *a = dh_get(100, 64);
    sm_mctx_t z = sm_mctx_alloc(200, 16, SM_F_ZERO);
    unsigned char *zp = dh_alloc(&z);
    int nonzero = 0;
    for (int i = 0; i < 200; i++)
        nonzero += zp[i] != 0;
    CHECK(a && (uintptr_t)a % 64 == 0 && dh_below(a, 64) && zp && nonzero == 0 && (z.flags & SM_F_FRESH));
    CHECK(!dh_sock_free(a, 0, 0) && dh_sock_free(zp, 0, 0) && err_total() == 3);
    /* With the next layer's hit missing, a block leaving goes to its miss. Left below: the queue. */
    hitn_miss = true;
    unsigned long fake_frees0 = fk6_obj.frees, hits0 = hitn_free_hits;
    size_t held = dh_quarantine_blocks();
    dh_flush();
    hitn_miss = false;
    CHECKF(held == 8 && dh_quarantine_blocks() == 0 && fk6_obj.frees - fake_frees0 == held && hitn_free_hits == hits0 &&
               fk6_obj.live_blocks == 1,
           "%zu held, %lu passed down, %zu left below", held, fk6_obj.frees - fake_frees0, fk6_obj.live_blocks);
    CHECK(err_total() == 3 && fk6_obj.bad_frees == 0);
    /* Sized only as allocated: a resized block, and an aligned one, go down unsized. */
    static const size_t align_of[] = { 16, 16, 64 }, sized_as[] = { 116, 0, 0 };
    for (int k = 0; k < 3; k++) {
        unsigned char *r = dh_get(100, align_of[k]);
        sm_mctx_t rc = sm_mctx_block(r, 0, 0);
        CHECK(r && (k != 1 || (dh_resize(&rc, 50) && dh_usable(r) == 50)));
        dh_sock_free(r, 0, 0);
        hits0 = hitn_free_hits;
        dh_flush();
        CHECKF(hitn_free_hits - hits0 == 1 && hitn_last_sized == sized_as[k] && !dh_below(r, align_of[k]),
               "case %d: passed down sized %zu", k, hitn_last_sized);
    }
    CHECK(err_total() == 3 && fk6_obj.bad_frees == 0 && fk6_obj.live_blocks == 1);
}

/* A live block's header copied into another block's bytes, 16 before an interior pointer: read
 * directly, it must not verify there, even with the magic policy (dl), whose check word is the same
 * for every block. Reported once as an invalid free, nothing held or passed down. */
static void copied_header(void)
{
    unsigned char *a = dl_get(200, 16), *b = dl_get(64, 16);
    unsigned long frees0 = fk2_obj.frees;
    size_t held0 = dl_quarantine_blocks();
    memcpy(a + 48, b - 16, 16);
    dl_put(a + 64);
    CHECK(err_counts[SM_ERR_INVALID_FREE] == 1 && err_total() == 1 && last_ptr == a + 64);
    CHECK(dl_quarantine_blocks() == held0 && fk2_obj.frees == frees0 && dl_usable(a + 64) == (size_t)-1);
    dl_put(a);
    dl_put(b);
    dl_flush();
    CHECK(err_total() == 1 && fk2_obj.frees - frees0 == 2 && fk2_obj.bad_frees == 0);
}

/* The header is read directly where it lies in its pointer's page: a free, getmeta and resize of a
 * block at offset 16 or of an aligned request up to 2 KiB ask nothing of the next layer; at a page
 * start the next layer's getmeta is asked first. A second free still asks (the careful look), and
 * is reported once: a double free if the block is held, or if it was larger than the quarantine
 * and went down at once but its gone header is still readable; else an invalid free. */
static void direct_look(void)
{
    static const size_t aligns[] = { 16, 32, 64, 256, 2048, 4096, 8192 };
    unsigned long held = 0;
    for (unsigned i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        unsigned char *p = dx_get(100, aligns[i]);
        CHECK(p && (uintptr_t)p % aligns[i] == 0);
        bool page_start = (uintptr_t)p % 4096 == 0;
        unsigned long asked0 = loose_getmetas;
        sm_mctx_t c = sm_mctx_block(p, 0, 0);
        CHECK(dx_usable(p) == 100 && dx_resize(&c, 60) && dx_usable(p) == 60);
        dx_put(p);
        CHECKF((loose_getmetas - asked0 == 0) == !page_start, "aligned to %zu: getmeta asked %lu times", aligns[i],
               loose_getmetas - asked0);
        asked0 = loose_getmetas;
        dx_put(p);
        held += foot(100, aligns[i]) <= 1024;
        CHECK(loose_getmetas > asked0 && err_counts[SM_ERR_DOUBLE_FREE] >= held && err_total() == i + 1);
    }
    dx_flush();
    CHECK(held == 4 && fk5_obj.bad_frees == 0);
}

/* A pointer into unmapped memory, not at a page start, faults in free, as glibc's free does (its
 * header is read directly); at a page start it is reported (tested in invalid_frees). */
static void wild_pointer_faults(void)
{
    unsigned char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn the fault into an exit */
        dq_put(none + 64);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "child status %#x", status);
    munmap(none, 4096);
}

static void *frees_then_exits(void *arg)
{
    (void)arg;
    unsigned char *b[5];
    for (int i = 0; i < 5; i++)
        b[i] = dq_get(64, 16);
    for (int i = 0; i < 5; i++)
        dq_put(b[i]);
    return (void *)(intptr_t)(dq_quarantine_bytes() != 5 * 80);
}

/* A thread's exit passes its quarantine down and frees its queue. */
static void thread_exit_flushes(void)
{
    unsigned long frees0 = fk1_obj.frees, meta0 = fm1_obj.live_blocks, exits0 = fk1_obj.thread_exits;
    check_threads(1, frees_then_exits);
    CHECKF(fk1_obj.frees - frees0 == 5 && fm1_obj.live_blocks == meta0 && fk1_obj.thread_exits > exits0,
           "%lu passed down, %lu metadata blocks (before %lu)", fk1_obj.frees - frees0, fm1_obj.live_blocks, meta0);
    CHECK(err_total() == 0 && fk1_obj.bad_frees == 0);
}

/* The `fatal` err policy: the child aborts with the report on stderr. */
static void fatal_child(int what, const char *want1, const char *want2)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (df_create() != 0)
            _exit(3);
        unsigned char *a = df_get(48, 16);
        if (what == 0) {
            df_put(a);
            df_put(a);
        } else {
            _Alignas(16) unsigned char stack[64];
            df_put(stack + 16);
        }
        _exit(0);
    }
    close(fd[1]);
    char text[1024] = { 0 };
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof text && (r = read(fd[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)r;
    close(fd[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %#x", status);
    CHECKF(strstr(text, want1) && strstr(text, want2), "child's stderr: %s", text);
}

static void fatal_aborts(void)
{
    fatal_child(0, "sunmao: df: double free (0x", "): block of 48 bytes is already in the quarantine; ignored\n");
    fatal_child(1, "sunmao: df: invalid free (0x", "): no live block of this layer starts here");
}

#define CASE(fn)                                                                                                       \
    do {                                                                                                           \
        err_reset();                                                                                               \
        last_detail[0] = 0;                                                                                        \
        RUN_CASE(fn);                                                                                              \
    } while (0)

int main(void)
{
    check_begin("delayed_free");
    sm_err_callback_set(recorder);
    if (dq_create() || dl_create() || dp_create() || dx_create() || dh_create() || dm_create()) {
        printf("not ok delayed_free: create\n");
        return 1;
    }
    CASE(holds_then_fifo);
    CASE(large_blocks);
    CASE(accounting);
    CASE(double_frees);
    CASE(invalid_frees);
    CASE(write_after_free_link);
    CASE(plain_links);
    CASE(write_after_free_fill);
    CASE(fill_round_trips);
    CASE(resize_in_place);
    CASE(move_seals_the_header_where_it_lands);
    CASE(loose_next_layer);
    CASE(hit_paths);
    CASE(direct_look);
    CASE(copied_header);
    CASE(wild_pointer_faults);
    CASE(thread_exit_flushes);
    CASE(fatal_aborts);
    return check_end();
}
