/* Multi-threaded allocator stress: usage  stress [threads=32] [ops=4000] [lives=3] [seed=1]
 *
 * `threads` worker slots; each slot runs `lives` threads one after the other: a thread does `ops`
 * operations and exits, leaving its live blocks to its slot, and the main thread starts the next
 * one at once while the other slots keep running (threads exit and are recreated mid-run).
 * Operations on random sizes (mostly 1..1024, some up to 256 KiB, few 1..4 MiB): malloc, calloc
 * (checked zero), posix_memalign/aligned_alloc (checked aligned), realloc (the preserved prefix is
 * checked), free, and sending a block to another slot's lock-protected mailbox, whose owner
 * verifies it and later frees it (cross-thread frees); a third of the frees are C23 sized frees
 * (free_sized, free_aligned_sized for aligned_alloc's blocks). Every block carries a pattern keyed by its
 * address and a per-block seed, verified before every free/realloc and when it changes hands.
 *
 * Built plain (uses malloc & co.: run it under LD_PRELOAD=lib<inst>.so), or with
 * -DSM_TEST_PREFIX=sm_<inst>_ against libsm_<inst>.a: then every call goes to the prefixed API.
 * Cases: alloc_nonnull, alignment, usable_size, calloc_zeroed, realloc_preserves, pattern_intact,
 * threads_recreated; a failure names the block's address. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sunmao/core/compiler.h>

#include "tests/support/check.h"

#ifdef SM_TEST_PREFIX
#include <sunmao/sockets/custom_api.h>
SM_CUSTOM_API_DECLARE(SM_TEST_PREFIX)
#define ALLOC(name) SM_CAT(SM_TEST_PREFIX, name)
#define PROGRAM     "stress_linked"
static void (*sized_free_fn)(void *, size_t) = ALLOC(free_sized);
static void (*aligned_sized_free_fn)(void *, size_t, size_t) = ALLOC(free_aligned_sized);
static void sized_frees_find(void) {}
#else
#include <dlfcn.h>
#include <malloc.h>
#define ALLOC(name) name
#define PROGRAM     "stress"
/* C23's sized frees: the preloaded allocator's, found at run time (this C library may lack them). */
static void (*sized_free_fn)(void *, size_t);
static void (*aligned_sized_free_fn)(void *, size_t, size_t);
static void sized_frees_find(void)
{
    *(void **)&sized_free_fn = dlsym(RTLD_DEFAULT, "free_sized");
    *(void **)&aligned_sized_free_fn = dlsym(RTLD_DEFAULT, "free_aligned_sized");
}
#endif

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)
#define MAX_LIVE  64  /* blocks a thread holds */
#define MAILBOX   128 /* blocks waiting in a slot's mailbox */
#define MIN_ALIGN 16

struct block {
    unsigned char *p;
    size_t n;
    uint64_t key; /* pattern key: address at fill time ^ per-block seed */
    int origin;   /* slot that allocated it */
    size_t align; /* aligned_alloc's alignment, for free_aligned_sized; 0 otherwise */
};

struct slot {
    pthread_mutex_t lock; /* protects mailbox */
    struct block mailbox[MAILBOX];
    int nmail;
    struct block legacy[MAX_LIVE]; /* blocks left by the previous life of this slot */
    int nlegacy;
    int lives_done;
    pthread_t thread;
};

static int nthreads = 32, ops = 4000, lives = 3;
static unsigned base_seed = 1;
static struct slot *slots;

static pthread_mutex_t finished_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finished_cond = PTHREAD_COND_INITIALIZER;
static int *finished; /* queue of slots whose thread has exited */
static int nfinished;

enum { F_ALLOC, F_ALIGN, F_USABLE, F_CALLOC, F_REALLOC, F_PATTERN, F_COUNT };
static const char *const fail_case[F_COUNT] = { "alloc_nonnull", "alignment", "usable_size", "calloc_zeroed",
                                                "realloc_preserves", "pattern_intact" };
