/* wfslabm — the Mortise paper's "wfslabm" (§4.1, §4.4 question 1): the wfslab allocator
 * (instances/wfslab.c) written by hand, in this one file, with no framework: it includes no
 * <sunmao/...> header, only the C library's and Linux's. It is the benchmark's control: wfslab
 * (composed from layer templates), wfslabfl (the same with pass-through layers) and wfslabm (this)
 * must run within about 1% of each other, which shows that composing costs nothing.
 *
 * So it is the same algorithm with the same parameters, data structures, atomics, thresholds and
 * messages as the composition
 *     mmap_heap(FAA thread heaps of 256 MiB, huge pages, thread-heap blocks up to 64 MiB)
 *     :: segfit_lf(log2b classes, 4 KiB granule, 4 MiB chunks)
 *     :: slab_wf(prime classes, 64 KiB slabs, 40 slabs a thread, >= 4 objects a slab)
 *     :: malloc_socket (or custom_socket when built with -DSM_PREFIX=sm_wfslabm_)
 * only as plain monolithic C. Its parts, bottom up, with the framework's files that specify them
 * (for comparison; nothing here is taken from them but the algorithm):
 *
 *   platform    mmap/munmap/madvise/futex, the page size, a report line on stderr (platform/linux.h,
 *               policies/err/warn.h)
 *   tagged stack  Treiber stacks whose head {top, tag} changes by one 16-byte compare-and-swap
 *               (inline `lock cmpxchg16b` on x86-64; the compiler's builtin under ThreadSanitizer)
 *               (core/tagged_stack.h)
 *   page map    a 3-level radix map from address granules to one word (48-bit addresses, 4096-entry
 *               nodes of 32 KiB), read without locks; updated under a lock (os part) or with nodes
 *               installed by compare-and-swap (large and small parts) (core/pagemap.h)
 *   os part     each thread carves page-granular blocks from its 256 MiB region by a thread-local
 *               bump pointer; regions come from shared 1 GiB arenas by one fetch-and-add on the
 *               arena's top word; no transparent huge pages (HUGE_PAGES 0, as wfslab); freed carved
 *               blocks are dropped (MADV_DONTNEED) and kept in locked bins by log2 of their page
 *               count, the tails of exited threads' regions on an orphan list; blocks above 64 MiB
 *               or aligned above a page are mappings of their own (2 MiB-aligned from 2 MiB),
 *               unmapped when freed. A realloc's large growth moves pages instead of copying them:
 *               a mapping grows in place or moves (mremap), a carved block moves into a mapping of
 *               its own, its range left mapped and empty (MREMAP_DONTUNMAP), and the large part's
 *               direct blocks move with their word. A registry lock (test-and-test-and-set) guards the map's
 *               updates but the carve's, the bins, the orphans and arena reservation; fork takes it
 *               (os/mmap_heap.h, os/mmap_heap/thread_heap.h)
 *   large part  power-of-two classes 4 KiB .. 1 MiB: a lock-free free stack per class, else a block
 *               carved from the class's region {cur, end} by 16-byte CAS, regions being 4 MiB chunks
 *               aligned to 4 MiB; above 1 MiB (or aligned above it) a chunk of its own, from the os
 *               part. Block words in a page map of 4 KiB granules, claimed by CAS when freed. Free
 *               blocks are aged by one release pass and dropped (but their first page) by the next,
 *               a second later (layers/core/segfit_lf.h, policies/sizeclass/log2b.h)
 *   small part  47 prime classes, served up to the last with 4 objects in a 64 KiB slab (16144 B),
 *               alignment up to 16: the wait-free slab. A thread owns up to 40 slabs; malloc clears
 *               a bit (atomic and), every free sets one (atomic or); full slabs are detached and
 *               counted back to a quarter free, then queued on their class's partial stack; all-free
 *               detached slabs go to the empty stack, whose slabs beyond 40 a release pass drops
 *               (but their header page). The control word holds state | epoch (bumped at each
 *               adoption) | frees since the detach. Slabs are large-part blocks of 64 KiB
 *               (layers/core/slab_wf.h, policies/sizeclass/prime.h)
 *   socket      the malloc(3) API and its exact semantics, start-up on the first request, the fork
 *               handlers, the thread-exit key, and the release clock: a background thread started
 *               by the first allocation after a part noted memory to give back, which runs a pass,
 *               then at least 50 ms later the next, sleeping on the note word while nothing is due
 *               (sockets/libc_api.h, malloc_socket.h, custom_socket.h, platform/lifecycle.h)
 *
 * Written plainly: a request's size and alignment travel as arguments (no context structure), and
 * each part calls the next by name. Deliberate differences from the composition, none on a request
 * path: the socket's per-process secret is not kept (no part of wfslab uses one); the thread-exit
 * key's destructor calls this allocator's exit path directly (the framework's table of per-layer
 * exit hooks serves compositions without a socket); reports name the parts wfslabm_small,
 * wfslabm_large and wfslabm_os (wfslab's: wfslab_small, wfslab_large, wfslab_os). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>

/* ---------------------------------------------------------------------------------------------
 * Compiler helpers. As in the composition: request paths forced inline, rare paths out of line. */
#define WF_HOT     static inline __attribute__((always_inline))
#define WF_SLOW    static __attribute__((noinline, cold))
#define WF_EXPORT  __attribute__((visibility("default")))
#define WF_ALIGNED __attribute__((aligned(64)))
#define wf_likely(x)   __builtin_expect(!!(x), 1)
#define wf_unlikely(x) __builtin_expect(!!(x), 0)
#define WF_CAT_(a, b) a##b
#define WF_CAT(a, b)  WF_CAT_(a, b)

#ifdef SM_PREFIX
#define WF_API(name) WF_CAT(SM_PREFIX, name) /* libsm_wfslabm.a: sm_wfslabm_malloc, ... */
#else
#define WF_API(name) name /* libwfslabm.so: the process's malloc */
#endif

#if defined(__SANITIZE_THREAD__)
#define WF_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WF_TSAN 1
#endif
#endif

