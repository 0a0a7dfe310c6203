/* sync policy `mutex`: the platform's blocking lock (on Linux a futex word of its own, pthread's
 * mutex under ThreadSanitizer: platform/linux.h). Sleeps instead of spinning when contended, so it
 * behaves when threads outnumber cores; the statically initialised lock works before any
 * constructor.
 * @model: name=mutex kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_MUTEX_H
#define SUNMAO_POLICY_SYNC_MUTEX_H

#include <stdbool.h>
#include "../../core/compiler.h"
#include "../../platform/platform.h"
#include "owner.h"

typedef struct { sm_plat_lock_t m; sm_sync_owner_t owner; } sm_sync_mutex_t;
#define SM_SYNC_mutex_INIT { SM_PLAT_LOCK_INIT, SM_SYNC_OWNER_INIT }
enum { sm_sync_mutex_thread_safe = 1 };

SM_INLINE void sm_sync_mutex_lock(sm_sync_mutex_t *l)
{
    void *prev = sm_sync_enter(l);
    if (!sm_plat_trylock(&l->m)) {
        sm_sync_check_reentry(l, &l->owner, prev);
        sm_plat_lock(&l->m);
    }
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
}
SM_INLINE void sm_sync_mutex_unlock(sm_sync_mutex_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    sm_plat_unlock(&l->m);
    sm_sync_entered(prev);
    sm_sync_leave();
}
SM_INLINE bool sm_sync_mutex_trylock(sm_sync_mutex_t *l)
{
    void *prev = sm_sync_enter(l);
    return sm_sync_tried(prev, &l->owner, sm_plat_trylock(&l->m));
}
/* In a fork child only the forking thread exists; the lock it took in prepare is re-created
 * rather than unlocked, which is valid whichever thread owned it. */
SM_INLINE void sm_sync_mutex_reinit(sm_sync_mutex_t *l)
{
    l->owner = 0;
    sm_plat_lock_reinit(&l->m);
}
SM_SYNC_FORK_BY_OWNER(mutex)
SM_HOT void sm_sync_mutex_atomic_exec(sm_sync_mutex_t *l, void (*fn)(void *), void *arg)
{
    sm_sync_mutex_lock(l);
    fn(arg);
    sm_sync_mutex_unlock(l);
}

#endif
