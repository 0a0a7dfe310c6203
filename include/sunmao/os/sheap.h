/* sheap: OS layer over a static memory pool (paper Table 2: sheap_glk, "configurable static heap").
 * Needs no operating system: no syscalls, no Linux headers, nothing but the pool, so it serves
 * bare-metal and freestanding builds as well as programs that want a hard memory cap. No SM_NEXT.
 *
 * Parameters: SM_LAYER. Slots: sync (required: the one global lock; `none` on bare metal),
 * err (required: invalid and double frees). Options:
 *   SM_OPT_POOL_SIZE  bytes of the pool (default 8 MiB: a zero-initialised array in .bss)
 *   SM_OPT_POOL       optional: an existing buffer (e.g. a linker-script region) of SM_OPT_POOL_SIZE
 *                     bytes to manage instead of the array
 * Properties: thread-safe with a locking sync policy, 16-byte alignment, not zero-filled.
 *
 * Each block starts with a 16-byte header: its size with two flag bits (this block free, the block
 * before it free) and a check word mixing that with the header's address and the process secret,
 * so a pointer that is not a live block's payload is recognised instead of trusted. A free block
 * also keeps list links in its payload and its size in its last word, which is what lets a freed
 * block find and merge with a free block before it. Free blocks sit in bins by log2 of their size;
 * allocation walks the request's own bin first-fit, then takes the first block of the next
 * non-empty bin (found with one bit scan), which is always large enough. Requests aligned beyond
 * 16 bytes walk every bin from their own up, as they may need to split a block's front off.
 * Exhaustion returns NULL with errno = ENOMEM: the pool never grows.
 * @model: name=sheap kind=os slot sync slot err key pool_size size opaque pool */
#include "../core/layer.h"
#include "../core/errors.h"
#include "../core/bits.h"
#include "../core/secret.h"

#ifndef SM_LAYER
#error "sheap: define SM_LAYER (this instance's name) before including"
#endif
#ifdef SM_NEXT
#error "sheap: an OS layer is the bottom of a composition; SM_NEXT must not be defined"
#endif
#ifndef SM_SYNC
#error "sheap: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "sheap: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_POOL_SIZE
#define SM_OPT_POOL_SIZE ((size_t)8 << 20)
#endif
_Static_assert((SM_OPT_POOL_SIZE) >= 256, "sheap: SM_OPT_POOL_SIZE must be at least 256 (room for a block)");

typedef struct SM_FN(hdr) {
    size_t size_bits; /* block bytes, header included, a multiple of 16 | flag bits */
    size_t check;
} SM_FN(hdr_t);
typedef struct SM_FN(free_links) { SM_FN(hdr_t) *next, *prev; } SM_FN(links_t);

enum {
    SM_FN(is_free) = 1,
    SM_FN(prev_free) = 2,
    SM_FN(flag_mask) = 15,
    SM_FN(hdr_bytes) = sizeof(SM_FN(hdr_t)),
    /* header, list links and the trailing size word of a free block, rounded to 16 */
    SM_FN(min_block) = 48,
    SM_FN(bin_count) = sizeof(size_t) * 8,
};

#ifndef SM_OPT_POOL
static unsigned char SM_FN(pool)[SM_OPT_POOL_SIZE] __attribute__((aligned(64)));
#define SM_OPT_POOL SM_FN(pool)
#endif

static struct {
    SM_SYNC_FN(t) lock;
    bool ready;
    unsigned char *base, *end;  /* first block's header; the end sentinel's header */
    size_t nonempty;            /* bit k: bins[k] has a block */
    SM_FN(hdr_t) *bins[SM_FN(bin_count)];
} SM_FN(obj) = { SM_SYNC_INIT, false, 0, 0, 0, { 0 } };

enum {
    SM_FN(thread_safe) = SM_CAT3(sm_sync_, SM_SYNC, _thread_safe),
    SM_FN(min_align) = SM_MIN_ALIGN,
    SM_FN(zeroed) = 0,
};

