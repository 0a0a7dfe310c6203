/* sizeclass policy `tc`: TCMalloc-like classes, 16 B .. 256 KiB, 52 classes.
 * 16-byte steps up to 128 B (small objects dominate, so they get exact-ish classes), then four
 * classes per power of two: (5, 6, 7, 8) * 2^(e-2) for each 2^e in 128 .. 128 KiB. The gap
 * between neighbours is 12.5-25% of the larger one, which bounds internal fragmentation while
 * keeping the class count (and so the per-class state and lock count) small.
 * See log2b.h for what every sizeclass policy provides.
 * @model: name=tc kind=policy family=sizeclass flag sizeclass-max=262144 */
#ifndef SUNMAO_POLICY_SIZECLASS_TC_H
#define SUNMAO_POLICY_SIZECLASS_TC_H

#include <stddef.h>
#include "../../core/bits.h"

enum {
    sm_sizeclass_tc_small_classes = 8, /* 16, 32, ..., 128 */
    sm_sizeclass_tc_count = 8 + 4 * 11, /* plus four per power of two from 2^7 to 2^17 */
    sm_sizeclass_tc_max_size = 256 << 10,
};

SM_INLINE unsigned sm_sizeclass_tc_size_to_class(size_t size)
{
    if (size <= 128)
        return (unsigned)((size - (size != 0)) >> 4);
    /* size - 1 lies in [2^e, 2^(e+1)); its two bits below the leading one pick the quarter. */
    size_t below = size - 1;
    unsigned e = sm_log2_floor(below);
    return sm_sizeclass_tc_small_classes + (e - 7) * 4 + (unsigned)((below >> (e - 2)) & 3);
}

SM_INLINE size_t sm_sizeclass_tc_class_to_size(unsigned cls)
{
    if (cls < sm_sizeclass_tc_small_classes)
        return (size_t)(cls + 1) << 4;
    unsigned k = cls - sm_sizeclass_tc_small_classes;
    return (size_t)(5 + (k & 3)) << (5 + (k >> 2));
}

#endif
