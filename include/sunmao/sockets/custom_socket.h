/* custom_socket (paper Table 2): the same API as malloc_socket under a prefix, e.g.
 * sm_tlsf_malloc, so a program can use a sunmao allocator beside the system malloc — under
 * ASan/UBSan, in a library that must not interpose malloc, or several allocators in one process.
 * Declarations for users: sockets/custom_api.h.
 * Template: define SM_NEXT (top layer), SM_ERR and SM_PREFIX (e.g. sm_tlsf_), then include.
 * @model: name=custom_socket kind=socket flag mt slot err */
#ifndef SM_PREFIX
#error "custom_socket: define SM_PREFIX, the prefix of the exported names (e.g. sm_tlsf_)"
#endif
#define SM_API(name) SM_CAT(SM_PREFIX, name)
#include "libc_api.h"

#undef SM_API
#undef SM_NEXT
#undef SM_ERR
