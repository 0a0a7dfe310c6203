/* Declarations of the tagged API that sockets/custom_param.h adds to a prefixed allocator, for the
 * programs that call it: SM_CUSTOM_PARAM_DECLARE(sm_x_) declares sm_x_malloc_tagged, ... */
#ifndef SUNMAO_SOCKETS_CUSTOM_PARAM_API_H
#define SUNMAO_SOCKETS_CUSTOM_PARAM_API_H

#include <stddef.h>
#include <stdint.h>
#include "../core/compiler.h"

#define SM_CUSTOM_PARAM_DECLARE(P)                                                         \
    void *SM_CAT(P, malloc_tagged)(size_t size, uint16_t tag);                             \
    void *SM_CAT(P, calloc_tagged)(size_t n, size_t size, uint16_t tag);                   \
    void *SM_CAT(P, aligned_alloc_tagged)(size_t align, size_t size, uint16_t tag);        \
    void SM_CAT(P, free_tagged)(void *ptr, uint16_t tag);

#endif
