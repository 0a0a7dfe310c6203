/* Unit test of cmalloc_socket (sockets/cmalloc_socket.h): the partition argument reaches the layers
 * in mctx.cpu and a per-CPU layer below honours it. Composition, bottom up:
 *   fk    the fake next layer (tests/support/fake_next.h): counts the slabs slab_lk maps
 *   sl    slab_lk(SM_OPT_SHARDS 4, size_handle [0, 8K]): a request takes objects from shard cpu & 3
 *   rec   a layer (below) that records the cpu of each request it passes down
 *   cmalloc_socket, prefix cm_
 * No CPU pinning is needed: the socket names the partition, whichever CPU the test runs on. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX 8192
#define SM_OPT_SHARDS 4
#include <sunmao/layers/core/slab_lk.h>

/* rec: passes everything down, counting allocs and frees by the cpu their context carries on the
 * way in (-1: none; index 0 is -1, index k + 1 is cpu k). */
#define REC_CPUS 8
static struct {
    unsigned long alloc_by_cpu[REC_CPUS + 1], free_by_cpu[REC_CPUS + 1], other;
} rec_seen;
static void rec_note(unsigned long *by_cpu, int cpu)
{
    if (cpu >= -1 && cpu < REC_CPUS)
        __atomic_fetch_add(&by_cpu[cpu + 1], 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&rec_seen.other, 1, __ATOMIC_RELAXED);
}
#define SM_LAYER rec
#define SM_NEXT sl
#include <sunmao/core/layer.h>
enum { rec_thread_safe = sl_thread_safe, rec_min_align = sl_min_align, rec_zeroed = sl_zeroed };
SM_UNUSED static inline int rec_create(void) { return sl_create(); }
static inline void *rec_alloc(sm_mctx_t *c)
{
    rec_note(rec_seen.alloc_by_cpu, c->cpu);
    return sl_alloc(c);
}
SM_UNUSED static inline void rec_free(sm_mctx_t *c)
{
    rec_note(rec_seen.free_by_cpu, c->cpu);
    sl_free(c);
}
SM_UNUSED static inline bool rec_getmeta(sm_mctx_t *c) { return sl_getmeta(c); }
SM_UNUSED static inline bool rec_resize(sm_mctx_t *c, size_t n) { return sl_resize(c, n); }
SM_UNUSED static inline bool rec_purge(sm_mctx_t *c) { return sl_purge(c); }
SM_UNUSED static inline void rec_release(sm_release_t *r) { sl_release(r); }
SM_UNUSED static inline void rec_thread_exit(void) { sl_thread_exit(); }
SM_UNUSED static inline void rec_fork_prepare(void) { sl_fork_prepare(); }
SM_UNUSED static inline void rec_fork_parent(void) { sl_fork_parent(); }
SM_UNUSED static inline void rec_fork_child(void) { sl_fork_child(); }
#include <sunmao/core/layer_end.h>

#define SM_NEXT rec
#define SM_ERR callback
#define SM_PREFIX cm_
#include <sunmao/sockets/cmalloc_socket.h>

static unsigned long errs[SM_ERR_KIND_COUNT];
static void on_err(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_fetch_add(&errs[kind], 1, __ATOMIC_RELAXED);
}

enum { SLAB = 64u << 10 }; /* slab_lk's default slab size: small classes' slabs, aligned to it */
static uintptr_t slab_of(const void *p) { return (uintptr_t)p & ~(uintptr_t)(SLAB - 1); }

/* Slabs slab_lk holds from the fake now (its metadata, the owner map's nodes, are other sizes). */
static unsigned long live_slabs(void)
{
    unsigned long n = 0;
    pthread_mutex_lock(&fk_obj.lock);
    for (size_t i = 0; i < fk_obj.live_blocks; i++)
        n += fk_obj.blocks[i].size == SLAB;
    pthread_mutex_unlock(&fk_obj.lock);
    return n;
}

/* Whether p's slab is under the shard that a request for partition cpu takes objects from. */
static bool local_to(const void *p, int cpu)
{
    sm_mctx_t q = sm_mctx_block(NULL, 0, 0);
    q.cpu = cpu;
    return sl_owner_local(p, sl_block_owner(p), &q);
}

