/* sync policy `rcl`: remote core locking (Lozi, David, Thomas, Lawall and Muller, USENIX ATC 2012).
 * A server thread, one per lock, runs the critical sections that clients post to it: a client
 * claims a free slot of the lock's SM_SYNC_RCL_SLOTS (a cache line each), writes (fn, arg), marks
 * it posted and spins on that slot alone; the server sweeps slots [0, high) in order, so every
 * posted slot is served once per sweep. Optional: no instance uses it (`#define SM_SYNC rcl`); it
 * can pay only with a core to spare for the server (docs/sync.md, with the measurements).
 *
 * The lock word, a test-and-set word, is what excludes: lock/unlock/trylock take it, and so does
 * the server around a sweep's sections, releasing it at the sweep's end and after any section while
 * someone waits in lock() (whom it lets go first, for a bounded spin): so fork_prepare's lock()
 * gets it while clients wait. A caller runs its section itself under the word (the fallback) when
 * no server runs (an uncontended lock never starts one), the server is being created or could not
 * be, the server is parked (a contended caller also wakes it), every slot is taken, or the server
 * has not taken its request after SM_SYNC_RCL_PATIENCE looks (it is off the CPU: the client
 * withdraws the request; server and client claim a posted slot by compare-and-swap, so a section
 * runs once). A section that re-enters its own lock deadlocks, as under every policy.
 *
 * The server is created on the first contended atomic_exec, by the calling thread, which holds
 * nothing of this lock then. States: unlisted -> no server -> starting -> running <-> parked, or
 * failed (no thread could be made: a plain test-and-set lock). With no work it pauses for 1,024
 * sweeps, then yields, and after SM_SYNC_RCL_IDLE_MS parks on a futex (an idle process burns no
 * core). Parking and posting are a Dekker pair in seq_cst order: the server stores "parked", then
 * rescans the slots; a client stores "posted", then reads the state and wakes a parked server.
 *
 * Why creating the server cannot deadlock. Thread creation may allocate (glibc: the new thread's
 * DTV), and the allocation may come back to this allocator. To this lock: while the state is
 * "starting" every call runs on its caller under the word, which the creating thread does not
 * hold. To another rcl lock: one server is created at a time per translation unit (a composition
 * is one), through a hand-off word taken by compare-and-swap; the others fall back and retry. To a
 * lock the creating thread holds (a section that calls its next layer, as tlsf_glk's grow, holds
 * its word): a held word stores an address on its holder's stack, every lock ever taken is on a
 * registry, and a server is created only if no held word lies within SM_SYNC_RCL_NEAR of the
 * creator's stack, so a thread inside an rcl section (as caller or as server) never creates one;
 * another thread's stack that near only delays it. Nor while the platform pauses spawning (a
 * request of the dynamic loader's, which may hold a lock pthread_create takes: platform.h).
 * Retries back off (1, 2, 4 .. 1024, then every 1024th contended call). A lock of another policy
 * held by the caller is invisible here: under such a layer, use rcl only where thread creation's
 * allocation does not reach that layer.
 *
 * Fork: prepare locks; the child's reinit frees the word and the slots and sets "no server", so
 * its first contended call starts a server of its own. Sections run on the server: no errno,
 * thread-local state or err policy in a section (core/layer.h).
 * @model: name=rcl kind=policy family=sync alias=RCL */
#ifndef SUNMAO_POLICY_SYNC_RCL_H
#define SUNMAO_POLICY_SYNC_RCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "owner.h"
#include "wait.h"

