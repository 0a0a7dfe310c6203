/* sync policy `none`: no synchronisation, for layers used by one thread only (per-thread caches,
 * single-threaded or bare-metal allocators). A layer using it declares itself not thread-safe.
 *
 * Every sync policy P provides: type sm_sync_P_t, initializer SM_SYNC_P_INIT (usable in static
 * storage, before any constructor runs), enum sm_sync_P_thread_safe, and
 *   void sm_sync_P_lock(sm_sync_P_t *), sm_sync_P_unlock(sm_sync_P_t *),
 *   bool sm_sync_P_trylock(sm_sync_P_t *)           (takes the lock only if that needs no wait),
 *   void sm_sync_P_reinit(sm_sync_P_t *)            (fork child: make usable again),
 *   void sm_sync_P_atomic_exec(sm_sync_P_t *, void (*fn)(void *), void *arg)  (paper §2.2 (3)). */
#ifndef SUNMAO_POLICY_SYNC_NONE_H
#define SUNMAO_POLICY_SYNC_NONE_H

#include <stdbool.h>
#include "../../core/compiler.h"

typedef struct { char unused_; } sm_sync_none_t;
#define SM_SYNC_none_INIT { 0 }
enum { sm_sync_none_thread_safe = 0 };

SM_INLINE void sm_sync_none_lock(sm_sync_none_t *l) { (void)l; }
SM_INLINE void sm_sync_none_unlock(sm_sync_none_t *l) { (void)l; }
SM_INLINE bool sm_sync_none_trylock(sm_sync_none_t *l) { (void)l; return true; }
SM_INLINE void sm_sync_none_reinit(sm_sync_none_t *l) { (void)l; }
SM_INLINE void sm_sync_none_atomic_exec(sm_sync_none_t *l, void (*fn)(void *), void *arg)
{
    (void)l;
    fn(arg);
}

#endif
