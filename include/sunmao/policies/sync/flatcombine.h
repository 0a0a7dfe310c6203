/* sync policy `flatcombine`: flat combining (Hendler, Incze, Shavit and Tzafrir, SPAA 2010). A
 * thread publishes its critical section (fn, arg) in a record on the lock's publication list and
 * tries the lock; whoever holds it, the combiner, takes the whole list and runs every section on it,
 * oldest first, until the list stays empty (at most SM_SYNC_FLATCOMBINE_PASSES passes), while the
 * others wait on their own records. Uncontended, a section costs what a test-and-set lock costs
 * plus one load (the list is empty): the publication is skipped when the lock is free.
 *
 * Differences from the paper, and why: its records are per thread and stay on the list, aged out
 * by the combiner, which needs thread-local storage; here a record is on its thread's stack for the
 * call only and is pushed (compare-and-swap) for each section; the combiner detaches the whole list
 * with one exchange, so no record is ever unlinked alone (no ABA) and a record is not touched once
 * its thread is told its section ran. A waiter retries the lock as it waits, so a record pushed
 * after the combiner's last pass is run by its own thread.
 *
 * As for every combining policy, a section must not use errno, thread-local state or the err
 * policy. lock() and unlock() take the combiner's lock itself. Fork: prepare locks; the child
 * starts with an empty list (the records of other threads' pending sections are gone with them).
 * @model: name=flatcombine kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_FLATCOMBINE_H
#define SUNMAO_POLICY_SYNC_FLATCOMBINE_H

#include <stdbool.h>
#include <stddef.h>
#include "owner.h"
#include "wait.h"

#ifndef SM_SYNC_FLATCOMBINE_PASSES
#define SM_SYNC_FLATCOMBINE_PASSES 4 /* detach-and-run passes one combiner makes */
#endif

typedef struct sm_sync_fc_record {
    struct sm_sync_fc_record *next;
    void (*fn)(void *);
    void *arg;
    int done;
} sm_sync_fc_record_t;

typedef struct {
    int locked;
    sm_sync_owner_t owner; /* the combiner, or lock()'s caller (owner.h) */
    sm_sync_fc_record_t *published; /* a stack of records, newest first */
} sm_sync_flatcombine_t;
#define SM_SYNC_flatcombine_INIT { 0, SM_SYNC_OWNER_INIT, NULL }
enum { sm_sync_flatcombine_thread_safe = 1 };

SM_INLINE bool sm_sync_flatcombine_trylock(sm_sync_flatcombine_t *l)
{
    if (__atomic_load_n(&l->locked, __ATOMIC_RELAXED))
        return false;
    void *prev = sm_sync_enter(l);
    return sm_sync_tried(prev, &l->owner, !__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE));
}

SM_INLINE void sm_sync_flatcombine_lock(sm_sync_flatcombine_t *l)
{
    unsigned spins = 1;
    void *interrupted = sm_sync_transit_now();
    if (sm_sync_flatcombine_trylock(l))
        return;
    sm_sync_check_reentry(l, &l->owner, interrupted);
    while (!sm_sync_flatcombine_trylock(l))
        sm_sync_backoff(&spins);
}

SM_INLINE void sm_sync_flatcombine_unlock(sm_sync_flatcombine_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
    sm_sync_entered(prev);
    sm_sync_leave();
}

SM_INLINE void sm_sync_flatcombine_reinit(sm_sync_flatcombine_t *l)
{
    l->locked = 0;
    l->owner = 0;
    l->published = NULL;
}
/* A thread waiting on its published record holds nothing: the combiner runs the record. */
SM_SYNC_FORK_BY_OWNER(flatcombine)

/* The combiner (lock held) runs what is published, oldest first. */
SM_SLOWPATH void sm_sync_flatcombine_combine(sm_sync_flatcombine_t *l)
{
    for (unsigned pass = 0; pass < (SM_SYNC_FLATCOMBINE_PASSES); pass++) {
        sm_sync_fc_record_t *r = __atomic_exchange_n(&l->published, NULL, __ATOMIC_ACQUIRE), *oldest = NULL;
        if (!r)
            return;
        while (r) { /* reverse: the stack is newest first */
            sm_sync_fc_record_t *next = r->next;
            r->next = oldest;
            oldest = r;
            r = next;
        }
        while (oldest) {
            sm_sync_fc_record_t *next = oldest->next; /* read before its thread may go */
            oldest->fn(oldest->arg);
            __atomic_store_n(&oldest->done, 1, __ATOMIC_RELEASE);
            oldest = next;
        }
    }
}

SM_SLOWPATH void sm_sync_flatcombine_publish(sm_sync_flatcombine_t *l, void (*fn)(void *), void *arg)
{
    sm_sync_check_reentry(l, &l->owner, sm_sync_transit_now()); /* the combiner: this thread, interrupted */
    sm_sync_fc_record_t me = { __atomic_load_n(&l->published, __ATOMIC_RELAXED), fn, arg, 0 };
    while (!__atomic_compare_exchange_n(&l->published, &me.next, &me, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    unsigned spins = 0;
    while (!__atomic_load_n(&me.done, __ATOMIC_ACQUIRE)) {
        if (sm_sync_flatcombine_trylock(l)) {
            /* no combiner is running; ours (or a later one) is on the list: run it and what came with it */
            sm_sync_flatcombine_combine(l);
            sm_sync_flatcombine_unlock(l);
            if (__atomic_load_n(&me.done, __ATOMIC_ACQUIRE))
                return;
            continue; /* more than PASSES lists came before ours: go round */
        }
        sm_sync_spin(&spins);
    }
}

SM_HOT void sm_sync_flatcombine_atomic_exec(sm_sync_flatcombine_t *l, void (*fn)(void *), void *arg)
{
    if (sm_likely(sm_sync_flatcombine_trylock(l))) {
        fn(arg);
        if (__atomic_load_n(&l->published, __ATOMIC_RELAXED))
            sm_sync_flatcombine_combine(l);
        sm_sync_flatcombine_unlock(l);
        return;
    }
    sm_sync_flatcombine_publish(l, fn, arg);
}

#endif
