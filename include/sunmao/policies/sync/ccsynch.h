/* sync policy `ccsynch`: CC-Synch (Fatourou and Kallimanis, PPoPP 2012), a combining lock. A thread
 * announces its critical section (fn, arg) in a node and joins a queue with one exchange; the
 * thread at the head, the combiner, runs its own section and then those of the nodes behind it, in
 * queue order, up to SM_SYNC_CCSYNCH_BOUND of them, and hands the combiner's role to the next
 * waiter. Under contention the protected data stays in the combiner's cache and every section runs
 * without a lock handoff between cores: the paper's tlsfcc (TLSF behind CC-Synch) is 1.6-1.8x
 * TLSF behind a mutex.
 *
 * Differences from the paper's algorithm, and why: CC-Synch recycles nodes between threads, which
 * needs a node per thread that outlives its call (thread-local storage, which sunmao keeps at one
 * 8-byte slot for the whole allocator). Here a node lives on its thread's stack for the call only,
 * MCS-style (queue.h): the combiner reads a node's successor before it tells the node's thread its
 * section ran, waiting for the link if the successor has swapped the tail but not linked yet.
 * Same costs: one exchange per section, FIFO, a bounded combining pass.
 *
 * The combiner runs other threads' sections: a section must not use errno, thread-local state or
 * the err policy (core/layer.h; the layers' sections carry results back in their argument). lock()
 * and unlock() (release passes, fork hooks) join the same queue: a lock() waiter is never run for,
 * it is handed the lock. trylock takes the lock only if no one holds it or waits. The combiner
 * names itself as the holder (queue.h) while it runs sections, not while it hands the role on, so a
 * malloc from a signal handler that interrupted a combiner or a waiter of its own thread aborts with
 * one line instead of queueing behind it for ever. Fork: prepare locks, so no combiner is running
 * when fork copies the process; the child starts empty. A fork from a handler keeps a lock its
 * interrupted call holds and leaves one it waits for (SM_SYNC_FORK_BY_OWNER).
 * @model: name=ccsynch kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_CCSYNCH_H
#define SUNMAO_POLICY_SYNC_CCSYNCH_H

#include "queue.h"

#ifndef SM_SYNC_CCSYNCH_BOUND
#define SM_SYNC_CCSYNCH_BOUND 64 /* sections one combining pass runs for others */
#endif

typedef sm_sync_queue_t sm_sync_ccsynch_t;
#define SM_SYNC_ccsynch_INIT SM_SYNC_QUEUE_INIT
enum { sm_sync_ccsynch_thread_safe = 1 };

SM_INLINE void sm_sync_ccsynch_lock(sm_sync_ccsynch_t *l) { sm_sync_queue_lock(l); }
SM_INLINE void sm_sync_ccsynch_unlock(sm_sync_ccsynch_t *l) { sm_sync_queue_unlock(l); }
SM_INLINE bool sm_sync_ccsynch_trylock(sm_sync_ccsynch_t *l) { return sm_sync_queue_trylock(l); }
SM_INLINE void sm_sync_ccsynch_reinit(sm_sync_ccsynch_t *l) { sm_sync_queue_reinit(l); }
SM_SYNC_FORK_BY_OWNER(ccsynch)

/* The combiner holds the lock through its node `me`, whose section has run: runs the sections
 * queued behind it, then hands the role on or frees the lock. Its owner word is dropped before the
 * lock can pass to another thread: before a release that may succeed (no successor linked yet),
 * taken again if a successor turns up, and before the role is handed on. */
SM_SLOWPATH void sm_sync_ccsynch_combine(sm_sync_ccsynch_t *l, sm_sync_qnode_t *me)
{
    sm_sync_qnode_t *cur = me;
    for (unsigned ran = 0;; ran++) {
        sm_sync_qnode_t *succ = __atomic_load_n(&cur->next, __ATOMIC_ACQUIRE);
        if (!succ) {
            void *prev = sm_sync_leaving(l);
            sm_sync_owner_drop(&l->owner);
            succ = sm_sync_queue_next_or_release(l, cur);
            if (succ)
                sm_sync_owner_take(&l->owner);
            sm_sync_entered(prev);
        }
        if (cur != me) /* its section ran and its successor is known: its thread may go */
            __atomic_store_n(&cur->state, SM_SYNC_QN_DONE, __ATOMIC_RELEASE);
        if (!succ) {
            sm_sync_leave();
            return; /* the lock is free */
        }
        if (!succ->fn || ran == (SM_SYNC_CCSYNCH_BOUND)) {
            void *prev = sm_sync_leaving(l);
            sm_sync_owner_drop(&l->owner);
            __atomic_store_n(&succ->state, SM_SYNC_QN_GO, __ATOMIC_RELEASE); /* the next combiner, or a lock() */
            sm_sync_entered(prev);
            sm_sync_leave();
            return;
        }
        succ->fn(succ->arg);
        cur = succ;
    }
}

SM_HOT void sm_sync_ccsynch_atomic_exec(sm_sync_ccsynch_t *l, void (*fn)(void *), void *arg)
{
    void *prev = sm_sync_enter(l);
    sm_sync_qnode_t me = { NULL, SM_SYNC_QN_WAIT, fn, arg };
    if (!sm_sync_queue_enter(l, &me) && sm_sync_queue_wait(l, &me, prev) == SM_SYNC_QN_DONE) {
        sm_sync_entered(prev);
        sm_sync_leave();
        return; /* a combiner ran it */
    }
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
    fn(arg);
    sm_sync_ccsynch_combine(l, &me);
}

#endif
