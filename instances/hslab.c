/* hslab — the Mortise paper's hslab (§3 (2)): a tcmalloc-shaped allocator with a different sync
 * policy per layer and a core-aware thread cache.
 *
 *   mmap_heap(threadlocal_heap_size=2MB)
 *   :: buddy_glk(sync=flatcombine, sizeclass=tc, size_handle=[32768, chunk])   pages, large blocks
 *   :: slab_lk(sync=posix_spin, slab_size=64KB, sizeclass=tc, size_handle=[0, 32768])
 *   :: thread_cache(sync=spinlock, sizeclass=tc, size_handle=[0, 32768], cache_size=2MB, coreaware_cachesize=1)
 *   :: malloc_socket
 *
 * Where it differs from the paper's line, and why (docs/sync.md): mmap_heap's faa_heap_growth does
 * not exist yet (issue 12); blocks above
 * buddy_glk's 4 MiB chunk go to mmap_heap's own mappings.
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/flatcombine.h>
#include <sunmao/policies/sync/posix_spin.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER hslab_os
#define SM_ERR   warn
#define SM_OPT_THREAD_HEAP_SIZE ((size_t)2 << 20)
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER hslab_pages
#define SM_NEXT  hslab_os
#define SM_SYNC  flatcombine
#define SM_SIZECLASS tc
#define SM_ERR   warn
#define SM_SIZE_MIN (32u << 10)
#define SM_OPT_CHUNK_SIZE (4u << 20)
#include <sunmao/layers/core/buddy_glk.h>

#define SM_LAYER         hslab_slab
#define SM_NEXT          hslab_pages
#define SM_SYNC          posix_spin
#define SM_SIZECLASS     tc
#define SM_ERR           warn
#define SM_SIZE_MAX      (32u << 10)
#define SM_OPT_SLAB_SIZE (64u << 10)
#include <sunmao/layers/core/slab_lk.h>

#define SM_LAYER     hslab_cache
#define SM_NEXT      hslab_slab
#define SM_SYNC      spinlock /* the paper's bare `sync`: the 32 MiB all caches share (pool.h) */
#define SM_SIZECLASS tc
#define SM_ERR       warn
#define SM_SIZE_MAX  (32u << 10)
#define SM_OPT_CACHE_BYTES (2u << 20)
#define SM_OPT_CORE_AWARE 1
#include <sunmao/layers/addon/thread_cache.h>

#define SM_NEXT hslab_cache
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
