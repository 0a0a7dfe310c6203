/* malloc_socket (paper Table 2): the composition becomes the process's malloc. Exports the whole
 * libc allocation API under its standard names (libc_api.h) and the entry points the C++ operator
 * shim (src/cxx/new_delete.cc) calls, so `LD_PRELOAD=lib<name>.so` or linking -l<name> replaces
 * malloc, free, ..., operator new and delete together.
 * Template: define SM_NEXT (top layer) and SM_ERR, then include.
 * @model: name=malloc_socket kind=socket flag mt slot err */
#define SM_API(name) name
#include "libc_api.h"

/* For the C++ shim, hidden so the shim always pairs with this library's own allocator. */
__attribute__((visibility("hidden"))) void *sm_cxx_alloc(size_t size, size_t align)
{
    return sm_socket_alloc(size, align, 0);
}
__attribute__((visibility("hidden"))) void sm_cxx_free(void *ptr, size_t size)
{
    sm_socket_free(ptr, size, size ? SM_F_SIZED : 0);
}

#undef SM_API
#undef SM_NEXT
#undef SM_ERR
