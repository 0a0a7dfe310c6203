/* sizeclass policy `prime` (the paper's wfslab policy): class sizes 16 * q for q in a sparse,
 * increasing sequence of odd primes, 16 B .. 64 KiB, 47 classes.
 *
 * Why primes: objects of one class sit at a stride of 16 * q in a slab. With q odd, the start
 * addresses of consecutive objects walk through every 16-byte offset modulo any power of two
 * before repeating, so hot objects of a class spread over all cache sets (and banks) instead of
 * piling onto the few that a power-of-two stride would hit.
 *
 * Exact definition: q starts 1, 2, 3 (16, 32, 48 B: too small to alias, and 1 is not prime);
 * each next q is the smallest prime >= max(prev + 1, ceil(prev * 9 / 8)); the sequence stops at
 * the last such prime <= 4096 (3833) and one final class of exactly 64 KiB (q = 4096) is added so
 * the policy covers the usual 64 KiB slab boundary. The 9/8 rule keeps neighbours >= 12.5% apart
 * (prime gaps make some gaps wider, up to ~40% among the tiny classes).
 *
 * Mapping without division: in 16-byte units u = ceil(size / 16), each u < 16 is its own bucket,
 * and above that each power-of-two range [2^e, 2^(e+1)) is cut in 8 buckets by the three bits
 * below the leading one. Because neighbours are >= 1/8 apart, a bucket holds at most one class
 * size, so the bucket's first candidate class is right or one too small: one compare fixes it.
 * The tables were generated from the rule above; tests/unit/sizeclass.c checks every size.
 * @model: name=prime kind=policy family=sizeclass flag sizeclass-max=65536 */
#ifndef SUNMAO_POLICY_SIZECLASS_PRIME_H
#define SUNMAO_POLICY_SIZECLASS_PRIME_H

#include <stdint.h>
#include <stddef.h>
#include "../../core/bits.h"

enum { sm_sizeclass_prime_count = 47, sm_sizeclass_prime_max_size = 64 << 10 };

static const uint16_t sm_sizeclass_prime_units[sm_sizeclass_prime_count] = {
    1,   2,   3,   5,   7,   11,  13,   17,   23,   29,   37,   43,   53,   61,   71,   83,
    97,  113, 131, 149, 173, 197, 223,  251,  283,  331,  373,  421,  479,  541,  613,  691,
    787, 887, 1009, 1151, 1297, 1471, 1657, 1867, 2111, 2377, 2677, 3019, 3407, 3833, 4096,
};

/* First class whose unit count reaches the bucket's lowest unit count. */
static const uint8_t sm_sizeclass_prime_bucket_first[81] = {
    0,  0,  1,  2,  3,  3,  4,  4,  5,  5,  5,  5,  6,  6,  7,  7,  7,  8,  8,  8,  9,
    9,  9,  10, 10, 10, 11, 12, 12, 12, 13, 13, 14, 15, 15, 16, 16, 17, 17, 18, 18, 19,
    20, 21, 21, 22, 23, 23, 24, 25, 25, 26, 27, 27, 28, 29, 29, 30, 31, 32, 32, 33, 34,
    34, 35, 36, 36, 37, 38, 39, 39, 40, 40, 41, 42, 43, 44, 44, 45, 46, 46,
};

SM_INLINE unsigned sm_sizeclass_prime_size_to_class(size_t size)
{
    size_t units = (size + 15) >> 4;
    unsigned bucket;
    if (units < 16) {
        bucket = (unsigned)units;
    } else {
        unsigned e = sm_log2_floor(units);
        bucket = 16 + (e - 4) * 8 + (unsigned)((units >> (e - 3)) & 7);
    }
    unsigned cls = sm_sizeclass_prime_bucket_first[bucket];
    return cls + (sm_sizeclass_prime_units[cls] < units);
}

SM_INLINE size_t sm_sizeclass_prime_class_to_size(unsigned cls) { return (size_t)sm_sizeclass_prime_units[cls] << 4; }

#endif
