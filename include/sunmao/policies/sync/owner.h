/* A lock's owner, for forks from signal handlers. A thread that forks from a handler that
 * interrupted its own allocator call may hold some of the allocator's locks: its fork hooks must not
 * wait for those (they would wait for ever: glibc's tst-mallocfork2), and must leave them held in
 * both processes, where the interrupted call goes on and releases them. The other locks are taken
 * as usual, so no other thread is inside a section when the process is copied.
 *
 * A policy that records its holder (spinlock, mutex, posix_spin, ticket, flatcombine, and through
 * queue.h mcslock and ccsynch, and rcl) embeds an sm_sync_owner_t
 * named `owner`, calls sm_sync_enter(l) before it tries to acquire, takes the owner word after it
 * acquires (sm_sync_owner_take), then sm_sync_entered; before it releases, sm_sync_leaving(l) and
 * drops the word (sm_sync_owner_drop); after the release (or a failed try) sm_sync_entered and
 * sm_sync_leave; in its waiting paths sm_sync_check_reentry; it zeroes the word in reinit, and
 * gets its fork hooks
 * from SM_SYNC_FORK_BY_OWNER(policy):
 *   fork_lock(l)    take l for a fork, unless the calling thread holds it (kept: bit 0 of the
 *                   owner word marks it until the hook after the fork)
 *   fork_unlock(l)  parent, after the fork: release what fork_lock took; a kept lock stays held
 *   fork_reinit(l)  child: re-create what fork_lock took; a kept lock stays held, and so does one
 *                   fork_lock left to its holder (see sm_sync_fork_begin)
 * Only the holder writes the owner word; the forking thread reads it without the lock (relaxed
 * atomics), and finds its own identity there only if it wrote it and has not cleared it since: the
 * answer is exact for the calling thread, whatever the others do.
 * rcl names its holder too (a client, or its server), and takes fork_lock and fork_unlock from
 * SM_SYNC_FORK_LOCK_BY_OWNER with a fork_reinit of its own (its child also forgets the server).
 * SM_SYNC_FORK_PLAIN maps the hooks to lock, unlock and reinit, for the tests' spy policies. */
#ifndef SUNMAO_POLICY_SYNC_OWNER_H
#define SUNMAO_POLICY_SYNC_OWNER_H

#include <stdint.h>
#include "../../core/compiler.h"
#include "../../platform/platform.h"

/* sm_plat_self() of the holder (a thread pointer: aligned, so bit 0 is free), or 0 when free;
 * bit 0 set by fork_lock for a lock its caller holds, cleared by the hook after the fork. */
typedef uintptr_t sm_sync_owner_t;
#define SM_SYNC_OWNER_INIT 0

SM_INLINE void sm_sync_owner_set(sm_sync_owner_t *o) { __atomic_store_n(o, sm_plat_self(), __ATOMIC_RELAXED); }
SM_INLINE void sm_sync_owner_clear(sm_sync_owner_t *o) { __atomic_store_n(o, 0, __ATOMIC_RELAXED); }
SM_INLINE bool sm_sync_owner_is_self(const sm_sync_owner_t *o)
{
    return (__atomic_load_n(o, __ATOMIC_RELAXED) & ~(uintptr_t)1) == sm_plat_self();
}
/* A lock the calling thread holds, asked for again: a layer never takes its lock twice, so only a
 * malloc or free from a signal handler that interrupted this thread's own section gets here.
 * Waiting would be for ever (tlsf hung so); the defined outcome is one line and abort. The
 * policies check in their waiting paths only, so an uncontended lock pays nothing. */
SM_SLOWPATH _Noreturn SM_UNUSED void sm_sync_reentered(void)
{
    static const char msg[] = "sunmao: malloc or free called from a signal handler that interrupted this thread's "
                              "own malloc or free (not async-signal-safe): the lock it needs is held by the "
                              "interrupted call; aborting\n";
    sm_plat_write_stderr(msg, sizeof msg - 1);
    sm_plat_abort();
}

/* Locks of the owner-recording policies the calling thread holds, and whether its fork began
 * while it held some (sm_sync_fork_begin): initial-exec TLS, with the transit and the fork
 * deadline 32 bytes per composition. */
static __thread unsigned sm_sync_held __attribute__((tls_model("initial-exec")));
static __thread unsigned sm_sync_fork_holding __attribute__((tls_model("initial-exec")));

