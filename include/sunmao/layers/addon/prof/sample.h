/* prof/sample.h: when the next sample falls. Part of layers/addon/prof.h (included by it only).
 *
 * Each thread counts down the bytes to its next sample. The countdowns are exponential with mean R
 * (the continuous form of a geometric draw: each byte is sampled with probability 1/R, so a block
 * of s bytes is caught with probability 1 - exp(-s/R), the correction jeprof and pprof undo).
 * -ln(u) without libm: u = m 2^e, ln m from a 33-entry table, interpolated (error < 2e-4, far
 * below the sampling noise). Runs once per sample, never on the hit path. *
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sync/mutex.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/addon/thread_cache.h> SM_LAYER=p SM_NEXT=t SM_SYNC=mutex SM_ERR=warn
 * @check-next: fake */
#ifndef SM_PROF_PARTS
#include "../prof.h"
#else

static const double SM_FN(ln_table)[33] = {
    0.000000000, 0.030771659, 0.060624622, 0.089612159, 0.117783036, 0.145182010, 0.171850257,
    0.197825743, 0.223143551, 0.247836164, 0.271933715, 0.295464213, 0.318453731, 0.340926587,
    0.362905494, 0.384411699, 0.405465108, 0.426084395, 0.446287103, 0.466089730, 0.485507816,
    0.504556011, 0.523248144, 0.541597282, 0.559615788, 0.577315365, 0.594707108, 0.611801541,
    0.628608659, 0.645137961, 0.661398482, 0.677398824, 0.693147181,
};
#define SM_PROF_LN2 0.693147180559945

/* xorshift64*: the thread's stream, seeded from the process secret and the thread's own address. */
SM_INLINE uint64_t SM_FN(random)(void)
{
    uint64_t x = SM_FN(tls).rng;
    if (sm_unlikely(x == 0))
        x = (sm_secret() ^ (uintptr_t)&SM_FN(tls) ^ sm_plat_now_ns()) | 1;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    SM_FN(tls).rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* -ln(x / 2^53) for x in [1, 2^53]. */
SM_INLINE double SM_FN(neg_log)(uint64_t x)
{
    int e = 63 - __builtin_clzll(x);
    double f = ((double)x / (double)(1ull << e) - 1.0) * 32.0;
    unsigned i = (unsigned)f;
    if (i > 31)
        i = 31;
    double lnm = SM_FN(ln_table)[i] + (SM_FN(ln_table)[i + 1] - SM_FN(ln_table)[i]) * (f - (double)i);
    return (double)(53 - e) * SM_PROF_LN2 - lnm;
}

/* Bytes to the next sample, mean 2^lg. */
SM_INLINE int64_t SM_FN(draw)(unsigned lg)
{
    double w = SM_FN(neg_log)((SM_FN(random)() >> 11) + 1) * (double)(1ull << lg);
    return w >= 9e18 ? INT64_MAX : (int64_t)w;
}

/* exp(-x), x >= 0, and 1 - exp(-x) without cancellation near 0: for the leak summary's correction. */
SM_INLINE double SM_FN(exp_neg)(double x)
{
    if (x > 700)
        return 0;
    unsigned k = 0;
    while (x > 0.0625)
        x /= 2, k++;
    double t = 1 - x * (1 - x / 2 * (1 - x / 3 * (1 - x / 4 * (1 - x / 5))));
    while (k--)
        t *= t;
    return t;
}
SM_INLINE double SM_FN(one_minus_exp_neg)(double x)
{
    if (x < 0.0625)
        return x * (1 - x / 2 * (1 - x / 3 * (1 - x / 4 * (1 - x / 5))));
    return 1 - SM_FN(exp_neg)(x);
}

#endif /* SM_PROF_PARTS */
