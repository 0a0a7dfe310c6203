/* SUNMAO_CONF seen from a program: tests/api/conf.sh runs it under LD_PRELOAD=lib<inst>.so with a
 * setting per case and names the case on the command line:
 *   pattern            malloc/free/realloc of many sizes keep their contents (any setting)
 *   junk_alloc         fresh blocks read 0xa5 over their usable size (junk:true or junk:alloc)
 *   junk_free FROM END a freed 64-byte block reads 0x5a at bytes FROM..END-1 (junk:true): read
 *                      after free on purpose; the block stays mapped in every layer that serves it
 *   zero               blocks read zero over their usable size, after reuse and realloc (zero:true)
 *   release_thread N   after frees of large and medium blocks, a thread named sunmao-release
 *                      exists (N = 1) or does not (N = 0, background_thread:false)
 *   rss_drop MS        64 MiB of large blocks freed: RSS falls by 48 MiB within MS ms (1), or
 *                      stays up that long (0) -- second argument -- without malloc_trim
 *   thp FLAG           an 8 MiB block's mapping carries VmFlags FLAG (hg: thp:always, nh: never)
 *   guarded N          of 16 malloc+free pairs of 48 bytes, N had their block's end against an
 *                      inaccessible page (a guard layer's sample; guard_sample:1 -> 16, :0 -> 0),
 *                      probed with write(2) into a pipe (EFAULT), so nothing faults
 * Built with -DCONF_SYMBOL='"..."' (conf.sh does, with -rdynamic) it defines sunmao_conf. */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tests/support/check.h"

#ifdef CONF_SYMBOL
const char *sunmao_conf = CONF_SYMBOL;
#endif

static const char *arg1 = "", *arg2 = "";

static size_t first_not(const unsigned char *p, size_t from, size_t n, unsigned char v)
{
    for (size_t i = from; i < n; i++)
        if (p[i] != v)
            return i;
    return n;
}

static const size_t sizes[] = { 1, 24, 64, 200, 1000, 5000, 20000, 100000, 700000, 3 << 20 };
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static void pattern(void)
{
    enum { N = 2000 };
    static unsigned char *p[N];
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < N; i++) {
            size_t n = sizes[i % 8] + i % 13;
            p[i] = malloc(n);
            CHECK(p[i] != NULL);
            memset(p[i], (int)(i & 0xff), n);
        }
        for (unsigned i = 0; i < N; i += 2) {
            size_t n = sizes[i % 8] + i % 13;
            CHECKF(first_not(p[i], 0, n, (unsigned char)i) == n, "block %u lost its contents", i);
            unsigned char *q = realloc(p[i], n * 2 + 5);
            CHECK(q != NULL);
            CHECKF(first_not(q, 0, n, (unsigned char)i) == n, "block %u changed in realloc", i);
            p[i] = q;
        }
        for (unsigned i = 0; i < N; i++)
            free(p[i]);
    }
}

static void junk_alloc(void)
{
    for (unsigned k = 0; k < NSIZES; k++) {
        unsigned char *p = malloc(sizes[k]);
        size_t u = malloc_usable_size(p);
        CHECKF(u >= sizes[k] && first_not(p, 0, u, 0xa5) == u, "malloc(%zu): byte %zu of %zu is %#x", sizes[k],
               first_not(p, 0, u, 0xa5), u, first_not(p, 0, u, 0xa5) < u ? p[first_not(p, 0, u, 0xa5)] : 0);
        memset(p, 0x33, u);
        free(p);
        p = malloc(sizes[k]); /* again, now that blocks of this size were used */
        u = malloc_usable_size(p);
        CHECKF(first_not(p, 0, u, 0xa5) == u, "malloc(%zu) after reuse: byte %zu is not 0xa5", sizes[k],
               first_not(p, 0, u, 0xa5));
        free(p);
    }
    unsigned char *c = calloc(1, 100); /* calloc stays zero */
    CHECK(c && first_not(c, 0, 100, 0) == 100);
    free(c);
}

static void junk_free(void)
{
    size_t from = (size_t)atoi(arg1), end = (size_t)atoi(arg2);
    /* The middle of three: its neighbours stay live, so no layer merges it into a larger block. */
    unsigned char *before = malloc(64), *p = malloc(64), *after = malloc(64);
    memset(p, 0x11, 64);
    /* The read after free is the test's point: through an address the compiler does not track. */
    volatile uintptr_t addr = (uintptr_t)p;
    free(p);
    const volatile unsigned char *v = (const volatile unsigned char *)addr;
    size_t bad = end;
    unsigned seen = 0;
    for (size_t i = from; i < end && bad == end; i++)
        if ((seen = v[i]) != 0x5a)
            bad = i;
    CHECKF(bad == end, "byte %zu of a freed 64-byte block is %#x, not 0x5a", bad, seen);
    free(before);
    free(after);
}

