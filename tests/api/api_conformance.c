/* malloc(3) API conformance, one case per behaviour. Runs with whatever malloc the process has:
 * glibc's (no preload, the reference), an instance under LD_PRELOAD, or an instance linked in.
 *
 * Where the C standard / POSIX leave a behaviour to the implementation, the program accepts every
 * conforming answer and prints what it saw as `# observed <key>=<value>`; tests/api/api.sh runs
 * the program once without preload (glibc) and checks the instances observe the same values
 * (realloc(p, 0) must behave as glibc's: free p and return NULL).
 *
 * Built with -DSM_TEST_PREFIX=sm_<inst>_ and linked with libsm_<inst>.a, it tests the prefixed API
 * (sm_<inst>_malloc, ...) instead; tests/api/api.sh builds that variant itself.
 *
 * If SM_EXPECT_MALLOC_FROM=<path of lib<inst>.so> is set, the case preload_active checks that
 * malloc & co. really resolve to that library (so we are not silently testing glibc).
 *
 * Every allocator entry point is called through a volatile function pointer: compilers know the
 * malloc family and may otherwise fold or elide calls (e.g. treat malloc(0) as non-NULL). */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sunmao/core/compiler.h>

#include "tests/support/check.h"

#ifdef SM_TEST_PREFIX /* linked against libsm_<inst>.a: test the prefixed API */
#include <sunmao/sockets/custom_api.h>
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define ALLOC(name) SM_CAT(SM_TEST_PREFIX, name)
#define PROGRAM     "api_conformance_linked"
#else
#define ALLOC(name) name
#define PROGRAM     "api_conformance"
#endif

static void *(*volatile f_malloc)(size_t) = ALLOC(malloc);
static void *(*volatile f_calloc)(size_t, size_t) = ALLOC(calloc);
static void *(*volatile f_realloc)(void *, size_t) = ALLOC(realloc);
static void *(*volatile f_reallocarray)(void *, size_t, size_t) = ALLOC(reallocarray);
static void (*volatile f_free)(void *) = ALLOC(free);
static int (*volatile f_posix_memalign)(void **, size_t, size_t) = ALLOC(posix_memalign);
static void *(*volatile f_aligned_alloc)(size_t, size_t) = ALLOC(aligned_alloc);
static void *(*volatile f_memalign)(size_t, size_t) = ALLOC(memalign);
static void *(*volatile f_valloc)(size_t) = ALLOC(valloc);
static void *(*volatile f_pvalloc)(size_t) = ALLOC(pvalloc);
static size_t (*volatile f_usable)(void *) = ALLOC(malloc_usable_size);

#define MIN_ALIGN 16
#define KiB ((size_t)1024)
#define MiB (KiB * KiB)

