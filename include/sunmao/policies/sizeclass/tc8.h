/* sizeclass policy `tc8`: `tc` up to 1 KiB, twice as many classes above, 16 B .. 256 KiB,
 * 84 classes.
 * 16-byte steps up to 128 B and four classes per power of two up to 1 KiB, (5, 6, 7, 8) * 2^(e-2),
 * exactly tc's; then eight per power of two, (9, 10, ..., 16) * 2^(e-3) for each 2^e in
 * 1 KiB .. 128 KiB (mimalloc's spacing), so neighbours are 6.25-12.5% apart there instead of
 * 12.5-25%.
 * Why above 1 KiB: programs that wrap malloc put a small header before round sizes, and tc's
 * classes just past each power of two are a quarter above it. sqlite's 8-byte size prefix makes
 * its page buffers 4368 B (tc 5120, 12 per 64 KiB slab; here 4608, 14) and its 1 KiB buffers
 * 1032 B (1280, 51 per slab; here 1152, 56): the two sizes are all of its 105 MB peak, which took
 * 132 MiB of RSS with tc and 117 with this (glibc 105). Few objects per slab make a coarse class
 * dear, and a program rarely has more than a handful of sizes this large live.
 * Not libsunmao's default: its price is a partly used slab more per class between 1 and 8 KiB, and
 * a program using all those sizes at once pays it (glibc-thread, random sizes: 4.3 -> 5.5 MiB, 1.3x),
 * which over the benchmark suite outweighs sqlite's gain (docs/default-allocator.md). libsunmao
 * takes three of these classes, the ones just past 1, 2 and 4 KiB, and the same gain (tc5.h).
 * Why not below: eight classes per power of two from 128 B (96 classes) saved no more on sqlite
 * but made sh6bench (2000 live blocks of 1..1000 B per thread) 5x slower and glibc-thread 1.4x,
 * most likely because twice the lists share the thread cache's fixed byte budget (not traced).
 * See log2b.h for what every sizeclass policy provides.
 * @model: name=tc8 kind=policy family=sizeclass flag sizeclass-max=262144 */
#ifndef SUNMAO_POLICY_SIZECLASS_TC8_H
#define SUNMAO_POLICY_SIZECLASS_TC8_H

#include <stddef.h>
#include "../../core/bits.h"

enum {
    sm_sizeclass_tc8_small_classes = 8,   /* 16, 32, ..., 128 */
    sm_sizeclass_tc8_fine_first = 8 + 4 * 3, /* plus four per power of two from 2^7 to 2^9: 1152 */
    sm_sizeclass_tc8_count = 8 + 4 * 3 + 8 * 8, /* plus eight per power of two from 2^10 to 2^17 */
    sm_sizeclass_tc8_max_size = 256 << 10,
};

SM_INLINE unsigned sm_sizeclass_tc8_size_to_class(size_t size)
{
    if (size <= 128)
        return (unsigned)((size - (size != 0)) >> 4);
    /* size - 1 lies in [2^e, 2^(e+1)); the two (below 1 KiB) or three bits below its leading one
     * pick the class within the power of two. */
    size_t below = size - 1;
    unsigned e = sm_log2_floor(below);
    if (e < 10)
        return sm_sizeclass_tc8_small_classes + (e - 7) * 4 + (unsigned)((below >> (e - 2)) & 3);
    return sm_sizeclass_tc8_fine_first + (e - 10) * 8 + (unsigned)((below >> (e - 3)) & 7);
}

SM_INLINE size_t sm_sizeclass_tc8_class_to_size(unsigned cls)
{
    if (cls < sm_sizeclass_tc8_small_classes)
        return (size_t)(cls + 1) << 4;
    if (cls < sm_sizeclass_tc8_fine_first) {
        unsigned k = cls - sm_sizeclass_tc8_small_classes;
        return (size_t)(5 + (k & 3)) << (5 + (k >> 2));
    }
    unsigned k = cls - sm_sizeclass_tc8_fine_first;
    return (size_t)(9 + (k & 7)) << (7 + (k >> 3));
}

#endif