SM_INLINE size_t SM_FN(seal)(const SM_FN(hdr_t) *h, size_t size_bits)
{
    return (size_t)(((uint64_t)size_bits ^ (uint64_t)(uintptr_t)h ^ sm_secret()) * 0x9e3779b97f4a7c15ull);
}
SM_INLINE void SM_FN(set_hdr)(SM_FN(hdr_t) *h, size_t size_bits)
{
    h->size_bits = size_bits;
    h->check = SM_FN(seal)(h, size_bits);
}
SM_INLINE size_t SM_FN(size_of)(const SM_FN(hdr_t) *h) { return h->size_bits & ~(size_t)SM_FN(flag_mask); }
SM_INLINE SM_FN(hdr_t) *SM_FN(after)(SM_FN(hdr_t) *h) { return (SM_FN(hdr_t) *)((unsigned char *)h + SM_FN(size_of)(h)); }
SM_INLINE SM_FN(links_t) *SM_FN(links)(SM_FN(hdr_t) *h) { return (SM_FN(links_t) *)(h + 1); }
SM_INLINE void SM_FN(set_prev_free)(SM_FN(hdr_t) *h, bool on)
{
    SM_FN(set_hdr)(h, (h->size_bits & ~(size_t)SM_FN(prev_free)) | (on ? SM_FN(prev_free) : 0));
}

static void SM_FN(unbin)(SM_FN(hdr_t) *h)
{
    unsigned bin = sm_log2_floor(SM_FN(size_of)(h));
    SM_FN(links_t) *l = SM_FN(links)(h);
    if (l->prev)
        SM_FN(links)(l->prev)->next = l->next;
    else
        SM_FN(obj).bins[bin] = l->next;
    if (l->next)
        SM_FN(links)(l->next)->prev = l->prev;
    if (!SM_FN(obj).bins[bin])
        SM_FN(obj).nonempty &= ~((size_t)1 << bin);
}

/* Make [h, h + size) one free block (its predecessor is in use) and bin it. */
static void SM_FN(make_free)(SM_FN(hdr_t) *h, size_t size)
{
    SM_FN(set_hdr)(h, size | SM_FN(is_free));
    *(size_t *)((unsigned char *)h + size - sizeof(size_t)) = size;
    SM_FN(set_prev_free)(SM_FN(after)(h), true);
    unsigned bin = sm_log2_floor(size);
    SM_FN(links_t) *l = SM_FN(links)(h);
    l->prev = NULL;
    l->next = SM_FN(obj).bins[bin];
    if (l->next)
        SM_FN(links)(l->next)->prev = h;
    SM_FN(obj).bins[bin] = h;
    SM_FN(obj).nonempty |= (size_t)1 << bin;
}

static void SM_FN(init_locked)(void)
{
    uintptr_t lo = sm_align_up((uintptr_t)(SM_OPT_POOL), 16);
    uintptr_t hi = sm_align_down((uintptr_t)(SM_OPT_POOL) + (size_t)(SM_OPT_POOL_SIZE), 16);
    SM_FN(obj).base = (unsigned char *)lo;
    SM_FN(obj).end = (unsigned char *)(hi - SM_FN(hdr_bytes));
    SM_FN(set_hdr)((SM_FN(hdr_t) *)SM_FN(obj).end, 0); /* sentinel: an in-use block of size 0 */
    SM_FN(make_free)((SM_FN(hdr_t) *)lo, (size_t)(SM_FN(obj).end - SM_FN(obj).base));
    SM_FN(obj).ready = true;
}

SM_INLINE int SM_FN(create)(void)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    if (!SM_FN(obj).ready)
        SM_FN(init_locked)();
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    return 0;
}

/* Where in free block h a block of `need` bytes whose payload is aligned to `align` would start,
 * or NULL if it does not fit. A front part split off must be able to stand as a free block. */
SM_INLINE SM_FN(hdr_t) *SM_FN(fit)(SM_FN(hdr_t) *h, size_t need, size_t align)
{
    uintptr_t payload = (uintptr_t)(h + 1);
    uintptr_t at = sm_align_up(payload, align);
    if (at != payload)
        at = sm_align_up(payload + SM_FN(min_block), align);
    size_t lead = at - payload;
    return lead <= SM_FN(size_of)(h) && need <= SM_FN(size_of)(h) - lead ? (SM_FN(hdr_t) *)(at - SM_FN(hdr_bytes)) : NULL;
}

