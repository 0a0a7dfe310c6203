/* Unit test of every sync policy (policies/sync/): spinlock, mutex, posix_spin, ticket, mcslock,
 * ccsynch, flatcombine. For each, four threads run a section that reads and bumps two counters
 * and detects another section running at once: three through atomic_exec, one through lock/unlock
 * and trylock. Each section's result (the counter it saw) travels back to its caller, so a
 * combining policy that ran a section for another thread must carry it back: every value must come
 * back exactly once. Then trylock on a held and a free lock, and fork: the lock taken in
 * fork_prepare's place, the child re-creates it and uses it while the parent's threads go on. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/sync/ccsynch.h>
#include <sunmao/policies/sync/flatcombine.h>
#include <sunmao/policies/sync/mcslock.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/posix_spin.h>
#include <sunmao/policies/sync/spinlock.h>
#include <sunmao/policies/sync/ticket.h>
#include "tests/support/check.h"

enum { THREADS = 4, ROUNDS = 40000, TOTAL = THREADS * ROUNDS };

/* What one section does: the shared state is a counter, a shadow that must stay twice it, and a
 * flag that catches two sections at once. The result goes back in the argument. */
static struct {
    unsigned long counter, shadow;
    int inside;
    unsigned long overlaps;
    unsigned char seen[TOTAL];
} shared;
struct section { unsigned long saw; };
static void section(void *arg)
{
    if (__atomic_exchange_n(&shared.inside, 1, __ATOMIC_RELAXED))
        __atomic_add_fetch(&shared.overlaps, 1, __ATOMIC_RELAXED);
    struct section *s = (struct section *)arg;
    s->saw = shared.counter;
    shared.counter = s->saw + 1;
    shared.shadow += 2;
    __atomic_store_n(&shared.inside, 0, __ATOMIC_RELAXED);
}
static void note(unsigned long saw)
{
    if (saw < TOTAL)
        __atomic_add_fetch(&shared.seen[saw], 1, __ATOMIC_RELAXED);
}
static void check_exact(const char *policy)
{
    unsigned long missing = 0, twice = 0;
    for (unsigned long i = 0; i < TOTAL; i++) {
        missing += shared.seen[i] == 0;
        twice += shared.seen[i] > 1;
    }
    CHECKF(shared.counter == TOTAL && shared.shadow == 2ul * TOTAL && shared.overlaps == 0 && !missing && !twice,
           "%s: counter %lu of %d, shadow %lu, %lu overlapping sections, %lu results missing, %lu twice", policy,
           shared.counter, TOTAL, shared.shadow, shared.overlaps, missing, twice);
}

