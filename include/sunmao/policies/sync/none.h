/* sync policy `none`: no synchronisation, for layers used by one thread only (per-thread caches,
 * single-threaded or bare-metal allocators). A layer using it declares itself not thread-safe.
 *
 * Every sync policy P provides: type sm_sync_P_t, initializer SM_SYNC_P_INIT (usable in static
 * storage, before any constructor runs), enum sm_sync_P_thread_safe, and
 *   void sm_sync_P_atomic_exec(sm_sync_P_t *, void (*fn)(void *), void *arg)  (paper §2.2 (3))
 *        runs the critical section fn(arg) exclusively. Layers hand their request paths' sections
 *        to it, so a combining policy may run fn on another thread: a section sets no errno and
 *        raises nothing, its results travel back in *arg (tests/unit/sync_sections.c runs every
 *        section on a server thread). A lock policy's is lock; fn(arg); unlock. Always inlined
 *        (SM_HOT): fn is a constant at the call site, so a lock policy's section is inlined too.
 *   void sm_sync_P_lock(sm_sync_P_t *), sm_sync_P_unlock(sm_sync_P_t *)
 *        exclusive access, excluding every atomic_exec of the same object too, for work off the
 *        request paths: release passes, fork hooks, diagnostics;
 *   bool sm_sync_P_trylock(sm_sync_P_t *)           (takes it only if that needs no wait),
 *   void sm_sync_P_reinit(sm_sync_P_t *)            (fork child: make usable again, whoever held it).
 * A layer's fork hooks (SM_FORK_HOOKS_ONE_LOCK) take lock before fork and reinit in the child.
 * The policies, what each is for and their measurements: docs/sync.md.
 * @model: name=none kind=policy family=sync */
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
SM_INLINE void sm_sync_none_fork_lock(sm_sync_none_t *l) { (void)l; }
SM_INLINE void sm_sync_none_fork_unlock(sm_sync_none_t *l) { (void)l; }
SM_INLINE void sm_sync_none_fork_reinit(sm_sync_none_t *l) { (void)l; }
SM_HOT void sm_sync_none_atomic_exec(sm_sync_none_t *l, void (*fn)(void *), void *arg)
{
    (void)l;
    fn(arg);
}

#endif
