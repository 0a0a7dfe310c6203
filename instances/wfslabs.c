/* wfslabs — the Mortise paper's secure wait-free allocator (§4.1, Table 4): wfslab with a check
 * value after the end of every block, verified when the block is freed or reallocated.
 *
 *   wfslab's line :: tail_chksum(chk_sum=xor, err_handle=default) :: malloc_socket
 *
 * err_handle=default is our `warn`: one line on stderr, then the safe action (a block whose check
 * value was overwritten is never reused). What it detects and costs: docs/security.md.
 */
#define SM_INSTANCE_BASE 1
/* Its policies first, then the base: every policy header in path order, as smc emits them. */
#include <sunmao/policies/chksum/xor.h>
#include "wfslab.c"

#define SM_LAYER  wfslabs_tail
#define SM_NEXT   wfslab_small
#define SM_CHKSUM xor
#define SM_ERR    warn
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_NEXT wfslabs_tail
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
