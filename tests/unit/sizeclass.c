/* Unit test of the sizeclass policies: for every size up to each policy's max, the class chosen
 * is the smallest that fits; class sizes are strictly increasing multiples of 16; count and
 * max_size agree with the tables. Prints each policy's worst-case internal fragmentation. */
#include <stdint.h>
#include <stdio.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/prime.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sizeclass/tc8.h>
#include <sunmao/policies/sizeclass/tc5.h>
#include "tests/support/check.h"

#define SM_SIZECLASS_NAME tri
#define SM_SIZECLASS_INTERVALS (128, 16), (1024, 64), (8192, 512)
#include <sunmao/policies/sizeclass/interval.h>

#define SM_SIZECLASS_NAME one
#define SM_SIZECLASS_INTERVALS (4096, 256)
#include <sunmao/policies/sizeclass/interval.h>

#define SM_SIZECLASS_NAME eight
#define SM_SIZECLASS_INTERVALS (64, 16), (256, 32), (512, 64), (1024, 128), (4096, 256), (8192, 1024), \
    (65536, 4096), (1048576, 65536)
#include <sunmao/policies/sizeclass/interval.h>

typedef struct {
    const char *name;
    unsigned count;
    size_t max_size;
    unsigned (*size_to_class)(size_t);
    size_t (*class_to_size)(unsigned);
} policy_t;

/* The policies' functions are always_inline; these wrappers give them addresses. */
#define WRAP(P)                                                                                    \
    static unsigned P##_s2c(size_t s) { return sm_sizeclass_##P##_size_to_class(s); }            \
    static size_t P##_c2s(unsigned c) { return sm_sizeclass_##P##_class_to_size(c); }             \
    static const policy_t P##_desc = { #P, sm_sizeclass_##P##_count, sm_sizeclass_##P##_max_size, \
                                         P##_s2c, P##_c2s };
WRAP(tc)
WRAP(tc8)
WRAP(tc5)
WRAP(log2b)
WRAP(prime)
WRAP(tri)
WRAP(one)
WRAP(eight)

static void check_policy(const policy_t *p)
{
    CHECKF(p->count >= 1, "%s: no classes", p->name);
    size_t prev = 0;
    for (unsigned c = 0; c < p->count; c++) {
        size_t s = p->class_to_size(c);
        CHECKF(s > prev, "%s: class %u size %zu not above class %u size %zu", p->name, c, s, c - 1, prev);
        CHECKF(s % 16 == 0, "%s: class %u size %zu not a multiple of 16", p->name, c, s);
        CHECKF(p->size_to_class(s) == c, "%s: size_to_class(class_to_size(%u)) = %u", p->name, c, p->size_to_class(s));
        prev = s;
    }
    CHECKF(prev == p->max_size, "%s: largest class %zu != max_size %zu", p->name, prev, p->max_size);
    CHECKF(p->size_to_class(0) == 0, "%s: size 0 -> class %u", p->name, p->size_to_class(0));

    double worst = 0, worst_big = 0;
    size_t worst_at = 0, worst_big_at = 0;
    for (size_t s = 0; s <= p->max_size; s++) {
        unsigned c = p->size_to_class(s);
        if (c >= p->count) {
            CHECKF(0, "%s: size %zu -> class %u out of range", p->name, s, c);
            return;
        }
        size_t cs = p->class_to_size(c);
        if (cs < s || (c > 0 && p->class_to_size(c - 1) >= s)) {
            CHECKF(0, "%s: size %zu -> class %u (size %zu) is not the smallest fitting class", p->name, s, c, cs);
            return;
        }
        /* Waste relative to the block, for sizes a 16-byte minimum does not already dominate. */
        if (s > 16 && (double)(cs - s) / (double)cs > worst) {
            worst = (double)(cs - s) / (double)cs;
            worst_at = s;
        }
        if (s > 128 && (double)(cs - s) / (double)cs > worst_big) {
            worst_big = (double)(cs - s) / (double)cs;
            worst_big_at = s;
        }
    }
    printf("# %s: %u classes, max %zu, worst internal fragmentation %.1f%% (size %zu -> %zu), "
           "above 128 B %.1f%% (size %zu -> %zu)\n",
           p->name, p->count, p->max_size, worst * 100, worst_at, p->class_to_size(p->size_to_class(worst_at)),
           worst_big * 100, worst_big_at, p->class_to_size(p->size_to_class(worst_big_at)));
}

