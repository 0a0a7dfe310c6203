/* Per-CPU caches (carrcache_rseq) through a preloaded instance (tests/api/percpu.sh runs it with
 * LD_PRELOAD=lib<inst>.so, with and without glibc's rseq registration, and with rseq refused by a
 * seccomp filter: tests/api/no_rseq.c). Every block is filled with a pattern and checked before it
 * is freed. usage: percpu [case|probe] (probe: print the mode, "off" without a per-CPU layer)
 *   mode         mallctl percpu.mode and the statistics' percpu line name the mode this process
 *                must get: glibc's registration when glibc made one, else our own when the kernel
 *                takes one, else per-thread
 *   migration    threads pinned and re-pinned across the CPUs while they allocate, hand half their
 *                blocks to other threads to free, and check every byte
 *   fork         forks while other threads allocate; the child allocates, checks and frees
 *   churn        400 short-lived threads: the cached bytes stay within the per-CPU bound (rseq) or
 *                are given back at each exit (per-thread)
 *   double_free  a second free of a cached object: reported once by the script's count, ignored */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/check.h"

typedef int (*ctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef void (*print_fn)(void (*)(void *, const char *), void *, const char *);
static ctl_fn ctl;
static print_fn stats_print;

static const char *mode_now(void)
{
    const char *m = NULL;
    size_t n = sizeof m;
    if (!ctl || ctl("percpu.mode", &m, &n, NULL, 0) != 0)
        return NULL;
    return m;
}

/* What the process must get: glibc's area when glibc registered one (and it works), else ours
 * when the kernel takes a registration (the probe rseq(NULL, 0, 0, 0): EINVAL), else per-thread. */
static const char *mode_expected(void)
{
#if defined(__x86_64__)
    if (__rseq_size >= 20) {
        const struct rseq *r = (const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
        if ((int32_t)r->cpu_id >= 0)
            return "rseq-glibc";
    }
    errno = 0;
    if (syscall(SYS_rseq, NULL, 0, 0, 0) != 0 && errno == EINVAL)
        return "rseq-own";
#endif
    return "per-thread";
}

struct text {
    char buf[1 << 16];
    size_t n;
};
static void text_add(void *opaque, const char *s)
{
    struct text *t = opaque;
    size_t len = strlen(s);
    if (t->n + len < sizeof t->buf) {
        memcpy(t->buf + t->n, s, len + 1);
        t->n += len;
    }
}
/* The statistics' percpu line: mode, cpus, bytes; false when there is none. */
static int percpu_line(char *mode, size_t *cpus, size_t *bytes)
{
    static struct text t;
    t.n = 0;
    t.buf[0] = 0;
    stats_print(text_add, &t, "");
    const char *line = strstr(t.buf, "\npercpu: mode: ");
    size_t objects;
    return line && sscanf(line, "\npercpu: mode: %31[^,], cpus: %zu, objects: %zu, bytes: %zu", mode, cpus, &objects,
                          bytes) == 4;
}

static void mode(void)
{
    void *volatile first = malloc(64); /* the layer decides on its first slow path */
    free(first);
    const char *m = mode_now(), *want = mode_expected();
    CHECKF(m && !strcmp(m, want), "percpu.mode is %s, expected %s", m ? m : "(no mallctl)", want);
    char line_mode[32];
    size_t cpus, bytes;
    CHECKF(percpu_line(line_mode, &cpus, &bytes), "no percpu line in the statistics");
    CHECKF(!strcmp(line_mode, want), "statistics say %s, expected %s", line_mode, want);
    printf("# mode %s\n", want);
}

/* ---- migration ---- */
enum { RING = 4096, ROUNDS = 40, PER_ROUND = 400 };
static _Atomic(uintptr_t) ring[RING];
static long ncpus;

static unsigned char pattern(uintptr_t p, size_t i) { return (unsigned char)((p >> 4) * 31 + i * 7 + 1); }
static void *block_new(size_t n)
{
    unsigned char *p = malloc(n + sizeof(size_t));
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof n);
    for (size_t i = 0; i < n; i++)
        p[sizeof n + i] = pattern((uintptr_t)p, i);
    return p;
}
/* 1 if the block's bytes are not what block_new wrote; frees it either way. */
static int block_free(unsigned char *p)
{
    size_t n;
    memcpy(&n, p, sizeof n);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad = p[sizeof n + i] != pattern((uintptr_t)p, i);
    free(p);
    return bad;
}

static void pin(long cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET((int)cpu, &one);
    (void)sched_setaffinity(0, sizeof one, &one);
}

static void *migrate_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg, bad = 0, seed = id * 0x9e3779b97f4a7c15ull + 1;
    void *own[PER_ROUND];
    for (int round = 0; round < ROUNDS; round++) {
        pin((long)((id + (uintptr_t)round) % (uintptr_t)ncpus));
        for (int i = 0; i < PER_ROUND; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t n = (seed >> 33) % 1500;
            own[i] = block_new(n);
            if (!own[i])
                return (void *)(uintptr_t)-1;
            if (i % 3 == 0)
                sched_yield(); /* more preemption inside the sections */
        }
        for (int i = 0; i < PER_ROUND; i++) {
            if (i & 1) { /* half go through the ring: another thread frees them */
                uintptr_t old = atomic_exchange(&ring[(seed + (uintptr_t)i * 13) % RING], (uintptr_t)own[i]);
                if (old)
                    bad += (uintptr_t)block_free((unsigned char *)old);
            } else {
                bad += (uintptr_t)block_free(own[i]);
            }
        }
    }
    return (void *)bad;
}

