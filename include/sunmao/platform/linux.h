/* The Linux platform (platform/platform.h states the contract): the only file of sunmao that calls
 * the kernel or the C library's thread and process services. Each function returns NULL / -1 / false
 * with errno set on failure and never allocates. Framework platform. */
#ifndef SUNMAO_PLATFORM_LINUX_H
#define SUNMAO_PLATFORM_LINUX_H

/* What it calls of the C library is POSIX and the Linux interfaces glibc declares by default
 * (_DEFAULT_SOURCE: what gcc and clang give unless a strict -std=c11/c17 is asked for), plus four
 * GNU extensions declared only with _GNU_SOURCE: mremap with its flags, sched_getcpu,
 * pthread_setname_np and secure_getenv. Code built against these headers needs no feature macro,
 * whatever it included before them: when the system headers did not declare those four, they are
 * declared below (the flags with the kernel's values). This file defines no feature macro for the
 * code that includes it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <link.h> /* ElfW */
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>
#include <linux/futex.h>
#if !defined(MAP_ANONYMOUS) || !defined(SA_SIGINFO) || !defined(CLOCK_MONOTONIC_COARSE)
#error "sunmao needs the C library's POSIX and Linux interfaces, which strict ISO C mode (-std=c11, -std=c17) hides: build with -std=gnu11 or later (the compilers' default), or add -D_DEFAULT_SOURCE (or -D_GNU_SOURCE) to the compiler's flags"
#endif
#define SM_PLAT_MREMAP_DONTUNMAP 4 /* MREMAP_DONTUNMAP: Linux 5.7's value; older headers lack it */
#ifndef MREMAP_MAYMOVE /* no _GNU_SOURCE when the first system header was read: declare them ourselves */
#define MREMAP_MAYMOVE 1
#define MREMAP_FIXED   2
extern void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...);
extern int sched_getcpu(void);
extern int pthread_setname_np(pthread_t thread, const char *name);
extern char *secure_getenv(const char *name);
#endif
#include "../core/bits.h"
#include "../core/compiler.h"

/* Failure injection, for test builds only (-DSM_PLAT_FAULTS, tests/build/faults.sh): each memory
 * call asks sm_plat_fault_due, which the test program defines, and fails as the kernel would when
 * it answers true. A normal build compiles the check away. */
enum sm_plat_op { SM_PLAT_OP_MAP, SM_PLAT_OP_REMAP, SM_PLAT_OP_PURGE, SM_PLAT_OP_SBRK, SM_PLAT_OPS };
#ifdef SM_PLAT_FAULTS
extern bool sm_plat_fault_due(int op); /* op: an enum sm_plat_op */
#define SM_PLAT_FAULT(op) sm_unlikely(sm_plat_fault_due(op))
#else
#define SM_PLAT_FAULT(op) 0
#endif

