/* A heap's operations (part of sockets/heap/heap.h), each under the heap's lock, dispatched to its
 * kind; what the API in sockets/heap_api.h calls once it has checked the handle.
 * @check: <sunmao/policies/err/warn.h> SM_HEAP_RAISE=sm_err_warn_raise */
#ifndef SM_HEAP_PARTS
#include "heap.h"
#else

/* Where a heap made inside the caller's range puts its object and its one span, or NULL when the
 * range cannot hold both and some room for blocks. */
static SM_UNUSED sm_heap_t *sm_heap_place_in(void *base, size_t size, sm_heap_span_t **span, size_t *span_bytes)
{
    uintptr_t b = (uintptr_t)base, end = b + size;
    if (!base || end < b)
        return NULL;
    uintptr_t obj = sm_align_up(b, 64);
    uintptr_t s = sm_align_up(obj + sizeof(sm_heap_t), 16);
    end &= ~(uintptr_t)15;
    if (s >= end || end - s < SM_HEAP_SPAN_HDR + SM_HT_HDR + 2 * SM_HT_MIN_BLOCK)
        return NULL;
    *span = (sm_heap_span_t *)s;
    *span_bytes = end - s;
    return (sm_heap_t *)obj;
}

/* A new heap from a parsed spec, over the OS (base NULL) or inside [base, base + size); NULL
 * with errno ENOMEM or EINVAL (a range too small). */
static SM_UNUSED sm_heap_t *sm_heap_new(const sm_heap_spec_t *spec, void *base, size_t size)
{
    sm_heap_t *h;
    sm_heap_span_t *span = NULL;
    size_t span_bytes = 0;
    if (base || size) {
        h = size <= SM_HEAP_RANGE_MAX ? sm_heap_place_in(base, size, &span, &span_bytes) : NULL;
        if (!h) {
            errno = EINVAL;
            return NULL;
        }
        memset(h, 0, sizeof *h);
    } else {
        sm_plat_lock(&sm_heaps_list_lock);
        h = sm_heaps_spare;
        if (h)
            sm_heaps_spare = h->next;
        sm_plat_unlock(&sm_heaps_list_lock);
        if (h)
            memset(h, 0, sizeof *h);
        else if (!(h = (sm_heap_t *)sm_plat_map(sizeof *h))) /* zero-filled */
            return NULL;
    }
    sm_sync_spinlock_t unlocked = SM_SYNC_spinlock_INIT;
    h->lock = unlocked;
    h->kind = spec->kind;
    h->key = (uint16_t)(sm_secret() ^ ((uintptr_t)h >> 12));
    h->chunk = spec->chunk;
    h->limit = spec->limit;
    h->retain = spec->retain;
    memcpy(h->name, spec->name, sizeof h->name);
    if (base) {
        /* The pages wholly inside the range are the heap's in the registry: a page it shares with
         * other memory stays theirs (a block there is freed with sunmao_heap_free). */
        size_t page = sm_plat_page_size();
        uintptr_t first = sm_align_up((uintptr_t)base, page), last = ((uintptr_t)base + size) & ~(uintptr_t)(page - 1);
        h->reg_prev = last > first ? sm_heaps_owner((void *)first) : NULL;
        if (last > first && !sm_heaps_register((void *)first, last - first, h)) {
            sm_heaps_register((void *)first, last - first, h->reg_prev);
            errno = ENOMEM;
            return NULL;
        }
        h->in_range = true;
        h->reg_lo = first, h->reg_hi = last > first ? last : first;
        memset(span, 0, sizeof *span); /* the caller's bytes: solo and ready must read 0 */
        span->bytes = span_bytes;
        h->spans = span;
        h->stats.mapped = span_bytes;
        if (h->kind == SM_HEAP_TLSF)
            sm_ht_span_init(h, span);
        else
            sm_hr_start(h, span);
    }
    h->magic = SM_HEAP_MAGIC ^ (uint64_t)(uintptr_t)h;
    sm_heaps_link(h);
    return h;
}

