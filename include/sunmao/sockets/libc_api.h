/* The malloc(3) API over a composed layer stack: the request semantics both malloc_socket and
 * custom_socket share (paper Table 1: the socket's C_m, C_f and D functions). Template, included by
 * those two sockets only, with
 *   SM_NEXT        the top layer of the composition
 *   SM_ERR         err policy for bad pointers handed to realloc/malloc_usable_size
 *   SM_API(name)   the exported name of API function `name`
 *   SM_SOCKET_BACKGROUND   (optional, default 1) 1: a background thread runs the stack's release
 *                  clock (below); 0: memory goes back only on the layers' own request paths and
 *                  on malloc_trim
 *   SM_SOCKET_MOVE_PURGE_MIN  (optional, default 4 MiB) a realloc that moves a block of at least
 *                  this many bytes first asks the stack to move its pages (capability MOVE), and
 *                  where it cannot, gives back the old block's pages as it copies them
 *
 * Start-up: the first request that reaches the stack initialises it (secret seed, layer create
 * hooks bottom-up, then the fork handlers) with no memory of its own, so allocations from libc
 * internals, dlsym and constructors before main all work.
 * Fork safety: pthread_atfork handlers take every layer lock top-down before fork and release
 * them (parent) or re-create them (child), so a child of a multi-threaded parent never inherits
 * a lock held by a thread that does not exist there.
 *
 * The hit path. A top layer with capability HIT (core/capability.h: a thread cache) has
 *   void *N_alloc_hit(size_t size)                       an object of >= size bytes aligned to 16, or NULL
 *   void *N_aligned_hit(size_t size, size_t align)       the same aligned to align (the default misses)
 *   size_t N_usable_hit(const void *p)                   p's usable size, or 0 (the default): getmeta
 *   bool  N_free_hit(void *p, size_t size, unsigned flags, uintptr_t *owner_word)  true if it took
 *                                                        p (flags: SM_F_SIZED); on a miss, what
 *                                                        it read of p's owner, for the miss
 * which touch nothing shared, change nothing when they miss, and are safe before the stack is
 * created. malloc and free then are: the hit, else one out-of-line call (a tail call) to the
 * socket's miss function, which makes every check and runs the whole stack. So the hit path tests
 * nothing of the socket's: a request too large or too aligned for any object misses the layer's own
 * size test, and readiness needs no test at all, because start-up runs in the miss functions and
 * nothing below the top layer is ever reached except through them (or through realloc and
 * malloc_usable_size, which check readiness first):
 *   - allocations before main, from dlsym or libc: a thread's cache starts out empty, so the first
 *     request of every thread misses, and the process's first request initialises the stack;
 *   - the secret is seeded before any layer below the top makes a block (sheap and malloc_heap tag
 *     blocks with it; the thread cache's tags are made in its slow paths, after start-up too);
 *   - the fork handlers are registered before any layer lock can be taken: locks live below the
 *     top layer, and the hit paths take none. A process that forks before its first miss has no
 *     allocator state to protect; its child starts up on its own first miss;
 *   - a free that misses also runs start-up (say, the first request of the process is a sized
 *     free: the cache's slow path would otherwise allocate from an uncreated stack);
 *   - thread exit: start-up makes the top layer's thread_exit the composition's exit
 *     (platform/lifecycle.h); each layer attaches a thread when it makes state for it, on a slow
 *     path, so the socket keeps no per-thread state and no thread-exit option of its own.
 * Without a hit path (a tlsf or slab top layer), every request tests readiness first, as the
 * layers below it may not run before their create hooks.
 *
 * Giving memory back (core/release.h). malloc_trim releases everything the layers hold free, now.
 * The background thread runs the release clock: it sleeps (futex) until a layer notes that it holds
 * memory that time will free, then calls the stack's L_release at the times the layers ask for,
 * at most every SM_SOCKET_RELEASE_MIN_MS, and sleeps again when nothing is pending. It is started
 * lazily, by the first whole-stack request after the first note (no lock is held there, so
 * pthread_create may allocate), with every signal blocked (it never runs a handler) and detached;
 * a forked child starts its own the same way. Processes that free nothing medium or large never
 * get one. So RSS follows frees within the decay times even when the program goes idle or only
 * allocates small blocks, with nothing added to the hit paths. */