#define POLICY_SUITE(P)                                                                                      \
    static sm_sync_##P##_t P##_lock = SM_SYNC_##P##_INIT;                                                    \
    static void *P##_worker(void *arg)                                                                       \
    {                                                                                                        \
        int me = (int)(intptr_t)arg;                                                                         \
        for (int i = 0; i < ROUNDS; i++) {                                                                   \
            struct section s = { ~0ul };                                                                     \
            if (me != 0) {                                                                                   \
                sm_sync_##P##_atomic_exec(&P##_lock, section, &s);                                           \
            } else if (i % 4 == 0) { /* trylock until it works, then as lock() */                            \
                unsigned spins = 1;                                                                          \
                while (!sm_sync_##P##_trylock(&P##_lock))                                                    \
                    sm_sync_backoff(&spins);                                                                 \
                section(&s);                                                                                 \
                sm_sync_##P##_unlock(&P##_lock);                                                             \
            } else {                                                                                         \
                sm_sync_##P##_lock(&P##_lock);                                                               \
                section(&s);                                                                                 \
                sm_sync_##P##_unlock(&P##_lock);                                                             \
            }                                                                                                \
            note(s.saw);                                                                                     \
        }                                                                                                    \
        return NULL;                                                                                         \
    }                                                                                                        \
    static void P##_exact_under_contention(void)                                                             \
    {                                                                                                        \
        memset(&shared, 0, sizeof shared);                                                                   \
        pthread_t t[THREADS];                                                                                \
        for (int i = 0; i < THREADS; i++)                                                                    \
            pthread_create(&t[i], NULL, P##_worker, (void *)(intptr_t)i);                                    \
        for (int i = 0; i < THREADS; i++)                                                                    \
            pthread_join(t[i], NULL);                                                                        \
        check_exact(#P);                                                                                     \
        CHECK(sm_sync_##P##_thread_safe == 1);                                                               \
    }                                                                                                        \
    static int P##_try_result;                                                                               \
    static void *P##_try_other(void *unused)                                                                 \
    {                                                                                                        \
        (void)unused;                                                                                        \
        P##_try_result = sm_sync_##P##_trylock(&P##_lock);                                                   \
        if (P##_try_result)                                                                                  \
            sm_sync_##P##_unlock(&P##_lock);                                                                 \
        return NULL;                                                                                         \
    }                                                                                                        \
    static void P##_trylock(void)                                                                            \
    {                                                                                                        \
        pthread_t t;                                                                                         \
        CHECK(sm_sync_##P##_trylock(&P##_lock));                                                             \
        pthread_create(&t, NULL, P##_try_other, NULL);                                                       \
        pthread_join(t, NULL);                                                                               \
        CHECKF(!P##_try_result, #P ": trylock took a held lock");                                            \
        sm_sync_##P##_unlock(&P##_lock);                                                                     \
        pthread_create(&t, NULL, P##_try_other, NULL);                                                       \
        pthread_join(t, NULL);                                                                               \
        CHECKF(P##_try_result, #P ": trylock failed on a free lock");                                        \
        struct section s = { ~0ul };                                                                         \
        shared.counter = 41;                                                                                 \
        sm_sync_##P##_atomic_exec(&P##_lock, section, &s);                                                   \
        CHECK(s.saw == 41 && shared.counter == 42);                                                          \
    }                                                                                                        \
    static int P##_stop;                                                                                     \
    static void *P##_hammer(void *unused)                                                                    \
    {                                                                                                        \
        (void)unused;                                                                                        \
        while (!__atomic_load_n(&P##_stop, __ATOMIC_RELAXED)) {                                              \
            struct section s;                                                                                \
            sm_sync_##P##_atomic_exec(&P##_lock, section, &s);                                               \
        }                                                                                                    \
        return NULL;                                                                                         \
    }                                                                                                        \
    static void P##_fork(void)                                                                               \
    {                                                                                                        \
        pthread_t t[2];                                                                                      \
        __atomic_store_n(&P##_stop, 0, __ATOMIC_RELAXED);                                                    \
        for (int i = 0; i < 2; i++)                                                                          \
            pthread_create(&t[i], NULL, P##_hammer, NULL);                                                   \
        int bad = 0;                                                                                         \
        for (int round = 0; round < 20; round++) {                                                           \
            sm_sync_##P##_lock(&P##_lock); /* what a layer's fork_prepare does */                            \
            pid_t pid = fork();                                                                              \
            if (pid == 0) {                                                                                  \
                sm_sync_##P##_reinit(&P##_lock); /* fork_child */                                            \
                struct section s = { ~0ul };                                                                 \
                unsigned long before = shared.counter;                                                       \
                sm_sync_##P##_atomic_exec(&P##_lock, section, &s);                                           \
                int ok = s.saw == before && sm_sync_##P##_trylock(&P##_lock);                                \
                sm_sync_##P##_unlock(&P##_lock);                                                             \
                _exit(ok ? 0 : 1);                                                                           \
            }                                                                                                \
            sm_sync_##P##_unlock(&P##_lock); /* fork_parent */                                               \
            int status = 0;                                                                                  \
            bad += pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status); \
        }                                                                                                    \
        __atomic_store_n(&P##_stop, 1, __ATOMIC_RELAXED);                                                    \
        for (int i = 0; i < 2; i++)                                                                          \
            pthread_join(t[i], NULL);                                                                        \
        CHECKF(bad == 0, #P ": %d of 20 children could not use the lock", bad);                              \
    }

POLICY_SUITE(spinlock)
POLICY_SUITE(mutex)
POLICY_SUITE(posix_spin)
POLICY_SUITE(ticket)
POLICY_SUITE(mcslock)
POLICY_SUITE(ccsynch)
POLICY_SUITE(flatcombine)

/* posix_spin's static initialiser is what pthread_spin_init stores (the platform layer assumes the
 * C library's representation: this is where a wrong assumption shows). */
static void posix_spin_static_init_matches(void)
{
    sm_sync_posix_spin_t fresh, initialised = SM_SYNC_posix_spin_INIT;
    memset((void *)&fresh, 0xa5, sizeof fresh); /* pthread_spinlock_t is volatile in glibc */
    sm_sync_posix_spin_reinit(&fresh);
    CHECK(memcmp((const void *)&fresh, (const void *)&initialised, sizeof fresh) == 0);
}

#define RUN_SUITE(P)                                                                                         \
    do {                                                                                                     \
        RUN_CASE(P##_exact_under_contention);                                                                \
        RUN_CASE(P##_trylock);                                                                               \
        RUN_CASE(P##_fork);                                                                                  \
    } while (0)

int main(void)
{
    check_begin("sync_policies");
    RUN_SUITE(spinlock);
    RUN_SUITE(mutex);
    RUN_SUITE(posix_spin);
    RUN_SUITE(ticket);
    RUN_SUITE(mcslock);
    RUN_SUITE(ccsynch);
    RUN_SUITE(flatcombine);
    RUN_CASE(posix_spin_static_init_matches);
    return check_end();
}