static int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }
static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Patterns for blocks that move (realloc): keyed by a seed only, not by the address. */
static unsigned char seed_byte(size_t i, unsigned seed)
{
    size_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed * 0x85ebca6bu;
    return (unsigned char)(x ^ (x >> 29) ^ (x >> 47));
}
static void seed_fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = seed_byte(i, seed);
}
static size_t seed_mismatch(const unsigned char *p, size_t n, unsigned seed) /* index+1 or 0 */
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != seed_byte(i, seed))
            return i + 1;
    return 0;
}
static int all_bytes(const void *p, size_t n, unsigned char v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

/* Huge requests that no allocator can satisfy on a 64-bit (or 32-bit) address space. */
static const size_t huge_sizes[] = { SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4096, SIZE_MAX / 2, SIZE_MAX / 2 + 1,
                                     (size_t)PTRDIFF_MAX + 1 };
#define NHUGE (sizeof huge_sizes / sizeof huge_sizes[0])

static void preload_active(void)
{
    const char *want = getenv("SM_EXPECT_MALLOC_FROM");
    static const char *const names[] = { "malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc",
                                         "memalign", "malloc_usable_size" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *sym = dlsym(RTLD_DEFAULT, names[i]);
        Dl_info info;
        CHECKF(sym && dladdr(sym, &info) && info.dli_fname, "%s: cannot locate the symbol", names[i]);
        if (!sym || !dladdr(sym, &info) || !info.dli_fname)
            return;
        const char *base = strrchr(want, '/') ? strrchr(want, '/') + 1 : want;
        CHECKF(strstr(info.dli_fname, base) != NULL, "%s resolves to %s, not %s", names[i], info.dli_fname, want);
    }
}

/* Every size 0..4096 at once (all live, so no two may overlap): aligned to 16, writable,
 * contents intact after all of them were written. */
static void malloc_alignment_small(void)
{
    enum { N = 4097 };
    unsigned char **p = calloc(N, sizeof *p);
    CHECK(p != NULL);
    if (!p)
        return;
    for (size_t n = 0; n < N; n++) {
        p[n] = f_malloc(n);
        CHECKF(p[n] != NULL, "malloc(%zu) = NULL", n);
        CHECKF(!p[n] || aligned(p[n], MIN_ALIGN), "malloc(%zu) = %p not %d-aligned", n, (void *)p[n], MIN_ALIGN);
        if (p[n])
            check_fill(p[n], n, (unsigned)n);
    }
    for (size_t n = 0; n < N; n++)
        CHECKF(!p[n] || check_verify(p[n], n, (unsigned)n), "block malloc(%zu) = %p overwritten (overlap?)", n,
               (void *)p[n]);
    for (size_t n = 0; n < N; n++)
        f_free(p[n]);
    free(p);
}

/* Powers of two 1 B .. 64 MiB (and +-1 around them): aligned to 16, first/last bytes writable. */
static void malloc_alignment_pow2(void)
{
    for (size_t n = 1; n <= 64 * MiB; n <<= 1) {
        for (int d = -1; d <= 1; d++) {
            size_t sz = n + (size_t)(ptrdiff_t)d;
            if (sz == 0)
                continue;
            unsigned char *p = f_malloc(sz);
            CHECKF(p != NULL, "malloc(%zu) = NULL", sz);
            if (!p)
                continue;
            CHECKF(aligned(p, MIN_ALIGN), "malloc(%zu) = %p not %d-aligned", sz, (void *)p, MIN_ALIGN);
            size_t head = sz < 4096 ? sz : 4096;
            check_fill(p, head, 7);
            check_fill(p + sz - head, head, 8);
            CHECKF(check_verify(p + sz - head, head, 8), "malloc(%zu) tail not writable", sz);
            f_free(p);
        }
    }
}

/* malloc(0): non-NULL (glibc; the instances must agree), distinct, freeable; also free(NULL). */
static void malloc_zero_unique(void)
{
    enum { N = 64 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = f_malloc(0);
        CHECKF(p[i] != NULL, "malloc(0) #%d = NULL", i);
        CHECKF(!p[i] || aligned(p[i], MIN_ALIGN), "malloc(0) = %p misaligned", p[i]);
        for (int j = 0; j < i; j++)
            CHECKF(!p[i] || p[i] != p[j], "malloc(0) returned %p twice", p[i]);
    }
    for (int i = 0; i < N; i++)
        f_free(p[i]);
    /* and they really were freed: the allocator keeps working */
    void *q = f_malloc(0);
    CHECK(q != NULL);
    f_free(q);
}

static void malloc_huge_enomem(void)
{
    for (size_t i = 0; i < NHUGE; i++) {
        errno = 0;
        void *p = f_malloc(huge_sizes[i]);
        int e = errno;
        CHECKF(p == NULL, "malloc(%zu) = %p, expected NULL", huge_sizes[i], p);
        CHECKF(e == ENOMEM, "malloc(%zu): errno %d, expected ENOMEM", huge_sizes[i], e);
        if (p)
            f_free(p);
    }
}

static const size_t calloc_sizes[] = { 1, 7, 16, 24, 100, 255, 512, 1000, 4095, 4096, 4097, 10000, 65536, 100000,
                                       131072, 262145, 1000000, 4 * MiB + 3, 16 * MiB };
#define NCALLOC (sizeof calloc_sizes / sizeof calloc_sizes[0])

static void calloc_zeroes(void)
{
    for (size_t i = 0; i < NCALLOC; i++) {
        size_t n = calloc_sizes[i];
        unsigned char *p = f_calloc(1, n);
        CHECKF(p != NULL, "calloc(1, %zu) = NULL", n);
        if (!p)
            continue;
        CHECKF(aligned(p, MIN_ALIGN), "calloc(1, %zu) = %p misaligned", n, (void *)p);
        CHECKF(all_bytes(p, n, 0), "calloc(1, %zu) not zeroed", n);
        f_free(p);
        p = f_calloc(n, 3);
        CHECKF(p && all_bytes(p, n * 3, 0), "calloc(%zu, 3) NULL or not zeroed", n);
        f_free(p);
    }
    void *z = f_calloc(0, 0);
    CHECK(z != NULL); /* glibc: like malloc(0) */
    f_free(z);
}

/* Dirty memory: malloc, fill 0xff, free, calloc the same size (most allocators hand the same
 * block back) -> must be zeroes. Several blocks at once, so reuse happens from free lists too. */
static void calloc_zeroes_reused(void)
{
    enum { K = 8 };
    for (size_t i = 0; i < NCALLOC; i++) {
        size_t n = calloc_sizes[i];
        for (int round = 0; round < 3; round++) {
            void *p[K];
            for (int k = 0; k < K; k++) {
                p[k] = f_malloc(n);
                CHECKF(p[k] != NULL, "malloc(%zu) = NULL", n);
                if (p[k])
                    memset(p[k], 0xff, n);
            }
            for (int k = 0; k < K; k++)
                f_free(p[k]);
            for (int k = 0; k < K; k++) {
                p[k] = f_calloc(1, n);
                CHECKF(p[k] != NULL, "calloc(1, %zu) = NULL", n);
                CHECKF(!p[k] || all_bytes(p[k], n, 0), "calloc(1, %zu) = %p after a dirty free: not zeroed", n, p[k]);
                if (p[k])
                    memset(p[k], 0xff, n);
            }
            for (int k = 0; k < K; k++)
                f_free(p[k]);
        }
    }
}

static void calloc_overflow(void)
{
    static const size_t pairs[][2] = {
        { SIZE_MAX, SIZE_MAX }, { SIZE_MAX / 2 + 2, 2 }, { 2, SIZE_MAX / 2 + 2 }, { SIZE_MAX, 2 },
        { (size_t)1 << (sizeof(size_t) * 4), ((size_t)1 << (sizeof(size_t) * 4)) + 1 }, /* 2^32 * (2^32+1) */
        { SIZE_MAX / 16 + 1, 16 },
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        errno = 0;
        void *p = f_calloc(pairs[i][0], pairs[i][1]);
        int e = errno;
        CHECKF(p == NULL, "calloc(%zu, %zu) = %p, expected NULL", pairs[i][0], pairs[i][1], p);
        CHECKF(e == ENOMEM, "calloc(%zu, %zu): errno %d, expected ENOMEM", pairs[i][0], pairs[i][1], e);
        if (p)
            f_free(p);
    }
    /* not overflowing but huge */
    errno = 0;
    void *p = f_calloc(1, SIZE_MAX / 2);
    CHECKF(p == NULL && errno == ENOMEM, "calloc(1, SIZE_MAX/2) = %p errno %d", p, errno);
}

static void realloc_null_is_malloc(void)
{
    static const size_t sizes[] = { 0, 1, 17, 1000, 70000, 3 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = f_realloc(NULL, sizes[i]);
        CHECKF(p != NULL, "realloc(NULL, %zu) = NULL", sizes[i]);
        if (!p)
            continue;
        CHECKF(aligned(p, MIN_ALIGN), "realloc(NULL, %zu) = %p misaligned", sizes[i], (void *)p);
        CHECKF(f_usable(p) >= sizes[i], "usable %zu < %zu", f_usable(p), sizes[i]);
        seed_fill(p, sizes[i], 3);
        CHECK(seed_mismatch(p, sizes[i], 3) == 0);
        f_free(p);
    }
}

/* Grow a block step by step from 1 B to 40 MiB; the whole old contents must move along. From 4 MiB
 * on, a block allocated after each step tends to take the pages after it, so the large steps move
 * the block (a copy, or its pages moved by the stack: capability MOVE) more often than not. */
static void realloc_grow_preserves(void)
{
    size_t n = 1, nblockers = 0;
    void *blockers[16];
    unsigned char *p = f_malloc(n);
    CHECK(p != NULL);
    if (!p)
        return;
    seed_fill(p, n, 11);
    while (n < 40 * MiB) {
        if (n >= 4 * MiB && nblockers < sizeof blockers / sizeof *blockers)
            blockers[nblockers++] = f_malloc(MiB);
        size_t m = n < 64 ? n + 1 : n + n / 3 + 5;
        unsigned char *q = f_realloc(p, m);
        CHECKF(q != NULL, "realloc(%p, %zu) = NULL", (void *)p, m);
        if (!q)
            break;
        CHECKF(aligned(q, MIN_ALIGN), "realloc -> %p misaligned", (void *)q);
        size_t bad = seed_mismatch(q, n, 11);
        CHECKF(bad == 0, "realloc %zu -> %zu: byte %zu of the old contents lost (%p -> %p)", n, m, bad - 1, (void *)p,
               (void *)q);
        for (size_t i = n; i < m; i++) /* continue the seed-11 pattern over the new part */
            q[i] = seed_byte(i, 11);
        p = q, n = m;
    }
    f_free(p);
    for (size_t i = 0; i < nblockers; i++)
        f_free(blockers[i]);
}

static void realloc_shrink_preserves(void)
{
    size_t n = 8 * MiB + 123;
    unsigned char *p = f_malloc(n);
    CHECK(p != NULL);
    if (!p)
        return;
    seed_fill(p, n, 12);
    while (n > 1) {
        size_t m = n > 64 ? n / 2 + 3 : n - 1;
        unsigned char *q = f_realloc(p, m);
        CHECKF(q != NULL, "realloc(%p, %zu) = NULL", (void *)p, m);
        if (!q)
            break;
        CHECKF(aligned(q, MIN_ALIGN), "realloc -> %p misaligned", (void *)q);
        size_t bad = seed_mismatch(q, m, 12);
        CHECKF(bad == 0, "realloc %zu -> %zu: byte %zu lost (%p -> %p)", n, m, bad - 1, (void *)p, (void *)q);
        CHECKF(f_usable(q) >= m, "usable %zu < %zu after shrink", f_usable(q), m);
        p = q, n = m;
    }
    f_free(p);
    /* shrinking in place must not hand the tail out while the head is live */
    unsigned char *a = f_malloc(100000);
    CHECK(a != NULL);
    if (!a)
        return;
    seed_fill(a, 100000, 13);
    a = f_realloc(a, 1000);
    CHECK(a != NULL);
    if (!a)
        return;
    unsigned char *b = f_malloc(50000);
    CHECK(b != NULL);
    if (b)
        memset(b, 0xee, 50000);
    CHECK(seed_mismatch(a, 1000, 13) == 0);
    f_free(b);
    f_free(a);
}

/* realloc(p, 0): glibc frees p and returns NULL. C17 makes it implementation-defined, C23 UB;
 * we require glibc's behaviour (api.sh compares the observed value with glibc's run). */
static void realloc_zero(void)
{
    int nulls = 0, nonnull = 0;
    for (int i = 0; i < 200; i++) {
        void *p = f_malloc((size_t)(i * 37 % 3000) + 1);
        CHECK(p != NULL);
        errno = 0;
        void *q = f_realloc(p, 0);
        if (q == NULL) {
            nulls++;
        } else {
            nonnull++;
            CHECKF(aligned(q, MIN_ALIGN), "realloc(p, 0) = %p misaligned", q);
            f_free(q);
        }
    }
    CHECKF(nulls == 0 || nonnull == 0, "realloc(p, 0) inconsistent: %d NULL, %d non-NULL", nulls, nonnull);
    printf("# observed realloc0=%s\n", nonnull ? "nonnull" : "null");
    /* realloc(NULL, 0) is malloc(0) */
    void *z = f_realloc(NULL, 0);
    CHECKF(z != NULL, "realloc(NULL, 0) = NULL");
    f_free(z);
}

static void realloc_huge_keeps_block(void)
{
    static const size_t sizes[] = { 1, 500, 100000, 2 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = f_malloc(n);
        CHECK(p != NULL);
        if (!p)
            continue;
        seed_fill(p, n, 21);
        for (size_t h = 0; h < NHUGE; h++) {
            errno = 0;
            void *q = f_realloc(p, huge_sizes[h]);
            int e = errno;
            CHECKF(q == NULL, "realloc(%zu-byte block, %zu) = %p", n, huge_sizes[h], q);
            CHECKF(e == ENOMEM, "realloc(.., %zu): errno %d, expected ENOMEM", huge_sizes[h], e);
            if (q) {
                f_free(q);
                p = NULL;
                break;
            }
            CHECKF(seed_mismatch(p, n, 21) == 0, "failed realloc(.., %zu) damaged the old block", huge_sizes[h]);
        }
        if (!p)
            continue;
        /* the old block is still live and usable */
        unsigned char *q = f_realloc(p, n * 2);
        CHECK(q != NULL);
        CHECK(!q || seed_mismatch(q, n, 21) == 0);
        f_free(q);
    }
}

static void reallocarray_overflow(void)
{
    errno = 0;
    void *p = f_reallocarray(NULL, SIZE_MAX / 2, 3);
    CHECKF(p == NULL && errno == ENOMEM, "reallocarray(NULL, SIZE_MAX/2, 3) = %p errno %d", p, errno);
    unsigned char *a = f_reallocarray(NULL, 100, 8);
    CHECK(a != NULL);
    if (!a)
        return;
    seed_fill(a, 800, 31);
    errno = 0;
    p = f_reallocarray(a, (size_t)1 << (sizeof(size_t) * 4), ((size_t)1 << (sizeof(size_t) * 4)) + 1);
    CHECKF(p == NULL && errno == ENOMEM, "reallocarray(a, 2^32, 2^32+1) = %p errno %d", p, errno);
    CHECK(seed_mismatch(a, 800, 31) == 0);
    unsigned char *b = f_reallocarray(a, 300, 8);
    CHECK(b != NULL);
    CHECK(!b || seed_mismatch(b, 800, 31) == 0);
    f_free(b ? b : a);
}

static void posix_memalign_ok(void)
{
    for (size_t al = sizeof(void *); al <= MiB; al <<= 1) {
        const size_t sizes[] = { 1, al - 1, al, al + 1, 3 * al + 5, 100000, 0 };
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            void *p = (void *)0x1;
            errno = 4242;
            int r = f_posix_memalign(&p, al, n);
            int e = errno;
            CHECKF(r == 0, "posix_memalign(align %zu, %zu) = %d", al, n, r);
            CHECKF(e == 4242, "posix_memalign(align %zu, %zu) changed errno to %d on success", al, n, e);
            if (r != 0)
                continue;
            CHECKF(p != NULL && aligned(p, al), "posix_memalign(align %zu, %zu) -> %p", al, n, p);
            CHECKF(f_usable(p) >= n, "usable %zu < %zu", f_usable(p), n);
            check_fill(p, n, 41);
            CHECK(check_verify(p, n, 41));
            f_free(p);
        }
    }
}