/* Ten 64-byte blocks for partition 0 and ten for partition 1: two slabs, one per shard, each
 * block local to its own partition only; the layer above slab_lk saw the partitions exactly. */
static void partitions_by_cpu(void)
{
    enum { N = 10 };
    void *a[N], *b[N];
    unsigned long slabs = live_slabs(), seen0 = rec_seen.alloc_by_cpu[1], seen1 = rec_seen.alloc_by_cpu[2];
    for (int i = 0; i < N; i++) {
        a[i] = cm_cmalloc(64, 0);
        b[i] = cm_cmalloc(64, 1);
        CHECK(a[i] && b[i]);
        if (!a[i] || !b[i])
            return;
        check_fill(a[i], 64, 1);
        check_fill(b[i], 64, 2);
    }
    CHECKF(live_slabs() - slabs == 2, "%lu slabs mapped for two partitions, expected 2", live_slabs() - slabs);
    CHECKF(rec_seen.alloc_by_cpu[1] - seen0 == N && rec_seen.alloc_by_cpu[2] - seen1 == N,
           "the layer saw %lu requests for cpu 0 and %lu for cpu 1, expected %d each",
           rec_seen.alloc_by_cpu[1] - seen0, rec_seen.alloc_by_cpu[2] - seen1, N);
    CHECKF(slab_of(a[0]) != slab_of(b[0]), "partitions 0 and 1 share slab %#lx", (unsigned long)slab_of(a[0]));
    for (int i = 0; i < N; i++) {
        CHECKF(slab_of(a[i]) == slab_of(a[0]) && slab_of(b[i]) == slab_of(b[0]), "block %d left its partition's slab", i);
        CHECKF(local_to(a[i], 0) && !local_to(a[i], 1), "partition 0's block %p is not its shard's", a[i]);
        CHECKF(local_to(b[i], 1) && !local_to(b[i], 0), "partition 1's block %p is not its shard's", b[i]);
    }
    unsigned long frees = rec_seen.free_by_cpu[0];
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(a[i], 64, 1) && check_verify(b[i], 64, 2), "block %d overwritten", i);
        cm_cfree(a[i]);
        cm_cfree(b[i]);
    }
    CHECKF(rec_seen.free_by_cpu[0] - frees == 2 * N, "%lu frees reached the layer with no partition, expected %d",
           rec_seen.free_by_cpu[0] - frees, 2 * N);
}

/* Partition 5 is shard 1 of 4 (slab_lk masks); SM_CPU_ANY is malloc's behaviour; -2 is refused
 * before anything reaches the layers. */
static void wrap_any_and_refused(void)
{
    void *p = cm_cmalloc(96, 5);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECKF(local_to(p, 1) && !local_to(p, 0) && !local_to(p, 2) && !local_to(p, 3), "partition 5's block is not shard 1's");
    unsigned long any = rec_seen.alloc_by_cpu[0];
    void *q = cm_cmalloc(96, SM_CPU_ANY);
    CHECK(q != NULL && rec_seen.alloc_by_cpu[0] - any == 1);
    unsigned long total = 0;
    for (int k = 0; k <= REC_CPUS; k++)
        total += rec_seen.alloc_by_cpu[k];
    errno = 0;
    CHECK(cm_cmalloc(96, -2) == NULL && errno == EINVAL);
    unsigned long after = 0;
    for (int k = 0; k <= REC_CPUS; k++)
        after += rec_seen.alloc_by_cpu[k];
    CHECKF(after == total && rec_seen.other == 0, "a refused request reached the layers");
    cm_cfree(p);
    cm_cfree(q);
}

