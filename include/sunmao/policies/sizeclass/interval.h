/* sizeclass policy generator `interval`: classes in up to 8 intervals, each with its own
 * power-of-two step — the configurable policy of paper §2.2 (2). A template (no include guard):
 *
 *     #define SM_SIZECLASS_NAME mycls
 *     #define SM_SIZECLASS_INTERVALS (128, 16), (1024, 64), (8192, 512)
 *     #include <sunmao/policies/sizeclass/interval.h>
 *
 * defines the policy `mycls` (use it as SM_SIZECLASS mycls): interval i covers sizes
 * (bound[i-1], bound[i]] (bound[-1] = 0) with classes bound[i-1] + step[i], ... , bound[i]; here
 * 16, 32, ..., 128, 192, ..., 1024, 1536, ..., 8192. Rules, checked at compile time: steps are
 * powers of two >= 16, bounds increase, each bound is a multiple of its interval's step.
 * See log2b.h for what every sizeclass policy provides.
 * @model: name=interval kind=policy family=sizeclass
 * @check: SM_SIZECLASS_NAME=t SM_SIZECLASS_INTERVALS=(128,16),(1024,64),(8192,512)
 *
 * Mapping: the interval is found by comparing the size with every bound at once (summing the
 * compare results, no branches), then class = base[i] + ((size - lo[i] - 1) >> shift[i]). Unused
 * interval slots repeat the last bound, so their compares are always false. */
#ifndef SM_SIZECLASS_NAME
#error "sizeclass/interval.h: define SM_SIZECLASS_NAME (the policy's name) before including"
#endif
#ifndef SM_SIZECLASS_INTERVALS
#error "sizeclass/interval.h: define SM_SIZECLASS_INTERVALS as (bound, step), ... before including"
#endif

#ifndef SUNMAO_POLICY_SIZECLASS_INTERVAL_HELPERS
#define SUNMAO_POLICY_SIZECLASS_INTERVAL_HELPERS
#include <stddef.h>
#include <stdint.h>
#include "../../core/bits.h"

#define SM_IVL_BOUND_(bound, step) (bound)
#define SM_IVL_STEP_(bound, step)  (step)
#define SM_IVL_BOUND(pair) SM_IVL_BOUND_ pair
#define SM_IVL_STEP(pair)  SM_IVL_STEP_ pair
/* Pair number i of the list; a missing pair reads as (0, 0). */
#define SM_IVL_AT(i, ...) SM_CAT3(SM_IVL_ARG, i, _)(__VA_ARGS__, (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0))
#define SM_IVL_ARG0_(a, ...) a
#define SM_IVL_ARG1_(a, b, ...) b
#define SM_IVL_ARG2_(a, b, c, ...) c
#define SM_IVL_ARG3_(a, b, c, d, ...) d
#define SM_IVL_ARG4_(a, b, c, d, e, ...) e
#define SM_IVL_ARG5_(a, b, c, d, e, f, ...) f
#define SM_IVL_ARG6_(a, b, c, d, e, f, g, ...) g
#define SM_IVL_ARG7_(a, b, c, d, e, f, g, h, ...) h
#define SM_IVL_COUNT(...) SM_IVL_COUNT_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define SM_IVL_COUNT_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, n, ...) n
#endif

#define SM_IVL_ID(x) SM_CAT4(sm_sizeclass_, SM_SIZECLASS_NAME, _, x)
#define SM_IVL_N SM_IVL_COUNT(SM_SIZECLASS_INTERVALS)
/* Bound and step of slot i; slots past the list repeat the last bound (step 16 keeps them valid). */
#define SM_IVL_HI(i) ((i) < SM_IVL_N ? SM_IVL_BOUND(SM_IVL_AT(i, SM_SIZECLASS_INTERVALS)) : SM_IVL_ID(max_size))
#define SM_IVL_ST(i) ((i) < SM_IVL_N ? SM_IVL_STEP(SM_IVL_AT(i, SM_SIZECLASS_INTERVALS)) : 16)

_Static_assert(SM_IVL_N >= 1 && SM_IVL_N <= 8, "sizeclass/interval.h: between 1 and 8 (bound, step) pairs");

