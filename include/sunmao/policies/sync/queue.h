/* The queue that the `mcslock` and `ccsynch` policies share: an MCS queue lock (Mellor-Crummey and
 * Scott, 1991) in the K42 form (Auslander et al.; Scott, "Shared-Memory Synchronization", 2013):
 * a waiter spins on a node of its own, on its stack, and the lock itself serves as the holder's
 * node once the holder has the lock, so lock() and unlock() take no node argument and a node lives
 * only while its thread waits. A node may carry a request (fn, arg): ccsynch's combiner runs the
 * requests of the nodes behind it; mcslock's nodes carry none.
 *
 * Invariants: tail is NULL (free), &head (held, no node of a waiter behind the holder), or the
 * last waiting node. head.next is the first waiter while the holder holds through head, and NULL
 * whenever tail is NULL. A waiter's node is written by the thread before it (its next) and by the
 * thread that hands it the lock or runs its request (state), then never again.
 * The holder (lock()'s caller, or ccsynch's combiner) names itself in `owner` (owner.h) from after it
 * has the lock to before it lets it go; its thread's transit names the lock while it enters, waits
 * (marked waiting) and releases. So a malloc from a signal handler that interrupted its own thread's
 * holding or waiting call, and finds the lock busy, aborts with owner.h's one line instead of
 * waiting behind itself for ever, and a fork from such a handler keeps or leaves the lock
 * (SM_SYNC_FORK_BY_OWNER) instead of queueing behind the interrupted call. */
#ifndef SUNMAO_POLICY_SYNC_QUEUE_H
#define SUNMAO_POLICY_SYNC_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include "owner.h"
#include "wait.h"

enum { SM_SYNC_QN_WAIT = 0, SM_SYNC_QN_GO = 1, SM_SYNC_QN_DONE = 2 };

typedef struct sm_sync_qnode {
    struct sm_sync_qnode *next;
    int state;                /* SM_SYNC_QN_*: what the thread before tells this one */
    void (*fn)(void *);       /* a request (ccsynch), or NULL: this thread wants the lock itself */
    void *arg;
} sm_sync_qnode_t;

typedef struct {
    sm_sync_qnode_t head;     /* the holder's node once it holds; head.next: the first waiter */
    sm_sync_qnode_t *tail;
    sm_sync_owner_t owner;    /* the holder's thread (owner.h), 0 while none is named */
} sm_sync_queue_t;
#define SM_SYNC_QUEUE_INIT { { NULL, 0, NULL, NULL }, NULL, SM_SYNC_OWNER_INIT }

/* Enqueues `me`; true if the lock was free (me holds it through its own node). Else the caller
 * waits on me->state. */
SM_INLINE bool sm_sync_queue_enter(sm_sync_queue_t *l, sm_sync_qnode_t *me)
{
    sm_sync_qnode_t *prev = __atomic_exchange_n(&l->tail, me, __ATOMIC_ACQ_REL);
    if (!prev)
        return true;
    __atomic_store_n(&prev->next, me, __ATOMIC_RELEASE);
    return false;
}

/* me, queued on l, waits for its turn (GO) or its request's completion (DONE). interrupted: the
 * transit before this call entered l (sm_sync_enter's answer): if that call, on this thread,
 * holds l or waits for it, the wait would be for ever, and owner.h's one line ends it. */
SM_SLOWPATH int sm_sync_queue_wait(sm_sync_queue_t *l, sm_sync_qnode_t *me, void *interrupted)
{
    sm_sync_check_reentry(l, &l->owner, interrupted);
    sm_sync_transit_mark(sm_sync_transit_waiting(l)); /* holds nothing yet: a fork may wait for l */
    int state = sm_sync_wait_while_int(&me->state, SM_SYNC_QN_WAIT);
    sm_sync_transit_mark(l);
    return state;
}

/* me holds the lock through its node: hands the holding over to the lock's head, so me can go. */
SM_INLINE void sm_sync_queue_settle(sm_sync_queue_t *l, sm_sync_qnode_t *me)
{
    sm_sync_qnode_t *succ = __atomic_load_n(&me->next, __ATOMIC_ACQUIRE);
    if (!succ) {
        sm_sync_qnode_t *expected = me;
        if (__atomic_compare_exchange_n(&l->tail, &expected, &l->head, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return; /* head.next is NULL already */
        unsigned spins = 0; /* a waiter swapped the tail and is about to link itself behind me */
        while (!(succ = __atomic_load_n(&me->next, __ATOMIC_ACQUIRE)))
            sm_sync_spin(&spins);
    }
    __atomic_store_n(&l->head.next, succ, __ATOMIC_RELAXED);
}

/* The successor of `cur` (which holds), or NULL after the lock was released (tail was cur). */
SM_INLINE sm_sync_qnode_t *sm_sync_queue_next_or_release(sm_sync_queue_t *l, sm_sync_qnode_t *cur)
{
    sm_sync_qnode_t *succ = __atomic_load_n(&cur->next, __ATOMIC_ACQUIRE);
    if (succ)
        return succ;
    sm_sync_qnode_t *expected = cur;
    if (__atomic_compare_exchange_n(&l->tail, &expected, NULL, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        return NULL;
    unsigned spins = 0;
    while (!(succ = __atomic_load_n(&cur->next, __ATOMIC_ACQUIRE)))
        sm_sync_spin(&spins);
    return succ;
}

SM_INLINE void sm_sync_queue_lock(sm_sync_queue_t *l)
{
    void *prev = sm_sync_enter(l);
    sm_sync_qnode_t me = { NULL, SM_SYNC_QN_WAIT, NULL, NULL };
    if (!sm_sync_queue_enter(l, &me))
        sm_sync_queue_wait(l, &me, prev); /* only SM_SYNC_QN_GO comes to a node without a request */
    sm_sync_queue_settle(l, &me);
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
}

SM_INLINE bool sm_sync_queue_trylock(sm_sync_queue_t *l)
{
    if (__atomic_load_n(&l->tail, __ATOMIC_RELAXED))
        return false;
    void *prev = sm_sync_enter(l);
    sm_sync_qnode_t *expected = NULL;
    return sm_sync_tried(prev, &l->owner,
                         __atomic_compare_exchange_n(&l->tail, &expected, &l->head, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
}

/* The holder (through head) lets the first waiter go, or frees the lock. */
SM_INLINE void sm_sync_queue_unlock(sm_sync_queue_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    sm_sync_qnode_t *succ = sm_sync_queue_next_or_release(l, &l->head);
    if (succ) {
        __atomic_store_n(&l->head.next, NULL, __ATOMIC_RELAXED); /* tail is past head: no one else writes it */
        __atomic_store_n(&succ->state, SM_SYNC_QN_GO, __ATOMIC_RELEASE);
    }
    sm_sync_entered(prev);
    sm_sync_leave();
}

/* Fork child: the forking thread held the lock (fork_prepare); waiters' nodes were on the stacks
 * of threads that do not exist here. */
SM_INLINE void sm_sync_queue_reinit(sm_sync_queue_t *l)
{
    l->head.next = NULL;
    l->tail = NULL;
    l->owner = 0;
}

#endif
