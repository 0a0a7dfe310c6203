/* Differential fuzzer: an input is a program of allocator operations, run against one prefixed
 * allocator (sm_<inst>_*, custom_socket) and checked against a model of what must hold: which
 * blocks are live, their sizes and alignments, and their contents. Built by tests/fuzz/fuzz.sh:
 * with libFuzzer and ASan (clang -fsanitize=fuzzer,address), or, where libFuzzer is missing, with
 * the standalone driver at the end of this file (-DFUZZ_STANDALONE: the corpus, then random
 * programs for a given time).
 *
 * The program: each operation is an opcode byte, a slot byte and a size drawn from a heavy-tailed
 * distribution (most under 1 KiB, some up to 2 MiB, a few up to 64 MiB), over 64 slots. Every API
 * function is used: malloc, calloc, realloc (grow, shrink, to 0), reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc, free, free_sized, free_aligned_sized,
 * malloc_usable_size, malloc_trim; absurd requests (SIZE_MAX, SIZE_MAX / 2, a calloc product that
 * overflows, a non-power-of-two alignment) must fail with the documented errno. A block can be
 * handed to a second thread, which checks it and frees it (cross-thread frees). Opcodes 240..255
 * work on two first-class heaps (a tlsf one and a region one, sunmao_heap_*): malloc, aligned
 * malloc, realloc into a heap, sunmao_heap_free, reset (its blocks forgotten, the other heap's and
 * malloc's checked intact) and sunmao_heap_of, every block of each heap also freed, sized and
 * reallocated through the plain calls.
 * What is checked: a served block is aligned as asked, its usable size is at least the request,
 * calloc's is zero, realloc keeps the common prefix, and a block's contents (a pattern keyed by its
 * slot and generation) are intact when it is read, moved or freed: two live blocks that overlap,
 * or a block handed out while live, break a pattern. Any failure aborts with one line saying what. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/heap.h>
#include <sunmao/sockets/custom_api.h>

#ifndef SM_TEST_PREFIX
#error "define SM_TEST_PREFIX (e.g. sm_tlsf_)"
#endif
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define A(fn) SM_CAT(SM_TEST_PREFIX, fn)
/* Weak: an allocator without the framework's socket (wfslabm, the hand-written control) has no
 * heaps, and the heap opcodes do nothing there. */
__attribute__((weak)) sunmao_heap_t *A(sunmao_heap_create)(const char *spec);
__attribute__((weak)) void A(sunmao_heap_reset)(sunmao_heap_t *heap);
__attribute__((weak)) void *A(sunmao_heap_malloc)(sunmao_heap_t *heap, size_t size);
__attribute__((weak)) void *A(sunmao_heap_aligned_alloc)(sunmao_heap_t *heap, size_t align, size_t size);
__attribute__((weak)) void *A(sunmao_heap_realloc)(sunmao_heap_t *heap, void *ptr, size_t size);
__attribute__((weak)) void A(sunmao_heap_free)(sunmao_heap_t *heap, void *ptr);
__attribute__((weak)) sunmao_heap_t *A(sunmao_heap_of)(const void *ptr);

#define SLOTS 64
#define CHECKED_BYTES 4096 /* contents checked at each end of a block: whole blocks up to 8 KiB */

struct block {
    unsigned char *p;
    size_t size, align;
    uint32_t seed;
    int heap; /* 0: malloc's; k + 1: heaps[k]'s */
};
static sunmao_heap_t *heaps[2];
static struct block slot[SLOTS];
static uint32_t generation;

static void fail(const char *what, const struct block *b)
{
    fprintf(stderr, "fuzz_alloc: %s (block %p, size %zu, align %zu)\n", what, b ? (void *)b->p : NULL,
            b ? b->size : 0, b ? b->align : 0);
    abort();
}

