/* tlsfccsd — the Mortise paper's tlsfcc with both secure layers (§4.1, Table 4): a quarantine of
 * freed blocks, and a check value after the end of every block, over the combining TLSF heap.
 *
 *   tlsfcc's line
 *   :: tail_chksum(chk_sum=xor, err_handle=default)
 *   :: delayed(chk_sum=magic, node_xor=1, delayed_size=64KB, err_handle=fatal)
 *   :: malloc_socket
 *
 * The quarantine sits above the tail check, so its encoded link words are the program's first
 * words, where a dangling pointer writes (the other way round, tail_chksum's header moves the
 * program's block 16 bytes past them and such a write went unseen); an overflow is then reported
 * when the block leaves the quarantine. What it detects and costs: docs/security.md.
 */
#define SM_INSTANCE_BASE 1
/* Its policies first, then the base: every policy header in path order, as smc emits them. */
#include <sunmao/policies/chksum/magic.h>
#include <sunmao/policies/chksum/xor.h>
#include <sunmao/policies/err/fatal.h>
#include "tlsfcc.c"

#define SM_LAYER  tlsfccsd_tail
#define SM_NEXT   tlsfcc_heap
#define SM_CHKSUM xor
#define SM_ERR    warn
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER  tlsfccsd_delayed
#define SM_NEXT   tlsfccsd_tail
#define SM_CHKSUM magic
#define SM_ERR    fatal
#define SM_OPT_NODE_XOR 1
#define SM_OPT_DELAYED_SIZE (64ul << 10)
#include <sunmao/layers/addon/delayed_free.h> /* the paper's `delayed` */

#define SM_NEXT tlsfccsd_delayed
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
