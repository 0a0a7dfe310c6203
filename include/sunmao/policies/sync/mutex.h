/* sync policy `mutex`: a POSIX mutex. Sleeps instead of spinning when contended, so it behaves
 * when threads outnumber cores; the statically initialised mutex works before any constructor. */
#ifndef SUNMAO_POLICY_SYNC_MUTEX_H
#define SUNMAO_POLICY_SYNC_MUTEX_H

#include <pthread.h>
#include <stdbool.h>
#include "../../core/compiler.h"

typedef struct { pthread_mutex_t m; } sm_sync_mutex_t;
#define SM_SYNC_mutex_INIT { PTHREAD_MUTEX_INITIALIZER }
enum { sm_sync_mutex_thread_safe = 1 };

SM_INLINE void sm_sync_mutex_lock(sm_sync_mutex_t *l) { pthread_mutex_lock(&l->m); }
SM_INLINE void sm_sync_mutex_unlock(sm_sync_mutex_t *l) { pthread_mutex_unlock(&l->m); }
SM_INLINE bool sm_sync_mutex_trylock(sm_sync_mutex_t *l) { return pthread_mutex_trylock(&l->m) == 0; }
/* In a fork child only the forking thread exists; the lock it took in prepare is re-created
 * rather than unlocked, which is valid whichever thread owned it. */
SM_INLINE void sm_sync_mutex_reinit(sm_sync_mutex_t *l) { pthread_mutex_init(&l->m, NULL); }
SM_INLINE void sm_sync_mutex_atomic_exec(sm_sync_mutex_t *l, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&l->m);
    fn(arg);
    pthread_mutex_unlock(&l->m);
}

#endif