static atomic_ulong fails[F_COUNT];
static char first_fail[F_COUNT][256];
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong n_alloc, n_free, n_cross_free, n_realloc, n_sent, n_big, n_sized;

__attribute__((format(printf, 2, 3))) static void fail(int kind, const char *fmt, ...)
{
    if (atomic_fetch_add(&fails[kind], 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&fail_lock);
        vsnprintf(first_fail[kind], sizeof first_fail[kind], fmt, ap);
        pthread_mutex_unlock(&fail_lock);
        va_end(ap);
    }
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull, x ^= x >> 33;
    return x;
}

/* The filled part of an n-byte block: everything up to 64 KiB; above, the first and last 4 KiB
 * and 64 bytes of every 4 KiB page (so multi-MiB blocks stay cheap). Ranges are [a, b). */
typedef int (*range_fn)(unsigned char *p, size_t a, size_t b, uint64_t key, size_t *bad);
static int for_ranges(unsigned char *p, size_t n, size_t limit, uint64_t key, range_fn fn, size_t *bad)
{
    size_t end = n < limit ? n : limit;
#define RANGE(a, b)                                                                                    \
    do {                                                                                               \
        size_t a_ = (a), b_ = (b) < end ? (b) : end;                                                   \
        if (a_ < b_ && !fn(p, a_, b_, key, bad))                                                       \
            return 0;                                                                                  \
    } while (0)
    if (n <= 64 * KiB) {
        RANGE(0, n);
        return 1;
    }
    RANGE(0, 4 * KiB);
    for (size_t off = 4 * KiB; off + 4 * KiB < n; off += 4 * KiB)
        RANGE(off, off + 64);
    RANGE(n - 4 * KiB, n);
    return 1;
#undef RANGE
}
/* Byte i of a block is byte (i % 8) of mix(key + i / 8): position-defined, so ranges compose. */
static int fill_range(unsigned char *p, size_t a, size_t b, uint64_t key, size_t *bad)
{
    (void)bad;
    for (size_t i = a; i < b;) {
        uint64_t w = mix(key + i / 8);
        for (size_t j = i % 8; j < 8 && i < b; j++, i++)
            p[i] = (unsigned char)(w >> (8 * j));
    }
    return 1;
}
static int verify_range(unsigned char *p, size_t a, size_t b, uint64_t key, size_t *bad)
{
    for (size_t i = a; i < b;) {
        uint64_t w = mix(key + i / 8);
        for (size_t j = i % 8; j < 8 && i < b; j++, i++)
            if (p[i] != (unsigned char)(w >> (8 * j))) {
                *bad = i;
                return 0;
            }
    }
    return 1;
}
static int zero_range(unsigned char *p, size_t a, size_t b, uint64_t key, size_t *bad)
{
    (void)key;
    for (size_t i = a; i < b; i++)
        if (p[i]) {
            *bad = i;
            return 0;
        }
    return 1;
}

static void fill(struct block *b, uint64_t seed)
{
    b->key = (uint64_t)(uintptr_t)b->p ^ (seed << 1);
    for_ranges(b->p, b->n, SIZE_MAX, b->key, fill_range, NULL);
}
/* Verifies the first `limit` bytes (all of it: SIZE_MAX); reports a failure of `kind`. */
static int verify(const struct block *b, size_t limit, int kind, const char *when)
{
    size_t bad = 0;
    if (for_ranges(b->p, b->n, limit, b->key, verify_range, &bad))
        return 1;
    fail(kind, "block %p (%zu bytes, from slot %d) corrupted at offset %zu (%s)", (void *)b->p, b->n, b->origin, bad,
         when);
    return 0;
}