static void posix_memalign_einval(void)
{
    static const size_t bad[] = { 0, 1, 2, 4, sizeof(void *) + 4, 3 * sizeof(void *), 24, 48, 96, 4096 + 8,
                                  SIZE_MAX, (SIZE_MAX / 2) + 2 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i] >= sizeof(void *) && (bad[i] & (bad[i] - 1)) == 0)
            continue; /* a valid alignment on this platform */
        void *p = (void *)0x1;
        errno = 4242;
        int r = f_posix_memalign(&p, bad[i], 64);
        int e = errno;
        CHECKF(r == EINVAL, "posix_memalign(align %zu) = %d, expected EINVAL", bad[i], r);
        CHECKF(e == 4242, "posix_memalign(align %zu) set errno to %d (POSIX: returns the error)", bad[i], e);
        if (r == 0)
            f_free(p);
    }
}

static void posix_memalign_huge(void)
{
    static const size_t aligns[] = { 8, 16, 64, 4096, MiB };
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t h = 0; h < NHUGE; h++) {
            void *p = (void *)0x1;
            errno = 4242;
            int r = f_posix_memalign(&p, aligns[a], huge_sizes[h]);
            CHECKF(r == ENOMEM, "posix_memalign(align %zu, %zu) = %d, expected ENOMEM", aligns[a], huge_sizes[h], r);
            /* glibc's posix_memalign leaves errno alone? it sets it via the failed allocation;
             * POSIX only specifies the return value, so errno is not checked here. */
            if (r == 0)
                f_free(p);
        }
}

