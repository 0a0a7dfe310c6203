/* Unit test of the tlsf_glk core layer over fake next layers: pattern-checked random workloads with
 * the heap's own invariant walker (tlsf_check), alignment, in-place resize, regions going back to
 * the next layer, out of memory, double and invalid frees, size_handle, several instances in one
 * translation unit, coalescing across contiguous chunks, and threads under mutex and spinlock. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include "tests/support/check.h"
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/none.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER fake_m
#include "tests/support/fake_next.h"
#define SM_LAYER heap_m
#define SM_NEXT fake_m
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/layers/core/tlsf_glk.h>

#define SM_LAYER fake_s
#include "tests/support/fake_next.h"
#define SM_LAYER heap_s
#define SM_NEXT fake_s
#define SM_SYNC spinlock
#define SM_ERR callback
#define SM_OPT_SL_BITS 4
#define SM_OPT_REGION_SIZE ((size_t)256 << 10)
#include <sunmao/layers/core/tlsf_glk.h>

/* With the sizeclass slot, as libsunmao composes it: the classes above serve up to 8 KiB. */
#include <sunmao/policies/sizeclass/tc.h>
#define SM_LAYER fake_k
#include "tests/support/fake_next.h"
#define SM_LAYER heap_k
#define SM_NEXT fake_k
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_SIZECLASS tc
#define SM_SIZE_MIN ((8u << 10) + 1)
#include <sunmao/layers/core/tlsf_glk.h>

#define SM_LAYER fake_h
#include "tests/support/fake_next.h"
#define SM_LAYER heap_h
#define SM_NEXT fake_h
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_SIZE_MIN 1
#define SM_SIZE_MAX 4096
#include <sunmao/layers/core/tlsf_glk.h>

/* A brk-like next layer: contiguous chunks from one static arena (optionally leaving a hole), so
 * the heap can merge chunks into one span. Not thread-safe, like a real brk heap. */
enum { bump_thread_safe = 0, bump_min_align = 4096, bump_zeroed = 0 };
static struct {
    char *top;
    int leave_hole;
    struct { void *ptr; size_t size; } live[64];
    size_t live_count;
    unsigned long allocs, frees, bad_frees;
} bump;
static char bump_arena[32 << 20] __attribute__((aligned(4096)));
static inline int bump_create(void) { return 0; }
static inline void *bump_alloc(sm_mctx_t *c)
{
    if (!bump.top) /* start on a 16 MiB boundary: one page-map leaf then covers every chunk */
        bump.top = (char *)sm_align_up((uintptr_t)bump_arena, (size_t)16 << 20);
    char *p = (char *)sm_align_up((uintptr_t)bump.top + (bump.leave_hole ? 4096 : 0), c->align < 4096 ? 4096 : c->align);
    bump.leave_hole = 0;
    if (p + c->size > bump_arena + sizeof bump_arena || bump.live_count == 64) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    bump.top = p + c->size;
    bump.live[bump.live_count].ptr = p;
    bump.live[bump.live_count++].size = c->size;
    bump.allocs++;
    return c->ptr = p;
}
static inline void bump_free(sm_mctx_t *c)
{
    for (size_t i = 0; i < bump.live_count; i++) {
        if (bump.live[i].ptr == c->ptr && (c->flags & SM_F_SIZED) && c->size == bump.live[i].size) {
            bump.live[i] = bump.live[--bump.live_count];
            bump.frees++;
            return;
        }
    }
    bump.bad_frees++;
}
static inline bool bump_getmeta(sm_mctx_t *c) { (void)c; return false; }
static inline bool bump_resize(sm_mctx_t *c, size_t n) { (void)c, (void)n; return false; }
static inline bool bump_purge(sm_mctx_t *c) { (void)c; return false; }
static inline bool bump_move(sm_mctx_t *c, size_t n) { (void)c, (void)n; return false; }
static inline void bump_release(sm_release_t *r) { (void)r; }
static inline void bump_thread_exit(void) {}
static inline void bump_stats(sm_stats_t *s) { (void)s; }
static inline void bump_fork_prepare(void) {}
static inline void bump_fork_parent(void) {}
static inline void bump_fork_child(void) {}
static inline void *bump_meta_alloc(sm_mctx_t *c) { return bump_alloc(c); }
static inline void bump_meta_free(sm_mctx_t *c) { bump_free(c); }

