/* malloc_socket (paper Table 2): the composition becomes the process's malloc. Exports the whole
 * libc allocation API under its standard names (libc_api.h) and the entry points the C++ operator
 * shim (src/cxx/new_delete.cc) calls, so `LD_PRELOAD=lib<name>.so` or linking -l<name> replaces
 * malloc, free, ..., operator new and delete together, and glibc's internal names for them
 * (__libc_malloc ..., cfree) with them.
 * Template: define SM_NEXT (top layer) and SM_ERR, then include.
 * @model: name=malloc_socket kind=socket flag mt slot err */
#define SM_API(name) name
#include "libc_api.h"

/* glibc's own names for its allocator, which it exports beside the standard ones: code that wants
 * "the real malloc" under a hooking library calls __libc_malloc and hands the block to free (and the
 * reverse), and binaries built before glibc 2.26 call cfree. Left to glibc, each such block crosses
 * between two allocators: a __libc_malloc block given to free was reported and leaked, a malloc
 * block given to __libc_free aborted in glibc. Bound to this composition, like the names above,
 * unless the composition itself wraps another malloc (malloc_heap): then glibc's __libc_malloc is
 * what it, or the malloc it wraps, calls. */
#ifndef SM_COMPOSITION_WRAPS_MALLOC
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
/* glibc declares its names with caller hints (malloc, alloc_size, leaf) that an alias lacks; it is
 * the same function, so nothing is lost */
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
SM_EXPORT void *__libc_malloc(size_t size) __attribute__((alias("malloc")));
SM_EXPORT void __libc_free(void *ptr) __attribute__((alias("free")));
SM_EXPORT void cfree(void *ptr) __attribute__((alias("free")));
SM_EXPORT void *__libc_calloc(size_t n, size_t size) __attribute__((alias("calloc")));
SM_EXPORT void *__libc_realloc(void *ptr, size_t size) __attribute__((alias("realloc")));
SM_EXPORT void *__libc_memalign(size_t align, size_t size) __attribute__((alias("memalign")));
SM_EXPORT void *__libc_valloc(size_t size) __attribute__((alias("valloc")));
SM_EXPORT void *__libc_pvalloc(size_t size) __attribute__((alias("pvalloc")));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

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
