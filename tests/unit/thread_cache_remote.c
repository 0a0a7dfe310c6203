/* Unit test of the thread cache's remote lists (passive false sharing):
 *     trem :: slab_lk(2 shards) :: fake
 * A thread pinned to an even CPU (shard 0) allocates 64-byte objects, filled with patterns; a
 * thread pinned to an odd CPU (shard 1) frees them. Exact counts: a freed object of the other
 * shard lands on the freeing thread's remote list, never on the list its malloc takes from, so
 * none of its next objects is one of them; a full remote list goes home in one batch (the slab's
 * taken-back count rises by exactly that batch); a second free of an object on a remote list is
 * one double-free report; the thread's exit sends its remote lists home; a thread that took
 * batches from below while its remote list filled reuses the objects (they join its list) and
 * caches the other shard's objects directly for a while. A sized free (free_sized, C++ sized
 * delete), which the hit path serves without the owner word, sorts the same way: another shard's
 * object onto the remote list, the thread's own onto its list. The other threads' objects keep
 * their contents throughout. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/cpus.h"
#include "tests/support/layer_calls.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SHARDS 2
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER trem
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>

LAYER_CALLS(t, trem)

enum { SIZE = 64, N = 512 };
static int cpu[2];          /* cpu[0] even: shard 0; cpu[1] odd: shard 1 */
static void *shard0[N];     /* objects the even CPU's thread allocated, live */
static unsigned next0;      /* the first of them not freed yet */
static unsigned double_frees;

static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    if (kind == SM_ERR_DOUBLE_FREE)
        __atomic_add_fetch(&double_frees, 1, __ATOMIC_RELAXED);
}

static unsigned cls64(void) { return sm_sizeclass_tc_size_to_class(SIZE); }
/* Objects of shard 0's 64-byte class that came back to its slabs. */
static uint64_t home_frees(void) { return __atomic_load_n(&sl_obj.cls[cls64()].nfree, __ATOMIC_RELAXED); }

static void alloc_body(void *unused)
{
    (void)unused;
    for (unsigned i = 0; i < N; i++) {
        shard0[i] = t_malloc(SIZE);
        check_fill(shard0[i], SIZE, i);
    }
}

/* The other objects of shard 0 still hold their patterns. */
static void shard0_intact(void)
{
    unsigned bad = 0;
    for (unsigned i = next0; i < N; i++)
        bad += !check_verify(shard0[i], SIZE, i);
    CHECKF(bad == 0, "%u live objects of shard 0 lost their contents", bad);
}

static int is_shard0(const void *p)
{
    for (unsigned i = 0; i < N; i++)
        if (shard0[i] == p)
            return 1;
    return 0;
}

/* This thread's first object makes its cache; then one of shard 0's objects is freed here. */
static void not_reused_body(void *unused)
{
    (void)unused;
    void *own = t_malloc(SIZE);
    struct trem_cache *c = trem_tls;
    unsigned cls = cls64(), local = c->list[cls].count;
    CHECKF(c->foreign != 0, "a second thread's cache on another shard sees no foreign words");
    t_free(shard0[next0++]);
    CHECKF(c->remote[cls].count == 1 && c->list[cls].count == local, "remote list %u (want 1), list %u (want %u)",
           c->remote[cls].count, c->list[cls].count, local);
    unsigned reused = 0;
    for (unsigned i = 0; i < 200; i++) {
        unsigned char *p = t_malloc(SIZE);
        reused += is_shard0(p);
        memset(p, 0xa5, SIZE);
        t_free(p);
    }
    CHECKF(reused == 0, "%u of 200 objects handed out were another shard's, freed here", reused);
    /* A full remote list goes home as one batch, then takes the free that found it full. */
    uint64_t before = home_frees();
    unsigned batch = trem_batch_of(cls), room = batch - c->remote[cls].count;
    for (unsigned i = 0; i <= room; i++)
        t_free(shard0[next0++]);
    CHECKF(home_frees() - before == batch && c->remote[cls].count == 1,
           "a full remote list sent %llu objects home (want %u), %u left (want 1)",
           (unsigned long long)(home_frees() - before), batch, c->remote[cls].count);
    /* A second free of the object on the remote list: one report, nothing changes. */
    void *last = shard0[next0 - 1];
    unsigned reports = __atomic_load_n(&double_frees, __ATOMIC_RELAXED);
    t_free(last);
    CHECKF(__atomic_load_n(&double_frees, __ATOMIC_RELAXED) - reports == 1 && c->remote[cls].count == 1,
           "double free of a remote-listed object: %u reports (want 1), remote list %u (want 1)",
           __atomic_load_n(&double_frees, __ATOMIC_RELAXED) - reports, c->remote[cls].count);
    /* Two more on the list; the thread's exit (after this body) sends all three home. */
    t_free(shard0[next0++]);
    t_free(shard0[next0++]);
    t_free(own);
    shard0_intact();
}

static void remote_objects_stay_apart(void)
{
    uint64_t before = home_frees();
    if (!run_on_cpu(cpu[1], not_reused_body, NULL)) {
        CHECKF(0, "could not run on CPU %d", cpu[1]);
        return;
    }
    /* the batch, and the three the exit gave back */
    unsigned batch = trem_batch_of(cls64());
    CHECKF(home_frees() - before == batch + 3u, "objects back home after the thread's exit: %llu (want %u)",
           (unsigned long long)(home_frees() - before), batch + 3u);
}

