/* The program tests/api/prof.sh profiles (built there with -g -O0 -fno-omit-frame-pointer, so the
 * readers see every frame): a known leak in leak_here (N blocks of 4 KiB never freed) between noise
 * that is freed. Modes:
 *   leak [N]    the leak, then exit
 *   clean [N]   the same blocks, all freed before exit: no leak may be reported
 *   ctl PATH    the leak, then prof.dump through sunmao_mallctl into PATH (found with dlsym: the
 *               library under test exports it); prints "# mallctl rc=R"
 *   api         the malloc API on sampled blocks (run with lg_prof_sample:0, every request
 *               sampled): aligned requests, realloc in and out of slots, calloc, usable size, sized
 *               free; prints ok / not ok lines */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep[100000];

__attribute__((noinline)) void leak_here(int n)
{
    for (int i = 0; i < n; i++) {
        keep[i] = malloc(4096);
        memset(keep[i], 1, 64);
    }
}

__attribute__((noinline)) void noise(void)
{
    for (int i = 0; i < 100000; i++)
        free(malloc(16 + (size_t)(i % 500)));
    for (int i = 0; i < 1000; i++)
        free(malloc(100000));
}

static int failed;
static void check(int ok, const char *name)
{
    printf("%s prof_leak: %s\n", ok ? "ok" : "not ok", name);
    failed |= !ok;
}

static void api(void)
{
    int ok = 1;
    for (size_t a = 16; a <= ((size_t)1 << 20); a <<= 1) {
        void *p = NULL;
        if (posix_memalign(&p, a, 100 + a / 2) != 0 || ((uintptr_t)p & (a - 1)))
            ok = 0;
        else
            memset(p, 7, 100 + a / 2), free(p);
    }
    check(ok, "aligned");
    ok = 1;
    char *s = malloc(10);
    for (size_t n = 10; n < (1u << 22) && s; n = n * 3 / 2 + 1) {
        s[n - 1] = (char)n;
        size_t m = n * 3 / 2 + 1;
        char *t = realloc(s, m);
        if (!t || t[n - 1] != (char)n)
            ok = 0;
        s = t;
    }
    char *t = realloc(s, 5); /* shrink */
    ok &= t != NULL;
    free(t);
    check(ok, "realloc");
    ok = 1;
    for (int i = 0; i < 200; i++) {
        size_t n = 1 + (size_t)i * 997;
        unsigned char *c = calloc(1, n);
        for (size_t j = 0; c && j < n; j++)
            ok &= c[j] == 0;
        ok &= c && malloc_usable_size(c) >= n;
        if (c)
            memset(c, 0xff, n);
        free(c);
    }
    check(ok, "calloc_usable");
    void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
    for (int i = 0; i < 100; i++) {
        void *p = malloc(64);
        if (fs)
            fs(p, 64);
        else
            free(p);
    }
    check(1, "sized_free");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "leak";
    int n = argc > 2 && strcmp(mode, "ctl") != 0 ? atoi(argv[2]) : 20000;
    if (strcmp(mode, "api") == 0) {
        api();
        return failed;
    }
    noise();
    leak_here(n);
    noise();
    if (strcmp(mode, "clean") == 0)
        for (int i = 0; i < n; i++)
            free(keep[i]);
    if (strcmp(mode, "ctl") == 0) {
        int (*ctl)(const char *, void *, size_t *, void *, size_t) =
            (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "sunmao_mallctl");
        const char *path = argv[2];
        printf("# mallctl rc=%d\n", ctl ? ctl("prof.dump", NULL, NULL, &path, sizeof path) : -1);
    }
    return 0;
}
