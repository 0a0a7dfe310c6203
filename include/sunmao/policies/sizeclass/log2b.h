/* sizeclass policy `log2b` (paper §2.2 (2)): one class per power of two, 16 B .. 1 MiB.
 * Coarse (up to 50% internal fragmentation) but the cheapest mapping there is, and every class
 * size is its own natural alignment, which segregated-fit and aligned requests like.
 *
 * Every sizeclass policy P provides:
 *   enum sm_sizeclass_P_count, sm_sizeclass_P_max_size
 *   unsigned sm_sizeclass_P_size_to_class(size_t size)  smallest class whose size >= size
 *                                                       (0 -> class 0; size <= max_size only)
 *   size_t   sm_sizeclass_P_class_to_size(unsigned cls) cls < count
 * Class sizes are strictly increasing multiples of 16, and both mappings take constant time
 * (shifts, clz and small tables: no division, no search over the classes).
 * @model: name=log2b kind=policy family=sizeclass flag sizeclass-max=1048576 */
#ifndef SUNMAO_POLICY_SIZECLASS_LOG2B_H
#define SUNMAO_POLICY_SIZECLASS_LOG2B_H

#include <stddef.h>
#include "../../core/bits.h"

enum { sm_sizeclass_log2b_count = 17, sm_sizeclass_log2b_max_size = 1 << 20 };

SM_INLINE unsigned sm_sizeclass_log2b_size_to_class(size_t size)
{
    /* Or-ing 15 in makes every size up to 16 land on 2^4 without a branch. */
    size_t below = size ? size - 1 : 0;
    return sm_log2_floor(below | 15) - 3;
}

SM_INLINE size_t sm_sizeclass_log2b_class_to_size(unsigned cls) { return (size_t)16 << cls; }

#endif
