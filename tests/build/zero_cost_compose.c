/* The paper's zero-overhead check (§4.4, question 1, allocator wfslabfl): the tlsf composition,
 * built once as is and once with passthrough layers inserted between every pair of layers, must
 * compile to identical machine code. tests/build/zero_cost.sh builds this file both ways
 * (-DWITH_PASSTHROUGH=0/1) and compares the disassembly of every exported function. */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sync/mutex.h>

#define SM_LAYER z_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/os/brk_heap.h>

#if WITH_PASSTHROUGH
#define SM_LAYER z_pass_os
#define SM_NEXT  z_os
#include <sunmao/layers/addon/passthrough.h>
#define Z_BELOW_HEAP z_pass_os
#else
#define Z_BELOW_HEAP z_os
#endif

#define SM_LAYER z_heap
#define SM_NEXT  Z_BELOW_HEAP
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>

#if WITH_PASSTHROUGH
#define SM_LAYER z_pass_heap
#define SM_NEXT  z_heap
#include <sunmao/layers/addon/passthrough.h>
#define SM_LAYER z_pass_top
#define SM_NEXT  z_pass_heap
#define SM_SIZE_MAX 4096
#include <sunmao/layers/addon/passthrough.h>
#define Z_TOP z_pass_top
#else
#define Z_TOP z_heap
#endif

#define SM_NEXT   Z_TOP
#define SM_ERR    warn
#define SM_PREFIX z_
#include <sunmao/sockets/custom_socket.h>