#define SM_LAYER heap_c
#define SM_NEXT bump
#define SM_SYNC none
#define SM_ERR callback
#include <sunmao/layers/core/tlsf_glk.h>

_Static_assert(heap_m_thread_safe && heap_s_thread_safe && !heap_c_thread_safe, "thread_safe follows the sync slot");
_Static_assert(heap_m_min_align == 16 && !heap_m_zeroed, "properties");

/* ---- helpers ---- */
#define HEAP_OK(heap)                                                                                  \
    do {                                                                                               \
        const char *why_ = heap##_check();                                                             \
        CHECKF(!why_, #heap " invariants: %s", why_);                                                  \
    } while (0)

/* Big blocks are patterned at both ends only, so the test stays fast under sanitizers. */
static void fill_block(void *p, size_t n, unsigned seed)
{
    if (n <= 65536) {
        check_fill(p, n, seed);
    } else {
        check_fill(p, 32768, seed);
        check_fill((char *)p + n - 32768, 32768, seed + 1);
    }
}
static int verify_block(const void *p, size_t n, unsigned seed)
{
    if (n <= 65536)
        return check_verify(p, n, seed);
    return check_verify(p, 32768, seed) && check_verify((const char *)p + n - 32768, 32768, seed + 1);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

#define DEFINE_HEAP_OPS(heap)                                                                          \
    SM_UNUSED static void *heap##_get(size_t n, size_t align)                                                    \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_alloc(n, align, 0);                                                      \
        return heap##_alloc(&c);                                                                       \
    }                                                                                                  \
    SM_UNUSED static void heap##_put(void *p)                                                                    \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                          \
        heap##_free(&c);                                                                               \
    }                                                                                                  \
    SM_UNUSED static size_t heap##_usable(void *p, const char **owner)                                           \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                          \
        if (!heap##_getmeta(&c))                                                                       \
            return 0;                                                                                  \
        if (owner)                                                                                     \
            *owner = c.owner;                                                                          \
        return c.usable;                                                                               \
    }                                                                                                  \
    SM_UNUSED static bool heap##_grow_to(void *p, size_t n)                                                      \
    {                                                                                                  \
        sm_mctx_t c = sm_mctx_block(p, 0, 0);                                                          \
        return heap##_resize(&c, n);                                                                   \
    }
DEFINE_HEAP_OPS(heap_m)
DEFINE_HEAP_OPS(heap_s)
DEFINE_HEAP_OPS(heap_h)
DEFINE_HEAP_OPS(heap_c)
DEFINE_HEAP_OPS(heap_k)

/* Everything heap_m holds from fake_m is its chunks and page-map nodes: no leaks, no strays. */
#define HEAP_M_ACCOUNTED()                                                                             \
    CHECKF(fake_m_obj.live_blocks == heap_m_obj.chunk_count + heap_m_obj.map_nodes &&                  \
               fake_m_obj.bad_frees == 0,                                                              \
           "fake_m holds %zu blocks, heap_m accounts for %zu chunks + %zu nodes, %lu bad frees",       \
           fake_m_obj.live_blocks, heap_m_obj.chunk_count, heap_m_obj.map_nodes, fake_m_obj.bad_frees)

static unsigned long err_count[SM_ERR_KIND_COUNT];
static const void *err_last_ptr;
static const char *err_last_layer;
static void count_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)detail;
    err_count[kind]++;
    err_last_ptr = ptr;
    err_last_layer = layer;
}

/* ---- cases ---- */
static void create_all(void)
{
    CHECK(heap_m_create() == 0 && heap_s_create() == 0 && heap_h_create() == 0 && heap_c_create() == 0);
    CHECK(fake_m_obj.creates == 1 && fake_s_obj.creates == 1 && fake_h_obj.creates == 1);
}

static void basic_sizes(void)
{
    void *blocks[200];
    for (size_t i = 0; i < 200; i++) {
        size_t n = i * 37;
        blocks[i] = heap_m_get(n, 16);
        CHECK(blocks[i] && sm_ptr_aligned(blocks[i], 16));
        const char *owner = NULL;
        CHECK(heap_m_usable(blocks[i], &owner) >= n && owner && !strcmp(owner, "heap_m"));
        fill_block(blocks[i], n, (unsigned)i);
    }
    HEAP_OK(heap_m);
    for (size_t i = 0; i < 200; i += 2) {
        CHECK(verify_block(blocks[i], i * 37, (unsigned)i));
        heap_m_put(blocks[i]);
    }
    HEAP_OK(heap_m);
    for (size_t i = 1; i < 200; i += 2) {
        CHECK(verify_block(blocks[i], i * 37, (unsigned)i));
        heap_m_put(blocks[i]);
    }
    HEAP_OK(heap_m);
    CHECK(heap_m_obj.span_count == 1);
    HEAP_M_ACCOUNTED();
}