static void calloc_realloc_aligned(void)
{
    unsigned char *z = cm_ccalloc(10, 30, 2); /* the fake fills slabs with 0xCD: a missed clear shows */
    CHECK(z != NULL);
    if (!z)
        return;
    int nonzero = 0;
    for (int i = 0; i < 300; i++)
        nonzero += z[i] != 0;
    CHECKF(nonzero == 0, "ccalloc left %d bytes non-zero", nonzero);
    CHECK(local_to(z, 2) && !local_to(z, 3));
    check_fill(z, 300, 7);
    unsigned char *m = cm_crealloc(z, 1000, 3); /* a larger class: moved, to partition 3 */
    CHECK(m != NULL && m != z);
    if (!m)
        return;
    int same = 1; /* the pattern depends on the address: compare with what the old block held */
    for (size_t i = 0; i < 300; i++)
        same &= m[i] == check_pattern_byte(z, i, 7);
    CHECKF(same, "crealloc lost the contents");
    CHECK(local_to(m, 3) && !local_to(m, 2));
    CHECK(cm_cmalloc_usable_size(m) >= 1000);
    void *al = cm_caligned_alloc(256, 200, 1);
    CHECK(al && ((uintptr_t)al & 255) == 0 && local_to(al, 1));
    errno = 0;
    CHECK(cm_caligned_alloc(48, 64, 1) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(cm_ccalloc(SIZE_MAX / 2, 3, 0) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(cm_crealloc(m, 64, -3) == NULL && errno == EINVAL && check_pattern_byte(z, 0, 7) == m[0]);
    CHECK(cm_crealloc(m, 0, 1) == NULL); /* frees */
    cm_cfree(al);
}

/* cfree_cpu's partition reaches the layers; a bad one is reported once and the block still freed. */
static void cfree_cpu_reaches_layers(void)
{
    void *p = cm_cmalloc(32, 3), *q = cm_cmalloc(32, 3);
    CHECK(p && q);
    unsigned long three = rec_seen.free_by_cpu[4], any = rec_seen.free_by_cpu[0], bad = errs[SM_ERR_BAD_REQUEST];
    cm_cfree_cpu(p, 3);
    CHECK(rec_seen.free_by_cpu[4] - three == 1);
    cm_cfree_cpu(q, -7);
    CHECKF(errs[SM_ERR_BAD_REQUEST] - bad == 1 && rec_seen.free_by_cpu[0] - any == 1,
           "bad partition: %lu reports, %lu frees passed on", errs[SM_ERR_BAD_REQUEST] - bad, rec_seen.free_by_cpu[0] - any);
    cm_cfree(NULL);
    CHECK(rec_seen.free_by_cpu[0] - any == 1);
}

/* Requests above slab_lk's range go on to the next layer, with their partition. */
static void large_passes_down(void)
{
    unsigned long maps = fk_obj.allocs, one = rec_seen.alloc_by_cpu[2];
    void *p = cm_cmalloc(100000, 1);
    CHECK(p && fk_obj.allocs - maps == 1 && rec_seen.alloc_by_cpu[2] - one == 1);
    if (p) {
        check_fill(p, 100000, 9);
        CHECK(check_verify(p, 100000, 9));
    }
    cm_cfree(p);
    (void)cm_cmalloc_trim();
}

/* Four threads, each for its own partition: every block each one gets is its partition's. */
static void *partition_worker(void *arg)
{
    int cpu = (int)(intptr_t)arg;
    enum { N = 200 };
    void *b[N];
    intptr_t bad = 0;
    for (int i = 0; i < N; i++) {
        if (!(b[i] = cm_cmalloc(48, cpu)))
            return (void *)(intptr_t)-1;
        check_fill(b[i], 48, (unsigned)cpu);
    }
    for (int i = 0; i < N; i++) {
        bad += !check_verify(b[i], 48, (unsigned)cpu) || !local_to(b[i], cpu) || local_to(b[i], (cpu + 1) & 3);
        cm_cfree(b[i]);
    }
    return (void *)bad;
}
static void threads_own_partitions(void) { check_threads(4, partition_worker); }

int main(void)
{
    check_begin("cmalloc_socket");
    sm_err_callback_set(on_err);
    RUN_CASE(partitions_by_cpu);
    RUN_CASE(wrap_any_and_refused);
    RUN_CASE(calloc_realloc_aligned);
    RUN_CASE(cfree_cpu_reaches_layers);
    RUN_CASE(large_passes_down);
    RUN_CASE(threads_own_partitions);
    return check_end();
}
