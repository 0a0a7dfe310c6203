/* chksum policy `xor`: the block's address and size folded with the per-process secret. Unlike
 * `magic` it also catches a header copied from another block or a size that was rewritten.
 * @model: name=xor kind=policy family=chksum */
#ifndef SUNMAO_POLICY_CHKSUM_XOR_H
#define SUNMAO_POLICY_CHKSUM_XOR_H

#include <stddef.h>
#include <stdint.h>
#include "../../core/compiler.h"
#include "../../core/secret.h"

typedef uint64_t sm_chksum_xor_t;
/* For one block, size -> word is a bijection: a rotation, xors and a multiply by an odd number. */
enum { sm_chksum_xor_covers_size = 1 };

SM_INLINE sm_chksum_xor_t sm_chksum_xor_compute(const void *block, size_t size)
{
    uint64_t x = (uint64_t)(uintptr_t)block ^ ((uint64_t)size << 17 | (uint64_t)size >> 47);
    return (x ^ sm_secret()) * 0x9e3779b97f4a7c15ull;
}

#endif
