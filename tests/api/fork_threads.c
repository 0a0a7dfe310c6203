/* fork() from a multi-threaded process while other threads hammer malloc/free, and per-thread
 * state released at thread exit. Usage: fork_threads [forks=200] [threads=2000]
 *
 * fork_child_allocates   every child (forked while 8 threads allocate) can malloc/calloc/realloc/
 *                        free, sees an inherited block intact, creates a thread that allocates,
 *                        and exits 0
 * fork_no_deadlock       no child hangs: each is waited for with a deadline (a hung child is
 *                        killed and reported, the remaining forks are skipped)
 * fork_parent_intact     the hammering threads never saw a corrupted block, the parent's heap
 *                        works after the forks
 * thread_exit_releases   2000 threads created and joined one after the other, each allocating
 *                        ~300 KiB and freeing it (plus a few blocks freed by main after the
 *                        thread is gone): resident memory stays bounded */
#include <errno.h>
#include <pthread.h>
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

#define HAMMERS 8
static int nforks = 200, nthreads_exit = 2000;

static void *(*volatile f_malloc)(size_t) = malloc;
static void *(*volatile f_calloc)(size_t, size_t) = calloc;
static void *(*volatile f_realloc)(void *, size_t) = realloc;
static void (*volatile f_free)(void *) = free;

static atomic_int stop;
static atomic_ulong hammer_bad, hammer_ops;
static char hammer_msg[200];

static void *hammer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    enum { K = 32 };
    unsigned char *blk[K] = { 0 };
    size_t len[K] = { 0 };
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)(seed >> 8) % K;
        if (blk[k]) {
            if (!check_verify(blk[k], len[k], (unsigned)k) && atomic_fetch_add(&hammer_bad, 1) == 0)
                snprintf(hammer_msg, sizeof hammer_msg, "block %p (%zu bytes) corrupted", (void *)blk[k], len[k]);
            f_free(blk[k]);
            blk[k] = NULL;
        } else {
            len[k] = (seed >> 12) % 3000 + 1;
            if ((seed & 0xff) == 7)
                len[k] += 300000; /* an occasional large (mmap-sized) block */
            blk[k] = f_malloc(len[k]);
            if (!blk[k]) {
                if (atomic_fetch_add(&hammer_bad, 1) == 0)
                    snprintf(hammer_msg, sizeof hammer_msg, "malloc(%zu) = NULL", len[k]);
                continue;
            }
            check_fill(blk[k], len[k], (unsigned)k);
        }
        /* leave some CPU to the forking thread and its children (2 cores, 8 hammers) */
        if (atomic_fetch_add_explicit(&hammer_ops, 1, memory_order_relaxed) % 64 == 63) {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
    for (int k = 0; k < K; k++)
        f_free(blk[k]);
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        unsigned char *p = f_malloc((size_t)i * 13 + 1);
        if (!p)
            return (void *)1;
        check_fill(p, (size_t)i * 13 + 1, 3);
        if (!check_verify(p, (size_t)i * 13 + 1, 3))
            return (void *)1;
        f_free(p);
    }
    return NULL;
}

/* Child: exit status says what failed (0 = all good). No stdio. */
static int child(unsigned char *inherited, size_t inherited_len)
{
    if (!check_verify(inherited, inherited_len, 99))
        return 10;
    void *p[64];
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)i * 97 + 1;
        p[i] = f_malloc(n);
        if (!p[i])
            return 11;
        check_fill(p[i], n, 4);
    }
    for (int i = 0; i < 64; i++)
        if (!check_verify(p[i], (size_t)i * 97 + 1, 4))
            return 12;
    for (int i = 0; i < 64; i++)
        f_free(p[i]);
    unsigned char *c = f_calloc(1000, 8);
    if (!c)
        return 13;
    for (int i = 0; i < 8000; i++)
        if (c[i])
            return 14;
    unsigned char *r = f_realloc(c, 100000);
    if (!r)
        return 15;
    f_free(r);
    f_free(inherited); /* a block the parent allocated, freed in the child */
    pthread_t t;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0)
        return 16;
    void *res = (void *)1;
    if (pthread_join(t, &res) != 0 || res != NULL)
        return 17;
    return 0;
}

static void on_alarm(int sig) { (void)sig; }

/* Waits for pid at most `deadline_s` seconds (blocking waitpid, interrupted by SIGALRM); returns
 * its wait status, or -1 on timeout (the child is killed). */
static int wait_deadline(pid_t pid, unsigned deadline_s)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid fails with EINTR */
    sigaction(SIGALRM, &sa, NULL);
    alarm(deadline_s);
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
        kill(pid, SIGKILL); /* the alarm went off: the child hangs */
        waitpid(pid, &st, 0);
        alarm(0);
        return -1;
    }
    alarm(0);
    return r == pid ? st : -2;
}

static int hammers_started;
static int fork_bad_status, fork_bad_count, fork_hangs, forks_done, fork_errors;

static void run_forks(void)
{
    pthread_t th[HAMMERS];
    int nh = 0;
    for (int i = 0; i < HAMMERS; i++)
        if (pthread_create(&th[i], NULL, hammer, (void *)(uintptr_t)(i + 1)) == 0)
            nh++;
    hammers_started = nh;
    while (atomic_load(&hammer_ops) < 1000) /* let them get going */
        sched_yield();
    for (int f = 0; f < nforks; f++) {
        size_t len = (size_t)f * 37 % 5000 + 1;
        unsigned char *inherited = f_malloc(len);
        if (!inherited) {
            fork_errors++;
            continue;
        }
        check_fill(inherited, len, 99);
        pid_t pid = fork();
        if (pid == 0)
            _exit(child(inherited, len));
        if (pid < 0) {
            fork_errors++;
            f_free(inherited);
            continue;
        }
        int st = wait_deadline(pid, 10);
        f_free(inherited);
        forks_done++;
        if (st == -1) {
            fork_hangs++;
            break; /* the allocator deadlocks after fork: don't wait 10 s 200 times */
        }
        if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (!fork_bad_count++)
                fork_bad_status = st;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < nh; i++)
        pthread_join(th[i], NULL);
}