static SM_UNUSED void sm_heap_destroy_locked(sm_heap_t *h)
{
    for (sm_heap_span_t *s = h->spans, *next; s; s = next) {
        next = s->next;
        if (s->mapped)
            sm_heap_span_drop(h, s);
    }
    if (h->reg_hi > h->reg_lo)
        sm_heaps_register((void *)h->reg_lo, h->reg_hi - h->reg_lo, h->reg_prev);
}

static SM_UNUSED void sm_heap_delete(sm_heap_t *h)
{
    sm_plat_lock(&sm_heaps_list_lock);
    sm_sync_spinlock_lock(&h->lock);
    sm_heaps_unlink(h);
    h->magic = 0;
    sm_heap_destroy_locked(h);
    sm_sync_spinlock_unlock(&h->lock);
    if (!h->in_range) {
        h->next = sm_heaps_spare;
        sm_heaps_spare = h;
    }
    sm_plat_unlock(&sm_heaps_list_lock);
}

static SM_UNUSED void sm_heap_empty(sm_heap_t *h)
{
    sm_sync_spinlock_lock(&h->lock);
    if (h->kind == SM_HEAP_TLSF)
        sm_ht_reset(h);
    else
        sm_hr_reset(h);
    h->stats.allocated = h->stats.peak_allocated = h->stats.blocks = 0;
    h->stats.resets++;
    sm_sync_spinlock_unlock(&h->lock);
}

static inline size_t sm_heap_usable_locked(const sm_heap_t *h, const void *p)
{
    return h->kind == SM_HEAP_TLSF ? sm_ht_usable(p) : sm_hr_usable(p);
}

static SM_UNUSED void *sm_heap_alloc(sm_heap_t *h, size_t n, size_t align)
{
    if (n > SM_HEAP_MAX_REQUEST || align > SM_HEAP_MAX_REQUEST / 2) {
        errno = ENOMEM;
        return NULL;
    }
    if (align < 16)
        align = 16;
    sm_sync_spinlock_lock(&h->lock);
    void *p = h->kind == SM_HEAP_TLSF ? sm_ht_alloc(h, n ? n : 1, align) : sm_hr_alloc(h, n ? n : 1, align);
    if (p)
        sm_heap_count_alloc(h, sm_heap_usable_locked(h, p));
    sm_sync_spinlock_unlock(&h->lock);
    if (!p)
        errno = ENOMEM;
    return p;
}

static inline bool sm_heap_check(sm_heap_t *h, void *p, sm_heap_fault_t *f)
{
    return h->kind == SM_HEAP_TLSF ? sm_ht_check(h, p, f) : sm_hr_check(h, p, f);
}

/* p is in one of h's spans (the registry said so); a pointer that is no block's is reported. */
static SM_UNUSED void sm_heap_release(sm_heap_t *h, void *p, const char *api)
{
    sm_heap_fault_t f = { SM_ERR_INVALID_FREE, p, NULL };
    sm_sync_spinlock_lock(&h->lock);
    if (sm_heap_check(h, p, &f)) {
        sm_heap_count_free(h, sm_heap_usable_locked(h, p));
        if (h->kind == SM_HEAP_TLSF) {
            sm_ht_free(h, p);
            if (!h->stats.blocks) /* the last live block: nothing may pin a span now */
                sm_ht_flush_quick(h);
        } else {
            sm_hr_free(h, p);
        }
    }
    sm_sync_spinlock_unlock(&h->lock);
    sm_heap_raise_fault(&f, api);
}

/* The usable size of h's block p, or 0 after reporting a pointer that is no block's. */
static SM_UNUSED size_t sm_heap_block_usable(sm_heap_t *h, void *p, const char *api)
{
    sm_heap_fault_t f = { SM_ERR_INVALID_POINTER, p, NULL };
    size_t usable = 0;
    sm_sync_spinlock_lock(&h->lock);
    if (sm_heap_check(h, p, &f))
        usable = sm_heap_usable_locked(h, p);
    sm_sync_spinlock_unlock(&h->lock);
    if (f.detail)
        f.kind = SM_ERR_INVALID_POINTER;
    sm_heap_raise_fault(&f, api);
    return usable;
}

