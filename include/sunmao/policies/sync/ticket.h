/* sync policy `ticket`: a ticket lock. A waiter takes the next ticket with one fetch-and-add and
 * waits until the lock serves it, so the lock is FIFO-fair: no thread waits while later arrivals
 * get it (a test-and-set lock lets the thread nearest the line win). The price is that a preempted
 * waiter stalls everyone behind it; the wait backs off to yielding (wait.h), which bounds the
 * damage when threads outnumber cores. trylock takes a ticket only if it would be served at once.
 * @model: name=ticket kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_TICKET_H
#define SUNMAO_POLICY_SYNC_TICKET_H

#include <stdbool.h>
#include "owner.h"
#include "wait.h"

typedef struct { unsigned next, serving; sm_sync_owner_t owner; } sm_sync_ticket_t;
#define SM_SYNC_ticket_INIT { 0, 0, SM_SYNC_OWNER_INIT }
enum { sm_sync_ticket_thread_safe = 1 };

SM_SLOWPATH void sm_sync_ticket_wait(sm_sync_ticket_t *l, unsigned ticket)
{
    unsigned spins = 0; /* every waiter reads serving, but only one is served next: no backoff */
    while (__atomic_load_n(&l->serving, __ATOMIC_ACQUIRE) != ticket)
        sm_sync_spin(&spins);
}

SM_INLINE void sm_sync_ticket_lock(sm_sync_ticket_t *l)
{
    void *prev = sm_sync_enter(l);
    unsigned ticket = __atomic_fetch_add(&l->next, 1, __ATOMIC_RELAXED);
    if (sm_unlikely(__atomic_load_n(&l->serving, __ATOMIC_ACQUIRE) != ticket)) {
        sm_sync_check_reentry(l, &l->owner, prev);
        sm_sync_ticket_wait(l, ticket);
    }
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
}

SM_INLINE bool sm_sync_ticket_trylock(sm_sync_ticket_t *l)
{
    unsigned serving = __atomic_load_n(&l->serving, __ATOMIC_ACQUIRE);
    unsigned expected = serving;
    void *prev = sm_sync_enter(l);
    return sm_sync_tried(prev, &l->owner,
                         __atomic_compare_exchange_n(&l->next, &expected, serving + 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
}

/* Only the holder writes `serving`. */
SM_INLINE void sm_sync_ticket_unlock(sm_sync_ticket_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    __atomic_store_n(&l->serving, __atomic_load_n(&l->serving, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
    sm_sync_entered(prev);
    sm_sync_leave();
}

/* Fork child: only the forking thread exists, and it held the lock (fork_prepare): start afresh. */
SM_INLINE void sm_sync_ticket_reinit(sm_sync_ticket_t *l)
{
    l->owner = 0;
    l->next = l->serving = 0;
}
SM_SYNC_FORK_BY_OWNER(ticket)

SM_HOT void sm_sync_ticket_atomic_exec(sm_sync_ticket_t *l, void (*fn)(void *), void *arg)
{
    sm_sync_ticket_lock(l);
    fn(arg);
    sm_sync_ticket_unlock(l);
}

#endif