static void zero(void)
{
    for (unsigned k = 0; k < NSIZES; k++)
        for (int round = 0; round < 2; round++) {
            unsigned char *p = malloc(sizes[k]);
            size_t u = malloc_usable_size(p);
            CHECKF(first_not(p, 0, u, 0) == u, "malloc(%zu), round %d: byte %zu is not zero", sizes[k], round,
                   first_not(p, 0, u, 0));
            memset(p, 0xff, u);
            free(p);
        }
    unsigned char *p = malloc(100);
    memset(p, 0xff, 100);
    p = realloc(p, 5000);
    size_t u = malloc_usable_size(p);
    CHECKF(first_not(p, 100, u, 0) == u, "realloc: byte %zu past the old 100 is not zero", first_not(p, 100, u, 0));
    free(p);
}

static int release_threads(void)
{
    int found = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(name, sizeof name, f) && strncmp(name, "sunmao-release", 14) == 0)
                found++;
            fclose(f);
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void release_thread(void)
{
    int want = atoi(arg1);
    for (int round = 0; round < 4; round++) {
        void *p[16];
        for (int i = 0; i < 16; i++) {
            p[i] = malloc(i % 2 ? (size_t)4 << 20 : (size_t)200 << 10);
            memset(p[i], 1, 4096);
        }
        for (int i = 0; i < 16; i++)
            free(p[i]);
        usleep(50 * 1000);
    }
    int n = release_threads();
    CHECKF(want ? n == 1 : n == 0, "%d threads named sunmao-release, expected %d", n, want);
}

static long rss_pages(void)
{
    long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void rss_drop(void)
{
    long limit = atol(arg1), page = sysconf(_SC_PAGESIZE);
    int want_drop = atoi(arg2);
    enum { N = 16 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = malloc((size_t)4 << 20);
        memset(p[i], 7, (size_t)4 << 20);
    }
    long peak = rss_pages();
    for (int i = 0; i < N; i++)
        free(p[i]);
    uint64_t start = now_ms();
    long drop = 0;
    while (now_ms() - start < (uint64_t)limit) {
        drop = (peak - rss_pages()) * page;
        if (drop >= (48l << 20))
            break;
        usleep(10 * 1000);
    }
    if (want_drop)
        CHECKF(drop >= (48l << 20), "RSS fell by %ld KiB in %ld ms, not 48 MiB", drop >> 10, limit);
    else
        CHECKF(drop < (16l << 20), "RSS fell by %ld KiB within %ld ms", drop >> 10, limit);
}

static void thp(void)
{
    char *p = malloc((size_t)8 << 20);
    memset(p, 1, (size_t)8 << 20);
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, found = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            char flag[8];
            snprintf(flag, sizeof flag, " %s", arg1);
            found = strstr(line, flag) != NULL;
            CHECKF(found, "the block's mapping has %s", line);
            break;
        }
    }
    if (f)
        fclose(f);
    free(p);
}

static void guarded(void)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    long want = strtol(arg1, NULL, 10), n = 0;
    for (int i = 0; i < 16; i++) {
        unsigned char *p = malloc(48);
        CHECK(p != NULL);
        memset(p, 0x6b, 48);
        unsigned char *end = p + 48; /* one past the block, on purpose: hidden from the compiler */
        __asm__("" : "+r"(end));
        errno = 0;
        if (write(fd[1], end, 1) < 0 && errno == EFAULT)
            n++;
        else {
            char c;
            CHECK(read(fd[0], &c, 1) == 1);
        }
        CHECK(first_not(p, 0, 48, 0x6b) == 48);
        free(p);
    }
    CHECKF(n == want, "%ld of 16 blocks end against an inaccessible page, expected %ld", n, want);
    close(fd[0]);
    close(fd[1]);
}

int main(int argc, char **argv)
{
    check_begin("conf_env");
    if (argc < 2) {
        fprintf(stderr, "usage: conf_env CASE [ARGS]\n");
        return 2;
    }
    arg1 = argc > 2 ? argv[2] : "";
    arg2 = argc > 3 ? argv[3] : "";
    static const struct { const char *name; void (*fn)(void); } cases[] = {
        { "pattern", pattern }, { "junk_alloc", junk_alloc }, { "junk_free", junk_free },
        { "zero", zero }, { "release_thread", release_thread }, { "rss_drop", rss_drop }, { "thp", thp },
        { "guarded", guarded },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            check_run_case(cases[i].name, cases[i].fn);
            return check_end();
        }
    fprintf(stderr, "conf_env: unknown case %s\n", argv[1]);
    return 2;
}
