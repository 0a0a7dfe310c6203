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
 * runs once).
 *
 * Holder (owner.h): whoever holds the word names itself, a client or the server, and a client's
 * transit names the lock while it takes, waits for or releases the word. So a malloc from a signal
 * handler that interrupted its own thread's section (run on the caller) aborts with owner.h's line
 * instead of waiting for ever; one that interrupted a wait for its posted request is served like
 * any request. The fork hooks are owner.h's (a word the interrupted call holds is kept).
 *
 * The server is created on the first contended atomic_exec, by the calling thread, only if that
 * thread holds no lock of this composition and is taking none (sm_sync_held and the transit: the
 * server counts the word it holds too). Thread creation may allocate (glibc: the new thread's DTV),
 * and the allocation may come back to this allocator: to this lock, which the creator does not
 * hold, and every call runs on its caller while the state is "starting"; to another rcl lock, whose
 * server is created later (one at a time per translation unit, through a hand-off word taken by
 * compare-and-swap: the platform's spawn passes no argument); never to a lock the creator holds.
 * Nor while the platform pauses spawning (a request of the dynamic loader's, which may hold a lock
 * pthread_create takes: platform.h). Retries back off (1, 2, 4 .. 1024, then every 1024th
 * contended call). States: no server -> starting -> running <-> parked, or failed (no thread could
 * be made: a plain test-and-set lock). With no work the server pauses for 1,024 sweeps, then yields,
 * and after SM_SYNC_RCL_IDLE_MS parks on a futex (an idle process burns no core). Parking and
 * posting are a Dekker pair in seq_cst order: the server stores "parked", then rescans the slots; a
 * client stores "posted", then reads the state and wakes a parked server.
 *
 * Fork child: no server; every slot is freed but the forking thread's own request (a handler that
 * forked while its thread waited for it: the thread withdraws it and runs it itself), so its first
 * contended call starts a server of its own. Sections run on the server: no errno, thread-local
 * state or err policy in a section (core/layer.h).
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
#ifndef SM_SYNC_RCL_PATIENCE
#define SM_SYNC_RCL_PATIENCE 256 /* looks at its slot before a client withdraws its request */
#endif
#ifndef SM_SYNC_RCL_IDLE_MS
#define SM_SYNC_RCL_IDLE_MS 10 /* ms without work before the server parks (coarse clock) */
#endif
_Static_assert(SM_SYNC_RCL_SLOTS >= 1 && SM_SYNC_RCL_PATIENCE <= 1024, "rcl: SM_SYNC_RCL_SLOTS >= 1, PATIENCE <= 1024");

/* The lock's state (its server's). */
enum { SM_SYNC_RCL_NOSERVER, SM_SYNC_RCL_STARTING, SM_SYNC_RCL_RUNNING, SM_SYNC_RCL_PARKED, SM_SYNC_RCL_FAILED };
/* A slot's state: free -> claimed (by a client) -> posted -> taken -> done (by the server) -> free,
 * or posted -> claimed again (withdrawn by its client) -> free. */
enum { SM_SYNC_RCL_FREE, SM_SYNC_RCL_CLAIMED, SM_SYNC_RCL_POSTED, SM_SYNC_RCL_TAKEN, SM_SYNC_RCL_DONE };

typedef struct {
    SM_CACHE_ALIGNED int state;
    void (*fn)(void *);
    void *arg;
} sm_sync_rcl_slot_t;

typedef struct sm_sync_rcl {
    SM_CACHE_ALIGNED int state;   /* SM_SYNC_RCL_NOSERVER..FAILED; read by every client; the futex */
    unsigned high;                /* slots [0, high) have been claimed at least once */
    unsigned tries;               /* contended calls that wanted to create the server */
    SM_CACHE_ALIGNED int word;    /* the lock word: 1 while held */
    int waiters;                  /* threads waiting in lock() (a hint: > 0 counts) */
    sm_sync_owner_t owner;        /* the holder: a client, or the server */
    sm_sync_rcl_slot_t slot[SM_SYNC_RCL_SLOTS];
} sm_sync_rcl_t;
#define SM_SYNC_rcl_INIT { 0 }
enum { sm_sync_rcl_thread_safe = 1 };

/* Per translation unit: the lock whose server is being created (the thread reads it: the
 * platform's spawn passes no argument), and the slot of the request this thread waits for. */
static sm_sync_rcl_t *sm_sync_rcl_handoff;
static __thread sm_sync_rcl_slot_t *sm_sync_rcl_mine __attribute__((tls_model("initial-exec")));

SM_INLINE bool sm_sync_rcl_grab(sm_sync_rcl_t *l)
{
    return !__atomic_load_n(&l->word, __ATOMIC_RELAXED) && !__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE);
}

SM_INLINE bool sm_sync_rcl_trylock(sm_sync_rcl_t *l)
{
    if (__atomic_load_n(&l->word, __ATOMIC_RELAXED))
        return false;
    void *prev = sm_sync_enter(l);
    return sm_sync_tried(prev, &l->owner, !__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE));
}

SM_SLOWPATH void sm_sync_rcl_lock_contended(sm_sync_rcl_t *l, void *interrupted)
{
    sm_sync_check_reentry(l, &l->owner, interrupted);
    __atomic_add_fetch(&l->waiters, 1, __ATOMIC_RELAXED); /* the server lets us go first */
    unsigned spins = 0;
    do {
        sm_sync_transit_mark(sm_sync_transit_waiting(l)); /* held by another: a fork may wait */
        while (__atomic_load_n(&l->word, __ATOMIC_RELAXED))
            sm_sync_spin(&spins); /* look at every pause: the server leaves a short window */
        sm_sync_transit_mark(l);
    } while (__atomic_exchange_n(&l->word, 1, __ATOMIC_ACQUIRE));
    __atomic_sub_fetch(&l->waiters, 1, __ATOMIC_RELAXED);
}

