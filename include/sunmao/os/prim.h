/* Linux primitives under every OS layer: the only place sunmao talks to the kernel for memory.
 * Each returns NULL / -1 with errno set on failure and never allocates. Framework OS support. */
#ifndef SUNMAO_OS_PRIM_H
#define SUNMAO_OS_PRIM_H

#if !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#error "os/prim.h needs Linux extensions (mremap, MAP_ANONYMOUS): compile with -D_GNU_SOURCE"
#endif
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include "../core/bits.h"
#include "../core/compiler.h"

/* The page size is read from the kernel at run time (4 KiB, 16 KiB and 64 KiB kernels exist). */
static inline size_t sm_os_page_size(void)
{
    static size_t page; /* racing initialisers store the same value */
    size_t p = __atomic_load_n(&page, __ATOMIC_RELAXED);
    if (sm_unlikely(p == 0)) {
        p = (size_t)getauxval(AT_PAGESZ);
        if (p == 0 || !sm_is_pow2(p))
            p = 4096;
        __atomic_store_n(&page, p, __ATOMIC_RELAXED);
    }
    return p;
}

/* Fresh zero-filled pages, or NULL with errno = ENOMEM. size is rounded up to pages. */
static inline void *sm_os_map(size_t size)
{
    if (size == 0 || size > SIZE_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = mmap(NULL, sm_align_up(size, sm_os_page_size()), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

static inline int sm_os_unmap(void *p, size_t size)
{
    return munmap(p, sm_align_up(size, sm_os_page_size()));
}

/* Pages aligned to `align` (a power of two): over-map, then trim both ends. */
static inline void *sm_os_map_aligned(size_t size, size_t align)
{
    size_t page = sm_os_page_size();
    size = sm_align_up(size, page);
    if (align <= page)
        return sm_os_map(size);
    if (size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = (char *)sm_os_map(size + align);
    if (!raw)
        return NULL;
    char *p = (char *)sm_align_up((uintptr_t)raw, align);
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)((raw + size + align) - (p + size));
    if (tail)
        munmap(p + size, tail);
    return p;
}

/* Grow or shrink a mapping without moving it; -1 (errno set) when the pages after it are taken. */
static inline int sm_os_remap_inplace(void *p, size_t old_size, size_t new_size)
{
    return mremap(p, old_size, new_size, 0) == MAP_FAILED ? -1 : 0;
}

/* Give the physical pages back but keep the range mapped. MADV_DONTNEED drops RSS at once (what
 * monitoring reads); MADV_FREE lets the kernel reclaim lazily and is cheaper to reuse. */
static inline int sm_os_purge(void *p, size_t size, bool lazy)
{
#ifdef MADV_FREE
    if (lazy && madvise(p, size, MADV_FREE) == 0)
        return 0;
#else
    (void)lazy;
#endif
    return madvise(p, size, MADV_DONTNEED);
}

/* Ask for transparent huge pages on a range; a hint, failure is harmless. */
static inline void sm_os_hint_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

/* Milliseconds of CLOCK_MONOTONIC at the kernel's tick resolution (vDSO: no system call). */
static inline uint64_t sm_os_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Sleep while *word == value, at most timeout_ms (UINT64_MAX: no limit); returns early on a wake,
 * a signal, or when *word already differs. */
static inline void sm_os_wait_while(int *word, int value, uint64_t timeout_ms)
{
    struct timespec t = { (time_t)(timeout_ms / 1000u), (long)(timeout_ms % 1000u) * 1000000L };
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, timeout_ms == UINT64_MAX ? NULL : &t, NULL, 0);
}

/* Wake every thread sleeping in sm_os_wait_while on word. */
static inline void sm_os_wake(int *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0); }

/* Sleep for ms milliseconds (a signal may cut it short). */
static inline void sm_os_sleep_ms(uint64_t ms)
{
    struct timespec t = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };
    nanosleep(&t, NULL);
}

/* Move the program break; returns the old break or NULL with errno = ENOMEM. */
static inline void *sm_os_sbrk(intptr_t incr)
{
    void *p = sbrk(incr);
    if (p == (void *)-1) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

static inline void sm_os_write_stderr(const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

#endif
