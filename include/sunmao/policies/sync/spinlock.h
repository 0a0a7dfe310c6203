/* sync policy `spinlock`: test-and-test-and-set with exponential pause backoff, yielding the CPU
 * after a bounded spin so a preempted holder cannot stall waiters for a whole time slice.
 * Cheapest when contention is spread over many locks (per-size-class locks). Not fair.
 * @model: name=spinlock kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_SPINLOCK_H
#define SUNMAO_POLICY_SYNC_SPINLOCK_H

#include <stdbool.h>
#include "owner.h"
#include "wait.h"

typedef struct { int locked; sm_sync_owner_t owner; } sm_sync_spinlock_t;
#define SM_SYNC_spinlock_INIT { 0, SM_SYNC_OWNER_INIT }
enum { sm_sync_spinlock_thread_safe = 1 };

SM_SLOWPATH void sm_sync_spinlock_contended(sm_sync_spinlock_t *l, void *interrupted)
{
    sm_sync_check_reentry(l, &l->owner, interrupted);
    unsigned spins = 1;
    do {
        sm_sync_transit_mark(sm_sync_transit_waiting(l)); /* held by another: a fork may wait */
        while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED))
            sm_sync_backoff(&spins);
        sm_sync_transit_mark(l);
    } while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE));
}

SM_INLINE void sm_sync_spinlock_lock(sm_sync_spinlock_t *l)
{
    void *prev = sm_sync_enter(l);
    if (sm_unlikely(__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE)))
        sm_sync_spinlock_contended(l, prev);
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
}

/* True if the lock was free and is now held; never waits. */
SM_INLINE bool sm_sync_spinlock_trylock(sm_sync_spinlock_t *l)
{
    if (__atomic_load_n(&l->locked, __ATOMIC_RELAXED))
        return false;
    void *prev = sm_sync_enter(l);
    return sm_sync_tried(prev, &l->owner, !__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE));
}

SM_INLINE void sm_sync_spinlock_unlock(sm_sync_spinlock_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
    sm_sync_entered(prev);
    sm_sync_leave();
}
SM_INLINE void sm_sync_spinlock_reinit(sm_sync_spinlock_t *l)
{
    l->owner = 0;
    l->locked = 0;
}
SM_SYNC_FORK_BY_OWNER(spinlock)
SM_HOT void sm_sync_spinlock_atomic_exec(sm_sync_spinlock_t *l, void (*fn)(void *), void *arg)
{
    sm_sync_spinlock_lock(l);
    fn(arg);
    sm_sync_spinlock_unlock(l);
}

#endif