#define SLOTS 1000
static void random_workload(void)
{
    static struct { void *p; size_t n; unsigned seed; } slot[SLOTS];
    uint64_t rng = rng_state;
    size_t spans_max = 0;
    for (unsigned op = 0; op < 60000; op++) {
        uint64_t r = rng_next(&rng);
        size_t i = r % SLOTS;
        if (slot[i].p) {
            CHECKF(verify_block(slot[i].p, slot[i].n, slot[i].seed), "op %u: block %p (%zu bytes) was overwritten",
                   op, slot[i].p, slot[i].n);
            if ((r >> 20) % 8 == 0) { /* resize in place sometimes, keeping the common prefix */
                size_t n = 1 + (r >> 32) % 8192;
                if (heap_m_grow_to(slot[i].p, n)) {
                    size_t keep = n < slot[i].n ? n : slot[i].n;
                    CHECK(verify_block(slot[i].p, keep, slot[i].seed) && heap_m_usable(slot[i].p, NULL) >= n);
                    slot[i].n = n;
                    fill_block(slot[i].p, n, slot[i].seed);
                    continue;
                }
            }
            heap_m_put(slot[i].p);
            slot[i].p = NULL;
        } else {
            unsigned kind = (unsigned)(r >> 24) % 100;
            size_t n = kind < 60 ? 1 + (r >> 32) % 1024 : kind < 99 ? 1 + (r >> 32) % 65536 : 1 + (r >> 32) % (2u << 20);
            slot[i].p = heap_m_get(n, 16);
            CHECKF(slot[i].p && sm_ptr_aligned(slot[i].p, 16), "op %u: alloc %zu failed", op, n);
            if (!slot[i].p)
                break;
            slot[i].n = n;
            slot[i].seed = op;
            fill_block(slot[i].p, n, op);
        }
        if (heap_m_obj.span_count > spans_max)
            spans_max = heap_m_obj.span_count;
        if (op % 5000 == 0)
            HEAP_OK(heap_m);
    }
    HEAP_OK(heap_m);
    for (size_t i = 0; i < SLOTS; i++) {
        if (slot[i].p) {
            CHECK(verify_block(slot[i].p, slot[i].n, slot[i].seed));
            heap_m_put(slot[i].p);
            slot[i].p = NULL;
        }
    }
    HEAP_OK(heap_m);
    CHECKF(spans_max > 1 && heap_m_obj.span_count == 1, "spans: max %zu, after freeing all %zu", spans_max,
           heap_m_obj.span_count);
    HEAP_M_ACCOUNTED();
    printf("# random_workload: up to %zu spans, %lu chunk allocs from fake_m, %zu page-map nodes\n", spans_max,
           fake_m_obj.allocs, heap_m_obj.map_nodes);
}

static void aligned_allocs(void)
{
    void *blocks[16][4];
    for (unsigned k = 0; k < 16; k++) {
        size_t align = (size_t)32 << (k % 12); /* 32 .. 64 KiB */
        for (unsigned j = 0; j < 4; j++) {
            size_t n = 1 + j * 3000 + k * 11;
            blocks[k][j] = heap_m_get(n, align);
            CHECKF(blocks[k][j] && sm_ptr_aligned(blocks[k][j], align), "align %zu size %zu: %p", align, n,
                   blocks[k][j]);
            CHECK(heap_m_usable(blocks[k][j], NULL) >= n);
            fill_block(blocks[k][j], n, k * 4 + j);
        }
        HEAP_OK(heap_m);
    }
    for (unsigned j = 0; j < 4; j++)
        for (unsigned k = 0; k < 16; k++) {
            CHECK(verify_block(blocks[k][j], 1 + j * 3000 + k * 11, k * 4 + j));
            heap_m_put(blocks[k][j]);
        }
    HEAP_OK(heap_m);
    CHECK(heap_m_obj.span_count == 1);
    HEAP_M_ACCOUNTED();
}

