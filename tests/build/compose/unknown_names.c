/* Known-bad: a misspelt policy name (-DBAD_POLICY=1) or next-layer name (-DBAD_NEXT=1). Both must be
 * errors with the build's default flags (no -Werror): before, a misspelt name's calls were implicit
 * declarations, warnings only under GCC 12. */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sync/spinlock.h>
#define SM_LAYER os
#define SM_ERR   warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER heap
#if BAD_NEXT
#define SM_NEXT  os_misspelt
#else
#define SM_NEXT  os
#endif
#if BAD_POLICY
#define SM_SYNC  spinlok
#else
#define SM_SYNC  spinlock
#endif
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>
#define SM_NEXT heap
#define SM_ERR  warn
#include <sunmao/sockets/malloc_socket.h>
