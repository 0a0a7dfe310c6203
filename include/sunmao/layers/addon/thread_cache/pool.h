/* thread_cache's shared budget (the sync slot; the paper's bare `thread_cache(sync, ...)`): with a
 * sync policy, the caches of all threads together hold at most SM_OPT_TOTAL_BYTES. Each cache's
 * budget is granted from a pool, in steps, as its lists grow: first from the unclaimed bytes, then
 * by stealing a step from other caches, round robin. The sync policy guards the pool: the unclaimed
 * bytes, the registry of caches and every write of a cache's budget. No hit path reads any of it;
 * a cache's owner reads its budget (a relaxed load) on slow paths, and on each slow-path event
 * compares it with its capacity, trimming its lists when a thief lowered it (trim, reclaim.h).
 * Without a sync policy, each thread has SM_OPT_CACHE_BYTES of its own and no state is shared.
 *
 * Invariants (under the lock): unclaimed + the sum of the registered caches' budgets == total; a
 * cache's budget <= its want (SM_OPT_CACHE_BYTES, or its core's share). A victim keeps at least
 * one step. The bytes cached may exceed the total only between a theft and the victim's next
 * slow path (its capacity is its own to lower: a thread idle in the meantime holds what it had).
 * Sections run under the policy's atomic_exec (no TLS, no errno: a combiner may run them).
 * Lock order: the pool lock, then nothing (sections call no other layer). Fork: the child keeps
 * only the forking thread's cache registered; the budgets of the others return to the pool.
 * A part of layers/addon/thread_cache.h, which includes it after its types (no include guard).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn SM_SYNC=spinlock
 * @check-next: fake */
#ifndef SM_THREAD_CACHE_PARTS
#include "../thread_cache.h"
#else

SM_INLINE size_t SM_FN(budget_now)(const struct SM_FN(cache) *cache)
{
    return __atomic_load_n(&cache->budget, __ATOMIC_RELAXED);
}

#ifdef SM_SYNC
enum { SM_FN(pooled) = 1 };
/* Budget moves in steps: a sixteenth of a thread's budget, so a thread takes the lock about
 * sixteen times to reach its full budget, and a theft costs a victim a sixteenth. */
#define SM_TC_STEP ((size_t)(SM_OPT_CACHE_BYTES) / 16 > 4096 ? (size_t)(SM_OPT_CACHE_BYTES) / 16 : (size_t)4096)

static struct {
    SM_SYNC_FN(t) lock;
    size_t unclaimed;                   /* total - the registered caches' budgets */
    struct SM_FN(cache) *head, *thief_at; /* the registry; where the next theft starts */
    bool started;                       /* unclaimed was set to the total */
} SM_FN(pool) = { SM_SYNC_INIT, 0, NULL, NULL, false };

SM_INLINE void SM_FN(set_budget)(struct SM_FN(cache) *cache, size_t budget)
{
    __atomic_store_n(&cache->budget, budget, __ATOMIC_RELAXED);
}

/* Up to `want` more bytes for `cache`, from the unclaimed bytes, then stolen a step at a time
 * from the other caches, at most one lap of the registry (a section). */
struct SM_FN(cs_claim) { struct SM_FN(cache) *cache; size_t want, got; };
SM_INLINE void SM_FN(cs_claim)(void *arg)
{
    struct SM_FN(cs_claim) *k = (struct SM_FN(cs_claim) *)arg;
    size_t take = k->want < SM_FN(pool).unclaimed ? k->want : SM_FN(pool).unclaimed;
    SM_FN(pool).unclaimed -= take;
    k->got = take;
    struct SM_FN(cache) *v = SM_FN(pool).thief_at ? SM_FN(pool).thief_at : SM_FN(pool).head;
    for (struct SM_FN(cache) *first = v; v && k->got < k->want;) {
        size_t has = v->budget;
        if (v != k->cache && has > 2 * SM_TC_STEP - 1) {
            size_t steal = k->want - k->got < SM_TC_STEP ? k->want - k->got : SM_TC_STEP;
            SM_FN(set_budget)(v, has - steal);
            k->got += steal;
        }
        v = v->pool_next ? v->pool_next : SM_FN(pool).head;
        SM_FN(pool).thief_at = v;
        if (v == first)
            break;
    }
    SM_FN(set_budget)(k->cache, k->cache->budget + k->got);
}