SM_INLINE void sm_sync_rcl_lock(sm_sync_rcl_t *l)
{
    void *prev = sm_sync_enter(l);
    if (sm_unlikely(!sm_sync_rcl_grab(l)))
        sm_sync_rcl_lock_contended(l, prev);
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
}

SM_INLINE void sm_sync_rcl_unlock(sm_sync_rcl_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    __atomic_store_n(&l->word, 0, __ATOMIC_RELEASE);
    sm_sync_entered(prev);
    sm_sync_leave();
}

/* Fork child: no server exists, and of the parent's clients only this thread. Its own request, if
 * a handler forked while it waited for one, keeps its state; the other slots are freed. */
SM_INLINE void sm_sync_rcl_child_reset(sm_sync_rcl_t *l)
{
    l->state = SM_SYNC_RCL_NOSERVER;
    l->tries = 0;
    l->waiters = 0;
    for (unsigned i = 0; i < (SM_SYNC_RCL_SLOTS); i++)
        if (&l->slot[i] != sm_sync_rcl_mine)
            l->slot[i].state = SM_SYNC_RCL_FREE;
    sm_sync_rcl_handoff = NULL; /* a parent thread may have been creating a server */
}
SM_INLINE void sm_sync_rcl_reinit(sm_sync_rcl_t *l)
{
    l->owner = 0;
    l->word = 0;
    sm_sync_rcl_child_reset(l);
}
SM_SYNC_FORK_LOCK_BY_OWNER(rcl)
SM_INLINE void sm_sync_rcl_fork_reinit(sm_sync_rcl_t *l)
{
    if (sm_sync_owner_fork_state(&l->owner) == SM_SYNC_FORK_TAKEN) {
        sm_sync_rcl_reinit(l);
        sm_sync_held_add((unsigned)-1); /* taken in prepare, gone with the re-creation */
    } else {
        sm_sync_rcl_child_reset(l); /* the word stays with its holder: kept, or left (owner.h) */
    }
}

/* The server takes the word for a sweep, after the lock() waiters (for a bounded spin), and counts
 * it as held: a section it runs may not create another lock's server (header comment). */
SM_SLOWPATH void sm_sync_rcl_serve_take(sm_sync_rcl_t *l)
{
    unsigned spins = 0;
    while ((spins < 1024 && __atomic_load_n(&l->waiters, __ATOMIC_RELAXED) > 0) || !sm_sync_rcl_grab(l))
        sm_sync_spin(&spins);
    sm_sync_held_add(1);
    sm_sync_owner_take(&l->owner);
}
SM_INLINE void sm_sync_rcl_serve_release(sm_sync_rcl_t *l)
{
    sm_sync_owner_drop(&l->owner);
    __atomic_store_n(&l->word, 0, __ATOMIC_RELEASE);
    sm_sync_held_add((unsigned)-1);
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
        if (__atomic_load_n(&l->waiters, __ATOMIC_RELAXED) > 0) {
            sm_sync_rcl_serve_release(l);
            held = false;
        }
    }
    if (held)
        sm_sync_rcl_serve_release(l);
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

/* True if the calling thread holds a lock of this composition (as a client or as a server), or is
 * taking or releasing one: a thread it creates might allocate from that layer (header comment). */
SM_INLINE bool sm_sync_rcl_holds_any(void)
{
    return __atomic_load_n(&sm_sync_held, __ATOMIC_RELAXED) != 0 || sm_sync_transit_now() != NULL;
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
        sm_sync_rcl_slot_t *outer = sm_sync_rcl_mine; /* a handler's request nests in its thread's */
        *(sm_sync_rcl_slot_t *volatile *)&sm_sync_rcl_mine = s;
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
        *(sm_sync_rcl_slot_t *volatile *)&sm_sync_rcl_mine = outer;
        return true;
    }
    return false;
}

/* No server running, and the word was held: start the server or wake it for the next sections,
 * and run this one here. */
SM_SLOWPATH void sm_sync_rcl_contended(sm_sync_rcl_t *l, void (*fn)(void *), void *arg)
{
    int s = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
    if (s == SM_SYNC_RCL_NOSERVER) {
        sm_sync_rcl_start(l);
    } else if (s == SM_SYNC_RCL_PARKED) {
        int parked = SM_SYNC_RCL_PARKED;
        if (__atomic_compare_exchange_n(&l->state, &parked, SM_SYNC_RCL_RUNNING, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            sm_plat_wake(&l->state);
    }
    sm_sync_rcl_lock(l);
    fn(arg);
    sm_sync_rcl_unlock(l);
}

SM_HOT void sm_sync_rcl_atomic_exec(sm_sync_rcl_t *l, void (*fn)(void *), void *arg)
{
    if (sm_likely(__atomic_load_n(&l->state, __ATOMIC_RELAXED) == SM_SYNC_RCL_RUNNING)) {
        if (sm_likely(sm_sync_rcl_post(l, fn, arg)))
            return;
    } else if (sm_sync_rcl_trylock(l)) {
        fn(arg); /* no server running and the word was free */
        sm_sync_rcl_unlock(l);
        return;
    }
    sm_sync_rcl_contended(l, fn, arg);
}

#endif
