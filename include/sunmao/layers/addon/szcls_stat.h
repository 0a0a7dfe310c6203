/* szcls_stat: an add-on layer that counts the requests passing it toward the OS by size class (the
 * Mortise paper's Table 2 `szcls_stat`, the text's `szclas_stat`): allocations and frees apart, per
 * thread, merged on read. It changes nothing it passes on, so it can sit above any layer.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots:
 *   SM_SIZECLASS  (required) the classes counted: a size up to the policy's max_size is counted in
 *                 its class; a larger one in the "large" bucket of its power of two, (2^(e-1), 2^e]
 * Options:
 *   SM_OPT_PRINT_AT_EXIT  1: print the histogram as a table on stderr at normal exit (default 0)
 * Properties, capabilities: the next layer's (every capability is forwarded; offers what it offers).
 *
 * What is counted: an allocation that the next layer served (alloc, alloc_miss, a hit of alloc_hit;
 * alloc_batch counts every object it got), by the size asked (read before the call: a layer below
 * may round c->size); a free, by its size when sized (SM_F_SIZED), else by the usable size the next
 * layer's getmeta gives before the block goes down (a free getmeta does not know is counted apart,
 * as `unknown`); free_batch counts each block by getmeta. A hit that misses counts nothing: the
 * miss that follows counts the request once. resize, split, remap and purge are not counted.
 * Per thread: one initial-exec TLS block of counters (2 x (classes + large buckets) words: 1.6 KiB
 * with `tc`; a library loaded late by dlopen may find no static TLS left for it), written with plain
 * adds (a relaxed load and store: no locked instruction on a request path). A thread's first
 * request attaches it to the lifecycle service (platform/lifecycle.h) and links its block into the
 * layer's registry, under the registry lock: the only times a request takes it. At thread exit the
 * block is added to the process total and unlinked, under the lock; a thread that could not attach,
 * or one that asks again after its exit (a later destructor), counts straight into the total with
 * relaxed atomic adds, so no count is lost. A fork child keeps only the forking thread's block
 * linked, the others folded into the total (their memory is the C library's to reuse).
 * Reading (L_szcls_read, L_stats, the exit table): under the registry lock, the total plus every
 * linked block, read with relaxed loads: exact for threads that are quiet, a few requests behind
 * for one that is running.
 * Statistics: the layer's entry (core/stats.h) carries nmalloc/nfree, the totals over every bucket;
 * the histogram is not added to the per-class entries (sm_stats_class), since those are a slab
 * layer's objects to and from the layer above and this layer's sizes would be added to the same
 * rows (or make rows with no slabs): read it with L_szcls_read or the exit table.
 * API beyond the contract: L_buckets (count), L_bucket_of(size), L_bucket_top(b) (the largest size
 * bucket b holds), L_unknown (the index of the `unknown` free counter); L_szcls_read(struct
 * L_counts *out) fills out->n[op][b] (op 0 malloc, 1 free), the merged counts; L_szcls_format(buf,
 * n) the table's text; L_szcls_print() writes it to stderr (no allocation).
 * @model: name=szcls_stat kind=addon alias=szclas_stat slot sizeclass key print_at_exit bool
 * @check: <sunmao/policies/sizeclass/tc.h> SM_LAYER=t SM_SIZECLASS=tc
 * @check-next: fake */
#include "../../core/bits.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "szcls_stat: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "szcls_stat: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SIZECLASS
#error "szcls_stat: policy slot 'sizeclass' is empty (SM_SIZECLASS = tc|log2b|prime|...)"
#endif
#ifndef SM_OPT_PRINT_AT_EXIT
#define SM_OPT_PRINT_AT_EXIT 0
#endif

/* A constant's floor(log2), for the bucket count (bits.h's is a function, not a constant). */
#define SM_SZCLS_LOG2(x) (63 - __builtin_clzll((unsigned long long)(x)))

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = SM_PROP(SM_NEXT, zeroed),
    SM_FN(classes) = SM_SIZECLASS_FN(count),
    SM_FN(large_lo) = SM_SZCLS_LOG2(SM_SIZECLASS_FN(max_size)) + 1, /* the first large bucket's e */
    SM_FN(buckets) = SM_FN(classes) + (64 - SM_FN(large_lo) + 1),
    SM_FN(unknown) = SM_FN(buckets), /* a free whose size getmeta did not know (n[1] only) */
};
#undef SM_SZCLS_LOG2

struct SM_FN(counts) { uint64_t n[2][SM_FN(buckets) + 1]; };

/* A thread's block: its counters, its registry links, its state (0 new, 1 linked, 2 retired). */
struct SM_FN(tls_t) {
    struct SM_FN(counts) c;
    struct SM_FN(tls_t) *next, *prev;
    unsigned state;
};
static __thread struct SM_FN(tls_t) SM_FN(tls) __attribute__((tls_model("initial-exec")));

