/* Bit tricks used by size classes, bitmaps and alignment arithmetic. Framework core. */
#ifndef SUNMAO_CORE_BITS_H
#define SUNMAO_CORE_BITS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "compiler.h"

/* Index of the highest set bit; x must be non-zero. */
SM_INLINE unsigned sm_log2_floor(size_t x) { return (unsigned)(sizeof(size_t) * 8 - 1) - (unsigned)__builtin_clzl(x); }
/* Smallest k with 2^k >= x; x must be non-zero. */
SM_INLINE unsigned sm_log2_ceil(size_t x) { return x <= 1 ? 0 : sm_log2_floor(x - 1) + 1; }
SM_INLINE unsigned sm_ctz(size_t x) { return (unsigned)__builtin_ctzl(x); }
SM_INLINE bool sm_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
/* a must be a power of two. Callers check for wrap-around where the size came from a user. */
SM_INLINE size_t sm_align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }
SM_INLINE size_t sm_align_down(size_t x, size_t a) { return x & ~(a - 1); }
SM_INLINE uintptr_t sm_addr(const void *p) { return (uintptr_t)p; }
SM_INLINE bool sm_ptr_aligned(const void *p, size_t a) { return (sm_addr(p) & (a - 1)) == 0; }

/* A 64-bit mixing function (the finaliser of the SplitMix64 generator): every input bit changes
 * about half of the output bits; for keys derived from a secret, not for hashing tables. */
SM_INLINE uint64_t sm_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Set bits of x, without __builtin_popcountll: without -mpopcnt gcc calls libgcc for that, which a
 * freestanding build does not link. */
SM_INLINE unsigned sm_popcount64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

#endif