#ifndef SM_SYNC_RCL_SLOTS
#define SM_SYNC_RCL_SLOTS 64 /* request slots per lock, a cache line each */
#endif
#ifndef SM_SYNC_RCL_NEAR
#define SM_SYNC_RCL_NEAR ((uintptr_t)256 << 10) /* a held word this near our stack may be ours */
#endif
#ifndef SM_SYNC_RCL_PATIENCE
#define SM_SYNC_RCL_PATIENCE 256 /* looks at its slot before a client withdraws its request */
#endif
#ifndef SM_SYNC_RCL_IDLE_MS
#define SM_SYNC_RCL_IDLE_MS 10 /* ms without work before the server parks (coarse clock) */
#endif
_Static_assert(SM_SYNC_RCL_SLOTS >= 1 && SM_SYNC_RCL_PATIENCE <= 1024, "rcl: SM_SYNC_RCL_SLOTS >= 1, PATIENCE <= 1024");

/* The lock's state (the server's, and whether it is on the registry). */
enum { SM_SYNC_RCL_UNLISTED, SM_SYNC_RCL_NOSERVER, SM_SYNC_RCL_STARTING, SM_SYNC_RCL_RUNNING, SM_SYNC_RCL_PARKED,
       SM_SYNC_RCL_FAILED };
/* A slot's state: free -> claimed (by a client) -> posted -> taken -> done (by the server) -> free,
 * or posted -> claimed again (withdrawn by its client) -> free. */
enum { SM_SYNC_RCL_FREE, SM_SYNC_RCL_CLAIMED, SM_SYNC_RCL_POSTED, SM_SYNC_RCL_TAKEN, SM_SYNC_RCL_DONE };

typedef struct {
    SM_CACHE_ALIGNED int state;
    void (*fn)(void *);
    void *arg;
} sm_sync_rcl_slot_t;

typedef struct sm_sync_rcl {
    SM_CACHE_ALIGNED int state;   /* SM_SYNC_RCL_UNLISTED..FAILED; read by every client; the futex */
    unsigned high;                /* slots [0, high) have been claimed at least once */
    unsigned tries;               /* contended calls that wanted to create the server */
    struct sm_sync_rcl *next;     /* the registry, pushed once, never unlinked */
    SM_CACHE_ALIGNED uintptr_t word; /* the lock word: 0, or an address on its holder's stack */
    int waiters;                  /* threads waiting in lock() */
    sm_sync_rcl_slot_t slot[SM_SYNC_RCL_SLOTS];
} sm_sync_rcl_t;
#define SM_SYNC_rcl_INIT { 0 }
enum { sm_sync_rcl_thread_safe = 1 };

/* Per translation unit: the registry, its lock (held for a push only), and the lock whose server
 * is being created (the thread reads it: the platform's spawn passes no argument). */
static int sm_sync_rcl_reglock;
static sm_sync_rcl_t *sm_sync_rcl_registry;
static sm_sync_rcl_t *sm_sync_rcl_handoff;

SM_INLINE bool sm_sync_rcl_take(sm_sync_rcl_t *l)
{
    return !__atomic_load_n(&l->word, __ATOMIC_RELAXED) &&
           !__atomic_exchange_n(&l->word, (uintptr_t)__builtin_frame_address(0), __ATOMIC_ACQUIRE);
}