/* Cut block h (in use, size `size`) down to `need` bytes if the rest can stand as a free block. */
static void SM_FN(trim_tail)(SM_FN(hdr_t) *h, size_t size, size_t need)
{
    size_t keep_bits = h->size_bits & SM_FN(prev_free);
    if (size - need < SM_FN(min_block)) {
        SM_FN(set_hdr)(h, size | keep_bits);
        SM_FN(set_prev_free)(SM_FN(after)(h), false);
        return;
    }
    SM_FN(set_hdr)(h, need | keep_bits);
    SM_FN(hdr_t) *rest = SM_FN(after)(h);
    size_t rest_size = size - need;
    SM_FN(hdr_t) *next = (SM_FN(hdr_t) *)((unsigned char *)rest + rest_size);
    if (next->size_bits & SM_FN(is_free)) { /* only after a shrink: merge with the free block after */
        SM_FN(unbin)(next);
        rest_size += SM_FN(size_of)(next);
        SM_FN(set_hdr)(next, SM_FN(size_of)(next) | SM_FN(is_free)); /* stale, still reads as freed */
    }
    SM_FN(make_free)(rest, rest_size);
}

/* Critical sections go to the sync policy's atomic_exec (it may run them on another thread): they
 * set no errno and raise nothing; results travel back in the argument. */
struct SM_FN(cs_alloc) { size_t need, align; void *ptr; };
SM_INLINE void SM_FN(cs_alloc)(void *arg)
{
    struct SM_FN(cs_alloc) *a = (struct SM_FN(cs_alloc) *)arg;
    size_t need = a->need, align = a->align;
    SM_FN(hdr_t) *found = NULL, *at = NULL;
    if (sm_unlikely(!SM_FN(obj).ready))
        SM_FN(init_locked)();
    unsigned bin = sm_log2_floor(need);
    for (SM_FN(hdr_t) *h = SM_FN(obj).bins[bin]; h && !found; h = SM_FN(links)(h)->next)
        if ((at = SM_FN(fit)(h, need, align)))
            found = h;
    if (!found && align <= 16) {
        size_t larger = bin + 1 < SM_FN(bin_count) ? SM_FN(obj).nonempty >> (bin + 1) << (bin + 1) : 0;
        if (larger)
            found = at = SM_FN(obj).bins[sm_ctz(larger)];
    }
    for (unsigned b = bin + 1; !found && b < SM_FN(bin_count); b++)
        for (SM_FN(hdr_t) *h = SM_FN(obj).bins[b]; h && !found; h = SM_FN(links)(h)->next)
            if ((at = SM_FN(fit)(h, need, align)))
                found = h;
    if (!found) {
        a->ptr = NULL;
        return;
    }
    SM_FN(unbin)(found);
    size_t size = SM_FN(size_of)(found);
    if (at != found) { /* alignment: the front of the block stays free */
        size_t lead = (size_t)((unsigned char *)at - (unsigned char *)found);
        SM_FN(set_hdr)(at, 0); /* make_free marks the block after the front, which is `at` */
        SM_FN(make_free)(found, lead);
        size -= lead;
        SM_FN(set_hdr)(at, size | SM_FN(prev_free));
    } else {
        SM_FN(set_hdr)(at, size);
    }
    SM_FN(trim_tail)(at, size, need);
    a->ptr = at + 1;
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (c->size > (size_t)(SM_OPT_POOL_SIZE) || c->align > (size_t)(SM_OPT_POOL_SIZE)) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    size_t need = sm_align_up(c->size + SM_FN(hdr_bytes), 16);
    struct SM_FN(cs_alloc) a = { need < SM_FN(min_block) ? SM_FN(min_block) : need, c->align, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_alloc), &a);
    if (!a.ptr)
        errno = ENOMEM;
    return c->ptr = a.ptr;
}

/* The header of p if p is the payload of a block of this pool with an intact header, else NULL. */
SM_INLINE SM_FN(hdr_t) *SM_FN(header_of)(const void *p)
{
    const unsigned char *u = (const unsigned char *)p;
    if (!SM_FN(obj).ready || u < SM_FN(obj).base + SM_FN(hdr_bytes) || u >= SM_FN(obj).end ||
        !sm_ptr_aligned(p, 16))
        return NULL;
    SM_FN(hdr_t) *h = (SM_FN(hdr_t) *)p - 1;
    size_t size = SM_FN(size_of)(h);
    if (h->check != SM_FN(seal)(h, h->size_bits) || size < SM_FN(min_block) ||
        size > (size_t)(SM_FN(obj).end - (unsigned char *)h))
        return NULL;
    return h;
}

