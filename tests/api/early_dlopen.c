/* Allocation before main / after exit, and an allocator library loaded with dlopen.
 *
 *   early_dlopen          run it under LD_PRELOAD=lib<inst>.so: a constructor (priority 101, the
 *                         first one that user code can have) and a destructor allocate
 *     alloc_before_main   the constructor's malloc/calloc/realloc/posix_memalign/strdup results are
 *                         checked in main (non-NULL, aligned, zeroed, contents intact, freeable)
 *     alloc_after_main    (printed by the destructor) malloc/free/realloc still work at exit
 *   early_dlopen LIB      NOT preloaded: dlopen(LIB, RTLD_NOW | RTLD_LOCAL)
 *     dlopen_now_local    succeeds (no "cannot allocate memory in static TLS block"), and malloc,
 *                         free, calloc, realloc, malloc_usable_size, posix_memalign looked up in
 *                         the handle are the library's own
 *     dlopen_api_works    those functions work together: allocate, fill, usable size >= request,
 *                         calloc zeroes, realloc keeps contents, free
 *     dlopen_threads      threads that existed before the dlopen use the library's malloc/free,
 *                         freeing each other's blocks
 *     dlopen_cxx          the library's operator new/delete (if it has them) work with its
 *                         malloc_usable_size */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/check.h"

static void *(*volatile f_malloc)(size_t) = malloc;

/* For blocks that move (realloc): a pattern keyed by a seed only, not by the address. */
static unsigned char seq_byte(size_t i, unsigned seed) { return (unsigned char)((i * 131 + seed) ^ (i >> 9)); }
static void seq_fill(void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)p)[i] = seq_byte(i, seed);
}
static int seq_verify(const void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != seq_byte(i, seed))
            return 0;
    return 1;
}
static void (*volatile f_free)(void *) = free;

/* ---- before main ---------------------------------------------------------------------------- */
static struct {
    int ran;
    unsigned char *m[32];
    size_t mlen[32];
    int calloc_zero;
    unsigned char *c;
    unsigned char *r;
    size_t rlen;
    void *al;
    int al_ret;
    char *dup;
} early;

__attribute__((constructor(101))) static void early_ctor(void)
{
    early.ran = 1;
    for (int i = 0; i < 32; i++) {
        early.mlen[i] = (size_t)i * i * 61 + 1;
        early.m[i] = f_malloc(early.mlen[i]);
        if (early.m[i])
            check_fill(early.m[i], early.mlen[i], 17);
        if (i % 3 == 0) { /* some freed right away, still before main */
            f_free(early.m[i]);
            early.m[i] = NULL;
        }
    }
    early.c = calloc(123, 45);
    early.calloc_zero = 1;
    for (size_t i = 0; early.c && i < 123 * 45; i++)
        if (early.c[i])
            early.calloc_zero = 0;
    early.r = malloc(100);
    if (early.r) {
        seq_fill(early.r, 100, 18);
        unsigned char *r = realloc(early.r, 50000);
        if (r)
            early.r = r, early.rlen = 100;
        else
            early.rlen = 0;
    }
    early.al_ret = posix_memalign(&early.al, 4096, 10000);
    early.dup = strdup("allocated before main");
}

static void alloc_before_main(void)
{
    CHECK(early.ran);
    for (int i = 0; i < 32; i++) {
        if (i % 3 == 0)
            continue;
        CHECKF(early.m[i] != NULL, "malloc(%zu) before main = NULL", early.mlen[i]);
        if (!early.m[i])
            continue;
        CHECKF((uintptr_t)early.m[i] % 16 == 0, "malloc before main = %p misaligned", (void *)early.m[i]);
        CHECKF(malloc_usable_size(early.m[i]) >= early.mlen[i], "usable size %zu < %zu",
               malloc_usable_size(early.m[i]), early.mlen[i]);
        CHECKF(check_verify(early.m[i], early.mlen[i], 17), "block %p from before main corrupted", (void *)early.m[i]);
        f_free(early.m[i]);
    }
    CHECKF(early.c != NULL && early.calloc_zero, "calloc before main: %p, zeroed %d", (void *)early.c,
           early.calloc_zero);
    free(early.c);
    CHECKF(early.r && early.rlen == 100 && seq_verify(early.r, 100, 18), "realloc before main lost contents");
    free(early.r);
    CHECKF(early.al_ret == 0 && ((uintptr_t)early.al & 4095) == 0, "posix_memalign before main: %d %p", early.al_ret,
           early.al);
    free(early.al);
    CHECK(early.dup && strcmp(early.dup, "allocated before main") == 0);
    free(early.dup);
    /* the heap used before main keeps working */
    void *p = f_malloc(1000);
    CHECK(p != NULL);
    f_free(p);
}