#include <stdint.h>
#include <string.h>
#include "../core/bits.h"
#include "../core/conf.h"
#include "../core/errnum.h"
#include "../core/layer.h"
#include "../core/secret.h"
#include "../platform/platform.h"
#include "../policies/sync/owner.h"
/* First-class heaps (sockets/heap_api.h): their errors go to this socket's err policy. */
#define SM_HEAP_RAISE SM_ERR_FN(raise)
#include "heap/heap.h"

#ifndef SM_NEXT
#error "socket: define SM_NEXT (the top layer of the composition) before including"
#endif
#ifndef SM_ERR
#error "socket: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_API
#error "socket: define SM_API(name), the exported name of each API function"
#endif

_Static_assert(SM_PROP(SM_NEXT, thread_safe), "socket: the layer below a malloc(3) socket must be thread-safe");
_Static_assert(SM_PROP(SM_NEXT, min_align) >= SM_MIN_ALIGN, "socket: the layer below must align blocks to 16 bytes");

/* Requests above this are refused up front, as glibc does: no object may exceed PTRDIFF_MAX. */
#define SM_SOCKET_MAX_REQUEST ((size_t)PTRDIFF_MAX)

enum { SM_SOCKET_UNINIT, SM_SOCKET_INITIALISING, SM_SOCKET_READY };
static int sm_socket_state;
static int sm_socket_hooks_registered;
static sm_plat_lock_t sm_socket_init_lock = SM_PLAT_LOCK_INIT;

#ifndef SM_SOCKET_BACKGROUND
#define SM_SOCKET_BACKGROUND 1
#endif
/* Passes of the release clock come at most this often: a program freeing medium blocks all the time
 * notes all the time, and each pass walks free lists under a layer's lock. */
#define SM_SOCKET_RELEASE_MIN_MS 50u

enum { SM_SOCKET_BG_NONE, SM_SOCKET_BG_RUNNING, SM_SOCKET_BG_FAILED };
static int sm_socket_bg_state;
static int sm_socket_bg_forked; /* 1 in a fork child whose clock has not restarted yet */