struct SM_FN(cs_free) { void *ptr; size_t sized; const char *why; sm_err_kind_t kind; };
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    SM_FN(hdr_t) *h = SM_FN(header_of)(f->ptr);
    if (!h)
        f->why = "not a block of this pool (or its header was overwritten)";
    else if (h->size_bits & SM_FN(is_free))
        f->why = "block already freed", f->kind = SM_ERR_DOUBLE_FREE;
    else if (f->sized > SM_FN(size_of)(h) - SM_FN(hdr_bytes))
        f->why = "sized free larger than the block; ignored";
    if (f->why)
        return;
    size_t size = SM_FN(size_of)(h);
    SM_FN(hdr_t) *next = SM_FN(after)(h);
    if (next->size_bits & SM_FN(is_free)) {
        SM_FN(unbin)(next);
        size += SM_FN(size_of)(next);
        SM_FN(set_hdr)(next, SM_FN(size_of)(next) | SM_FN(is_free)); /* stale, still reads as freed */
    }
    if (h->size_bits & SM_FN(prev_free)) {
        size_t prev_size = *((size_t *)h - 1);
        SM_FN(hdr_t) *prev = (SM_FN(hdr_t) *)((unsigned char *)h - prev_size);
        SM_FN(unbin)(prev);
        SM_FN(set_hdr)(h, SM_FN(size_of)(h) | SM_FN(is_free)); /* a second free says "double" */
        h = prev;
        size += prev_size;
    }
    SM_FN(make_free)(h, size);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    struct SM_FN(cs_free) f = { c->ptr, (c->flags & SM_F_SIZED) ? c->size : 0, NULL, SM_ERR_INVALID_FREE };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_free), &f);
    if (f.why) /* after the section: the policy's handler may itself allocate */
        SM_ERR_FN(raise)(f.kind, SM_LAYER_NAME, c->ptr, f.why);
}

struct SM_FN(cs_query) { sm_mctx_t *c; size_t need; bool ok; };
SM_INLINE void SM_FN(cs_getmeta)(void *arg)
{
    struct SM_FN(cs_query) *q = (struct SM_FN(cs_query) *)arg;
    SM_FN(hdr_t) *h = SM_FN(header_of)(q->c->ptr);
    q->ok = h && !(h->size_bits & SM_FN(is_free));
    if (q->ok) {
        q->c->usable = SM_FN(size_of)(h) - SM_FN(hdr_bytes);
        q->c->owner = SM_LAYER_NAME;
    }
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    struct SM_FN(cs_query) q = { c, 0, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_getmeta), &q);
    return q.ok;
}

/* In place: shrink by splitting the tail off, grow by absorbing a free block that follows. */
SM_INLINE void SM_FN(cs_resize)(void *arg)
{
    struct SM_FN(cs_query) *q = (struct SM_FN(cs_query) *)arg;
    SM_FN(hdr_t) *h = SM_FN(header_of)(q->c->ptr);
    q->ok = false;
    if (!h || (h->size_bits & SM_FN(is_free)))
        return;
    size_t size = SM_FN(size_of)(h), need = q->need;
    SM_FN(hdr_t) *next = SM_FN(after)(h);
    if (need > size && (next->size_bits & SM_FN(is_free)) && size + SM_FN(size_of)(next) >= need) {
        SM_FN(unbin)(next);
        size += SM_FN(size_of)(next);
        SM_FN(set_hdr)(next, SM_FN(size_of)(next) | SM_FN(is_free));
    }
    if (need <= size) {
        SM_FN(trim_tail)(h, size, need);
        q->ok = true;
    }
}

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    if (n > (size_t)(SM_OPT_POOL_SIZE))
        return false;
    size_t need = sm_align_up(n + SM_FN(hdr_bytes), 16);
    struct SM_FN(cs_query) q = { c, need < SM_FN(min_block) ? SM_FN(min_block) : need, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_resize), &q);
    return q.ok;
}

/* A static pool has no pages to give back to anyone. */
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c)
{
    (void)c;
    return false;
}
SM_INLINE void SM_FN(release)(sm_release_t *r) { (void)r; }

SM_INLINE void SM_FN(thread_exit)(void) {}
SM_INLINE void SM_FN(fork_prepare)(void) { SM_SYNC_FN(fork_lock)(&SM_FN(obj).lock); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_SYNC_FN(fork_unlock)(&SM_FN(obj).lock); }
SM_INLINE void SM_FN(fork_child)(void) { SM_SYNC_FN(fork_reinit)(&SM_FN(obj).lock); }

#undef SM_OPT_POOL
#undef SM_OPT_POOL_SIZE
#include "../core/layer_end.h"