static struct {
    sm_plat_lock_t lock;           /* the registry: taken at a thread's first request and exit */
    struct SM_FN(tls_t) *head;     /* linked blocks (the lock) */
    struct SM_FN(counts) total;    /* exited and retired threads' counts (relaxed atomic adds) */
    sm_plat_once_t print_once;
} SM_FN(obj) = { SM_PLAT_LOCK_INIT, NULL, { { { 0 } } }, SM_PLAT_ONCE_INIT };

SM_INLINE unsigned SM_FN(bucket_of)(size_t size)
{
    if (size <= (size_t)SM_SIZECLASS_FN(max_size))
        return SM_SIZECLASS_FN(size_to_class)(size);
    return SM_FN(classes) + sm_log2_ceil(size) - SM_FN(large_lo);
}

/* The largest size bucket b counts (SIZE_MAX for the last). */
SM_INLINE size_t SM_FN(bucket_top)(unsigned b)
{
    if (b < (unsigned)SM_FN(classes))
        return SM_SIZECLASS_FN(class_to_size)(b);
    unsigned e = b - SM_FN(classes) + SM_FN(large_lo);
    return e >= 64 ? SIZE_MAX : ((size_t)1 << e);
}

SM_INLINE void SM_FN(thread_exit)(void);
SM_SLOWPATH SM_UNUSED void SM_FN(szcls_print)(void);
SM_SLOWPATH void SM_FN(print_at_exit)(void) { SM_FN(szcls_print)(); }
SM_SLOWPATH void SM_FN(print_register)(void) { (void)sm_plat_at_exit(SM_FN(print_at_exit)); }

SM_INLINE int SM_FN(create)(void)
{
    if (SM_OPT_PRINT_AT_EXIT)
        sm_plat_once(&SM_FN(obj).print_once, SM_FN(print_register));
    return SM_NEXT_FN(create)();
}

/* The calling thread's first request: link its block, or retire it when no exit hook is left (its
 * counts would otherwise vanish with the thread). True: count in the block. */
SM_SLOWPATH bool SM_FN(enter)(struct SM_FN(tls_t) *t)
{
    if (t->state != 0)
        return false;
    if (!sm_thread_attach(SM_FN(thread_exit))) {
        t->state = 2;
        return false;
    }
    sm_plat_lock(&SM_FN(obj).lock);
    t->prev = NULL;
    t->next = SM_FN(obj).head;
    if (t->next)
        t->next->prev = t;
    SM_FN(obj).head = t;
    t->state = 1;
    sm_plat_unlock(&SM_FN(obj).lock);
    return true;
}

SM_INLINE void SM_FN(count)(unsigned op, unsigned b, uint64_t k)
{
    struct SM_FN(tls_t) *t = &SM_FN(tls);
    if (sm_unlikely(t->state != 1) && !SM_FN(enter)(t)) {
        __atomic_add_fetch(&SM_FN(obj).total.n[op][b], k, __ATOMIC_RELAXED);
        return;
    }
    /* Only this thread writes the word; readers load it racily, hence atomic, but no RMW. */
    uint64_t *w = &t->c.n[op][b];
    __atomic_store_n(w, __atomic_load_n(w, __ATOMIC_RELAXED) + k, __ATOMIC_RELAXED);
}

/* Adds t's counts to the total and unlinks t (the registry lock held). */
SM_SLOWPATH void SM_FN(fold_locked)(struct SM_FN(tls_t) *t)
{
    for (unsigned op = 0; op < 2; op++)
        for (unsigned b = 0; b <= (unsigned)SM_FN(buckets); b++) {
            uint64_t v = __atomic_load_n(&t->c.n[op][b], __ATOMIC_RELAXED);
            if (v)
                __atomic_add_fetch(&SM_FN(obj).total.n[op][b], v, __ATOMIC_RELAXED);
            t->c.n[op][b] = 0;
        }
    if (t->prev)
        t->prev->next = t->next;
    else
        SM_FN(obj).head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->next = t->prev = NULL;
}

/* The bucket of a free, asked before the block goes down. */
SM_INLINE unsigned SM_FN(free_bucket)(void *p, size_t size, unsigned flags)
{
    if (flags & SM_F_SIZED)
        return SM_FN(bucket_of)(size);
    sm_mctx_t q = sm_mctx_block(p, 0, 0);
    return SM_NEXT_FN(getmeta)(&q) ? SM_FN(bucket_of)(q.usable) : (unsigned)SM_FN(unknown);
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t n = c->size;
    void *p = SM_NEXT_FN(alloc)(c);
    if (p)
        SM_FN(count)(0, SM_FN(bucket_of)(n), 1);
    return p;
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    unsigned b = SM_FN(free_bucket)(c->ptr, c->size, c->flags);
    SM_NEXT_FN(free)(c);
    SM_FN(count)(1, b, 1);
}

