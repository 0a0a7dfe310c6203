/* Compiler attributes and token-pasting helpers shared by every part of sunmao.
 * Framework core: includes nothing from sunmao. */
#ifndef SUNMAO_CORE_COMPILER_H
#define SUNMAO_CORE_COMPILER_H

/* Everything on a request path is forced inline: a composed allocator must compile to the
 * code a hand-written one would, whatever the optimiser's size heuristics think. */
#define SM_INLINE   static inline __attribute__((always_inline))
/* Rarely taken paths are kept out of line so the hot path stays small. */
#define SM_SLOWPATH static __attribute__((noinline, cold))
#define SM_UNUSED   __attribute__((unused))
#define SM_EXPORT   __attribute__((visibility("default")))

#define sm_likely(x)   __builtin_expect(!!(x), 1)
#define sm_unlikely(x) __builtin_expect(!!(x), 0)

#define SM_CAT_(a, b)       a##b
#define SM_CAT(a, b)        SM_CAT_(a, b)
#define SM_CAT3(a, b, c)    SM_CAT(SM_CAT(a, b), c)
#define SM_CAT4(a, b, c, d) SM_CAT(SM_CAT3(a, b, c), d)
#define SM_STR_(x)          #x
#define SM_STR(x)           SM_STR_(x)

#define SM_CACHELINE 64
#define SM_CACHE_ALIGNED __attribute__((aligned(SM_CACHELINE)))

#endif