static size_t pick_size(uint64_t *s)
{
    unsigned r = (unsigned)(rnd(s) % 1000);
    if (r < 900)
        return 1 + rnd(s) % 1024;
    if (r < 993)
        return 1025 + rnd(s) % (256 * KiB - 1024);
    atomic_fetch_add(&n_big, 1);
    return 1 + rnd(s) % (4 * MiB);
}

static int new_block(struct block *b, int slot, uint64_t *s)
{
    size_t n = pick_size(s);
    unsigned kind = (unsigned)(rnd(s) % 10);
    size_t align = MIN_ALIGN;
    unsigned char *p;
    if (kind < 7) {
        p = ALLOC(malloc)(n);
    } else if (kind < 8) {
        p = ALLOC(calloc)(1, n);
        if (p) {
            size_t bad = 0;
            struct block t = { p, n, 0, slot, 0 };
            if (!for_ranges(t.p, n, SIZE_MAX, 0, zero_range, &bad))
                fail(F_CALLOC, "calloc(1, %zu) = %p: byte %zu not zero", n, (void *)p, bad);
        }
    } else if (kind < 9) {
        align = (size_t)16 << (rnd(s) % 9); /* 16 .. 4096 */
        void *q = NULL;
        int r = ALLOC(posix_memalign)(&q, align, n);
        if (r != 0 && r != ENOMEM)
            fail(F_ALLOC, "posix_memalign(%zu, %zu) = %d", align, n, r);
        p = r == 0 ? q : NULL;
    } else {
        align = (size_t)16 << (rnd(s) % 9);
        n = (n + align - 1) / align * align;
        p = ALLOC(aligned_alloc)(align, n);
    }
    b->align = kind == 9 ? align : 0;
    if (!p) {
        fail(F_ALLOC, "allocation of %zu bytes (align %zu) in slot %d returned NULL", n, align, slot);
        return 0;
    }
    if ((uintptr_t)p % align)
        fail(F_ALIGN, "block %p (%zu bytes) not aligned to %zu", (void *)p, n, align);
    size_t us = ALLOC(malloc_usable_size)(p);
    if (us < n)
        fail(F_USABLE, "malloc_usable_size(%p) = %zu < %zu", (void *)p, us, n);
    b->p = p, b->n = n, b->origin = slot;
    fill(b, rnd(s));
    atomic_fetch_add(&n_alloc, 1);
    return 1;
}

static void release(struct block *b, int slot, const char *when)
{
    verify(b, SIZE_MAX, F_PATTERN, when);
    if (b->origin != slot)
        atomic_fetch_add(&n_cross_free, 1);
    /* A third of the frees are sized (C23), with the size asked (and aligned_alloc's alignment). */
    switch (((uintptr_t)b->p >> 4) % 3) {
    case 0:
        if (sized_free_fn) {
            sized_free_fn(b->p, b->n);
            atomic_fetch_add(&n_sized, 1);
            break;
        }
        /* fall through */
    case 1:
        if (b->align && aligned_sized_free_fn) {
            aligned_sized_free_fn(b->p, b->align, b->n);
            atomic_fetch_add(&n_sized, 1);
            break;
        }
        /* fall through */
    default:
        ALLOC(free)(b->p);
    }
    atomic_fetch_add(&n_free, 1);
}