static void fork_child_allocates(void)
{
    CHECKF(fork_bad_count == 0, "%d of %d children failed; first: %s %d (exit codes: 10 inherited block damaged, "
           "11-12 malloc, 13-14 calloc, 15 realloc, 16-17 thread)", fork_bad_count, forks_done,
           fork_bad_status >= 0 && WIFSIGNALED(fork_bad_status) ? "killed by signal" : "exit status",
           fork_bad_status >= 0 && WIFSIGNALED(fork_bad_status) ? WTERMSIG(fork_bad_status)
                                                                : fork_bad_status >= 0 ? WEXITSTATUS(fork_bad_status)
                                                                                       : fork_bad_status);
    CHECKF(fork_errors == 0, "%d fork()/malloc errors in the parent", fork_errors);
}

static void fork_no_deadlock(void)
{
    CHECKF(fork_hangs == 0, "child #%d hung for 10 s after fork (allocator lock held across fork?)", forks_done);
    CHECKF(fork_hangs || forks_done == nforks, "only %d of %d forks done", forks_done, nforks);
}

static void fork_parent_intact(void)
{
    CHECKF(hammers_started == HAMMERS, "only %d hammer threads started", hammers_started);
    CHECKF(hammer_bad == 0, "%lu bad blocks in the hammering threads, first: %s", (unsigned long)hammer_bad, hammer_msg);
    void *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = f_malloc((size_t)i * 100 + 1);
        CHECK(p[i] != NULL);
        if (p[i])
            check_fill(p[i], (size_t)i * 100 + 1, 5);
    }
    for (int i = 0; i < 100; i++) {
        CHECK(!p[i] || check_verify(p[i], (size_t)i * 100 + 1, 5));
        f_free(p[i]);
    }
}

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

#define LEFT 4 /* blocks each thread leaves behind for main to free after the thread is gone */
struct exit_arg {
    unsigned char *left[LEFT];
    size_t left_len[LEFT];
    int bad;
};

static void *exiting_thread(void *arg)
{
    struct exit_arg *a = arg;
    enum { K = 96 };
    unsigned char *b[K];
    for (int i = 0; i < K; i++) {
        size_t n = (size_t)(i % 8 + 1) * 512 + (size_t)i; /* ~ 240 KiB in all */
        b[i] = f_malloc(n);
        if (!b[i]) {
            a->bad = 1;
            continue;
        }
        memset(b[i], i, n); /* touch it: resident */
    }
    for (int i = K - 1; i >= 0; i--)
        f_free(b[i]);
    void *big = f_malloc(64 * 1024);
    if (big)
        memset(big, 1, 64 * 1024);
    f_free(big);
    for (int i = 0; i < LEFT; i++) {
        a->left_len[i] = (size_t)(i + 1) * 200;
        a->left[i] = f_malloc(a->left_len[i]);
        if (a->left[i])
            check_fill(a->left[i], a->left_len[i], 6);
        else
            a->bad = 1;
    }
    return NULL;
}

static void thread_exit_releases(void)
{
    size_t warm = 0;
    int failed_create = 0, bad = 0, bad_left = 0;
    for (int t = 0; t < nthreads_exit; t++) {
        struct exit_arg a;
        memset(&a, 0, sizeof a);
        pthread_t th;
        if (pthread_create(&th, NULL, exiting_thread, &a) != 0) {
            failed_create++;
            continue;
        }
        pthread_join(th, NULL);
        bad += a.bad;
        for (int i = 0; i < LEFT; i++) {
            if (a.left[i] && !check_verify(a.left[i], a.left_len[i], 6))
                bad_left++;
            f_free(a.left[i]);
        }
        if (t == nthreads_exit / 10)
            warm = rss_bytes();
    }
    size_t end = rss_bytes();
    CHECKF(failed_create == 0, "%d pthread_create failures", failed_create);
    CHECKF(bad == 0, "%d allocation failures in the threads", bad);
    CHECKF(bad_left == 0, "%d blocks left by exited threads were corrupted", bad_left);
    /* each thread touched ~300 KiB: if the per-thread state/cache were never released, 1800 threads
     * would add ~540 MiB */
    size_t limit = 48u << 20;
    CHECKF(end <= warm + limit, "RSS grew from %zu KiB (after %d threads) to %zu KiB (after %d): per-thread state "
           "not released?", warm >> 10, nthreads_exit / 10, end >> 10, nthreads_exit);
    printf("# rss after %d threads %zu KiB, after %d threads %zu KiB\n", nthreads_exit / 10, warm >> 10, nthreads_exit,
           end >> 10);
}

int main(int argc, char **argv)
{
    check_begin("fork_threads");
    if (argc > 1)
        nforks = atoi(argv[1]);
    if (argc > 2)
        nthreads_exit = atoi(argv[2]);
    run_forks();
    RUN_CASE(fork_child_allocates);
    RUN_CASE(fork_no_deadlock);
    RUN_CASE(fork_parent_intact);
    RUN_CASE(thread_exit_releases);
    return check_end();
}
