/* Drives one prefixed allocator (libsm_<inst>.a, custom_socket: sm_<inst>_malloc, ...) under
 * ASan/UBSan, beside the sanitizer's own malloc: every block is filled with an address-dependent
 * pattern and verified before it is freed or resized, so overlapping blocks, lost realloc contents,
 * non-zeroed calloc memory and misaligned posix_memalign blocks are caught, and any wild access by
 * the allocator itself is caught by the sanitizers. Built and run by tests/build/sanitizers.sh:
 *   cc $SAN -DSM_TEST_PREFIX=sm_<inst>_ -DSM_TEST_NAME='"<inst>"' asan_prefixed.c libsm_<inst>.a
 * Cases are reported as `ok asan/libsm_<inst>: <case>` (tests/support/check.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sunmao/sockets/custom_api.h>
#include "tests/support/check.h"

#ifndef SM_TEST_PREFIX
#error "define SM_TEST_PREFIX (e.g. sm_tlsf_) and SM_TEST_NAME (e.g. \"tlsf\")"
#endif
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define A(fn) SM_CAT(SM_TEST_PREFIX, fn)

#define THREADS 4
#define SLOTS 256
#ifndef OPS
#define OPS 20000 /* valgrind.sh builds it with fewer */
#endif
#define EXCHANGE 64

/* xorshift: each thread has its own generator, seeded by its index. */
static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static size_t rnd_size(uint64_t *s)
{
    uint64_t r = rnd(s) % 1000;
    if (r < 700) return 1 + rnd(s) % 256;            /* small */
    if (r < 950) return 257 + rnd(s) % 8192;         /* medium */
    if (r < 995) return 8449 + rnd(s) % 131072;      /* large */
    return (1u << 20) + rnd(s) % (1u << 20);         /* huge */
}

static void malloc_free_patterns(void)
{
    void *p[64];
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)i * 37 + 1;
        p[i] = A(malloc)(n);
        CHECKF(p[i] != NULL, "malloc(%zu) returned NULL", n);
        if (!p[i]) return;
        CHECKF((uintptr_t)p[i] % 16 == 0, "malloc(%zu) = %p is not 16-byte aligned", n, p[i]);
        CHECKF(A(malloc_usable_size)(p[i]) >= n, "malloc_usable_size(%p) < %zu", p[i], n);
        check_fill(p[i], n, (unsigned)i);
    }
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)i * 37 + 1;
        CHECKF(check_verify(p[i], n, (unsigned)i), "block %d (%zu bytes) was overwritten", i, n);
        A(free)(p[i]);
    }
    A(free)(NULL);
    void *z = A(malloc)(0);
    A(free)(z);
}

static void calloc_zeroed(void)
{
    static const size_t sizes[] = { 1, 24, 100, 4096, 65536, 3u << 20 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        unsigned char *dirty = A(malloc)(n); /* leave garbage behind for calloc to reuse */
        CHECK(dirty != NULL);
        if (dirty) {
            memset(dirty, 0xA5, n);
            A(free)(dirty);
        }
        unsigned char *c = A(calloc)(1, n);
        CHECKF(c != NULL, "calloc(1, %zu) returned NULL", n);
        if (!c) continue;
        for (size_t i = 0; i < n; i++)
            if (c[i]) {
                CHECKF(0, "calloc(1, %zu): byte %zu is %#x", n, i, c[i]);
                break;
            }
        A(free)(c);
    }
    errno = 0;
    void *o = A(calloc)(SIZE_MAX / 2, 3);
    CHECKF(o == NULL && errno == ENOMEM, "calloc overflow returned %p errno %d", o, errno);
}

static void realloc_keeps_contents(void)
{
    size_t n = 10;
    unsigned char *p = A(realloc)(NULL, n);
    CHECK(p != NULL);
    if (!p) return;
    check_fill(p, n, 7);
    static const size_t to[] = { 100, 5000, 70000, 2u << 20, 300, 17, 1 };
    for (size_t k = 0; k < sizeof to / sizeof *to; k++) {
        size_t keep = n < to[k] ? n : to[k];
        uintptr_t old = (uintptr_t)p;
        unsigned char *q = A(realloc)(p, to[k]);
        CHECKF(q != NULL, "realloc(%zu -> %zu) returned NULL", n, to[k]);
        if (!q) { A(free)(p); return; }
        for (size_t i = 0; i < keep; i++)
            if (q[i] != check_pattern_byte((void *)old, i, 7)) {
                CHECKF(0, "realloc(%zu -> %zu) lost byte %zu", n, to[k], i);
                break;
            }
        p = q, n = to[k];
        check_fill(p, n, 7);
    }
    A(free)(p);
}

/* A block above every heap layer, freed, then a larger one: an instance that keeps freed large
 * blocks (decay_cache) grows the cached one, and where the page after it is taken (a page the test
 * maps there) it moves it with mremap. Every byte of the grown block must be writable and keep its
 * pattern (memcheck 3.19 took the grown part of a moved-and-grown mapping for unaddressable). */
