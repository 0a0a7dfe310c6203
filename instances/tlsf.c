/* tlsf — the Mortise paper's baseline (§3 (1)): one TLSF heap behind one global lock, on
 * contiguous memory from brk so neighbouring regions coalesce.
 *
 *   brk_heap :: tlsf_glk(sync=mutex) :: malloc_socket
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sync/mutex.h>

#define SM_LAYER tlsf_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/os/brk_heap.h>

#define SM_LAYER tlsf_heap
#define SM_NEXT  tlsf_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>

#define SM_NEXT tlsf_heap
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