static unsigned char pattern(size_t i, uint32_t seed)
{
    uint32_t x = (uint32_t)i * 0x9e3779b1u ^ seed;
    return (unsigned char)(x ^ x >> 13 ^ x >> 24);
}
static void fill(struct block *b)
{
    size_t n = b->size;
    if (n <= 2 * CHECKED_BYTES) {
        for (size_t i = 0; i < n; i++)
            b->p[i] = pattern(i, b->seed);
        return;
    }
    for (size_t i = 0; i < CHECKED_BYTES; i++) {
        b->p[i] = pattern(i, b->seed);
        b->p[n - 1 - i] = pattern(n - 1 - i, b->seed);
    }
}
/* The first `upto` bytes' checked part (all checked bytes when upto is the size). */
static bool intact(const struct block *b, size_t upto)
{
    size_t n = b->size < upto ? b->size : upto;
    for (size_t i = 0; i < n && i < CHECKED_BYTES; i++)
        if (b->p[i] != pattern(i, b->seed))
            return false;
    if (upto >= b->size && n > CHECKED_BYTES) {
        size_t from = n > 2 * CHECKED_BYTES ? n - CHECKED_BYTES : CHECKED_BYTES;
        for (size_t i = from; i < n; i++)
            if (b->p[i] != pattern(i, b->seed))
                return false;
    }
    return true;
}

/* A served block: check what every allocation promises, then own it. */
static void take(struct block *b, void *p, size_t size, size_t align, bool zeroed)
{
    b->p = p;
    b->size = size;
    b->align = align;
    b->seed = ++generation * 0x85ebca6bu;
    b->heap = 0;
    if (((uintptr_t)p & (align - 1)) != 0)
        fail("block not aligned as asked", b);
    if (A(malloc_usable_size)(p) < size)
        fail("usable size below the request", b);
    if (zeroed)
        for (size_t i = 0; i < size; i += (size > 65536 ? 4093 : 1))
            if (b->p[i])
                fail("calloc block not zeroed", b);
    fill(b);
}
static void check(const struct block *b, const char *when)
{
    if (b->p && !intact(b, b->size))
        fail(when, b);
}
static void drop(struct block *b)
{
    check(b, "block changed while live (overlap or a double hand-out), seen at free");
    A(free)(b->p);
    b->p = NULL;
}

/* The second thread: frees blocks handed to it, after checking them. */
static pthread_mutex_t hand_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hand_cond = PTHREAD_COND_INITIALIZER;
static struct block handed[16];
static unsigned hand_n, hand_busy;
static void *freer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hand_lock);
    for (;;) {
        while (hand_n == 0)
            pthread_cond_wait(&hand_cond, &hand_lock);
        struct block b = handed[--hand_n];
        hand_busy = 1;
        pthread_mutex_unlock(&hand_lock);
        drop(&b);
        pthread_mutex_lock(&hand_lock);
        hand_busy = 0;
        pthread_cond_broadcast(&hand_cond);
    }
    return NULL;
}
static void hand_over(struct block *b)
{
    static bool started;
    pthread_mutex_lock(&hand_lock);
    if (!started) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&t, &at, freer, NULL) == 0;
        pthread_attr_destroy(&at);
        if (!started) {
            pthread_mutex_unlock(&hand_lock);
            drop(b);
            return;
        }
    }
    while (hand_n == sizeof handed / sizeof *handed)
        pthread_cond_wait(&hand_cond, &hand_lock);
    handed[hand_n++] = *b;
    b->p = NULL;
    pthread_cond_broadcast(&hand_cond);
    pthread_mutex_unlock(&hand_lock);
}
static void hand_drain(void)
{
    pthread_mutex_lock(&hand_lock);
    while (hand_n || hand_busy)
        pthread_cond_wait(&hand_cond, &hand_lock);
    pthread_mutex_unlock(&hand_lock);
}

/* Input reading: bytes run out as zeros. */
struct input {
    const uint8_t *d;
    size_t n, at;
};
static uint8_t byte(struct input *in) { return in->at < in->n ? in->d[in->at++] : 0; }
static size_t heavy_size(struct input *in)
{
    uint8_t k = byte(in), lo = byte(in), hi = byte(in);
    size_t bits = k < 160 ? k % 11 : k < 230 ? 11 + k % 11 : 22 + k % 5; /* up to 2^26 = 64 MiB */
    size_t base = (size_t)1 << bits;
    return base + (((size_t)hi << 8 | lo) & (base - 1));
}

static void expect_fail(void *p, int want_errno, const char *what)
{
    if (p) {
        fprintf(stderr, "fuzz_alloc: %s served %p\n", what, p);
        abort();
    }
    if (errno != want_errno) {
        fprintf(stderr, "fuzz_alloc: %s: errno %d, expected %d\n", what, errno, want_errno);
        abort();
    }
}

