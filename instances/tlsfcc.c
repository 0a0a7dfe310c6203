/* tlsfcc — the Mortise paper's tlsfcc (§3 (1)): the tlsf instance with its global lock replaced by
 * CC-Synch, a combining policy: a thread that finds the heap busy queues its request and the
 * thread holding the heap runs it. Nothing else changes: the layers are the same code, which is the
 * point of the sync slot (docs/sync.md, docs/instances.md).
 *
 *   brk_heap :: tlsf_glk(sync=ccsynch, size_handle=[0, SIZE_MAX]) :: malloc_socket
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sync/ccsynch.h>
#include <sunmao/policies/sync/mutex.h>

#define SM_LAYER tlsfcc_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/os/brk_heap.h>

#define SM_LAYER tlsfcc_heap
#define SM_NEXT  tlsfcc_os
#define SM_SYNC  ccsynch
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>

/* Included by another instance as its base (SM_INSTANCE_BASE): that instance composes the
 * layers it adds and the socket on top of tlsfcc_heap. */
#ifndef SM_INSTANCE_BASE
#define SM_NEXT tlsfcc_heap
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
#endif
