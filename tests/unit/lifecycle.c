/* Unit test of the per-thread lifecycle service (platform/lifecycle.h): the composition's one
 * thread-exit hook. Two pretend layers attach threads; the exit that runs is the composition's top
 * (sm_thread_exit_top) when set, else every layer's that attached; once per exiting thread that
 * attached, never for one that did not, and again when an exit attaches the thread anew (bounded by
 * the platform's destructor rounds). */
#include <pthread.h>
#include <sunmao/platform/platform.h>
#include "tests/support/check.h"

static int first_exits, second_exits, top_exits, reattach_left;

static void first_layer_exit(void) { __atomic_add_fetch(&first_exits, 1, __ATOMIC_RELAXED); }
static void second_layer_exit(void) { __atomic_add_fetch(&second_exits, 1, __ATOMIC_RELAXED); }
static void top_exit(void)
{
    __atomic_add_fetch(&top_exits, 1, __ATOMIC_RELAXED);
    /* An exit that allocates through a layer that attaches again (a later destructor's free). */
    if (reattach_left > 0 && __atomic_sub_fetch(&reattach_left, 1, __ATOMIC_RELAXED) >= 0)
        sm_thread_attach(second_layer_exit);
}

static void *attach_both(void *unused)
{
    (void)unused;
    CHECK(sm_thread_attach(first_layer_exit));
    CHECK(sm_thread_attach(second_layer_exit)); /* twice for one thread: still one exit */
    return NULL;
}
static void *attach_none(void *unused) { return unused; }

static void run_thread(void *(*fn)(void *))
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, NULL) == 0);
    pthread_join(t, NULL);
}

static void *attach_second(void *unused)
{
    (void)unused;
    CHECK(sm_thread_attach(second_layer_exit));
    return NULL;
}

/* Without a top (no socket: a test file holding several stacks), every layer that attached a thread
 * has its exit run, once per exiting thread, whichever layers that thread used. */
static void without_top_every_attached_layer_exits(void)
{
    for (int i = 0; i < 5; i++)
        run_thread(attach_both);
    CHECKF(first_exits == 5 && second_exits == 5, "first %d, second %d", first_exits, second_exits);
    run_thread(attach_second);
    CHECKF(first_exits == 6 && second_exits == 6, "first %d, second %d", first_exits, second_exits);
}

static void a_thread_that_never_attached_runs_no_exit(void)
{
    int before = first_exits + second_exits + top_exits;
    for (int i = 0; i < 5; i++)
        run_thread(attach_none);
    CHECK(first_exits + second_exits + top_exits == before);
}

static void the_top_exit_runs_once_per_thread(void)
{
    __atomic_store_n(&sm_thread_exit_top, top_exit, __ATOMIC_RELEASE);
    int first = first_exits, second = second_exits;
    for (int i = 0; i < 7; i++)
        run_thread(attach_both);
    CHECKF(top_exits == 7 && first_exits == first && second_exits == second, "top %d, first %d, second %d",
           top_exits, first_exits - first, second_exits - second);
}

static void an_exit_that_attaches_again_runs_again(void)
{
    top_exits = 0;
    reattach_left = 1;
    run_thread(attach_both);
    CHECKF(top_exits == 2, "top exit ran %d times", top_exits);
    reattach_left = 1000; /* attaching in every round: the platform stops after its bounded rounds */
    top_exits = 0;
    run_thread(attach_both);
    CHECKF(top_exits >= 2 && top_exits <= 8, "top exit ran %d times", top_exits);
    reattach_left = 0;
}

int main(void)
{
    check_begin("lifecycle");
    RUN_CASE(without_top_every_attached_layer_exits);
    RUN_CASE(a_thread_that_never_attached_runs_no_exit);
    RUN_CASE(the_top_exit_runs_once_per_thread);
    RUN_CASE(an_exit_that_attaches_again_runs_again);
    return check_end();
}
