/* A concurrent stress for slab layers' unit tests: threads allocate, fill, check and free objects of
 * random sizes (up to 2 KiB), and hand half of the objects they free over to other threads through
 * shared slots, so those are freed remotely. Every object is checked before its free; handover_live
 * counts the objects alive. Define before including:
 *     HANDOVER_ALLOC(size)  the layer under test's allocation (a char *, NULL: out of memory)
 *     HANDOVER_FREE(p)      its free
 * then run check_threads(n, handover_stress); afterwards handover_drain() frees what the slots still
 * hold (checked) and returns how many were damaged. A thread's result: the damaged objects it saw
 * (-1: out of memory). Needs tests/support/check.h. */
#ifndef SUNMAO_TESTS_HANDOVER_STRESS_H
#define SUNMAO_TESTS_HANDOVER_STRESS_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

static _Atomic(char *) handover_shared[128]; /* a handed-over object holds its size in its first word */
static atomic_long handover_live;

static unsigned handover_rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void handover_release(char *p)
{
    HANDOVER_FREE(p);
    atomic_fetch_sub(&handover_live, 1);
}

/* A handed-over object's contents, checked: its size in its first word, the pattern after it. */
static int handover_intact(const char *p)
{
    size_t n;
    memcpy(&n, p, sizeof n);
    return check_verify(p + 8, n - 8, (unsigned)n);
}

static void *handover_stress(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 7;
    enum { SLOTS = 64, OPS = 40000 };
    char *ptr[SLOTS] = { 0 };
    size_t size[SLOTS];
    long bad = 0;
    for (int op = 0; op < OPS; op++) {
        unsigned i = handover_rnd(&seed) % SLOTS;
        if (!ptr[i]) {
            size[i] = 1 + handover_rnd(&seed) % (handover_rnd(&seed) % 4 ? 256 : 2048);
            if (!(ptr[i] = HANDOVER_ALLOC(size[i])))
                return (void *)-1;
            atomic_fetch_add(&handover_live, 1);
            check_fill(ptr[i], size[i], i);
            continue;
        }
        bad += !check_verify(ptr[i], size[i], i);
        if (size[i] >= 16 && handover_rnd(&seed) % 2) { /* hand it over, free what was there */
            unsigned k = handover_rnd(&seed) % 128;
            char *old = atomic_exchange(&handover_shared[k], NULL);
            if (old) {
                bad += !handover_intact(old);
                handover_release(old);
            }
            memcpy(ptr[i], &size[i], sizeof size[i]);
            check_fill(ptr[i] + 8, size[i] - 8, (unsigned)size[i]);
            char *expect = NULL;
            if (!atomic_compare_exchange_strong(&handover_shared[k], &expect, ptr[i]))
                handover_release(ptr[i]);
        } else {
            handover_release(ptr[i]);
        }
        ptr[i] = NULL;
    }
    for (unsigned i = 0; i < SLOTS; i++)
        if (ptr[i]) {
            bad += !check_verify(ptr[i], size[i], i);
            handover_release(ptr[i]);
        }
    return (void *)(intptr_t)bad;
}

/* Frees what the slots hold; the number of damaged objects among them. */
static unsigned handover_drain(void)
{
    unsigned bad = 0;
    for (unsigned k = 0; k < 128; k++) {
        char *p = atomic_exchange(&handover_shared[k], NULL);
        if (p) {
            bad += !handover_intact(p);
            handover_release(p);
        }
    }
    return bad;
}

#endif