static void *sm_socket_bg_main(void *unused)
{
    (void)unused;
    for (;;) {
        __atomic_store_n(&sm_release_pending, 0, __ATOMIC_SEQ_CST);
        sm_release_t r = sm_release_request(sm_plat_now_ms(), SM_RELEASE_DECAYED);
        r.may_move = 1; /* this thread runs nothing else */
        SM_NEXT_FN(release)(&r);
        sm_plat_sleep_ms(SM_SOCKET_RELEASE_MIN_MS);
        uint64_t now = sm_plat_now_ms();
        if (r.next_ms != UINT64_MAX && r.next_ms <= now)
            continue;
        /* Sleep until the next due time, or until a note (the sleeper flag and the note's
         * exchange, both sequentially consistent, make sure one of the two sides sees the other). */
        __atomic_store_n(&sm_release_sleeper, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&sm_release_pending, __ATOMIC_SEQ_CST))
            sm_plat_wait_while(&sm_release_pending, 0, r.next_ms == UINT64_MAX ? UINT64_MAX : r.next_ms - now);
        __atomic_store_n(&sm_release_sleeper, 0, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

SM_SLOWPATH void sm_socket_bg_start(void)
{
    int none = SM_SOCKET_BG_NONE;
    if (!__atomic_compare_exchange_n(&sm_socket_bg_state, &none, SM_SOCKET_BG_RUNNING, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    if (!sm_conf.background_thread) { /* the operator's choice: back on requests and malloc_trim only */
        __atomic_store_n(&sm_socket_bg_state, SM_SOCKET_BG_FAILED, __ATOMIC_RELEASE);
        return;
    }
    sm_release_wake = sm_plat_wake;
    static const sm_plat_thread_t bg = { sm_socket_bg_main, "sunmao-release" };
    if (!sm_plat_spawn(&bg)) /* a sandbox, a thread limit: memory */
        __atomic_store_n(&sm_socket_bg_state, SM_SOCKET_BG_FAILED, __ATOMIC_RELEASE); /* still goes back on requests */
    __atomic_store_n(&sm_socket_bg_forked, 0, __ATOMIC_RELAXED);
}

/* After a whole-stack request, with no lock of ours held: start the clock once something is
 * pending (frees: see sm_socket_free_stack). */
SM_INLINE void sm_socket_bg_check(void)
{
    if (SM_SOCKET_BACKGROUND && sm_unlikely(__atomic_load_n(&sm_release_pending, __ATOMIC_RELAXED)) &&
        __atomic_load_n(&sm_socket_bg_state, __ATOMIC_RELAXED) == SM_SOCKET_BG_NONE)
        sm_socket_bg_start();
}

/* A fork from a signal handler that interrupted this thread's own section keeps the locks the
 * section holds and waits a bounded time for the others (policies/sync/owner.h). */
static void sm_socket_fork_prepare(void)
{
    sm_sync_fork_begin();
    SM_NEXT_FN(fork_prepare)();
    sm_heaps_fork_prepare();
}
static void sm_socket_fork_parent(void)
{
    sm_heaps_fork_parent();
    SM_NEXT_FN(fork_parent)();
    sm_sync_fork_end();
}
static void sm_socket_fork_child(void)
{
    sm_heaps_fork_child();
    SM_NEXT_FN(fork_child)();
    sm_sync_fork_end();
    /* The clock's thread is not copied: the child starts its own when it needs one. */
    if (__atomic_load_n(&sm_socket_bg_state, __ATOMIC_RELAXED) == SM_SOCKET_BG_RUNNING) {
        __atomic_store_n(&sm_socket_bg_state, SM_SOCKET_BG_NONE, __ATOMIC_RELAXED);
        __atomic_store_n(&sm_socket_bg_forked, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&sm_release_sleeper, 0, __ATOMIC_RELAXED);
}

static void sm_intro_at_exit(void); /* sockets/introspect_api.h */

SM_SLOWPATH bool sm_socket_init_slow(void)
{
    sm_plat_lock(&sm_socket_init_lock);
    int state = __atomic_load_n(&sm_socket_state, __ATOMIC_ACQUIRE);
    if (state == SM_SOCKET_UNINIT) {
        __atomic_store_n(&sm_socket_state, SM_SOCKET_INITIALISING, __ATOMIC_RELAXED);
        /* A thread's exit runs the whole chain's thread_exit, for whichever layers attached it. */
        __atomic_store_n(&sm_thread_exit_top, SM_NEXT_FN(thread_exit), __ATOMIC_RELEASE);
        uint64_t seed;
        if (sm_plat_entropy(&seed, sizeof seed))
            sm_secret_seed(seed);
        sm_conf_init(); /* before the create hooks, which read it */
        if (SM_NEXT_FN(create)() == 0)
            state = SM_SOCKET_READY;
        else
            state = SM_SOCKET_UNINIT; /* try again on the next call; this one fails with ENOMEM */
        __atomic_store_n(&sm_socket_state, state, __ATOMIC_RELEASE);
    }
    sm_plat_unlock(&sm_socket_init_lock);
    if (state != SM_SOCKET_READY)
        return false;
    /* Registered outside the init lock and after the stack is ready: glibc's pthread_atfork
     * allocates, and that allocation must find a working allocator, not a held lock. */
    if (!__atomic_exchange_n(&sm_socket_hooks_registered, 1, __ATOMIC_ACQ_REL)) {
        sm_plat_atfork(sm_socket_fork_prepare, sm_socket_fork_parent, sm_socket_fork_child);
        if (sm_conf.stats_print) /* stats_print:true; atexit may allocate: the stack is ready */
            sm_plat_at_exit(sm_intro_at_exit);
    }
    return true;
}

SM_INLINE bool sm_socket_ready(void)
{
    return sm_likely(__atomic_load_n(&sm_socket_state, __ATOMIC_ACQUIRE) == SM_SOCKET_READY) || sm_socket_init_slow();
}

/* junk and zero (core/conf.h), on the slow paths only: a fill makes the thread cache step aside
 * (sm_conf.tcache_on), so every block passes here. Over the usable size, since a program may use
 * all of it; a block fresh from the OS is zero already. */
SM_SLOWPATH void *sm_socket_fill_alloc(void *p, size_t size, unsigned flags, bool fresh)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    size_t usable = SM_NEXT_FN(getmeta)(&m) && m.usable > size ? m.usable : size;
    if ((flags & SM_F_ZERO) || (sm_conf.fill & SM_CONF_FILL_ZERO)) {
        if (!fresh)
            memset(p, 0, usable);
    } else if (sm_conf.fill & SM_CONF_JUNK_ALLOC) {
        memset(p, 0xa5, usable);
    }
    return p;
}

/* A block realloc grew in place: its new bytes, from the old usable size on. */
SM_SLOWPATH void sm_socket_fill_grown(void *p, size_t old_usable)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    if (!SM_NEXT_FN(getmeta)(&m) || m.usable <= old_usable)
        return;
    if (sm_conf.fill & SM_CONF_FILL_ZERO)
        memset((char *)p + old_usable, 0, m.usable - old_usable);
    else if (sm_conf.fill & SM_CONF_JUNK_ALLOC)
        memset((char *)p + old_usable, 0xa5, m.usable - old_usable);
}

/* Free junk, before the block goes down. The first 16 bytes are left alone: layers keep their links
 * and marks there once a block is free, and junk written over a block freed twice (which a layer
 * may still call live) must not break a list before the layer reports the double free. */
SM_SLOWPATH void sm_socket_junk_free(void *p)
{
    sm_mctx_t m = sm_mctx_block(p, 0, 0);
    if (SM_NEXT_FN(getmeta)(&m) && m.usable > 16)
        memset((char *)p + 16, 0x5a, m.usable - 16);
}

/* The whole allocation path: the socket's checks, start-up, then the stack. */
SM_INLINE void *sm_socket_alloc_stack(size_t size, size_t align, unsigned flags)
{
    if (sm_unlikely(size > SM_SOCKET_MAX_REQUEST || align > SM_SOCKET_MAX_REQUEST / 2 || !sm_socket_ready())) {
        errno = ENOMEM;
        return NULL;
    }
    sm_mctx_t c = sm_mctx_alloc(size ? size : 1, align, flags | SM_F_USER);
    void *p = SM_NEXT_FN(alloc_miss)(&c); /* the hit, if any, was tried: never twice */
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT)) /* thread.allocated; a thread cache counts its own */
        sm_stats_thread_bytes[0] += size;
    sm_socket_bg_check();
    if (sm_unlikely(!p)) {
        errno = ENOMEM;
        return NULL;
    }
    if (sm_unlikely(sm_conf.fill))
        return sm_socket_fill_alloc(p, size, flags, c.flags & SM_F_FRESH);
    if ((flags & SM_F_ZERO) && !(c.flags & SM_F_FRESH))
        memset(p, 0, size);
    return p;
}

/* caller: the code that called the API's free (NULL: unknown, not the loader). */
SM_INLINE void sm_socket_free_stack(void *ptr, size_t size, unsigned flags, uintptr_t owner_word, const void *caller)
{
    sm_heap_t *heap = sm_heaps_owner(ptr); /* a first-class heap's block goes to its heap */
    if (sm_unlikely(heap != NULL)) {
        sm_heap_release(heap, ptr, "free");
        return;
    }
    if (sm_unlikely(sm_conf.fill & SM_CONF_JUNK_FREE))
        sm_socket_junk_free(ptr);
    sm_mctx_t c = sm_mctx_block(ptr, size, owner_word != SM_OWNER_UNKNOWN ? flags | SM_F_OWNER : flags);
    c.owner_word = owner_word;
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT)) { /* thread.deallocated: a lookup where the free locks anyway */
        sm_mctx_t q = sm_mctx_block(ptr, 0, 0);
        if (SM_NEXT_FN(getmeta)(&q))
            sm_stats_thread_bytes[1] += q.usable;
    }
    /* No thread starts from a free of the dynamic loader's: glibc frees a dead thread's TLS vector
     * there under the stack cache lock that pthread_create takes (pthread_join, thread exit), and a
     * start from there never returns (16 threads joined after a burst hung 3 runs in 3). The
     * layers' own starts (an rcl lock's server) are paused for the free; the release clock waits:
     * the note stays pending, and the next free from elsewhere or allocation down the stack starts
     * it. Nor in a fork child until it allocates: its first frees are often that same one, of the
     * parent's threads. */
    bool from_loader = sm_plat_in_loader(caller);
    if (sm_unlikely(from_loader)) {
        sm_plat_pause_spawn();
        SM_NEXT_FN(free_miss)(&c);
        sm_plat_resume_spawn();
        return;
    }
    SM_NEXT_FN(free_miss)(&c);
    if (!__atomic_load_n(&sm_socket_bg_forked, __ATOMIC_RELAXED))
        sm_socket_bg_check();
}