static void aligned_alloc_ok(void)
{
    for (size_t al = 1; al <= MiB; al <<= 1) {
        const size_t sizes[] = { al, 2 * al, 5 * al, al + 1, 1 };
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            void *p = f_aligned_alloc(al, n);
            CHECKF(p != NULL, "aligned_alloc(%zu, %zu) = NULL", al, n);
            if (!p)
                continue;
            CHECKF(aligned(p, al), "aligned_alloc(%zu, %zu) = %p misaligned", al, n, p);
            CHECKF(f_usable(p) >= n, "usable %zu < %zu", f_usable(p), n);
            check_fill(p, n, 51);
            CHECK(check_verify(p, n, 51));
            f_free(p);
        }
    }
}

/* aligned_alloc with an invalid alignment: C11 leaves it undefined, C17/glibc >= 2.38 fail with
 * EINVAL, glibc 2.36 treats it as memalign (rounds up to a power of two). Both are accepted: either
 * NULL + EINVAL, or a usable block aligned to the next power of two. */
static void aligned_alloc_bad_align(void)
{
    static const size_t bad[] = { 0, 3, 24, 48, 100, 4095 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        void *p = f_aligned_alloc(bad[i], 256);
        int e = errno;
        if (p == NULL) {
            CHECKF(e == EINVAL, "aligned_alloc(%zu, 256) = NULL with errno %d, expected EINVAL", bad[i], e);
            printf("# observed aligned_alloc_%zu=einval\n", bad[i]);
        } else {
            size_t want = 1;
            while (want < bad[i])
                want <<= 1;
            if (want < MIN_ALIGN)
                want = MIN_ALIGN;
            CHECKF(aligned(p, want), "aligned_alloc(%zu, 256) = %p not aligned to %zu", bad[i], p, want);
            CHECKF(f_usable(p) >= 256, "usable %zu", f_usable(p));
            check_fill(p, 256, 52);
            CHECK(check_verify(p, 256, 52));
            printf("# observed aligned_alloc_%zu=block\n", bad[i]);
            f_free(p);
        }
    }
    for (size_t h = 0; h < NHUGE; h++) {
        errno = 0;
        void *p = f_aligned_alloc(64, huge_sizes[h]);
        CHECKF(p == NULL && errno == ENOMEM, "aligned_alloc(64, %zu) = %p errno %d", huge_sizes[h], p, errno);
    }
}