/* The page size is read from the kernel at run time (4 KiB, 16 KiB and 64 KiB kernels exist). */
static inline size_t sm_plat_page_size(void)
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
static inline void *sm_plat_map(size_t size)
{
    if (size == 0 || size > SIZE_MAX / 2 || SM_PLAT_FAULT(SM_PLAT_OP_MAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = mmap(NULL, sm_align_up(size, sm_plat_page_size()), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

static inline int sm_plat_unmap(void *p, size_t size)
{
    return munmap(p, sm_align_up(size, sm_plat_page_size()));
}

/* Pages aligned to `align` (a power of two): over-map, then trim both ends. */
static inline void *sm_plat_map_aligned(size_t size, size_t align)
{
    size_t page = sm_plat_page_size();
    size = sm_align_up(size, page);
    if (align <= page)
        return sm_plat_map(size);
    if (size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = (char *)sm_plat_map(size + align);
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
static inline int sm_plat_remap_inplace(void *p, size_t old_size, size_t new_size)
{
    if (SM_PLAT_FAULT(SM_PLAT_OP_REMAP)) {
        errno = ENOMEM;
        return -1;
    }
    if (mremap(p, old_size, new_size, 0) != MAP_FAILED)
        return 0;
#ifdef MAP_FIXED_NOREPLACE
    /* EFAULT: the range spans two mappings (a layer joined blocks the kernel mapped apart), which
     * mremap never grows; the pages after it may still be free, and a mapping placed there only if
     * nothing is (a kernel before 4.17 takes the address as a hint: anything else is undone). */
    if (errno == EFAULT && new_size > old_size) {
        char *want = (char *)p + old_size;
        void *q = mmap(want, new_size - old_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (q == want)
            return 0;
        if (q != MAP_FAILED)
            munmap(q, new_size - old_size);
        errno = ENOMEM;
    }
#endif
    return -1;
}

/* Moves [p, p + size), a range of one or more kernel mappings, onto [dest, dest + size), which the
 * caller has mapped, 2 MiB at a time: each piece moved where it lies in one mapping and copied where
 * it straddles two; then unmaps [p, p + size). Cannot fail once called (the pieces that do not move
 * are copied into pages the caller mapped). sm_plat_remap_to's way around mremap's refusal. */
static inline void sm_plat_move_pieces(void *p, size_t size, void *dest)
{
    const size_t piece = (size_t)2 << 20;
    for (size_t off = 0; off < size; off += piece) {
        size_t k = size - off < piece ? size - off : piece;
        char *from = (char *)p + off, *to = (char *)dest + off;
        if (mremap(from, k, k, MREMAP_MAYMOVE | MREMAP_FIXED, to) != to)
            memcpy(to, from, k);
    }
    munmap(p, size);
}

/* Move the mapping [p, p + old_size) onto [dest, dest + new_size), a range the caller has mapped
 * (it is replaced), carrying the pages, not copying them; -1 (errno set) leaves both as they were.
 * Before Linux 6.17, mremap refuses a range of several kernel mappings whole (EFAULT): decay_cache's
 * joins leave them, and so does a move itself (the moved pages and the fresh tail after them), so
 * a block moved once could only be copied on its next move. A same-size move of such a range then
 * goes by pieces (sm_plat_move_pieces). */
static inline int sm_plat_remap_to(void *p, size_t old_size, size_t new_size, void *dest)
{
    if (SM_PLAT_FAULT(SM_PLAT_OP_REMAP)) {
        errno = ENOMEM;
        return -1;
    }
    if (mremap(p, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, dest) == dest)
        return 0;
    if (errno != EFAULT || old_size != new_size)
        return -1;
    sm_plat_move_pieces(p, old_size, dest);
    return 0;
}

/* Moves the pages of [p, p + size), part of a larger mapping, onto [dest, dest + size), a range the
 * caller has mapped, and leaves [p, p + size) mapped and empty (it reads as zero): so the mapping
 * around it keeps no hole another thread's mmap could take (MREMAP_DONTUNMAP, Linux 5.7). -1
 * (errno set) leaves both as they were: an older kernel, or a range of several kernel mappings. */
static inline int sm_plat_move_out(void *p, size_t size, void *dest)
{
    if (SM_PLAT_FAULT(SM_PLAT_OP_REMAP)) {
        errno = ENOMEM;
        return -1;
    }
    return mremap(p, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | SM_PLAT_MREMAP_DONTUNMAP, dest) == dest ? 0 : -1;
}

/* Give the physical pages back but keep the range mapped. MADV_DONTNEED drops RSS at once (what
 * monitoring reads); MADV_FREE lets the kernel reclaim lazily and is cheaper to reuse. */
static inline int sm_plat_purge(void *p, size_t size, bool lazy)
{
    if (SM_PLAT_FAULT(SM_PLAT_OP_PURGE)) {
        errno = EAGAIN;
        return -1;
    }
#ifdef MADV_FREE
    if (lazy && madvise(p, size, MADV_FREE) == 0)
        return 0;
#else
    (void)lazy;
#endif
    return madvise(p, size, MADV_DONTNEED);
}

/* Ask for transparent huge pages on a range; a hint, failure is harmless. */
static inline void sm_plat_hint_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

/* The opposite hint: no transparent huge pages on a range (thp:never); failure is harmless. */
static inline void sm_plat_hint_nohuge(void *p, size_t size)
{
#ifdef MADV_NOHUGEPAGE
    (void)madvise(p, size, MADV_NOHUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

/* Make pages [p, p + n) readable and writable, or inaccessible (any access faults); p page-aligned,
 * n rounded up to pages. 0, or -1 with errno set (ENOMEM: the kernel's limit on mappings, since
 * each change in the middle of a mapping splits it). n = 0 changes nothing and answers whether the
 * platform can protect pages at all (the freestanding one cannot). */
static inline int sm_plat_protect(void *p, size_t n, bool accessible)
{
    return mprotect(p, sm_align_up(n, sm_plat_page_size()), accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* Give pages [p, p + n) a mapping of their own that the kernel never merges with its neighbours,
 * so that protecting a range between two such never splits or re-merges mappings: a guard pool's
 * guard pages, whose slots are protected and unprotected on every sampled request. A mapping flag
 * nothing else uses here (MADV_DONTDUMP: inaccessible pages have nothing to dump). 0, or -1 with
 * errno set: then protecting only costs more (docs/layers.md, guard). */
static inline int sm_plat_protect_apart(void *p, size_t n)
{
#ifdef MADV_DONTDUMP
    return madvise(p, sm_align_up(n, sm_plat_page_size()), MADV_DONTDUMP);
#else
    (void)p, (void)n;
    errno = EINVAL;
    return -1;
#endif
}

/* Milliseconds of CLOCK_MONOTONIC at the kernel's tick resolution (vDSO: no system call). */
static inline uint64_t sm_plat_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Nanoseconds of CLOCK_MONOTONIC, precise (vDSO: no system call); for calibrations, not hot paths. */
static inline uint64_t sm_plat_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The CPU's cycle counter (x86 TSC, aarch64 virtual counter), else monotonic nanoseconds: a few
 * nanoseconds, no system call, for timing single requests. */
static inline uint64_t sm_plat_cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return sm_plat_now_ns();
#endif
}

/* Runs fn when the process exits normally (exit, or a return from main); false if it cannot. */
static inline bool sm_plat_at_exit(void (*fn)(void)) { return atexit(fn) == 0; }

/* Sleep while *word == value, at most timeout_ms (UINT64_MAX: no limit); returns early on a wake,
 * a signal, or when *word already differs. */
static inline void sm_plat_wait_while(int *word, int value, uint64_t timeout_ms)
{
    struct timespec t = { (time_t)(timeout_ms / 1000u), (long)(timeout_ms % 1000u) * 1000000L };
    int saved = errno; /* a free() may wait here, and free must leave errno alone */
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, timeout_ms == UINT64_MAX ? NULL : &t, NULL, 0);
    errno = saved;
}

/* Wake up to n threads sleeping in sm_plat_wait_while on word. */
static inline void sm_plat_wake_some(int *word, int n)
{
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;
}
/* Wake every thread sleeping in sm_plat_wait_while on word. */
static inline void sm_plat_wake(int *word) { sm_plat_wake_some(word, 0x7fffffff); }

/* Sleep for ms milliseconds (a signal may cut it short). */
static inline void sm_plat_sleep_ms(uint64_t ms)
{
    struct timespec t = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };
    int saved = errno;
    syscall(SYS_nanosleep, &t, NULL); /* not nanosleep(): the futex calls' libc page, not one more */
    errno = saved;
}

/* Move the program break; returns the old break or NULL with errno = ENOMEM. */
static inline void *sm_plat_sbrk(intptr_t incr)
{
    void *p = incr && SM_PLAT_FAULT(SM_PLAT_OP_SBRK) ? (void *)-1 : sbrk(incr);
    if (p == (void *)-1) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

/* The calling thread, as a lock's owner (policies/sync/owner.h): its thread pointer, never 0, and
 * the same in a fork child, which is a copy of the forking thread. One register read where the
 * architecture has one (glibc keeps the thread's own address at %fs:0 on x86-64), else a call. */
static inline uintptr_t sm_plat_self(void)
{
    uintptr_t tp;
#if defined(__x86_64__)
    __asm__("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
    __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#else
    tp = (uintptr_t)pthread_self();
#endif
    return tp;
}

/* The CPU the calling thread runs on; 0 when the kernel cannot say. A hint: the thread may move at
 * once. Where glibc registered rseq for the thread (2.35 and later), the kernel's word in that area
 * (its cpu_id, inside any registered size), read here: sched_getcpu reads the same word, but from a
 * page of libc that a small program otherwise never maps (docs/default-allocator.md, tenth
 * session). Else sched_getcpu (the vDSO: no system call either). */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
static inline int sm_plat_cpu(void)
{
#if defined(__x86_64__) || defined(__aarch64__) /* sm_plat_self is the thread pointer there */
    if (&__rseq_offset && &__rseq_size && __rseq_size >= 8) {
        int32_t cpu = __atomic_load_n((const int32_t *)(sm_plat_self() + (uintptr_t)__rseq_offset + 4), __ATOMIC_RELAXED);
        if (cpu >= 0)
            return cpu;
    }
#endif
    int cpu = sched_getcpu();
    return cpu < 0 ? 0 : cpu;
}

/* Reads the first line of a sysfs file into buf (NUL-terminated, at most n - 1 bytes); the length,
 * 0 if it cannot be read. open/read: no allocation, safe before main. */
static inline size_t sm_plat_read_line(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, buf, n - 1);
    close(fd);
    size_t len = got > 0 ? (size_t)got : 0;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        len--;
    buf[len] = 0;
    return len;
}

/* Bytes of the unified level-2 cache of CPU cpu (the cache a thread's working set lives in; hybrid
 * CPUs give their core types different ones), from sysfs; 0 when the kernel does not say. Slow:
 * a few small file reads, for start-up tables only. */
static inline size_t sm_plat_cpu_cache_bytes(int cpu)
{
    char path[96], line[32];
    for (unsigned index = 0; index < 8; index++) {
        /* /sys/devices/system/cpu/cpu<cpu>/cache/index<index>/{level,type,size} */
        size_t n = 0;
        const char *head = "/sys/devices/system/cpu/cpu";
        while (*head)
            path[n++] = *head++;
        char digits[12];
        unsigned d = 0, v = (unsigned)cpu;
        do
            digits[d++] = (char)('0' + v % 10);
        while ((v /= 10) && d < sizeof digits);
        while (d)
            path[n++] = digits[--d];
        const char *mid = "/cache/index";
        while (*mid)
            path[n++] = *mid++;
        path[n++] = (char)('0' + index);
        path[n++] = '/';
        size_t stem = n;
        memcpy(path + stem, "level", 6);
        if (!sm_plat_read_line(path, line, sizeof line))
            return 0; /* no such index: no level-2 unified cache listed */
        if (strcmp(line, "2") != 0)
            continue;
        memcpy(path + stem, "type", 5);
        if (!sm_plat_read_line(path, line, sizeof line) || strcmp(line, "Unified") != 0)
            continue;
        memcpy(path + stem, "size", 5);
        if (!sm_plat_read_line(path, line, sizeof line))
            return 0;
        size_t bytes = 0, i = 0;
        for (; line[i] >= '0' && line[i] <= '9'; i++)
            bytes = bytes * 10 + (size_t)(line[i] - '0');
        return line[i] == 'K' ? bytes << 10 : line[i] == 'M' ? bytes << 20 : bytes;
    }
    return 0;
}

/* Give the CPU to another runnable thread. */
static inline void sm_plat_yield(void) { sched_yield(); }

/* End the process now, without running exit handlers (a fatal error policy). */
static inline _Noreturn void sm_plat_abort(void) { abort(); }

/* Fill buf with n <= 16 bytes of randomness the kernel gave the process at exec (AT_RANDOM); no
 * system call, no failure mode short of a kernel that gives none: false, buf unchanged. */
static inline bool sm_plat_entropy(void *buf, size_t n)
{
    const void *random = (const void *)getauxval(AT_RANDOM);
    if (!random || n > 16)
        return false;
    memcpy(buf, random, n);
    return true;
}

/* The value of environment variable name, or NULL; reads the environment, allocates nothing. */
static inline const char *sm_plat_getenv(const char *name) { return getenv(name); }
/* The same, but NULL in a setuid or setgid program (secure_getenv): for settings an unprivileged
 * user must not push into a privileged process (SUNMAO_CONF). */
static inline const char *sm_plat_secure_getenv(const char *name) { return secure_getenv(name); }
/* The target of symbolic link path, in buf (n bytes at most, no NUL added): its length, or -1
 * (no link there). The target is a name, never opened (/etc/sunmao.conf is read this way). */
static inline long sm_plat_readlink(const char *path, char *buf, size_t n) { return (long)readlink(path, buf, n); }

/* A blocking lock for slow paths (start-up, the mutex policy): sleeps when contended, works before
 * any constructor ran (statically initialised), re-created in a fork child with reinit. A futex
 * word of our own (0 free, 1 held, 2 held with sleepers), as glibc's default mutex is, without the
 * calls into the C library: its trylock's type dispatch alone reads a page of libc's read-only
 * data that a small program otherwise never maps (docs/default-allocator.md, the memory floor).
 * Under ThreadSanitizer it stays pthread's mutex, the lock TSan knows. */
#if defined(__SANITIZE_THREAD__)
#define SM_PLAT_LOCK_PTHREAD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SM_PLAT_LOCK_PTHREAD 1
#endif
#endif
#ifdef SM_PLAT_LOCK_PTHREAD
typedef pthread_mutex_t sm_plat_lock_t;
#define SM_PLAT_LOCK_INIT PTHREAD_MUTEX_INITIALIZER
static inline void sm_plat_lock(sm_plat_lock_t *l) { pthread_mutex_lock(l); }
static inline void sm_plat_unlock(sm_plat_lock_t *l) { pthread_mutex_unlock(l); }
static inline bool sm_plat_trylock(sm_plat_lock_t *l) { return pthread_mutex_trylock(l) == 0; }
static inline void sm_plat_lock_reinit(sm_plat_lock_t *l) { pthread_mutex_init(l, NULL); }
#else
typedef struct { int word; } sm_plat_lock_t;
#define SM_PLAT_LOCK_INIT { 0 }
static inline bool sm_plat_trylock(sm_plat_lock_t *l)
{
    int free_word = 0;
    return __atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}
/* Contended: mark the word "sleepers" and sleep until a swap finds it free (then it stays 2, so
 * the next unlock wakes one more thread than may be waiting: harmless, as in glibc). */
static __attribute__((noinline, cold, unused)) void sm_plat_lock_contended(sm_plat_lock_t *l)
{
    while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
        sm_plat_wait_while(&l->word, 2, UINT64_MAX);
}
static inline void sm_plat_lock(sm_plat_lock_t *l)
{
    if (!sm_plat_trylock(l))
        sm_plat_lock_contended(l);
}
static __attribute__((noinline, cold, unused)) void sm_plat_lock_wake(sm_plat_lock_t *l) { sm_plat_wake_some(&l->word, 1); }
static inline void sm_plat_unlock(sm_plat_lock_t *l)
{
    if (__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2)
        sm_plat_lock_wake(l);
}
static inline void sm_plat_lock_reinit(sm_plat_lock_t *l) { __atomic_store_n(&l->word, 0, __ATOMIC_RELAXED); }
#endif

/* The C library's spinlock (POSIX pthread_spin_*), for the posix_spin sync policy. POSIX gives no
 * static initialiser, and a lock in a layer's static object must work before any constructor ran:
 * SM_PLAT_SPIN_INIT is the value pthread_spin_init stores, which glibc keeps at 1 on x86 (lock is
 * `lock decl`, unlocked is 1) and at 0 elsewhere; tests/unit/policies.c compares the two. glibc
 * 2.36's lock spins on `pause` forever: it never yields the CPU (docs/sync.md). */
typedef pthread_spinlock_t sm_plat_spin_t;
#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__i386__))
#define SM_PLAT_SPIN_INIT 1
#else
#define SM_PLAT_SPIN_INIT 0
#endif
static inline void sm_plat_spin_lock(sm_plat_spin_t *l) { pthread_spin_lock(l); }
static inline void sm_plat_spin_unlock(sm_plat_spin_t *l) { pthread_spin_unlock(l); }
static inline bool sm_plat_spin_trylock(sm_plat_spin_t *l) { return pthread_spin_trylock(l) == 0; }
static inline void sm_plat_spin_reinit(sm_plat_spin_t *l) { pthread_spin_init(l, PTHREAD_PROCESS_PRIVATE); }

/* Run fn exactly once per process, whichever threads race to it; the others wait until it ran. */
typedef pthread_once_t sm_plat_once_t;
#define SM_PLAT_ONCE_INIT PTHREAD_ONCE_INIT
static inline void sm_plat_once(sm_plat_once_t *once, void (*fn)(void)) { pthread_once(once, fn); }

/* Thread exit hooks: a key whose destructor runs, with the thread's non-NULL value, when a thread
 * that set one exits, whoever created the thread. False when no key is left (the hook never runs). */
typedef pthread_key_t sm_plat_key_t;
static inline bool sm_plat_key_create(sm_plat_key_t *key, void (*on_exit)(void *value))
{
    return pthread_key_create(key, on_exit) == 0;
}
static inline void sm_plat_key_set(sm_plat_key_t key, void *value) { pthread_setspecific(key, value); }

/* Start spec->fn (argument NULL) on a detached thread named spec->name, with every signal blocked
 * (it never runs a handler) and a small stack; false when no thread can be made (a sandbox, a
 * thread limit). spec must outlive the start (a static at the caller). The thread names itself
 * with prctl: pthread_setname_np on another thread formats a /proc path with snprintf and writes
 * it, which maps libc's printf code and tables into a program that may never print (about 0.1 MiB
 * of its peak RSS; docs/default-allocator.md, tenth session). */
typedef struct sm_plat_thread {
    void *(*fn)(void *);
    const char *name; /* at most 15 characters shown */
} sm_plat_thread_t;
static void *sm_plat_spawned(void *spec)
{
    const sm_plat_thread_t *t = (const sm_plat_thread_t *)spec;
    syscall(SYS_prctl, PR_SET_NAME, (unsigned long)t->name, 0UL, 0UL, 0UL);
    return t->fn(NULL);
}
static inline bool sm_plat_spawn(const sm_plat_thread_t *spec)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits the mask */
    pthread_attr_t attr;
    pthread_t t;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, (size_t)128 << 10);
        rc = pthread_create(&t, &attr, sm_plat_spawned, (void *)spec);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc == 0;
}

/* Whether pc lies in the dynamic loader's code (ld.so, found by AT_BASE and its program headers,
 * read once; no lock, no call that could allocate). glibc frees from there while it holds locks
 * that pthread_create takes (the stack cache lock, when pthread_join frees a dead thread's TLS
 * vector): a thread must not be started from such a free. */
static inline bool sm_plat_in_loader(const void *pc)
{
    static uintptr_t lo, hi; /* [lo, hi): benign race, every thread computes the same range */
    if (__atomic_load_n(&hi, __ATOMIC_ACQUIRE) == 0) {
        uintptr_t base = (uintptr_t)getauxval(AT_BASE), end = 1; /* 1: looked, no loader */
        if (base) {
            const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
            const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
            for (unsigned i = 0; i < eh->e_phnum; i++)
                if (ph[i].p_type == PT_LOAD && base + ph[i].p_vaddr + ph[i].p_memsz > end)
                    end = base + ph[i].p_vaddr + ph[i].p_memsz;
        }
        __atomic_store_n(&lo, base, __ATOMIC_RELAXED);
        __atomic_store_n(&hi, end, __ATOMIC_RELEASE);
    }
    uintptr_t a = (uintptr_t)pc;
    return a && a >= __atomic_load_n(&lo, __ATOMIC_RELAXED) && a < hi; /* NULL: unknown (without a loader, [0, 1)) */
}

/* Spawning paused on this thread: a socket pauses it around the slow path of a request the
 * dynamic loader made (sm_plat_in_loader), which may hold a lock that pthread_create takes; a
 * policy that starts threads from a request (sync/rcl) asks sm_plat_spawn_paused first and tries
 * again later. A count, so that nested requests nest. initial-exec: no allocation to reach it. */
static __thread unsigned sm_plat_spawn_pauses __attribute__((tls_model("initial-exec"), unused));
static inline void sm_plat_pause_spawn(void) { sm_plat_spawn_pauses++; }
static inline void sm_plat_resume_spawn(void) { sm_plat_spawn_pauses--; }
static inline bool sm_plat_spawn_paused(void) { return sm_plat_spawn_pauses != 0; }

/* Hooks around fork(): prepare in the parent before it, parent / child after it. */
static inline void sm_plat_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    pthread_atfork(prepare, parent, child);
}

static inline void sm_plat_write_stderr(const char *s, size_t n)
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

/* The return addresses of the calling thread's stack, innermost first: up to n of them into pcs,
 * after leaving out the caller's own frame and `skip` more; how many. libgcc's unwinder, from the
 * tables every object has (.eh_frame), so code built without frame pointers is walked too; the
 * shared libraries link it statically (-static-libgcc). It may lock and read the loader's list of
 * objects: for a slow path, never a signal handler. Always inlined, so the first frame the unwinder
 * sees is the caller's. */
struct sm_plat_trace { void **pcs; unsigned n, max, skip; };
static inline _Unwind_Reason_Code sm_plat_trace_step(struct _Unwind_Context *ctx, void *arg)
{
    struct sm_plat_trace *t = (struct sm_plat_trace *)arg;
    uintptr_t pc = (uintptr_t)_Unwind_GetIP(ctx);
    if (!pc)
        return _URC_END_OF_STACK;
    if (t->skip) {
        t->skip--;
        return _URC_NO_REASON;
    }
    t->pcs[t->n++] = (void *)pc;
    return t->n < t->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}
SM_HOT unsigned sm_plat_backtrace(void **pcs, unsigned n, unsigned skip)
{
    struct sm_plat_trace t = { pcs, 0, n, skip + 1 }; /* + 1: the caller's frame */
    if (n)
        _Unwind_Backtrace(sm_plat_trace_step, &t);
    return t.n;
}

/* Address space only: n bytes (rounded up to pages) that fault on any access until made accessible
 * with sm_plat_protect, and cost no memory or commit charge before that. NULL (errno = ENOMEM)
 * when the kernel refuses. For a layer that must tell its blocks by address alone (prof.h). */
static inline void *sm_plat_reserve(size_t size)
{
    if (size == 0 || size > SIZE_MAX / 2 || SM_PLAT_FAULT(SM_PLAT_OP_MAP)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = mmap(NULL, sm_align_up(size, sm_plat_page_size()), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

/* Files, for reports written from inside the allocator: no stdio (it allocates), descriptors only.
 * create: truncate or make path (0644); -1 with errno set. write: all n bytes, false on an error.
 * read: what read(2) gives (0 at the end, -1 on an error). */
static inline int sm_plat_file_create(const char *path)
{
    int fd;
    do
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    while (fd < 0 && errno == EINTR);
    return fd;
}
static inline int sm_plat_file_open(const char *path) { return open(path, O_RDONLY | O_CLOEXEC); }
static inline bool sm_plat_file_write(int fd, const void *buf, size_t n)
{
    const char *s = (const char *)buf;
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}
static inline long sm_plat_file_read(int fd, void *buf, size_t n)
{
    ssize_t r;
    do
        r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    return (long)r;
}
static inline void sm_plat_file_close(int fd) { close(fd); }
static inline unsigned long sm_plat_pid(void) { return (unsigned long)getpid(); }

/* The extent [*lo, *hi) of the shared object whose code holds addr (every mapping of its file), read
 * from /proc/self/maps; false when addr is in the main program (a static link) or cannot be placed.
 * So a profiler can leave out the allocator's own frames whatever the compiler inlined. */
static inline bool sm_plat_code_module(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    char exe[256], buf[4096], line[512], path[256] = "";
    ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[en > 0 ? en : 0] = '\0';
    int fd = sm_plat_file_open("/proc/self/maps");
    if (fd < 0)
        return false;
    uintptr_t a = (uintptr_t)addr, l = 0, h = 0;
    size_t ln = 0;
    long r;
    for (int pass = 0; pass < 2; pass++) { /* 1: the path; 2: every mapping of it */
        lseek(fd, 0, SEEK_SET);
        while ((r = sm_plat_file_read(fd, buf, sizeof buf)) > 0)
            for (long i = 0; i < r; i++) {
                if (buf[i] != '\n') {
                    if (ln < sizeof line - 1)
                        line[ln++] = buf[i];
                    continue;
                }
                line[ln] = '\0';
                ln = 0;
                char *e, *name = strchr(line, '/');
                uintptr_t s0 = (uintptr_t)strtoull(line, &e, 16), e0 = (uintptr_t)strtoull(e + 1, NULL, 16);
                if (!name)
                    continue;
                if (pass == 0 && a >= s0 && a < e0 && strlen(name) < sizeof path)
                    strcpy(path, name);
                if (pass == 1 && strcmp(name, path) == 0) {
                    l = l && l < s0 ? l : s0;
                    h = h > e0 ? h : e0;
                }
            }
        if (!path[0])
            break;
    }
    sm_plat_file_close(fd);
    if (!path[0] || strcmp(path, exe) == 0 || !h)
        return false;
    *lo = l, *hi = h;
    return true;
}

/* The symbol at or below pc and its object's path (dladdr: the dynamic symbol table only), for a
 * report at exit; false if none. Never on an allocation path: dladdr takes the loader's lock, which
 * dlopen holds while it allocates. dladdr is declared by <dlfcn.h> only with _GNU_SOURCE: the
 * library's own symbol is called under a name of ours, with Dl_info's layout (a stable ABI). */
struct sm_plat_dl_info { const char *fname; void *fbase; const char *sname; void *saddr; };
extern int sm_plat_dladdr_(const void *addr, struct sm_plat_dl_info *info) __asm__("dladdr");
static inline bool sm_plat_symbol(const void *pc, const char **sym, uintptr_t *off, const char **file, uintptr_t *base)
{
    struct sm_plat_dl_info di = { 0, 0, 0, 0 };
    if (!sm_plat_dladdr_(pc, &di))
        return false;
    *file = di.fname, *base = (uintptr_t)di.fbase;
    *sym = di.sname;
    *off = di.sname ? (uintptr_t)pc - (uintptr_t)di.saddr : 0;
    return true;
}

/* Fault hooks: fn(addr) is asked about every SIGSEGV and SIGBUS the kernel raises (addr: the
 * address the access faulted at), in the signal handler, on whatever stack the thread has for
 * signals (SA_ONSTACK): it must be async-signal-safe and use little stack. It returns true when
 * the fault was its own and it reported it: the handlers found at installation are then put back
 * and the handler returns, so the access faults again and the process dies of it (or the program's
 * earlier handler sees it) exactly as it would have without us. A fault no hook claims goes to the
 * earlier handler. The handler is installed on the first call; false when it cannot be (no room
 * for another hook: SM_PLAT_FAULT_HOOKS per composition, or sigaction failed). */
#define SM_PLAT_FAULT_HOOKS 8
typedef bool sm_plat_fault_fn(void *addr);
static struct {
    sm_plat_fault_fn *hooks[SM_PLAT_FAULT_HOOKS];
    unsigned n;
    bool installed;
    struct sigaction old_segv, old_bus;
    pthread_mutex_t lock;
} sm_plat_faults SM_UNUSED = { .lock = PTHREAD_MUTEX_INITIALIZER };

static inline void sm_plat_fault_restore(void)
{
    sigaction(SIGSEGV, &sm_plat_faults.old_segv, NULL);
    sigaction(SIGBUS, &sm_plat_faults.old_bus, NULL);
}

static inline void sm_plat_fault_handler(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (si && si->si_code > 0) { /* raised by the kernel for an access, not sent by kill() */
        unsigned n = __atomic_load_n(&sm_plat_faults.n, __ATOMIC_ACQUIRE);
        for (unsigned i = 0; i < n; i++)
            if (sm_plat_faults.hooks[i](si->si_addr)) {
                sm_plat_fault_restore();
                errno = saved;
                return; /* the access runs again, under the earlier handler */
            }
    }
    const struct sigaction *old = sig == SIGBUS ? &sm_plat_faults.old_bus : &sm_plat_faults.old_segv;
    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else { /* default action (the kernel does not let a fault be ignored): die of it */
        sigaction(sig, old, NULL);
        if (!si || si->si_code <= 0)
            raise(sig); /* a sent signal does not come back by itself */
    }
    errno = saved;
}

static inline bool sm_plat_fault_hook(sm_plat_fault_fn *fn)
{
    bool ok = false;
    pthread_mutex_lock(&sm_plat_faults.lock);
    if (!sm_plat_faults.installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = sm_plat_fault_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &sm_plat_faults.old_segv) == 0) {
            if (sigaction(SIGBUS, &sa, &sm_plat_faults.old_bus) == 0)
                sm_plat_faults.installed = true;
            else
                sigaction(SIGSEGV, &sm_plat_faults.old_segv, NULL);
        }
    }
    if (sm_plat_faults.installed && sm_plat_faults.n < SM_PLAT_FAULT_HOOKS) {
        sm_plat_faults.hooks[sm_plat_faults.n] = fn;
        __atomic_store_n(&sm_plat_faults.n, sm_plat_faults.n + 1, __ATOMIC_RELEASE);
        ok = true;
    }
    pthread_mutex_unlock(&sm_plat_faults.lock);
    return ok;
}

#endif
