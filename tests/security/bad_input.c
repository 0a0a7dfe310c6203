/* Bad input to the malloc API, run against whatever malloc the process has (LD_PRELOAD selects the
 * allocator). Each probe runs in a forked child with its stderr on a pipe; the parent prints
 *   probe <name>: reports=<stderr lines naming the error> crashed=<signal, or 0> answer=<ok|what was wrong>
 * and tests/security/bad_input.sh compares the lines with what each allocator must do
 * (docs/reliability.md has the table, with glibc's and the peers' answers).
 *   free_stack        free() of a local variable's address
 *   free_interior     free() of a pointer 16 bytes into a live 64-byte block
 *   free_libc         free() of a block from the C library's own malloc (dlsym in libc.so.6: its
 *                     __libc_malloc is the preloaded allocator's in sunmao, tcmalloc and mimalloc)
 *   free_mmap         free() of a page from mmap
 *   double_free_now   a block freed twice in a row
 *   double_free_later a block freed, 100 other requests served, then freed again
 *   realloc_freed     realloc() of a freed block: NULL, or a block, but never the freed one again
 *                     while another live block holds it
 *   usable_bad        malloc_usable_size() of a local variable's address: 0
 *   absurd_sizes      malloc(SIZE_MAX), malloc(SIZE_MAX / 2), calloc(2^33, 2^33), realloc(p,
 *                     SIZE_MAX - 8), reallocarray overflow: NULL + ENOMEM, nothing reported
 *   bad_alignment     posix_memalign with 24 and 0 (EINVAL, *out untouched), aligned_alloc(24, 64)
 *                     (NULL + EINVAL), memalign(24, 64) (a block aligned to 32, as glibc rounds)
 * After each probe the child goes on allocating and freeing (a sound allocator is still usable:
 * a crash there is a crash of the probe). */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/report_lines.h"

/* The probes hand the allocator bad pointers on purpose. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#if __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
#endif

static void *(*volatile f_malloc)(size_t) = malloc;
static void (*volatile f_free)(void *) = free;
static void *(*volatile f_realloc)(void *, size_t) = realloc;

static char answer[256] = "ok";
static void wrong(const char *what)
{
    if (!strcmp(answer, "ok"))
        snprintf(answer, sizeof answer, "%s", what);
}

static void probe_free_stack(void)
{
    char local[64];
    memset(local, 1, sizeof local);
    f_free(local + 16);
}
static void probe_free_interior(void)
{
    char *p = f_malloc(64);
    f_free(p + 16);
    f_free(p);
}
static void probe_free_libc(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *(*libc_malloc)(size_t) = libc ? (void *(*)(size_t))dlsym(libc, "malloc") : NULL;
    if (!libc_malloc) {
        wrong("the C library's malloc not found");
        return;
    }
    f_free(libc_malloc(64));
}
static void probe_free_mmap(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
        f_free(p);
}
static void probe_double_free_now(void)
{
    void *p = f_malloc(64);
    f_free(p);
    f_free(p);
}
static void probe_double_free_later(void)
{
    void *p = f_malloc(64), *other[100];
    f_free(p);
    for (int i = 0; i < 100; i++)
        other[i] = f_malloc(200 + 40 * (size_t)i);
    f_free(p);
    for (int i = 0; i < 100; i++)
        f_free(other[i]);
}
static void probe_realloc_freed(void)
{
    char *p = f_malloc(64), *q = f_malloc(64); /* q is live throughout: never p's block */
    f_free(p);
    if (q)
        memset(q, 0x71, 64);
    char *r = f_realloc(p, 128);
    for (int i = 0; q && i < 64; i++)
        if (q[i] != 0x71) {
            wrong("a live block was changed by realloc of a freed pointer");
            break;
        }
    if (r && r == q)
        wrong("realloc of a freed pointer returned a live block");
    else if (r)
        f_free(r);
    if (q)
        f_free(q);
}
static void probe_usable_bad(void)
{
    char local[64];
    memset(local, 2, sizeof local);
    size_t n = malloc_usable_size(local + 16);
    if (n != 0)
        wrong("malloc_usable_size of a stack address was not 0");
}
static void expect_null(void *p, int e, const char *what)
{
    char m[160];
    if (p) {
        snprintf(m, sizeof m, "%s served a block", what);
        wrong(m);
        f_free(p);
    } else if (errno != e) {
        snprintf(m, sizeof m, "%s: NULL with errno %d, not %d", what, errno, e);
        wrong(m);
    }
}
static void probe_absurd_sizes(void)
{
    errno = 0;
    expect_null(f_malloc(SIZE_MAX), ENOMEM, "malloc(SIZE_MAX)");
    errno = 0;
    expect_null(f_malloc(SIZE_MAX / 2), ENOMEM, "malloc(SIZE_MAX / 2)");
    volatile size_t big = (size_t)1 << 33; /* not a constant: the compiler would warn of the overflow */
    errno = 0;
    expect_null(calloc(big, big), ENOMEM, "calloc(2^33, 2^33)");
    errno = 0;
    expect_null(reallocarray(NULL, big << 7, big << 7), ENOMEM, "reallocarray overflow");
    char *p = f_malloc(100);
    memset(p, 3, 100);
    errno = 0;
    expect_null(f_realloc(p, SIZE_MAX - 8), ENOMEM, "realloc(p, SIZE_MAX - 8)");
    for (int i = 0; i < 100; i++)
        if (p[i] != 3) {
            wrong("a failed realloc changed the block");
            break;
        }
    f_free(p);
}
static void probe_bad_alignment(void)
{
    volatile size_t odd = 24, zero = 0; /* not constants: compilers refuse those at build time */
    void *out = (void *)0x1;
    int rc = posix_memalign(&out, odd, 64);
    if (rc != EINVAL || out != (void *)0x1)
        wrong("posix_memalign(24) not EINVAL, or *out changed");
    rc = posix_memalign(&out, zero, 64);
    if (rc != EINVAL || out != (void *)0x1)
        wrong("posix_memalign(0) not EINVAL, or *out changed");
    errno = 0;
    expect_null(aligned_alloc(odd, 64), EINVAL, "aligned_alloc(24, 64)");
    void *m = memalign(odd, 64);
    if (!m || ((uintptr_t)m & 31))
        wrong("memalign(24, 64) not a block aligned to 32");
    f_free(m);
}

