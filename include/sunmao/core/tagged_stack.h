/* A lock-free LIFO (Treiber stack) of nodes whose first word is their link, with an ABA tag: the
 * head is {top, tag} in 16 bytes changed by one 16-byte compare-and-swap, and every change bumps
 * the tag, so a pop that read a top which was popped and pushed again in between fails and retries
 * instead of installing a stale link. Framework core, used by the lock-free and wait-free layers.
 *
 * The CAS is an inline `lock cmpxchg16b` on x86-64 (GCC sends 16-byte __atomic calls to
 * libatomic, which may take a lock: not lock-free, and a call on the hot path); elsewhere, and
 * under ThreadSanitizer (which must see it), the compiler's 16-byte __atomic builtin.
 *
 * Contract: a pop reads the link of a node that another thread may have popped (and reused) in
 * the meantime, so nodes must stay mapped and readable for as long as the stack is used: memory
 * holding a node may be reused or purged (the stale read then fails the CAS), never unmapped.
 * Push and pop are lock-free (a retry means another thread's operation succeeded), not wait-free. */
#ifndef SUNMAO_CORE_TAGGED_STACK_H
#define SUNMAO_CORE_TAGGED_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "compiler.h"

#if defined(__SANITIZE_THREAD__)
#define SM_TSTACK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SM_TSTACK_TSAN 1
#endif
#endif

typedef struct sm_tnode { struct sm_tnode *next; } sm_tnode_t;

/* Two words changed together by sm_pair_cas: a stack's {top, tag}, or any pair a lock-free
 * structure must update at once (segfit_lf's carving region {cur, end}). */
typedef struct {
    _Alignas(16) uintptr_t lo;
    uintptr_t hi;
} sm_pair_t;

/* Replaces *s by {lo, hi} if it still holds *seen; else *seen gets its current value. */
SM_INLINE bool sm_pair_cas(sm_pair_t *s, sm_pair_t *seen, uintptr_t lo, uintptr_t hi)
{
#if defined(__x86_64__) && !defined(SM_TSTACK_TSAN)
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*s), "+a"(seen->lo), "+d"(seen->hi)
                         : "b"(lo), "c"(hi)
                         : "memory");
    return ok;
#else
    unsigned __int128 expect = (unsigned __int128)seen->hi << 64 | seen->lo;
    unsigned __int128 want = (unsigned __int128)hi << 64 | lo;
    bool ok = __atomic_compare_exchange_n((unsigned __int128 *)s, &expect, want, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST);
    seen->lo = (uintptr_t)expect, seen->hi = (uintptr_t)(expect >> 64);
    return ok;
#endif
}

/* The pair as two loads (hi first): a torn pair only makes the next CAS fail. */
SM_INLINE sm_pair_t sm_pair_peek(const sm_pair_t *s)
{
    sm_pair_t h;
    h.hi = __atomic_load_n(&s->hi, __ATOMIC_ACQUIRE);
    h.lo = __atomic_load_n(&s->lo, __ATOMIC_ACQUIRE);
    return h;
}

/* A stack: lo = the top node (or 0), hi = the tag. */
typedef sm_pair_t sm_tstack_t;
#define SM_TSTACK_INIT { 0, 0 }

/* Pushes the chain first .. last (linked through their first words) in one step. */
SM_INLINE void sm_tstack_push_chain(sm_tstack_t *s, sm_tnode_t *first, sm_tnode_t *last)
{
    sm_pair_t h = sm_pair_peek(s);
    do
        __atomic_store_n(&last->next, (sm_tnode_t *)h.lo, __ATOMIC_RELAXED);
    while (!sm_pair_cas(s, &h, (uintptr_t)first, h.hi + 1));
}

SM_INLINE void sm_tstack_push(sm_tstack_t *s, sm_tnode_t *n) { sm_tstack_push_chain(s, n, n); }

/* A link read by a pop, of a node another thread may have taken and be writing by now: the race
 * the contract allows (the value is used only if the tag shows nobody did), hidden from
 * ThreadSanitizer, which would report it. */
#ifdef SM_TSTACK_TSAN
__attribute__((no_sanitize_thread, noinline)) static uintptr_t sm_tstack_link(sm_tnode_t *n)
{
    return (uintptr_t) * (sm_tnode_t *volatile *)&n->next;
}
#else
SM_INLINE uintptr_t sm_tstack_link(sm_tnode_t *n) { return (uintptr_t)__atomic_load_n(&n->next, __ATOMIC_RELAXED); }
#endif

/* The same kind of read for any word of stable memory (capability STABLE) that another thread may
 * have reused by now: a look whose value decides nothing unless a later compare-and-swap, or an
 * epoch, confirms it (slab_wf's look at a slab it freed into). */
#ifdef SM_TSTACK_TSAN
__attribute__((no_sanitize_thread, noinline)) static uint64_t sm_stable_look(const uint64_t *w)
{
    return *(const volatile uint64_t *)w;
}
#else
SM_INLINE uint64_t sm_stable_look(const uint64_t *w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }
#endif

/* The top node, unlinked, or NULL when empty. */
SM_INLINE sm_tnode_t *sm_tstack_pop(sm_tstack_t *s)
{
    sm_pair_t h = sm_pair_peek(s);
    for (;;) {
        sm_tnode_t *n = (sm_tnode_t *)h.lo;
        if (!n)
            return NULL;
        uintptr_t next = sm_tstack_link(n); /* n may be taken by now: the contract */
        if (sm_pair_cas(s, &h, next, h.hi + 1))
            return n;
    }
}

/* Every node at once (a chain, NULL-terminated), leaving the stack empty. */
SM_INLINE sm_tnode_t *sm_tstack_take_all(sm_tstack_t *s)
{
    sm_pair_t h = sm_pair_peek(s);
    while (h.lo && !sm_pair_cas(s, &h, 0, h.hi + 1))
        ;
    return (sm_tnode_t *)h.lo;
}

#endif /* SUNMAO_CORE_TAGGED_STACK_H */
