/* The per-thread lifecycle service (the paper's per-thread create_obj and its end): one exit hook
 * per composition, whichever layers keep per-thread state. Framework platform; each composition is
 * one translation unit, so these statics are per composition.
 *
 *   bool sm_thread_attach(void (*layer_exit)(void))  a layer calls it on the slow path where it
 *        creates state for the calling thread (a thread cache, a thread's region): the
 *        composition's thread exit then runs when this thread exits. layer_exit is the caller's
 *        L_thread_exit, used only by a composition without a socket (see below). False when the
 *        platform has no exit hook left: the layer must then not create the state (it would leak).
 *   sm_thread_exit_top  the composition's exit: its top layer's L_thread_exit, set by the socket at
 *        start-up; it runs each layer's L_thread_exit top-down through the chain. Without one (a
 *        unit test, which may hold several stacks in one file), every distinct layer_exit attached
 *        so far runs, in the order they first attached (up to SM_THREAD_EXITS of them).
 * The exit hook is one platform key, made on the first attach (a composition whose layers keep no
 * per-thread state never makes one), so no static TLS is spent here: the only initial-exec slot in
 * libsunmao is the thread cache's pointer. L_thread_exit must tolerate a second call and work
 * attached again after it (a later destructor that allocates): glibc then runs the hook again, for
 * at most PTHREAD_DESTRUCTOR_ITERATIONS rounds. */
#ifndef SUNMAO_PLATFORM_LIFECYCLE_H
#define SUNMAO_PLATFORM_LIFECYCLE_H

#include <stdbool.h>
#include "../core/compiler.h"
#include "platform.h" /* the lock, once and key primitives (it includes this file last) */

#define SM_THREAD_EXITS 16
static void (*sm_thread_exit_top)(void) SM_UNUSED;
static void (*sm_thread_exits[SM_THREAD_EXITS])(void) SM_UNUSED;
static sm_plat_once_t sm_thread_once SM_UNUSED = SM_PLAT_ONCE_INIT;
static sm_plat_key_t sm_thread_key SM_UNUSED;
static bool sm_thread_key_made SM_UNUSED;

SM_UNUSED static void sm_thread_on_exit(void *value)
{
    (void)value;
    void (*top)(void) = __atomic_load_n(&sm_thread_exit_top, __ATOMIC_ACQUIRE);
    if (top) {
        top();
        return;
    }
    for (unsigned i = 0; i < SM_THREAD_EXITS; i++) {
        void (*exit_fn)(void) = __atomic_load_n(&sm_thread_exits[i], __ATOMIC_ACQUIRE);
        if (!exit_fn)
            break;
        exit_fn();
    }
}

SM_UNUSED static void sm_thread_make_key(void)
{
    sm_thread_key_made = sm_plat_key_create(&sm_thread_key, sm_thread_on_exit);
}

SM_UNUSED static bool sm_thread_attach(void (*layer_exit)(void))
{
    sm_plat_once(&sm_thread_once, sm_thread_make_key);
    if (!sm_thread_key_made)
        return false;
    /* Register layer_exit once: claim the first empty entry unless an entry already has it. */
    for (unsigned i = 0; i < SM_THREAD_EXITS; i++) {
        void (*seen)(void) = NULL;
        if (__atomic_compare_exchange_n(&sm_thread_exits[i], &seen, layer_exit, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE) || seen == layer_exit)
            break;
    }
    sm_plat_key_set(sm_thread_key, (void *)1);
    return true;
}

#endif