WF_HOT unsigned wf_log2_floor(size_t x) { return 63u - (unsigned)__builtin_clzl(x); }
WF_HOT unsigned wf_log2_ceil(size_t x) { return x <= 1 ? 0 : wf_log2_floor(x - 1) + 1; }
WF_HOT bool wf_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
WF_HOT size_t wf_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }
WF_HOT size_t wf_down(size_t x, size_t a) { return x & ~(a - 1); }
WF_HOT bool wf_is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* ---------------------------------------------------------------------------------------------
 * Parameters (wfslab's). */
#define MIN_ALIGN      16u
#define MAX_REQUEST    ((size_t)PTRDIFF_MAX) /* larger requests fail at once, as glibc's */
/* os part */
#define TH_SIZE        ((size_t)256 << 20)   /* a thread's region */
#define TH_MAX_BLOCK   ((size_t)64 << 20)    /* the largest block carved (at most a quarter region) */
#define ARENA_REGIONS  4u                    /* regions per arena: 1 GiB of address space */
#define HUGE_PAGES     0                     /* as wfslab: no transparent huge pages */
#define HUGE_BYTES     ((size_t)2 << 20)
/* large part */
#define LG_GRANULE     ((size_t)4096)
#define LG_CHUNK       ((size_t)4 << 20)
/* small part */
#define SLAB_SIZE      ((size_t)64 << 10)
#define TLLABS         40u
#define MIN_OBJECTS    4u

/* ---------------------------------------------------------------------------------------------
 * Platform. */
static size_t os_page_size(void)
{
    static size_t page; /* racing first callers store the same value */
    size_t p = __atomic_load_n(&page, __ATOMIC_RELAXED);
    if (wf_unlikely(p == 0)) {
        p = (size_t)getauxval(AT_PAGESZ);
        if (p == 0 || !wf_pow2(p))
            p = 4096;
        __atomic_store_n(&page, p, __ATOMIC_RELAXED);
    }
    return p;
}

/* Fresh zeroed pages (address space only until touched), or NULL with errno = ENOMEM. */
static inline void *os_map(size_t size)
{
    if (size == 0 || size > SIZE_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = mmap(NULL, wf_up(size, os_page_size()), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

static inline int os_unmap(void *p, size_t size) { return munmap(p, wf_up(size, os_page_size())); }

/* Pages aligned to align (a power of two): map more, trim both ends. */
static inline void *os_map_aligned(size_t size, size_t align)
{
    size_t page = os_page_size();
    size = wf_up(size, page);
    if (align <= page)
        return os_map(size);
    if (size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = (char *)os_map(size + align);
    if (!raw)
        return NULL;
    char *p = (char *)wf_up((uintptr_t)raw, align);
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)((raw + size + align) - (p + size));
    if (tail)
        munmap(p + size, tail);
    return p;
}

/* Drop pages, keep them mapped: lazy (MADV_FREE) or at once, reading zero after (MADV_DONTNEED). */
static inline int os_drop(void *p, size_t size, bool lazy)
{
#ifdef MADV_FREE
    if (lazy && madvise(p, size, MADV_FREE) == 0)
        return 0;
#else
    (void)lazy;
#endif
    return madvise(p, size, MADV_DONTNEED);
}

static inline void os_hint_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

/* A report: one line, "sunmao: <who>: <kind> (<pointer>): <detail>", written without allocating
 * (the err policy `warn` of the composition). The bad request is then ignored. */
enum { ERR_INVALID_FREE, ERR_DOUBLE_FREE };

static void report(int kind, const char *who, const void *ptr, const char *detail)
{
    char line[256];
    size_t n = 0;
    const char *parts[] = { "sunmao: ", who, ": ", kind == ERR_DOUBLE_FREE ? "double free" : "invalid free", " (0x" };
    for (unsigned k = 0; k < sizeof parts / sizeof parts[0]; k++)
        for (const char *s = parts[k]; *s && n < sizeof line - 1; s++)
            line[n++] = *s;
    char hex[16];
    unsigned h = 0;
    uintptr_t v = (uintptr_t)ptr;
    do
        hex[h++] = "0123456789abcdef"[v & 15];
    while ((v >>= 4) && h < sizeof hex);
    while (h && n < sizeof line - 1)
        line[n++] = hex[--h];
    const char *tail[] = { ")", detail && *detail ? ": " : "", detail ? detail : "", "\n" };
    for (unsigned k = 0; k < sizeof tail / sizeof tail[0]; k++)
        for (const char *s = tail[k]; *s && n < sizeof line - 1; s++)
            line[n++] = *s;
    const char *out = line;
    while (n) {
        ssize_t w = write(2, out, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        out += w;
        n -= (size_t)w;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Tagged Treiber stacks. A node's first word is its link. The head is {top, tag}; every change
 * bumps the tag, so a pop that read a top which was popped and pushed again fails its CAS. A pop
 * may read the link of a node another thread took meanwhile: node memory must stay mapped (slabs
 * and class blocks are never unmapped). */
typedef struct wf_node { struct wf_node *next; } wf_node_t;
typedef struct {
    _Alignas(16) uintptr_t lo; /* a stack's top; a region's cur */
    uintptr_t hi;              /* a stack's tag; a region's end */
} wf_pair_t;

/* *s = {lo, hi} if it still holds *seen; else *seen gets what it holds. */
WF_HOT bool pair_cas(wf_pair_t *s, wf_pair_t *seen, uintptr_t lo, uintptr_t hi)
{
#if defined(__x86_64__) && !defined(WF_TSAN)
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*s), "+a"(seen->lo), "+d"(seen->hi)
                         : "b"(lo), "c"(hi)
                         : "memory");
    return ok;
#else
    unsigned __int128 expect = (unsigned __int128)seen->hi << 64 | seen->lo;
    unsigned __int128 want = (unsigned __int128)hi << 64 | lo;
    bool ok = __atomic_compare_exchange_n((unsigned __int128 *)s, &expect, want, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST);
    seen->lo = (uintptr_t)expect, seen->hi = (uintptr_t)(expect >> 64);
    return ok;
#endif
}

/* Two loads, hi first: a torn pair only fails the next CAS. */
WF_HOT wf_pair_t pair_peek(const wf_pair_t *s)
{
    wf_pair_t h;
    h.hi = __atomic_load_n(&s->hi, __ATOMIC_ACQUIRE);
    h.lo = __atomic_load_n(&s->lo, __ATOMIC_ACQUIRE);
    return h;
}

WF_HOT void stack_push_chain(wf_pair_t *s, wf_node_t *first, wf_node_t *last)
{
    wf_pair_t h = pair_peek(s);
    do
        __atomic_store_n(&last->next, (wf_node_t *)h.lo, __ATOMIC_RELAXED);
    while (!pair_cas(s, &h, (uintptr_t)first, h.hi + 1));
}

WF_HOT void stack_push(wf_pair_t *s, wf_node_t *n) { stack_push_chain(s, n, n); }

#ifdef WF_TSAN
/* The race the contract allows (the value counts only if the tag shows nobody took the node). */
__attribute__((no_sanitize_thread, noinline)) static uintptr_t stack_link(wf_node_t *n)
{
    return (uintptr_t) * (wf_node_t *volatile *)&n->next;
}
#else
WF_HOT uintptr_t stack_link(wf_node_t *n) { return (uintptr_t)__atomic_load_n(&n->next, __ATOMIC_RELAXED); }
#endif

WF_HOT wf_node_t *stack_pop(wf_pair_t *s)
{
    wf_pair_t h = pair_peek(s);
    for (;;) {
        wf_node_t *n = (wf_node_t *)h.lo;
        if (!n)
            return NULL;
        uintptr_t next = stack_link(n);
        if (pair_cas(s, &h, next, h.hi + 1))
            return n;
    }
}

WF_HOT wf_node_t *stack_take_all(wf_pair_t *s)
{
    wf_pair_t h = pair_peek(s);
    while (h.lo && !pair_cas(s, &h, 0, h.hi + 1))
        ;
    return (wf_node_t *)h.lo;
}

/* ---------------------------------------------------------------------------------------------
 * Page maps: 48-bit addresses, granules of 1 << shift bytes, a root of 4096 entries in static
 * storage, middle nodes and leaves of 4096 words (32 KiB) made on demand and never freed. */
#define PM_BITS       12u
#define PM_LEN        ((uintptr_t)1 << PM_BITS)
#define PM_MASK       (PM_LEN - 1)
#define PM_NODE_BYTES (sizeof(uintptr_t) << PM_BITS)
typedef struct { uintptr_t **root[PM_LEN]; } pagemap_t;

WF_HOT uintptr_t pm_get(const pagemap_t *m, unsigned shift, const void *addr)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    if (wf_unlikely(g >> (48 - shift)))
        return 0;
    uintptr_t **mid = __atomic_load_n(&m->root[g >> (2 * PM_BITS)], __ATOMIC_ACQUIRE);
    if (!mid)
        return 0;
    uintptr_t *leaf = __atomic_load_n(&mid[(g >> PM_BITS) & PM_MASK], __ATOMIC_ACQUIRE);
    if (!leaf)
        return 0;
    return __atomic_load_n(&leaf[g & PM_MASK], __ATOMIC_RELAXED);
}

/* The word's address, for a compare-and-swap; NULL where no leaf exists. */
WF_HOT uintptr_t *pm_slot(const pagemap_t *m, unsigned shift, const void *addr)
{
    uintptr_t g = (uintptr_t)addr >> shift;
    if (wf_unlikely(g >> (48 - shift)))
        return NULL;
    uintptr_t **mid = __atomic_load_n(&m->root[g >> (2 * PM_BITS)], __ATOMIC_ACQUIRE);
    uintptr_t *leaf = mid ? __atomic_load_n(&mid[(g >> PM_BITS) & PM_MASK], __ATOMIC_ACQUIRE) : NULL;
    return leaf ? &leaf[g & PM_MASK] : NULL;
}

/* Sets the word of every granule of [addr, addr + len); false if a node could not be made. For the
 * os part's map, whose updates its lock serialises (the carve's store, to a word only its thread
 * writes, under a node that exists, being the exception). */
static inline bool pm_set(pagemap_t *m, unsigned shift, const void *addr, size_t len, uintptr_t value,
                          void *(*node_alloc)(size_t))
{
    uintptr_t g = (uintptr_t)addr >> shift;
    uintptr_t end = ((uintptr_t)addr + len + ((uintptr_t)1 << shift) - 1) >> shift;
    if (end > ((uintptr_t)1 << (48 - shift)))
        return false;
    for (; g < end; g++) {
        uintptr_t ***mslot = &m->root[g >> (2 * PM_BITS)];
        uintptr_t **mid = __atomic_load_n(mslot, __ATOMIC_RELAXED);
        if (!mid) {
            if (value == 0)
                continue; /* a granule never set */
            if (!(mid = (uintptr_t **)node_alloc(PM_NODE_BYTES)))
                return false;
            __atomic_store_n(mslot, mid, __ATOMIC_RELEASE);
        }
        uintptr_t **lslot = &mid[(g >> PM_BITS) & PM_MASK];
        uintptr_t *leaf = __atomic_load_n(lslot, __ATOMIC_RELAXED);
        if (!leaf) {
            if (value == 0)
                continue;
            if (!(leaf = (uintptr_t *)node_alloc(PM_NODE_BYTES)))
                return false;
            __atomic_store_n(lslot, leaf, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&leaf[g & PM_MASK], value, __ATOMIC_RELAXED);
    }
    return true;
}

/* A node of a map updated without a lock, installed by CAS; a loser hands its node to lost(). */
static inline uintptr_t *pm_node_shared(void **slot, void *(*node_alloc)(size_t), void (*lost)(void *))
{
    void *n = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (n)
        return (uintptr_t *)n;
    void *mine = node_alloc(PM_NODE_BYTES);
    if (!mine)
        return NULL;
    if (__atomic_compare_exchange_n(slot, &n, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return (uintptr_t *)mine;
    lost(mine);
    return (uintptr_t *)n;
}

/* pm_set for the lock-free parts: the granules written belong to the caller (a block it holds). */
static inline bool pm_set_shared(pagemap_t *m, unsigned shift, const void *addr, size_t len, uintptr_t value,
                                 void *(*node_alloc)(size_t), void (*lost)(void *))
{
    uintptr_t g = (uintptr_t)addr >> shift;
    uintptr_t end = ((uintptr_t)addr + len + ((uintptr_t)1 << shift) - 1) >> shift;
    if (end > ((uintptr_t)1 << (48 - shift)))
        return false;
    while (g < end) {
        uintptr_t **mid = (uintptr_t **)pm_node_shared((void **)&m->root[g >> (2 * PM_BITS)], node_alloc, lost);
        uintptr_t *leaf = mid ? pm_node_shared((void **)&mid[(g >> PM_BITS) & PM_MASK], node_alloc, lost) : NULL;
        if (!leaf)
            return false;
        do
            __atomic_store_n(&leaf[g & PM_MASK], value, __ATOMIC_RELEASE);
        while (++g < end && (g & PM_MASK));
    }
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * Size classes. Small: 16 x q for q in a sparse sequence of primes (1, 2, 3, then each the
 * smallest prime >= max(previous + 1, ceil(previous x 9/8)), up to 3833), and 64 KiB; found
 * without division: sizes in 16-byte units, units below 16 their own bucket, each power-of-two
 * range above cut in 8 buckets by the three bits under the leading one; a bucket holds at most one
 * class size, so its first candidate class is right or one too small. Large: powers of two. */
enum { SMALL_CLASSES = 47, LARGE_CLASSES = 17, LARGE_CLASS_MAX = 1 << 20 };

static const uint16_t prime_units[SMALL_CLASSES] = {
    1,   2,   3,   5,   7,   11,  13,  17,  23,  29,   37,   43,   53,   61,   71,   83,
    97,  113, 131, 149, 173, 197, 223, 251, 283, 331,  373,  421,  479,  541,  613,  691,
    787, 887, 1009, 1151, 1297, 1471, 1657, 1867, 2111, 2377, 2677, 3019, 3407, 3833, 4096,
};
/* The first class of each bucket: whose unit count reaches the bucket's lowest. */
static const uint8_t prime_bucket_class[81] = {
    0,  0,  1,  2,  3,  3,  4,  4,  5,  5,  5,  5,  6,  6,  7,  7,  7,  8,  8,  8,  9,  9,  9,  10, 10, 10, 11,
    12, 12, 12, 13, 13, 14, 15, 15, 16, 16, 17, 17, 18, 18, 19, 20, 21, 21, 22, 23, 23, 24, 25, 25, 26, 27, 27,
    28, 29, 29, 30, 31, 32, 32, 33, 34, 34, 35, 36, 36, 37, 38, 39, 39, 40, 40, 41, 42, 43, 44, 44, 45, 46, 46,
};

WF_HOT unsigned prime_class(size_t size)
{
    size_t units = (size + 15) >> 4;
    unsigned bucket;
    if (units < 16) {
        bucket = (unsigned)units;
    } else {
        unsigned e = wf_log2_floor(units);
        bucket = 16 + (e - 4) * 8 + (unsigned)((units >> (e - 3)) & 7);
    }
    unsigned cls = prime_bucket_class[bucket];
    return cls + (prime_units[cls] < units);
}

WF_HOT size_t prime_size(unsigned cls) { return (size_t)prime_units[cls] << 4; }

/* 16 << class; or-ing in 15 sends every size up to 16 to class 0 without a branch. */
WF_HOT unsigned log2b_class(size_t size) { return wf_log2_floor((size ? size - 1 : 0) | 15) - 3; }
WF_HOT size_t log2b_size(unsigned cls) { return (size_t)16 << cls; }

/* ---------------------------------------------------------------------------------------------
 * Release clock and thread exit. A part that starts holding memory time may give back notes it
 * (a new slab or chunk, a slab emptied, a class block freed); the first allocation after a note
 * starts the background thread, which runs the release pass, waits 50 ms, and sleeps on the note
 * word (futex) until the next note or the next pass due. Thread exit: one pthread key whose
 * destructor returns the thread's slabs and its region's tail. */
static int rel_pending, rel_sleeper;
static void (*rel_wake)(int *word);

static void futex_wake_all(int *word)
{
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    errno = saved;
}

WF_HOT void release_note(void)
{
    if (wf_likely(__atomic_load_n(&rel_pending, __ATOMIC_RELAXED)))
        return;
    if (!__atomic_exchange_n(&rel_pending, 1, __ATOMIC_ACQ_REL) && __atomic_load_n(&rel_sleeper, __ATOMIC_ACQUIRE) &&
        rel_wake)
        rel_wake(&rel_pending);
}

static pthread_once_t thr_once = PTHREAD_ONCE_INIT;
static pthread_key_t thr_key;
static bool thr_key_made;
static void thread_exit_all(void);

static void thr_on_exit(void *value)
{
    (void)value;
    thread_exit_all();
}

static void thr_make_key(void) { thr_key_made = pthread_key_create(&thr_key, thr_on_exit) == 0; }

/* The calling thread's exit will run thread_exit_all; false when no key could be made. */
static bool thread_attach(void)
{
    pthread_once(&thr_once, thr_make_key);
    if (!thr_key_made)
        return false;
    pthread_setspecific(thr_key, (void *)1);
    return true;
}

/* =============================================================================================
 * The os part (mmap_heap with thread heaps grown from FAA arenas). Its map (4 KiB granules) holds
 * at each block's first page: size | kind (direct: a mapping of its own; carved: from a thread
 * region; freed: carved and waiting in a bin). */
enum {
    OS_SHIFT = 12,
    OS_DIRECT = 1,
    OS_CARVED = 2,
    OS_FREED = 4,
    OS_KIND = 0xfff,
    OS_BINS = 24,
    FAA_INDEX_BITS = 28, /* the arena top word: base page number << 28 | next region's index */
};

/* In the first bytes of a freed carved block or of an orphaned region tail. */
struct os_link { struct os_link *next; char *end; };

static struct {
    int lock;                         /* the registry lock */
    pagemap_t map;
    struct os_link *bins[OS_BINS];    /* freed carved blocks by log2 of their page count */
    size_t freed_count;               /* blocks in the bins, read without the lock */
    struct os_link *orphans;          /* region tails of exited threads */
    uint64_t arena_top;               /* the arena and its next region */
    size_t arenas;
} os;

/* Default TLS model (this library may be dlopen'ed); the only initial-exec slot is the slabs'. */
static __thread struct { char *cur, *end; } os_region;

WF_HOT void wf_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The registry lock: test-and-test-and-set, pauses doubling up to 1024 between looks, then
 * yielding the CPU at each look (a holder that was preempted gets it back). */
WF_SLOW void os_lock_contended(void)
{
    unsigned spins = 1;
    do {
        while (__atomic_load_n(&os.lock, __ATOMIC_RELAXED)) {
            if (spins < 1024) {
                for (unsigned i = 0; i < spins; i++)
                    wf_relax();
                spins <<= 1;
            } else {
                sched_yield();
            }
        }
    } while (__atomic_exchange_n(&os.lock, 1, __ATOMIC_ACQUIRE));
}

/* Whether this thread is taking, holding or releasing the registry lock: a fork from a signal
 * handler that interrupted it there must not wait for the lock (fork_prepare). Volatile, and
 * fenced outside the lock's own atomics, because the handler that reads it is invisible to the
 * compiler. */
static __thread volatile int os_lock_mine __attribute__((tls_model("initial-exec")));

WF_HOT void os_lock(void)
{
    os_lock_mine = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (wf_unlikely(__atomic_exchange_n(&os.lock, 1, __ATOMIC_ACQUIRE)))
        os_lock_contended();
}

WF_HOT void os_unlock(void)
{
    __atomic_store_n(&os.lock, 0, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    os_lock_mine = 0;
}

/* Map nodes: mappings of their own (under the lock; errno left alone). */
static void *os_node_alloc(size_t bytes)
{
    int saved = errno;
    void *p = os_map(bytes);
    errno = saved;
    return p;
}

WF_HOT uintptr_t os_word(const void *p)
{
    if (!p || !wf_is_aligned(p, (size_t)1 << OS_SHIFT))
        return 0;
    return pm_get(&os.map, OS_SHIFT, p);
}

WF_HOT bool os_live(uintptr_t w) { return (w & (OS_DIRECT | OS_CARVED)) && !(w & OS_FREED); }

WF_HOT bool os_record(void *p, uintptr_t w) { return pm_set(&os.map, OS_SHIFT, p, 1, w, os_node_alloc); }

/* A block of its own, mapped. */
WF_SLOW void *os_map_direct(size_t size, size_t align)
{
    if (size > SIZE_MAX / 2 || align > SIZE_MAX / 4) {
        errno = ENOMEM;
        return NULL;
    }
    size_t bytes = wf_up(size ? size : 1, os_page_size());
    if (HUGE_PAGES && bytes >= HUGE_BYTES && align < HUGE_BYTES)
        align = HUGE_BYTES;
    void *p = os_map_aligned(bytes, align);
    if (!p)
        return NULL;
    if (HUGE_PAGES && bytes >= HUGE_BYTES)
        os_hint_huge(p, bytes);
    os_lock();
    bool ok = os_record(p, bytes | OS_DIRECT);
    os_unlock();
    if (!ok) { /* a block the map cannot name must not escape */
        os_unmap(p, bytes);
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

/* A freed carved block of at least bytes, live again; NULL if none. Under the lock. */
static void *os_take_freed_locked(size_t bytes)
{
    for (unsigned bin = wf_log2_floor(bytes >> OS_SHIFT); bin < OS_BINS; bin++) {
        for (struct os_link **at = &os.bins[bin]; *at; at = &(*at)->next) {
            struct os_link *b = *at;
            size_t size = (size_t)(b->end - (char *)b);
            if (size < bytes)
                continue;
            *at = b->next;
            __atomic_store_n(&os.freed_count, os.freed_count - 1, __ATOMIC_RELAXED);
            b->next = NULL, b->end = NULL; /* purged when freed: all zero again */
            os_record(b, size | OS_CARVED);
            return b;
        }
    }
    return NULL;
}

/* The map's nodes over [base, base + size), made now so that carving never allocates: a word of
 * each leaf set and cleared. Under the lock. */
static bool os_region_nodes_locked(char *base, size_t size)
{
    const size_t leaf_span = (size_t)1 << (OS_SHIFT + PM_BITS);
    bool ok = true;
    for (char *g = base; ok && g < base + size; g = (char *)wf_down((uintptr_t)g + leaf_span, leaf_span))
        ok = os_record(g, OS_FREED) && os_record(g, 0);
    return ok;
}

/* A region of the thread's own (when no arena can be had). */
static bool os_new_region(void)
{
    char *base = (char *)os_map(TH_SIZE);
    if (!base)
        return false;
    if (HUGE_PAGES)
        os_hint_huge(base, TH_SIZE);
    os_lock();
    bool ok = os_region_nodes_locked(base, TH_SIZE);
    os_unlock();
    if (!ok) {
        os_unmap(base, TH_SIZE);
        return false;
    }
    os_region.cur = base, os_region.end = base + TH_SIZE;
    return true;
}

WF_HOT uint64_t faa_word(const char *base, uint64_t index)
{
    return ((uint64_t)((uintptr_t)base >> OS_SHIFT) << FAA_INDEX_BITS) | index;
}
WF_HOT char *faa_base(uint64_t w) { return (char *)(uintptr_t)((w >> FAA_INDEX_BITS) << OS_SHIFT); }
WF_HOT uint64_t faa_index(uint64_t w) { return w & (((uint64_t)1 << FAA_INDEX_BITS) - 1); }
WF_HOT size_t region_stride(void) { return wf_up(TH_SIZE, os_page_size()); }
/* The region a fetch-and-add's result names; NULL past the arena's end, or no arena yet. */
WF_HOT char *faa_region_of(uint64_t w)
{
    if (!w || faa_index(w) >= ARENA_REGIONS)
        return NULL;
    return faa_base(w) + faa_index(w) * region_stride();
}

/* The arena `seen` is used up (or there is none): unless the top names another one by now (retry),
 * reserve the next, make its nodes and take its first region. Under the lock. */
static char *os_new_arena_locked(uint64_t seen, bool *retry)
{
    uint64_t top = __atomic_load_n(&os.arena_top, __ATOMIC_RELAXED);
    if (faa_base(top) != faa_base(seen)) {
        *retry = true;
        return NULL;
    }
    size_t bytes = region_stride() * ARENA_REGIONS;
    int saved = errno;
    char *base = (char *)os_map_aligned(bytes, HUGE_PAGES ? HUGE_BYTES : os_page_size());
    bool ok = false;
    if (base) {
        if (HUGE_PAGES)
            os_hint_huge(base, bytes);
        ok = os_region_nodes_locked(base, bytes);
        if (!ok)
            os_unmap(base, bytes);
    }
    errno = saved;
    if (!ok)
        return NULL;
    os.arenas++;
    /* Release: a thread whose fetch-and-add reads this top sees the nodes. */
    __atomic_store_n(&os.arena_top, faa_word(base, 1), __ATOMIC_RELEASE);
    return base;
}

/* The thread's next region: one fetch-and-add on the arena's top, the lock only for the thread
 * that finds the arena used up. False: no arena can be had. */
static bool os_faa_region(void)
{
    char *region = NULL;
    while (!region) {
        uint64_t w = __atomic_load_n(&os.arena_top, __ATOMIC_ACQUIRE);
        if (faa_region_of(w)) /* an exhausted top is left alone */
            w = __atomic_fetch_add(&os.arena_top, 1, __ATOMIC_ACQUIRE);
        if ((region = faa_region_of(w)) != NULL)
            break;
        bool retry = false;
        os_lock();
        region = os_new_arena_locked(w, &retry);
        os_unlock();
        if (!region && !retry)
            return false;
    }
    os_region.cur = region, os_region.end = region + region_stride();
    return true;
}

/* The thread's region cannot hold bytes (or freed blocks wait): reuse a freed block, adopt an
 * exited thread's tail, or take a new region. */
WF_SLOW void *os_carve_slow(size_t size, size_t align, size_t bytes)
{
    size_t room = (size_t)(os_region.end - os_region.cur);
    void *p = NULL;
    char *adopt_cur = NULL, *adopt_end = NULL;
    /* Nothing to reuse (a race costs only the reuse): no lock on the way to a region. */
    if (__atomic_load_n(&os.freed_count, __ATOMIC_RELAXED) || __atomic_load_n(&os.orphans, __ATOMIC_RELAXED)) {
        os_lock();
        if (os.freed_count)
            p = os_take_freed_locked(bytes);
        if (!p && room < bytes) {
            for (struct os_link **at = &os.orphans; *at; at = &(*at)->next) {
                struct os_link *t = *at;
                if ((size_t)(t->end - (char *)t) < bytes)
                    continue;
                __atomic_store_n(at, t->next, __ATOMIC_RELAXED); /* the head is read without the lock */
                adopt_cur = (char *)t, adopt_end = t->end;
                t->next = NULL, t->end = NULL;
                break;
            }
        }
        os_unlock();
    }
    if (adopt_cur)
        os_region.cur = adopt_cur, os_region.end = adopt_end;
    if (!p) {
        /* The old tail, smaller than the block, is dropped: address space, never touched. */
        if ((size_t)(os_region.end - os_region.cur) < bytes && !os_faa_region() && !os_new_region())
            return os_map_direct(size, align);
        (void)thread_attach(); /* its tail goes to the orphans when the thread exits */
        p = os_region.cur;
        os_region.cur += bytes;
        os_record(p, bytes | OS_CARVED);
    }
    return p;
}

/* Zero-filled pages: carved from the thread's region (a bump and one store) up to 64 MiB aligned
 * to at most a page, else a mapping of their own. */
WF_HOT void *os_alloc(size_t size, size_t align)
{
    size_t page = os_page_size();
    if (size <= TH_MAX_BLOCK && align <= page) {
        size_t bytes = wf_up(size ? size : 1, page);
        char *p = os_region.cur;
        if (wf_likely(!__atomic_load_n(&os.freed_count, __ATOMIC_RELAXED) &&
                      (size_t)(os_region.end - p) >= bytes)) {
            os_region.cur = p + bytes;
            os_record(p, bytes | OS_CARVED); /* its node exists: one store */
            return p;
        }
        return os_carve_slow(size, align, bytes);
    }
    return os_map_direct(size, align);
}

/* A carved block's pages are dropped (zero on reuse), then it waits in its bin. */
WF_SLOW void os_free_carved(void *p, size_t size)
{
    os_drop(p, size, false);
    struct os_link *b = (struct os_link *)p;
    unsigned bin = wf_log2_floor(size >> OS_SHIFT);
    if (bin >= OS_BINS)
        bin = OS_BINS - 1;
    b->end = (char *)p + size;
    os_lock();
    b->next = os.bins[bin];
    __atomic_store_n(&os.bins[bin], b, __ATOMIC_RELAXED);
    __atomic_store_n(&os.freed_count, os.freed_count + 1, __ATOMIC_RELAXED);
    os_unlock();
}

WF_SLOW void os_bad_free(void *p, uintptr_t w)
{
    bool twice = (w & OS_CARVED) && (w & OS_FREED);
    report(twice ? ERR_DOUBLE_FREE : ERR_INVALID_FREE, "wfslabm_os", p,
           twice ? "block already freed" : "not the start of a block this layer mapped (or freed twice)");
}

/* The free claims the block's word under the lock (live -> freed, or cleared for a mapping), so
 * of two racing frees one is reported. sized: the caller's size, which must fit. */
WF_HOT void os_free(void *p, size_t size, bool sized)
{
    size_t want = sized ? size : 0;
    os_lock();
    uintptr_t w = os_word(p);
    if (os_live(w) && want <= (w & ~(uintptr_t)OS_KIND))
        os_record(p, (w & OS_DIRECT) ? 0 : w | OS_FREED);
    os_unlock();
    size_t bytes = w & ~(uintptr_t)OS_KIND;
    if (!os_live(w)) {
        os_bad_free(p, w);
        return;
    }
    if (want > bytes) {
        report(ERR_INVALID_FREE, "wfslabm_os", p, "sized free larger than the block; ignored");
        return;
    }
    if (w & OS_DIRECT) {
        os_unmap(p, bytes);
        return;
    }
    os_free_carved(p, bytes);
}

WF_HOT bool os_getmeta(void *p, size_t *usable)
{
    uintptr_t w = os_word(p);
    if (!os_live(w))
        return false;
    *usable = w & ~(uintptr_t)OS_KIND;
    return true;
}

/* A mapping made longer where the pages after it are free. mremap refuses a range of two kernel
 * mappings (a block moved once: its moved pages and the fresh tail) with EFAULT; then a mapping
 * placed right after it, only if nothing is there, extends it. */
static bool os_grow_inplace(void *p, size_t size, size_t want)
{
    if (mremap(p, size, want, 0) != MAP_FAILED)
        return true;
#ifdef MAP_FIXED_NOREPLACE
    if (errno == EFAULT) {
        char *at = (char *)p + size;
        void *q = mmap(at, want - size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                       -1, 0);
        if (q == at)
            return true;
        if (q != MAP_FAILED)
            munmap(q, want - size);
    }
#endif
    return false;
}

/* In place: a mapping shrinks (its tail unmapped) or grows where the pages after it are free;
 * a carved block takes only what fits. */
WF_HOT bool os_resize(void *p, size_t n)
{
    uintptr_t w = os_word(p);
    if (!os_live(w) || n > SIZE_MAX / 2)
        return false;
    size_t size = w & ~(uintptr_t)OS_KIND;
    if (!(w & OS_DIRECT))
        return n <= size;
    size_t want = wf_up(n ? n : 1, os_page_size());
    if (want == size)
        return true;
    if (want > size && !os_grow_inplace(p, size, want))
        return false;
    os_lock();
    os_record(p, want | OS_DIRECT); /* its node exists */
    os_unlock();
    if (want < size)
        os_unmap((char *)p + want, size - want);
    return true;
}

/* A live block the program holds, given at least n bytes at another address by moving its pages
 * (a realloc's growth, no copy). A mapping grows in place or moves whole, its new place recorded
 * and the old cleared before the move; a carved block's pages move into a mapping of their own,
 * the carved range staying mapped, empty (MREMAP_DONTUNMAP), and freed after. False: unchanged. */
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
WF_SLOW bool os_move(void **pp, size_t n)
{
    void *p = *pp;
    uintptr_t w = os_word(p);
    if (!os_live(w) || n > SIZE_MAX / 2)
        return false;
    size_t size = w & ~(uintptr_t)OS_KIND;
    size_t want = wf_up(n ? n : 1, os_page_size());
    if (w & OS_DIRECT) {
        if (os_resize(p, n))
            return true;
    } else if (want <= size) {
        return false;
    }
    char *q = os_map(want);
    if (!q)
        return false;
    if (!(w & OS_DIRECT) && HUGE_PAGES && want >= HUGE_BYTES)
        os_hint_huge(q, want);
    os_lock();
    bool ok = os_record(q, want | OS_DIRECT);
    if (ok && (w & OS_DIRECT))
        os_record(p, 0); /* its node exists */
    os_unlock();
    bool moved = false;
    if (ok && (w & OS_DIRECT)) {
        moved = mremap(p, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, q) == (void *)q;
        if (!moved && errno == EFAULT) { /* several kernel mappings: 2 MiB at a time, copied where one straddles */
            for (size_t off = 0; off < size; off += (size_t)2 << 20) {
                size_t k = size - off < ((size_t)2 << 20) ? size - off : (size_t)2 << 20;
                if (mremap((char *)p + off, k, k, MREMAP_MAYMOVE | MREMAP_FIXED, q + off) != (void *)(q + off))
                    memcpy(q + off, (char *)p + off, k);
            }
            os_unmap(p, size);
            moved = true;
        }
    } else if (ok) {
        moved = mremap(p, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, q) == (void *)q;
    }
    if (!moved) {
        if (ok) {
            os_lock();
            os_record(q, 0);
            if (w & OS_DIRECT)
                os_record(p, w);
            os_unlock();
        }
        os_unmap(q, want);
        return false;
    }
    if (!(w & OS_DIRECT))
        os_free(p, size, true);
    *pp = q;
    return true;
}

/* Drops the pages of a page-aligned range of a block the caller holds: at once, reading zero
 * after (zero), or lazily. */
WF_HOT bool os_purge(void *p, size_t size, bool zero)
{
    size_t page = os_page_size();
    if (!wf_is_aligned(p, page))
        return false;
    uintptr_t w = os_word(p);
    size_t bytes = wf_up(size, page);
    if (os_live(w)) {
        size_t block = w & ~(uintptr_t)OS_KIND;
        if (!size || bytes > block || bytes < size)
            bytes = block;
    } else if (!size || bytes < size || (uintptr_t)p + bytes < (uintptr_t)p) {
        return false;
    }
    return os_drop(p, bytes, !zero) == 0;
}

/* The uncarved tail of the thread's region goes on the orphan list for the next thread. */
WF_HOT void os_thread_exit(void)
{
    char *cur = os_region.cur, *end = os_region.end;
    os_region.cur = os_region.end = NULL;
    if ((size_t)(end - cur) < os_page_size())
        return;
    struct os_link *t = (struct os_link *)cur;
    t->end = end;
    os_lock();
    t->next = os.orphans;
    __atomic_store_n(&os.orphans, t, __ATOMIC_RELAXED);
    os_unlock();
}

/* =============================================================================================
 * The large part (lock-free segregated fit). A block's word in its map (4 KiB granules), at its
 * first granule: size | state (live, free; direct); the other granules of a class chunk read
 * INNER. Class blocks are never given back, so their memory stays mapped (the stacks rely on it). */
enum {
    LG_SHIFT = 12,
    LG_LIVE = 1,
    LG_FREE = 2,
    LG_STATE = 3,
    LG_INNER = 4,   /* a granule of a class chunk where no block starts */
    LG_DIRECT = 8,  /* a chunk of its own, back to the os part when freed */
    LG_AGED = 16,   /* free, seen so by a release pass */
    LG_PURGED = 32, /* free, its pages past the first granule dropped */
    LG_BITS = 63,
};
#define LG_DECAY_MS 1000u /* a free class block idle this long is purged by the release pass */

static struct {
    pagemap_t map;
    void *spare_node;                 /* a node that lost an install race, for the next one */
    size_t map_nodes, chunks, carved; /* counters */
    struct {
        WF_ALIGNED wf_pair_t free; /* free blocks of the class */
        wf_pair_t region;          /* {cur, end}: where its next block is carved */
    } cls[LARGE_CLASSES];
} lg;

static void *lg_node_alloc(size_t bytes)
{
    void *n = __atomic_exchange_n(&lg.spare_node, NULL, __ATOMIC_ACQUIRE);
    if (n)
        return n;
    n = os_alloc(bytes, 64); /* always zero-filled */
    if (n)
        __atomic_add_fetch(&lg.map_nodes, 1, __ATOMIC_RELAXED);
    return n;
}

static void lg_node_lost(void *n)
{
    void *none = NULL;
    __atomic_compare_exchange_n(&lg.spare_node, &none, n, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* 0: not in a chunk of ours; INNER: no block starts here (an unaligned pointer reads so too). */
WF_HOT uintptr_t lg_word(const void *p)
{
    uintptr_t w = pm_get(&lg.map, LG_SHIFT, p);
    return w && !wf_is_aligned(p, LG_GRANULE) ? LG_INNER : w;
}

WF_HOT bool lg_set_words(void *p, size_t bytes, uintptr_t w)
{
    return pm_set_shared(&lg.map, LG_SHIFT, p, bytes, w, lg_node_alloc, lg_node_lost);
}

/* p's word from `from` to `to`, if nobody changed it. */
WF_HOT bool lg_claim(void *p, uintptr_t from, uintptr_t to)
{
    uintptr_t *slot = pm_slot(&lg.map, LG_SHIFT, p);
    return slot && __atomic_compare_exchange_n(slot, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

WF_HOT size_t lg_block_size(unsigned cls) { return wf_up(log2b_size(cls), LG_GRANULE); }

/* The class for size bytes aligned to align: the first at least that large whose block size is a
 * multiple of the alignment; LARGE_CLASSES: a chunk of its own. */
WF_HOT unsigned lg_class_for(size_t size, size_t align)
{
    if (size > (size_t)LARGE_CLASS_MAX || size > LG_CHUNK / 2)
        return LARGE_CLASSES;
    unsigned cls = log2b_class(size);
    while (cls < LARGE_CLASSES && (lg_block_size(cls) & (align - 1)))
        cls++;
    return cls < LARGE_CLASSES && lg_block_size(cls) <= LG_CHUNK / 2 ? cls : LARGE_CLASSES;
}

/* The class of a class block of size bytes. */
WF_HOT unsigned lg_class_of(size_t size)
{
    unsigned cls = log2b_class(size);
    while (lg_block_size(cls) != size)
        cls++;
    return cls;
}

WF_SLOW void lg_unchunk(char *base, size_t bytes)
{
    lg_set_words(base, bytes, 0);
    os_free(base, bytes, true);
}

/* A chunk from the os part: every granule INNER (a class chunk), or its first one `word`. */
WF_SLOW char *lg_chunk(size_t bytes, size_t align, uintptr_t word)
{
    char *base = (char *)os_alloc(bytes, align);
    if (!base)
        return NULL;
    if (!wf_is_aligned(base, align) || !lg_set_words(base, word == LG_INNER ? bytes : LG_GRANULE, word)) {
        lg_unchunk(base, bytes);
        return NULL;
    }
    __atomic_add_fetch(&lg.chunks, 1, __ATOMIC_RELAXED);
    release_note(); /* from now on frees may leave memory to purge: the release clock runs */
    return base;
}

/* A new block of class cls from its region; who finds it used up installs a chunk (a loser gives
 * its chunk back and carves from the winner's). */
WF_SLOW char *lg_carve(unsigned cls)
{
    wf_pair_t *region = &lg.cls[cls].region;
    size_t size = lg_block_size(cls);
    wf_pair_t r = pair_peek(region);
    for (;;) {
        char *block = (char *)r.lo;
        if (r.hi - r.lo >= size) {
            if (!pair_cas(region, &r, r.lo + size, r.hi))
                continue;
        } else {
            char *base = lg_chunk(LG_CHUNK, LG_CHUNK, LG_INNER);
            if (!base)
                return NULL;
            if (!pair_cas(region, &r, (uintptr_t)base + size, (uintptr_t)base + LG_CHUNK)) {
                lg_unchunk(base, LG_CHUNK);
                continue;
            }
            block = base;
        }
        __atomic_add_fetch(&lg.carved, size, __ATOMIC_RELAXED);
        return block;
    }
}

WF_HOT void *lg_alloc(size_t size, size_t align)
{
    if (size > PTRDIFF_MAX / 4 || align > (size_t)1 << 40) {
        errno = ENOMEM;
        return NULL;
    }
    if (align < LG_GRANULE)
        align = LG_GRANULE;
    size = wf_up(size ? size : 1, LG_GRANULE);
    unsigned cls = lg_class_for(size, align);
    char *block;
    if (cls < LARGE_CLASSES) {
        size = lg_block_size(cls);
        block = (char *)stack_pop(&lg.cls[cls].free);
        if (!block)
            block = lg_carve(cls);
        if (block)
            lg_set_words(block, 1, size | LG_LIVE); /* its node exists: one store */
    } else {
        block = lg_chunk(size, align, size | LG_DIRECT | LG_LIVE);
    }
    if (wf_unlikely(!block)) {
        errno = ENOMEM;
        return NULL;
    }
    return block;
}

WF_SLOW void lg_bad_free(void *p, uintptr_t w, const char *why)
{
    bool twice = (w & LG_STATE) == LG_FREE;
    report(twice ? ERR_DOUBLE_FREE : ERR_INVALID_FREE, "wfslabm_large", p, twice ? "block already freed" : why);
}

WF_HOT void lg_free(void *p, size_t size, bool sized)
{
    uintptr_t w = lg_word(p);
    if (!w) { /* in no chunk of ours */
        os_free(p, size, sized);
        return;
    }
    size_t bytes = w & ~(uintptr_t)LG_BITS;
    if ((w & LG_STATE) != LG_LIVE || (sized && size > bytes)) {
        lg_bad_free(p, w, w == LG_INNER ? "pointer is not the start of a block" : "sized free larger than the block; ignored");
        return;
    }
    bool direct = (w & LG_DIRECT) != 0;
    if (!lg_claim(p, w, direct ? 0 : (w & ~(uintptr_t)LG_STATE) | LG_FREE)) {
        lg_bad_free(p, lg_word(p), "block changed while being freed (freed twice?)");
        return;
    }
    if (direct)
        os_free(p, bytes, true);
    else {
        stack_push(&lg.cls[lg_class_of(bytes)].free, (wf_node_t *)p);
        release_note();
    }
}

WF_HOT bool lg_getmeta(void *p, size_t *usable)
{
    uintptr_t w = lg_word(p);
    if (!w)
        return os_getmeta(p, usable);
    if ((w & LG_STATE) != LG_LIVE)
        return false;
    *usable = w & ~(uintptr_t)LG_BITS;
    return true;
}

/* Within the block only: blocks are never split. */
WF_HOT bool lg_resize(void *p, size_t n)
{
    uintptr_t w = lg_word(p);
    if (!w)
        return os_resize(p, n);
    return (w & LG_STATE) == LG_LIVE && n <= (w & ~(uintptr_t)LG_BITS);
}

/* A direct block moves with its word (claimed before the move, written at the new address after
 * where the granule allows: else the block is the os part's from then on); a class block stays. */
WF_SLOW bool lg_move(void **pp, size_t n)
{
    void *p = *pp;
    uintptr_t w = lg_word(p);
    if (!w)
        return os_move(pp, n);
    if ((w & LG_STATE) != LG_LIVE || !(w & LG_DIRECT) || !lg_claim(p, w, 0))
        return false;
    size_t want = n > SIZE_MAX / 2 ? n : wf_up(n ? n : 1, LG_GRANULE);
    if (!os_move(pp, want)) {
        lg_set_words(p, 1, w); /* its node exists: one store */
        return false;
    }
    if (wf_is_aligned(*pp, LG_GRANULE))
        (void)lg_set_words(*pp, LG_GRANULE, want | LG_DIRECT | LG_LIVE);
    return true;
}

/* Each class's stack is taken whole (allocations meanwhile carve), its blocks purged but the
 * granule holding the link (all: every one; else those aged by an earlier pass, the others aged
 * now, and the next pass is due after the decay time), then put back in one push. */
WF_HOT size_t lg_release(bool all, uint64_t now_ms, uint64_t *next_ms)
{
    size_t released = 0;
    bool pending = false;
    for (unsigned i = 0; i < LARGE_CLASSES; i++) {
        size_t size = lg_block_size(i);
        wf_node_t *first = stack_take_all(&lg.cls[i].free), *last = first;
        for (wf_node_t *b = first; b; last = b, b = b->next) {
            uintptr_t w = lg_word(b);
            if (w & LG_PURGED)
                continue;
            if (!all && !(w & LG_AGED)) {
                lg_set_words(b, 1, w | LG_AGED);
                pending = true;
                continue;
            }
            if (size > LG_GRANULE && os_purge((char *)b + LG_GRANULE, size - LG_GRANULE, true))
                released += size - LG_GRANULE;
            lg_set_words(b, 1, w | LG_AGED | LG_PURGED);
        }
        if (first)
            stack_push_chain(&lg.cls[i].free, first, last);
    }
    if (pending && now_ms + LG_DECAY_MS < *next_ms)
        *next_ms = now_ms + LG_DECAY_MS;
    return released;
}

/* =============================================================================================
 * The small part (the wait-free slab). A slab: a header (link, owner's cursor, purged flag; the
 * control word on its own line; the bitmap, a set bit per free object), then the objects of one
 * class. Its map (64 KiB granules) holds each slab's class + 1. */
enum { SLAB_SHIFT = 16 };
#define SL_OWNED    ((uint64_t)0)
#define SL_DETACHED ((uint64_t)1 << 62)
#define SL_QUEUED   ((uint64_t)2 << 62)
#define SL_EMPTY    ((uint64_t)3 << 62)
#define SL_STATE    ((uint64_t)3 << 62)
#define SL_EPOCH1   ((uint64_t)1 << 40)
#define SL_EPOCHS   (((uint64_t)1 << 62) - SL_EPOCH1)
#define SL_COUNT    (SL_EPOCH1 - 1)

struct slab {
    wf_node_t link;  /* in a stack: the next slab */
    uint32_t cursor; /* owner only: the bitmap word it looks at first */
    uint32_t purged; /* in the empty stack: its pages past the header were dropped */
    WF_ALIGNED uint64_t ctl;
    WF_ALIGNED uint64_t bits[];
};

/* Bytes at a slab's start never purged: its header and the largest bitmap (16-byte objects). */
#define SLAB_HEADER_PAGE wf_up(offsetof(struct slab, bits) + (SLAB_SIZE / 16 + 63) / 64 * 8, 4096)

struct slab_geo {
    uint32_t size, count, words, first; /* object bytes, objects, bitmap words, first object's offset */
    uint64_t recip;                     /* ceil(2^40 / size): offset -> index by a multiply */
    uint64_t last_mask;                 /* the bits of the last bitmap word that are objects */
    uint32_t threshold;                 /* frees that make a detached slab worth adopting */
};

struct slab_owner {
    wf_node_t link; /* in the stack of spare records */
    unsigned owned, victim;
    struct slab *cur[SMALL_CLASSES];
};

static struct {
    struct slab_geo geo[SMALL_CLASSES];
    size_t max_size; /* the largest request served (0 until start-up) */
    pagemap_t map;
    void *spare_node;
    size_t map_nodes, slabs, empties; /* counters */
    wf_pair_t empty, owners;
    struct {
        WF_ALIGNED wf_pair_t partial;
        size_t emptied; /* about how many slabs on the stack are all free (a hint) */
    } cls[SMALL_CLASSES];
} sl;

static __thread struct slab_owner *sl_tls __attribute__((tls_model("initial-exec")));

static void *sl_node_alloc(size_t bytes)
{
    void *n = __atomic_exchange_n(&sl.spare_node, NULL, __ATOMIC_ACQUIRE);
    if (n)
        return n;
    n = os_alloc(bytes, 64); /* always zero-filled */
    if (n)
        __atomic_add_fetch(&sl.map_nodes, 1, __ATOMIC_RELAXED);
    return n;
}

static void sl_node_lost(void *n)
{
    void *none = NULL;
    __atomic_compare_exchange_n(&sl.spare_node, &none, n, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* Each class's layout; classes served while a slab holds MIN_OBJECTS of them. */
static void sl_create(void)
{
    size_t max = 0;
    for (unsigned i = 0; i < SMALL_CLASSES; i++) {
        struct slab_geo *g = &sl.geo[i];
        size_t size = prime_size(i), head = offsetof(struct slab, bits);
        size_t count = (SLAB_SIZE - head) / size, words = (count + 63) / 64;
        size_t first = wf_up(head + words * 8, 16);
        count = (SLAB_SIZE - first) / size;
        if (count < MIN_OBJECTS)
            break; /* sizes grow: no larger class fits either */
        words = (count + 63) / 64;
        g->size = (uint32_t)size;
        g->count = (uint32_t)count;
        g->words = (uint32_t)words;
        g->first = (uint32_t)first;
        g->recip = (((uint64_t)1 << 40) + size - 1) / size;
        g->last_mask = count % 64 ? ((uint64_t)1 << (count % 64)) - 1 : ~(uint64_t)0;
        g->threshold = (uint32_t)(count / 4 ? count / 4 : 1);
        max = size;
    }
    __atomic_store_n(&sl.max_size, max, __ATOMIC_RELEASE);
}

WF_HOT struct slab *slab_of(const void *p) { return (struct slab *)((uintptr_t)p & ~(uintptr_t)(SLAB_SIZE - 1)); }

/* The owner's next object of s, or NULL: at most g->words loads; only the owner clears bits. */
WF_HOT void *sl_take(struct slab *s, const struct slab_geo *g)
{
    unsigned w = s->cursor;
    for (unsigned i = 0; i < g->words; i++) {
        uint64_t v = __atomic_load_n(&s->bits[w], __ATOMIC_RELAXED);
        if (wf_likely(v)) {
            unsigned b = (unsigned)__builtin_ctzll(v);
            __atomic_fetch_and(&s->bits[w], ~((uint64_t)1 << b), __ATOMIC_ACQUIRE);
            s->cursor = w;
            return (char *)s + g->first + (size_t)(w * 64 + b) * g->size;
        }
        w = w + 1 == g->words ? 0 : w + 1;
    }
    return NULL;
}

/* s's free objects now (an estimate while others free). */
WF_HOT size_t sl_free_objects(struct slab *s, const struct slab_geo *g)
{
    size_t n = 0;
    for (unsigned w = 0; w < g->words; w++)
        n += (size_t)__builtin_popcountll(__atomic_load_n(&s->bits[w], __ATOMIC_SEQ_CST));
    return n;
}

WF_HOT void sl_push_empty(struct slab *s)
{
    __atomic_add_fetch(&sl.empties, 1, __ATOMIC_RELAXED);
    stack_push(&sl.empty, &s->link);
    release_note();
}

/* A detached slab of epoch `seen` all of whose objects are free goes to the empty stack, once:
 * whoever wins the CAS pushes it. */
WF_SLOW void sl_empty_if_done(struct slab *s, const struct slab_geo *g, uint64_t seen)
{
    uint64_t c = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
    if ((c & SL_STATE) != SL_DETACHED || (c & SL_EPOCHS) != (seen & SL_EPOCHS))
        return; /* queued, emptied, or in its next life: not this look's bits to read */
    if (sl_free_objects(s, g) != g->count)
        return;
    c = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
    while ((c & SL_STATE) == SL_DETACHED && (c & SL_EPOCHS) == (seen & SL_EPOCHS))
        if (__atomic_compare_exchange_n(&s->ctl, &c, SL_EMPTY | (c & SL_EPOCHS), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            (void)sl_free_objects(s, g); /* ours now: these loads acquire every free */
            sl_push_empty(s);
            return;
        }
}

/* The owner lets s go: empty if all free, queued if a quarter is, else detached (its frees are
 * counted, and the one that reaches the quarter queues it). */
WF_SLOW void sl_detach(struct slab *s, unsigned cls)
{
    const struct slab_geo *g = &sl.geo[cls];
    uint64_t epoch = __atomic_load_n(&s->ctl, __ATOMIC_RELAXED) & SL_EPOCHS;
    size_t f = sl_free_objects(s, g);
    if (f == g->count) {
        __atomic_store_n(&s->ctl, SL_EMPTY | epoch, __ATOMIC_SEQ_CST);
        sl_push_empty(s);
    } else if (f >= g->threshold) {
        __atomic_store_n(&s->ctl, SL_QUEUED | epoch, __ATOMIC_SEQ_CST);
        stack_push(&sl.cls[cls].partial, &s->link);
    } else {
        /* Frees that saw it owned after the count are in nobody's count; if they were the last,
         * nobody else would find it done: look again. */
        __atomic_exchange_n(&s->ctl, SL_DETACHED | epoch | f, __ATOMIC_SEQ_CST);
        sl_empty_if_done(s, g, epoch);
    }
}

/* s becomes the thread's slab of class cls, its epoch bumped. */
WF_HOT void sl_install(struct slab_owner *t, unsigned cls, struct slab *s, uint64_t epoch)
{
    __atomic_store_n(&s->ctl, SL_OWNED | ((epoch + SL_EPOCH1) & SL_EPOCHS), __ATOMIC_SEQ_CST);
    t->cur[cls] = s;
    t->owned++;
}

/* An all-free slab from the partial stack of a class whose hint says it has one: a few pops per
 * class, the others pushed back. */
WF_SLOW struct slab *sl_scavenge(void)
{
    for (unsigned i = 0; i < SMALL_CLASSES; i++) {
        if (!__atomic_load_n(&sl.cls[i].emptied, __ATOMIC_RELAXED))
            continue;
        wf_node_t *first = NULL, *last = NULL;
        struct slab *found = NULL;
        for (unsigned k = 0; k < 4 && !found; k++) {
            struct slab *s = (struct slab *)stack_pop(&sl.cls[i].partial);
            if (!s)
                break;
            if (sl_free_objects(s, &sl.geo[i]) == sl.geo[i].count) {
                found = s;
                break;
            }
            s->link.next = first, first = &s->link;
            if (!last)
                last = first;
        }
        if (first)
            stack_push_chain(&sl.cls[i].partial, first, last);
        if (found) {
            __atomic_sub_fetch(&sl.cls[i].emptied, 1, __ATOMIC_RELAXED);
            return found;
        }
        __atomic_store_n(&sl.cls[i].emptied, 0, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* A slab of class cls, formatted with every object free: from the empty stack, another class's
 * all-free ones, or the large part. */
WF_SLOW struct slab *sl_fresh(unsigned cls, uint64_t *epoch)
{
    const struct slab_geo *g = &sl.geo[cls];
    struct slab *s = (struct slab *)stack_pop(&sl.empty);
    if (s)
        __atomic_sub_fetch(&sl.empties, 1, __ATOMIC_RELAXED);
    else
        s = sl_scavenge();
    if (s) {
        *epoch = __atomic_load_n(&s->ctl, __ATOMIC_RELAXED);
    } else {
        s = (struct slab *)lg_alloc(SLAB_SIZE, SLAB_SIZE);
        if (!s)
            return NULL;
        if (!wf_is_aligned(s, SLAB_SIZE)) {
            lg_free(s, SLAB_SIZE, false);
            return NULL;
        }
        __atomic_add_fetch(&sl.slabs, 1, __ATOMIC_RELAXED);
        *epoch = 0;
        release_note(); /* from now on slabs may empty: the release clock runs */
    }
    /* The class first: a late free of the slab's old life then reads a layout that matches its
     * bits (all set: a double free) or none. */
    if (!pm_set_shared(&sl.map, SLAB_SHIFT, s, 1, cls + 1, sl_node_alloc, sl_node_lost)) {
        sl_push_empty(s);
        return NULL;
    }
    s->cursor = 0;
    s->purged = 0;
    for (unsigned w = 0; w < g->words; w++)
        __atomic_store_n(&s->bits[w], w + 1 == g->words ? g->last_mask : ~(uint64_t)0, __ATOMIC_RELAXED);
    return s;
}

WF_SLOW struct slab_owner *sl_owner_make(void)
{
    if (!sl.max_size || !thread_attach())
        return NULL;
    struct slab_owner *t = (struct slab_owner *)stack_pop(&sl.owners);
    if (!t && !(t = (struct slab_owner *)os_alloc(sizeof *t, 64)))
        return NULL;
    memset(t, 0, sizeof *t);
    return sl_tls = t;
}

/* The rest of malloc: the thread's slab of the class is used up, or there is none. */
WF_SLOW void *sl_alloc_slow(size_t size, size_t align, unsigned cls)
{
    struct slab_owner *t = sl_tls ? sl_tls : sl_owner_make();
    if (!t) /* no exit hook for this thread: not served here */
        return lg_alloc(size, align);
    const struct slab_geo *g = &sl.geo[cls];
    if (t->cur[cls]) {
        struct slab *old = t->cur[cls];
        t->cur[cls] = NULL;
        t->owned--;
        sl_detach(old, cls);
    }
    while (t->owned >= TLLABS) { /* make room: the next class round the thread's slabs */
        unsigned v = t->victim = t->victim + 1 >= SMALL_CLASSES ? 0 : t->victim + 1;
        if (t->cur[v]) {
            struct slab *old = t->cur[v];
            t->cur[v] = NULL;
            t->owned--;
            sl_detach(old, v);
        }
    }
    for (unsigned tries = 0; tries < 4; tries++) { /* a partial slab of the class */
        struct slab *s = (struct slab *)stack_pop(&sl.cls[cls].partial);
        if (!s)
            break;
        sl_install(t, cls, s, __atomic_load_n(&s->ctl, __ATOMIC_RELAXED));
        void *p = sl_take(s, g);
        if (p)
            return p;
        t->cur[cls] = NULL; /* its frees were counted, not made yet: let it wait for them */
        t->owned--;
        sl_detach(s, cls);
    }
    uint64_t epoch;
    struct slab *s = sl_fresh(cls, &epoch);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    sl_install(t, cls, s, epoch);
    return sl_take(s, g);
}

WF_HOT void *sl_alloc(size_t size, size_t align)
{
    if (wf_unlikely(size > SLAB_SIZE || size > sl.max_size || align > 16))
        return lg_alloc(size, align);
    unsigned cls = prime_class(size);
    struct slab_owner *t = sl_tls;
    if (wf_likely(t != NULL) && wf_likely(t->cur[cls] != NULL)) {
        void *p = sl_take(t->cur[cls], &sl.geo[cls]);
        if (wf_likely(p != NULL))
            return p;
    }
    return sl_alloc_slow(size, align, cls);
}

/* p's slab's class + 1 in *word (0: not a slab of ours) and p's index; false: not an object start. */
WF_HOT bool sl_locate(const void *p, uintptr_t *word, const struct slab_geo **geo, size_t *index)
{
    uintptr_t w = pm_get(&sl.map, SLAB_SHIFT, p);
    *word = w;
    if (!w)
        return false;
    const struct slab_geo *g = &sl.geo[w - 1];
    size_t off = (uintptr_t)p - (uintptr_t)slab_of(p) - g->first;
    size_t i = (size_t)(((uint64_t)off * g->recip) >> 40); /* off < 2^24: exact */
    *geo = g, *index = i;
    return i < g->count && i * g->size == off;
}

WF_SLOW void sl_bad_free(const void *p, bool twice)
{
    report(twice ? ERR_DOUBLE_FREE : ERR_INVALID_FREE, "wfslabm_small", p,
           twice ? "object already freed" : "pointer is not the start of an object");
}

WF_HOT void sl_free(void *p, size_t size, bool sized)
{
    uintptr_t w;
    const struct slab_geo *g;
    size_t i;
    if (wf_unlikely(!sl_locate(p, &w, &g, &i))) {
        if (!w)
            lg_free(p, size, sized);
        else
            sl_bad_free(p, false);
        return;
    }
    struct slab *s = slab_of(p);
    uint64_t *word = &s->bits[i / 64], bit = (uint64_t)1 << (i % 64);
    if (wf_unlikely((sized && size > g->size) || (__atomic_load_n(word, __ATOMIC_RELAXED) & bit))) {
        sl_bad_free(p, !sized || size <= g->size);
        return;
    }
    uint64_t ctl = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
    bool queue = false;
    if (wf_unlikely((ctl & SL_STATE) == SL_DETACHED)) {
        uint64_t old = __atomic_fetch_add(&s->ctl, 1, __ATOMIC_SEQ_CST);
        if ((old & ~SL_COUNT) == (ctl & ~SL_COUNT) && (old & SL_COUNT) + 1 == g->threshold) {
            __atomic_fetch_add(&s->ctl, SL_QUEUED - SL_DETACHED, __ATOMIC_SEQ_CST);
            queue = true;
        }
    }
    uint64_t old = __atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
    if (wf_unlikely(old & bit)) {
        sl_bad_free(p, true);
        return;
    }
    /* After the bit, only a push decided above or epoch-checked looks: the slab may be in another
     * life by now. A free that fills its word looks whether the whole slab is free. */
    if (wf_unlikely(queue))
        stack_push(&sl.cls[w - 1].partial, &s->link);
    else if (wf_unlikely((old | bit) == (word + 1 == &s->bits[g->words] ? g->last_mask : ~(uint64_t)0))) {
        ctl = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
        if ((ctl & SL_STATE) == SL_DETACHED)
            sl_empty_if_done(s, g, ctl);
        else if ((ctl & SL_STATE) == SL_QUEUED && sl_free_objects(s, g) == g->count) {
            __atomic_add_fetch(&sl.cls[w - 1].emptied, 1, __ATOMIC_RELAXED);
            release_note();
        }
    }
}

WF_HOT bool sl_getmeta(void *p, size_t *usable)
{
    uintptr_t w;
    const struct slab_geo *g;
    size_t i;
    if (!sl_locate(p, &w, &g, &i))
        return w ? false : lg_getmeta(p, usable);
    if (__atomic_load_n(&slab_of(p)->bits[i / 64], __ATOMIC_RELAXED) & ((uint64_t)1 << (i % 64)))
        return false; /* free */
    *usable = g->size;
    return true;
}

WF_HOT bool sl_resize(void *p, size_t n)
{
    uintptr_t w;
    const struct slab_geo *g;
    size_t i;
    if (!sl_locate(p, &w, &g, &i))
        return w ? false : lg_resize(p, n);
    return n <= g->size;
}

/* Its objects stay in their slabs; other blocks are the large part's to move. */
WF_SLOW bool sl_move(void **pp, size_t n)
{
    uintptr_t w;
    const struct slab_geo *g;
    size_t i;
    return !sl_locate(*pp, &w, &g, &i) && !w && lg_move(pp, n);
}

/* All-free slabs of the partial stacks move to the empty stack, whose slabs are then purged past
 * their header's page: all of them (all), or all but TLLABS. Then the large part's release. */
WF_HOT size_t sl_release(bool all, uint64_t now_ms, uint64_t *next_ms)
{
    size_t released = 0;
    for (unsigned i = 0; i < SMALL_CLASSES; i++) {
        wf_node_t *first = stack_take_all(&sl.cls[i].partial), *keep = NULL, *keep_last = NULL;
        while (first) {
            struct slab *s = (struct slab *)first;
            first = first->next;
            if (sl_free_objects(s, &sl.geo[i]) == sl.geo[i].count) {
                uint64_t epoch = __atomic_load_n(&s->ctl, __ATOMIC_RELAXED) & SL_EPOCHS;
                __atomic_store_n(&s->ctl, SL_EMPTY | epoch, __ATOMIC_SEQ_CST);
                __atomic_add_fetch(&sl.empties, 1, __ATOMIC_RELAXED);
                stack_push(&sl.empty, &s->link);
            } else {
                s->link.next = keep, keep = &s->link;
                if (!keep_last)
                    keep_last = keep;
            }
        }
        if (keep)
            stack_push_chain(&sl.cls[i].partial, keep, keep_last);
        __atomic_store_n(&sl.cls[i].emptied, 0, __ATOMIC_RELAXED);
    }
    size_t keep = all ? 0 : TLLABS, seen = 0;
    wf_node_t *first = stack_take_all(&sl.empty), *last = first;
    for (wf_node_t *n = first; n; last = n, n = n->next) {
        struct slab *s = (struct slab *)n;
        if (++seen <= keep || s->purged)
            continue;
        if (os_purge((char *)s + SLAB_HEADER_PAGE, SLAB_SIZE - SLAB_HEADER_PAGE, true)) {
            s->purged = 1;
            released += SLAB_SIZE - SLAB_HEADER_PAGE;
        }
    }
    if (first)
        stack_push_chain(&sl.empty, first, last);
    return released + lg_release(all, now_ms, next_ms);
}

/* The thread's slabs are detached; its record waits for the next thread. */
WF_HOT void sl_thread_exit(void)
{
    struct slab_owner *t = sl_tls;
    if (t) {
        sl_tls = NULL;
        for (unsigned i = 0; i < SMALL_CLASSES; i++)
            if (t->cur[i])
                sl_detach(t->cur[i], i);
        stack_push(&sl.owners, &t->link);
    }
}

/* May run again, and attach again, when a later key destructor allocates. */
static void thread_exit_all(void)
{
    sl_thread_exit();
    os_thread_exit();
}

/* =============================================================================================
 * The socket: start-up, the background release thread, fork, and the malloc(3) API. */
enum { SOCK_UNINIT, SOCK_INITIALISING, SOCK_READY };
static int sock_state;
static int sock_hooks_registered;
static pthread_mutex_t sock_init_lock = PTHREAD_MUTEX_INITIALIZER;

enum { BG_NONE, BG_RUNNING, BG_FAILED };
static int bg_state;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The release clock: a pass (what has decayed), then at least 50 ms, then a sleep until the next
 * pass is due or a note comes. */
static void *bg_main(void *unused)
{
    (void)unused;
    for (;;) {
        __atomic_store_n(&rel_pending, 0, __ATOMIC_SEQ_CST);
        uint64_t next = UINT64_MAX;
        (void)sl_release(false, now_ms(), &next);
        struct timespec t = { 0, 50 * 1000000L };
        nanosleep(&t, NULL);
        uint64_t now = now_ms();
        if (next != UINT64_MAX && next <= now)
            continue;
        /* The flag and the note's exchange, both sequentially consistent: one side sees the other. */
        __atomic_store_n(&rel_sleeper, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&rel_pending, __ATOMIC_SEQ_CST)) {
            uint64_t ms = next == UINT64_MAX ? 0 : next - now;
            struct timespec limit = { (time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L };
            int saved = errno;
            syscall(SYS_futex, &rel_pending, FUTEX_WAIT_PRIVATE, 0, next == UINT64_MAX ? NULL : &limit, NULL, 0);
            errno = saved;
        }
        __atomic_store_n(&rel_sleeper, 0, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

WF_SLOW void bg_start(void)
{
    int none = BG_NONE;
    if (!__atomic_compare_exchange_n(&bg_state, &none, BG_RUNNING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    rel_wake = futex_wake_all;
    int saved = errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits the mask: it runs no handler */
    pthread_attr_t attr;
    pthread_t t;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, (size_t)128 << 10);
        rc = pthread_create(&t, &attr, bg_main, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_setname_np(t, "sunmao-release");
    else /* memory still goes back on malloc_trim */
        __atomic_store_n(&bg_state, BG_FAILED, __ATOMIC_RELEASE);
    errno = saved;
}

/* After an allocation, with no lock of ours held: start the clock once something is pending. */
WF_HOT void bg_check(void)
{
    if (wf_unlikely(__atomic_load_n(&rel_pending, __ATOMIC_RELAXED)) &&
        __atomic_load_n(&bg_state, __ATOMIC_RELAXED) == BG_NONE)
        bg_start();
}

/* Fork: the registry lock is the only lock on any path (the slabs and the large part take none).
 * A fork from a handler that interrupted this thread's own section (or its wait for the lock)
 * leaves the lock as it is in both processes: the interrupted call goes on and releases it
 * (glibc's tst-mallocfork2 pattern; tests/api/fork_signal). Every other fork takes it. */
static __thread int fork_kept_lock __attribute__((tls_model("initial-exec")));
static void fork_prepare(void)
{
    fork_kept_lock = os_lock_mine;
    if (!fork_kept_lock)
        os_lock();
}
static void fork_parent(void)
{
    if (!fork_kept_lock)
        os_unlock();
    fork_kept_lock = 0;
}
static void fork_child(void)
{
    if (!fork_kept_lock) {
        __atomic_store_n(&os.lock, 0, __ATOMIC_RELAXED);
        os_lock_mine = 0;
    }
    fork_kept_lock = 0;
    /* The release thread is not copied: the child starts its own when it needs one. */
    if (__atomic_load_n(&bg_state, __ATOMIC_RELAXED) == BG_RUNNING)
        __atomic_store_n(&bg_state, BG_NONE, __ATOMIC_RELAXED);
    __atomic_store_n(&rel_sleeper, 0, __ATOMIC_RELAXED);
}

/* Start-up, by the first request: no memory of its own, so allocations from the dynamic linker,
 * libc and constructors before main all work. */
WF_SLOW bool sock_init_slow(void)
{
    pthread_mutex_lock(&sock_init_lock);
    int state = __atomic_load_n(&sock_state, __ATOMIC_ACQUIRE);
    if (state == SOCK_UNINIT) {
        __atomic_store_n(&sock_state, SOCK_INITIALISING, __ATOMIC_RELAXED);
        sl_create();
        (void)os_page_size();
        state = SOCK_READY;
        __atomic_store_n(&sock_state, state, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&sock_init_lock);
    if (state != SOCK_READY)
        return false;
    /* Outside the init lock, once ready: pthread_atfork allocates. */
    if (!__atomic_exchange_n(&sock_hooks_registered, 1, __ATOMIC_ACQ_REL))
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    return true;
}

WF_HOT bool sock_ready(void)
{
    return wf_likely(__atomic_load_n(&sock_state, __ATOMIC_ACQUIRE) == SOCK_READY) || sock_init_slow();
}

/* Every allocation: the checks, start-up, the small part (which passes on what it does not serve). */
WF_HOT void *sock_alloc(size_t size, size_t align, bool zero)
{
    if (wf_unlikely(size > MAX_REQUEST || align > MAX_REQUEST / 2 || !sock_ready())) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = sl_alloc(size ? size : 1, align < MIN_ALIGN ? MIN_ALIGN : align);
    bg_check();
    if (wf_unlikely(!p)) {
        errno = ENOMEM;
        return NULL;
    }
    if (zero) /* no part hands out fresh memory through the slabs' path: always cleared */
        memset(p, 0, size);
    return p;
}

/* No clock start from here: glibc frees under its own locks (a thread stack's TLS under the stack
 * cache lock, which pthread_create takes). The note stays pending for the next allocation. */
WF_HOT void sock_free(void *ptr, size_t size, bool sized)
{
    if (!ptr)
        return;
    sl_free(ptr, size, sized);
}

/* Usable size of a live block; 0 (after a report) for a pointer no part owns. */
WF_HOT size_t sock_usable(void *ptr, const char *api)
{
    size_t usable;
    if (wf_likely(sock_ready() && sl_getmeta(ptr, &usable)))
        return usable;
    report(ERR_INVALID_FREE, api, ptr, "pointer was not allocated here");
    return 0;
}

WF_EXPORT void *WF_API(malloc)(size_t size) { return sock_alloc(size, MIN_ALIGN, false); }

WF_EXPORT void WF_API(free)(void *ptr) { sock_free(ptr, 0, false); }

WF_EXPORT void *WF_API(calloc)(size_t n, size_t size)
{
    size_t total;
    if (wf_unlikely(__builtin_mul_overflow(n, size, &total)))
        total = SIZE_MAX; /* refused with ENOMEM like every oversized request */
    return sock_alloc(total, MIN_ALIGN, true);
}

/* A move of 4 MiB or more gives back the old block's pages already copied as the copy goes, so
 * it holds the block about once rather than twice: as the framework's socket does. */
static void sock_move_copy(char *to, char *from, size_t n)
{
    if (n < ((size_t)4 << 20)) {
        memcpy(to, from, n);
        return;
    }
    size_t page = os_page_size(), chunk = (size_t)1 << 20;
    uintptr_t purged = wf_up((uintptr_t)from, page);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < chunk ? n - done : chunk;
        memcpy(to + done, from + done, k);
        done += k;
        uintptr_t end = ((uintptr_t)from + done) & ~(uintptr_t)(page - 1);
        if (end > purged) {
            (void)os_purge((void *)purged, end - purged, true);
            purged = end;
        }
    }
}

WF_EXPORT void *WF_API(realloc)(void *ptr, size_t size)
{
    if (!ptr)
        return sock_alloc(size, MIN_ALIGN, false);
    if (size == 0) { /* glibc's answer: free, NULL */
        sock_free(ptr, 0, false);
        return NULL;
    }
    if (wf_unlikely(size > MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t usable = sock_usable(ptr, "realloc");
    if (wf_unlikely(usable == 0)) {
        errno = EINVAL;
        return NULL;
    }
    if (size <= usable && size >= usable / 2) /* fits, and wastes at most half */
        return ptr;
    /* A shrink that the parts keep whole (the block still fits its class) moves when more than
     * half the block, and at least a page, would stay spare: as the framework's socket does. */
    if (sl_resize(ptr, size)) {
        if (size > usable)
            return ptr;
        size_t now = sock_usable(ptr, "realloc");
        if (now / 2 < size || now - size < os_page_size())
            return ptr;
    }
    /* A large growth moves the pages where the parts can (no copy): as the framework's socket does. */
    void *moved = ptr;
    if (size > usable && usable >= ((size_t)4 << 20) && sl_move(&moved, size))
        return moved;
    moved = sock_alloc(size, MIN_ALIGN, false);
    if (!moved)
        return size <= usable ? ptr : NULL; /* a shrink that cannot move still succeeds */
    sock_move_copy((char *)moved, (char *)ptr, size < usable ? size : usable);
    sock_free(ptr, 0, false);
    return moved;
}

WF_EXPORT void *WF_API(reallocarray)(void *ptr, size_t n, size_t size)
{
    size_t total;
    if (wf_unlikely(__builtin_mul_overflow(n, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    return WF_API(realloc)(ptr, total);
}

WF_EXPORT int WF_API(posix_memalign)(void **out, size_t align, size_t size)
{
    if (!wf_pow2(align) || align % sizeof(void *) != 0)
        return EINVAL;
    int saved = errno; /* the result is the return value; errno stays */
    void *p = sock_alloc(size, align, false);
    errno = saved;
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

WF_EXPORT void *WF_API(aligned_alloc)(size_t align, size_t size)
{
    if (!wf_pow2(align)) { /* C17 DR 460 */
        errno = EINVAL;
        return NULL;
    }
    return sock_alloc(size, align, false);
}

/* Any alignment, rounded up to a power of two as glibc does; one no block can have is a request
 * too large (ENOMEM, as glibc answers). */
WF_EXPORT void *WF_API(memalign)(size_t align, size_t size)
{
    if (align > MAX_REQUEST / 2) {
        errno = ENOMEM;
        return NULL;
    }
    if (!wf_pow2(align))
        align = align ? (size_t)1 << wf_log2_ceil(align) : MIN_ALIGN;
    return sock_alloc(size, align, false);
}

WF_EXPORT void *WF_API(valloc)(size_t size) { return sock_alloc(size, os_page_size(), false); }

WF_EXPORT void *WF_API(pvalloc)(size_t size)
{
    size_t page = os_page_size();
    size_t rounded = wf_up(size ? size : 1, page);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return sock_alloc(rounded, page, false);
}

WF_EXPORT size_t WF_API(malloc_usable_size)(void *ptr) { return ptr ? sock_usable(ptr, "malloc_usable_size") : 0; }

/* Gives back every page held free, now: 1 if some was. */
WF_EXPORT int WF_API(malloc_trim)(size_t pad)
{
    (void)pad;
    if (!sock_ready())
        return 0;
    uint64_t next = UINT64_MAX;
    return sl_release(true, now_ms(), &next) != 0;
}

/* C23: the caller states the size it asked for; a larger one is reported and ignored. */
WF_EXPORT void WF_API(free_sized)(void *ptr, size_t size) { sock_free(ptr, size, true); }
WF_EXPORT void WF_API(free_aligned_sized)(void *ptr, size_t align, size_t size)
{
    (void)align;
    sock_free(ptr, size, true);
}

#ifndef SM_PREFIX
/* glibc's own names for its allocator (__libc_malloc ..., cfree), bound to this one as malloc_socket
 * binds them: a block crosses between the two families both ways. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes" /* glibc's caller hints; the same function */
#endif
WF_EXPORT void *__libc_malloc(size_t size) __attribute__((alias("malloc")));
WF_EXPORT void __libc_free(void *ptr) __attribute__((alias("free")));
WF_EXPORT void cfree(void *ptr) __attribute__((alias("free")));
WF_EXPORT void *__libc_calloc(size_t n, size_t size) __attribute__((alias("calloc")));
WF_EXPORT void *__libc_realloc(void *ptr, size_t size) __attribute__((alias("realloc")));
WF_EXPORT void *__libc_memalign(size_t align, size_t size) __attribute__((alias("memalign")));
WF_EXPORT void *__libc_valloc(size_t size) __attribute__((alias("valloc")));
WF_EXPORT void *__libc_pvalloc(size_t size) __attribute__((alias("pvalloc")));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* For the C++ operator shim linked into the drop-in library (src/cxx/new_delete.cc), hidden so it
 * always pairs with this library's allocator. */
__attribute__((visibility("hidden"))) void *sm_cxx_alloc(size_t size, size_t align)
{
    return sock_alloc(size, align, false);
}
__attribute__((visibility("hidden"))) void sm_cxx_free(void *ptr, size_t size) { sock_free(ptr, size, size != 0); }
#endif
