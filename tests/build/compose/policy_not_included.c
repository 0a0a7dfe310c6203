/* Known-bad: a policy named in a slot whose header the composition did not include (here ticket,
 * which no layer of this composition includes itself). An error with the default flags, naming the
 * policy's type; with its header included (-DINCLUDED=1) the same composition builds. */
#if INCLUDED
#include <sunmao/policies/sync/ticket.h>
#endif
#include <sunmao/policies/err/warn.h>
#define SM_LAYER os
#define SM_ERR   warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER heap
#define SM_NEXT  os
#define SM_SYNC  ticket
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>
#define SM_NEXT heap
#define SM_ERR  warn
#include <sunmao/sockets/malloc_socket.h>
