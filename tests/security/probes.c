/* The heap-exploitation probes of outside testing (issue: secure layers), run against whatever
 * malloc the process has (LD_PRELOAD selects the allocator). Each probe damages freed memory the
 * way an exploit would, then asks for blocks of the damaged block's size and checks what comes back:
 *   uaf_link       a write after free of a freed block's first 8 bytes (a free-list link) with the
 *                  address of a static buffer: is that address ever handed out?
 *   overflow_1     a 1-byte overflow from a live block toward its freed neighbour (into its first
 *                  byte where blocks touch): is a misaligned pointer, or one inside a live block, ever
 *                  handed out?
 *   tag_then_dup   a write after free over the freed block's second word (where a double-free tag
 *                  lives), then a second free of it: is any block handed out twice?
 *   xthread_dup    a block freed by this thread, then again by another thread
 *   xthread_exited a block freed by another thread, which exits, then again by this one
 * After the probe the program frees what it holds and goes on allocating (a quarantine reports what
 * it finds when the damaged block leaves it), then takes blocks again, checked the same way.
 * Each probe runs in a forked child (a crash is a result, not the end of the run) with its stderr on
 * a pipe; the parent prints one line per probe:
 *   probe <name>: reports=<lines naming the damage on stderr> bad=<bad pointers> dup=<blocks handed
 *   out twice> crashed=<signal or 0>
 * tests/security/probes.sh compares the lines with what each allocator must do. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/report_lines.h"

/* The probes use memory after free on purpose. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

enum { SIZE = 64, TAKE = 200 };
static char target[256] __attribute__((aligned(64)));
static void *live[TAKE + 64];
static unsigned nlive;

/* Asks for TAKE blocks of SIZE, keeping every one: counts the pointers no sound allocator returns
 * (misaligned, the probe's target, inside another live block) and those returned twice. */
static void take_and_check(unsigned *bad, unsigned *dup)
{
    for (unsigned i = 0; i < TAKE; i++) {
        char *q = malloc(SIZE);
        if (!q)
            continue;
        if (((uintptr_t)q & 15) || (q >= target && q < target + sizeof target))
            (*bad)++;
        for (unsigned j = 0; j < nlive; j++) {
            char *o = live[j];
            if (q == o)
                (*dup)++;
            else if (q > o && q < o + SIZE)
                (*bad)++;
        }
        live[nlive++] = q;
    }
    for (unsigned j = 0; j < nlive; j++) /* every block handed out must be writable memory */
        memset(live[j], 0x5a, SIZE);
}

/* The program goes on: it frees what it holds and keeps allocating and freeing, so damage that a
 * quarantine or a check at free finds late is found now. */
static void go_on(unsigned *bad, unsigned *dup)
{
    for (unsigned j = 0; j < nlive; j++)
        free(live[j]);
    nlive = 0;
    void *ring[64] = { 0 };
    for (unsigned i = 0; i < 20000; i++) {
        unsigned k = (i * 2654435761u) >> 26;
        free(ring[k]);
        ring[k] = malloc(16 + (i * 40503u) % 240);
    }
    for (unsigned k = 0; k < 64; k++)
        free(ring[k]);
    take_and_check(bad, dup);
}

static void probe_uaf_link(unsigned *bad, unsigned *dup)
{
    void *a = malloc(SIZE), *b = malloc(SIZE);
    free(b);
    free(a);
    *(volatile uintptr_t *)a = (uintptr_t)target; /* (volatile: gcc drops stores to freed memory) the freed block's link now points at the target */
    take_and_check(bad, dup);
}

static void probe_overflow_1(unsigned *bad, unsigned *dup)
{
    char *blk[64];
    for (int i = 0; i < 64; i++)
        blk[i] = malloc(SIZE);
    /* The block whose right neighbour starts nearest after its end (right after it in a plain slab;
     * a few bytes on where a layer adds a header or a check value): the neighbour is freed, then one
     * byte is written past the block's end. */
    int v = 0, nb = -1;
    size_t gap = SIZE_MAX;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++)
            if (blk[j] >= blk[i] + SIZE && (size_t)(blk[j] - blk[i]) - SIZE < gap) {
                gap = (size_t)(blk[j] - blk[i]) - SIZE;
                v = i;
                nb = j;
            }
    if (nb >= 0) {
        free(blk[nb]);
        blk[nb] = NULL;
    }
    /* One byte past the end of blk[v], changed: a constant would equal a keyed check byte or an
     * encoded link's byte there one run in 256, and then nothing was damaged. */
    ((volatile char *)blk[v])[SIZE] ^= 0x41;
    for (int i = 0; i < 64; i++)
        if (blk[i])
            live[nlive++] = blk[i];
    take_and_check(bad, dup);
}