/* The first-class heap operations (opcodes 240..255). */
static void heap_op(uint8_t op, struct block *b, size_t n, size_t align)
{
    int k = op & 1;
    if (!A(sunmao_heap_create))
        return;
    if (!heaps[0] && (!(heaps[0] = A(sunmao_heap_create)("tlsf(chunk=64KB, name=fuzz)")) ||
                      !(heaps[1] = A(sunmao_heap_create)("region(chunk=64KB)"))))
        fail("sunmao_heap_create failed", NULL);
    sunmao_heap_t *h = heaps[k];
    void *p;
    switch ((op >> 1) % 6) {
    case 0: /* malloc, aligned or not */
    case 1:
        if (b->p)
            drop(b);
        p = (op >> 1) % 6 ? A(sunmao_heap_aligned_alloc)(h, align, n) : A(sunmao_heap_malloc)(h, n);
        if (p) {
            take(b, p, n, (op >> 1) % 6 ? align : 16, false);
            b->heap = k + 1;
        }
        break;
    case 2: /* realloc into this heap, whoever's the block is */
        if (!b->p)
            break;
        check(b, "block changed while live, seen at sunmao_heap_realloc");
        if ((p = A(sunmao_heap_realloc)(h, b->p, n))) {
            struct block moved = *b;
            moved.p = p;
            if (!intact(&moved, b->size < n ? b->size : n))
                fail("sunmao_heap_realloc lost the block's contents", &moved);
            take(b, p, n, 16, false);
            b->heap = k + 1;
        }
        break;
    case 3: /* sunmao_heap_free of a block of this heap */
        if (b->p && b->heap == k + 1) {
            check(b, "block changed while live, seen at sunmao_heap_free");
            A(sunmao_heap_free)(h, b->p);
            b->p = NULL;
        }
        break;
    case 4: /* reset: this heap's blocks are gone, every other block intact */
        hand_drain();
        for (int i = 0; i < SLOTS; i++)
            if (slot[i].p && slot[i].heap == k + 1) {
                check(&slot[i], "block changed while live, seen at sunmao_heap_reset");
                slot[i].p = NULL;
            }
        A(sunmao_heap_reset)(h);
        for (int i = 0; i < SLOTS; i++)
            check(&slot[i], "a heap's reset changed another block");
        break;
    case 5: /* each block knows its heap */
        if (b->p && A(sunmao_heap_of)(b->p) != (b->heap ? heaps[b->heap - 1] : NULL))
            fail("sunmao_heap_of names another heap", b);
        break;
    }
}