/* The misses (see the header comment). noinline keeps the stack out of the hit path (inlined
 * beside it, its register needs would make every call save registers on entry), and gives the
 * whole stack one copy in the library instead of one per API function. Not `cold`: requests the
 * top layer does not cache (large ones) are served here at full speed. */
static __attribute__((noinline)) void *sm_socket_alloc_miss(size_t size, size_t align, unsigned flags)
{
    return sm_socket_alloc_stack(size, align, flags);
}

static __attribute__((noinline)) void sm_socket_free_miss(void *ptr, size_t size, unsigned flags, uintptr_t owner_word,
                                                          const void *caller)
{
    (void)sm_socket_ready(); /* a failed start-up leaves the free to the stack, as it always was */
    sm_socket_free_stack(ptr, size, flags, owner_word, caller);
}

/* A sized free once a first-class heap exists: a heap's block goes back to its heap, anything
 * else takes the usual hit then miss. Out of line and whole, so that the hit path only tests the
 * flag and jumps here. */
static __attribute__((noinline)) void sm_socket_free_sized_heaps(void *ptr, size_t size, unsigned flags,
                                                                 const void *caller)
{
    sm_heap_t *heap = sm_heaps_owner(ptr);
    if (heap) {
        sm_heap_release(heap, ptr, "free");
        return;
    }
    uintptr_t owner_word = SM_OWNER_UNKNOWN;
    if (SM_NEXT_FN(free_hit)(ptr, size, flags, &owner_word))
        return;
    sm_socket_free_miss(ptr, size, flags, owner_word, caller);
}

