/* Waiting, for the sync policies that spin. Two ways, for two kinds of word:
 *   sm_sync_backoff   a word every waiter reads and writes (a test-and-set lock): double the pauses
 *                     between two looks up to 1024, so the waiters leave the line to the holder;
 *   sm_sync_spin      a word only its waiter watches (its queue node, its ticket's turn): look at
 *                     every pause, or the waiter sleeps through its turn, which in a queue stalls
 *                     everyone behind it (exponential backoff there made tlsfcc 1.6x slower than
 *                     tlsf on larson; docs/sync.md).
 * Both yield the CPU at every look after a bounded spin, so a holder that was preempted (or a
 * combiner running others' sections) gets its CPU back instead of losing it to waiters for a whole
 * time slice. Shared by spinlock, ticket, mcslock, ccsynch and flatcombine. */
#ifndef SUNMAO_POLICY_SYNC_WAIT_H
#define SUNMAO_POLICY_SYNC_WAIT_H

#include "../../core/compiler.h"
#include "../../platform/platform.h"

SM_INLINE void sm_sync_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* One wait step on a word all waiters share; *spins starts at 1. */
SM_INLINE void sm_sync_backoff(unsigned *spins)
{
    if (*spins < 1024) {
        for (unsigned i = 0; i < *spins; i++)
            sm_sync_relax();
        *spins <<= 1;
    } else {
        sm_plat_yield();
    }
}

/* One wait step on a word of one's own; *spins starts at 0. */
SM_INLINE void sm_sync_spin(unsigned *spins)
{
    if (*spins < 1024) {
        ++*spins;
        sm_sync_relax();
    } else {
        sm_plat_yield();
    }
}

/* Waits until *word, read with acquire order, differs from `value`; returns what it read. */
SM_INLINE int sm_sync_wait_while_int(const int *word, int value)
{
    unsigned spins = 0;
    int v;
    while ((v = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == value)
        sm_sync_spin(&spins);
    return v;
}

#endif
