/* Unit test of the segfit_lf core layer (lock-free segregated fit) over the fake next layer
 * (tests/support/fake_next.h). Two instances: sg (log2b classes, 4 MiB chunks) and sm (tc classes,
 * 64 KiB chunks, so chunks come often, region installs race, and blocks above 32 KiB are direct).
 * After most cases the free stacks are walked: every block on a class's stack is free and of the
 * class's block size, and once every block is freed the stacks hold every byte ever carved: a
 * block lost or pushed twice by a racing operation shows as a difference. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sg
#define SM_NEXT fk
#define SM_SIZECLASS log2b
#define SM_ERR callback
#include <sunmao/layers/core/segfit_lf.h>

#define SM_LAYER fm
#define FAKE_MOVE 1
#include "tests/support/fake_next.h"
#define SM_LAYER sm
#define SM_NEXT fm
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CHUNK_SIZE (64u << 10)
#include <sunmao/layers/core/segfit_lf.h>

_Static_assert(sg_min_align == 4096 && sg_classes == 17 && sm_classes == 52, "options and policies reach the instance");

#define SEGFIT_TEST_THREADS 8
#include "tests/support/segfit_cases.h"

/* Walks the lists (nothing else running): each block free and of its class's block size;
 * returns the free bytes, or SIZE_MAX after a failed check. */
#define FREE_BYTES(L)                                                                              \
    SM_UNUSED static size_t L##_free_bytes(void)                                                   \
    {                                                                                              \
        size_t bytes = 0;                                                                          \
        for (unsigned i = 0; i < L##_classes; i++) {                                               \
            size_t n = 0;                                                                          \
            for (sm_tnode_t *b = (sm_tnode_t *)L##_obj.cls[i].free.lo; b && n <= L##_obj.carved / 4096; \
                 b = b->next, n++) {                                                               \
                uintptr_t w = L##_word(b);                                                         \
                size_t size = w & ~(uintptr_t)63; /* state 2 (free), maybe aged and purged */     \
                if ((w & 15) != 2 || L##_block_size(i) != size) {                                  \
                    check_fail_at(__FILE__, __LINE__, "list %u: block %p word %#lx", i, (void *)b,  \
                                  (unsigned long)w);                                               \
                    return SIZE_MAX;                                                               \
                }                                                                                  \
                bytes += size;                                                                     \
            }                                                                                      \
            if (n > L##_obj.carved / L##_block_size(i)) { /* a cycle: a block pushed twice */     \
                check_fail_at(__FILE__, __LINE__, "list %u: %zu blocks", i, n);                   \
                return SIZE_MAX;                                                                   \
            }                                                                                      \
        }                                                                                          \
        return bytes;                                                                              \
    }
FREE_BYTES(sg)
FREE_BYTES(sm)

/* release(ALL) purges free blocks but their first page (the stack's link), keeps them listed. */
static void test_release(void)
{
    char *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = sg_t_alloc(64 * KiB, 16);
        CHECK(p[i] != NULL);
        check_fill(p[i], 64 * KiB, (unsigned)i);
    }
    for (int i = 0; i < 5; i++)
        sg_t_free(p[i]);
    unsigned long purges = fk_obj.purges;
    sm_release_t r = sm_release_request(0, SM_RELEASE_ALL);
    sg_release(&r);
    CHECKF(fk_obj.purges >= purges + 5 && r.released >= 5 * 60 * KiB && fk_obj.bad_purges == 0,
           "purges %lu -> %lu, released %zu", purges, fk_obj.purges, r.released);
    CHECK(check_verify(p[5], 64 * KiB, 5));
    CHECK(sg_free_bytes() == sg_obj.carved - 64 * KiB);
    for (int i = 0; i < 5; i++) { /* the same blocks come back, whole */
        char *q = sg_t_alloc(64 * KiB, 16);
        CHECK(q != NULL && sg_t_usable(q) == 64 * KiB);
        check_fill(q, 64 * KiB, 40u + (unsigned)i);
        p[i] = q;
    }
    for (int i = 0; i < 6; i++) {
        CHECK(check_verify(p[i], 64 * KiB, i < 5 ? 40u + (unsigned)i : 5u));
        sg_t_free(p[i]);
    }
    CHECK(sg_free_bytes() == sg_obj.carved);
    /* DECAYED: a first pass ages the free blocks and asks to come back; the next one purges them. */
    char *d = sg_t_alloc(128 * KiB, 16);
    check_fill(d, 128 * KiB, 8);
    sg_t_free(d);
    purges = fk_obj.purges;
    sm_release_t r1 = sm_release_request(100, SM_RELEASE_DECAYED);
    sg_release(&r1);
    CHECKF(fk_obj.purges == purges && r1.released == 0 && r1.next_ms == 1100, "first pass: %lu purges, next %llu",
           fk_obj.purges - purges, (unsigned long long)r1.next_ms);
    sm_release_t r2 = sm_release_request(1100, SM_RELEASE_DECAYED);
    sg_release(&r2);
    CHECKF(fk_obj.purges > purges && r2.released >= 124 * KiB && r2.next_ms == UINT64_MAX, "second pass: %zu bytes",
           r2.released);
    d = sg_t_alloc(128 * KiB, 16); /* aged and purged, whole again */
    CHECK(d && sg_t_usable(d) == 128 * KiB);
    check_fill(d, 128 * KiB, 9);
    CHECK(check_verify(d, 128 * KiB, 9));
    sg_t_free(d);
    CHECK(sg_free_bytes() == sg_obj.carved);
}

int main(void)
{
    check_begin("segfit_lf");
    CHECK(sg_create() == 0 && sm_create() == 0);
    RUN_CASE(test_sizes_and_reuse);
    RUN_CASE(test_alignment);
    RUN_CASE(test_bad_frees);
    RUN_CASE(test_resize);
    RUN_CASE(test_move);
    RUN_CASE(test_growth_and_out_of_memory);
    RUN_CASE(test_threads);
    RUN_CASE(test_release);
    RUN_CASE(test_fork);
    return check_end();
}