static void resize_in_place(void)
{
    char *a = heap_m_get(4000, 16);
    CHECK(a);
    fill_block(a, 4000, 7);
    /* Shrink: the tail goes back to the heap, the head keeps its contents. */
    CHECK(heap_m_grow_to(a, 100) && heap_m_usable(a, NULL) < 200 && verify_block(a, 100, 7));
    HEAP_OK(heap_m);
    /* Grow back over the tail that was just freed. */
    CHECK(heap_m_grow_to(a, 3000) && heap_m_usable(a, NULL) >= 3000 && verify_block(a, 100, 7));
    fill_block(a, 3000, 8);
    HEAP_OK(heap_m);
    /* Find a block whose physical successor is in use: growing it must fail and change nothing. */
    char *b = NULL, *spare[64];
    unsigned spares = 0;
    size_t usable = heap_m_usable(a, NULL);
    while (spares < 64) {
        char *x = heap_m_get(256, 16);
        if (x == a + usable + 8) {
            b = x;
            break;
        }
        spare[spares++] = x;
    }
    CHECK(b);
    if (b) {
        fill_block(b, 256, 9);
        CHECK(!heap_m_grow_to(a, usable + 64) && heap_m_usable(a, NULL) == usable && verify_block(a, 3000, 8));
        heap_m_put(b);
        CHECK(heap_m_grow_to(a, usable + 64) && verify_block(a, 3000, 8));
    }
    HEAP_OK(heap_m);
    while (spares)
        heap_m_put(spare[--spares]);
    heap_m_put(a);
    HEAP_OK(heap_m);
    HEAP_M_ACCOUNTED();
}

/* The header's block size (payload and header) of heap_k's live block p. */
static size_t heap_k_bsize_of(void *p) { return ((size_t *)p)[-1] & ~(size_t)15; }

/* A shrink below the smallest size served keeps the new size's class size (the sizeclass slot), so
 * a sized free of that size names a class the block holds; its freed tail merges with the free
 * space after it, and the block regrows into it. Without the slot (heap_h serves from 1 byte) and
 * above SM_SIZE_MIN the shrink is to the size itself. */
static void shrink_keeps_the_class_size(void)
{
    CHECK(heap_k_create() == 0);
    static const size_t fits[] = { 1, 100, 1000, 5000, 8192 };
    for (size_t i = 0; i < sizeof fits / sizeof *fits; i++) {
        size_t n = fits[i], cls = sm_sizeclass_tc_class_to_size(sm_sizeclass_tc_size_to_class(n));
        char *a = heap_k_get(65536, 16);
        CHECK(a != NULL);
        fill_block(a, 65536, 40 + (unsigned)i);
        CHECK(heap_k_grow_to(a, n));
        /* exactly the class size: any size a sized free may name, up to it, has a class it holds */
        size_t usable = heap_k_usable(a, NULL);
        CHECKF(usable == cls || (cls + 8 >= (8u << 10) + 1 && usable == cls + 8), /* above every class: as it is */
               "shrunk to %zu: %zu usable, class size %zu", n, usable, cls);
        CHECK(verify_block(a, n, 40 + (unsigned)i));
        HEAP_OK(heap_k);
        char *b = heap_k_get(60000, 16); /* the freed tail, merged with what follows, is reused at once */
        char *end = a + heap_k_bsize_of(a) - 8; /* the block's own end, a little past its usable size */
        CHECKF(b == end + 8, "shrunk to %zu: the next block at %p, not right after it (%p)", n, (void *)b, (void *)(end + 8));
        heap_k_put(b);
        CHECK(heap_k_grow_to(a, 30000) && verify_block(a, n, 40 + (unsigned)i)); /* regrows in place */
        heap_k_put(a);
        HEAP_OK(heap_k);
    }
    char *c = heap_k_get(65536, 16);
    CHECK(c && heap_k_grow_to(c, 9000) && heap_k_usable(c, NULL) < 9000 + 32);
    /* a block kept by realloc up to its usable size and grown past it: in place, by class */
    CHECK(heap_k_grow_to(c, 4000) && heap_k_usable(c, NULL) == 4096 && heap_k_grow_to(c, 4100) &&
          heap_k_usable(c, NULL) == sm_sizeclass_tc_class_to_size(sm_sizeclass_tc_size_to_class(4100)));
    heap_k_put(c);
    HEAP_OK(heap_k);
}

