/* Unit test of the metadata route (core/meta_route.h) and of size_handle's SM_SIZE_USER: a layer's
 * own metadata (here slab_lk's page-map leaves and buddy_glk's chunk descriptors) goes past the
 * layers in between to the bottom unless the composition names a layer with SM_META, and a page
 * layer that serves layers' requests only passes the program's blocks of its size on.
 *
 *   fb (fake bottom) :: mid (counts what crosses it) :: sl_default (slab_lk)
 *                                                    :: sl_named  (slab_lk, SM_META mid)
 *   fb2 :: bd (buddy_glk, [64 KiB, 64 KiB], SM_SIZE_USER 0) :: sl_bd (slab_lk, up to 8 KiB) */
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"

#define SM_LAYER fb
#include "tests/support/fake_next.h"

/* mid: serves nothing, counts the requests that cross it by size */
static struct { unsigned long slabs, others, frees; } mid_obj;
enum { mid_thread_safe = 1, mid_min_align = 16, mid_zeroed = 0 };
#define SLAB_BYTES ((size_t)64 << 10)
static inline int mid_create(void) { return fb_create(); }
static inline void *mid_alloc(sm_mctx_t *c)
{
    __atomic_add_fetch(c->size == SLAB_BYTES ? &mid_obj.slabs : &mid_obj.others, 1, __ATOMIC_RELAXED);
    return fb_alloc(c);
}
static inline void mid_free(sm_mctx_t *c)
{
    __atomic_add_fetch(&mid_obj.frees, 1, __ATOMIC_RELAXED);
    fb_free(c);
}
static inline bool mid_getmeta(sm_mctx_t *c) { return fb_getmeta(c); }
static inline bool mid_resize(sm_mctx_t *c, size_t n) { return fb_resize(c, n); }
static inline bool mid_purge(sm_mctx_t *c) { return fb_purge(c); }
static inline void mid_release(sm_release_t *r) { fb_release(r); }
static inline void mid_thread_exit(void) { fb_thread_exit(); }
static inline void mid_fork_prepare(void) { fb_fork_prepare(); }
static inline void mid_fork_parent(void) { fb_fork_parent(); }
static inline void mid_fork_child(void) { fb_fork_child(); }
#define SM_LAYER mid
#define SM_NEXT fb
#include <sunmao/core/layer_end.h>

#define SM_LAYER sl_default
#define SM_NEXT mid
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER sl_named
#define SM_NEXT mid
#define SM_META mid
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER fb2
#include "tests/support/fake_next.h"
#define SM_LAYER bd
#define SM_NEXT fb2
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_SIZE_MIN (64u << 10)
#define SM_SIZE_MAX (64u << 10)
#define SM_SIZE_USER 0
#define SM_OPT_MIN_BLOCK (64u << 10)
#define SM_OPT_CHUNK_SIZE (1u << 20)
#include <sunmao/layers/core/buddy_glk.h>
#define SM_LAYER sl_bd
#define SM_NEXT bd
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/core/slab_lk.h>

static unsigned long errors;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)kind, (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
}

/* The page-map leaves of slab_lk are metadata: with the default route they go straight to fb; mid,
 * the layer in between, sees the slab and nothing else. */
static void default_route_skips_the_layers_between(void)
{
    unsigned long fb_allocs = fb_obj.allocs;
    mid_obj.slabs = mid_obj.others = 0;
    sm_mctx_t c = sm_mctx_alloc(48, 16, SM_F_USER);
    void *p = sl_default_alloc(&c);
    CHECK(p != NULL && sl_default_obj.map_nodes >= 1);
    CHECKF(mid_obj.slabs == 1 && mid_obj.others == 0, "mid saw %lu slabs and %lu other requests",
           mid_obj.slabs, mid_obj.others);
    CHECKF(fb_obj.allocs - fb_allocs == 1 + sl_default_obj.map_nodes, "fb served %lu requests for 1 slab + %lu leaves",
           fb_obj.allocs - fb_allocs, (unsigned long)sl_default_obj.map_nodes);
    memset(p, 0x5a, 48);
    sm_mctx_t f = sm_mctx_block(p, 0, 0);
    sl_default_free(&f);
    CHECK(errors == 0 && fb_obj.bad_frees == 0);
}

/* SM_META names the layer: the leaves cross mid, as the composition asked. */
static void named_route_goes_where_it_is_told(void)
{
    mid_obj.slabs = mid_obj.others = 0;
    sm_mctx_t c = sm_mctx_alloc(48, 16, SM_F_USER);
    void *p = sl_named_alloc(&c);
    CHECK(p != NULL);
    CHECKF(mid_obj.slabs == 1 && mid_obj.others == sl_named_obj.map_nodes && mid_obj.others >= 1,
           "mid saw %lu slabs and %lu other requests for %lu leaves", mid_obj.slabs, mid_obj.others,
           (unsigned long)sl_named_obj.map_nodes);
    sm_mctx_t f = sm_mctx_block(p, 0, 0);
    sl_named_free(&f);
    CHECK(errors == 0 && fb_obj.bad_frees == 0);
}

static const char *owner_of(void *p)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    return sl_bd_getmeta(&m) ? m.owner : "nobody";
}

/* bd serves the slab layer's 64 KiB slabs; a program's 64 KiB block (SM_F_USER) passes it to fb2,
 * and a layer's own 64 KiB request is bd's. Its chunk descriptor is metadata: from fb2, not bd. */
static void page_layer_serves_layers_only(void)
{
    sm_mctx_t c = sm_mctx_alloc(100, 16, SM_F_USER);
    void *small = sl_bd_alloc(&c);
    CHECK(small && !strcmp(owner_of(small), "sl_bd"));
    c = sm_mctx_alloc(64u << 10, 16, SM_F_USER);
    void *user = sl_bd_alloc(&c);
    CHECKF(user && !strcmp(owner_of(user), "fb2"), "a program's 64 KiB block is %s's", owner_of(user));
    c = sm_mctx_alloc(64u << 10, 16, 0);
    void *own = sl_bd_alloc(&c);
    CHECKF(own && !strcmp(owner_of(own), "bd"), "a layer's 64 KiB block is %s's", owner_of(own));
    sm_mctx_t m = sm_mctx_block(bd_obj.chunks, 0, 0);
    CHECKF(bd_obj.chunks && fb2_getmeta(&m) && m.usable < (64u << 10), "chunk descriptor not a block of fb2");
    memset(user, 1, 64u << 10);
    memset(own, 2, 64u << 10);
    void *blocks[] = { small, user, own };
    for (int i = 0; i < 3; i++) {
        sm_mctx_t f = sm_mctx_block(blocks[i], 0, 0);
        sl_bd_free(&f);
    }
    CHECK(errors == 0 && fb2_obj.bad_frees == 0);
}

int main(void)
{
    check_begin("meta_route");
    sm_err_callback_set(on_error);
    if (sl_default_create() || sl_named_create() || sl_bd_create()) {
        printf("not ok meta_route: create\n");
        return 1;
    }
    RUN_CASE(default_route_skips_the_layers_between);
    RUN_CASE(named_route_goes_where_it_is_told);
    RUN_CASE(page_layer_serves_layers_only);
    return check_failures_total != 0;
}
