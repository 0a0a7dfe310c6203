/* sync policy `mutex`: the platform's blocking lock (a POSIX mutex on Linux). Sleeps instead of
 * spinning when contended, so it behaves when threads outnumber cores; the statically initialised
 * lock works before any constructor. */
#ifndef SUNMAO_POLICY_SYNC_MUTEX_H
#define SUNMAO_POLICY_SYNC_MUTEX_H

#include <stdbool.h>
#include "../../core/compiler.h"
#include "../../platform/platform.h"

typedef struct { sm_plat_lock_t m; } sm_sync_mutex_t;
#define SM_SYNC_mutex_INIT { SM_PLAT_LOCK_INIT }
enum { sm_sync_mutex_thread_safe = 1 };

SM_INLINE void sm_sync_mutex_lock(sm_sync_mutex_t *l) { sm_plat_lock(&l->m); }
SM_INLINE void sm_sync_mutex_unlock(sm_sync_mutex_t *l) { sm_plat_unlock(&l->m); }
SM_INLINE bool sm_sync_mutex_trylock(sm_sync_mutex_t *l) { return sm_plat_trylock(&l->m); }
/* In a fork child only the forking thread exists; the lock it took in prepare is re-created
 * rather than unlocked, which is valid whichever thread owned it. */
SM_INLINE void sm_sync_mutex_reinit(sm_sync_mutex_t *l) { sm_plat_lock_reinit(&l->m); }
SM_HOT void sm_sync_mutex_atomic_exec(sm_sync_mutex_t *l, void (*fn)(void *), void *arg)
{
    sm_plat_lock(&l->m);
    fn(arg);
    sm_plat_unlock(&l->m);
}

#endif