static void regions_go_back(void)
{
    unsigned long frees_before = fake_m_obj.frees;
    void *big[24];
    for (unsigned i = 0; i < 24; i++) {
        big[i] = heap_m_get(600 << 10, 16); /* two do not fit in one 1 MiB region */
        CHECK(big[i]);
    }
    CHECK(heap_m_obj.span_count >= 24);
    HEAP_M_ACCOUNTED();
    for (unsigned i = 0; i < 24; i++)
        heap_m_put(big[i]);
    HEAP_OK(heap_m);
    CHECKF(heap_m_obj.span_count == 1 && heap_m_obj.chunk_count == 1, "%zu spans left", heap_m_obj.span_count);
    CHECK(fake_m_obj.frees >= frees_before + 23);
    HEAP_M_ACCOUNTED();
}

static void out_of_memory(void)
{
    void *small[4096];
    unsigned n = 0;
    fake_m_obj.limit_bytes = fake_m_obj.live_bytes + 4096; /* no new region fits */
    errno = 0;
    CHECK(!heap_m_get(3 << 20, 16) && errno == ENOMEM);
    HEAP_OK(heap_m);
    /* The kept region still serves small requests, until it is full. */
    while (n < 4096 && (small[n] = heap_m_get(1000, 16)) != NULL)
        fill_block(small[n], 1000, n), n++;
    CHECKF(n > 500 && n < 4096 && errno == ENOMEM, "%u blocks before running out", n);
    HEAP_OK(heap_m);
    errno = 0;
    CHECK(!heap_m_get((size_t)1 << 50, 16) && errno == ENOMEM); /* absurd size: refused outright */
    CHECK(!heap_m_get(16, (size_t)1 << 50) && errno == ENOMEM);
    fake_m_obj.limit_bytes = 0;
    void *after = heap_m_get(3 << 20, 16); /* memory is back: the heap grows again */
    CHECK(after);
    heap_m_put(after);
    while (n) {
        n--;
        CHECK(verify_block(small[n], 1000, n));
        heap_m_put(small[n]);
    }
    HEAP_OK(heap_m);
    HEAP_M_ACCOUNTED();
}

static void bad_frees(void)
{
    memset(err_count, 0, sizeof err_count);
    sm_err_callback_set(count_error);
    char *a = heap_m_get(300, 16), *b = heap_m_get(300, 16), *c = heap_m_get(300, 16);
    fill_block(a, 300, 1), fill_block(b, 300, 2), fill_block(c, 300, 3);
    heap_m_put(b);
    heap_m_put(b);
    CHECK(err_count[SM_ERR_DOUBLE_FREE] == 1 && err_last_ptr == b && !strcmp(err_last_layer, "heap_m"));
    HEAP_OK(heap_m);
    heap_m_put(c);
    heap_m_put(c);
    CHECK(err_count[SM_ERR_DOUBLE_FREE] == 2 && err_last_ptr == c);
    HEAP_OK(heap_m);
    /* A block absorbed by a free neighbour has no header of its own any more; a second free of it
     * is still caught. heap_c is one free block here, so x, y, z are carved from it in order. */
    char *x = heap_c_get(100, 16), *y = heap_c_get(100, 16), *z = heap_c_get(100, 16);
    CHECK(y == x + heap_c_usable(x, NULL) + 8 && z == y + heap_c_usable(y, NULL) + 8);
    heap_c_put(y), heap_c_put(x); /* y is absorbed by x */
    heap_c_put(y);
    CHECK(err_count[SM_ERR_DOUBLE_FREE] == 3 && err_last_ptr == y && !strcmp(err_last_layer, "heap_c"));
    heap_c_put(z); /* z absorbs its free successor and is absorbed by x */
    heap_c_put(z);
    CHECK(err_count[SM_ERR_DOUBLE_FREE] == 4 && err_last_ptr == z);
    HEAP_OK(heap_c);
    err_count[SM_ERR_DOUBLE_FREE] = 2;
    heap_m_put(a + 64); /* interior pointer: the word before it is user data */
    CHECK(err_count[SM_ERR_INVALID_FREE] == 1 && err_last_ptr == a + 64);
    heap_m_put(a + 8); /* misaligned */
    CHECK(err_count[SM_ERR_INVALID_FREE] == 2 && err_last_ptr == a + 8);
    HEAP_OK(heap_m);
    CHECK(verify_block(a, 300, 1)); /* the ignored frees left a alone */
    heap_m_put(a);
    CHECK(err_count[SM_ERR_INVALID_FREE] == 2 && err_count[SM_ERR_DOUBLE_FREE] == 2 &&
          err_count[SM_ERR_CORRUPTION] == 0);
    /* A pointer the heap never gave out goes to the next layer, which owns the verdict. */
    unsigned long fake_bad = fake_m_obj.bad_frees;
    static char not_ours[64];
    heap_m_put(not_ours);
    CHECK(fake_m_obj.bad_frees == fake_bad + 1);
    fake_m_obj.bad_frees = fake_bad;
    HEAP_OK(heap_m);
    sm_err_callback_set(NULL);
    HEAP_M_ACCOUNTED();
}