/* Sized frees: the hit path and the whole free (the miss path when the hit is not tried). */
static void sized_body(void *unused)
{
    (void)unused;
    void *own = t_malloc(SIZE);
    struct trem_cache *c = trem_tls;
    unsigned cls = cls64(), local = c->list[cls].count, remote = c->remote[cls].count;
    uintptr_t w = 0;
    CHECK(trem_free_hit(shard0[next0++], SIZE, SM_F_SIZED, &w));
    sm_mctx_t m = sm_mctx_block(shard0[next0++], SIZE, SM_F_SIZED);
    trem_free(&m);
    CHECKF(c->remote[cls].count == remote + 2 && c->list[cls].count == local,
           "two sized frees of shard 0's objects: remote list %u (want %u), list %u (want %u)", c->remote[cls].count,
           remote + 2, c->list[cls].count, local);
    CHECK(trem_free_hit(own, SIZE, SM_F_SIZED, &w));
    CHECKF(c->list[cls].count == local + 1 && c->remote[cls].count == remote + 2,
           "a sized free of the thread's own object: list %u (want %u), remote list %u (want %u)", c->list[cls].count,
           local + 1, c->remote[cls].count, remote + 2);
    unsigned reused = 0;
    for (unsigned i = 0; i < 200; i++) {
        unsigned char *p = t_malloc(SIZE);
        reused += is_shard0(p);
        memset(p, 0x5a, SIZE);
        trem_free_hit(p, SIZE, SM_F_SIZED, &w) || (t_free(p), 1);
    }
    CHECKF(reused == 0, "%u of 200 objects handed out were another shard's, freed here sized", reused);
    shard0_intact();
}

static void sized_frees_stay_apart(void)
{
    if (!run_on_cpu(cpu[1], sized_body, NULL))
        CHECKF(0, "could not run on CPU %d", cpu[1]);
}

/* A thread that allocates from below while shard 0's objects reach it: they are reused. */
static void trader_body(void *unused)
{
    (void)unused;
    enum { OWN = 300 };
    static void *own[OWN];
    unsigned cls = cls64();
    own[0] = t_malloc(SIZE);
    struct trem_cache *c = trem_tls;
    unsigned batch = trem_batch_of(cls), batches = c->batches;
    for (unsigned i = 0; i + 1 < batch; i++) /* the remote list full but one */
        t_free(shard0[next0++]);
    for (unsigned i = 1; i < OWN; i++) /* batches from below meanwhile */
        own[i] = t_malloc(SIZE);
    CHECKF(c->batches - batches >= 2, "300 objects took %u batches from below (want 2 or more)", c->batches - batches);
    unsigned local = c->list[cls].count;
    CHECKF(local < c->list[cls].limit, "no room on the list: %u of %u", local, c->list[cls].limit);
    uint64_t before = home_frees();
    t_free(shard0[next0++]); /* the remote list's last room */
    t_free(shard0[next0++]); /* finds it full: the objects join the list, as far as it has room */
    unsigned joined = c->list[cls].count - local;
    CHECKF(joined > 0 && c->foreign == 0 && c->remote[cls].count == 1,
           "a trader's full remote list: %u joined its list, foreign %#lx, %u left on it (want > 0, 0, 1)", joined,
           (unsigned long)c->foreign, c->remote[cls].count);
    CHECKF(home_frees() - before + joined == batch, "of a batch of %u, %u joined and %llu went home", batch, joined,
           (unsigned long long)(home_frees() - before));
    /* trusted for a while: shard 0's next object goes on the list, where malloc takes it */
    void *p = shard0[next0++], *room = t_malloc(SIZE); /* room on the list: a full one sends it down */
    t_free(p);
    unsigned remote = c->remote[cls].count;
    bool head = c->list[cls].head == p;
    void *again = t_malloc(SIZE);
    CHECKF(remote == 1 && head && again == p,
           "a trusted thread did not cache another shard's object on its list: remote list %u (want 1), on the list's head %d, "
           "handed out again %d", remote, head, again == p);
    t_free(p);
    t_free(room);
    for (unsigned i = 0; i < OWN; i++)
        t_free(own[i]);
    shard0_intact();
}

static void traders_reuse(void)
{
    if (!run_on_cpu(cpu[1], trader_body, NULL))
        CHECKF(0, "could not run on CPU %d", cpu[1]);
}

int main(void)
{
    check_begin("thread_cache_remote");
    sm_err_callback_set(on_error);
    int c2[2];
    if (!cpus_of_both_parities(c2)) {
        printf("skip thread_cache_remote: needs two CPUs\n");
        return check_end();
    }
    cpu[0] = c2[0], cpu[1] = c2[1];
    if (!run_on_cpu(cpu[0], alloc_body, NULL)) {
        printf("skip thread_cache_remote: cannot run on CPU %d\n", cpu[0]);
        return check_end();
    }
    RUN_CASE(remote_objects_stay_apart);
    RUN_CASE(sized_frees_stay_apart);
    RUN_CASE(traders_reuse);
    for (unsigned i = next0; i < N; i++)
        t_free(shard0[i]);
    return check_end();
}