/* realloc of h's block p, staying in h: in place when the kind can, else moved within h. NULL
 * (errno ENOMEM, p untouched) when h has no room; EINVAL for a pointer that is no block's. */
static SM_UNUSED void *sm_heap_resize(sm_heap_t *h, void *p, size_t n, const char *api)
{
    if (n > SM_HEAP_MAX_REQUEST) {
        errno = ENOMEM;
        return NULL;
    }
    sm_heap_fault_t f = { SM_ERR_INVALID_POINTER, p, NULL };
    size_t old = 0;
    bool done = false;
    sm_sync_spinlock_lock(&h->lock);
    if (sm_heap_check(h, p, &f)) {
        old = sm_heap_usable_locked(h, p);
        done = h->kind == SM_HEAP_TLSF ? sm_ht_resize(h, p, n) : sm_hr_resize(h, p, n);
        if (done) {
            size_t now = sm_heap_usable_locked(h, p);
            h->stats.allocated = h->stats.allocated - old + now;
            if (h->stats.allocated > h->stats.peak_allocated)
                h->stats.peak_allocated = h->stats.allocated;
        }
    }
    sm_sync_spinlock_unlock(&h->lock);
    if (f.detail) {
        f.kind = SM_ERR_INVALID_POINTER;
        sm_heap_raise_fault(&f, api);
        errno = EINVAL;
        return NULL;
    }
    if (done)
        return p;
    void *q = sm_heap_alloc(h, n, 16);
    if (!q)
        return NULL;
    memcpy(q, p, old < n ? old : n);
    sm_heap_release(h, p, api);
    return q;
}

static SM_UNUSED void sm_heap_read_stats(sm_heap_t *h, sm_heap_counts_t *out)
{
    sm_sync_spinlock_lock(&h->lock);
    *out = h->stats;
    sm_sync_spinlock_unlock(&h->lock);
}

/* One heap as the statistics print it. */
typedef struct sm_heap_row {
    char name[32];
    unsigned kind;
    bool in_range;
    sm_heap_counts_t stats;
} sm_heap_row_t;

/* The first `max` heaps' rows (newest first); returns how many heaps exist. Copied under the
 * locks and printed after, so a writer that allocates, or makes a heap, cannot deadlock. */
static SM_UNUSED size_t sm_heaps_rows(sm_heap_row_t *rows, size_t max)
{
    size_t n = 0;
    sm_plat_lock(&sm_heaps_list_lock);
    for (sm_heap_t *h = sm_heaps_all; h; h = h->next, n++) {
        if (n >= max)
            continue;
        memcpy(rows[n].name, h->name, sizeof rows[n].name);
        rows[n].kind = h->kind;
        rows[n].in_range = h->in_range;
        sm_heap_read_stats(h, &rows[n].stats);
    }
    sm_plat_unlock(&sm_heaps_list_lock);
    return n;
}

/* How many heaps exist, and their allocated and mapped bytes summed (mallctl's heaps.*). */
static SM_UNUSED void sm_heaps_totals(size_t *count, size_t *allocated, size_t *mapped)
{
    size_t n = 0, a = 0, m = 0;
    sm_plat_lock(&sm_heaps_list_lock);
    for (sm_heap_t *h = sm_heaps_all; h; h = h->next, n++) {
        sm_heap_counts_t c;
        sm_heap_read_stats(h, &c);
        a += c.allocated, m += c.mapped;
    }
    sm_plat_unlock(&sm_heaps_list_lock);
    *count = n, *allocated = a, *mapped = m;
}

static inline const char *sm_heap_kind_name(unsigned kind) { return kind == SM_HEAP_REGION ? "region" : "tlsf"; }
#endif