/* The count is read by a signal handler that interrupts this thread (sm_sync_fork_begin), which
 * the compiler does not see: plain increments of a TLS variable whose address never escapes were
 * merged away (clang folded a section's ++ and -- across the opaque lock calls, leaving 0 inside
 * it). Volatile accesses are plain moves that every access keeps, and the signal fences keep them
 * on the outer side of the lock's own atomics.
 * The count covers a lock from before its acquisition starts to after its release ends, wider
 * than the owner word (set once acquired, cleared before the release): a handler that interrupts
 * a thread between the two, lock held but owner not yet or no longer named, sees the thread as
 * holding and waits only a bounded time for that lock. With a count as narrow as the owner word,
 * that fork waited for ever on its own thread's lock (fork_signal under hslab, 1 run in a few
 * in CI). */
SM_INLINE void sm_sync_held_add(unsigned d) { *(volatile unsigned *)&sm_sync_held += d; }
/* The lock this thread is taking or releasing (between its first atomic and its owner word),
 * for a signal handler's call that then asks for the same lock (sm_sync_check_reentry). */
static __thread void *sm_sync_in_transit __attribute__((tls_model("initial-exec")));
SM_INLINE void *sm_sync_transit_begin(void *l)
{
    void *prev = *(void *volatile *)&sm_sync_in_transit;
    *(void *volatile *)&sm_sync_in_transit = l;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return prev;
}
/* prev: what transit_begin returned (a handler's call restores the interrupted call's). */
SM_INLINE void sm_sync_transit_end(void *prev)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(void *volatile *)&sm_sync_in_transit = prev;
}
SM_INLINE void *sm_sync_transit_now(void) { return *(void *volatile *)&sm_sync_in_transit; }
/* A waiting path that spins on its own loads marks its lock `waiting` (l | 1) while it spins and
 * `l` again around each atomic that may take it: a fork from a handler then knows the interrupted
 * call does not hold l and may wait for it (sm_sync_fork_begin). */
SM_INLINE void *sm_sync_transit_waiting(const void *l) { return (void *)((uintptr_t)l | 1); }
SM_INLINE void sm_sync_transit_mark(void *v)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(void *volatile *)&sm_sync_in_transit = v;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Before a lock's acquisition is tried (returns the transit to restore with sm_sync_entered once
 * the owner word is set, or the try failed); sm_sync_leave after its release, or after a failed
 * try. */
SM_INLINE void *sm_sync_enter(void *l)
{
    sm_sync_held_add(1);
    return sm_sync_transit_begin(l);
}
SM_INLINE void sm_sync_entered(void *prev) { sm_sync_transit_end(prev); }
SM_INLINE void sm_sync_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    sm_sync_held_add((unsigned)-1);
}
/* Before a release (returns the transit to restore with sm_sync_entered after it). */
SM_INLINE void *sm_sync_leaving(void *l) { return sm_sync_transit_begin(l); }

/* In a waiting path: lock l is held by its own thread (the owner word says so, or the interrupted
 * call was between l's atomic and its owner word: `interrupted` is its transit), so waiting would
 * be for ever. A handler's call that finds the interrupted call waiting for l (held by another
 * thread) is sent the same way: such a call is outside what malloc promises. */
SM_INLINE void sm_sync_check_reentry(const void *l, const sm_sync_owner_t *o, const void *interrupted)
{
    if (sm_unlikely(sm_sync_owner_is_self(o) || ((uintptr_t)interrupted & ~(uintptr_t)1) == (uintptr_t)l))
        sm_sync_reentered();
}

/* Once acquired, and before the release. */
SM_INLINE void sm_sync_owner_take(sm_sync_owner_t *o) { sm_sync_owner_set(o); }
SM_INLINE void sm_sync_owner_drop(sm_sync_owner_t *o) { sm_sync_owner_clear(o); }

/* A try's end: `got` says whether the atomic took the lock; names the caller if so, and ends the
 * enter (prev: sm_sync_enter's answer) as a held lock or as a failed try. Returns got. */
SM_INLINE bool sm_sync_tried(void *prev, sm_sync_owner_t *o, bool got)
{
    if (got)
        sm_sync_owner_take(o);
    sm_sync_entered(prev);
    if (!got)
        sm_sync_leave();
    return got;
}