static int check_at_exit;
__attribute__((destructor(101))) static void late_dtor(void)
{
    if (!check_at_exit)
        return;
    int ok = 1;
    for (int i = 0; i < 50 && ok; i++) {
        unsigned char *p = f_malloc((size_t)i * 300 + 1);
        if (!p) {
            ok = 0;
            break;
        }
        seq_fill(p, (size_t)i * 300 + 1, 19);
        unsigned char *q = realloc(p, (size_t)i * 600 + 2);
        if (!q || !seq_verify(q, (size_t)i * 300 + 1, 19))
            ok = 0;
        free(q ? q : p);
    }
    if (ok) {
        printf("ok %s: alloc_after_main\n", check_program);
    } else {
        printf("not ok %s: alloc_after_main: malloc/realloc failed in a destructor\n", check_program);
        _exit(1);
    }
}

/* ---- dlopen ------------------------------------------------------------------------------- */
static const char *lib_path;
static void *handle;
static void *(*l_malloc)(size_t);
static void (*l_free)(void *);
static void *(*l_calloc)(size_t, size_t);
static void *(*l_realloc)(void *, size_t);
static size_t (*l_usable)(void *);
static int (*l_posix_memalign)(void **, size_t, size_t);

/* threads that exist before dlopen */
#define NT 4
static pthread_barrier_t barrier;
static void *thread_blocks[NT][64];
static int thread_bad[NT];

static void *early_thread(void *arg)
{
    int me = (int)(intptr_t)arg;
    pthread_barrier_wait(&barrier); /* wait for the dlopen */
    if (!l_malloc || !l_free) {
        pthread_barrier_wait(&barrier);
        return NULL;
    }
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)(i + me) * 71 + 1;
        thread_blocks[me][i] = l_malloc(n);
        if (!thread_blocks[me][i])
            thread_bad[me]++;
        else
            check_fill(thread_blocks[me][i], n, (unsigned)(me * 100 + i));
    }
    pthread_barrier_wait(&barrier);
    /* free the next thread's blocks */
    int other = (me + 1) % NT;
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)(i + other) * 71 + 1;
        if (thread_blocks[other][i] && !check_verify(thread_blocks[other][i], n, (unsigned)(other * 100 + i)))
            thread_bad[me]++;
        l_free(thread_blocks[other][i]);
    }
    return NULL;
}

static int from_lib(void *sym)
{
    Dl_info info;
    const char *base = strrchr(lib_path, '/') ? strrchr(lib_path, '/') + 1 : lib_path;
    return sym && dladdr(sym, &info) && info.dli_fname && strstr(info.dli_fname, base);
}

static void dlopen_now_local(void)
{
    dlerror();
    handle = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    const char *err = handle ? NULL : dlerror();
    CHECKF(handle != NULL, "dlopen(%s): %s", lib_path, err ? err : "?");
    if (!handle)
        return;
    *(void **)&l_malloc = dlsym(handle, "malloc");
    *(void **)&l_free = dlsym(handle, "free");
    *(void **)&l_calloc = dlsym(handle, "calloc");
    *(void **)&l_realloc = dlsym(handle, "realloc");
    *(void **)&l_usable = dlsym(handle, "malloc_usable_size");
    *(void **)&l_posix_memalign = dlsym(handle, "posix_memalign");
    CHECKF(from_lib((void *)l_malloc), "malloc not found in %s", lib_path);
    CHECKF(from_lib((void *)l_free), "free not found in %s", lib_path);
    CHECKF(from_lib((void *)l_calloc), "calloc not found in %s", lib_path);
    CHECKF(from_lib((void *)l_realloc), "realloc not found in %s", lib_path);
    CHECKF(from_lib((void *)l_usable), "malloc_usable_size not found in %s", lib_path);
    CHECKF(from_lib((void *)l_posix_memalign), "posix_memalign not found in %s", lib_path);
    CHECKF((void *)l_malloc != (void *)f_malloc, "the handle's malloc is the process' malloc");
    if (!from_lib((void *)l_malloc) || !from_lib((void *)l_free) || !from_lib((void *)l_usable) ||
        !from_lib((void *)l_calloc) || !from_lib((void *)l_realloc) || !from_lib((void *)l_posix_memalign))
        l_malloc = NULL; /* the other cases skip their work and fail */
}

