/* sockets/start.h: the start-up a socket runs before the first request reaches its stack, for the
 * sockets that do not sit on libc_api.h (cmalloc_socket, kernel_socket, ...). Template, included by
 * a socket with
 *   SM_NEXT    the top layer of the composition
 *   SM_START   the name of this start-up: its functions are <SM_START>_ready, ... (SM_START_FN)
 * It offers
 *   bool SM_START_FN(ready)(void)  true once the stack is created; the first call creates it:
 *        the process secret seeded from the platform's entropy (before any layer makes a block:
 *        sheap and the secure layers tag blocks with it), the run-time configuration read where a
 *        layer of the composition uses it (core/conf.h, hosted only: a kernel has no environment),
 *        the composition's thread exit set to the stack's (if no other socket set one), then each
 *        layer's create bottom-up (SM_NEXT's create calls its next layer's first). A failed create
 *        leaves the stack uncreated: that request fails (ENOMEM) and the next one tries again.
 *        Hosted, the fork handlers are registered after the first success, outside the lock
 *        (the C library's registration may allocate, maybe through this very allocator).
 * It needs the platform's lock (sm_plat_lock_t): a blocking lock on Linux, a flag on the
 * freestanding platform (one thread). Not sm_plat_once: a once cannot be retried after a failure.
 *
 * Why a header of its own: libc_api.h keeps the same logic in its own statics (sm_socket_state,
 * sm_socket_init_slow), which a socket not built on the libc API cannot reach without editing it;
 * libc_api.h could later instantiate this template instead and keep only what is its own (the
 * background release clock, the statistics at exit).
 *
 * One start-up per stack: two sockets over the same top layer in one file share one (the second
 * names the first's with SM_START_USE, see cmalloc_socket.h), so the stack is created once.
 * @check: <sunmao/policies/err/warn.h> SM_START=t_start
 * @check-next: fake */
#include "../core/compiler.h"
#include "../core/layer.h"
#include "../core/secret.h"
#include "../platform/platform.h"
#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
#include "../policies/sync/owner.h" /* sm_sync_fork_begin/end, as libc_api.h's fork handlers */
#endif

#ifndef SM_NEXT
#error "sockets/start.h: define SM_NEXT (the top layer of the composition) before including"
#endif
#ifndef SM_START
#error "sockets/start.h: define SM_START (the name of this start-up) before including"
#endif
#define SM_START_FN(name) SM_CAT3(SM_START, _, name)

enum { SM_START_FN(uninit), SM_START_FN(busy), SM_START_FN(up) };
static int SM_START_FN(state);
static int SM_START_FN(hooks_done);
static sm_plat_lock_t SM_START_FN(lock) = SM_PLAT_LOCK_INIT;

#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
static void SM_START_FN(fork_prepare)(void)
{
    sm_sync_fork_begin();
    SM_NEXT_FN(fork_prepare)();
}
static void SM_START_FN(fork_parent)(void)
{
    SM_NEXT_FN(fork_parent)();
    sm_sync_fork_end();
}
static void SM_START_FN(fork_child)(void)
{
    SM_NEXT_FN(fork_child)();
    sm_sync_fork_end();
}
#endif

SM_SLOWPATH bool SM_START_FN(slow)(void)
{
    sm_plat_lock(&SM_START_FN(lock));
    int state = __atomic_load_n(&SM_START_FN(state), __ATOMIC_ACQUIRE);
    if (state == SM_START_FN(uninit)) {
        /* Marked busy while the create hooks run, so a diagnostic that looks at the state sees it. */
        __atomic_store_n(&SM_START_FN(state), SM_START_FN(busy), __ATOMIC_RELAXED);
        void (*none)(void) = NULL;
        __atomic_compare_exchange_n(&sm_thread_exit_top, &none, SM_NEXT_FN(thread_exit), false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED);
        uint64_t seed;
        if (sm_plat_entropy(&seed, sizeof seed))
            sm_secret_seed(seed);
#if defined(SUNMAO_CORE_CONF_H) && !(defined(SM_FREESTANDING) && SM_FREESTANDING)
        sm_conf_init(); /* before the create hooks, which read it */
#endif
        state = SM_NEXT_FN(create)() == 0 ? SM_START_FN(up) : SM_START_FN(uninit);
        __atomic_store_n(&SM_START_FN(state), state, __ATOMIC_RELEASE);
    }
    sm_plat_unlock(&SM_START_FN(lock));
    if (state != SM_START_FN(up))
        return false;
#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
    if (!__atomic_exchange_n(&SM_START_FN(hooks_done), 1, __ATOMIC_ACQ_REL))
        sm_plat_atfork(SM_START_FN(fork_prepare), SM_START_FN(fork_parent), SM_START_FN(fork_child));
#else
    (void)SM_START_FN(hooks_done);
#endif
    return true;
}

SM_INLINE bool SM_START_FN(ready)(void)
{
    return sm_likely(__atomic_load_n(&SM_START_FN(state), __ATOMIC_ACQUIRE) == SM_START_FN(up)) ||
           SM_START_FN(slow)();
}
