/* hslab — the Mortise paper's hslab (§3 (2)): a tcmalloc-shaped allocator with a different sync
 * policy per layer and a core-aware thread cache.
 *
 *   mmap_heap(faa_heap_growth=1, threadlocal_heap_size=2MB)
 *   :: decay_cache(sync=mutex)                                      not in the paper: see below
 *   :: buddy_glk(sync=flatcombine, sizeclass=tc, size_handle=[32768, chunk])   pages, large blocks
 *   :: slab_lk(sync=spinlock, slab_size=64KB, sizeclass=tc, size_handle=[0, 32768])   paper: posix_spin
 *   :: thread_cache(sync=spinlock, sizeclass=tc, size_handle=[0, 32768], cache_size=2MB, coreaware_cachesize=1)
 *   :: malloc_socket
 *
 * Where it differs from the paper's line, and why (docs/instances.md): a decay_cache under the
 * buddy keeps large blocks and freed chunks mapped for a while; slab_lk's lock is our spinlock,
 * which yields after a bounded spin — what the paper believed posix_spin did; glibc's never yields,
 * and with more threads than cores its waiters spin out whole time slices while the holder is
 * preempted (manythreads: 2.3-3.4 s with posix_spin, 0.21 s with spinlock); buddy_glk's range
 * ends at its 4 MiB chunk, and larger blocks are mmap_heap's (cached) mappings.
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/flatcombine.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER hslab_os
#define SM_ERR   warn
#define SM_OPT_THREAD_HEAP_SIZE (2ul << 20)
#define SM_OPT_FAA_GROWTH 1
#include <sunmao/os/mmap_heap.h>

/* Not in the paper's line: without it every block above buddy_glk's chunk, and every chunk it
 * gives back, is a fresh mapping whose pages fault in again (the `large` workload: 1.21 s against
 * TCMalloc's 0.08 s; with it 0.09 s). docs/instances.md. */
#define SM_LAYER hslab_large
#define SM_NEXT  hslab_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#define SM_OPT_GROW 1
#define SM_OPT_MAX_BYTES (128ul << 20)
#define SM_OPT_DECAY_MS 250
#include <sunmao/layers/addon/decay_cache.h>

#define SM_LAYER hslab_pages
#define SM_NEXT  hslab_large
#define SM_OPT_KEEP_SPARE 0 /* decay_cache keeps freed chunks and purges them on time */
#define SM_SYNC  flatcombine
#define SM_SIZECLASS tc
#define SM_ERR   warn
#define SM_SIZE_MIN (32ul << 10)
#define SM_OPT_CHUNK_SIZE (4ul << 20)
#include <sunmao/layers/core/buddy_glk.h>

#define SM_LAYER         hslab_slab
#define SM_NEXT          hslab_pages
#define SM_SYNC          spinlock
#define SM_SIZECLASS     tc
#define SM_ERR           warn
#define SM_SIZE_MAX      (32ul << 10)
#define SM_OPT_SLAB_SIZE (64ul << 10)
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER     hslab_cache
#define SM_NEXT      hslab_slab
#define SM_SYNC      spinlock /* the paper's bare `sync`: the 32 MiB all caches share (pool.h) */
#define SM_SIZECLASS tc
#define SM_ERR       warn
#define SM_SIZE_MAX  (32ul << 10)
#define SM_OPT_CACHE_BYTES (2ul << 20)
#define SM_OPT_CORE_AWARE 1
#include <sunmao/layers/addon/thread_cache.h>

/* Included by another instance as its base (SM_INSTANCE_BASE): that instance composes the
 * layers it adds and the socket on top of hslab_cache. */
#ifndef SM_INSTANCE_BASE
#define SM_NEXT hslab_cache
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
#endif
