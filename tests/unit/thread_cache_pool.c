/* Unit test of the thread cache's shared budget (its sync slot, thread_cache/pool.h):
 *     tpool(sync=spinlock, 256 KiB per thread, 512 KiB in all) :: slab_lk :: fake
 * The pool's books always balance (unclaimed + the registered budgets == the total); a thread that
 * wants more than is unclaimed steals it from the others, who give the excess back on their next
 * slow path; an exiting thread returns its budget; a fork child keeps its own cache's only.
 * Objects held throughout keep their contents. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/layer_calls.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tpool
#define SM_NEXT sl
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#define SM_OPT_CACHE_BYTES (256u << 10)
#define SM_OPT_TOTAL_BYTES (512u << 10)
#include <sunmao/layers/addon/thread_cache.h>

enum { PER_THREAD = 256 << 10, TOTAL = 512 << 10, STEP = PER_THREAD / 16, HELD = 32 };

LAYER_CALLS(t, tpool)
CACHE_BYTES(t, tpool)

/* The pool's books, read under its lock: false if they do not balance. */
static bool books_balance(size_t *budgets, unsigned *members)
{
    sm_sync_spinlock_lock(&tpool_pool.lock);
    size_t sum = 0;
    unsigned n = 0;
    for (struct tpool_cache *c = tpool_pool.head; c; c = c->pool_next, n++)
        sum += c->budget;
    bool ok = !tpool_pool.started || sum + tpool_pool.unclaimed == TOTAL;
    sm_sync_spinlock_unlock(&tpool_pool.lock);
    if (budgets)
        *budgets = sum;
    if (members)
        *members = n;
    return ok;
}

/* Slow-path events and a cache that wants its whole budget: many objects of three classes taken,
 * then given back. */
static void churn(void)
{
    enum { N = 1200 };
    void **p = malloc(N * sizeof *p);
    static const size_t sizes[] = { 64, 512, 2048 };
    for (unsigned round = 0; round < 3; round++)
        for (unsigned k = 0; k < 3; k++) {
            for (unsigned i = 0; i < N; i++)
                p[i] = t_malloc(sizes[k]);
            for (unsigned i = 0; i < N; i++)
                t_free(p[i]);
        }
    free(p);
}

/* After its own slow-path event a cache fits its budget, and its lists fit its capacity. Another
 * thread may steal from the budget between the event and these reads (a theft only lowers it, and
 * the victim trims on its next event), so a cache passes if it fits after any of a few events in a
 * row; one whose events do not trim fails them all. */
static bool cache_fits(void)
{
    struct tpool_cache *c = tpool_tls;
    for (unsigned tries = 0; tries < 64; tries++) {
        tpool_event(c);
        size_t budget = tpool_budget_now(c);
        if (c->capacity <= budget && t_cached_bytes() <= c->capacity && budget <= PER_THREAD)
            return true;
    }
    return false;
}

static atomic_int monitor_stop, books_bad;
static void *monitor(void *unused)
{
    (void)unused;
    while (!atomic_load(&monitor_stop))
        if (!books_balance(NULL, NULL))
            atomic_fetch_add(&books_bad, 1);
    return NULL;
}

static void *churner(void *arg)
{
    unsigned seed = (unsigned)(intptr_t)arg;
    void *held[HELD];
    for (unsigned i = 0; i < HELD; i++) {
        held[i] = t_malloc(100 + i);
        check_fill(held[i], 100 + i, seed * 100 + i);
    }
    long bad = 0;
    for (unsigned r = 0; r < 4; r++) {
        churn();
        if (!cache_fits())
            bad++;
    }
    for (unsigned i = 0; i < HELD; i++) {
        bad += !check_verify(held[i], 100 + i, seed * 100 + i);
        t_free(held[i]);
    }
    return (void *)(intptr_t)bad;
}

