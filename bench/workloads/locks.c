/* Sync policies under contention: T threads each run N critical sections through one policy's
 * atomic_exec; a section reads and writes `lines` cache lines of shared data (a stand-in for an
 * allocator's free lists), then the thread does `gap` ns-scale iterations of private work. Prints
 * ns per section (wall time / all sections) for each policy, so combining (ccsynch, flatcombine)
 * and delegation to a server thread (rcl) can be set against the locks on the same machine and
 * thread count.
 * usage: locks [threads=2] [sections_per_thread=1000000] [lines=4] [gap=50] [policy=all] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sunmao/policies/sync/ccsynch.h>
#include <sunmao/policies/sync/flatcombine.h>
#include <sunmao/policies/sync/mcslock.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/posix_spin.h>
#include <sunmao/policies/sync/rcl.h>
#include <sunmao/policies/sync/spinlock.h>
#include <sunmao/policies/sync/ticket.h>

static long T = 2, N = 1000000, LINES = 4, GAP = 50;
static struct { uint64_t v[8]; } data[64] __attribute__((aligned(64)));
static void section(void *arg)
{
    (void)arg;
    for (long i = 0; i < LINES; i++)
        data[i].v[0] += data[(i + 1) % LINES].v[1] + 1;
}
static void gap(void)
{
    volatile unsigned x = 0;
    for (long i = 0; i < GAP; i++)
        x += (unsigned)i;
    (void)x;
}
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define POLICY(P)                                                                                      \
    static sm_sync_##P##_t P##_lock = SM_SYNC_##P##_INIT;                                              \
    static void *P##_worker(void *unused)                                                              \
    {                                                                                                  \
        (void)unused;                                                                                  \
        for (long i = 0; i < N; i++) {                                                                 \
            sm_sync_##P##_atomic_exec(&P##_lock, section, NULL);                                       \
            gap();                                                                                     \
        }                                                                                              \
        return NULL;                                                                                   \
    }
POLICY(spinlock) POLICY(mutex) POLICY(posix_spin) POLICY(ticket) POLICY(mcslock) POLICY(ccsynch) POLICY(flatcombine) POLICY(rcl)

static void run(const char *name, void *(*worker)(void *), const char *only)
{
    if (strcmp(only, "all") && strcmp(only, name))
        return;
    pthread_t *t = calloc((size_t)T, sizeof *t);
    double start = now();
    for (long i = 0; i < T; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (long i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    double s = now() - start;
    printf("%-12s threads %ld  ns_per_section %.1f\n", name, T, s * 1e9 / (double)(T * N));
    free(t);
}

int main(int argc, char **argv)
{
    if (argc > 1) T = atol(argv[1]);
    if (argc > 2) N = atol(argv[2]);
    if (argc > 3) LINES = atol(argv[3]);
    if (argc > 4) GAP = atol(argv[4]);
    const char *only = argc > 5 ? argv[5] : "all";
    if (T < 1 || N < 1 || LINES < 1 || LINES > 64 || GAP < 0) {
        fprintf(stderr, "locks: bad arguments (usage: locks [threads] [sections] [lines 1..64] [gap] [policy])\n");
        return 2;
    }
    run("spinlock", spinlock_worker, only);
    run("mutex", mutex_worker, only);
    run("posix_spin", posix_spin_worker, only);
    run("ticket", ticket_worker, only);
    run("mcslock", mcslock_worker, only);
    run("ccsynch", ccsynch_worker, only);
    run("flatcombine", flatcombine_worker, only);
    run("rcl", rcl_worker, only);
    return 0;
}