/* HIT, forwarded: counted only when the next layer's hit took the request. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    void *p = SM_NEXT_FN(alloc_hit)(size);
    if (p)
        SM_FN(count)(0, SM_FN(bucket_of)(size), 1);
    return p;
}

SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT))
        return false; /* its hit always misses: no getmeta for nothing */
    unsigned b = SM_FN(free_bucket)(p, size, flags);
    if (!SM_NEXT_FN(free_hit)(p, size, flags, owner_word))
        return false;
    SM_FN(count)(1, b, 1);
    return true;
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    size_t n = c->size;
    void *p = SM_NEXT_FN(alloc_miss)(c);
    if (p)
        SM_FN(count)(0, SM_FN(bucket_of)(n), 1);
    return p;
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    unsigned b = SM_FN(free_bucket)(c->ptr, c->size, c->flags);
    SM_NEXT_FN(free_miss)(c);
    SM_FN(count)(1, b, 1);
}

enum { SM_FN(batch_classes) = SM_PROP(SM_NEXT, batch_classes), SM_FN(batch_max_size) = SM_PROP(SM_NEXT, batch_max_size) };
SM_INLINE unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    size_t size = c->size;
    unsigned got = SM_NEXT_FN(alloc_batch)(c, out, n);
    if (got)
        SM_FN(count)(0, SM_FN(bucket_of)(size), got);
    return got;
}

SM_INLINE void SM_FN(free_batch)(void **blocks, unsigned n)
{
    for (unsigned i = 0; i < n; i++) /* counted first: after the call the blocks are not ours to ask about */
        SM_FN(count)(1, SM_FN(free_bucket)(blocks[i], 0, 0), 1);
    SM_NEXT_FN(free_batch)(blocks, n);
}

SM_HOT uintptr_t SM_FN(block_owner)(const void *p) { return SM_NEXT_FN(block_owner)(p); }
SM_HOT unsigned SM_FN(owner_slot)(const void *p, uintptr_t w) { return SM_NEXT_FN(owner_slot)(p, w); }
SM_INLINE bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c) { return SM_NEXT_FN(owner_local)(p, w, c); }
SM_INLINE uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c) { return SM_NEXT_FN(owner_foreign)(c); }
SM_INLINE void *SM_FN(split)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(split)(c, n); }
SM_INLINE bool SM_FN(remap)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(remap)(c, n); }
enum { SM_FN(stable_max) = SM_PROP(SM_NEXT, stable_max) };

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }

/* Retired before the fold: a request a later destructor makes counts into the total. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(tls_t) *t = &SM_FN(tls);
    if (t->state == 1) {
        sm_plat_lock(&SM_FN(obj).lock);
        SM_FN(fold_locked)(t);
        sm_plat_unlock(&SM_FN(obj).lock);
    }
    t->state = 2;
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void)
{
    sm_plat_lock(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    sm_plat_unlock(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_parent)();
}
/* The child has one thread: every other block is folded before the C library reuses its memory. */
SM_INLINE void SM_FN(fork_child)(void)
{
    struct SM_FN(tls_t) *t = SM_FN(obj).head;
    while (t) {
        struct SM_FN(tls_t) *next = t->next;
        if (t != &SM_FN(tls))
            SM_FN(fold_locked)(t);
        t = next;
    }
    sm_plat_lock_reinit(&SM_FN(obj).lock);
    SM_NEXT_FN(fork_child)();
}

/* ---- Reading the counts ---- */

SM_SLOWPATH SM_UNUSED void SM_FN(szcls_read)(struct SM_FN(counts) *out)
{
    sm_plat_lock(&SM_FN(obj).lock);
    for (unsigned op = 0; op < 2; op++)
        for (unsigned b = 0; b <= (unsigned)SM_FN(buckets); b++) {
            uint64_t v = __atomic_load_n(&SM_FN(obj).total.n[op][b], __ATOMIC_RELAXED);
            for (struct SM_FN(tls_t) *t = SM_FN(obj).head; t; t = t->next)
                v += __atomic_load_n(&t->c.n[op][b], __ATOMIC_RELAXED);
            out->n[op][b] = v;
        }
    sm_plat_unlock(&SM_FN(obj).lock);
}