static void probe_tag_then_dup(unsigned *bad, unsigned *dup)
{
    void *a = malloc(SIZE), *b = malloc(SIZE);
    free(b);
    free(a);
    ((volatile uintptr_t *)a)[1] = 0; /* whatever a free list keeps in the second word is gone */
    free(a);                 /* the double free */
    take_and_check(bad, dup);
}

/* Cross-thread double frees: one thread frees a block, another frees it again. */
static void *xt_block;
static void *xt_free(void *arg)
{
    (void)arg;
    free(xt_block);
    return NULL;
}
static void xt_free_in_thread(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, xt_free, NULL) == 0)
        pthread_join(t, NULL);
}

/* This thread frees it first (its cache keeps it), then a new thread frees it again. */
static void probe_xthread_dup(unsigned *bad, unsigned *dup)
{
    xt_block = malloc(SIZE);
    free(xt_block);
    xt_free_in_thread();
    take_and_check(bad, dup);
}

/* Another thread frees it first and exits (its cache goes back below), then this thread frees it. */
static void probe_xthread_exited(unsigned *bad, unsigned *dup)
{
    xt_block = malloc(SIZE);
    xt_free_in_thread();
    free(xt_block);
    take_and_check(bad, dup);
}

/* A program's history before the damage: a cache's lists grow with use (slow start), so the probes
 * meet them as a busy program's are, not as a fresh thread's. */
static void warm_up(void)
{
    void *w[128];
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < 128; i++)
            w[i] = malloc(SIZE);
        for (int i = 0; i < 128; i++)
            free(w[i]);
    }
}

static const struct { const char *name; void (*run)(unsigned *, unsigned *); } probes[] = {
    { "uaf_link", probe_uaf_link },
    { "overflow_1", probe_overflow_1 },
    { "tag_then_dup", probe_tag_then_dup },
    { "xthread_dup", probe_xthread_dup },
    { "xthread_exited", probe_xthread_exited },
};

/* Lines of the child's stderr that report damage (any allocator's words for it). */
static unsigned count_reports(const char *text)
{
    static const char *const words[] = { "corrupt", "double free", "invalid free", "invalid pointer",
                                         "free(): invalid", "heap", "written after free" };
    return report_lines(text, words, sizeof words / sizeof *words);
}

int main(int argc, char **argv)
{
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        if (argc > 1 && strcmp(argv[1], probes[i].name))
            continue;
        int err[2], res[2];
        if (pipe(err) || pipe(res))
            return 2;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(err[1], 2);
            close(err[0]);
            close(res[0]);
            unsigned bad = 0, dup = 0;
            warm_up();
            probes[i].run(&bad, &dup);
            unsigned out[2] = { bad, dup }; /* sent after each phase: a crash in the next keeps these */
            if (write(res[1], out, sizeof out) != sizeof out)
                _exit(3);
            go_on(&bad, &dup);
            out[0] = bad, out[1] = dup;
            if (write(res[1], out, sizeof out) != sizeof out)
                _exit(3);
            _exit(0);
        }
        close(err[1]);
        close(res[1]);
        char text[8192];
        size_t n = 0;
        ssize_t r;
        while ((r = read(err[0], text + n, sizeof text - 1 - n)) > 0)
            n += (size_t)r;
        text[n] = 0;
        unsigned out[2] = { 0, 0 }, last[2];
        ssize_t got = 0;
        while (read(res[0], last, sizeof last) == (ssize_t)sizeof last) {
            memcpy(out, last, sizeof out);
            got++;
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int crashed = WIFSIGNALED(status) ? WTERMSIG(status) : got != 2 ? -1 : 0;
        printf("probe %s: reports=%u bad=%u dup=%u crashed=%d\n", probes[i].name, count_reports(text), out[0],
               out[1], crashed);
        if (getenv("PROBES_VERBOSE") && n)
            fprintf(stderr, "%s", text);
        close(err[0]);
        close(res[0]);
    }
    return 0;
}