static void run_program(const uint8_t *data, size_t size)
{
    struct input in = { data, size, 0 };
    while (in.at < in.n) {
        uint8_t op = byte(&in);
        struct block *b = &slot[byte(&in) % SLOTS];
        size_t n = heavy_size(&in);
        size_t align = (size_t)1 << (4 + byte(&in) % 18); /* 16 B .. 2 MiB */
        void *p = NULL;
        if (op >= 240) {
            heap_op(op, b, n, align);
            continue;
        }
        switch (op % 20) {
        case 0: case 1: case 2: /* malloc */
            if (b->p)
                drop(b);
            if ((p = A(malloc)(n)))
                take(b, p, n, 16, false);
            break;
        case 3: /* calloc, as n / 8 elements of 8 */
            if (b->p)
                drop(b);
            if ((p = A(calloc)(n / 8 + 1, 8)))
                take(b, p, (n / 8 + 1) * 8, 16, true);
            break;
        case 4: case 5: /* realloc: grow, shrink or move */
            if (!b->p) {
                if ((p = A(realloc)(NULL, n)))
                    take(b, p, n, 16, false);
                break;
            }
            check(b, "block changed while live, seen at realloc");
            p = A(realloc)(b->p, n);
            if (!p)
                break; /* the old block stays: checked at its next use */
            {
                size_t keep = b->size < n ? b->size : n;
                struct block moved = *b;
                moved.p = p;
                if (!intact(&moved, keep))
                    fail("realloc lost the block's contents", &moved);
                int heap = b->heap; /* a heap's block stays in its heap */
                take(b, p, n, 16, false);
                b->heap = heap;
            }
            break;
        case 6: /* reallocarray */
            if (b->p)
                drop(b);
            if ((p = A(reallocarray)(NULL, n / 4 + 1, 4)))
                take(b, p, (n / 4 + 1) * 4, 16, false);
            break;
        case 7: /* posix_memalign */
            if (b->p)
                drop(b);
            if (A(posix_memalign)(&p, align, n) == 0)
                take(b, p, n, align, false);
            break;
        case 8: /* aligned_alloc, size a multiple of the alignment */
            if (b->p)
                drop(b);
            n = (n + align - 1) & ~(align - 1);
            if ((p = A(aligned_alloc)(align, n)))
                take(b, p, n, align, false);
            break;
        case 9: /* memalign with any alignment: a power of two is rounded to itself */
            if (b->p)
                drop(b);
            if ((p = A(memalign)(align, n)))
                take(b, p, n, align, false);
            break;
        case 10: /* valloc / pvalloc: page aligned */
            if (b->p)
                drop(b);
            if ((p = (n & 1) ? A(valloc)(n) : A(pvalloc)(n)))
                take(b, p, n, 4096, false);
            break;
        case 11: case 12: /* free */
            if (b->p)
                drop(b);
            break;
        case 13: /* free_sized / free_aligned_sized with the size asked */
            if (b->p) {
                check(b, "block changed while live, seen at free_sized");
                if (b->align > 16)
                    A(free_aligned_sized)(b->p, b->align, b->size);
                else
                    A(free_sized)(b->p, b->size);
                b->p = NULL;
            }
            break;
        case 14: /* realloc to 0 frees (glibc's answer: NULL) */
            if (b->p) {
                check(b, "block changed while live, seen at realloc(p, 0)");
                if (A(realloc)(b->p, 0) != NULL)
                    fail("realloc(p, 0) returned a block", b);
                b->p = NULL;
            }
            break;
        case 15: /* another thread frees it */
            if (b->p)
                hand_over(b);
            break;
        case 16: /* read it: its contents must be as written */
            check(b, "block changed while live (overlap or a double hand-out)");
            break;
        case 17: /* absurd requests */
            errno = 0;
            expect_fail(A(malloc)(SIZE_MAX - n % 64), ENOMEM, "malloc(SIZE_MAX)");
            errno = 0;
            expect_fail(A(malloc)(SIZE_MAX / 2 + n % 4096), ENOMEM, "malloc(SIZE_MAX / 2)");
            errno = 0;
            expect_fail(A(calloc)(SIZE_MAX / 3 + 1, 4), ENOMEM, "calloc overflow");
            errno = 0;
            expect_fail(A(aligned_alloc)(align + 8, 64), EINVAL, "aligned_alloc(not a power of two)");
            {
                void *q = (void *)1;
                if (A(posix_memalign)(&q, align | 8, 64) != EINVAL || q != (void *)1)
                    fail("posix_memalign(not a power of two) not EINVAL, or *out changed", NULL);
            }
            if (b->p) { /* a failed realloc keeps the block */
                errno = 0;
                expect_fail(A(realloc)(b->p, SIZE_MAX - 8), ENOMEM, "realloc(SIZE_MAX)");
                check(b, "a failed realloc changed the block");
            }
            break;
        case 18: /* usable size: at least the request, and writable up to it */
            if (b->p) {
                size_t u = A(malloc_usable_size)(b->p);
                if (u < b->size)
                    fail("usable size shrank below the request", b);
                if (u > b->size)
                    b->p[u - 1] = 0x5a; /* the promise: every usable byte is the program's */
            }
            break;
        case 19: /* give memory back now: live blocks must not notice */
            if (byte(&in) == 0)
                A(malloc_trim)(0);
            break;
        }
    }
    hand_drain();
    for (int i = 0; i < SLOTS; i++)
        if (slot[i].p)
            drop(&slot[i]);
    for (int k = 0; k < 2; k++) /* a region gives its freed blocks back only at a reset */
        if (heaps[k])
            A(sunmao_heap_reset)(heaps[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_program(data, size);
    return 0;
}

#ifdef FUZZ_STANDALONE
/* Without libFuzzer: run every file named on the command line, then random programs until
 * FUZZ_SECONDS (environment, default 5) have passed. */
#include <time.h>
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f)
            continue;
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        run_program(buf, n);
    }
    const char *s = getenv("FUZZ_SECONDS");
    double seconds = s ? atof(s) : 5;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t x = 0x2545f4914f6cdd1du, runs = 0;
    static uint8_t prog[4096];
    do {
        size_t n = 64 + (size_t)(x % (sizeof prog - 64));
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            prog[i] = (uint8_t)(x >> 24);
        }
        run_program(prog, n);
        runs++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    printf("fuzz_alloc: %d corpus files and %llu random programs, no failure\n", argc - 1, (unsigned long long)runs);
    return 0;
}
#endif
