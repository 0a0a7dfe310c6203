/* Unit test of sm_plat_cpu (platform/linux.h): the CPU a refill's shard and a per-CPU cache are
 * picked by. It reads glibc's rseq area itself where glibc registered one, else asks sched_getcpu;
 * both answers must be the CPU the thread is pinned to, on every CPU it may run on, in a process
 * where glibc registered rseq and in one where GLIBC_TUNABLES turned that off (a re-exec of this
 * program; the case says which of the two it saw). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/platform/platform.h>
#include "tests/support/check.h"

extern const unsigned int __rseq_size __attribute__((weak));

/* Pins the thread to each allowed CPU in turn, 2000 rounds, and counts wrong answers. */
static void answers_the_pinned_cpu(void)
{
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    CHECK(n >= 1);
    long wrong = 0, moves = 0;
    for (int round = 0; round < 2000 && n; round++) {
        int want = cpus[round % n];
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(want, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            continue;
        moves++;
        if (sm_plat_cpu() != want)
            wrong++;
    }
    sched_setaffinity(0, sizeof allowed, &allowed);
    CHECKF(moves > 0, "no pinning was allowed");
    CHECKF(wrong == 0, "%ld of %ld answers named another CPU than the pinned one (glibc rseq: %s)", wrong, moves,
           &__rseq_size && __rseq_size ? "registered" : "not registered");
}

/* The same in a copy of this program that glibc gives no rseq registration. */
static void answers_without_glibc_rseq(void)
{
    if (getenv("PLATFORM_CPU_CHILD")) {
        CHECKF(!(&__rseq_size && __rseq_size), "GLIBC_TUNABLES did not turn glibc's rseq off");
        return;
    }
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("PLATFORM_CPU_CHILD", "1", 1);
        setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);
        execl("/proc/self/exe", "platform_cpu", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the run without glibc's rseq failed (status %d)",
           status);
}

int main(void)
{
    check_begin(getenv("PLATFORM_CPU_CHILD") ? "platform_cpu (no glibc rseq)" : "platform_cpu");
    RUN_CASE(answers_the_pinned_cpu);
    RUN_CASE(answers_without_glibc_rseq);
    return check_end();
}
