/* Unit test of the user-defined request parameter (sockets/custom_param.h, core/mctx_param.h): a
 * tag given to P_malloc_tagged reaches the layer that reads it, exactly once per request, and does
 * not leak into the requests layers make for themselves. Composition, bottom up:
 *   fk      the fake next layer (tests/support/fake_next.h)
 *   under   counts the contexts that reach it with a parameter: slab_lk's slab requests carry none
 *   sl      slab_lk(tc, [0, 8K])
 *   arena   the layer that uses the tag (below): live blocks per tag, by alloc and tagged free
 *   custom_socket (prefix cp_) + custom_param.h */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include <sunmao/core/mctx_param.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

/* A pass-through layer named L over N whose alloc and free first run HOOK(c). */
#define PASS_LAYER(L, N, HOOK)                                                                                 \
    enum { L##_thread_safe = N##_thread_safe, L##_min_align = N##_min_align, L##_zeroed = N##_zeroed };        \
    SM_UNUSED static inline int L##_create(void) { return N##_create(); }                                      \
    static inline void *L##_alloc(sm_mctx_t *c) { HOOK(c, 1); return N##_alloc(c); }                           \
    SM_UNUSED static inline void L##_free(sm_mctx_t *c) { HOOK(c, 0); N##_free(c); }                           \
    SM_UNUSED static inline bool L##_getmeta(sm_mctx_t *c) { return N##_getmeta(c); }                          \
    SM_UNUSED static inline bool L##_resize(sm_mctx_t *c, size_t n) { return N##_resize(c, n); }               \
    SM_UNUSED static inline bool L##_purge(sm_mctx_t *c) { return N##_purge(c); }                              \
    SM_UNUSED static inline void L##_release(sm_release_t *r) { N##_release(r); }                              \
    SM_UNUSED static inline void L##_thread_exit(void) { N##_thread_exit(); }                                  \
    SM_UNUSED static inline void L##_fork_prepare(void) { N##_fork_prepare(); }                                \
    SM_UNUSED static inline void L##_fork_parent(void) { N##_fork_parent(); }                                  \
    SM_UNUSED static inline void L##_fork_child(void) { N##_fork_child(); }

static unsigned long under_tagged, under_plain;
static void under_hook(sm_mctx_t *c, int is_alloc)
{
    uint16_t v;
    (void)is_alloc;
    if (sm_mctx_param(c, &v))
        under_tagged++;
    else
        under_plain++;
}
#define SM_LAYER under
#define SM_NEXT fk
#include <sunmao/core/layer.h>
PASS_LAYER(under, fk, under_hook)
#include <sunmao/core/layer_end.h>

#define SM_LAYER sl
#define SM_NEXT under
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX 8192
#include <sunmao/layers/core/slab_lk.h>

/* arena: what a layer that uses the parameter looks like. Live blocks per tag (allocs minus tagged
 * frees), the last tag seen, and the requests that came with none. */
static struct { long live[65536]; unsigned long tagged_allocs, tagged_frees, plain; unsigned last; } arena_seen;
static void arena_hook(sm_mctx_t *c, int is_alloc)
{
    uint16_t tag;
    if (!sm_mctx_param(c, &tag)) {
        arena_seen.plain++;
        return;
    }
    arena_seen.last = tag;
    arena_seen.live[tag] += is_alloc ? 1 : -1;
    if (is_alloc)
        arena_seen.tagged_allocs++;
    else
        arena_seen.tagged_frees++;
}
#define SM_LAYER arena
#define SM_NEXT sl
#include <sunmao/core/layer.h>
PASS_LAYER(arena, sl, arena_hook)
#include <sunmao/core/layer_end.h>

#define SM_NEXT arena
#define SM_ERR callback
#define SM_PREFIX cp_
#define SM_SOCKET_BACKGROUND 0
#include <sunmao/sockets/custom_socket.h>
#include <sunmao/sockets/custom_param.h>

/* The accessor keeps the other flags and round-trips every value. */
static void param_bits(void)
{
    sm_mctx_t c = sm_mctx_alloc(64, 16, SM_F_ZERO | SM_F_USER);
    uint16_t v = 1;
    CHECK(!sm_mctx_param(&c, &v) && v == 1);
    for (unsigned x = 0; x <= 0xffff; x += 0x1111) {
        sm_mctx_set_param(&c, (uint16_t)x);
        CHECK(sm_mctx_param(&c, &v) && v == x);
        CHECK((c.flags & (SM_F_ZERO | SM_F_USER)) == (SM_F_ZERO | SM_F_USER) && !(c.flags & SM_F_FRESH));
    }
}

/* One tagged malloc and free: the layer sees the tag once each way; the slab's own request
 * below carries none; an untagged malloc beside it is counted as such. */
static void tag_reaches_layer(void)
{
    unsigned long ta = arena_seen.tagged_allocs, tf = arena_seen.tagged_frees, plain = arena_seen.plain;
    unsigned long ut = under_tagged, up = under_plain;
    void *p = cp_malloc_tagged(64, 7);
    CHECK(p != NULL);
    if (!p)
        return;
    check_fill(p, 64, 3);
    CHECKF(arena_seen.tagged_allocs - ta == 1 && arena_seen.last == 7 && arena_seen.live[7] == 1,
           "arena saw %lu tagged allocs, last tag %u, %ld live of tag 7", arena_seen.tagged_allocs - ta, arena_seen.last,
           arena_seen.live[7]);
    CHECKF(under_tagged == ut && under_plain - up >= 1, "below slab_lk: %lu tagged, %lu plain requests",
           under_tagged - ut, under_plain - up);
    void *q = cp_malloc(64);
    CHECK(q != NULL && arena_seen.plain - plain == 1 && arena_seen.tagged_allocs - ta == 1);
    CHECK(check_verify(p, 64, 3));
    cp_free_tagged(p, 7);
    CHECK(arena_seen.tagged_frees - tf == 1 && arena_seen.live[7] == 0);
    cp_free(q);
    CHECK(arena_seen.plain - plain == 2 && under_tagged == ut);
}

/* Per-tag accounting over many requests: exact live counts per tag after a known pattern. */
static void per_tag_counts(void)
{
    enum { N = 300 };
    void *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = cp_malloc_tagged((size_t)(16 + i % 200), (uint16_t)(100 + i % 3));
        CHECK(b[i] != NULL);
        if (!b[i])
            return;
        check_fill(b[i], (size_t)(16 + i % 200), (unsigned)i);
    }
    CHECKF(arena_seen.live[100] == 100 && arena_seen.live[101] == 100 && arena_seen.live[102] == 100,
           "live per tag %ld %ld %ld, expected 100 each", arena_seen.live[100], arena_seen.live[101], arena_seen.live[102]);
    for (int i = 0; i < N; i += 2) /* the even ones: tags 100, 102, 101, 100, ... */
        cp_free_tagged(b[i], (uint16_t)(100 + i % 3));
    CHECKF(arena_seen.live[100] == 50 && arena_seen.live[101] == 50 && arena_seen.live[102] == 50,
           "after freeing half: %ld %ld %ld", arena_seen.live[100], arena_seen.live[101], arena_seen.live[102]);
    int bad = 0;
    for (int i = 1; i < N; i += 2) {
        bad += !check_verify(b[i], (size_t)(16 + i % 200), (unsigned)i);
        cp_free_tagged(b[i], (uint16_t)(100 + i % 3));
    }
    CHECKF(bad == 0 && arena_seen.live[100] == 0 && arena_seen.live[101] == 0 && arena_seen.live[102] == 0,
           "%d blocks overwritten; live %ld %ld %ld", bad, arena_seen.live[100], arena_seen.live[101], arena_seen.live[102]);
}