static void size_handle_passes_on(void)
{
    unsigned long allocs = fake_h_obj.allocs;
    const char *owner = NULL;
    char *big = heap_h_get(8192, 16), *zero = heap_h_get(0, 16), *mine = heap_h_get(4096, 16);
    CHECK(big && zero && mine);
    CHECK(heap_h_usable(big, &owner) == 8192 && !strcmp(owner, "fake_h"));
    CHECK(heap_h_usable(zero, &owner) && !strcmp(owner, "fake_h"));
    CHECK(heap_h_usable(mine, &owner) >= 4096 && !strcmp(owner, "heap_h"));
    /* big and zero came straight from fake_h, mine from a region: three allocations in all, plus
     * page-map nodes for the region. */
    CHECK(fake_h_obj.allocs == allocs + 3 + heap_h_obj.map_nodes);
    unsigned long frees = fake_h_obj.frees;
    heap_h_put(big), heap_h_put(zero), heap_h_put(mine);
    CHECK(fake_h_obj.frees == frees + 2 && fake_h_obj.bad_frees == 0);
    HEAP_OK(heap_h);
}

static void two_instances(void)
{
    char *m = heap_m_get(1000, 16), *s = heap_s_get(1000, 16);
    const char *owner = NULL;
    CHECK(m && s);
    CHECK(heap_m_usable(m, &owner) && !strcmp(owner, "heap_m"));
    CHECK(heap_s_usable(s, &owner) && !strcmp(owner, "heap_s"));
    /* Each instance knows only its own blocks; the other's go down to its own fake, which has
     * never seen them. */
    CHECK(!heap_s_usable(m, NULL) && !heap_m_usable(s, NULL));
    heap_m_put(m);
    heap_s_put(s);
    HEAP_OK(heap_m);
    HEAP_OK(heap_s);
}

static void contiguous_chunks_merge(void)
{
    /* The first chunk is followed in the arena by the page-map nodes it needed, so chunk 2 starts
     * a new span; a fills most of chunk 1, b most of chunk 2. c fits in neither rest, so the heap
     * takes chunk 3, which lies right after chunk 2: it joins span 2 and c straddles the boundary. */
    char *a = heap_c_get(700 << 10, 16), *b = heap_c_get(700 << 10, 16), *c = heap_c_get(700 << 10, 16);
    CHECK(a && b && c && bump.allocs == 3 + heap_c_obj.map_nodes);
    CHECKF(heap_c_obj.span_count == 2 && heap_c_obj.chunk_count == 3, "%zu spans, %zu chunks",
           heap_c_obj.span_count, heap_c_obj.chunk_count);
    fill_block(a, 700 << 10, 1), fill_block(b, 700 << 10, 2), fill_block(c, 700 << 10, 3);
    HEAP_OK(heap_c);
    CHECK(verify_block(a, 700 << 10, 1) && verify_block(b, 700 << 10, 2) && verify_block(c, 700 << 10, 3));
    /* Once c is free, the rest of chunk 2 and all of chunk 3 are one block: 1.2 MiB fit in it. */
    heap_c_put(c);
    HEAP_OK(heap_c);
    unsigned long allocs = bump.allocs;
    char *whole = heap_c_get(1200 << 10, 16);
    CHECK(whole && bump.allocs == allocs && whole > b);
    fill_block(whole, 1200 << 10, 4);
    CHECK(verify_block(b, 700 << 10, 2));
    heap_c_put(whole);
    /* Span 2 empties: both of its chunks go back, each with the size it was taken with. */
    heap_c_put(b);
    CHECKF(heap_c_obj.span_count == 1 && heap_c_obj.chunk_count == 1 && bump.frees == 2 && bump.bad_frees == 0,
           "%zu spans, %zu chunks, %lu frees, %lu bad", heap_c_obj.span_count, heap_c_obj.chunk_count, bump.frees,
           bump.bad_frees);
    CHECK(verify_block(a, 700 << 10, 1));
    heap_c_put(a);
    /* A hole before the next chunk keeps it out of the kept span. */
    bump.leave_hole = 1;
    char *d = heap_c_get(2 << 20, 16);
    CHECK(d && heap_c_obj.span_count == 2);
    heap_c_put(d);
    CHECK(heap_c_obj.span_count == 1 && heap_c_obj.chunk_count == 1 && bump.frees == 3 && bump.bad_frees == 0);
    HEAP_OK(heap_c);
}

