/* custom_param: the user-defined request parameter of custom_socket (paper Table 2: "malloc(3)
 * with user-defined input parameters", the abstract socket type A), beside the prefixed API: a
 * 16-bit value (an arena id, a tag) that travels in the request context to the layer that uses it,
 * which reads it with sm_mctx_param() (core/mctx_param.h says where it lives and why).
 * Template, included right after custom_socket.h, select.h or malloc_socket.h in the same
 * composition file (it calls their request paths, so it shares their start-up, checks, fill and
 * zeroing, and the stack is created once). Exports (P = SM_PREFIX, or sm_ under malloc_socket):
 *   void *P_malloc_tagged(size_t size, uint16_t tag)
 *   void *P_calloc_tagged(size_t n, size_t size, uint16_t tag)
 *   void *P_aligned_alloc_tagged(size_t align, size_t size, uint16_t tag)   align a power of two
 *   void  P_free_tagged(void *p, uint16_t tag)       the free carries the tag too
 * Declarations for callers: SM_CUSTOM_PARAM_DECLARE(P), below. Failures as malloc(3): NULL and
 * errno ENOMEM (EINVAL for a bad alignment).
 * Tagged requests skip the top layer's hit path (a thread cache's lists hold blocks of any tag) and
 * enter the stack's miss path, whose context carries the tag down. Other calls carry none: a tagged
 * block may be freed with P_free (the layer then sees no tag) and P_realloc moves it untagged —
 * libc_api.h's realloc takes no flags yet. Needs: the socket's internals sm_socket_alloc_miss and
 * sm_socket_free_miss (sockets/libc_api.h).
 * @model: name=custom_param kind=socket flag mt
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_PREFIX=t_ SM_NEXT=fake_next <sunmao/sockets/custom_socket.h>
 * @check-next: fake */
#include <stdint.h>
#include "../core/bits.h"
#include "../core/compiler.h"
#include "../core/errnum.h"
#include "../core/mctx_param.h"
#include "custom_param_api.h"

#ifndef SM_SOCKET_MAX_REQUEST
#error "custom_param: include custom_socket.h (or select.h, malloc_socket.h) first: it extends that socket"
#endif
#ifdef SM_PREFIX
#define SM_PARAM_API(name) SM_CAT(SM_PREFIX, name)
SM_CUSTOM_PARAM_DECLARE(SM_PREFIX)
#else
#define SM_PARAM_API(name) SM_CAT(sm_, name)
SM_CUSTOM_PARAM_DECLARE(sm_)
#endif

SM_EXPORT void *SM_PARAM_API(malloc_tagged)(size_t size, uint16_t tag)
{
    return sm_socket_alloc_miss(size, SM_MIN_ALIGN, sm_param_flags(tag));
}

SM_EXPORT void *SM_PARAM_API(calloc_tagged)(size_t n, size_t size, uint16_t tag)
{
    size_t total;
    if (sm_unlikely(__builtin_mul_overflow(n, size, &total)))
        total = SIZE_MAX; /* the stack's checks refuse it with ENOMEM */
    return sm_socket_alloc_miss(total, SM_MIN_ALIGN, SM_F_ZERO | sm_param_flags(tag));
}

SM_EXPORT void *SM_PARAM_API(aligned_alloc_tagged)(size_t align, size_t size, uint16_t tag)
{
    if (!sm_is_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    return sm_socket_alloc_miss(size, align, sm_param_flags(tag));
}

SM_EXPORT void SM_PARAM_API(free_tagged)(void *ptr, uint16_t tag)
{
    if (ptr)
        sm_socket_free_miss(ptr, 0, sm_param_flags(tag), SM_OWNER_UNKNOWN, NULL);
}

#undef SM_PARAM_API