/* The one allocation path every API function funnels into: the top layer's hit path, else the
 * miss. A top layer without capability HIT goes straight to the stack (a constant test). */
SM_HOT void *sm_socket_alloc(size_t size, size_t align, unsigned flags)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT))
        return sm_socket_alloc_stack(size, align, flags);
    void *p = align <= SM_MIN_ALIGN ? SM_NEXT_FN(alloc_hit)(size) : SM_NEXT_FN(aligned_hit)(size, align);
    if (sm_likely(p != NULL))
        return (flags & SM_F_ZERO) ? memset(p, 0, size) : p; /* a cached object holds old data */
    return sm_socket_alloc_miss(size, align, flags);
}

SM_HOT void sm_socket_free(void *ptr, size_t size, unsigned flags)
{
    if (!ptr)
        return;
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT)) {
        sm_socket_free_stack(ptr, size, flags, SM_OWNER_UNKNOWN, __builtin_return_address(0));
        return;
    }
    uintptr_t owner_word = SM_OWNER_UNKNOWN;
    /* A sized free's hit trusts the size, and would cache a first-class heap's block: once a
     * heap exists, a sized free asks the registry first, out of line (a constant test for plain
     * free; a load and a branch for a sized one). */
    if ((flags & SM_F_SIZED) && sm_unlikely(__atomic_load_n(&sm_heaps_used, __ATOMIC_RELAXED))) {
        sm_socket_free_sized_heaps(ptr, size, flags, __builtin_return_address(0));
        return;
    }
    if (sm_likely(SM_NEXT_FN(free_hit)(ptr, size, flags, &owner_word)))
        return;
    /* what the hit read of p's owner goes along; the return address: the API function's caller */
    sm_socket_free_miss(ptr, size, flags, owner_word, __builtin_return_address(0));
}

/* Usable size of a block of the stack's by getmeta's walk; 0 (after reporting) for a pointer no
 * layer owns. Out of line: the usable hit below answers for most blocks. */
static __attribute__((noinline)) size_t sm_socket_usable_walk(void *ptr, const char *api)
{
    sm_mctx_t c = sm_mctx_block(ptr, 0, 0);
    if (sm_likely(sm_socket_ready() && SM_NEXT_FN(getmeta)(&c)))
        return c.usable;
    SM_ERR_FN(raise)(SM_ERR_INVALID_POINTER, api, ptr, "not a block allocated here");
    return 0;
}

/* The same, the top layer's usable hit first (a thread cache: the owner word and a table). */
SM_HOT size_t sm_socket_usable_stack(void *ptr, const char *api)
{
    size_t usable = SM_NEXT_FN(usable_hit)(ptr);
    return sm_likely(usable != 0) ? usable : sm_socket_usable_walk(ptr, api);
}

/* The same for any pointer: a first-class heap's block answers from its heap. */
SM_INLINE size_t sm_socket_usable(void *ptr, const char *api)
{
    sm_heap_t *heap = sm_heaps_owner(ptr);
    if (sm_unlikely(heap != NULL))
        return sm_heap_block_usable(heap, ptr, api);
    return sm_socket_usable_stack(ptr, api);
}

