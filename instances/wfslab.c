/* wfslab — the Mortise paper's wait-free allocator (§3 (3)): the lowest worst-case latency of the
 * allocators it measured, for some throughput (docs/latency.md).
 *
 *   mmap_heap(faa_heap_growth=1, threadlocal_heap_size=256MB, huge_page=1)
 *   :: segfit_lf(sizeclass=log2b, size_handle=[0, SIZE_MAX])     paper: [65536, SIZE_MAX]
 *   :: slab_wf(sizeclass=prime, slab_size=64KB, tllabs=40, size_handle=[0, 65536])
 *   :: malloc_socket
 *
 * Where it differs from the paper's line, and why (docs/instances.md): slab_wf serves the classes
 * of which a 64 KiB slab holds at least four objects (up to 16 KiB; a 64 KiB object cannot share
 * a 64 KiB slab with its header), so segfit_lf takes every request that comes down, not only
 * those from 64 KiB; its chunks come from the thread heap (up to 64 MiB a block) so that growing
 * takes no lock either.
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/prime.h>

#define SM_LAYER wfslab_os
#define SM_ERR   warn
#define SM_OPT_THREAD_HEAP_SIZE (256ul << 20)
#define SM_OPT_THREAD_HEAP_MAX_BLOCK (64ul << 20)
#define SM_OPT_FAA_GROWTH 1
#define SM_OPT_FAA_ARENA_REGIONS 4 /* 1 GiB arenas: see docs/instances.md */
#define SM_OPT_HUGE_PAGES 0       /* paper: 1; see docs/instances.md */
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER     wfslab_large
#define SM_NEXT      wfslab_os
#define SM_SIZECLASS log2b
#define SM_ERR       warn
#include <sunmao/layers/core/segfit_lf.h>

#define SM_LAYER     wfslab_small
#define SM_NEXT      wfslab_large
#define SM_SIZECLASS prime
#define SM_ERR       warn
#define SM_SIZE_MAX  (64ul << 10)
#define SM_OPT_SLAB_SIZE (64ul << 10)
#define SM_OPT_TLLABS 40
#include <sunmao/layers/core/slab_wf.h>

/* Included by another instance as its base (SM_INSTANCE_BASE): that instance composes the
 * layers it adds and the socket on top of wfslab_small. */
#ifndef SM_INSTANCE_BASE
#define SM_NEXT wfslab_small
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
#endif