/* Registers cache and grants it a first step, if one is unclaimed; or unregisters it and returns
 * its budget (a section). */
struct SM_FN(cs_member) { struct SM_FN(cache) *cache; bool join; };
SM_INLINE void SM_FN(cs_member)(void *arg)
{
    struct SM_FN(cs_member) *m = (struct SM_FN(cs_member) *)arg;
    struct SM_FN(cache) *c = m->cache;
    if (!SM_FN(pool).started) {
        SM_FN(pool).unclaimed = (size_t)(SM_OPT_TOTAL_BYTES);
        SM_FN(pool).started = true;
    }
    if (m->join) {
        size_t first = SM_TC_STEP < SM_FN(pool).unclaimed ? SM_TC_STEP : SM_FN(pool).unclaimed;
        first = first < c->want ? first : c->want;
        SM_FN(pool).unclaimed -= first;
        SM_FN(set_budget)(c, first);
        c->pool_prev = NULL;
        c->pool_next = SM_FN(pool).head;
        if (c->pool_next)
            c->pool_next->pool_prev = c;
        SM_FN(pool).head = c;
        return;
    }
    SM_FN(pool).unclaimed += c->budget;
    SM_FN(set_budget)(c, 0);
    if (SM_FN(pool).thief_at == c)
        SM_FN(pool).thief_at = c->pool_next;
    if (c->pool_prev)
        c->pool_prev->pool_next = c->pool_next;
    else
        SM_FN(pool).head = c->pool_next;
    if (c->pool_next)
        c->pool_next->pool_prev = c->pool_prev;
}

/* Returns the part of cache's budget above its want (a section). */
SM_INLINE void SM_FN(cs_give_back)(void *arg)
{
    struct SM_FN(cache) *c = (struct SM_FN(cache) *)arg;
    if (c->budget > c->want) {
        SM_FN(pool).unclaimed += c->budget - c->want;
        SM_FN(set_budget)(c, c->want);
    }
}

SM_SLOWPATH void SM_FN(pool_join)(struct SM_FN(cache) *cache)
{
    struct SM_FN(cs_member) m = { cache, true };
    SM_SYNC_FN(atomic_exec)(&SM_FN(pool).lock, SM_FN(cs_member), &m);
}

SM_SLOWPATH void SM_FN(pool_leave)(struct SM_FN(cache) *cache)
{
    struct SM_FN(cs_member) m = { cache, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(pool).lock, SM_FN(cs_member), &m);
}

/* cache needs `bytes` more than its budget: asks the pool for them, rounded up to a step, within
 * its want. */
SM_SLOWPATH void SM_FN(pool_claim)(struct SM_FN(cache) *cache, size_t bytes)
{
    size_t budget = SM_FN(budget_now)(cache);
    if (budget >= cache->want)
        return;
    size_t want = sm_align_up(bytes, SM_TC_STEP);
    struct SM_FN(cs_claim) k = { cache, want < cache->want - budget ? want : cache->want - budget, 0 };
    SM_SYNC_FN(atomic_exec)(&SM_FN(pool).lock, SM_FN(cs_claim), &k);
}

/* The cache's want changed (its core): the excess of its budget goes back to the pool. */
SM_SLOWPATH void SM_FN(pool_follow_want)(struct SM_FN(cache) *cache)
{
    if (SM_FN(budget_now)(cache) > cache->want)
        SM_SYNC_FN(atomic_exec)(&SM_FN(pool).lock, SM_FN(cs_give_back), cache);
}

/* Calls fn on every registered cache, in a section (statistics: fn only reads). */
struct SM_FN(cs_each) { void (*fn)(struct SM_FN(cache) *, void *); void *arg; };
SM_INLINE void SM_FN(cs_each)(void *arg)
{
    struct SM_FN(cs_each) *e = (struct SM_FN(cs_each) *)arg;
    for (struct SM_FN(cache) *c = SM_FN(pool).head; c; c = c->pool_next)
        e->fn(c, e->arg);
}
SM_SLOWPATH void SM_FN(pool_each)(void (*fn)(struct SM_FN(cache) *, void *), void *arg)
{
    struct SM_FN(cs_each) e = { fn, arg };
    SM_SYNC_FN(atomic_exec)(&SM_FN(pool).lock, SM_FN(cs_each), &e);
}

