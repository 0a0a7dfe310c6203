/* sync policy `posix_spin`: the C library's spinlock (pthread_spin_*, through the platform layer).
 * The paper's hslab puts it on slab_lk's class locks, believing it yields after long waits; glibc's
 * does not (2.36 on x86-64: `lock decl`, then `pause` and reload until free, for ever), so a
 * preempted holder costs its waiters their whole time slice when threads outnumber cores: there,
 * `spinlock` (which yields) is the better choice (docs/sync.md has the measurement).
 * @model: name=posix_spin kind=policy family=sync */
#ifndef SUNMAO_POLICY_SYNC_POSIX_SPIN_H
#define SUNMAO_POLICY_SYNC_POSIX_SPIN_H

#include <stdbool.h>
#include "../../core/compiler.h"
#include "../../platform/platform.h"
#include "owner.h"

typedef struct { sm_plat_spin_t s; sm_sync_owner_t owner; } sm_sync_posix_spin_t;
#define SM_SYNC_posix_spin_INIT { SM_PLAT_SPIN_INIT, SM_SYNC_OWNER_INIT }
enum { sm_sync_posix_spin_thread_safe = 1 };

SM_INLINE void sm_sync_posix_spin_lock(sm_sync_posix_spin_t *l)
{
    void *prev = sm_sync_enter(l);
    if (!sm_plat_spin_trylock(&l->s)) {
        sm_sync_check_reentry(l, &l->owner, prev);
        sm_plat_spin_lock(&l->s);
    }
    sm_sync_owner_take(&l->owner);
    sm_sync_entered(prev);
}
SM_INLINE void sm_sync_posix_spin_unlock(sm_sync_posix_spin_t *l)
{
    void *prev = sm_sync_leaving(l);
    sm_sync_owner_drop(&l->owner);
    sm_plat_spin_unlock(&l->s);
    sm_sync_entered(prev);
    sm_sync_leave();
}
SM_INLINE bool sm_sync_posix_spin_trylock(sm_sync_posix_spin_t *l)
{
    void *prev = sm_sync_enter(l);
    return sm_sync_tried(prev, &l->owner, sm_plat_spin_trylock(&l->s));
}
SM_INLINE void sm_sync_posix_spin_reinit(sm_sync_posix_spin_t *l)
{
    l->owner = 0;
    sm_plat_spin_reinit(&l->s);
}
SM_SYNC_FORK_BY_OWNER(posix_spin)
SM_HOT void sm_sync_posix_spin_atomic_exec(sm_sync_posix_spin_t *l, void (*fn)(void *), void *arg)
{
    sm_sync_posix_spin_lock(l);
    fn(arg);
    sm_sync_posix_spin_unlock(l);
}

#endif
