/* hslabd — the Mortise paper's hslab with delayed free (§4.1, Table 4): every free is checked and
 * held in a per-thread quarantine of 64 KiB before the thread cache may hand the block out again.
 *
 *   hslab's line :: delayed(chk_sum=magic, node_xor=1, delayed_size=64KB, err_handle=fatal) :: malloc_socket
 *
 * err_handle=fatal: an invalid or double free, or a write after free found when a block leaves the
 * quarantine, prints its one line and aborts. What it detects and costs: docs/security.md.
 */
#define SM_INSTANCE_BASE 1
/* Its policies first, then the base: every policy header in path order, as smc emits them. */
#include <sunmao/policies/chksum/magic.h>
#include <sunmao/policies/err/fatal.h>
#include "hslab.c"

#define SM_LAYER  hslabd_delayed
#define SM_NEXT   hslab_cache
#define SM_CHKSUM magic
#define SM_ERR    fatal
#define SM_OPT_NODE_XOR 1
#define SM_OPT_DELAYED_SIZE (64ul << 10)
#include <sunmao/layers/addon/delayed_free.h> /* the paper's `delayed` */

#define SM_NEXT hslabd_delayed
#define SM_ERR  fatal
#include <sunmao/sockets/select.h>
