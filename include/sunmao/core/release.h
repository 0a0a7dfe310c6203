/* Giving memory back: the request every layer answers with L_release, and the note by which a layer
 * says it holds memory that time will let it give back. Framework core.
 *
 *   void L_release(sm_release_t *r)   give back what this layer holds free: everything it can
 *                                     (SM_RELEASE_ALL, malloc_trim) or what has been idle for the
 *                                     layer's decay time at r->now_ms (SM_RELEASE_DECAYED); add the
 *                                     bytes to r->released, lower r->next_ms to the earliest time
 *                                     it will have more to give back (unchanged: nothing pending);
 *                                     then pass r to the next layer. Never called with a lock held.
 *   bool L_purge(sm_mctx_t *c)        drop the physical pages of [c->ptr, c->ptr + c->size), a
 *                                     page-aligned range of a block the caller got through this
 *                                     layer and still holds, and keep them mapped; SM_F_ZERO: they
 *                                     read as zero afterwards. Layers that do not own the block pass
 *                                     it down; OS layers do it, or answer false (a static pool).
 *
 * A layer that starts holding such memory on a slow path calls sm_release_note(). Whoever runs the
 * composition's release clock (the socket's background thread) sleeps while no note is pending and
 * calls L_release on the top layer at the times the layers ask for. The note is a plain load when
 * one is already pending; its first store after an idle period wakes the sleeping thread (one
 * system call per idle period, on a slow path that already took a lock). Each composition is one
 * translation unit, so these statics are per composition. */
#ifndef SUNMAO_CORE_RELEASE_H
#define SUNMAO_CORE_RELEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "compiler.h"

/* SM_RELEASE_THREAD: the calling thread's cached objects go back (thread.tcache.flush); every
 * other layer treats it as SM_RELEASE_DECAYED. */
enum { SM_RELEASE_DECAYED = 0, SM_RELEASE_ALL = 1, SM_RELEASE_THREAD = 2 };

typedef struct sm_release {
    uint64_t now_ms;  /* CLOCK_MONOTONIC, ms */
    unsigned how;     /* SM_RELEASE_* */
    size_t released;  /* bytes given back so far, by every layer on the way */
    uint64_t next_ms; /* earliest time some layer has more to give back; UINT64_MAX: none */
    int may_move;     /* 1: the caller is the release clock's own thread, which a layer may move
                       * between CPUs (carrcache_rseq empties idle CPUs' caches there) */
} sm_release_t;

/* Whether a block of `held` usable bytes that its layer kept whole when asked to shrink it to `size`
 * (it still fits the block's size class or power of two) should rather be moved: the move frees more
 * than half of it, as the peers' rule is. A layer that shrinks in place keeps no more than the new
 * size's class (tlsf_glk with its sizeclass slot), so a buffer shrunk there regrows into its own
 * freed tail and is not moved by this rule. The rule used to ask for 16 KiB freed as well, which
 * kept 8 KiB objects trimmed to 1000 bytes whole (docs/default-allocator.md, 2026-12-07). One rule
 * for the socket's realloc and for a layer that hides its next layer's usable size from the socket
 * (tail_chksum). */
SM_INLINE bool sm_shrink_should_move(size_t held, size_t size) { return held / 2 >= size && held - size >= 64; }

/* For a layer that hides its next layer's usable size (tail_chksum, delayed_free): whether to decline
 * a shrink to a footprint of `size` that the next layer made in place, so that the socket moves the
 * block. Only when the next layer kept its block whole (`held`, at least the old footprint `old`):
 * one it cut no longer reaches what the layer's header names, and is sealed at its new size. */
SM_INLINE bool sm_shrink_declined(size_t held, size_t old, size_t size)
{
    return held >= old && sm_shrink_should_move(held, size);
}

static inline sm_release_t sm_release_request(uint64_t now_ms, unsigned how)
{
    sm_release_t r = { now_ms, how, 0, UINT64_MAX, 0 };
    return r;
}

static inline void sm_release_due(sm_release_t *r, uint64_t when)
{
    if (when < r->next_ms)
        r->next_ms = when;
}

/* 1 while a note is pending; the release clock clears it before each pass. */
static int sm_release_pending;
/* Set by a release clock that sleeps on sm_release_pending: the note must wake it. */
static int sm_release_sleeper;
/* How the note wakes a sleeping clock; set by the socket that runs one (NULL: nobody sleeps). */
static void (*sm_release_wake)(int *word);

static inline void sm_release_note(void)
{
    if (sm_likely(__atomic_load_n(&sm_release_pending, __ATOMIC_RELAXED)))
        return;
    if (!__atomic_exchange_n(&sm_release_pending, 1, __ATOMIC_ACQ_REL) &&
        __atomic_load_n(&sm_release_sleeper, __ATOMIC_ACQUIRE) && sm_release_wake)
        sm_release_wake(&sm_release_pending);
}

#endif