static void memalign_ok(void)
{
    for (size_t al = 1; al <= 2 * MiB; al <<= 1) {
        const size_t sizes[] = { 1, al - 1 ? al - 1 : 1, al, 7 * al + 3 };
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = f_memalign(al, sizes[i]);
            CHECKF(p != NULL && aligned(p, al), "memalign(%zu, %zu) = %p", al, sizes[i], p);
            if (!p)
                continue;
            CHECKF(f_usable(p) >= sizes[i], "usable %zu < %zu", f_usable(p), sizes[i]);
            check_fill(p, sizes[i], 61);
            CHECK(check_verify(p, sizes[i], 61));
            f_free(p);
        }
    }
    errno = 0;
    void *p = f_memalign(64, SIZE_MAX / 2);
    CHECKF(p == NULL && errno == ENOMEM, "memalign(64, SIZE_MAX/2) = %p errno %d", p, errno);
    errno = 0; /* an alignment no block can have: too large a request, as glibc answers */
    p = f_memalign((size_t)1 << 63, 16);
    CHECKF(p == NULL && errno == ENOMEM, "memalign(2^63, 16) = %p errno %d (ENOMEM expected)", p, errno);
}

static void valloc_page_aligned(void)
{
    size_t pg = page_size();
    const size_t sizes[] = { 0, 1, 100, pg - 1, pg, pg + 1, 5 * pg + 17, 300000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = f_valloc(sizes[i]);
        CHECKF(p != NULL && aligned(p, pg), "valloc(%zu) = %p (page %zu)", sizes[i], p, pg);
        if (!p)
            continue;
        CHECKF(f_usable(p) >= sizes[i], "usable %zu < %zu", f_usable(p), sizes[i]);
        check_fill(p, sizes[i], 71);
        CHECK(check_verify(p, sizes[i], 71));
        f_free(p);
    }
    errno = 0;
    void *p = f_valloc(SIZE_MAX / 2);
    CHECKF(p == NULL && errno == ENOMEM, "valloc(SIZE_MAX/2) = %p errno %d", p, errno);
}