/* The forking thread holds the pool lock across fork (fork_prepare), so the registry is whole. */
SM_INLINE void SM_FN(pool_fork_prepare)(void) { SM_SYNC_FN(fork_lock)(&SM_FN(pool).lock); }
SM_INLINE void SM_FN(pool_fork_parent)(void) { SM_SYNC_FN(fork_unlock)(&SM_FN(pool).lock); }
SM_INLINE void SM_FN(pool_fork_child)(struct SM_FN(cache) *mine)
{
    SM_SYNC_FN(reinit)(&SM_FN(pool).lock);
    if (!SM_FN(pool).started)
        return;
    bool registered = mine && !SM_FN(is_static)(mine);
    SM_FN(pool).head = registered ? mine : NULL;
    SM_FN(pool).thief_at = NULL;
    SM_FN(pool).unclaimed = (size_t)(SM_OPT_TOTAL_BYTES) - (registered ? mine->budget : 0);
    if (registered)
        mine->pool_next = mine->pool_prev = NULL;
}
#undef SM_TC_STEP

#else /* no sync policy: every cache's budget is its want, nothing is shared */
enum { SM_FN(pooled) = 0 };
/* No budget is shared, but statistics read every cache: a registry under a platform lock, taken
 * only when a thread's cache comes or goes and when statistics are read. */
static struct {
    sm_plat_lock_t lock;
    struct SM_FN(cache) *head;
} SM_FN(pool) = { SM_PLAT_LOCK_INIT, NULL };
SM_SLOWPATH void SM_FN(pool_join)(struct SM_FN(cache) *cache)
{
    cache->budget = cache->want;
    sm_plat_lock(&SM_FN(pool).lock);
    cache->pool_prev = NULL;
    cache->pool_next = SM_FN(pool).head;
    if (cache->pool_next)
        cache->pool_next->pool_prev = cache;
    SM_FN(pool).head = cache;
    sm_plat_unlock(&SM_FN(pool).lock);
}
SM_SLOWPATH void SM_FN(pool_leave)(struct SM_FN(cache) *c)
{
    sm_plat_lock(&SM_FN(pool).lock);
    if (c->pool_prev)
        c->pool_prev->pool_next = c->pool_next;
    else
        SM_FN(pool).head = c->pool_next;
    if (c->pool_next)
        c->pool_next->pool_prev = c->pool_prev;
    sm_plat_unlock(&SM_FN(pool).lock);
}
SM_SLOWPATH void SM_FN(pool_each)(void (*fn)(struct SM_FN(cache) *, void *), void *arg)
{
    sm_plat_lock(&SM_FN(pool).lock);
    for (struct SM_FN(cache) *c = SM_FN(pool).head; c; c = c->pool_next)
        fn(c, arg);
    sm_plat_unlock(&SM_FN(pool).lock);
}
SM_INLINE void SM_FN(pool_claim)(struct SM_FN(cache) *cache, size_t bytes) { (void)cache, (void)bytes; }
SM_INLINE void SM_FN(pool_follow_want)(struct SM_FN(cache) *cache) { cache->budget = cache->want; }
SM_INLINE void SM_FN(pool_fork_prepare)(void) { sm_plat_lock(&SM_FN(pool).lock); }
SM_INLINE void SM_FN(pool_fork_parent)(void) { sm_plat_unlock(&SM_FN(pool).lock); }
/* The child keeps the forking thread's cache only: the others' threads do not exist there. */
SM_INLINE void SM_FN(pool_fork_child)(struct SM_FN(cache) *mine)
{
    sm_plat_lock_reinit(&SM_FN(pool).lock);
    bool registered = mine && !SM_FN(is_static)(mine);
    SM_FN(pool).head = registered ? mine : NULL;
    if (registered)
        mine->pool_next = mine->pool_prev = NULL;
}
#endif

#endif /* SM_THREAD_CACHE_PARTS */