SM_EXPORT void *SM_API(malloc)(size_t size) { return sm_socket_alloc(size, SM_MIN_ALIGN, 0); }

SM_EXPORT void SM_API(free)(void *ptr) { sm_socket_free(ptr, 0, 0); }

SM_EXPORT void *SM_API(calloc)(size_t n, size_t size)
{
    size_t total;
    /* An overflow asks for SIZE_MAX bytes, which every path refuses with ENOMEM: one exit for
     * every failure, and no error branch beside the hit path's tail call to memset. */
    if (sm_unlikely(__builtin_mul_overflow(n, size, &total)))
        total = SIZE_MAX;
    return sm_socket_alloc(total, SM_MIN_ALIGN, SM_F_ZERO);
}

/* A move copies the block while the old one is still resident: a large block is held twice for a
 * moment (a buffer grown by realloc peaked at twice its final size). From this size on, the old
 * block's pages already copied are given back (the stack's purge) as the copy goes, so a move holds
 * the block about once. */
#ifndef SM_SOCKET_MOVE_PURGE_MIN
#define SM_SOCKET_MOVE_PURGE_MIN ((size_t)4 << 20)
#endif
static void sm_socket_move_copy(char *to, char *from, size_t n)
{
    if (n < SM_SOCKET_MOVE_PURGE_MIN) {
        memcpy(to, from, n);
        return;
    }
    const size_t page = sm_plat_page_size(), chunk = (size_t)1 << 20;
    uintptr_t purged = sm_align_up(sm_addr(from), page); /* pages below this are given back */
    for (size_t done = 0; done < n;) {
        size_t k = n - done < chunk ? n - done : chunk;
        memcpy(to + done, from + done, k);
        done += k;
        uintptr_t end = sm_align_down(sm_addr(from) + done, page);
        if (end > purged) {
            sm_mctx_t c = sm_mctx_block((void *)purged, end - purged, SM_F_ZERO);
            (void)SM_NEXT_FN(purge)(&c);
            purged = end;
        }
    }
}

/* After a shrink in place: whether the block may stay (core/release.h: else a move frees more). */
static bool sm_socket_kept_shrunk(void *ptr, size_t size)
{
    return !sm_shrink_should_move(sm_socket_usable_stack(ptr, "realloc"), size);
}

/* A realloc that must change the block: in place when the stack can, else moved. Out of line (not
 * cold: growing strings come here often) so that realloc itself stays a few checks and the stack's
 * code is not copied into it twice; the copy dominates this path's cost anyway. */
static __attribute__((noinline)) void *sm_socket_realloc_change(void *ptr, size_t size, size_t usable)
{
    sm_mctx_t c = sm_mctx_block(ptr, 0, 0);
    /* A shrink comes here only when it would free more than half the block; a layer whose block
     * still fits (a size class, a power of two) may keep it whole, and then it is moved if that
     * frees more than half of it (core/release.h): 150 blocks of 100-600 KB shrunk to 4 KiB kept 56 MiB in segfit_lf's
     * classes (wfslab). */
    if (SM_NEXT_FN(resize)(&c, size) && (size > usable || sm_socket_kept_shrunk(ptr, size))) {
        if (sm_unlikely(sm_conf.fill))
            sm_socket_fill_grown(ptr, usable);
        sm_socket_bg_check(); /* a shrink in place frees a tail, which may start the clock */
        return ptr;
    }
    /* A large growth moves the pages where the stack can (no copy: glibc's mremap of its mapped
     * chunks), a layer that keys state by the block's address declining. */
    if (size > usable && usable >= (SM_SOCKET_MOVE_PURGE_MIN) && SM_NEXT_FN(move)(&c, size)) {
        if (sm_unlikely(sm_conf.fill))
            sm_socket_fill_grown(c.ptr, usable);
        return c.ptr;
    }
    void *moved = sm_socket_alloc(size, SM_MIN_ALIGN, 0);
    if (!moved)
        return size <= usable ? ptr : NULL; /* a shrink that cannot move still succeeds */
    sm_socket_move_copy((char *)moved, (char *)ptr, size < usable ? size : usable);
    sm_socket_free(ptr, 0, 0);
    return moved;
}