SM_SLOWPATH SM_UNUSED void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    uint64_t sum[2] = { 0, 0 };
    sm_plat_lock(&SM_FN(obj).lock);
    for (unsigned op = 0; op < 2; op++)
        for (unsigned b = 0; b <= (unsigned)SM_FN(buckets); b++) {
            sum[op] += __atomic_load_n(&SM_FN(obj).total.n[op][b], __ATOMIC_RELAXED);
            for (struct SM_FN(tls_t) *t = SM_FN(obj).head; t; t = t->next)
                sum[op] += __atomic_load_n(&t->c.n[op][b], __ATOMIC_RELAXED);
        }
    sm_plat_unlock(&SM_FN(obj).lock);
    l->nmalloc = sum[0];
    l->nfree = sum[1];
    SM_NEXT_FN(stats)(s);
}

SM_INLINE size_t SM_FN(put)(char *buf, size_t at, size_t n, const char *s)
{
    while (*s && at + 1 < n)
        buf[at++] = *s++;
    if (n)
        buf[at < n ? at : n - 1] = 0;
    return at;
}

/* v right-aligned in `width` columns (a suffix K/M/G... for an exact multiple, when `units`). */
SM_INLINE size_t SM_FN(put_num)(char *buf, size_t at, size_t n, uint64_t v, unsigned width, bool units)
{
    static const char suffix[] = " KMGTPE";
    char d[32];
    unsigned i = sizeof d - 1, u = 0;
    d[i] = 0;
    while (units && v >= 1024 && !(v & 1023)) {
        v >>= 10;
        u++;
    }
    if (u)
        d[--i] = suffix[u];
    do
        d[--i] = (char)('0' + v % 10);
    while ((v /= 10) && i);
    while (sizeof d - 1 - i < width && i)
        d[--i] = ' ';
    return SM_FN(put)(buf, at, n, d + i);
}

/* The table: a heading, one row per bucket with a count (its largest size, mallocs, frees), the
 * `unknown` frees if any, and the totals, e.g.
 *   szcls_stat t: requests passed down by size class
 *            size        nmalloc          nfree
 *              32             10             10
 *      large 1M                2              2
 * Returns its length; text past n - 1 bytes is cut. */
SM_SLOWPATH SM_UNUSED size_t SM_FN(szcls_format)(char *buf, size_t n)
{
    static struct SM_FN(counts) k; /* too large for a small stack; the registry lock orders readers */
    static sm_plat_lock_t fmt_lock = SM_PLAT_LOCK_INIT;
    sm_plat_lock(&fmt_lock);
    SM_FN(szcls_read)(&k);
    size_t at = 0;
    uint64_t sum[2] = { 0, 0 };
    if (n)
        buf[0] = 0;
    at = SM_FN(put)(buf, at, n, "szcls_stat " SM_LAYER_NAME ": requests passed down by size class\n");
    at = SM_FN(put)(buf, at, n, "            size        nmalloc          nfree\n");
    for (unsigned b = 0; b <= (unsigned)SM_FN(buckets); b++) {
        sum[0] += k.n[0][b];
        sum[1] += k.n[1][b];
        if (!k.n[0][b] && !k.n[1][b])
            continue;
        if (b == (unsigned)SM_FN(unknown)) {
            at = SM_FN(put)(buf, at, n, "         unknown");
        } else if (b >= (unsigned)SM_FN(classes)) {
            at = SM_FN(put)(buf, at, n, "  large");
            at = SM_FN(put_num)(buf, at, n, SM_FN(bucket_top)(b), 9, true);
        } else {
            at = SM_FN(put_num)(buf, at, n, SM_FN(bucket_top)(b), 16, false);
        }
        at = SM_FN(put_num)(buf, at, n, k.n[0][b], 15, false);
        at = SM_FN(put_num)(buf, at, n, k.n[1][b], 15, false);
        at = SM_FN(put)(buf, at, n, "\n");
    }
    at = SM_FN(put)(buf, at, n, "           total");
    at = SM_FN(put_num)(buf, at, n, sum[0], 15, false);
    at = SM_FN(put_num)(buf, at, n, sum[1], 15, false);
    at = SM_FN(put)(buf, at, n, "\n");
    sm_plat_unlock(&fmt_lock);
    return at;
}

SM_SLOWPATH SM_UNUSED void SM_FN(szcls_print)(void)
{
    static char text[8192]; /* every row of the largest policy: about 150 x 47 bytes */
    static sm_plat_lock_t print_lock = SM_PLAT_LOCK_INIT;
    sm_plat_lock(&print_lock);
    size_t len = SM_FN(szcls_format)(text, sizeof text);
    sm_plat_write_stderr(text, len);
    sm_plat_unlock(&print_lock);
}

#undef SM_OPT_PRINT_AT_EXIT
#define SM_LAYER_OFFERS SM_CAP_ALL
#define SM_LAYER_CAPS   SM_CAPS(SM_NEXT)
#define SM_LAYER_STATS  1
#include "../../core/layer_end.h"
