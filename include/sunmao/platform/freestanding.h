/* The freestanding platform (platform/platform.h states the contract): no operating system, no C
 * library. One thread, one CPU; memory only through the embedder's hook, if it gives one:
 *   #define SM_PLAT_MAP_HOOK(size)   an expression giving `size` bytes of zeroed, page-aligned
 *                                    memory or NULL (defined before the first sunmao include)
 * otherwise every OS layer but sheap (a static pool) answers "no memory". Diagnostics go to the
 * program's sm_diag_write(s, n) (a UART, a log buffer). The clock is sm_plat_clock_ms, which the
 * embedder may advance from a timer; while it stands still, nothing decays. Framework platform. */
#ifndef SUNMAO_PLATFORM_FREESTANDING_H
#define SUNMAO_PLATFORM_FREESTANDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../core/compiler.h"
#include "../core/errnum.h"

#define SM_PLAT_PAGE 4096u

void sm_diag_write(const char *s, size_t n);

static inline size_t sm_plat_page_size(void) { return SM_PLAT_PAGE; }

static inline void *sm_plat_map(size_t size)
{
#ifdef SM_PLAT_MAP_HOOK
    void *p = size ? (SM_PLAT_MAP_HOOK(size)) : NULL;
    if (p)
        return p;
#else
    (void)size;
#endif
    errno = ENOMEM;
    return NULL;
}
static inline void *sm_plat_map_aligned(size_t size, size_t align)
{
    void *p = sm_plat_map(size);
    if (p && ((uintptr_t)p & (align - 1))) { /* a hook that cannot align: refuse, do not leak-trim */
        errno = ENOMEM;
        return NULL;
    }
    return p;
}
static inline int sm_plat_unmap(void *p, size_t size)
{
    (void)p, (void)size;
    errno = EINVAL;
    return -1;
}
static inline int sm_plat_remap_inplace(void *p, size_t old_size, size_t new_size)
{
    (void)p, (void)old_size, (void)new_size;
    errno = ENOMEM;
    return -1;
}
static inline int sm_plat_remap_to(void *p, size_t old_size, size_t new_size, void *dest)
{
    (void)p, (void)old_size, (void)new_size, (void)dest;
    errno = ENOMEM;
    return -1;
}
static inline int sm_plat_move_out(void *p, size_t size, void *dest)
{
    (void)p, (void)size, (void)dest;
    errno = ENOMEM;
    return -1;
}
static inline int sm_plat_purge(void *p, size_t size, bool lazy)
{
    (void)p, (void)size, (void)lazy;
    errno = EINVAL;
    return -1;
}
static inline void sm_plat_hint_huge(void *p, size_t size) { (void)p, (void)size; }
static inline void sm_plat_hint_nohuge(void *p, size_t size) { (void)p, (void)size; }
/* No memory protection here: a guard layer finds out with n = 0 and stays out of the way. */
static inline int sm_plat_protect(void *p, size_t n, bool accessible)
{
    (void)p, (void)n, (void)accessible;
    errno = EINVAL;
    return -1;
}
static inline int sm_plat_protect_apart(void *p, size_t n)
{
    (void)p, (void)n;
    errno = EINVAL;
    return -1;
}
static inline void *sm_plat_sbrk(intptr_t incr)
{
    (void)incr;
    errno = ENOMEM;
    return NULL;
}

static uint64_t sm_plat_clock_ms;
static inline uint64_t sm_plat_now_ms(void) { return __atomic_load_n(&sm_plat_clock_ms, __ATOMIC_RELAXED); }
static inline uint64_t sm_plat_now_ns(void) { return sm_plat_now_ms() * 1000000u; }
static inline uint64_t sm_plat_cycles(void) { return sm_plat_now_ns(); } /* no counter known here */
static inline bool sm_plat_at_exit(void (*fn)(void)) { (void)fn; return false; }
static inline void sm_plat_sleep_ms(uint64_t ms) { (void)ms; }
static inline void sm_plat_wait_while(int *word, int value, uint64_t timeout_ms)
{
    (void)word, (void)value, (void)timeout_ms;
}
static inline void sm_plat_wake_some(int *word, int n) { (void)word, (void)n; }
static inline void sm_plat_wake(int *word) { (void)word; }

