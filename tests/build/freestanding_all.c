/* Every layer but malloc_heap (the OS layer over the C library's malloc) built freestanding over the
 * freestanding platform (platform/freestanding.h): the default allocator's chain, a brk heap, a
 * static pool under a slab/buddy pair, pass-through layers, and the prefixed socket on top. Built by
 * freestanding.sh with -ffreestanding -nostdlib -DSM_FREESTANDING=1, which checks that the object
 * needs nothing but memcpy/memset/memmove/memcmp and the program's sm_diag_write; the memory hook
 * below stands for an embedder's page allocator. */
#include <stddef.h>
static unsigned char arena[1 << 22] __attribute__((aligned(4096)));
static size_t arena_used;
static void *arena_pages(size_t size)
{
    size = (size + 4095) & ~(size_t)4095;
    if (size > sizeof arena - arena_used)
        return NULL;
    arena_used += size;
    return arena + arena_used - size;
}
#define SM_PLAT_MAP_HOOK(size) arena_pages(size)

#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/err/fatal.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/none.h>
#include <sunmao/policies/sync/spinlock.h>

/* The default allocator's chain. */
#define SM_LAYER fs_os
#define SM_ERR   callback
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER fs_large
#define SM_NEXT  fs_os
#define SM_SYNC  mutex
#define SM_ERR   callback
#include <sunmao/layers/addon/decay_cache.h>
#define SM_LAYER fs_medium
#define SM_NEXT  fs_large
#define SM_SYNC  spinlock
#define SM_ERR   callback
#define SM_SIZE_MIN ((8u << 10) + 1)
#include <sunmao/layers/core/tlsf_glk.h>
#define SM_LAYER fs_pages
#define SM_NEXT  fs_medium
#define SM_SYNC  mutex
#define SM_ERR   callback
#define SM_SIZE_MIN (64u << 10)
#define SM_SIZE_MAX (64u << 10)
#define SM_OPT_MIN_BLOCK (64u << 10)
#include <sunmao/layers/core/buddy_glk.h>
#define SM_LAYER fs_slab
#define SM_NEXT  fs_pages
#define SM_SYNC  spinlock
#define SM_SIZECLASS tc
#define SM_ERR   callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER fs_fake
#define SM_NEXT  fs_slab
#include <sunmao/layers/addon/passthrough.h>
#define SM_LAYER fs_cache
#define SM_NEXT  fs_fake
#define SM_SIZECLASS tc
#define SM_ERR   callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>
#define SM_NEXT  fs_cache
#define SM_ERR   callback
#define SM_PREFIX fs_
#include <sunmao/sockets/custom_socket.h>

/* A brk heap, and a static pool under buddy and slab layers. */
#define SM_LAYER fb_os
#define SM_SYNC  none
#define SM_ERR   fatal
#include <sunmao/os/brk_heap.h>
#define SM_LAYER fb_heap
#define SM_NEXT  fb_os
#define SM_SYNC  none
#define SM_ERR   fatal
#include <sunmao/layers/core/tlsf_glk.h>
/* A tail check over the brk heap: the crc32c policy's CPU probe (cpuid) needs no C library. */
#include <sunmao/policies/chksum/crc32c.h>
#define SM_LAYER fb_tail
#define SM_NEXT  fb_heap
#define SM_CHKSUM crc32c
#define SM_ERR   fatal
#include <sunmao/layers/addon/tail_chksum.h>
#define SM_LAYER fp_pool
#define SM_SYNC  none
#define SM_ERR   callback
#define SM_OPT_POOL_SIZE (1u << 20)
#include <sunmao/os/sheap.h>
#define SM_LAYER fp_pages
#define SM_NEXT  fp_pool
#define SM_SYNC  none
#define SM_ERR   callback
#define SM_OPT_CHUNK_SIZE (64u << 10)
#include <sunmao/layers/core/buddy_glk.h>
#define SM_LAYER fp_slab
#define SM_NEXT  fp_pages
#define SM_SYNC  none
#define SM_SIZECLASS tc
#define SM_ERR   callback
#define SM_SIZE_MAX 1024
#include <sunmao/layers/core/slab_lk.h>
/* Slabs packed into hugepages over the brk heap (no huge-page hints without an OS: platform no-ops). */
#define SM_LAYER fh_pages
#define SM_NEXT  fb_heap
#define SM_SYNC  none
#define SM_ERR   callback
#define SM_OPT_REGION_SIZE (2u << 20)
#include <sunmao/layers/core/hugepage_glk.h>
#define SM_LAYER fh_slab
#define SM_NEXT  fh_pages
#define SM_SYNC  none
#define SM_SIZECLASS tc
#define SM_ERR   callback
#define SM_SIZE_MAX 1024
#include <sunmao/layers/core/slab_lk.h>
/* Sampled guard pages over the brk heap: no page protection here, so it finds that out on its
 * first sample and passes everything down (no memory of the embedder's spent on a pool). */
#define SM_LAYER fg_guard
#define SM_NEXT  fb_heap
#define SM_SYNC  none
#define SM_ERR   fatal
#define SM_OPT_SAMPLE_EVERY 1
#include <sunmao/layers/addon/guard.h>

void *brk_malloc(size_t size)
{
    sm_mctx_t c = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    return fb_heap_alloc(&c);
}

void *checked_malloc(size_t size)
{
    sm_mctx_t c = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    return fb_tail_alloc(&c);
}

void checked_free(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    fb_tail_free(&c);
}

void *pool_malloc(size_t size)
{
    sm_mctx_t c = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    return fp_slab_alloc(&c);
}

void pool_free(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    fp_slab_free(&c);
}

void *guarded_malloc(size_t size)
{
    sm_mctx_t c = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    return fg_guard_alloc(&c);
}

void guarded_free(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    fg_guard_free(&c);
}

void *packed_malloc(size_t size)
{
    sm_mctx_t c = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    return fh_slab_alloc(&c);
}

void packed_free(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    fh_slab_free(&c);
}