static void dlopen_api_works(void)
{
    CHECKF(l_malloc != NULL, "no usable handle");
    if (!l_malloc)
        return;
    enum { N = 300 };
    unsigned char *p[N];
    size_t n[N];
    for (int i = 0; i < N; i++) {
        n[i] = (size_t)i * i * 3 % 200000 + 1;
        p[i] = l_malloc(n[i]);
        CHECKF(p[i] != NULL, "malloc(%zu) = NULL", n[i]);
        if (!p[i])
            continue;
        CHECKF((uintptr_t)p[i] % 16 == 0, "malloc(%zu) = %p misaligned", n[i], (void *)p[i]);
        CHECKF(l_usable(p[i]) >= n[i], "malloc_usable_size = %zu < %zu", l_usable(p[i]), n[i]);
        check_fill(p[i], n[i], (unsigned)i);
    }
    for (int i = 0; i < N; i++) {
        CHECKF(!p[i] || check_verify(p[i], n[i], (unsigned)i), "block %p corrupted", (void *)p[i]);
        l_free(p[i]);
    }
    CHECK(l_usable(NULL) == 0);
    unsigned char *c = l_calloc(1000, 3);
    CHECK(c != NULL);
    for (int i = 0; c && i < 3000; i++)
        CHECKF(c[i] == 0, "calloc byte %d = %d", i, c[i]);
    if (c) {
        seq_fill(c, 3000, 5);
        unsigned char *r = l_realloc(c, 300000);
        CHECK(r != NULL && seq_verify(r, 3000, 5));
        l_free(r ? r : c);
    }
    void *al = NULL;
    CHECK(l_posix_memalign(&al, 8192, 100) == 0 && ((uintptr_t)al & 8191) == 0);
    l_free(al);
    errno = 0;
    CHECK(l_malloc(SIZE_MAX / 2) == NULL && errno == ENOMEM);
}

static pthread_t threads[NT];
static void dlopen_threads(void)
{
    pthread_barrier_wait(&barrier); /* release the threads: dlopen is done */
    pthread_barrier_wait(&barrier); /* they allocated */
    for (int i = 0; i < NT; i++)
        pthread_join(threads[i], NULL);
    CHECKF(l_malloc != NULL, "no usable handle");
    for (int i = 0; i < NT; i++)
        CHECKF(thread_bad[i] == 0, "thread %d: %d failed allocations or corrupted blocks", i, thread_bad[i]);
}

static void dlopen_cxx(void)
{
    void *(*op_new)(size_t) = NULL;
    void (*op_delete)(void *) = NULL;
    *(void **)&op_new = dlsym(handle, "_Znwm");
    *(void **)&op_delete = dlsym(handle, "_ZdlPv");
    CHECKF(from_lib((void *)op_new) && from_lib((void *)op_delete), "operator new/delete not exported by %s",
           lib_path);
    if (!l_malloc || !from_lib((void *)op_new) || !from_lib((void *)op_delete))
        return;
    for (size_t n = 1; n < 100000; n = n * 3 + 1) {
        void *p = op_new(n);
        CHECK(p != NULL && (uintptr_t)p % 16 == 0);
        CHECKF(l_usable(p) >= n, "the library's malloc_usable_size(operator new(%zu)) = %zu", n, l_usable(p));
        check_fill(p, n, 7);
        CHECK(check_verify(p, n, 7));
        op_delete(p);
    }
}

int main(int argc, char **argv)
{
    check_begin("early_dlopen");
    if (argc < 2) {
        RUN_CASE(alloc_before_main);
        check_at_exit = 1;
        return check_end();
    }
    lib_path = argv[1];
    pthread_barrier_init(&barrier, NULL, NT + 1);
    for (int i = 0; i < NT; i++)
        if (pthread_create(&threads[i], NULL, early_thread, (void *)(intptr_t)i) != 0) {
            printf("not ok %s: dlopen_threads: pthread_create failed\n", check_program);
            return 1;
        }
    RUN_CASE(dlopen_now_local);
    RUN_CASE(dlopen_api_works);
    RUN_CASE(dlopen_threads);
    RUN_CASE(dlopen_cxx);
    return check_end();
}