enum {
    SM_IVL_ID(interval_count) = SM_IVL_N,
    SM_IVL_ID(max_size) = SM_IVL_N == 1 ? SM_IVL_BOUND(SM_IVL_AT(0, SM_SIZECLASS_INTERVALS))
                        : SM_IVL_N == 2 ? SM_IVL_BOUND(SM_IVL_AT(1, SM_SIZECLASS_INTERVALS))
                        : SM_IVL_N == 3 ? SM_IVL_BOUND(SM_IVL_AT(2, SM_SIZECLASS_INTERVALS))
                        : SM_IVL_N == 4 ? SM_IVL_BOUND(SM_IVL_AT(3, SM_SIZECLASS_INTERVALS))
                        : SM_IVL_N == 5 ? SM_IVL_BOUND(SM_IVL_AT(4, SM_SIZECLASS_INTERVALS))
                        : SM_IVL_N == 6 ? SM_IVL_BOUND(SM_IVL_AT(5, SM_SIZECLASS_INTERVALS))
                        : SM_IVL_N == 7 ? SM_IVL_BOUND(SM_IVL_AT(6, SM_SIZECLASS_INTERVALS))
                                        : SM_IVL_BOUND(SM_IVL_AT(7, SM_SIZECLASS_INTERVALS)),
    SM_IVL_ID(hi0) = SM_IVL_HI(0), SM_IVL_ID(hi1) = SM_IVL_HI(1), SM_IVL_ID(hi2) = SM_IVL_HI(2),
    SM_IVL_ID(hi3) = SM_IVL_HI(3), SM_IVL_ID(hi4) = SM_IVL_HI(4), SM_IVL_ID(hi5) = SM_IVL_HI(5),
    SM_IVL_ID(hi6) = SM_IVL_HI(6), SM_IVL_ID(hi7) = SM_IVL_HI(7),
    SM_IVL_ID(st0) = SM_IVL_ST(0), SM_IVL_ID(st1) = SM_IVL_ST(1), SM_IVL_ID(st2) = SM_IVL_ST(2),
    SM_IVL_ID(st3) = SM_IVL_ST(3), SM_IVL_ID(st4) = SM_IVL_ST(4), SM_IVL_ID(st5) = SM_IVL_ST(5),
    SM_IVL_ID(st6) = SM_IVL_ST(6), SM_IVL_ID(st7) = SM_IVL_ST(7),
    /* First class of each slot: the classes of all earlier slots. Divisions here are by
     * compile-time constants in constant expressions, never run. */
    SM_IVL_ID(base0) = 0,
    SM_IVL_ID(base1) = SM_IVL_ID(base0) + SM_IVL_ID(hi0) / SM_IVL_ID(st0),
    SM_IVL_ID(base2) = SM_IVL_ID(base1) + (SM_IVL_ID(hi1) - SM_IVL_ID(hi0)) / SM_IVL_ID(st1),
    SM_IVL_ID(base3) = SM_IVL_ID(base2) + (SM_IVL_ID(hi2) - SM_IVL_ID(hi1)) / SM_IVL_ID(st2),
    SM_IVL_ID(base4) = SM_IVL_ID(base3) + (SM_IVL_ID(hi3) - SM_IVL_ID(hi2)) / SM_IVL_ID(st3),
    SM_IVL_ID(base5) = SM_IVL_ID(base4) + (SM_IVL_ID(hi4) - SM_IVL_ID(hi3)) / SM_IVL_ID(st4),
    SM_IVL_ID(base6) = SM_IVL_ID(base5) + (SM_IVL_ID(hi5) - SM_IVL_ID(hi4)) / SM_IVL_ID(st5),
    SM_IVL_ID(base7) = SM_IVL_ID(base6) + (SM_IVL_ID(hi6) - SM_IVL_ID(hi5)) / SM_IVL_ID(st6),
    SM_IVL_ID(count) = SM_IVL_ID(base7) + (SM_IVL_ID(hi7) - SM_IVL_ID(hi6)) / SM_IVL_ID(st7),
};