SM_EXPORT void *SM_API(realloc)(void *ptr, size_t size)
{
    if (!ptr)
        return sm_socket_alloc(size, SM_MIN_ALIGN, 0);
    if (size == 0) { /* glibc semantics, which programs on this platform rely on: free, NULL */
        sm_socket_free(ptr, 0, 0);
        return NULL;
    }
    if (sm_unlikely(size > SM_SOCKET_MAX_REQUEST)) {
        errno = ENOMEM;
        return NULL;
    }
    sm_heap_t *heap = sm_heaps_owner(ptr); /* a heap's block stays in its heap */
    if (sm_unlikely(heap != NULL))
        return sm_heap_resize(heap, ptr, size, "realloc");
    size_t usable = sm_socket_usable_stack(ptr, "realloc");
    if (sm_unlikely(usable == 0)) {
        errno = EINVAL;
        return NULL;
    }
    /* Keep the block when it still fits and would not waste more than half of it. */
    if (size <= usable && size >= usable / 2)
        return ptr;
    return sm_socket_realloc_change(ptr, size, usable);
}

SM_EXPORT void *SM_API(reallocarray)(void *ptr, size_t n, size_t size)
{
    size_t total;
    if (sm_unlikely(__builtin_mul_overflow(n, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    return SM_API(realloc)(ptr, total);
}

SM_EXPORT int SM_API(posix_memalign)(void **out, size_t align, size_t size)
{
    if (!sm_is_pow2(align) || align % sizeof(void *) != 0)
        return EINVAL;
    int saved = errno; /* POSIX: the result is the return value; errno is left alone */
    void *p = sm_socket_alloc(size, align, 0);
    errno = saved;
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

SM_EXPORT void *SM_API(aligned_alloc)(size_t align, size_t size)
{
    if (!sm_is_pow2(align)) { /* C17 DR 460: an unsupported alignment fails */
        errno = EINVAL;
        return NULL;
    }
    return sm_socket_alloc(size, align, 0);
}

/* The obsolete memalign accepts any alignment; like glibc, round it up to a power of two. An
 * alignment no block can have is a request too large to serve (ENOMEM, as glibc answers), not an
 * invalid one: every value is a valid memalign alignment. */
SM_EXPORT void *SM_API(memalign)(size_t align, size_t size)
{
    if (align > SM_SOCKET_MAX_REQUEST / 2) {
        errno = ENOMEM;
        return NULL;
    }
    if (!sm_is_pow2(align))
        align = align ? (size_t)1 << sm_log2_ceil(align) : SM_MIN_ALIGN;
    return sm_socket_alloc(size, align, 0);
}

SM_EXPORT void *SM_API(valloc)(size_t size) { return sm_socket_alloc(size, sm_plat_page_size(), 0); }

SM_EXPORT void *SM_API(pvalloc)(size_t size)
{
    size_t page = sm_plat_page_size();
    size_t rounded = sm_align_up(size ? size : 1, page);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return sm_socket_alloc(rounded, page, 0);
}

SM_EXPORT size_t SM_API(malloc_usable_size)(void *ptr) { return ptr ? sm_socket_usable(ptr, "malloc_usable_size") : 0; }

/* glibc's: give back every page the allocator holds free, now (all layers; the calling thread's own
 * cache too). 1 if some memory was given back, else 0. The pad is not needed: nothing is kept. */
SM_EXPORT int SM_API(malloc_trim)(size_t pad)
{
    (void)pad;
    if (!sm_socket_ready())
        return 0;
    sm_release_t r = sm_release_request(sm_plat_now_ms(), SM_RELEASE_ALL);
    SM_NEXT_FN(release)(&r);
    return r.released != 0;
}

/* C23: the caller promises the size (and alignment) it allocated with; layers may use it. */
SM_EXPORT void SM_API(free_sized)(void *ptr, size_t size) { sm_socket_free(ptr, size, SM_F_SIZED); }
SM_EXPORT void SM_API(free_aligned_sized)(void *ptr, size_t align, size_t size)
{
    (void)align;
    sm_socket_free(ptr, size, SM_F_SIZED);
}

/* Statistics, mallctl and glibc's introspection calls over the same stack. */
#define SM_INTROSPECT_PARTS 1
#include "introspect_api.h"
#undef SM_INTROSPECT_PARTS

/* First-class heaps: sunmao_heap_create, ... */
#define SM_HEAP_API_PARTS 1
#include "heap_api.h"
#undef SM_HEAP_API_PARTS