static void grow_or_shrink(struct block *b, uint64_t *s)
{
    if (!verify(b, SIZE_MAX, F_PATTERN, "before realloc"))
        return;
    size_t m = (rnd(s) & 1) ? b->n + 1 + rnd(s) % (b->n < 4096 ? 4096 : b->n) : 1 + rnd(s) % b->n;
    if (m > 6 * MiB)
        m = 1 + rnd(s) % 1024;
    volatile uintptr_t old = (uintptr_t)b->p; /* for messages only (volatile: gcc -Wuse-after-free) */
    unsigned char *q = ALLOC(realloc)(b->p, m);
    if (!q) {
        fail(F_ALLOC, "realloc(%p, %zu) returned NULL", (void *)b->p, m);
        return; /* old block still valid */
    }
    if ((uintptr_t)q % MIN_ALIGN)
        fail(F_ALIGN, "realloc -> %p not aligned to %d", (void *)q, MIN_ALIGN);
    /* the pattern is keyed by the old address: check the bytes filled before that survive */
    size_t bad = 0;
    if (!for_ranges(q, b->n, m, b->key, verify_range, &bad))
        fail(F_REALLOC, "realloc(%p, %zu -> %zu) = %p: byte %zu of the old contents lost", (void *)old, b->n, m,
             (void *)q, bad);
    if (ALLOC(malloc_usable_size)(q) < m)
        fail(F_USABLE, "malloc_usable_size(%p) = %zu < %zu after realloc", (void *)q, ALLOC(malloc_usable_size)(q), m);
    b->p = q, b->n = m, b->align = 0;
    fill(b, rnd(s));
    atomic_fetch_add(&n_realloc, 1);
}

struct life {
    int slot;
    unsigned seed;
};

static void *worker(void *arg)
{
    struct life *lf = arg;
    int me = lf->slot;
    struct slot *sl = &slots[me];
    uint64_t s = mix(((uint64_t)lf->seed << 20) ^ (uint64_t)me) | 1;
    free(lf);
    struct block live[MAX_LIVE];
    int nlive = 0;
    /* inherit what the previous thread of this slot left */
    memcpy(live, sl->legacy, sizeof(struct block) * (size_t)sl->nlegacy);
    nlive = sl->nlegacy;
    sl->nlegacy = 0;
    for (int i = 0; i < nlive; i++)
        verify(&live[i], SIZE_MAX, F_PATTERN, "inherited from the slot's previous thread");

    for (int op = 0; op < ops; op++) {
        if (op % 16 == 0) { /* drain the mailbox: adopt or free what others sent */
            struct block in[MAILBOX];
            pthread_mutex_lock(&sl->lock);
            int nin = sl->nmail;
            memcpy(in, sl->mailbox, sizeof(struct block) * (size_t)nin);
            sl->nmail = 0;
            pthread_mutex_unlock(&sl->lock);
            for (int i = 0; i < nin; i++) {
                if (!verify(&in[i], SIZE_MAX, F_PATTERN, "received from another thread"))
                    continue; /* don't free a block we cannot trust */
                if (nlive < MAX_LIVE && (rnd(&s) & 1))
                    live[nlive++] = in[i];
                else
                    release(&in[i], me, "cross-thread free");
            }
        }
        unsigned r = (unsigned)(rnd(&s) % 100);
        if (nlive == 0 || (r < 50 && nlive < MAX_LIVE)) {
            if (new_block(&live[nlive], me, &s))
                nlive++;
        } else if (r < 75) {
            int k = (int)(rnd(&s) % (uint64_t)nlive);
            release(&live[k], me, "before free");
            live[k] = live[--nlive];
        } else if (r < 87) {
            grow_or_shrink(&live[rnd(&s) % (uint64_t)nlive], &s);
        } else {
            int k = (int)(rnd(&s) % (uint64_t)nlive);
            int to = (int)(rnd(&s) % (uint64_t)nthreads);
            if (to == me)
                to = (to + 1) % nthreads;
            struct slot *dst = &slots[to];
            pthread_mutex_lock(&dst->lock);
            int sent = dst->nmail < MAILBOX;
            if (sent)
                dst->mailbox[dst->nmail++] = live[k];
            pthread_mutex_unlock(&dst->lock);
            if (sent) {
                live[k] = live[--nlive];
                atomic_fetch_add(&n_sent, 1);
            }
        }
    }
    /* exit: free about half, leave the rest to the next thread of this slot */
    for (int i = 0; i < nlive; i++) {
        if (rnd(&s) & 1)
            release(&live[i], me, "at thread exit");
        else
            sl->legacy[sl->nlegacy++] = live[i];
    }
    pthread_mutex_lock(&finished_lock);
    finished[nfinished++] = me;
    pthread_cond_signal(&finished_cond);
    pthread_mutex_unlock(&finished_lock);
    return NULL;
}

