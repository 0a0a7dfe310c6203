/* Threads that allocate a burst, exit and are joined, in a fresh process: the frees their exit and
 * the join cause are the process's first notes of memory to give back, and the join's own free
 * (glibc frees a dead thread's TLS vector from the dynamic loader, holding the stack cache lock
 * that pthread_create takes) must not be where an allocator starts a helper thread.
 * Usage: join_burst [processes=6] [threads=64] [blocks=300]
 *
 * join_after_burst_no_hang   every one of `processes` fresh processes (this program run again)
 *                            makes its threads allocate and free patterned blocks of 16 B..1 KiB
 *                            (kept by a thread cache until the thread exits), waits until all of
 *                            them are gone, joins them, then allocates and frees on the main
 *                            thread, and exits 0
 *                            within 20 s (a hung one is killed and reported)
 * burst_blocks_intact        no thread of any of them saw a block's pattern change */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/check.h"

enum { CHILD_EXIT_CORRUPT = 3, CHILD_EXIT_NOMEM = 4 };
static long nblocks = 300;
static int hung, corrupt, failed;
static char why[200];

static atomic_int finished, nthreads_made;

/* Blocks a thread cache keeps (16 B..1 KiB, about 150 KiB a thread), so that none of the thread's
 * requests reaches the layers below the cache until its exit gives everything back. */
static void *burst(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 7;
    unsigned char **blk = malloc((size_t)nblocks * sizeof *blk);
    void *status = NULL;
    if (!blk)
        status = (void *)(uintptr_t)CHILD_EXIT_NOMEM;
    for (long i = 0; i < nblocks && !status; i++) {
        size_t n = 16 + (size_t)(seed = seed * 1103515245u + 12345u) % 1009;
        if (!(blk[i] = malloc(n)))
            status = (void *)(uintptr_t)CHILD_EXIT_NOMEM;
        else
            check_fill(blk[i], n, (unsigned)i);
    }
    seed = (unsigned)(uintptr_t)arg * 2654435761u + 7;
    for (long i = 0; i < nblocks && blk && blk[i]; i++) {
        size_t n = 16 + (size_t)(seed = seed * 1103515245u + 12345u) % 1009;
        if (!check_verify(blk[i], n, (unsigned)i))
            status = (void *)(uintptr_t)CHILD_EXIT_CORRUPT;
        free(blk[i]);
    }
    free(blk);
    /* no thread exits before every one is done: an exit gives memory back, and another thread's
     * next request down the stack would be a safe place to act on it */
    atomic_fetch_add(&finished, 1);
    while (atomic_load(&finished) < nthreads_made)
        sched_yield();
    return status;
}

static int child(int nthreads)
{
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    if (!t)
        return CHILD_EXIT_NOMEM;
    int created = 0, status = 0;
    atomic_store(&nthreads_made, nthreads);
    for (; created < nthreads; created++)
        if (pthread_create(&t[created], NULL, burst, (void *)(uintptr_t)(created + 1)) != 0)
            break;
    atomic_store(&nthreads_made, created);
    /* All of them gone before the first join: their exits gave their caches back, and the joins'
     * frees are the first that may act on it. */
    while (atomic_load(&finished) < created)
        sched_yield();
    nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
    for (int i = 0; i < created; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        if (rc && !status)
            status = (int)(uintptr_t)rc;
    }
    free(t);
    for (int i = 0; i < 1000 && !status; i++) { /* the main thread's heap still works after the joins */
        size_t n = 16 + (size_t)i * 37 % 8192;
        unsigned char *p = malloc(n);
        if (!p)
            return CHILD_EXIT_NOMEM;
        check_fill(p, n, (unsigned)i);
        if (!check_verify(p, n, (unsigned)i))
            status = CHILD_EXIT_CORRUPT;
        free(p);
    }
    return created == nthreads ? status : CHILD_EXIT_NOMEM;
}

static void join_after_burst_no_hang(void) { CHECKF(!hung && !failed, "%s", why); }
static void burst_blocks_intact(void) { CHECKF(!corrupt, "%d process(es) saw a block's pattern change", corrupt); }

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        nblocks = argc > 3 ? atol(argv[3]) : nblocks;
        return child(argc > 2 ? atoi(argv[2]) : 64);
    }
    check_begin("join_burst");
    int processes = argc > 1 ? atoi(argv[1]) : 6;
    const char *threads = argc > 2 ? argv[2] : "64", *blocks = argc > 3 ? argv[3] : "300";
    for (int i = 0; i < processes && !hung; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "child", threads, blocks, (char *)NULL);
            _exit(127);
        }
        if (pid < 0) {
            snprintf(why, sizeof why, "fork: %s", strerror(errno));
            failed++;
            break;
        }
        int st = 0;
        struct timespec tick = { 0, 10 * 1000 * 1000 };
        int waited = 0;
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (++waited > 2000) { /* 20 s */
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                hung++;
                snprintf(why, sizeof why, "process %d of %d still running after 20 s (killed): a deadlock", i + 1, processes);
                break;
            }
            nanosleep(&tick, NULL);
        }
        if (hung)
            break;
        if (WIFEXITED(st) && WEXITSTATUS(st) == CHILD_EXIT_CORRUPT)
            corrupt++;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            snprintf(why, sizeof why, "process %d: %s %d", i + 1, WIFEXITED(st) ? "exit status" : "signal",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
    }
    RUN_CASE(join_after_burst_no_hang);
    RUN_CASE(burst_blocks_intact);
    return check_end();
}