#define THREADS 4
#define THREAD_SLOTS 200
struct worker { int which; unsigned id; unsigned failures; };
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct { char *p; size_t n; } slot[THREAD_SLOTS] = { { 0, 0 } };
    uint64_t rng = 0x1234567ull * (w->id + 1);
    for (unsigned op = 0; op < 30000; op++) {
        uint64_t r = rng_next(&rng);
        size_t i = r % THREAD_SLOTS;
        unsigned seed = w->id * 1000003u + (unsigned)i;
        if (slot[i].p) {
            w->failures += !check_verify(slot[i].p, slot[i].n, seed);
            w->which ? heap_s_put(slot[i].p) : heap_m_put(slot[i].p);
            slot[i].p = NULL;
        } else {
            size_t n = (r >> 32) % 100 == 0 ? 1 + (r >> 40) % 65536 : 1 + (r >> 40) % 2048;
            size_t align = (r >> 16) % 16 == 0 ? 256 : 16;
            slot[i].p = w->which ? heap_s_get(n, align) : heap_m_get(n, align);
            if (!slot[i].p || !sm_ptr_aligned(slot[i].p, align)) {
                w->failures++;
                slot[i].p = NULL;
                continue;
            }
            slot[i].n = n;
            check_fill(slot[i].p, n, seed);
        }
    }
    for (size_t i = 0; i < THREAD_SLOTS; i++)
        if (slot[i].p) {
            w->failures += !check_verify(slot[i].p, slot[i].n, w->id * 1000003u + (unsigned)i);
            w->which ? heap_s_put(slot[i].p) : heap_m_put(slot[i].p);
        }
    return NULL;
}
static void run_threads(int which)
{
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        w[i] = (struct worker){ which, i, 0 };
        CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
    }
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECKF(w[i].failures == 0, "thread %u: %u blocks failed or were overwritten", i, w[i].failures);
    }
}
static void threads_mutex(void)
{
    run_threads(0);
    HEAP_OK(heap_m);
    CHECK(heap_m_obj.span_count == 1);
    HEAP_M_ACCOUNTED();
}
static void threads_spinlock(void)
{
    run_threads(1);
    HEAP_OK(heap_s);
    CHECK(heap_s_obj.span_count == 1 && fake_s_obj.live_blocks == heap_s_obj.chunk_count + heap_s_obj.map_nodes);
}

static void fork_hooks_reach_next(void)
{
    unsigned long forks = fake_m_obj.forks;
    heap_m_fork_prepare();
    heap_m_fork_parent();
    heap_m_fork_prepare();
    heap_m_fork_child();
    CHECK(fake_m_obj.forks == forks + 2);
    void *p = heap_m_get(64, 16); /* both locks usable again */
    CHECK(p);
    heap_m_put(p);
}

/* L_release: a large free block between live ones is stamped by the first pass, purged (inner
 * pages only, through the next layer's purge) by the first pass a decay later, and not again while
 * it stays free; an empty span kept for reuse goes back one decay after it emptied; a release of
 * everything does both at once. Live neighbours keep their contents throughout. */