static inline bool sm_plat_in_loader(const void *pc) { (void)pc; return false; } /* no loader */
static inline int sm_plat_cpu(void) { return 0; }
static inline uintptr_t sm_plat_self(void) { return 1; } /* the one thread */
static inline void sm_plat_yield(void) {}
static inline size_t sm_plat_cpu_cache_bytes(int cpu) { (void)cpu; return 0; } /* unknown */
static inline _Noreturn void sm_plat_abort(void) { __builtin_trap(); }
static inline bool sm_plat_entropy(void *buf, size_t n)
{
    (void)buf, (void)n;
    return false;
}
static inline const char *sm_plat_getenv(const char *name)
{
    (void)name;
    return NULL;
}
static inline const char *sm_plat_secure_getenv(const char *name)
{
    (void)name;
    return NULL;
}
static inline long sm_plat_readlink(const char *path, char *buf, size_t n)
{
    (void)path, (void)buf, (void)n;
    return -1;
}

/* One thread: a lock is a flag that catches re-entry in debug builds' eyes, nothing more. */
typedef struct { int held; } sm_plat_lock_t;
#define SM_PLAT_LOCK_INIT { 0 }
static inline void sm_plat_lock(sm_plat_lock_t *l) { l->held = 1; }
static inline void sm_plat_unlock(sm_plat_lock_t *l) { l->held = 0; }
static inline bool sm_plat_trylock(sm_plat_lock_t *l) { return l->held ? false : (l->held = 1); }
static inline void sm_plat_lock_reinit(sm_plat_lock_t *l) { l->held = 0; }
typedef sm_plat_lock_t sm_plat_spin_t;
#define SM_PLAT_SPIN_INIT SM_PLAT_LOCK_INIT
static inline void sm_plat_spin_lock(sm_plat_spin_t *l) { l->held = 1; }
static inline void sm_plat_spin_unlock(sm_plat_spin_t *l) { l->held = 0; }
static inline bool sm_plat_spin_trylock(sm_plat_spin_t *l) { return l->held ? false : (l->held = 1); }
static inline void sm_plat_spin_reinit(sm_plat_spin_t *l) { l->held = 0; }

typedef struct { int done; } sm_plat_once_t;
#define SM_PLAT_ONCE_INIT { 0 }
static inline void sm_plat_once(sm_plat_once_t *once, void (*fn)(void))
{
    if (!once->done) {
        once->done = 1;
        fn();
    }
}

typedef int sm_plat_key_t;
static inline bool sm_plat_key_create(sm_plat_key_t *key, void (*on_exit)(void *value))
{
    (void)key, (void)on_exit;
    return false; /* no threads exit */
}
static inline void sm_plat_key_set(sm_plat_key_t key, void *value) { (void)key, (void)value; }
typedef struct sm_plat_thread {
    void *(*fn)(void *);
    const char *name;
} sm_plat_thread_t;
static inline bool sm_plat_spawn(const sm_plat_thread_t *spec)
{
    (void)spec;
    return false;
}
static inline void sm_plat_pause_spawn(void) {} /* no threads are ever started */
static inline void sm_plat_resume_spawn(void) {}
static inline bool sm_plat_spawn_paused(void) { return false; }
static inline void sm_plat_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    (void)prepare, (void)parent, (void)child;
}

static inline void sm_plat_write_stderr(const char *s, size_t n) { sm_diag_write(s, n); }

/* No address space to reserve, no files, no loader: a profiler records nothing here. */
static inline void *sm_plat_reserve(size_t size)
{
    (void)size;
    return NULL;
}
static inline int sm_plat_file_create(const char *path) { (void)path; return -1; }
static inline int sm_plat_file_open(const char *path) { (void)path; return -1; }
static inline bool sm_plat_file_write(int fd, const void *buf, size_t n) { (void)fd, (void)buf, (void)n; return false; }
static inline long sm_plat_file_read(int fd, void *buf, size_t n) { (void)fd, (void)buf, (void)n; return -1; }
static inline void sm_plat_file_close(int fd) { (void)fd; }
static inline unsigned long sm_plat_pid(void) { return 1; }
static inline bool sm_plat_code_module(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    (void)addr, (void)lo, (void)hi;
    return false;
}
static inline bool sm_plat_symbol(const void *pc, const char **sym, uintptr_t *off, const char **file, uintptr_t *base)
{
    (void)pc, (void)sym, (void)off, (void)file, (void)base;
    return false;
}

/* No unwinder and no signals: no call sites are recorded, no fault handler is installed. */
static inline unsigned sm_plat_backtrace(void **pcs, unsigned n, unsigned skip)
{
    (void)pcs, (void)n, (void)skip;
    return 0;
}
#define SM_PLAT_FAULT_HOOKS 0
typedef bool sm_plat_fault_fn(void *addr);
static inline bool sm_plat_fault_hook(sm_plat_fault_fn *fn)
{
    (void)fn;
    return false;
}

#endif