static void pvalloc_page_rounded(void)
{
    size_t pg = page_size();
    const size_t sizes[] = { 1, 100, pg - 1, pg, pg + 1, 5 * pg + 17, 300000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t rounded = (sizes[i] + pg - 1) / pg * pg;
        void *p = f_pvalloc(sizes[i]);
        CHECKF(p != NULL && aligned(p, pg), "pvalloc(%zu) = %p (page %zu)", sizes[i], p, pg);
        if (!p)
            continue;
        CHECKF(f_usable(p) >= rounded, "pvalloc(%zu): usable %zu < %zu (rounded to the page)", sizes[i], f_usable(p),
               rounded);
        check_fill(p, rounded, 72); /* the whole rounded size is ours */
        CHECK(check_verify(p, rounded, 72));
        f_free(p);
    }
    void *z = f_pvalloc(0);
    CHECK(z != NULL && aligned(z, pg));
    f_free(z);
    errno = 0;
    void *p = f_pvalloc(SIZE_MAX - 10);
    CHECKF(p == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX - 10) = %p errno %d", p, errno);
}

/* malloc_usable_size(p) >= request and the whole usable size is writable without harming
 * neighbours; malloc_usable_size(NULL) == 0. */
static void usable_size(void)
{
    CHECK(f_usable(NULL) == 0);
    enum { N = 600 };
    unsigned char *p[N];
    size_t us[N];
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)i * i * 7 % 70000 + (size_t)i;
        p[i] = f_malloc(n);
        CHECKF(p[i] != NULL, "malloc(%zu) = NULL", n);
        if (!p[i]) {
            us[i] = 0;
            continue;
        }
        us[i] = f_usable(p[i]);
        CHECKF(us[i] >= n, "malloc_usable_size(malloc(%zu)) = %zu", n, us[i]);
        CHECKF(us[i] <= 2 * n + 4096, "malloc_usable_size(malloc(%zu)) = %zu: implausibly large", n, us[i]);
        check_fill(p[i], us[i], 81);
    }
    for (int i = 0; i < N; i++)
        CHECKF(!p[i] || check_verify(p[i], us[i], 81), "block %p (usable %zu) overwritten by a neighbour",
               (void *)p[i], us[i]);
    for (int i = 0; i < N; i++)
        f_free(p[i]);
}

static void free_null_noop(void)
{
    errno = 777;
    for (int i = 0; i < 1000; i++)
        f_free(NULL);
    CHECKF(errno == 777, "free(NULL) changed errno to %d", errno);
    void *p = f_malloc(10);
    CHECK(p != NULL);
    f_free(p);
}

/* POSIX.1-2024 (and glibc since 2.33): free() does not change errno. */
static void free_preserves_errno(void)
{
    static const size_t sizes[] = { 8, 1000, 200000, 8 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = f_malloc(sizes[i]);
        CHECK(p != NULL);
        errno = 4321;
        f_free(p);
        CHECKF(errno == 4321, "free of a %zu-byte block changed errno to %d", sizes[i], errno);
    }
}

static void (*p_free_sized)(void *, size_t);
static void (*p_free_aligned_sized)(void *, size_t, size_t);

/* free_sized names the size of the last realloc, which may have shrunk a large block in place: the
 * allocator must not then treat the block as an object of that size's class if it holds less
 * (libsunmao put a TLSF block shrunk to 5000 bytes on its 5120-byte list and returned it for
 * malloc(5100)). Every block handed out after must hold what was asked. */
