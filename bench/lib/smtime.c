/* smtime: run a command, measure it with wait4()'s rusage, enforce a time limit.
 * usage: smtime <timeout_s> <stats_file> cmd [args...]
 * The command runs in its own process group with LD_PRELOAD=$SM_PRELOAD (when set and
 * non-empty); smtime itself is never preloaded. When it has run for timeout_s seconds
 * the whole group gets SIGTERM, then SIGKILL 2 s later.
 * stats_file receives one line: "<elapsed_s> <maxrss_kib> <status> <timed_out>"
 * where status is the exit code, or 128+signal when killed by a signal.
 * smtime's own exit status mirrors that status (125 on its own errors).
 * Measuring through this wrapper matters: ru_maxrss survives execve(), so a child forked
 * straight from a big harness process would inherit the harness's resident size. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t fired;
static pid_t child;

static void on_alarm(int sig) {
    (void)sig;
    if (!fired) {
        fired = 1;
        kill(-child, SIGTERM);
        alarm(2);
    } else {
        kill(-child, SIGKILL);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: smtime <timeout_s> <stats_file> cmd [args...]\n");
        return 125;
    }
    unsigned limit = (unsigned)strtoul(argv[1], NULL, 10);
    const char *pre = getenv("SM_PRELOAD");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    child = fork();
    if (child < 0) { perror("smtime: fork"); return 125; }
    if (child == 0) {
        setpgid(0, 0);
        if (pre && *pre) setenv("LD_PRELOAD", pre, 1); else unsetenv("LD_PRELOAD");
        unsetenv("SM_PRELOAD");
        execvp(argv[3], argv + 3);
        fprintf(stderr, "smtime: cannot run %s: %s\n", argv[3], strerror(errno));
        _exit(127);
    }
    setpgid(child, child);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    if (limit) alarm(limit);
    int st = 0;
    struct rusage ru;
    while (wait4(child, &st, 0, &ru) < 0) {
        if (errno != EINTR) { perror("smtime: wait4"); return 125; }
    }
    alarm(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    kill(-child, SIGKILL);   /* leftovers of the group, if any */
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    FILE *f = fopen(argv[2], "w");
    if (!f) { perror("smtime: stats file"); return 125; }
    fprintf(f, "%.6f %ld %d %d\n", el, ru.ru_maxrss, status, fired ? 1 : 0);
    fclose(f);
    return status;
}