static void large_block_grown_past_a_taken_page(void)
{
    for (size_t k = 0; k < 3; k++) {
        size_t n = ((size_t)3 << 20) + k * ((size_t)1 << 20) + 123, page = 4096;
        unsigned char *p = A(malloc)(n);
        CHECKF(p != NULL, "malloc(%zu) returned NULL", n);
        if (!p) return;
        uintptr_t end = ((uintptr_t)p + n + page - 1) & ~(uintptr_t)(page - 1);
        void *guard = mmap((void *)end, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        check_fill(p, n, 11 + (unsigned)k);
        A(free)(p);
        size_t m = n + ((size_t)1 << 20);
        unsigned char *q = A(malloc)(m);
        CHECKF(q != NULL, "malloc(%zu) returned NULL", m);
        if (q) {
            check_fill(q, m, 21 + (unsigned)k);
            CHECKF(check_verify(q, m, 21 + (unsigned)k), "grown block %zu of %zu bytes lost its pattern", k, m);
            A(free)(q);
        }
        if (guard != MAP_FAILED)
            munmap(guard, page);
    }
}

static void posix_memalign_aligned(void)
{
    for (size_t a = sizeof(void *); a <= 65536; a *= 2) {
        void *p = NULL;
        size_t n = a * 3 + 5;
        int rc = A(posix_memalign)(&p, a, n);
        CHECKF(rc == 0 && p != NULL, "posix_memalign(%zu, %zu) = %d", a, n, rc);
        if (rc) continue;
        CHECKF((uintptr_t)p % a == 0, "posix_memalign(%zu) gave %p", a, p);
        check_fill(p, n, 3);
        CHECK(check_verify(p, n, 3));
        A(free)(p);
    }
    void *p = (void *)1;
    CHECKF(A(posix_memalign)(&p, 24, 8) == EINVAL, "posix_memalign(24) did not fail with EINVAL");
}

/* Threads: random malloc/calloc/realloc/posix_memalign/free on private slots, plus blocks handed
 * through a shared exchange so that many are freed by a thread other than their allocator. */
struct slot { unsigned char *p; size_t n; unsigned seed; };
static _Atomic(struct slot *) exchange[EXCHANGE];
static atomic_int thread_failures;
static char thread_msg[256];

static void tfail(const char *what, const struct slot *s)
{
    if (atomic_fetch_add(&thread_failures, 1) == 0)
        snprintf(thread_msg, sizeof thread_msg, "%s (block %p, %zu bytes)", what, (void *)s->p, s->n);
}
static void release(struct slot *s)
{
    if (!s->p) return;
    if (!check_verify(s->p, s->n, s->seed)) tfail("block overwritten before free", s);
    A(free)(s->p);
    s->p = NULL;
}

static void *worker(void *arg)
{
    uint64_t r = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    struct slot slots[SLOTS] = { { 0, 0, 0 } };
    for (int op = 0; op < OPS && atomic_load(&thread_failures) == 0; op++) {
        struct slot *s = &slots[rnd(&r) % SLOTS];
        unsigned kind = (unsigned)(rnd(&r) % 10);
        if (s->p && kind < 4) { release(s); continue; }
        if (s->p && kind < 6) { /* realloc, contents must follow */
            size_t n = rnd_size(&r), keep = n < s->n ? n : s->n;
            if (!check_verify(s->p, s->n, s->seed)) { tfail("block overwritten before realloc", s); break; }
            uintptr_t old = (uintptr_t)s->p;
            unsigned char *q = A(realloc)(s->p, n);
            if (!q) { tfail("realloc returned NULL", s); break; }
            for (size_t i = 0; i < keep; i++)
                if (q[i] != check_pattern_byte((void *)old, i, s->seed)) { tfail("realloc lost contents", s); break; }
            s->p = q, s->n = n;
            check_fill(s->p, s->n, s->seed);
            continue;
        }
        if (s->p && kind < 8) { /* trade it with another thread's block */
            struct slot *mine = malloc(sizeof *mine); /* the sanitizer's malloc, not the one under test */
            if (!mine) continue;
            *mine = *s;
            s->p = NULL;
            struct slot *theirs = atomic_exchange(&exchange[rnd(&r) % EXCHANGE], mine);
            if (theirs) { release(theirs); free(theirs); }
            continue;
        }
        if (s->p) release(s);
        s->n = rnd_size(&r);
        s->seed = (unsigned)rnd(&r);
        switch (kind % 3) {
        case 0: s->p = A(malloc)(s->n); break;
        case 1:
            s->p = A(calloc)(1, s->n);
            if (s->p)
                for (size_t i = 0; i < s->n; i++)
                    if (s->p[i]) { tfail("calloc block not zeroed", s); break; }
            break;
        default: {
            size_t a = (size_t)16 << (rnd(&r) % 9);
            void *p = NULL;
            if (A(posix_memalign)(&p, a, s->n) == 0 && (uintptr_t)p % a) tfail("posix_memalign misaligned", s);
            s->p = p;
        }
        }
        if (!s->p) { tfail("allocation returned NULL", s); break; }
        check_fill(s->p, s->n, s->seed);
    }
    for (int i = 0; i < SLOTS; i++) release(&slots[i]);
    return NULL;
}

static void threads4_cross_free(void)
{
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < EXCHANGE; i++) {
        struct slot *s = atomic_exchange(&exchange[i], NULL);
        if (s) { release(s); free(s); }
    }
    CHECKF(atomic_load(&thread_failures) == 0, "%d failures, first: %s", atomic_load(&thread_failures), thread_msg);
}

int main(void)
{
    check_begin("asan/libsm_" SM_TEST_NAME);
    RUN_CASE(malloc_free_patterns);
    RUN_CASE(calloc_zeroed);
    RUN_CASE(realloc_keeps_contents);
    RUN_CASE(posix_memalign_aligned);
    RUN_CASE(large_block_grown_past_a_taken_page);
    RUN_CASE(threads4_cross_free);
    return check_end();
}
