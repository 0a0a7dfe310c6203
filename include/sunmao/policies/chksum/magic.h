/* chksum policy `magic`: a fixed per-process word. Catches overwrites of the word itself (overflow
 * into the next block's header or tail), costs one load and compare.
 * Every chksum policy P provides type sm_chksum_P_t and
 *   sm_chksum_P_t sm_chksum_P_compute(const void *block, size_t size)   (paper §2.2 (4)),
 *   sm_chksum_P_covers_size   1 when distinct sizes of one block give distinct words, so a layer
 *                             that keys a header by the word needs no hash of the size of its own;
 *                             0 when the size is ignored (this policy).
 * @model: name=magic kind=policy family=chksum */
#ifndef SUNMAO_POLICY_CHKSUM_MAGIC_H
#define SUNMAO_POLICY_CHKSUM_MAGIC_H

#include <stddef.h>
#include <stdint.h>
#include "../../core/compiler.h"
#include "../../core/secret.h"

typedef uint64_t sm_chksum_magic_t;
enum { sm_chksum_magic_covers_size = 0 };

SM_INLINE sm_chksum_magic_t sm_chksum_magic_compute(const void *block, size_t size)
{
    (void)block, (void)size;
    return sm_secret() ^ 0xa5a5a5a5a5a5a5a5ull;
}

#endif
