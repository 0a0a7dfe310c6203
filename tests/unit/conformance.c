/* The layer-conformance suite (tests/support/conformance.h) run against every layer: the core and
 * add-on layers over fake next layers (tests/support/fake_*.h), the OS layers on their own. Each
 * layer's cases read "ok conformance: <layer>/<case>"; where a layer's documented semantics differ
 * from the generic case, the knobs below adapt it, and the comment says why. */
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"

/* Under AddressSanitizer malloc_heap sits on ASan's malloc, which aborts on absurd sizes unless told
 * to return NULL as malloc(3) does (the out-of-memory case asks for 64 TiB). */
const char *__asan_default_options(void);
SM_EXPORT const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- tlsf_glk over fake_next. Keeps its page-map nodes (core/pagemap.h: never freed). ---- */
#define SM_LAYER fk_tlsf
#include "tests/support/fake_next.h"
#define SM_LAYER tlsf
#define SM_NEXT fk_tlsf
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/layers/core/tlsf_glk.h>

#define CONF_L tlsf
#define CONF_NAME "tlsf_glk"
#define CONF_F fk_tlsf
#define CONF_KEEPS() (tlsf_obj.map_nodes)
#include "tests/support/conformance.h"

/* ---- buddy_glk over fake_next. Keeps its page-map leaves (the spare chunk goes back on
 * release(ALL)). ---- */
#define SM_LAYER fk_buddy
#include "tests/support/fake_next.h"
#define SM_LAYER buddy
#define SM_NEXT fk_buddy
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/layers/core/buddy_glk.h>

#define CONF_L buddy
#define CONF_NAME "buddy_glk"
#define CONF_F fk_buddy
#define CONF_KEEPS() (buddy_obj.map_nodes)
#include "tests/support/conformance.h"

/* ---- slab_lk over fake_next. Keeps its page-map nodes and descriptor blocks ("never returned"),
 * counted in map_nodes and desc_pages; kept empty slabs go back on release(ALL). ---- */
#define SM_LAYER fk_slab
#include "tests/support/fake_next.h"
#define SM_LAYER slab
#define SM_NEXT fk_slab
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>

static size_t slab_leaves(void)
{
    /* the owner map's leaves and the descriptor map's nodes (counted together), and the blocks of
     * descriptors kept outside their slabs */
    return slab_obj.map_nodes + slab_obj.desc_pages;
}
#define CONF_L slab
#define CONF_NAME "slab_lk"
#define CONF_F fk_slab
#define CONF_KEEPS() slab_leaves()
#include "tests/support/conformance.h"

/* ---- passthrough over fake_next. Every block is the next layer's, so a bad free of one is the
 * fake's to catch: passthrough has no err policy at all. ---- */
#define SM_LAYER fk_pass
#include "tests/support/fake_next.h"
#define SM_LAYER pass
#define SM_NEXT fk_pass
#include <sunmao/layers/addon/passthrough.h>

#define CONF_L pass
#define CONF_NAME "passthrough"
#define CONF_F fk_pass
#define CONF_INTERIOR_BY_F 1
#define CONF_DOUBLE CONF_DOUBLE_F
#include "tests/support/conformance.h"

/* ---- decay_cache over fake_next (SM_OPT_GROW 0). Its blocks are the next layer's, kept when freed
 * (64 KiB and more): the bad-free cases use such blocks. An interior pointer is no block of the next
 * layer's, so decay_cache passes it on (the fake counts it); a double free of a kept block is the
 * cache's to report, and, once release(ALL) handed the block back, the next layer's. Out of memory
 * with a size the cache would keep, so that the flush-and-retry path runs. ---- */
#define SM_LAYER fk_decay
#include "tests/support/fake_next.h"
#define SM_LAYER decay
#define SM_NEXT fk_decay
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/layers/addon/decay_cache.h>

#define CONF_L decay
#define CONF_NAME "decay_cache"
#define CONF_F fk_decay
#define CONF_BLOCK_SIZE ((size_t)128 << 10)
#define CONF_INTERIOR_BY_F 1
#define CONF_DOUBLE CONF_DOUBLE_CACHED
#define CONF_OOM_SIZE ((size_t)128 << 10)
#include "tests/support/conformance.h"

/* ---- decay_cache with SM_OPT_GROW 1 over fake_mapping (split and remap): as above. ---- */
#define SM_LAYER fm_decayg
#include "tests/support/fake_mapping.h"
#define SM_LAYER decayg
#define SM_NEXT fm_decayg
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_GROW 1
#include <sunmao/layers/addon/decay_cache.h>

#define CONF_L decayg
#define CONF_NAME "decay_cache_grow"
#define CONF_F fm_decayg
#define CONF_BLOCK_SIZE ((size_t)128 << 10)
#define CONF_INTERIOR_BY_F 1
#define CONF_DOUBLE CONF_DOUBLE_CACHED
#define CONF_OOM_SIZE ((size_t)128 << 10)
#include "tests/support/conformance.h"