static size_t shrink_big, shrink_small;
static int shrink_full;
static void *free_sized_after_shrink_body(void *arg)
{
    (void)arg;
    f_free(f_malloc(16)); /* the thread's cache set up, so the sized free below reaches its lists */
    char *p = f_malloc(shrink_big);
    CHECK(p != NULL);
    char *q = f_realloc(p, shrink_small);
    CHECK(q != NULL);
    /* then taken to its whole usable size, which realloc may grant in place, and freed with that
     * size: a usable size that is no class size put the block on a larger class's list */
    size_t named = shrink_small;
    if (shrink_full) {
        named = f_usable(q);
        q = f_realloc(q, named);
        CHECK(q != NULL);
    }
    p_free_sized(q, named);
    if (shrink_full) { /* the class just above the size named, at once */
        char *r = f_malloc(named + 1);
        CHECK(r != NULL);
        CHECKF(f_usable(r) > named, "malloc(%zu) after free_sized(p, %zu) of a block kept at its usable size holds %zu bytes",
               named + 1, named, f_usable(r));
        f_free(r);
    }
    for (size_t want = shrink_small + 1; want < named + 1200; want += shrink_full ? 8 : 100) { /* its class, first */
        char *r = f_malloc(want);
        CHECK(r != NULL);
        CHECKF(f_usable(r) >= want, "malloc(%zu) after free_sized(realloc(malloc(%zu), %zu)) holds %zu bytes", want,
               shrink_big, shrink_small, f_usable(r));
        check_fill(r, want, 17);
        CHECK(check_verify(r, want, 17));
        f_free(r);
    }
    return NULL;
}
static void free_sized_after_shrink(void)
{
    static const size_t big[] = { 20000, 100000, 3u << 20 };
    static const size_t small[] = { 5000, 4000, 700, 9000 };
    for (size_t i = 0; i < sizeof big / sizeof *big; i++)
        for (size_t j = 0; j < sizeof small / sizeof *small; j++) {
            for (int full = 0; full < 2; full++) {
                shrink_big = big[i], shrink_small = small[j], shrink_full = full;
                pthread_t t; /* a fresh thread: a thread cache's lists as a new program's are */
                CHECK(pthread_create(&t, NULL, free_sized_after_shrink_body, NULL) == 0);
                pthread_join(t, NULL);
            }
        }
}

static void free_sized(void)
{
    for (size_t n = 0; n < 70000; n = n * 2 + 1) {
        void *p = f_malloc(n);
        CHECK(p != NULL);
        check_fill(p, n, 91);
        p_free_sized(p, n);
    }
    p_free_sized(NULL, 0);
    void *c = f_calloc(10, 10);
    CHECK(c != NULL);
    p_free_sized(c, 100);
    /* the allocator is still consistent: fresh blocks are distinct and intact */
    void *a = f_malloc(100), *b = f_malloc(100);
    CHECK(a && b && a != b);
    check_fill(a, 100, 1);
    check_fill(b, 100, 2);
    CHECK(check_verify(a, 100, 1) && check_verify(b, 100, 2));
    f_free(a);
    f_free(b);
}

static void free_aligned_sized(void)
{
    for (size_t al = 16; al <= 65536; al <<= 2)
        for (size_t n = al; n <= 8 * al; n += al) {
            void *p = f_aligned_alloc(al, n);
            CHECK(p != NULL && aligned(p, al));
            if (!p)
                continue;
            check_fill(p, n, 92);
            CHECK(check_verify(p, n, 92));
            p_free_aligned_sized(p, al, n);
        }
    p_free_aligned_sized(NULL, 64, 0);
}

#ifndef SM_TEST_PREFIX
/* glibc's internal names (__libc_malloc ..., and cfree of old binaries) are the same allocator as
 * malloc's: blocks cross between the two families both ways, contents intact, and under a preload
 * each name resolves to the instance's library. */
