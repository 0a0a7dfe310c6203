/* sizeclass policy `tc5`: `tc` with one more class just past each power of two from 1 KiB to 4 KiB,
 * 16 B .. 256 KiB, 55 classes (libsunmao's).
 * tc's classes, and between 1 KiB and 8 KiB five per power of two instead of four: 9/8 of it, then
 * tc's 5/4, 3/2, 7/4 and 2 (1152, 1280, 1536, 1792, 2048, 2304, ..., 4608, 5120, 6144, 7168, 8192).
 * Why: programs that wrap malloc put a small header before round sizes, and tc's first class past a
 * power of two is a quarter above it. sqlite's 8-byte size prefix makes its page buffers 4368 B
 * (tc 5120; here 4608) and its 1 KiB buffers 1032 B (tc 1280; here 1152): its peak 130.5 -> 115.4
 * MiB. Three classes, not tc8's sixty-four more: a program using every size at once pays a partly
 * used slab per class, and tc8's whole set cost glibc-thread 1.3x its memory where these cost
 * nothing measurable (docs/default-allocator.md). Above 4 KiB the next class past 8 KiB belongs to
 * the layers below the slabs in libsunmao.
 * Both mappings are shifts and small tables (no division). See log2b.h for what every sizeclass
 * policy provides.
 * @model: name=tc5 kind=policy family=sizeclass flag sizeclass-max=262144 */
#ifndef SUNMAO_POLICY_SIZECLASS_TC5_H
#define SUNMAO_POLICY_SIZECLASS_TC5_H

#include <stddef.h>
#include "../../core/bits.h"

enum {
    sm_sizeclass_tc5_small_classes = 8,                 /* 16, 32, ..., 128 */
    sm_sizeclass_tc5_five_first = 8 + 4 * 3,            /* four per power of two from 2^7 to 2^9 */
    sm_sizeclass_tc5_five_end = 8 + 4 * 3 + 5 * 3,      /* five per power of two from 2^10 to 2^12 */
    sm_sizeclass_tc5_count = 8 + 4 * 3 + 5 * 3 + 4 * 5, /* four per power of two from 2^13 to 2^17 */
    sm_sizeclass_tc5_max_size = 256 << 10,
};

/* From 1 KiB to 8 KiB: a size's eighth of its power of two (the three bits below its leading one)
 * -> its class among the five. */
static const unsigned char sm_sizeclass_tc5_of_eighth[8] = { 0, 1, 2, 2, 3, 3, 4, 4 };

SM_INLINE unsigned sm_sizeclass_tc5_size_to_class(size_t size)
{
    if (size <= 128)
        return (unsigned)((size - (size != 0)) >> 4);
    /* size - 1 lies in [2^e, 2^(e+1)); the bits below its leading one pick the class */
    size_t below = size - 1;
    unsigned e = sm_log2_floor(below);
    if (e < 10)
        return sm_sizeclass_tc5_small_classes + (e - 7) * 4 + (unsigned)((below >> (e - 2)) & 3);
    if (e < 13)
        return sm_sizeclass_tc5_five_first + (e - 10) * 5 + sm_sizeclass_tc5_of_eighth[(below >> (e - 3)) & 7];
    return sm_sizeclass_tc5_five_end + (e - 13) * 4 + (unsigned)((below >> (e - 2)) & 3);
}

/* Every class's size in 16-byte units: the reverse mapping is one load (getmeta, realloc in place
 * and malloc_usable_size ask it), where tc's formula takes three ranges' branches. */
static const unsigned short sm_sizeclass_tc5_units[sm_sizeclass_tc5_count] = {
    1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14,
    16, 20, 24, 28, 32, 40, 48, 56, 64, 72, 80,
    96, 112, 128, 144, 160, 192, 224, 256, 288, 320, 384,
    448, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560,
    3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
};

SM_INLINE size_t sm_sizeclass_tc5_class_to_size(unsigned cls) { return (size_t)sm_sizeclass_tc5_units[cls] << 4; }

#endif