/* Puts l on the registry before its word is first taken (so a held word is always seen). */
SM_SLOWPATH void sm_sync_rcl_enlist(sm_sync_rcl_t *l)
{
    unsigned spins = 1;
    while (__atomic_exchange_n(&sm_sync_rcl_reglock, 1, __ATOMIC_ACQUIRE))
        sm_sync_backoff(&spins);
    if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) == SM_SYNC_RCL_UNLISTED) {
        sm_sync_rcl_t *m = __atomic_load_n(&sm_sync_rcl_registry, __ATOMIC_RELAXED);
        while (m && m != l) /* a push that a fork cut short may have happened */
            m = m->next;
        if (!m) {
            l->next = __atomic_load_n(&sm_sync_rcl_registry, __ATOMIC_RELAXED);
            __atomic_store_n(&sm_sync_rcl_registry, l, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&l->state, SM_SYNC_RCL_NOSERVER, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&sm_sync_rcl_reglock, 0, __ATOMIC_RELEASE);
}

SM_INLINE bool sm_sync_rcl_trylock(sm_sync_rcl_t *l)
{
    if (sm_unlikely(__atomic_load_n(&l->state, __ATOMIC_RELAXED) == SM_SYNC_RCL_UNLISTED))
        sm_sync_rcl_enlist(l);
    return sm_sync_rcl_take(l);
}

SM_SLOWPATH void sm_sync_rcl_lock_contended(sm_sync_rcl_t *l)
{
    __atomic_add_fetch(&l->waiters, 1, __ATOMIC_RELAXED); /* the server lets us go first */
    unsigned spins = 0;
    while (!sm_sync_rcl_take(l))
        sm_sync_spin(&spins); /* look at every pause: the server leaves a short window */
    __atomic_sub_fetch(&l->waiters, 1, __ATOMIC_RELAXED);
}

SM_INLINE void sm_sync_rcl_lock(sm_sync_rcl_t *l)
{
    if (sm_unlikely(!sm_sync_rcl_trylock(l)))
        sm_sync_rcl_lock_contended(l);
}

SM_INLINE void sm_sync_rcl_unlock(sm_sync_rcl_t *l) { __atomic_store_n(&l->word, 0, __ATOMIC_RELEASE); }

/* Fork child: no server and no client exists; this thread may hold the word (prepare took it). */
SM_INLINE void sm_sync_rcl_reinit(sm_sync_rcl_t *l)
{
    l->word = 0;
    l->waiters = 0;
    l->high = 0;
    l->tries = 0;
    if (l->state != SM_SYNC_RCL_UNLISTED)
        l->state = SM_SYNC_RCL_NOSERVER;
    for (unsigned i = 0; i < (SM_SYNC_RCL_SLOTS); i++)
        l->slot[i].state = SM_SYNC_RCL_FREE;
    sm_sync_rcl_reglock = 0;    /* a thread of the parent's may have held it */
    sm_sync_rcl_handoff = NULL; /* or been creating a server */
}
SM_SYNC_FORK_PLAIN(rcl)

/* The server takes the word for a sweep, after the lock() waiters (for a bounded spin). */
SM_SLOWPATH void sm_sync_rcl_serve_take(sm_sync_rcl_t *l)
{
    unsigned spins = 0;
    while ((spins < 1024 && __atomic_load_n(&l->waiters, __ATOMIC_RELAXED)) || !sm_sync_rcl_take(l))
        sm_sync_spin(&spins);
}

/* One sweep over the slots; true if it ran a section. */
SM_SLOWPATH bool sm_sync_rcl_sweep(sm_sync_rcl_t *l)
{
    unsigned n = __atomic_load_n(&l->high, __ATOMIC_SEQ_CST);
    bool held = false, ran = false;
    for (unsigned i = 0; i < n; i++) {
        sm_sync_rcl_slot_t *s = &l->slot[i];
        if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != SM_SYNC_RCL_POSTED)
            continue;
        if (!held) {
            sm_sync_rcl_serve_take(l);
            held = true;
        }
        int posted = SM_SYNC_RCL_POSTED; /* its client may have withdrawn it meanwhile */
        if (!__atomic_compare_exchange_n(&s->state, &posted, SM_SYNC_RCL_TAKEN, false, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        s->fn(s->arg);
        __atomic_store_n(&s->state, SM_SYNC_RCL_DONE, __ATOMIC_RELEASE); /* its client may go */
        ran = true;
        if (__atomic_load_n(&l->waiters, __ATOMIC_RELAXED)) {
            sm_sync_rcl_unlock(l);
            held = false;
        }
    }
    if (held)
        sm_sync_rcl_unlock(l);
    return ran;
}

/* Parks until a client posts (it sets the state back to running and wakes the futex). */
SM_SLOWPATH void sm_sync_rcl_park(sm_sync_rcl_t *l)
{
    __atomic_store_n(&l->state, SM_SYNC_RCL_PARKED, __ATOMIC_SEQ_CST);
    unsigned n = __atomic_load_n(&l->high, __ATOMIC_SEQ_CST);
    for (unsigned i = 0; i < n; i++)
        if (__atomic_load_n(&l->slot[i].state, __ATOMIC_SEQ_CST) == SM_SYNC_RCL_POSTED) {
            int parked = SM_SYNC_RCL_PARKED; /* a client may have set running already */
            __atomic_compare_exchange_n(&l->state, &parked, SM_SYNC_RCL_RUNNING, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED);
            return;
        }
    while (__atomic_load_n(&l->state, __ATOMIC_ACQUIRE) == SM_SYNC_RCL_PARKED)
        sm_plat_wait_while(&l->state, SM_SYNC_RCL_PARKED, UINT64_MAX);
}

/* The server thread (signals blocked, detached: platform.h). */
SM_SLOWPATH void *sm_sync_rcl_server(void *unused)
{
    (void)unused;
    sm_sync_rcl_t *l = __atomic_exchange_n(&sm_sync_rcl_handoff, NULL, __ATOMIC_ACQ_REL);
    if (!l)
        return NULL; /* cannot happen: set before the spawn, cleared here or on a failed spawn */
    __atomic_store_n(&l->state, SM_SYNC_RCL_RUNNING, __ATOMIC_SEQ_CST);
    uint64_t since = 0; /* when the server last ran a section, once 1,024 sweeps found none */
    for (unsigned idle = 0;;) {
        if (sm_sync_rcl_sweep(l)) {
            idle = 0;
        } else if (++idle < 1024) {
            sm_sync_relax();
        } else if (idle == 1024) {
            since = sm_plat_now_ms();
        } else if (sm_plat_now_ms() - since < (SM_SYNC_RCL_IDLE_MS)) {
            sm_plat_yield();
        } else {
            sm_sync_rcl_park(l);
            idle = 0;
        }
    }
    return NULL;
}

/* True if the calling thread may hold an rcl lock's word (be inside its section): a word holds an
 * address on its holder's stack, and one within SM_SYNC_RCL_NEAR of ours may be ours (a thread
 * whose stack is that near only delays the server). */
SM_SLOWPATH bool sm_sync_rcl_holds_any(void)
{
    uintptr_t me = (uintptr_t)__builtin_frame_address(0);
    for (const sm_sync_rcl_t *m = __atomic_load_n(&sm_sync_rcl_registry, __ATOMIC_ACQUIRE); m; m = m->next) {
        uintptr_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
        if (w && (w > me ? w - me : me - w) < (SM_SYNC_RCL_NEAR))
            return true;
    }
    return false;
}

/* Creates the server if this call may (header comment); the caller holds nothing of l. */
SM_SLOWPATH void sm_sync_rcl_start(sm_sync_rcl_t *l)
{
    unsigned t = __atomic_add_fetch(&l->tries, 1, __ATOMIC_RELAXED);
    if ((t & (t - 1)) && (t & 1023))
        return;
    int s = SM_SYNC_RCL_NOSERVER;
    if (!__atomic_compare_exchange_n(&l->state, &s, SM_SYNC_RCL_STARTING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    sm_sync_rcl_t *none = NULL;
    if (sm_plat_spawn_paused() || sm_sync_rcl_holds_any() ||
        !__atomic_compare_exchange_n(&sm_sync_rcl_handoff, &none, l, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        __atomic_store_n(&l->state, SM_SYNC_RCL_NOSERVER, __ATOMIC_RELEASE);
        return;
    }
    static const sm_plat_thread_t server = { sm_sync_rcl_server, "sunmao-rcl" };
    if (sm_plat_spawn(&server))
        return; /* the server sets the state to running */
    __atomic_store_n(&sm_sync_rcl_handoff, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&l->state, SM_SYNC_RCL_FAILED, __ATOMIC_RELEASE);
}

/* Posts (fn, arg) in a free slot and waits until the server ran it; false if no slot was free. */
static __attribute__((noinline)) bool sm_sync_rcl_post(sm_sync_rcl_t *l, void (*fn)(void *), void *arg)
{
    for (unsigned i = 0; i < (SM_SYNC_RCL_SLOTS); i++) {
        sm_sync_rcl_slot_t *s = &l->slot[i];
        int free_ = SM_SYNC_RCL_FREE;
        if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != SM_SYNC_RCL_FREE ||
            !__atomic_compare_exchange_n(&s->state, &free_, SM_SYNC_RCL_CLAIMED, false, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        unsigned high = __atomic_load_n(&l->high, __ATOMIC_RELAXED);
        while (high <= i && !__atomic_compare_exchange_n(&l->high, &high, i + 1, false, __ATOMIC_SEQ_CST,
                                                         __ATOMIC_RELAXED))
            ;
        s->fn = fn;
        s->arg = arg;
        __atomic_store_n(&s->state, SM_SYNC_RCL_POSTED, __ATOMIC_SEQ_CST);
        int parked = SM_SYNC_RCL_PARKED;
        if (__atomic_load_n(&l->state, __ATOMIC_SEQ_CST) == SM_SYNC_RCL_PARKED &&
            __atomic_compare_exchange_n(&l->state, &parked, SM_SYNC_RCL_RUNNING, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            sm_plat_wake(&l->state);
        for (unsigned spins = 0;;) {
            int state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
            if (state == SM_SYNC_RCL_DONE)
                break;
            int posted = SM_SYNC_RCL_POSTED; /* not taken after PATIENCE looks: the server is not running */
            if (state == posted && spins >= (SM_SYNC_RCL_PATIENCE) &&
                __atomic_compare_exchange_n(&s->state, &posted, SM_SYNC_RCL_CLAIMED, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                sm_sync_rcl_lock(l);
                fn(arg);
                sm_sync_rcl_unlock(l);
                break;
            }
            sm_sync_spin(&spins);
        }
        __atomic_store_n(&s->state, SM_SYNC_RCL_FREE, __ATOMIC_RELEASE);
        return true;
    }
    return false;
}

/* No server running, and the word was held (or the lock is not listed yet): start the server or
 * wake it for the next sections, and run this one here. */
SM_SLOWPATH void sm_sync_rcl_contended(sm_sync_rcl_t *l, void (*fn)(void *), void *arg)
{
    int s = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
    if (s == SM_SYNC_RCL_UNLISTED) {
        sm_sync_rcl_enlist(l);
        if (sm_sync_rcl_take(l))
            goto run;
        s = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
    }
    if (s == SM_SYNC_RCL_NOSERVER) {
        sm_sync_rcl_start(l);
    } else if (s == SM_SYNC_RCL_PARKED) {
        int parked = SM_SYNC_RCL_PARKED;
        if (__atomic_compare_exchange_n(&l->state, &parked, SM_SYNC_RCL_RUNNING, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            sm_plat_wake(&l->state);
    }
    sm_sync_rcl_lock(l);
run:
    fn(arg);
    sm_sync_rcl_unlock(l);
}

SM_HOT void sm_sync_rcl_atomic_exec(sm_sync_rcl_t *l, void (*fn)(void *), void *arg)
{
    int s = __atomic_load_n(&l->state, __ATOMIC_RELAXED);
    if (sm_likely(s == SM_SYNC_RCL_RUNNING)) {
        if (sm_likely(sm_sync_rcl_post(l, fn, arg)))
            return;
    } else if (s != SM_SYNC_RCL_UNLISTED && sm_sync_rcl_take(l)) {
        fn(arg); /* no server running and the word was free */
        sm_sync_rcl_unlock(l);
        return;
    }
    sm_sync_rcl_contended(l, fn, arg);
}

#endif