/* Six threads want 256 KiB each of a 512 KiB total, while a monitor checks the books. */
static void books_balance_under_contention(void)
{
    pthread_t m;
    atomic_store(&monitor_stop, 0);
    atomic_store(&books_bad, 0);
    pthread_create(&m, NULL, monitor, NULL);
    check_threads(6, churner);
    atomic_store(&monitor_stop, 1);
    pthread_join(m, NULL);
    size_t budgets;
    unsigned members;
    CHECKF(atomic_load(&books_bad) == 0, "the books did not balance %d times", atomic_load(&books_bad));
    CHECKF(books_balance(&budgets, &members), "books after the threads exited");
    /* Only the main thread's cache (if it has one) is still registered. */
    CHECKF(members <= 1 && budgets <= PER_THREAD, "after exit: %u caches registered holding %zu bytes", members, budgets);
    CHECK(fk_obj.bad_frees == 0);
}

/* A thread that filled its cache, then waits while two others want theirs, has its budget stolen;
 * its next slow path gives the excess back. */
static pthread_barrier_t steps;
static void *victim(void *unused)
{
    (void)unused;
    churn();
    struct tpool_cache *c = tpool_tls;
    size_t full = tpool_budget_now(c), cap = c->capacity;
    pthread_barrier_wait(&steps); /* 1: full */
    pthread_barrier_wait(&steps); /* 2: the others took their budgets */
    size_t robbed = tpool_budget_now(c);
    bool fits = cache_fits();
    long bad = !(full == PER_THREAD && cap > PER_THREAD / 2 && robbed < full && fits && c->capacity <= robbed);
    if (bad)
        printf("# victim: budget %zu -> %zu, capacity %zu -> %zu\n", full, robbed, cap, c->capacity);
    return (void *)bad;
}

static void *thief(void *unused)
{
    (void)unused;
    pthread_barrier_wait(&steps); /* 1 */
    churn();
    long bad = !cache_fits() || tpool_budget_now(tpool_tls) < STEP;
    pthread_barrier_wait(&steps); /* 2 */
    return (void *)bad;
}

static void *victim_or_thief(void *arg) { return (intptr_t)arg == 0 ? victim(NULL) : thief(NULL); }

static void thieves_take_from_a_full_cache(void)
{
    pthread_barrier_init(&steps, NULL, 3);
    check_threads(3, victim_or_thief);
    pthread_barrier_destroy(&steps);
    CHECK(books_balance(NULL, NULL));
}

/* fork while other threads hold budgets: the child's pool has only its own cache, and the rest of
 * the total is unclaimed again. */
static pthread_barrier_t forked;
static void *holder(void *unused)
{
    (void)unused;
    churn();
    pthread_barrier_wait(&forked); /* holds its budget until the fork is done */
    pthread_barrier_wait(&forked);
    return NULL;
}

static void fork_child_keeps_its_own(void)
{
    pthread_t h[2];
    pthread_barrier_init(&forked, NULL, 3);
    for (int i = 0; i < 2; i++)
        pthread_create(&h[i], NULL, holder, NULL);
    pthread_barrier_wait(&forked);
    churn(); /* the forking thread has a cache too (the others hold most of the total) */
    size_t mine = tpool_budget_now(tpool_tls);
    tpool_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        tpool_fork_child();
        size_t budgets;
        unsigned members;
        int code = 0;
        if (!books_balance(&budgets, &members) || members != 1 || budgets != mine)
            code = 1;
        churn(); /* the whole per-thread budget is unclaimed now */
        if (!cache_fits() || tpool_tls->budget != PER_THREAD)
            code |= 2;
        _exit(code);
    }
    tpool_fork_parent();
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x (1: books, 2: could not grow)", status);
    CHECK(books_balance(NULL, NULL));
    pthread_barrier_wait(&forked);
    for (int i = 0; i < 2; i++)
        pthread_join(h[i], NULL);
    pthread_barrier_destroy(&forked);
}

int main(void)
{
    check_begin("thread_cache_pool");
    RUN_CASE(books_balance_under_contention);
    RUN_CASE(thieves_take_from_a_full_cache);
    RUN_CASE(fork_child_keeps_its_own);
    return check_end();
}