static void libc_internal_names(void)
{
    const char *want = getenv("SM_EXPECT_MALLOC_FROM");
    void *(*l_malloc)(size_t) = NULL, *(*l_calloc)(size_t, size_t) = NULL, *(*l_realloc)(void *, size_t) = NULL;
    void *(*l_memalign)(size_t, size_t) = NULL, *(*l_valloc)(size_t) = NULL, *(*l_pvalloc)(size_t) = NULL;
    void (*l_free)(void *) = NULL, (*l_cfree)(void *) = NULL;
    static const char *const names[] = { "__libc_malloc", "__libc_free",    "__libc_calloc", "__libc_realloc",
                                         "__libc_memalign", "__libc_valloc", "__libc_pvalloc", "cfree" };
    void **slots[] = { (void **)&l_malloc,   (void **)&l_free,   (void **)&l_calloc,  (void **)&l_realloc,
                       (void **)&l_memalign, (void **)&l_valloc, (void **)&l_pvalloc, (void **)&l_cfree };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *slots[i] = dlsym(RTLD_DEFAULT, names[i]);
        Dl_info info;
        if (want && *slots[i]) {
            const char *base = strrchr(want, '/') ? strrchr(want, '/') + 1 : want;
            CHECKF(dladdr(*slots[i], &info) && info.dli_fname && strstr(info.dli_fname, base),
                   "%s resolves to %s, not %s", names[i], info.dli_fname ? info.dli_fname : "?", want);
        }
        /* glibc's cfree is a compat symbol, which dlsym may not return: then there is none to test */
        CHECKF(*slots[i] || (i == 7 && !want), "%s: not found", names[i]);
    }
    if (!l_malloc || !l_free || !l_calloc || !l_realloc || !l_memalign || !l_valloc || !l_pvalloc)
        return;
    size_t page = page_size();
    for (size_t n = 1; n <= 70000; n = n * 3 + 5) {
        unsigned char *a = l_malloc(n), *b = f_malloc(n);
        CHECKF(a && b, "__libc_malloc/malloc(%zu) = %p, %p", n, (void *)a, (void *)b);
        if (!a || !b)
            return;
        seed_fill(a, n, 41);
        seed_fill(b, n, 42);
        a = f_realloc(a, 2 * n);  /* a __libc_malloc block through realloc */
        b = l_realloc(b, 2 * n);  /* a malloc block through __libc_realloc */
        CHECKF(a && b && !seed_mismatch(a, n, 41) && !seed_mismatch(b, n, 42), "contents lost across the families (%zu)", n);
        f_free(a);  /* and freed by the other family */
        l_free(b);
        unsigned char *c = l_calloc(n, 1);
        CHECKF(c && all_bytes(c, n, 0), "__libc_calloc(%zu, 1) not zeroed", n);
        f_free(c);
        void *m = l_memalign(256, n), *v = l_valloc(n), *pv = l_pvalloc(n);
        CHECKF(m && aligned(m, 256) && v && aligned(v, page) && pv && aligned(pv, page),
               "__libc_memalign/valloc/pvalloc(%zu): %p %p %p", n, m, v, pv);
        CHECKF(!pv || f_usable(pv) >= (n + page - 1) / page * page, "__libc_pvalloc(%zu) not rounded to pages", n);
        f_free(m);
        f_free(v);
        if (l_cfree)
            l_cfree(pv);
        else
            f_free(pv);
    }
}
#endif

int main(void)
{
    check_begin(PROGRAM);
    if (getenv("SM_EXPECT_MALLOC_FROM"))
        RUN_CASE(preload_active);
    RUN_CASE(malloc_alignment_small);
    RUN_CASE(malloc_alignment_pow2);
    RUN_CASE(malloc_zero_unique);
    RUN_CASE(malloc_huge_enomem);
    RUN_CASE(calloc_zeroes);
    RUN_CASE(calloc_zeroes_reused);
    RUN_CASE(calloc_overflow);
    RUN_CASE(realloc_null_is_malloc);
    RUN_CASE(realloc_grow_preserves);
    RUN_CASE(realloc_shrink_preserves);
    RUN_CASE(realloc_zero);
    RUN_CASE(realloc_huge_keeps_block);
    RUN_CASE(reallocarray_overflow);
    RUN_CASE(posix_memalign_ok);
    RUN_CASE(posix_memalign_einval);
    RUN_CASE(posix_memalign_huge);
    RUN_CASE(aligned_alloc_ok);
    RUN_CASE(aligned_alloc_bad_align);
    RUN_CASE(memalign_ok);
    RUN_CASE(valloc_page_aligned);
    RUN_CASE(pvalloc_page_rounded);
    RUN_CASE(usable_size);
    RUN_CASE(free_null_noop);
    RUN_CASE(free_preserves_errno);
#ifndef SM_TEST_PREFIX
    RUN_CASE(libc_internal_names);
#endif

#ifdef SM_TEST_PREFIX
    p_free_sized = ALLOC(free_sized);
    p_free_aligned_sized = ALLOC(free_aligned_sized);
#else
    *(void **)&p_free_sized = dlsym(RTLD_DEFAULT, "free_sized");
    *(void **)&p_free_aligned_sized = dlsym(RTLD_DEFAULT, "free_aligned_sized");
#endif
    if (p_free_sized) {
        RUN_CASE(free_sized);
        RUN_CASE(free_sized_after_shrink);
    } else
        check_skip("free_sized", "free_sized not provided by this malloc (C23; glibc 2.36 lacks it)");
    if (p_free_aligned_sized)
        RUN_CASE(free_aligned_sized);
    else
        check_skip("free_aligned_sized", "free_aligned_sized not provided by this malloc (C23; glibc 2.36 lacks it)");
    return check_end();
}
