/* fork() from a signal handler that interrupted the allocator (glibc's tst-mallocfork2 pattern).
 * Usage: fork_signal [forks=300] [seconds=20]
 *
 * A sender process signals this one as fast as it can; the handler forks, the child _exits at once
 * and the parent waits for it. Meanwhile the program replaces random blocks of 0-70,000 bytes (every
 * layer of the small and medium ranges, and their locks), so signals land inside malloc and free,
 * lock held or not. POSIX does not list malloc's fork as async-signal-safe, but glibc's is in a
 * single-threaded process and programs rely on it (a fork-and-exec from a SIGCHLD or crash handler).
 *
 * single_threaded     the program alone: `forks` forks from the handler, none hangs (a fork that
 *                     takes more than `seconds` in all fails the case: the allocator's fork hook
 *                     waited for a lock the interrupted call holds)
 * with_threads        the same while two more threads allocate and free (beyond glibc, which
 *                     takes its locks then and hangs on one its interrupted call holds)
 * heap_intact         every block the loop checked kept its pattern, and the heap works after */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/check.h"

enum { OBJECTS = 509, MAX_SIZE = 70000 };

static void *(*volatile f_malloc)(size_t) = malloc;
static void (*volatile f_free)(void *) = free;

static volatile sig_atomic_t forks_done, fork_failed, forks_wanted;
static volatile pid_t sender_pid; /* 0: no sender running */
static atomic_int stop_threads;
static atomic_ulong bad_blocks;

static void on_signal(int signo)
{
    (void)signo;
    int saved = errno;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid < 0) {
        fork_failed = 1;
    } else {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fork_failed = 1;
    }
    forks_done++;
    /* Enough forks: stop the storm here. A sender faster than the handler keeps a signal pending
     * whenever the handler returns, so the interrupted thread may never run its loop again to stop
     * it (745 forks in 0.34 s where 200 were asked): a hang of the test, whatever the allocator. */
    if (forks_done >= forks_wanted && sender_pid > 0)
        kill(sender_pid, SIGKILL);
    errno = saved;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Replaces random blocks, each holding a byte pattern of its slot and size, checked before free. */
static void churn_once(void **objs, size_t *sizes, unsigned *seed)
{
    unsigned slot = next_rand(seed) % OBJECTS;
    unsigned char *p = objs[slot];
    if (p && sizes[slot]) {
        unsigned char want = (unsigned char)(slot ^ sizes[slot]);
        if (p[0] != want || p[sizes[slot] - 1] != want || p[sizes[slot] / 2] != want)
            atomic_fetch_add(&bad_blocks, 1);
    }
    f_free(p);
    size_t n = next_rand(seed) % MAX_SIZE;
    p = f_malloc(n);
    objs[slot] = p;
    sizes[slot] = p ? n : 0;
    if (p && n) {
        unsigned char want = (unsigned char)(slot ^ n);
        p[0] = p[n - 1] = p[n / 2] = want;
    }
}

static void *churner(void *arg)
{
    void **objs = calloc(OBJECTS, sizeof *objs);
    size_t *sizes = calloc(OBJECTS, sizeof *sizes);
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop_threads))
        churn_once(objs, sizes, &seed);
    for (int i = 0; i < OBJECTS; i++)
        f_free(objs[i]);
    free(objs);
    free(sizes);
    return NULL;
}

/* Forks `want` times from the handler while churning; false if that took longer than `limit` s. */
static bool run(int want, double limit, int threads, const char *name)
{
    static void *objs[OBJECTS];
    static size_t sizes[OBJECTS];
    pthread_t tid[2];
    atomic_store(&stop_threads, 0);
    /* The churners start with every signal blocked (a new thread inherits the mask), so the
     * handler runs on this thread only: each fork interrupts this thread's own calls. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, churner, (void *)(uintptr_t)(i + 7));
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    forks_done = 0;
    fork_failed = 0;
    forks_wanted = want;
    pid_t parent = getpid();
    /* No handler while this thread forks the sender: a fork inside fork waits on the C library's
     * own atfork lock (a signal the last case's sender left pending would land there). */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    pid_t sender = fork();
    sender_pid = sender;
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    if (sender == 0) {
        for (;;) {
            if (kill(parent, SIGUSR1) != 0)
                _exit(0);
            sched_yield();
        }
    }
    unsigned seed = 1;
    double start = now_s();
    /* A hang is a handler stuck in fork: the loop below stops advancing, so a watchdog alarm ends
     * the process with a message instead (SIGALRM's default action, after the line is out). */
    while (forks_done < want && now_s() - start < limit)
        churn_once(objs, sizes, &seed);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    sender_pid = 0;
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    kill(sender, SIGKILL);
    waitpid(sender, NULL, 0);
    atomic_store(&stop_threads, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    for (int i = 0; i < OBJECTS; i++) {
        f_free(objs[i]);
        objs[i] = NULL;
        sizes[i] = 0;
    }
    printf("# %s: %d forks from the handler in %.2f s\n", name, (int)forks_done, now_s() - start);
    return forks_done >= want && !fork_failed;
}

static int nforks = 300;
static double limit_s = 20;

static void single_threaded(void)
{
    CHECKF(run(nforks, limit_s, 0, "single_threaded"), "%d of %d forks from the handler in %.0f s (fork failed: %d)",
           (int)forks_done, nforks, limit_s, (int)fork_failed);
}

static void with_threads(void)
{
    CHECKF(run(nforks, limit_s, 2, "with_threads"), "%d of %d forks from the handler in %.0f s (fork failed: %d)",
           (int)forks_done, nforks, limit_s, (int)fork_failed);
}

static void heap_intact(void)
{
    CHECKF(atomic_load(&bad_blocks) == 0, "%lu blocks lost their pattern", atomic_load(&bad_blocks));
    char *p = f_malloc(1000);
    CHECK(p != NULL);
    if (p) {
        memset(p, 7, 1000);
        CHECK(p[999] == 7);
    }
    f_free(p);
}

/* The count of forks done tells a fork stuck on a lock (it stops) from a test that never got
 * back to its loop (it reached what was asked). */
static void watchdog(int signo)
{
    (void)signo;
    char msg[160] = "not ok fork_signal: hang: the program made no progress for 60 s (a fork from the handler waits for a lock; forks done: ";
    size_t n = strlen(msg);
    char digits[16];
    int d = 0;
    unsigned v = (unsigned)forks_done;
    do {
        digits[d++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && d < 15);
    while (d)
        msg[n++] = digits[--d];
    msg[n++] = ')';
    msg[n++] = '\n';
    write(1, msg, n);
    _exit(1);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        nforks = atoi(argv[1]);
    if (argc > 2)
        limit_s = atof(argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGALRM, watchdog);
    alarm(60);
    check_begin("fork_signal");
    RUN_CASE(single_threaded);
    alarm(60);
    RUN_CASE(with_threads);
    RUN_CASE(heap_intact);
    return check_end();
}
