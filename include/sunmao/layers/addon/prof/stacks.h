/* prof/stacks.h: the records of unique allocation stacks. Part of layers/addon/prof.h.
 *
 * One record per distinct stack (its return addresses, innermost first, the allocator's own frames
 * left out), with the counts a profile prints: live objects and bytes, and every sampled object
 * and byte since the start (or the last reset). A chained hash table of fixed size (2^14 buckets:
 * a program rarely has more distinct allocating stacks than that; chains stay short beyond it) and
 * records carved from pages of the platform's map: the profiler never calls malloc, which may be
 * itself. Records are never freed (a stack that was sampled once stays in the profile, with its
 * counts); all under the layer's lock. *
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sync/mutex.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/addon/thread_cache.h> SM_LAYER=p SM_NEXT=t SM_SYNC=mutex SM_ERR=warn
 * @check-next: fake */
#ifndef SM_PROF_PARTS
#include "../prof.h"
#else

#define SM_PROF_BUCKETS (1u << 14)
#define SM_PROF_ARENA   ((size_t)1 << 20)

struct SM_FN(rec) {
    struct SM_FN(rec) *next_all, *next_hash;
    uint64_t hash;
    uint64_t live_n, live_b, total_n, total_b;
    unsigned depth;
    void *pcs[];
};

SM_INLINE uint64_t SM_FN(hash)(void *const *pcs, unsigned n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= (uintptr_t)pcs[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

/* Under the lock: the record of this stack, made if new; NULL when no memory is left for it. */
SM_INLINE struct SM_FN(rec) *SM_FN(rec_find)(void *const *pcs, unsigned n)
{
    if (!SM_FN(obj).buckets) {
        SM_FN(obj).buckets = (struct SM_FN(rec) **)sm_plat_map(SM_PROF_BUCKETS * sizeof(void *));
        if (!SM_FN(obj).buckets)
            return NULL;
    }
    uint64_t h = SM_FN(hash)(pcs, n);
    struct SM_FN(rec) **b = &SM_FN(obj).buckets[h & (SM_PROF_BUCKETS - 1)];
    for (struct SM_FN(rec) *r = *b; r; r = r->next_hash)
        if (r->hash == h && r->depth == n && memcmp(r->pcs, pcs, n * sizeof(void *)) == 0)
            return r;
    size_t need = sm_align_up(sizeof(struct SM_FN(rec)) + n * sizeof(void *), 16);
    if (SM_FN(obj).arena_left < need) {
        char *a = (char *)sm_plat_map(SM_PROF_ARENA);
        if (!a)
            return NULL;
        SM_FN(obj).arena = a, SM_FN(obj).arena_left = SM_PROF_ARENA;
    }
    struct SM_FN(rec) *r = (struct SM_FN(rec) *)SM_FN(obj).arena;
    SM_FN(obj).arena += need, SM_FN(obj).arena_left -= need;
    memset(r, 0, sizeof *r);
    r->hash = h, r->depth = n;
    memcpy(r->pcs, pcs, n * sizeof(void *));
    r->next_hash = *b, *b = r;
    r->next_all = SM_FN(obj).all, SM_FN(obj).all = r;
    SM_FN(obj).nrecs++;
    return r;
}

#endif /* SM_PROF_PARTS */
