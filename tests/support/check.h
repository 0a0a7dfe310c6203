/* Minimal test-case reporting shared by every test program. Each case prints one line,
 *   ok <program>: <case>   |   not ok <program>: <case>: <why>   |   skip <program>: <case>: <why>
 * and tests/run.sh counts those lines into the `N passed, N failed, N skipped` summary.
 * A program exits non-zero if any of its cases failed. */
#ifndef SUNMAO_TEST_CHECK_H
#define SUNMAO_TEST_CHECK_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *check_program = "test";
static int check_failures_total;
static int check_case_failed;
static int check_case_skipped; /* the running case skipped itself (check_skip with its name): no "ok" line */
static const char *check_case_name;

static inline void check_begin(const char *program) { check_program = program; setvbuf(stdout, NULL, _IONBF, 0); }

/* Fail the current case with a message (the first failure of a case is the one reported). */
#define CHECK(cond)                                                                                    \
    do {                                                                                               \
        if (!(cond))                                                                                   \
            check_fail_at(__FILE__, __LINE__, "%s", #cond);                                            \
    } while (0)
#define CHECKF(cond, ...)                                                                              \
    do {                                                                                               \
        if (!(cond))                                                                                   \
            check_fail_at(__FILE__, __LINE__, __VA_ARGS__);                                            \
    } while (0)

__attribute__((format(printf, 3, 4))) static inline void check_fail_at(const char *file, int line, const char *fmt, ...)
{
    if (check_case_failed++)
        return;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("not ok %s: %s: %s:%d: %s\n", check_program, check_case_name, file, line, why);
}

/* Run one case: RUN_CASE(fn) calls void fn(void) and reports it. */
#define RUN_CASE(fn) check_run_case(#fn, fn)
static inline void check_run_case(const char *name, void (*fn)(void))
{
    check_case_name = name;
    check_case_failed = 0;
    check_case_skipped = 0;
    fn();
    if (check_case_failed)
        check_failures_total++;
    else if (!check_case_skipped)
        printf("ok %s: %s\n", check_program, name);
}

/* Runs fn((void *)i) on n threads, i = 0..n-1, and fails the current case for every thread that
 * returns non-NULL (the convention of the stress helpers: the number of corrupted blocks, or -1
 * when an allocation failed). */
static inline void check_threads(int n, void *(*fn)(void *))
{
    pthread_t t[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, fn, (void *)(intptr_t)i);
    for (int i = 0; i < n; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECKF(r == NULL, "thread %d: %ld corrupted blocks or OOM", i, (long)(intptr_t)r);
    }
}

static inline void check_skip(const char *name, const char *why)
{
    if (check_case_name && strcmp(name, check_case_name) == 0)
        check_case_skipped = 1;
    printf("skip %s: %s: %s\n", check_program, name, why);
}

static inline int check_end(void) { return check_failures_total ? 1 : 0; }

/* Fill patterns: every byte depends on the block address and a seed, so a block that was
 * handed out twice or overwritten by a neighbour is caught when it is verified. */
static inline unsigned char check_pattern_byte(const void *block, size_t i, unsigned seed)
{
    size_t x = (size_t)block ^ (i * 0x9e3779b1u) ^ seed;
    return (unsigned char)(x ^ (x >> 11) ^ (x >> 23));
}
/* origin: what the pattern follows besides the offset (the block's address, or NULL: a block that
 * may move, as a realloc or a MOVE does). */
static inline void check_fill_from(void *block, size_t n, unsigned seed, const void *origin)
{
    unsigned char *b = (unsigned char *)block;
    for (size_t i = 0; i < n; i++)
        b[i] = check_pattern_byte(origin, i, seed);
}
static inline int check_verify_from(const void *block, size_t n, unsigned seed, const void *origin)
{
    const unsigned char *b = (const unsigned char *)block;
    for (size_t i = 0; i < n; i++)
        if (b[i] != check_pattern_byte(origin, i, seed))
            return 0;
    return 1;
}
static inline void check_fill(void *block, size_t n, unsigned seed) { check_fill_from(block, n, seed, block); }
static inline int check_verify(const void *block, size_t n, unsigned seed) { return check_verify_from(block, n, seed, block); }
/* A block that may move: the pattern follows the offset only. */
static inline void check_fill_movable(void *block, size_t n, unsigned seed) { check_fill_from(block, n, seed, NULL); }
static inline int check_verify_moved(const void *block, size_t n, unsigned seed)
{
    return check_verify_from(block, n, seed, NULL);
}

/* Runs fn(arg) in a forked child whose stderr goes into out (n bytes, NUL-terminated; the first
 * n - 1 bytes), with an alarm of `seconds`, so a hang ends as SIGALRM. The child exits 0 if fn
 * returns. The child's wait status, or -1 if it could not be started. */
static inline int check_in_child(void (*fn)(void *), void *arg, unsigned seconds, char *out, size_t n)
{
    int fds[2];
    out[0] = 0;
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        alarm(seconds);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while (len < n - 1 && (r = read(fds[0], out + len, n - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = 0;
    close(fds[0]);
    int status = 0;
    return waitpid(pid, &status, 0) == pid ? status : -1;
}

#endif