static void tc_policy(void)
{
    check_policy(&tc_desc);
    CHECK(sm_sizeclass_tc_class_to_size(7) == 128 && sm_sizeclass_tc_class_to_size(8) == 160);
    CHECK(sm_sizeclass_tc_class_to_size(11) == 256 && sm_sizeclass_tc_class_to_size(12) == 320);
    /* above 128 B neighbours are 12.5-25% apart */
    for (unsigned c = 8; c < sm_sizeclass_tc_count; c++) {
        size_t a = sm_sizeclass_tc_class_to_size(c - 1), b = sm_sizeclass_tc_class_to_size(c);
        CHECKF((b - a) * 8 >= b && (b - a) * 4 <= b, "tc: gap %zu -> %zu", a, b);
    }
}
static void tc8_policy(void)
{
    check_policy(&tc8_desc);
    /* up to 1 KiB the classes are tc's */
    for (unsigned c = 0; c < sm_sizeclass_tc8_fine_first; c++)
        CHECK(sm_sizeclass_tc8_class_to_size(c) == sm_sizeclass_tc_class_to_size(c));
    CHECK(sm_sizeclass_tc8_class_to_size(sm_sizeclass_tc8_fine_first - 1) == 1024);
    CHECK(sm_sizeclass_tc8_class_to_size(sm_sizeclass_tc8_fine_first) == 1152);
    /* above 1 KiB neighbours are 6.25-12.5% apart, and every power of two from 128 B is a class */
    for (unsigned c = sm_sizeclass_tc8_fine_first; c < sm_sizeclass_tc8_count; c++) {
        size_t a = sm_sizeclass_tc8_class_to_size(c - 1), b = sm_sizeclass_tc8_class_to_size(c);
        CHECKF((b - a) * 16 >= b && (b - a) * 8 <= b, "tc8: gap %zu -> %zu", a, b);
    }
    for (size_t s = 128; s <= sm_sizeclass_tc8_max_size; s <<= 1)
        CHECKF(sm_sizeclass_tc8_class_to_size(sm_sizeclass_tc8_size_to_class(s)) == s, "tc8: %zu is no class", s);
    /* the sizes the policy is for: sqlite's 8-byte prefix on 1 KiB, 4 KiB and its 4360 B pages */
    CHECK(sm_sizeclass_tc8_class_to_size(sm_sizeclass_tc8_size_to_class(1032)) == 1152);
    CHECK(sm_sizeclass_tc8_class_to_size(sm_sizeclass_tc8_size_to_class(4104)) == 4608);
    CHECK(sm_sizeclass_tc8_class_to_size(sm_sizeclass_tc8_size_to_class(4368)) == 4608);
    /* thread_cache stores classes in bytes */
    CHECK(sm_sizeclass_tc8_count <= 256);
}
static void tc5_policy(void)
{
    check_policy(&tc5_desc);
    /* tc's classes, and three more: 9/8 of 1, 2 and 4 KiB */
    unsigned extra = 0, t = 0;
    for (unsigned c = 0; c < sm_sizeclass_tc5_count; c++) {
        size_t s = sm_sizeclass_tc5_class_to_size(c);
        if (t < sm_sizeclass_tc_count && s == sm_sizeclass_tc_class_to_size(t))
            t++;
        else {
            CHECKF(s == 1152 || s == 2304 || s == 4608, "tc5: class %u of %zu is neither tc's nor one of the three", c, s);
            extra++;
        }
    }
    CHECKF(extra == 3 && t == sm_sizeclass_tc_count, "tc5: %u extra classes, %u of tc's", extra, t);
    /* every size goes to the smallest class that holds it */
    for (size_t s = 1; s <= 20000; s++) {
        unsigned c = sm_sizeclass_tc5_size_to_class(s);
        size_t got = sm_sizeclass_tc5_class_to_size(c);
        CHECKF(got >= s && (c == 0 || sm_sizeclass_tc5_class_to_size(c - 1) < s), "tc5: size %zu -> class %u of %zu", s, c, got);
        if (got < s)
            break;
    }
    /* the sizes it is for: an 8-byte prefix on 1 KiB and 4 KiB, sqlite's 4360 B pages */
    CHECK(sm_sizeclass_tc5_class_to_size(sm_sizeclass_tc5_size_to_class(1032)) == 1152);
    CHECK(sm_sizeclass_tc5_class_to_size(sm_sizeclass_tc5_size_to_class(2056)) == 2304);
    CHECK(sm_sizeclass_tc5_class_to_size(sm_sizeclass_tc5_size_to_class(4368)) == 4608);
    CHECK(sm_sizeclass_tc5_count <= 256);
}
static void log2b_policy(void)
{
    check_policy(&log2b_desc);
    for (unsigned c = 0; c < sm_sizeclass_log2b_count; c++)
        CHECK(sm_is_pow2(sm_sizeclass_log2b_class_to_size(c)));
}
static int is_prime(size_t n)
{
    if (n < 2)
        return 0;
    for (size_t d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}
static void prime_policy(void)
{
    check_policy(&prime_desc);
    /* the documented rule regenerates the table */
    size_t q = 3;
    for (unsigned c = 3; c + 1 < sm_sizeclass_prime_count; c++) {
        size_t lo = (9 * q + 7) / 8 > q + 1 ? (9 * q + 7) / 8 : q + 1;
        while (!is_prime(lo))
            lo++;
        CHECKF(sm_sizeclass_prime_class_to_size(c) == lo * 16, "prime: class %u is %zu, rule gives %zu", c,
               sm_sizeclass_prime_class_to_size(c), lo * 16);
        q = lo;
    }
    CHECK(sm_sizeclass_prime_class_to_size(sm_sizeclass_prime_count - 1) == 65536);
}
static void interval_three(void)
{
    check_policy(&tri_desc);
    CHECK(sm_sizeclass_tri_count == 8 + 14 + 14);
    CHECK(sm_sizeclass_tri_class_to_size(8) == 192 && sm_sizeclass_tri_size_to_class(1025) == 22);
}
static void interval_one(void)
{
    check_policy(&one_desc);
    CHECK(sm_sizeclass_one_count == 16 && sm_sizeclass_one_class_to_size(0) == 256);
}
static void interval_eight(void)
{
    check_policy(&eight_desc);
    CHECK(sm_sizeclass_eight_count == 4 + 6 + 4 + 4 + 12 + 4 + 14 + 15);
}

int main(void)
{
    check_begin("sizeclass");
    RUN_CASE(tc_policy);
    RUN_CASE(tc8_policy);
    RUN_CASE(tc5_policy);
    RUN_CASE(log2b_policy);
    RUN_CASE(prime_policy);
    RUN_CASE(interval_three);
    RUN_CASE(interval_one);
    RUN_CASE(interval_eight);
    return check_end();
}
