/* Helpers of the thread-cache damage tests (thread_cache_harden.c, thread_cache_hold.c): each case
 * runs in a fresh thread (so a fresh cache), warms a list with rounds of allocations then frees,
 * and takes objects checking that each is the slab's own, aligned, outside a forbidden range and
 * not handed out twice. Include after tests/support/err_record.h (err_reset). */
#ifndef SM_TESTS_CACHE_ROUNDS_H
#define SM_TESTS_CACHE_ROUNDS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Runs fn on a new thread, after clearing the recorded reports, and waits for it. */
static void in_thread(void (*fn)(void))
{
    pthread_t t;
    err_reset();
    pthread_create(&t, NULL, (void *(*)(void *))(void (*)(void))fn, NULL);
    pthread_join(t, NULL);
}

/* `rounds` rounds of n allocations of `size` then their frees, in allocation order (slow start
 * needs a few to give a list its room); last: the last round's objects (n of them), or NULL. */
static void alloc_free_rounds(void *(*alloc)(size_t), void (*release)(void *), size_t size, int n, int rounds,
                              void **last)
{
    void *p[256];
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < n && i < 256; i++)
            p[i] = alloc(size);
        for (int i = 0; i < n && i < 256; i++)
            release(p[i]);
    }
    if (last)
        memcpy(last, p, sizeof(void *) * (size_t)(n < 256 ? n : 256));
}

/* Takes n objects of `size` (n <= 256): each must be owned, 16-aligned, outside [avoid, avoid +
 * avoid_len), and none twice among them and the nheld in `held`; filled with a pattern, then freed
 * with `release` unless it is NULL (kept). Returns how many broke the rule. */
static unsigned take_checked(void *(*alloc)(size_t), void (*release)(void *), bool (*owned)(void *), size_t size,
                             unsigned n, void *const *held, unsigned nheld, const char *avoid, size_t avoid_len)
{
    void *got[256];
    unsigned bad = 0;
    for (unsigned i = 0; i < n && i < 256; i++) {
        char *q = got[i] = alloc(size);
        if (!q || ((uintptr_t)q & 15) || !owned(q) || (avoid && q >= avoid && q < avoid + avoid_len))
            bad++;
        for (unsigned j = 0; j < i; j++)
            bad += got[j] == q;
        for (unsigned j = 0; j < nheld; j++)
            bad += held[j] == q;
        if (q)
            memset(q, 0x77, size);
    }
    for (unsigned i = 0; release && i < n && i < 256; i++)
        if (got[i])
            release(got[i]);
    return bad;
}

#endif
