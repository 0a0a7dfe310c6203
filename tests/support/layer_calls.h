/* The calls a socket would make on one layer instance, for unit tests that drive a layer directly:
 *   LAYER_CALLS(p, L)          static void *p_malloc(size_t n), static void p_free(void *block)
 *   CACHE_BYTES(p, L)          static size_t p_cached_bytes(void): the bytes on the calling
 *                              thread's lists of thread_cache instance L (count x class size) */
#ifndef SUNMAO_TEST_LAYER_CALLS_H
#define SUNMAO_TEST_LAYER_CALLS_H

#include <sunmao/core/compiler.h>
#include <sunmao/core/mctx.h>

#define LAYER_CALLS(p, L)                                                                          \
    SM_UNUSED static void *p##_malloc(size_t n)                                                    \
    {                                                                                              \
        sm_mctx_t c_ = sm_mctx_alloc(n ? n : 1, 0, 0);                                             \
        return L##_alloc(&c_);                                                                     \
    }                                                                                              \
    SM_UNUSED static void p##_free(void *block)                                                    \
    {                                                                                              \
        sm_mctx_t c_ = sm_mctx_block(block, 0, 0);                                                 \
        L##_free(&c_);                                                                             \
    }

#define CACHE_BYTES(p, L)                                                                          \
    SM_UNUSED static size_t p##_cached_bytes(void)                                                 \
    {                                                                                              \
        size_t bytes_ = 0;                                                                         \
        for (unsigned cls_ = 0; cls_ < L##_class_count; cls_++)                                    \
            bytes_ += (size_t)L##_tls->list[cls_].count * L##_obj.class_bytes[cls_];               \
        return bytes_;                                                                             \
    }

#endif