static void calloc_aligned_and_limits(void)
{
    unsigned char *z = cp_calloc_tagged(25, 12, 0xffff); /* the fake fills slabs with 0xCD */
    CHECK(z != NULL && arena_seen.last == 0xffff);
    if (!z)
        return;
    int nonzero = 0;
    for (int i = 0; i < 300; i++)
        nonzero += z[i] != 0;
    CHECKF(nonzero == 0, "calloc_tagged left %d bytes non-zero", nonzero);
    void *a = cp_aligned_alloc_tagged(256, 100, 0);
    CHECK(a && ((uintptr_t)a & 255) == 0 && arena_seen.last == 0 && arena_seen.live[0] == 1);
    errno = 0;
    CHECK(cp_aligned_alloc_tagged(24, 100, 1) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(cp_calloc_tagged(SIZE_MAX / 4, 8, 1) == NULL && errno == ENOMEM);
    cp_free_tagged(z, 0xffff);
    cp_free_tagged(a, 0);
    cp_free_tagged(NULL, 5);
    CHECK(arena_seen.live[0xffff] == 0 && arena_seen.live[0] == 0 && arena_seen.live[5] == 0);
}

int main(void)
{
    check_begin("custom_param");
    RUN_CASE(param_bits);
    RUN_CASE(tag_reaches_layer);
    RUN_CASE(per_tag_counts);
    RUN_CASE(calloc_aligned_and_limits);
    return check_end();
}
