/* sunmao-hugepage — the default allocator with its slabs packed into 2 MiB hugepages
 * (libsunmao-hugepage.so): for programs whose working set of small objects is large enough that
 * TLB misses cost them time.
 *
 *   sunmao's line, with hugepage_glk(sync=mutex, size_handle=[64 KiB, 64 KiB], layers' requests
 *   only) in place of its buddy_glk: the slabs fill the fullest hugepage first, free hugepages are
 *   purged whole, and a hugepage is hinted huge once 16 MiB of slabs are in use
 *   :: prof(sync=mutex)
 *   :: malloc_socket
 *
 * Design and measurements against libsunmao: docs/hugepages.md.
 */
#define SM_INSTANCE_HUGEPAGE 1
#include "sunmao.c"
