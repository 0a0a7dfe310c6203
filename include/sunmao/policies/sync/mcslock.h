/* sync policy `mcslock`: the MCS queue lock (Mellor-Crummey and Scott, 1991), in the K42 form
 * (queue.h): FIFO, and each waiter spins on a node of its own instead of the lock's line, so a
 * release wakes one waiter and moves one cache line, however many wait. Suits a lock that many
 * cores contend for at once; uncontended it costs an exchange to lock and a compare-and-swap to
 * unlock. Nodes live on the waiters' stacks: no per-thread state, nothing to allocate.
 * @model: name=mcslock kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_MCSLOCK_H
#define SUNMAO_POLICY_SYNC_MCSLOCK_H

#include "queue.h"

typedef sm_sync_queue_t sm_sync_mcslock_t;
#define SM_SYNC_mcslock_INIT SM_SYNC_QUEUE_INIT
enum { sm_sync_mcslock_thread_safe = 1 };

SM_INLINE void sm_sync_mcslock_lock(sm_sync_mcslock_t *l) { sm_sync_queue_lock(l); }
SM_INLINE void sm_sync_mcslock_unlock(sm_sync_mcslock_t *l) { sm_sync_queue_unlock(l); }
SM_INLINE bool sm_sync_mcslock_trylock(sm_sync_mcslock_t *l) { return sm_sync_queue_trylock(l); }
SM_INLINE void sm_sync_mcslock_reinit(sm_sync_mcslock_t *l) { sm_sync_queue_reinit(l); }
SM_SYNC_FORK_BY_OWNER(mcslock)
SM_HOT void sm_sync_mcslock_atomic_exec(sm_sync_mcslock_t *l, void (*fn)(void *), void *arg)
{
    sm_sync_queue_lock(l);
    fn(arg);
    sm_sync_queue_unlock(l);
}

#endif
