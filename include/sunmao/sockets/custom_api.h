/* Declarations of a prefixed allocator built with custom_socket (paper Table 2), for programs that
 * link libsm_<name>.a. Usage:  SM_CUSTOM_API_DECLARE(sm_tlsf_)  declares sm_tlsf_malloc, ... */
#ifndef SUNMAO_SOCKETS_CUSTOM_API_H
#define SUNMAO_SOCKETS_CUSTOM_API_H

#include <stddef.h>
#include "../core/compiler.h"

#define SM_CUSTOM_API_DECLARE(P)                                                          \
    void *SM_CAT(P, malloc)(size_t size);                                                 \
    void SM_CAT(P, free)(void *ptr);                                                      \
    void *SM_CAT(P, calloc)(size_t n, size_t size);                                       \
    void *SM_CAT(P, realloc)(void *ptr, size_t size);                                     \
    void *SM_CAT(P, reallocarray)(void *ptr, size_t n, size_t size);                      \
    int SM_CAT(P, posix_memalign)(void **out, size_t align, size_t size);                 \
    void *SM_CAT(P, aligned_alloc)(size_t align, size_t size);                            \
    void *SM_CAT(P, memalign)(size_t align, size_t size);                                 \
    void *SM_CAT(P, valloc)(size_t size);                                                 \
    void *SM_CAT(P, pvalloc)(size_t size);                                                \
    size_t SM_CAT(P, malloc_usable_size)(void *ptr);                                      \
    void SM_CAT(P, free_sized)(void *ptr, size_t size);                                   \
    void SM_CAT(P, free_aligned_sized)(void *ptr, size_t align, size_t size);             \
    int SM_CAT(P, malloc_trim)(size_t pad);

#endif
