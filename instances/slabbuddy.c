/* slabbuddy — a slab allocator over a buddy page heap, the shape of the paper's hslab (§3 (2))
 * before a thread cache is added: small objects from per-size-class slabs (one lock per class),
 * slabs and medium blocks from a buddy system, huge blocks mapped directly.
 *
 *   mmap_heap :: buddy_glk(sync=mutex, size_handle=[32 KiB, 4 MiB])
 *             :: slab_lk(sync=spinlock, sizeclass=tc, size_handle=[0, 32 KiB]) :: malloc_socket
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER sb_os
#define SM_ERR   warn
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER          sb_pages
#define SM_NEXT           sb_os
#define SM_SYNC           mutex
#define SM_ERR            warn
#define SM_OPT_CHUNK_SIZE (4ul << 20)
/* Sizes the slabs serve are not this heap's: a block realloc shrinks to one moves to a slab. */
#define SM_SIZE_MIN       (32ul << 10)
#include <sunmao/layers/core/buddy_glk.h>

#define SM_LAYER     sb_slab
#define SM_NEXT      sb_pages
#define SM_SYNC      spinlock
#define SM_SIZECLASS tc
#define SM_ERR       warn
#define SM_SIZE_MAX  (32ul << 10)
#include <sunmao/layers/core/slab_lk.h>

#define SM_NEXT sb_slab
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
