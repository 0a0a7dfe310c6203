/* Compiler attributes and token-pasting helpers shared by every part of sunmao.
 * Framework core: includes nothing from sunmao. */
#ifndef SUNMAO_CORE_COMPILER_H
#define SUNMAO_CORE_COMPILER_H

/* Everything on a request path is forced inline: a composed allocator must compile to the
 * code a hand-written one would, whatever the optimiser's size heuristics think.
 * SM_HOT marks the hit paths (a thread cache's pop and push, the page-map lookup a free makes, the
 * socket's entry points): forced inline always. SM_INLINE is everything else a layer offers; an
 * instance that defines SM_FORCE_INLINE 0 before its first include leaves those to the compiler.
 * Why: forced, each slow path gets its own copy of every layer below it (the free path of slab,
 * buddy, TLSF, decay cache and OS layer inside each of the thread cache's miss, release and exit
 * paths): libsunmao's text was 52 KiB, all of it resident in every process that loads it (the
 * kernel maps a library's pages 64 KiB around each fault); left to gcc, 32 KiB, the hit paths
 * and the malloc+free pair unchanged. */
#ifndef SM_FORCE_INLINE
#define SM_FORCE_INLINE 1
#endif
#define SM_HOT static inline __attribute__((always_inline))
#if SM_FORCE_INLINE
#define SM_INLINE SM_HOT
#else
#define SM_INLINE static inline
#endif
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