/* The socket's fork hooks bracket the layers' (sockets/libc_api.h). A fork that begins while its
 * thread holds none of these locks takes every lock, waiting as long as it must (the holders are
 * other threads, which go on). One that begins holding some (a handler that interrupted its own
 * section) could wait for ever on a lock whose holder waits for one of its own, or for one the
 * fork has just taken: it keeps its own, and waits for the others until SM_SYNC_FORK_WAIT_MS after
 * the fork began, all locks together, then only tries each once; a lock it cannot get is left to
 * its holder (not taken: the child must not use it, as POSIX asks of a child forked from a
 * handler). A budget per lock (100 ms each) was not enough: a holder waiting for the map lock the
 * fork had taken cost every fork 100 ms, and a signal storm then left the interrupted thread no
 * time to run (fork_signal under hslab, 1 run in 6).
 * The lock the interrupted call is taking or releasing (its transit) gets one try and no wait:
 * between the atomic that takes it and its owner word (or the owner word's clearing and the
 * release) the interrupted call holds it unnamed, so waiting was for its own lock, the whole budget
 * on every fork; under a signal storm the interrupted call then never ran again (fork_signal under
 * hslabd, 1 run in 12). A policy that waits inside a call it cannot mark (mutex, posix_spin, the
 * ticket it drew) leaves that lock to its holder too; spinlock marks its wait (transit_waiting). */
#define SM_SYNC_FORK_WAIT_MS 5
static __thread uint64_t sm_sync_fork_until __attribute__((tls_model("initial-exec")));
SM_INLINE void sm_sync_fork_begin(void)
{
    sm_sync_fork_holding = __atomic_load_n(&sm_sync_held, __ATOMIC_RELAXED) != 0;
    if (sm_sync_fork_holding)
        sm_sync_fork_until = sm_plat_now_ns() + (uint64_t)SM_SYNC_FORK_WAIT_MS * 1000000u;
}
SM_INLINE void sm_sync_fork_end(void) { sm_sync_fork_holding = 0; }

/* After fork_lock, l's owner word says what it did: self | 1 kept (held by the interrupted
 * section), self taken, anything else left to its holder. */
enum { SM_SYNC_FORK_LEFT, SM_SYNC_FORK_TAKEN, SM_SYNC_FORK_KEPT };
SM_INLINE int sm_sync_owner_fork_state(sm_sync_owner_t *o)
{
    uintptr_t w = __atomic_load_n(o, __ATOMIC_RELAXED), self = sm_plat_self();
    if (w == (self | 1)) {
        __atomic_store_n(o, self, __ATOMIC_RELAXED); /* the mark is spent */
        return SM_SYNC_FORK_KEPT;
    }
    return w == self ? SM_SYNC_FORK_TAKEN : SM_SYNC_FORK_LEFT;
}

#define SM_SYNC_FORK_LOCK_BY_OWNER(P)                                                  \
    SM_INLINE void sm_sync_##P##_fork_lock(sm_sync_##P##_t *l)                         \
    {                                                                                  \
        if (sm_sync_owner_is_self(&l->owner)) {                                        \
            __atomic_store_n(&l->owner, sm_plat_self() | 1, __ATOMIC_RELAXED);         \
            return;                                                                    \
        }                                                                              \
        if (!sm_sync_fork_holding) {                                                   \
            sm_sync_##P##_lock(l);                                                     \
            return;                                                                    \
        }                                                                              \
        if (sm_sync_transit_now() == (void *)l) {                                      \
            (void)sm_sync_##P##_trylock(l);                                            \
            return;                                                                    \
        }                                                                              \
        while (!sm_sync_##P##_trylock(l) && sm_plat_now_ns() < sm_sync_fork_until)     \
            sm_plat_yield();                                                           \
    }                                                                                  \
    SM_INLINE void sm_sync_##P##_fork_unlock(sm_sync_##P##_t *l)                       \
    {                                                                                  \
        if (sm_sync_owner_fork_state(&l->owner) == SM_SYNC_FORK_TAKEN)                 \
            sm_sync_##P##_unlock(l);                                                   \
    }
#define SM_SYNC_FORK_BY_OWNER(P)                                                       \
    SM_SYNC_FORK_LOCK_BY_OWNER(P)                                                      \
    SM_INLINE void sm_sync_##P##_fork_reinit(sm_sync_##P##_t *l)                       \
    {                                                                                  \
        if (sm_sync_owner_fork_state(&l->owner) == SM_SYNC_FORK_TAKEN) {               \
            sm_sync_##P##_reinit(l);                                                   \
            sm_sync_held_add((unsigned)-1); /* taken in prepare, gone with the re-creation */          \
        }                                                                              \
    }

#define SM_SYNC_FORK_PLAIN(P)                                                                 \
    SM_INLINE void sm_sync_##P##_fork_lock(sm_sync_##P##_t *l) { sm_sync_##P##_lock(l); }     \
    SM_INLINE void sm_sync_##P##_fork_unlock(sm_sync_##P##_t *l) { sm_sync_##P##_unlock(l); } \
    SM_INLINE void sm_sync_##P##_fork_reinit(sm_sync_##P##_t *l) { sm_sync_##P##_reinit(l); }

#endif
