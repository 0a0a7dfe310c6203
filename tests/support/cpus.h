/* CPU helpers for tests of per-CPU behaviour (slab_lk's shards): find two CPUs of different parity
 * this process may run on, and run a function on a thread pinned to one of them. */
#ifndef SUNMAO_TEST_CPUS_H
#define SUNMAO_TEST_CPUS_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

/* Two CPUs of different parity (cpu[0] even, cpu[1] odd) in this process's affinity, or false. */
static inline bool cpus_of_both_parities(int cpu[2])
{
    cpu_set_t set;
    cpu[0] = cpu[1] = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return false;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && cpu[c & 1] < 0)
            cpu[c & 1] = c;
    return cpu[0] >= 0 && cpu[1] >= 0;
}

/* Moves the calling thread to cpu; false if it could not, or is not running there. */
static inline bool cpus_move_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 && sched_getcpu() == cpu;
}

typedef struct {
    int cpu;
    void (*body)(void *);
    void *arg;
} cpus_pinned_t;
static inline void *cpus_pinned_start(void *arg)
{
    cpus_pinned_t *p = arg;
    if (!cpus_move_to(p->cpu))
        return (void *)1;
    p->body(p->arg);
    return NULL;
}
/* Runs body(arg) on a new thread pinned to cpu and waits for it; false if it could not run there. */
static inline bool run_on_cpu(int cpu, void (*body)(void *), void *arg)
{
    cpus_pinned_t p = { cpu, body, arg };
    pthread_t t;
    void *r = (void *)1;
    if (pthread_create(&t, NULL, cpus_pinned_start, &p) != 0)
        return false;
    pthread_join(t, &r);
    return r == NULL;
}

#endif
