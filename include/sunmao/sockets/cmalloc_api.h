/* Declarations of an allocator built with cmalloc_socket (paper Table 2: malloc(3) with a core ID),
 * for the programs that call it: SM_CMALLOC_API_DECLARE(sm_part_) declares sm_part_cmalloc, ...
 * and SM_CPU_ANY, the partition argument that names none. The contract: sockets/cmalloc_socket.h. */
#ifndef SUNMAO_SOCKETS_CMALLOC_API_H
#define SUNMAO_SOCKETS_CMALLOC_API_H

#include <stddef.h>
#include "../core/compiler.h"

/* "No partition": the request is served like malloc's, for the CPU the calling thread runs on. */
#define SM_CPU_ANY (-1)

#define SM_CMALLOC_API_DECLARE(P)                                                          \
    void *SM_CAT(P, cmalloc)(size_t size, int cpu);                                        \
    void *SM_CAT(P, ccalloc)(size_t n, size_t size, int cpu);                              \
    void *SM_CAT(P, crealloc)(void *ptr, size_t size, int cpu);                            \
    void *SM_CAT(P, caligned_alloc)(size_t align, size_t size, int cpu);                   \
    void SM_CAT(P, cfree)(void *ptr);                                                      \
    void SM_CAT(P, cfree_cpu)(void *ptr, int cpu);                                         \
    size_t SM_CAT(P, cmalloc_usable_size)(void *ptr);                                      \
    int SM_CAT(P, cmalloc_trim)(void);

#endif
