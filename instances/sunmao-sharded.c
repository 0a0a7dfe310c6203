/* sunmao-sharded — the default allocator with thread-owned slabs in place of its thread cache and
 * locked slabs (libsunmao-sharded.so): a malloc pops the current slab's own list, a free by the
 * slab's owner goes back on it, other threads' frees onto the slab's remote list.
 *
 *   sunmao's line, with slab_sharded(sync=spinlock, sizeclass=tc5, slab_size=64KB,
 *   size_handle=[0, 8 KiB]) in place of its slab_lk and thread_cache
 *   :: prof(sync=mutex)
 *   :: malloc_socket
 *
 * Design and measurements against libsunmao: docs/layers.md (slab_sharded) and
 * docs/default-allocator.md.
 */
#define SM_INSTANCE_SHARDED 1
#include "sunmao.c"