static char *m_alloc_fill(size_t n, unsigned seed)
{
    sm_mctx_t c = sm_mctx_alloc(n, 16, 0);
    char *p = (char *)heap_m_alloc(&c);
    if (p)
        check_fill(p, n, seed);
    return p;
}
static void release_purges_then_returns(void)
{
    const size_t KiB = 1024;
    char *a = m_alloc_fill(100 * KiB, 11), *b = m_alloc_fill(300 * KiB, 12);
    char *c = m_alloc_fill(100 * KiB, 13);
    CHECK(a && b && c);
    sm_mctx_t f = sm_mctx_block(b, 0, 0);
    heap_m_free(&f);
    unsigned long purges = fake_m_obj.purges, frees = fake_m_obj.frees;
    sm_release_t r = sm_release_request(1000, SM_RELEASE_DECAYED);
    heap_m_release(&r);
    CHECKF(fake_m_obj.purges == purges && r.released == 0, "purged on first sight");
    CHECKF(r.next_ms == 1000 + 1000, "next pass asked for at %llu", (unsigned long long)r.next_ms);
    r = sm_release_request(1999, SM_RELEASE_DECAYED);
    heap_m_release(&r);
    CHECK(fake_m_obj.purges == purges && r.released == 0);
    r = sm_release_request(2000, SM_RELEASE_DECAYED);
    heap_m_release(&r);
    CHECKF(fake_m_obj.purges > purges && r.released >= 200 * KiB, "%lu purges, %zu bytes",
           fake_m_obj.purges - purges, r.released);
    CHECK(fake_m_obj.bad_purges == 0 && heap_m_check() == NULL);
    CHECK(check_verify(a, 100 * KiB, 11) && check_verify(c, 100 * KiB, 13));
    purges = fake_m_obj.purges;
    r = sm_release_request(9000, SM_RELEASE_DECAYED);
    heap_m_release(&r);
    CHECKF(fake_m_obj.purges == purges, "purged twice while it stayed free");
    char *b2 = m_alloc_fill(200 * KiB, 14); /* served from the purged block */
    CHECK(b2 && b2 >= a && b2 < c && heap_m_check() == NULL);
    CHECK(check_verify(a, 100 * KiB, 11) && check_verify(c, 100 * KiB, 13) && check_verify(b2, 200 * KiB, 14));
    char *blocks[] = { a, b2, c };
    for (int i = 0; i < 3; i++) {
        f = sm_mctx_block(blocks[i], 0, 0);
        heap_m_free(&f);
    }
    CHECK(heap_m_obj.span_count == 1 && fake_m_obj.frees == frees); /* the last span is kept */
    r = sm_release_request(20000, SM_RELEASE_DECAYED);
    heap_m_release(&r);
    CHECK(heap_m_obj.span_count == 1);
    r = sm_release_request(21000, SM_RELEASE_DECAYED);
    heap_m_release(&r);
    CHECKF(heap_m_obj.span_count == 0 && fake_m_obj.frees > frees, "%zu spans kept a decay after emptying",
           heap_m_obj.span_count);
    /* Everything at once. */
    char *d = m_alloc_fill(500 * KiB, 15), *e = m_alloc_fill(10 * KiB, 16);
    CHECK(d && e);
    f = sm_mctx_block(d, 0, 0);
    heap_m_free(&f);
    purges = fake_m_obj.purges;
    r = sm_release_request(21001, SM_RELEASE_ALL);
    heap_m_release(&r);
    CHECK(fake_m_obj.purges > purges && check_verify(e, 10 * KiB, 16) && heap_m_check() == NULL);
    f = sm_mctx_block(e, 0, 0);
    heap_m_free(&f);
    r = sm_release_request(21002, SM_RELEASE_ALL);
    heap_m_release(&r);
    CHECK(heap_m_obj.span_count == 0 && heap_m_check() == NULL);
    CHECK(fake_m_obj.releases >= 7); /* every pass went on to the next layer */
}

int main(void)
{
    check_begin("tlsf_glk");
    RUN_CASE(create_all);
    RUN_CASE(basic_sizes);
    RUN_CASE(random_workload);
    RUN_CASE(aligned_allocs);
    RUN_CASE(resize_in_place);
    RUN_CASE(shrink_keeps_the_class_size);
    RUN_CASE(regions_go_back);
    RUN_CASE(out_of_memory);
    RUN_CASE(size_handle_passes_on);
    RUN_CASE(two_instances);
    RUN_CASE(contiguous_chunks_merge);
    RUN_CASE(bad_frees);
    RUN_CASE(threads_mutex);
    RUN_CASE(threads_spinlock);
    RUN_CASE(fork_hooks_reach_next);
    RUN_CASE(release_purges_then_returns);
    return check_end();
}
