/* Unit test of the segfit_lk core layer over the fake next layer (tests/support/fake_next.h).
 * Two instances: sg (log2b classes, spinlock, 4 MiB chunks) and sm (tc classes, mutex, 64 KiB
 * chunks, so chunks come often and blocks above 32 KiB are direct). After most cases the free lists
 * are walked: every block on a class's list is free and of the class's block size, and once every
 * block is freed the lists hold every byte ever carved. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sg
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include <sunmao/layers/core/segfit_lk.h>

#define SM_LAYER fm
#define FAKE_MOVE 1
#include "tests/support/fake_next.h"
#define SM_LAYER sm
#define SM_NEXT fm
#define SM_SYNC mutex
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CHUNK_SIZE (64u << 10)
#include <sunmao/layers/core/segfit_lk.h>

_Static_assert(sg_min_align == 4096 && sg_classes == 17 && sm_classes == 52, "options and policies reach the instance");

#define SEGFIT_TEST_THREADS 4
#include "tests/support/segfit_cases.h"

/* Walks the lists (nothing else running): each block free and of its class's block size;
 * returns the free bytes, or SIZE_MAX after a failed check. */
#define FREE_BYTES(L)                                                                              \
    SM_UNUSED static size_t L##_free_bytes(void)                                                   \
    {                                                                                              \
        size_t bytes = 0;                                                                          \
        for (unsigned i = 0; i < L##_classes; i++) {                                               \
            size_t n = 0;                                                                          \
            for (struct L##_free_block *b = L##_obj.cls[i].head; b; b = b->next, n++) {             \
                uintptr_t w = L##_word(b);                                                         \
                size_t size = w & ~(uintptr_t)15;                                                  \
                if ((w & 15) != 2 || L##_block_size(i) != size) {                                  \
                    check_fail_at(__FILE__, __LINE__, "list %u: block %p word %#lx", i, (void *)b,  \
                                  (unsigned long)w);                                               \
                    return SIZE_MAX;                                                               \
                }                                                                                  \
                bytes += size;                                                                     \
            }                                                                                      \
            if (n != L##_obj.cls[i].count) {                                                       \
                check_fail_at(__FILE__, __LINE__, "list %u: %zu blocks, count %zu", i, n,          \
                              L##_obj.cls[i].count);                                               \
                return SIZE_MAX;                                                                   \
            }                                                                                      \
        }                                                                                          \
        return bytes;                                                                              \
    }
FREE_BYTES(sg)
FREE_BYTES(sm)

int main(void)
{
    check_begin("segfit_lk");
    CHECK(sg_create() == 0 && sm_create() == 0);
    RUN_CASE(test_sizes_and_reuse);
    RUN_CASE(test_alignment);
    RUN_CASE(test_bad_frees);
    RUN_CASE(test_resize);
    RUN_CASE(test_move);
    RUN_CASE(test_growth_and_out_of_memory);
    RUN_CASE(test_threads);
    RUN_CASE(test_fork);
    return check_end();
}