static void migration(void)
{
    ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpus < 1)
        ncpus = 1;
    int n = (int)(2 * ncpus + 2);
    if (n > 32)
        n = 32;
    check_threads(n, migrate_thread);
    for (size_t i = 0; i < RING; i++) {
        uintptr_t p = atomic_exchange(&ring[i], 0);
        CHECKF(!p || !block_free((unsigned char *)p), "block %zu of the ring damaged", i);
    }
}

/* ---- fork ---- */
static atomic_int stop;
static void *busy_thread(void *arg)
{
    (void)arg;
    uintptr_t bad = 0;
    while (!atomic_load(&stop)) {
        void *p[64];
        for (int i = 0; i < 64; i++)
            p[i] = block_new((size_t)(i * 23) % 900);
        for (int i = 0; i < 64; i++)
            bad += p[i] ? (uintptr_t)block_free(p[i]) : 1;
    }
    return (void *)bad;
}

static void fork_case(void)
{
    pthread_t t[3];
    atomic_store(&stop, 0);
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, busy_thread, NULL);
    for (int k = 0; k < 20; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            int bad = 0;
            for (int r = 0; r < 50; r++) {
                void *p[100];
                for (int i = 0; i < 100; i++)
                    p[i] = block_new((size_t)(i * 41 + r) % 3000);
                for (int i = 0; i < 100; i++)
                    bad += p[i] ? block_free(p[i]) : 1;
            }
            _exit(bad ? 3 : 0);
        }
        int status = 0;
        CHECKF(pid > 0 && waitpid(pid, &status, 0) == pid, "fork %d", k);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", k, status);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        CHECKF(!bad, "thread %d found %zu damaged blocks", i, (size_t)(uintptr_t)bad);
    }
}

/* ---- churn ---- */
static void *short_thread(void *arg)
{
    (void)arg;
    uintptr_t bad = 0;
    void *p[300];
    for (int i = 0; i < 300; i++)
        p[i] = block_new((size_t)(i * 13) % 2000);
    for (int i = 0; i < 300; i++)
        bad += p[i] ? (uintptr_t)block_free(p[i]) : 1;
    return (void *)bad;
}

static void churn(void)
{
    for (int wave = 0; wave < 50; wave++)
        check_threads(8, short_thread);
    char m[32];
    size_t cpus, bytes;
    CHECKF(percpu_line(m, &cpus, &bytes), "no percpu line in the statistics");
    if (!strcmp(m, "per-thread"))
        /* every exited thread gave its objects back: what is left is the main thread's */
        CHECKF(bytes <= (size_t)3 << 19, "%zu bytes cached after the threads exited", bytes);
    else
        CHECKF(cpus <= (size_t)sysconf(_SC_NPROCESSORS_CONF) && bytes <= cpus * ((size_t)3 << 19),
               "%zu bytes cached on %zu CPUs", bytes, cpus);
    printf("# churn: %s, %zu slabs, %zu bytes cached\n", m, cpus, bytes);
}

static void double_free(void)
{
    void *p = malloc(48);
    CHECK(p != NULL);
    memset(p, 0x11, 48);
    void (*volatile release)(void *) = free; /* the compiler sees no use after free */
    release(p);
    release(p); /* reported, ignored */
    void *a = malloc(48), *b = malloc(48);
    CHECKF(a != b, "one object handed out twice");
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    check_begin("percpu");
    ctl = (ctl_fn)dlsym(RTLD_DEFAULT, "sunmao_mallctl");
    stats_print = (print_fn)dlsym(RTLD_DEFAULT, "sunmao_stats_print");
    if (!ctl || !stats_print) {
        printf("not ok percpu: all: no sunmao_mallctl / sunmao_stats_print (not preloaded?)\n");
        return 1;
    }
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && !strcmp(only, "probe")) { /* the script asks which mode the instance has */
        void *volatile first = malloc(64);
        free(first);
        printf("%s\n", mode_now() ? mode_now() : "none");
        return 0;
    }
#define CASE(name, fn)                          \
    if (!only || !strcmp(only, name)) {         \
        check_case_name = name;                 \
        check_run_case(name, fn);               \
    }
    CASE("mode", mode);
    CASE("migration", migration);
    CASE("fork", fork_case);
    CASE("churn", churn);
    if (only && !strcmp(only, "double_free"))
        check_run_case("double_free", double_free);
    return check_failures_total != 0;
}