static const struct { const char *name; void (*run)(void); } probes[] = {
    { "free_stack", probe_free_stack },
    { "free_interior", probe_free_interior },
    { "free_libc", probe_free_libc },
    { "free_mmap", probe_free_mmap },
    { "double_free_now", probe_double_free_now },
    { "double_free_later", probe_double_free_later },
    { "realloc_freed", probe_realloc_freed },
    { "usable_bad", probe_usable_bad },
    { "absurd_sizes", probe_absurd_sizes },
    { "bad_alignment", probe_bad_alignment },
};

/* Lines of the child's stderr that report an error (any allocator's words for one). */
static unsigned count_reports(const char *text)
{
    static const char *const words[] = { "corrupt", "double free", "invalid free", "invalid pointer", "free(): invalid",
                                         "invalid", "not allocated", "bad pointer", "heap", "attempting free" };
    return report_lines(text, words, sizeof words / sizeof *words);
}

/* After a probe: the allocator still serves and frees. */
static void go_on(void)
{
    void *p[64];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 64; i++) {
            p[i] = f_malloc(16 + 97 * (size_t)i);
            if (p[i])
                memset(p[i], i, 16 + 97 * (size_t)i);
        }
        for (int i = 0; i < 64; i++)
            f_free(p[i]);
    }
}

int main(int argc, char **argv)
{
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        if (argc > 1 && strcmp(argv[1], probes[i].name))
            continue;
        int err[2], res[2];
        if (pipe(err) || pipe(res))
            return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(err[1], 2);
            close(err[0]);
            close(res[0]);
            go_on();
            probes[i].run();
            go_on();
            if (write(res[1], answer, strlen(answer)) < 0)
                _exit(3);
            _exit(0);
        }
        close(err[1]);
        close(res[1]);
        char text[8192], got[256];
        size_t n = 0;
        ssize_t r;
        while ((r = read(err[0], text + n, sizeof text - 1 - n)) > 0)
            n += (size_t)r;
        text[n] = 0;
        ssize_t g = read(res[0], got, sizeof got - 1);
        got[g > 0 ? g : 0] = 0;
        int status = 0;
        waitpid(pid, &status, 0);
        int crashed = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status) ? -WEXITSTATUS(status) : 0;
        printf("probe %s: reports=%u crashed=%d answer=%s\n", probes[i].name, count_reports(text), crashed,
               g > 0 ? got : "none (the child did not finish)");
        if (getenv("PROBES_VERBOSE") && n)
            fprintf(stderr, "%s", text);
        close(err[0]);
        close(res[0]);
    }
    return 0;
}