static int start(int slot)
{
    struct life *lf = malloc(sizeof *lf);
    if (!lf)
        return 0;
    lf->slot = slot;
    lf->seed = base_seed * 1000003u + (unsigned)slots[slot].lives_done * 7919u + (unsigned)slot;
    if (pthread_create(&slots[slot].thread, NULL, worker, lf) != 0) {
        free(lf);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    check_begin(PROGRAM);
    sized_frees_find();
    if (argc > 1)
        nthreads = atoi(argv[1]);
    if (argc > 2)
        ops = atoi(argv[2]);
    if (argc > 3)
        lives = atoi(argv[3]);
    if (argc > 4)
        base_seed = (unsigned)strtoul(argv[4], NULL, 0);
    if (nthreads < 2 || ops < 1 || lives < 1) {
        fprintf(stderr, "usage: %s [threads>=2] [ops>=1] [lives>=1] [seed]\n", argv[0]);
        return 2;
    }
    slots = calloc((size_t)nthreads, sizeof *slots);
    finished = calloc((size_t)nthreads, sizeof *finished);
    if (!slots || !finished)
        return 2;
    for (int i = 0; i < nthreads; i++)
        pthread_mutex_init(&slots[i].lock, NULL);

    int running = 0, started = 0, start_failed = 0;
    for (int i = 0; i < nthreads; i++) {
        if (start(i))
            running++, started++;
        else
            start_failed++;
    }
    while (running > 0) {
        pthread_mutex_lock(&finished_lock);
        while (nfinished == 0)
            pthread_cond_wait(&finished_cond, &finished_lock);
        int slot = finished[--nfinished];
        pthread_mutex_unlock(&finished_lock);
        pthread_join(slots[slot].thread, NULL);
        running--;
        if (++slots[slot].lives_done < lives) {
            if (start(slot))
                running++, started++;
            else
                start_failed++;
        }
    }
    /* everything left: in mailboxes and legacies */
    for (int i = 0; i < nthreads; i++) {
        for (int k = 0; k < slots[i].nmail; k++)
            release(&slots[i].mailbox[k], -1, "left in a mailbox at the end");
        for (int k = 0; k < slots[i].nlegacy; k++)
            release(&slots[i].legacy[k], -1, "left by the last thread of a slot");
    }

    printf("# %d threads x %d lives x %d ops: %lu allocs, %lu frees (%lu cross-thread, %lu sized), %lu reallocs, "
           "%lu sent, %lu big\n",
           nthreads, lives, ops, (unsigned long)n_alloc, (unsigned long)n_free, (unsigned long)n_cross_free,
           (unsigned long)n_sized, (unsigned long)n_realloc, (unsigned long)n_sent, (unsigned long)n_big);
    for (int k = 0; k < F_COUNT; k++) {
        check_case_name = fail_case[k];
        check_case_failed = 0;
        if (fails[k])
            check_fail_at(__FILE__, __LINE__, "%lu failures, first: %s", (unsigned long)fails[k], first_fail[k]);
        if (check_case_failed)
            check_failures_total++;
        else
            printf("ok %s: %s\n", check_program, fail_case[k]);
    }
    check_case_name = "threads_recreated";
    check_case_failed = 0;
    CHECKF(start_failed == 0 && started == nthreads * lives, "%d of %d threads started", started, nthreads * lives);
    CHECKF(n_alloc == n_free, "%lu allocations but %lu frees: blocks lost by the test", (unsigned long)n_alloc,
           (unsigned long)n_free);
    CHECKF(n_cross_free > 0, "no cross-thread free happened");
    if (check_case_failed)
        check_failures_total++;
    else
        printf("ok %s: %s\n", check_program, check_case_name);
    return check_end();
}
