/* Declarations of an allocator built with kernel_socket (paper Table 2: the kernel's allocation
 * interface), for the code that calls it: the GFP-like request flags and
 * SM_KERNEL_API_DECLARE(sm_) declaring sm_kmalloc, ... The contract: sockets/kernel_socket.h. */
#ifndef SUNMAO_SOCKETS_KERNEL_API_H
#define SUNMAO_SOCKETS_KERNEL_API_H

#include <stddef.h>
#include "../core/compiler.h"

/* Request flags: a kernel's gfp_t, reduced to what this socket does. A bit not in SM_GFP_VALID is a
 * caller's bug (a Linux flag passed through unchanged, say) and the request is refused. */
enum {
    SM_GFP_KERNEL = 0u,      /* the ordinary request */
    SM_GFP_ZERO = 1u << 0,   /* the block is zero-filled (kzalloc) */
    SM_GFP_NOWARN = 1u << 1, /* a failure writes no diagnostic line */
    SM_GFP_VALID = SM_GFP_ZERO | SM_GFP_NOWARN,
};

/* The largest order alloc_pages serves: 2^10 pages, 4 MiB of 4 KiB pages (Linux's default limit). */
#define SM_KMAX_ORDER 10u

#define SM_KERNEL_API_DECLARE(P)                                                            \
    void *SM_CAT(P, kmalloc)(size_t size, unsigned flags);                                  \
    void *SM_CAT(P, kzalloc)(size_t size, unsigned flags);                                  \
    void *SM_CAT(P, kcalloc)(size_t n, size_t size, unsigned flags);                        \
    void *SM_CAT(P, krealloc)(void *ptr, size_t size, unsigned flags);                      \
    void SM_CAT(P, kfree)(const void *ptr);                                                 \
    size_t SM_CAT(P, ksize)(const void *ptr);                                               \
    void *SM_CAT(P, alloc_pages)(unsigned flags, unsigned order);                           \
    void SM_CAT(P, free_pages)(void *addr, unsigned order);

#endif
