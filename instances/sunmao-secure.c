/* sunmao-secure — the default allocator, hardened (libsunmao-secure.so): what a program that wants
 * a drop-in which catches heap misuse links or preloads.
 *
 *   sunmao's line, its thread cache with harden=2, hold_bytes=8KB, link_at=16
 *   :: tail_chksum(chk_sum=xor, err_handle=default)
 *   :: guard(sync=mutex, sample_every=50000)
 *   :: malloc_socket
 *
 * Top down: one request in 50000 (per thread, at random; SUNMAO_CONF's guard_sample changes it)
 * gets a block against a guard page, so an overflow or a use after free of it faults at the access
 * and is reported with its call sites (not 1 in 5000, the layer's default: with two threads each
 * sample's mprotect interrupts the other CPU, and churn loops ran 14-24% slower; docs/layers.md);
 * every block has a check value after its end and a keyed header before it, checked at free (an
 * overflow, an invalid or a double free is reported then, or at realloc); below, the thread cache
 * holds freed objects back in its lists (8 KiB a list: an object comes back only after that many
 * bytes of later frees of its class), its lists' links are encoded in the program's first 16 bytes
 * (a write after free there is reported when the object reaches its list's head), and each object
 * it hands out is checked against the slab's owner map. Every report is one line on stderr; the
 * program goes on and the damaged block is never reused. What each part detects, and what it all
 * costs against libsunmao: docs/security.md.
 */
#define SM_INSTANCE_BASE 1
#define SM_INSTANCE_HARDEN 2
#define SM_INSTANCE_HOLD_BYTES (8u << 10) /* a quarantine in the thread cache's lists */
#define SM_INSTANCE_LINK_AT 16 /* under tail_chksum's header: the program's first bytes */
#include "sunmao.c"
#include <sunmao/policies/chksum/xor.h>

#define SM_LAYER  sunmao_secure_tail
#define SM_NEXT   sunmao_cache
#define SM_CHKSUM xor
#define SM_ERR    warn
#include <sunmao/layers/addon/tail_chksum.h>

#define SM_LAYER sunmao_secure_guard
#define SM_NEXT  sunmao_secure_tail
#define SM_SYNC  mutex
#define SM_ERR   warn
#define SM_OPT_SAMPLE_EVERY 50000
#include <sunmao/layers/addon/guard.h>

#define SM_NEXT sunmao_secure_guard
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
