/* Unit test of every sync policy (policies/sync/): spinlock, mutex, posix_spin, ticket, mcslock,
 * ccsynch, flatcombine, rcl. For each, four threads run a section that reads and bumps two counters
 * and detects another section running at once: three through atomic_exec, one through lock/unlock
 * and trylock. Each section's result (the counter it saw) travels back to its caller, so a
 * combining policy that ran a section for another thread must carry it back: every value must come
 * back exactly once. Then trylock on a held and a free lock, and fork: the lock taken in
 * fork_prepare's place, the child re-creates it and uses it while the parent's threads go on.
 * Every policy names its holder, and has three more cases: the owner word, a call from inside its
 * own section (a signal handler's malloc) aborting with one line, and the fork hooks keeping a lock
 * their thread holds.
 * rcl has cases of its own at the end: sections run on its server, the server parks and is woken,
 * the fallbacks (no slot free, server being created), a handler's call while its thread waits for
 * the server (served), rcl nested in rcl, and no server while the platform pauses spawning. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sunmao/policies/sync/ccsynch.h>
#include <sunmao/policies/sync/flatcombine.h>
#include <sunmao/policies/sync/mcslock.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/posix_spin.h>
#include <sunmao/policies/sync/rcl.h>
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
    unsigned long errno_changed; /* lock, trylock or unlock changed a waiter's errno (free must not) */
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
    CHECKF(shared.errno_changed == 0, "%s: errno changed across %lu lock/unlock pairs", policy, shared.errno_changed);
}