#define SM_IVL_CHECK(i, prev_hi)                                                                   \
    _Static_assert(sm_is_pow2_const_(SM_IVL_ID(st##i)) && SM_IVL_ID(st##i) >= 16,                  \
                   "sizeclass/interval.h: step " #i " must be a power of two >= 16");              \
    _Static_assert((i) >= SM_IVL_N || SM_IVL_ID(hi##i) > (prev_hi),                                \
                   "sizeclass/interval.h: bound " #i " must exceed the bound before it");          \
    _Static_assert(SM_IVL_ID(hi##i) % SM_IVL_ID(st##i) == 0 && (prev_hi) % SM_IVL_ID(st##i) == 0,  \
                   "sizeclass/interval.h: the bounds of interval " #i " must be multiples of its step")
#define sm_is_pow2_const_(x) ((x) > 0 && ((x) & ((x) - 1)) == 0)
SM_IVL_CHECK(0, 0);
SM_IVL_CHECK(1, SM_IVL_ID(hi0));
SM_IVL_CHECK(2, SM_IVL_ID(hi1));
SM_IVL_CHECK(3, SM_IVL_ID(hi2));
SM_IVL_CHECK(4, SM_IVL_ID(hi3));
SM_IVL_CHECK(5, SM_IVL_ID(hi4));
SM_IVL_CHECK(6, SM_IVL_ID(hi5));
SM_IVL_CHECK(7, SM_IVL_ID(hi6));

/* Per slot: sizes above lo[i] belong to it; class = base[i] + ((size - lo[i] - 1) >> shift[i]). */
static const struct { uint32_t lo, base; uint8_t shift; } SM_IVL_ID(slot)[8] = {
#define SM_IVL_SLOT(i, lo) { (uint32_t)(lo), SM_IVL_ID(base##i), (uint8_t)__builtin_ctz(SM_IVL_ID(st##i)) }
    SM_IVL_SLOT(0, 0),               SM_IVL_SLOT(1, SM_IVL_ID(hi0)), SM_IVL_SLOT(2, SM_IVL_ID(hi1)),
    SM_IVL_SLOT(3, SM_IVL_ID(hi2)), SM_IVL_SLOT(4, SM_IVL_ID(hi3)), SM_IVL_SLOT(5, SM_IVL_ID(hi4)),
    SM_IVL_SLOT(6, SM_IVL_ID(hi5)), SM_IVL_SLOT(7, SM_IVL_ID(hi6)),
#undef SM_IVL_SLOT
};

SM_INLINE unsigned SM_IVL_ID(size_to_class)(size_t size)
{
    size += size == 0; /* size 0 is served like size 1: by class 0 */
    unsigned i = (size > SM_IVL_ID(hi0)) + (size > SM_IVL_ID(hi1)) + (size > SM_IVL_ID(hi2)) +
                 (size > SM_IVL_ID(hi3)) + (size > SM_IVL_ID(hi4)) + (size > SM_IVL_ID(hi5)) +
                 (size > SM_IVL_ID(hi6));
    return SM_IVL_ID(slot)[i].base + (unsigned)((size - SM_IVL_ID(slot)[i].lo - 1) >> SM_IVL_ID(slot)[i].shift);
}

SM_INLINE size_t SM_IVL_ID(class_to_size)(unsigned cls)
{
    unsigned i = (cls >= SM_IVL_ID(base1)) + (cls >= SM_IVL_ID(base2)) + (cls >= SM_IVL_ID(base3)) +
                 (cls >= SM_IVL_ID(base4)) + (cls >= SM_IVL_ID(base5)) + (cls >= SM_IVL_ID(base6)) +
                 (cls >= SM_IVL_ID(base7));
    return SM_IVL_ID(slot)[i].lo + ((size_t)(cls - SM_IVL_ID(slot)[i].base + 1) << SM_IVL_ID(slot)[i].shift);
}

#undef SM_IVL_CHECK
#undef sm_is_pow2_const_
#undef SM_IVL_ST
#undef SM_IVL_HI
#undef SM_IVL_N
#undef SM_IVL_ID
#undef SM_SIZECLASS_NAME
#undef SM_SIZECLASS_INTERVALS
