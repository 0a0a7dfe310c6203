/* A counting "next allocator" for tests/bench/wcetstat.sh: the C library's malloc under the usual
 * names, counting the calls that reach it. Preloaded after libwcetstat.so
 * (LD_PRELOAD=libwcetstat.so:wcetstat_next.so), it proves that libwcetstat.so forwards to the
 * allocator loaded after it (dlsym RTLD_NEXT) and not to glibc's __libc_malloc directly. At exit it
 * writes "next_mallocs N\nnext_frees N\n" to the file WCETSTAT_NEXT_OUT names.
 * Built by the test script: cc -shared -fPIC tests/bench/wcetstat_next.c -o ... */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__libc_malloc(size_t size);
void __libc_free(void *ptr);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *ptr, size_t size);
void *__libc_memalign(size_t align, size_t size);

static unsigned long mallocs, frees;

void *malloc(size_t size)
{
    __atomic_add_fetch(&mallocs, 1, __ATOMIC_RELAXED);
    return __libc_malloc(size);
}

void free(void *ptr)
{
    if (ptr)
        __atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
    __libc_free(ptr);
}

void *calloc(size_t n, size_t size)
{
    __atomic_add_fetch(&mallocs, 1, __ATOMIC_RELAXED);
    return __libc_calloc(n, size);
}

void *realloc(void *ptr, size_t size)
{
    __atomic_add_fetch(&mallocs, 1, __ATOMIC_RELAXED);
    return __libc_realloc(ptr, size);
}

void *memalign(size_t align, size_t size)
{
    __atomic_add_fetch(&mallocs, 1, __ATOMIC_RELAXED);
    return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size) { return memalign(align, size); }

int posix_memalign(void **out, size_t align, size_t size)
{
    void *p = memalign(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

__attribute__((destructor)) static void next_report(void)
{
    const char *path = getenv("WCETSTAT_NEXT_OUT");
    if (!path || !*path)
        return;
    char buf[128];
    int n = snprintf(buf, sizeof buf, "next_mallocs %lu\nnext_frees %lu\n",
                     __atomic_load_n(&mallocs, __ATOMIC_RELAXED), __atomic_load_n(&frees, __ATOMIC_RELAXED));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || n <= 0)
        return;
    if (write(fd, buf, (size_t)n) != n) {
        /* the test notices the missing counts */
    }
    close(fd);
}