#define POLICY_SUITE(P)                                                                                      \
    static sm_sync_##P##_t P##_lock = SM_SYNC_##P##_INIT;                                                    \
    static void *P##_worker(void *arg)                                                                       \
    {                                                                                                        \
        int me = (int)(intptr_t)arg;                                                                         \
        errno = 1000 + me;                                                                                   \
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
            if (errno != 1000 + me) {                                                                        \
                __atomic_add_fetch(&shared.errno_changed, 1, __ATOMIC_RELAXED);                              \
                errno = 1000 + me;                                                                           \
            }                                                                                                \
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

/* The policies that name their holder (owner.h): the word names the calling thread exactly while
 * it holds (through lock() or inside atomic_exec's section), a call for the lock from inside its own
 * section (what a signal handler's malloc does) aborts with owner.h's line instead of waiting for
 * ever, and a fork hook keeps a lock its caller holds (fork_lock returns at once, fork_unlock leaves
 * it held). The last two run in a child with an alarm, so a hang fails the case instead of the suite. */
static const char reentry_line[] = "called from a signal handler that interrupted this thread's own malloc or free";
/* Runs fn in a child (10 s alarm); its status, and whether its stderr holds reentry_line. */
static int in_child(void (*fn)(void *), bool *said)
{
    char out[512];
    int status = check_in_child(fn, NULL, 10, out, sizeof out);
    *said = strstr(out, reentry_line) != NULL;
    return status;
}
static int owner_seen; /* 1: the section saw its own thread named; 2: another or none */
#define OWNER_SUITE(P)                                                                                      \
    static sm_sync_##P##_t P##_own = SM_SYNC_##P##_INIT;                                                     \
    static void P##_see_owner(void *arg)                                                                     \
    {                                                                                                        \
        (void)arg;                                                                                           \
        owner_seen = sm_sync_owner_is_self(&P##_own.owner) ? 1 : 2;                                          \
    }                                                                                                        \
    static void P##_owner_names_holder(void)                                                                 \
    {                                                                                                        \
        CHECKF(!sm_sync_owner_is_self(&P##_own.owner), #P ": named before it was taken");                    \
        owner_seen = 0;                                                                                      \
        sm_sync_##P##_atomic_exec(&P##_own, P##_see_owner, NULL);                                           \
        CHECKF(owner_seen == 1, #P ": its own section saw %s", owner_seen == 2 ? "another holder" : "nothing"); \
        CHECKF(!sm_sync_owner_is_self(&P##_own.owner) && P##_own.owner == 0, #P ": still named after the section"); \
        sm_sync_##P##_lock(&P##_own);                                                                        \
        CHECKF(sm_sync_owner_is_self(&P##_own.owner), #P ": lock() did not name its caller");                \
        sm_sync_##P##_unlock(&P##_own);                                                                      \
        CHECKF(P##_own.owner == 0, #P ": still named after unlock()");                                       \
        CHECK(sm_sync_##P##_trylock(&P##_own));                                                              \
        CHECKF(sm_sync_owner_is_self(&P##_own.owner), #P ": trylock() did not name its caller");             \
        sm_sync_##P##_unlock(&P##_own);                                                                      \
    }                                                                                                        \
    static void P##_again(void *arg)                                                                         \
    {                                                                                                        \
        (void)arg;                                                                                           \
        sm_sync_##P##_atomic_exec(&P##_own, P##_see_owner, NULL); /* as a handler's malloc would */          \
    }                                                                                                        \
    static void P##_reenter(void *unused) { sm_sync_##P##_atomic_exec(&P##_own, P##_again, unused); }        \
    static void P##_reentry_aborts(void)                                                                     \
    {                                                                                                        \
        bool said = false;                                                                                   \
        int status = in_child(P##_reenter, &said);                                                           \
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && said,                                   \
               #P ": a call from inside its own section ended with status %#x (%s the line), not an abort",  \
               (unsigned)status, said ? "with" : "without");                                                 \
    }                                                                                                        \
    static void P##_fork_hooks_keep(void *unused)                                                            \
    {                                                                                                        \
        (void)unused;                                                                                        \
        sm_sync_##P##_lock(&P##_own);                                                                        \
        sm_sync_fork_begin();                                                                                \
        sm_sync_##P##_fork_lock(&P##_own); /* held by this thread: kept, no wait */                         \
        sm_sync_##P##_fork_unlock(&P##_own);                                                                 \
        sm_sync_fork_end();                                                                                  \
        int kept = !sm_sync_##P##_trylock(&P##_own) && sm_sync_owner_is_self(&P##_own.owner);               \
        sm_sync_##P##_unlock(&P##_own);                                                                      \
        _exit(kept && sm_sync_##P##_trylock(&P##_own) ? 0 : 3);                                              \
    }                                                                                                        \
    static void P##_fork_keeps_own_lock(void)                                                                \
    {                                                                                                        \
        bool said = false;                                                                                   \
        int status = in_child(P##_fork_hooks_keep, &said);                                                   \
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,                                                \
               #P ": fork hooks on a lock their thread holds: status %#x (alarm: they waited)", (unsigned)status); \
    }

OWNER_SUITE(spinlock)
OWNER_SUITE(mutex)
OWNER_SUITE(posix_spin)
OWNER_SUITE(ticket)
OWNER_SUITE(mcslock)
OWNER_SUITE(ccsynch)
OWNER_SUITE(flatcombine)
OWNER_SUITE(rcl)
#define RUN_OWNER_SUITE(P)              \
    do {                                \
        RUN_CASE(P##_owner_names_holder); \
        RUN_CASE(P##_reentry_aborts);   \
        RUN_CASE(P##_fork_keeps_own_lock); \
    } while (0)

POLICY_SUITE(spinlock)
POLICY_SUITE(mutex)
POLICY_SUITE(posix_spin)
POLICY_SUITE(ticket)
POLICY_SUITE(mcslock)
POLICY_SUITE(ccsynch)
POLICY_SUITE(flatcombine)
POLICY_SUITE(rcl)

/* posix_spin's static initialiser is what pthread_spin_init stores (the platform layer assumes the
 * C library's representation: this is where a wrong assumption shows). */
static void posix_spin_static_init_matches(void)
{
    sm_sync_posix_spin_t fresh, initialised = SM_SYNC_posix_spin_INIT;
    memset((void *)&fresh, 0xa5, sizeof fresh); /* pthread_spinlock_t is volatile in glibc */
    sm_sync_posix_spin_reinit(&fresh);
    CHECK(memcmp((const void *)&fresh.s, (const void *)&initialised.s, sizeof fresh.s) == 0 && fresh.owner == 0 &&
          initialised.owner == 0);
}

/* ---- rcl ---- */
static int rcl_state(sm_sync_rcl_t *l) { return __atomic_load_n(&l->state, __ATOMIC_ACQUIRE); }

/* Sections through the lock given, until rcl_stop. */
static void *rcl_hammer_on(void *lock)
{
    while (!__atomic_load_n(&rcl_stop, __ATOMIC_RELAXED)) {
        struct section s;
        sm_sync_rcl_atomic_exec((sm_sync_rcl_t *)lock, section, &s);
    }
    return NULL;
}

/* `threads` threads hammer l while this one runs `rounds` sections through it; no section overlaps. */
static void rcl_contend(sm_sync_rcl_t *l, int threads, int rounds)
{
    memset(&shared, 0, sizeof shared);
    pthread_t t[THREADS];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, rcl_hammer_on, l);
    for (int i = 0; i < rounds; i++) {
        struct section s = { ~0ul };
        sm_sync_rcl_atomic_exec(l, section, &s);
    }
    __atomic_store_n(&rcl_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&rcl_stop, 0, __ATOMIC_RELAXED);
    CHECKF(shared.overlaps == 0 && shared.shadow == 2 * shared.counter && shared.counter >= (unsigned long)rounds,
           "%lu overlapping sections, shadow %lu, counter %lu", shared.overlaps, shared.shadow, shared.counter);
}

/* Which thread ran a section. */
struct whose { pthread_t ran_on; };
static void whose_section(void *arg) { ((struct whose *)arg)->ran_on = pthread_self(); }

/* True once one of this thread's sections ran on another thread (only a server runs another's
 * section) while `hammers` threads hammer l; tries for up to 30 s (a busy machine may keep the
 * server off the CPU, and its clients then withdraw their requests). */
static bool rcl_served(sm_sync_rcl_t *l, int hammers)
{
    pthread_t t[THREADS];
    for (int i = 0; i < hammers; i++)
        pthread_create(&t[i], NULL, rcl_hammer_on, l);
    bool served = false;
    struct whose w;
    for (time_t end = time(NULL) + 30; !served && time(NULL) < end;)
        for (int i = 0; i < 10000 && !served; i++) {
            sm_sync_rcl_atomic_exec(l, whose_section, &w);
            served = !pthread_equal(w.ran_on, pthread_self());
        }
    __atomic_store_n(&rcl_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < hammers; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&rcl_stop, 0, __ATOMIC_RELAXED);
    return served;
}

/* After contention the lock has a server, and posted sections run on it. Contention needs two
 * threads in the lock at once, which a busy machine may not give for a while (CI once saw 20,000
 * rounds against 2 hammers without one): rounds go on until the server exists, for up to 30 s. */
static void rcl_sections_run_on_the_server(void)
{
    int state = SM_SYNC_RCL_NOSERVER;
    for (time_t end = time(NULL) + 30; time(NULL) < end;) {
        rcl_contend(&rcl_lock, 2, 20000);
        state = rcl_state(&rcl_lock);
        if (state == SM_SYNC_RCL_RUNNING || state == SM_SYNC_RCL_PARKED)
            break;
    }
    CHECKF(state == SM_SYNC_RCL_RUNNING || state == SM_SYNC_RCL_PARKED,
           "state %d: no server after 30 s of contention (%u contended calls wanted one)", state,
           __atomic_load_n(&rcl_lock.tries, __ATOMIC_RELAXED));
    CHECKF(rcl_served(&rcl_lock, 1), "no section ran on the server (state %d)", rcl_state(&rcl_lock));
}

/* Idle, the server parks (it burns no core); an uncontended call then runs on its caller and
 * leaves it parked; contended calls wake it. */
static void rcl_parks_and_wakes(void)
{
    for (int i = 0; i < 3000 && rcl_state(&rcl_lock) != SM_SYNC_RCL_PARKED; i++) /* 10 ms, unless the machine is busy */
        usleep(10000);
    CHECKF(rcl_state(&rcl_lock) == SM_SYNC_RCL_PARKED, "state %d after 30 s idle", rcl_state(&rcl_lock));
    struct whose w;
    sm_sync_rcl_atomic_exec(&rcl_lock, whose_section, &w);
    CHECK(pthread_equal(w.ran_on, pthread_self()) && rcl_state(&rcl_lock) == SM_SYNC_RCL_PARKED);
    CHECKF(rcl_served(&rcl_lock, 2), "the parked server was never woken (state %d)", rcl_state(&rcl_lock));
}

/* A caller that finds no free slot, or a server being created, runs its section itself. */
static void rcl_fallbacks(void)
{
    rcl_contend(&rcl_lock, 1, 1000); /* the server runs */
    for (unsigned i = 0; i < SM_SYNC_RCL_SLOTS; i++) /* as if clients held every slot */
        __atomic_store_n(&rcl_lock.slot[i].state, SM_SYNC_RCL_CLAIMED, __ATOMIC_RELEASE);
    struct whose w;
    sm_sync_rcl_atomic_exec(&rcl_lock, whose_section, &w);
    CHECK(pthread_equal(w.ran_on, pthread_self()));
    rcl_contend(&rcl_lock, 2, 20000);
    for (unsigned i = 0; i < SM_SYNC_RCL_SLOTS; i++)
        __atomic_store_n(&rcl_lock.slot[i].state, SM_SYNC_RCL_FREE, __ATOMIC_RELEASE);

    static sm_sync_rcl_t starting = SM_SYNC_rcl_INIT; /* as if its creator were in pthread_create */
    sm_sync_rcl_lock(&starting);
    __atomic_store_n(&starting.state, SM_SYNC_RCL_STARTING, __ATOMIC_RELEASE);
    sm_sync_rcl_unlock(&starting);
    rcl_contend(&starting, 2, 20000);
    CHECKF(rcl_state(&starting) == SM_SYNC_RCL_STARTING, "state %d", rcl_state(&starting));
}

/* The server names itself while it runs a section, and a signal handler's call made while its
 * thread waits for a posted request is served like any request, not refused as a re-entry: the
 * thread holds nothing then. The section, once it runs on the server, signals its client. In a
 * child (45 s alarm: a hang fails the case). */
static struct { pthread_t client; int on_server, named, signalled, handler_ran; } served_case;
static void handler_section(void *arg)
{
    (void)arg;
    __atomic_store_n(&served_case.handler_ran, 1, __ATOMIC_RELEASE);
}
static void on_usr1(int sig)
{
    (void)sig;
    sm_sync_rcl_atomic_exec(&rcl_lock, handler_section, NULL);
}
static void signalling_section(void *arg)
{
    (void)arg;
    if (pthread_equal(pthread_self(), served_case.client) || served_case.signalled)
        return; /* ran on its caller (the fallback), or already done */
    served_case.on_server = 1;
    served_case.named = sm_sync_owner_is_self(&rcl_lock.owner);
    served_case.signalled = 1;
    pthread_kill(served_case.client, SIGUSR1);
}
/* 0, or what went wrong (4: no section ran on the server; 5: the server did not name itself; 6: the
 * handler's call did not run). */
static int handler_while_waiting(void)
{
    served_case.client = pthread_self();
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < 5 && rcl_state(&rcl_lock) != SM_SYNC_RCL_RUNNING && rcl_state(&rcl_lock) != SM_SYNC_RCL_PARKED; i++)
        rcl_contend(&rcl_lock, 2, 20000); /* a child has no server until a contended call */
    pthread_t t;
    pthread_create(&t, NULL, rcl_hammer_on, &rcl_lock); /* keeps the server awake */
    /* a busy machine may keep the server off the CPU a while (rcl_served): up to 30 s */
    for (time_t end = time(NULL) + 30; !__atomic_load_n(&served_case.signalled, __ATOMIC_ACQUIRE) && time(NULL) < end;)
        sm_sync_rcl_atomic_exec(&rcl_lock, signalling_section, NULL);
    for (int i = 0; i < 1000 && !__atomic_load_n(&served_case.handler_ran, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    __atomic_store_n(&rcl_stop, 1, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    __atomic_store_n(&rcl_stop, 0, __ATOMIC_RELAXED);
    signal(SIGUSR1, SIG_DFL);
    return !served_case.on_server ? 4 : !served_case.named ? 5 : !served_case.handler_ran ? 6 : 0;
}
SM_UNUSED static void handler_while_waiting_in_child(void *unused)
{
    (void)unused;
    sm_sync_rcl_reinit(&rcl_lock); /* forked without the hooks: the parent's server is not here */
    _exit(handler_while_waiting());
}
static void rcl_handler_call_while_waiting_is_served(void)
{
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer makes no thread in a child of a threaded process: here, in the process */
    int status = handler_while_waiting() << 8;
    bool said = false;
#else
    char out[512];
    int status = check_in_child(handler_while_waiting_in_child, NULL, 45, out, sizeof out);
    bool said = strstr(out, reentry_line) != NULL;
#endif
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "status %#x (exit 4: no section ran on the server; 5: the server did not name itself; 6: the "
           "handler's call did not run; a signal: it hung or aborted%s)",
           (unsigned)status, said ? ", with the re-entry line" : "");
}

/* rcl in rcl, as when a layer's section calls its next layer: outer's sections call inner's. A
 * contended call inside outer's section must not create inner's server (thread creation may
 * allocate and need outer); the same call outside any section does. Then both hammered at once. */
static sm_sync_rcl_t rcl_outer = SM_SYNC_rcl_INIT, rcl_inner = SM_SYNC_rcl_INIT;
static struct { unsigned long n, m; int inside; unsigned long overlaps; } inner_data;
static void inner_section(void *arg)
{
    (void)arg;
    if (__atomic_exchange_n(&inner_data.inside, 1, __ATOMIC_RELAXED))
        __atomic_add_fetch(&inner_data.overlaps, 1, __ATOMIC_RELAXED);
    inner_data.n++;
    inner_data.m += 3;
    __atomic_store_n(&inner_data.inside, 0, __ATOMIC_RELAXED);
}
static void outer_section(void *arg)
{
    section(arg);
    sm_sync_rcl_atomic_exec(&rcl_inner, inner_section, NULL);
}
static void *holder(void *lock) /* holds a lock's word a while: the next call is contended */
{
    sm_sync_rcl_lock((sm_sync_rcl_t *)lock);
    usleep(50000);
    sm_sync_rcl_unlock((sm_sync_rcl_t *)lock);
    return NULL;
}
static void hold_meanwhile(pthread_t *t, sm_sync_rcl_t *l)
{
    pthread_create(t, NULL, holder, l);
    while (!__atomic_load_n(&l->word, __ATOMIC_ACQUIRE))
        usleep(100);
}
static pthread_barrier_t nested_start; /* the hammers start together, or they may run one by one */
static void *outer_hammer(void *unused)
{
    (void)unused;
    pthread_barrier_wait(&nested_start);
    for (int i = 0; i < ROUNDS; i++) {
        struct section s;
        sm_sync_rcl_atomic_exec(&rcl_outer, outer_section, &s);
    }
    return NULL;
}
static void *inner_hammer(void *unused)
{
    (void)unused;
    pthread_barrier_wait(&nested_start);
    for (int i = 0; i < ROUNDS; i++)
        sm_sync_rcl_atomic_exec(&rcl_inner, inner_section, NULL);
    return NULL;
}
static void rcl_nested_in_rcl(void)
{
    memset(&shared, 0, sizeof shared);
    memset(&inner_data, 0, sizeof inner_data);
    pthread_t t[THREADS];
    struct section s;
    sm_sync_rcl_atomic_exec(&rcl_inner, inner_section, NULL);
    hold_meanwhile(&t[0], &rcl_inner);
    sm_sync_rcl_atomic_exec(&rcl_outer, outer_section, &s); /* a contended inner call inside outer's section */
    pthread_join(t[0], NULL);
    CHECKF(rcl_state(&rcl_inner) == SM_SYNC_RCL_NOSERVER, "inner's server was created inside outer's section (state %d)",
           rcl_state(&rcl_inner));
    hold_meanwhile(&t[0], &rcl_inner);
    sm_sync_rcl_atomic_exec(&rcl_inner, inner_section, NULL); /* contended, outside any section */
    pthread_join(t[0], NULL);
    hold_meanwhile(&t[0], &rcl_outer); /* and outer's, so that its server calls inner's */
    sm_sync_rcl_atomic_exec(&rcl_outer, outer_section, &s);
    pthread_join(t[0], NULL);
    int state = rcl_state(&rcl_inner), outer_state = rcl_state(&rcl_outer);
    CHECKF(state >= SM_SYNC_RCL_STARTING && state <= SM_SYNC_RCL_PARKED && outer_state >= SM_SYNC_RCL_STARTING &&
               outer_state <= SM_SYNC_RCL_PARKED,
           "a server was not created (inner's state %d, outer's %d)", state, outer_state);

    pthread_barrier_init(&nested_start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, i < 3 ? outer_hammer : inner_hammer, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&nested_start);
    unsigned long outer_n = 2ul + 3ul * ROUNDS, inner_n = 4ul + 4ul * ROUNDS;
    CHECKF(shared.counter == outer_n && shared.overlaps == 0 && inner_data.n == inner_n && inner_data.m == 3 * inner_n &&
               inner_data.overlaps == 0,
           "outer %lu of %lu (%lu overlaps), inner %lu of %lu (%lu overlaps)", shared.counter, outer_n, shared.overlaps,
           inner_data.n, inner_n, inner_data.overlaps);
}

/* While the platform pauses spawning (a socket does, around a free the dynamic loader made, which
 * may hold a lock pthread_create takes), a contended call runs its section on its caller and creates
 * no server; once resumed, the next contended call that may try does. */
static sm_sync_rcl_t rcl_paused = SM_SYNC_rcl_INIT;
static void rcl_no_server_while_spawn_paused(void)
{
    pthread_t t;
    struct whose w;
    sm_sync_rcl_atomic_exec(&rcl_paused, whose_section, &w);
    sm_plat_pause_spawn();
    sm_plat_pause_spawn(); /* nested: one resume does not end the pause */
    hold_meanwhile(&t, &rcl_paused);
    sm_sync_rcl_atomic_exec(&rcl_paused, whose_section, &w); /* contended: try 1 */
    pthread_join(t, NULL);
    sm_plat_resume_spawn();
    CHECK(sm_plat_spawn_paused());
    hold_meanwhile(&t, &rcl_paused);
    sm_sync_rcl_atomic_exec(&rcl_paused, whose_section, &w); /* contended: try 2 */
    pthread_join(t, NULL);
    CHECKF(rcl_state(&rcl_paused) == SM_SYNC_RCL_NOSERVER && pthread_equal(w.ran_on, pthread_self()),
           "a server was created while spawning was paused (state %d)", rcl_state(&rcl_paused));
    sm_plat_resume_spawn();
    CHECK(!sm_plat_spawn_paused());
    for (int i = 0; i < 2; i++) { /* try 3 backs off (not a power of two), try 4 creates it */
        hold_meanwhile(&t, &rcl_paused);
        sm_sync_rcl_atomic_exec(&rcl_paused, whose_section, &w);
        pthread_join(t, NULL);
    }
    for (int i = 0; i < 3000 && rcl_state(&rcl_paused) == SM_SYNC_RCL_STARTING; i++)
        usleep(10000);
    int state = rcl_state(&rcl_paused);
    CHECKF(state == SM_SYNC_RCL_RUNNING || state == SM_SYNC_RCL_PARKED, "no server once resumed (state %d, %u tries)",
           state, rcl_paused.tries);
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
    RUN_SUITE(rcl);
    RUN_OWNER_SUITE(spinlock);
    RUN_OWNER_SUITE(mutex);
    RUN_OWNER_SUITE(posix_spin);
    RUN_OWNER_SUITE(ticket);
    RUN_OWNER_SUITE(mcslock);
    RUN_OWNER_SUITE(ccsynch);
    RUN_OWNER_SUITE(flatcombine);
    RUN_OWNER_SUITE(rcl);
    RUN_CASE(posix_spin_static_init_matches);
    RUN_CASE(rcl_sections_run_on_the_server);
    RUN_CASE(rcl_parks_and_wakes);
    RUN_CASE(rcl_fallbacks);
    RUN_CASE(rcl_handler_call_while_waiting_is_served);
    RUN_CASE(rcl_nested_in_rcl);
    RUN_CASE(rcl_no_server_while_spawn_paused);
    return check_end();
}