/* ---- thread_cache over fake_batch. Its objects are the next layer's; it caches freed ones. A
 * foreign block of a cached class would be cached (it is exactly what the cache holds), so the
 * pass-down case uses a block above the classes. An interior pointer is no object (block_slot says
 * so): passed on, the fake counts it. A double free of a cached object is the cache's to report;
 * once release(ALL) emptied the calling thread's lists, the next layer's. release(ALL) leaves the
 * calling thread's cache struct below until the thread exits. ---- */
#define SM_LAYER fb_tcache
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"
#define SM_LAYER tcache
#define SM_NEXT fb_tcache
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/addon/thread_cache.h>

#define CONF_L tcache
#define CONF_NAME "thread_cache"
#define CONF_F fb_tcache
#define CONF_FOREIGN_SIZE 300000
#define CONF_INTERIOR_BY_F 1
#define CONF_DOUBLE CONF_DOUBLE_CACHED
#define CONF_KEEPS() (tcache_is_static(tcache_tls) ? 0u : 1u)
#include "tests/support/conformance.h"

/* ---- OS layers: no next layer. ---- */

/* sheap: a static pool (32 MiB here, for the round trips' 3 MiB blocks); alignments up to 64 KiB (31
 * blocks at 1 MiB alignment each take a megabyte boundary of their own: more than the pool). It runs
 * out of memory for real. Everything freed, the pool is one free block again. */
#define SM_LAYER sh
#define SM_SYNC mutex
#define SM_ERR callback
#define SM_OPT_POOL_SIZE ((size_t)32 << 20)
#include <sunmao/os/sheap.h>

static void sheap_whole_again(void)
{
    sm_mctx_t c = sm_mctx_alloc(((size_t)32 << 20) - 4096, 16, 0);
    void *p = sh_alloc(&c);
    CHECKF(p != NULL, "everything freed, the pool is not one block again");
    if (p) {
        sm_mctx_t f = sm_mctx_block(p, 0, 0);
        sh_free(&f);
    }
}
#define CONF_L sh
#define CONF_NAME "sheap"
#define CONF_MAX_ALIGN ((size_t)64 << 10)
#define CONF_RELEASE_CHECK() sheap_whole_again()
#include "tests/support/conformance.h"

/* mmap_heap: a direct block is unmapped and forgotten on free, so a double free finds no block at
 * all and is reported as an invalid free (documented: "not the start of a block this layer mapped
 * (or freed twice)"). It cannot run out of memory by asking often: one absurd request instead. */
#define SM_LAYER mmh
#define SM_ERR callback
#include <sunmao/os/mmap_heap.h>

#define CONF_L mmh
#define CONF_NAME "mmap_heap"
#define CONF_DOUBLE_KIND SM_ERR_INVALID_FREE
#define CONF_OOM_TRIES 1
#include "tests/support/conformance.h"

/* brk_heap: safe in a test process (it starts a new run when the C library moved the break; the
 * C library's malloc copes with the break moving under it). One absurd request for out of memory. */
#define SM_LAYER brkh
#define SM_SYNC mutex
#define SM_ERR callback
#include <sunmao/os/brk_heap.h>

#define CONF_L brkh
#define CONF_NAME "brk_heap"
#define CONF_OOM_TRIES 1
#include "tests/support/conformance.h"

/* malloc_heap: free wipes the block's tag, so a second free finds no block of its own (an invalid
 * free, as documented: "foreign pointer, or freed twice"). One absurd request for out of memory.
 * The hammer runs as long as the one tests/unit/os_malloc_heap.c had before this suite replaced it. */
#define SM_LAYER mlh
#define SM_ERR callback
#include <sunmao/os/malloc_heap.h>

#define CONF_L mlh
#define CONF_NAME "malloc_heap"
#define CONF_DOUBLE_KIND SM_ERR_INVALID_FREE
#define CONF_OOM_TRIES 1
#define CONF_HAMMER_OPS 20000
#include "tests/support/conformance.h"

int main(void)
{
    check_begin("conformance");
    sm_err_callback_set(conf_on_error);
    CHECK(tlsf_create() == 0 && buddy_create() == 0 && slab_create() == 0 && pass_create() == 0);
    CHECK(decay_create() == 0 && decayg_create() == 0 && tcache_create() == 0);
    CHECK(sh_create() == 0 && mmh_create() == 0 && brkh_create() == 0 && mlh_create() == 0);
    conf_tlsf_run();
    conf_buddy_run();
    conf_slab_run();
    conf_pass_run();
    conf_decay_run();
    conf_decayg_run();
    conf_tcache_run();
    conf_sh_run();
    conf_mmh_run();
    conf_brkh_run();
    conf_mlh_run();
    return check_end();
}
