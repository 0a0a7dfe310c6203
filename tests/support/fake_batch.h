/* A fake next layer offering capabilities BATCH and OWNER (core/capability.h), for unit tests of the
 * layers that consume them (thread_cache) without a real slab layer below. Template: define SM_LAYER
 * and SM_SIZECLASS (the composition includes the policy's header first) before including; SM_NEXT
 * is optional (then requests it does not serve as objects, and frees of blocks it does not own, go
 * there; without it it serves them itself from libc and counts foreign frees as violations).
 *
 * Objects of each class of the policy come from slabs of 2^slab_shift bytes (at least 1 MiB, and at
 * least the policy's largest class) obtained from libc with posix_memalign, aligned to their size,
 * so an object is aligned to the largest power of two dividing its class size, as slab_lk's are.
 * A slab's descriptor lives outside the slab (a user overwriting objects cannot corrupt it) and is
 * found through a page map (core/pagemap.h) keyed by the slab, so block_owner (the descriptor is
 * the owner word), owner_slot and owner_local are lock-free. Free objects of a class sit on a LIFO stack; a new slab's objects are pushed so
 * that they come out in ascending address order. Slabs are never given back (tests are short).
 * Objects handed out are filled with 0xCD garbage, as fake_next's blocks are.
 * Requests it does not serve as objects (size above the policy's largest class, or align > 16) are
 * "large" blocks from posix_memalign, tracked in a table, at least the size's class size when the
 * size is in the class range (as slab_lk's aligned objects are: a thread cache above relies on it);
 * with SM_NEXT they go there instead (which must then keep that promise itself).
 *
 * What it records (in L_obj, under its lock unless noted; read them from a quiet test):
 *   every call's count; the alloc_batch requests (size, want, got) in a log; live objects per class,
 *   live blocks and bytes (objects and large blocks together, as fake_next counts live_blocks);
 *   the last free's size and flags (sized frees passed down keep their size); with SM_NEXT, how
 *   many requests and frees went there (passed_down); owner_local calls made without a context
 *   (no_context: the contract passes the request's); owner lookups (block_owner calls); frees that
 *   came with an owner word (words_carried) and, of them, with a word not p's (wrong_words).
 * What it can be told:
 *   limit_bytes      0 = unlimited; a request that would take live_bytes above it fails (NULL or a
 *                    short batch, errno = ENOMEM). 1: every request fails at once.
 *   not_local        owner_local answers false for every object; mark_remote(p, on) does it for the
 *                    objects of p's slab only.
 * Contract violations it counts (bad_frees is their sum, the field fake_next also has):
 *   foreign_frees    a free of a block it never gave out (without SM_NEXT)
 *   interior_frees   a pointer inside one of its slabs that is not an object start
 *   double_frees     an object that is already free
 *   oversized_frees  SM_F_SIZED with a size above the object's class size */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/core/bits.h>
#include <sunmao/core/layer.h>
#include <sunmao/core/pagemap.h>

#ifndef SM_LAYER
#error "fake_batch: define SM_LAYER before including"
#endif
#ifndef SM_SIZECLASS
#error "fake_batch: define SM_SIZECLASS (and include the policy's header) before including"
#endif

enum {
    SM_FN(batch_classes) = SM_SIZECLASS_FN(count),
    SM_FN(batch_max_size) = SM_SIZECLASS_FN(max_size),
    /* 1 MiB slabs, or larger when a class is (one object per slab at least) */
    SM_FN(slab_shift) = (63 - __builtin_clzll((unsigned long long)SM_SIZECLASS_FN(max_size) * 2 - 1)) > 20
                            ? (63 - __builtin_clzll((unsigned long long)SM_SIZECLASS_FN(max_size) * 2 - 1))
                            : 20,
    SM_FN(slab_objs_max) = 4096,
    SM_FN(log_max) = 1024,
    SM_FN(large_max) = 4096,
#ifdef SM_NEXT
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
#else
    SM_FN(thread_safe) = 1,
#endif
    SM_FN(min_align) = 16,
    SM_FN(zeroed) = 0,
};

struct SM_FN(slab) {
    char *base;
    size_t size;     /* of its objects: the class size */
    unsigned cls, nobjs;
    unsigned live;   /* objects handed out */
    int remote;      /* owner_local says false for its objects (mark_remote) */
    unsigned char state[]; /* per object: 1 handed out, 0 free */
};
struct SM_FN(stack) { void **v; size_t n, cap; };
struct SM_FN(large) { void *ptr; size_t size; };
struct SM_FN(logged) { size_t size; unsigned want, got; };

static struct {
    pthread_mutex_t lock;
    sm_pagemap_t map; /* slab granule -> descriptor */
    struct SM_FN(stack) free_objs[SM_FN(batch_classes)];
    struct SM_FN(slab) **slabs; /* every slab made, for tests and the fork child */
    size_t slab_count, slab_cap;
    struct SM_FN(large) large[SM_FN(large_max)];
    size_t large_count;
    /* told */
    size_t limit_bytes;
    int not_local;
    /* recorded */
    size_t live_blocks, live_objs, live_large, live_bytes;
    size_t live_by_class[SM_FN(batch_classes)];
    unsigned long creates, allocs, large_allocs, failed, frees, getmetas, resizes, purges, bad_purges;
    unsigned long releases, release_alls, thread_exits, forks, passed_down;
    unsigned long alloc_batch_calls, alloc_batch_objs, free_batch_calls, free_batch_objs;
    unsigned long owner_lookups, owner_locals, not_local_answers, no_context; /* atomics: lock-free paths */
    unsigned long words_carried, wrong_words; /* frees that came with an owner word; of them, wrong */
    unsigned long foreign_frees, interior_frees, double_frees, oversized_frees, bad_frees;
    size_t last_free_size;
    unsigned last_free_flags;
    struct SM_FN(logged) log[SM_FN(log_max)];
    unsigned log_n; /* entries in log (it stops at log_max; alloc_batch_calls goes on) */
} SM_FN(obj) = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *SM_FN(node_alloc)(size_t bytes) { return calloc(1, bytes); }

/* The slab holding p, or NULL. Lock-free: descriptors are immutable once published, never freed. */
static inline struct SM_FN(slab) *SM_FN(slab_of)(const void *p)
{
    return (struct SM_FN(slab) *)sm_pagemap_get(&SM_FN(obj).map, SM_FN(slab_shift), p);
}

/* The index of the object starting at p in slab s, or -1 when p is not an object start. */
static inline long SM_FN(index_in)(const struct SM_FN(slab) *s, const void *p)
{
    size_t off = (size_t)((const char *)p - s->base);
    if (off % s->size || off / s->size >= s->nobjs)
        return -1;
    return (long)(off / s->size);
}

static inline int SM_FN(create)(void)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).creates++;
    pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
    return SM_NEXT_FN(create)();
#else
    return 0;
#endif
}

static inline int SM_FN(push_locked)(struct SM_FN(stack) *st, void *p)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 256;
        void **v = (void **)realloc(st->v, cap * sizeof *v);
        if (!v)
            return -1;
        st->v = v, st->cap = cap;
    }
    st->v[st->n++] = p;
    return 0;
}

/* A new slab for class cls, its objects pushed on the class's stack. Lock held. */
static inline int SM_FN(new_slab_locked)(unsigned cls)
{
    size_t size = SM_SIZECLASS_FN(class_to_size)(cls), bytes = (size_t)1 << SM_FN(slab_shift);
    size_t nobjs = bytes / size < SM_FN(slab_objs_max) ? bytes / size : SM_FN(slab_objs_max);
    struct SM_FN(stack) *st = &SM_FN(obj).free_objs[cls];
    if (SM_FN(obj).slab_count == SM_FN(obj).slab_cap) {
        size_t cap = SM_FN(obj).slab_cap ? 2 * SM_FN(obj).slab_cap : 64;
        struct SM_FN(slab) **v = (struct SM_FN(slab) **)realloc(SM_FN(obj).slabs, cap * sizeof *v);
        if (!v)
            return -1;
        SM_FN(obj).slabs = v, SM_FN(obj).slab_cap = cap;
    }
    if (st->cap < st->n + nobjs) {
        void **v = (void **)realloc(st->v, (st->n + nobjs) * sizeof *v);
        if (!v)
            return -1;
        st->v = v, st->cap = st->n + nobjs;
    }
    struct SM_FN(slab) *s = (struct SM_FN(slab) *)calloc(1, sizeof *s + nobjs);
    void *base = NULL;
    if (!s || posix_memalign(&base, bytes, bytes) != 0) {
        free(s);
        return -1;
    }
    s->base = (char *)base, s->size = size, s->cls = cls, s->nobjs = (unsigned)nobjs;
    __atomic_thread_fence(__ATOMIC_RELEASE); /* the descriptor is complete before the map shows it */
    if (!sm_pagemap_set(&SM_FN(obj).map, SM_FN(slab_shift), base, bytes, (uintptr_t)s, SM_FN(node_alloc))) {
        free(base);
        free(s);
        return -1;
    }
    SM_FN(obj).slabs[SM_FN(obj).slab_count++] = s;
    for (size_t i = nobjs; i-- > 0;) /* popped in ascending order */
        st->v[st->n++] = s->base + i * size;
    return 0;
}

/* One object of class cls, or NULL (limit reached, or libc refused a slab). Lock held. */
static inline void *SM_FN(take_locked)(unsigned cls)
{
    size_t size = SM_SIZECLASS_FN(class_to_size)(cls);
    struct SM_FN(stack) *st = &SM_FN(obj).free_objs[cls];
    if (SM_FN(obj).limit_bytes && SM_FN(obj).live_bytes + size > SM_FN(obj).limit_bytes)
        return NULL;
    if (!st->n && SM_FN(new_slab_locked)(cls) != 0)
        return NULL;
    char *p = (char *)st->v[--st->n];
    struct SM_FN(slab) *s = SM_FN(slab_of)(p);
    s->state[(size_t)(p - s->base) / s->size] = 1;
    s->live++;
    SM_FN(obj).live_objs++, SM_FN(obj).live_blocks++, SM_FN(obj).live_bytes += size;
    SM_FN(obj).live_by_class[cls]++;
    memset(p, 0xCD, size);
    return p;
}

/* Whether a request is served as an object of a class. */
static inline bool SM_FN(serves)(const sm_mctx_t *c)
{
    return c->size <= (size_t)SM_FN(batch_max_size) && c->align <= SM_MIN_ALIGN;
}

static inline void *SM_FN(alloc)(sm_mctx_t *c)
{
    void *p = NULL;
    if (SM_FN(serves)(c)) {
        pthread_mutex_lock(&SM_FN(obj).lock);
        p = SM_FN(take_locked)(SM_SIZECLASS_FN(size_to_class)(c->size));
        if (p)
            SM_FN(obj).allocs++;
        else
            SM_FN(obj).failed++;
        pthread_mutex_unlock(&SM_FN(obj).lock);
        if (!p)
            errno = ENOMEM;
        c->flags &= ~(unsigned)SM_F_FRESH;
        return c->ptr = p;
    }
#ifdef SM_NEXT
    __atomic_add_fetch(&SM_FN(obj).passed_down, 1, __ATOMIC_RELAXED);
    return SM_NEXT_FN(alloc)(c);
#else
    /* A size in the class range gets at least its class's size even here: thread_cache trusts that
     * (a sized free puts the block on the list of the size's class, never asking below). */
    size_t n = c->size <= (size_t)SM_FN(batch_max_size) ? SM_SIZECLASS_FN(class_to_size)(SM_SIZECLASS_FN(size_to_class)(c->size))
                                                       : c->size;
    pthread_mutex_lock(&SM_FN(obj).lock);
    if ((SM_FN(obj).limit_bytes && SM_FN(obj).live_bytes + n > SM_FN(obj).limit_bytes) ||
        SM_FN(obj).large_count == SM_FN(large_max) || c->size > ((size_t)1 << 40) ||
        posix_memalign(&p, c->align < sizeof(void *) ? sizeof(void *) : c->align, n) != 0) {
        SM_FN(obj).failed++;
        pthread_mutex_unlock(&SM_FN(obj).lock);
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    memset(p, 0xCD, n);
    SM_FN(obj).large[SM_FN(obj).large_count++] = (struct SM_FN(large)){ p, n };
    SM_FN(obj).large_allocs++;
    SM_FN(obj).live_large++, SM_FN(obj).live_blocks++, SM_FN(obj).live_bytes += n;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    c->flags &= ~(unsigned)SM_F_FRESH;
    return c->ptr = p;
#endif
}

static inline long SM_FN(large_find_locked)(const void *p)
{
    for (size_t i = 0; i < SM_FN(obj).large_count; i++)
        if (SM_FN(obj).large[i].ptr == p)
            return (long)i;
    return -1;
}

/* Frees p (size and flags as in a context). Lock held. False: not ours, to pass down (with SM_NEXT;
 * without it that was counted as a foreign free). */
static inline bool SM_FN(free_locked)(void *p, size_t size, unsigned flags)
{
    SM_FN(obj).last_free_size = size, SM_FN(obj).last_free_flags = flags;
    struct SM_FN(slab) *s = SM_FN(slab_of)(p);
    if (s) {
        long i = SM_FN(index_in)(s, p);
        if (i < 0) {
            SM_FN(obj).interior_frees++, SM_FN(obj).bad_frees++;
        } else if (!s->state[i]) {
            SM_FN(obj).double_frees++, SM_FN(obj).bad_frees++;
        } else if ((flags & SM_F_SIZED) && size > s->size) {
            SM_FN(obj).oversized_frees++, SM_FN(obj).bad_frees++;
        } else if (SM_FN(push_locked)(&SM_FN(obj).free_objs[s->cls], p) == 0) {
            s->state[i] = 0;
            s->live--;
            SM_FN(obj).live_objs--, SM_FN(obj).live_blocks--, SM_FN(obj).live_bytes -= s->size;
            SM_FN(obj).live_by_class[s->cls]--;
        }
        return true;
    }
    long i = SM_FN(large_find_locked)(p);
    if (i >= 0) {
        if ((flags & SM_F_SIZED) && size > SM_FN(obj).large[i].size) {
            SM_FN(obj).oversized_frees++, SM_FN(obj).bad_frees++;
            return true;
        }
        SM_FN(obj).live_large--, SM_FN(obj).live_blocks--, SM_FN(obj).live_bytes -= SM_FN(obj).large[i].size;
        free(SM_FN(obj).large[i].ptr);
        SM_FN(obj).large[i] = SM_FN(obj).large[--SM_FN(obj).large_count];
        return true;
    }
#ifndef SM_NEXT
    SM_FN(obj).foreign_frees++, SM_FN(obj).bad_frees++;
    return true;
#else
    return false;
#endif
}

static inline void SM_FN(free)(sm_mctx_t *c)
{
    if (c->flags & SM_F_OWNER) { /* the word a consumer read: checked, then not passed on */
        __atomic_add_fetch(&SM_FN(obj).words_carried, 1, __ATOMIC_RELAXED);
        if (c->owner_word != (uintptr_t)SM_FN(slab_of)(c->ptr))
            __atomic_add_fetch(&SM_FN(obj).wrong_words, 1, __ATOMIC_RELAXED);
        c->flags &= ~(unsigned)SM_F_OWNER;
    }
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).frees++;
    bool mine = SM_FN(free_locked)(c->ptr, c->size, c->flags);
    pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
    if (!mine) {
        __atomic_add_fetch(&SM_FN(obj).passed_down, 1, __ATOMIC_RELAXED);
        SM_NEXT_FN(free)(c);
    }
#else
    (void)mine;
#endif
}

static inline bool SM_FN(getmeta)(sm_mctx_t *c)
{
    bool found = false, asked_next = false;
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).getmetas++;
    struct SM_FN(slab) *s = SM_FN(slab_of)(c->ptr);
    long i = s ? SM_FN(index_in)(s, c->ptr) : SM_FN(large_find_locked)(c->ptr);
    if (s && i >= 0 && s->state[i]) { /* a live object (a free one, or no object start: nobody's) */
        c->usable = s->size;
        found = true;
    } else if (!s && i >= 0) {
        c->usable = SM_FN(obj).large[i].size;
        found = true;
    } else {
        asked_next = !s;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
    if (found) {
        c->owner = SM_LAYER_NAME;
        return true;
    }
#ifdef SM_NEXT
    if (asked_next)
        return SM_NEXT_FN(getmeta)(c);
#else
    (void)asked_next;
#endif
    return false;
}

/* In place only: what already fits. */
static inline bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).resizes++;
    struct SM_FN(slab) *s = SM_FN(slab_of)(c->ptr);
    long i = s ? SM_FN(index_in)(s, c->ptr) : SM_FN(large_find_locked)(c->ptr);
    bool mine = s || i >= 0;
    bool fits = s ? i >= 0 && s->state[i] && n <= s->size : i >= 0 && n <= SM_FN(obj).large[i].size;
    pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
    if (!mine)
        return SM_NEXT_FN(resize)(c, n);
#else
    (void)mine;
#endif
    return fits;
}

/* A range inside a live object or large block: "dropped" by filling it with zeros (SM_F_ZERO) or
 * garbage. Anything else is passed down, or counted as a contract violation. */
static inline bool SM_FN(purge)(sm_mctx_t *c)
{
    char *p = (char *)c->ptr;
    bool inside = false, ours = false;
    pthread_mutex_lock(&SM_FN(obj).lock);
    struct SM_FN(slab) *s = SM_FN(slab_of)(p);
    if (s) {
        ours = true;
        size_t i = (size_t)(p - s->base) / s->size;
        char *o = s->base + i * s->size;
        inside = i < s->nobjs && s->state[i] && c->size <= s->size && (size_t)(p - o) <= s->size - c->size;
    } else {
        for (size_t k = 0; k < SM_FN(obj).large_count && !inside; k++) {
            char *b = (char *)SM_FN(obj).large[k].ptr;
            size_t n = SM_FN(obj).large[k].size;
            inside = p >= b && c->size <= n && (size_t)(p - b) <= n - c->size;
        }
        ours = inside;
    }
    if (inside) {
        memset(p, (c->flags & SM_F_ZERO) ? 0 : 0xCD, c->size);
        SM_FN(obj).purges++;
    } else if (ours) {
        SM_FN(obj).bad_purges++;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
    if (!ours)
        return SM_NEXT_FN(purge)(c);
#else
    if (!ours) {
        pthread_mutex_lock(&SM_FN(obj).lock);
        SM_FN(obj).bad_purges++;
        pthread_mutex_unlock(&SM_FN(obj).lock);
    }
#endif
    return inside;
}

/* Slabs are kept (see the header comment): a release only counts. */
static inline void SM_FN(release)(sm_release_t *r)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).releases++;
    SM_FN(obj).release_alls += r->how == SM_RELEASE_ALL;
    pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
    SM_NEXT_FN(release)(r);
#endif
}

static inline void SM_FN(thread_exit)(void)
{
    __atomic_add_fetch(&SM_FN(obj).thread_exits, 1, __ATOMIC_RELAXED);
#ifdef SM_NEXT
    SM_NEXT_FN(thread_exit)();
#endif
}

static inline void SM_FN(fork_prepare)(void)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).forks++;
#ifdef SM_NEXT
    SM_NEXT_FN(fork_prepare)();
#endif
}
static inline void SM_FN(fork_parent)(void)
{
    pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
    SM_NEXT_FN(fork_parent)();
#endif
}
static inline void SM_FN(fork_child)(void)
{
    pthread_mutex_init(&SM_FN(obj).lock, NULL);
#ifdef SM_NEXT
    SM_NEXT_FN(fork_child)();
#endif
}

/* ---- capability BATCH ---- */
static inline unsigned SM_FN(alloc_batch)(sm_mctx_t *c, void **out, unsigned n)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).alloc_batch_calls++;
    unsigned got = 0;
    bool served = SM_FN(serves)(c);
    if (served) {
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size);
        while (got < n && (out[got] = SM_FN(take_locked)(cls)) != NULL)
            got++;
        SM_FN(obj).alloc_batch_objs += got;
        if (!got && n)
            SM_FN(obj).failed++;
    }
    if (SM_FN(obj).log_n < SM_FN(log_max))
        SM_FN(obj).log[SM_FN(obj).log_n++] = (struct SM_FN(logged)){ c->size, n, got };
    pthread_mutex_unlock(&SM_FN(obj).lock);
    if (!served) /* as slab_lk: not a class request, the caller sends it through alloc */
        errno = EINVAL;
    else if (!got && n)
        errno = ENOMEM;
    return got;
}

static inline void SM_FN(free_batch)(void **blocks, unsigned n)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).free_batch_calls++;
    SM_FN(obj).free_batch_objs += n;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    for (unsigned i = 0; i < n; i++) {
        pthread_mutex_lock(&SM_FN(obj).lock);
        bool mine = SM_FN(free_locked)(blocks[i], 0, 0);
        pthread_mutex_unlock(&SM_FN(obj).lock);
#ifdef SM_NEXT
        if (!mine) {
            sm_mctx_t r = sm_mctx_block(blocks[i], 0, 0);
            __atomic_add_fetch(&SM_FN(obj).passed_down, 1, __ATOMIC_RELAXED);
            SM_NEXT_FN(free)(&r);
        }
#else
        (void)mine;
#endif
    }
}

/* ---- capability OWNER ---- */
/* The owner word: p's slab descriptor, or 0. Every call is a lookup, counted. */
static inline uintptr_t SM_FN(block_owner)(const void *p)
{
    __atomic_add_fetch(&SM_FN(obj).owner_lookups, 1, __ATOMIC_RELAXED);
    return (uintptr_t)SM_FN(slab_of)(p);
}

static inline unsigned SM_FN(owner_slot)(const void *p, uintptr_t w)
{
    const struct SM_FN(slab) *s = (const struct SM_FN(slab) *)w;
    if (s && SM_FN(index_in)(s, p) >= 0)
        return s->cls << 4;
    return (unsigned)SM_FN(batch_classes) << 4;
}

/* c: the request the question is asked for (its CPU picks the partition of a real sharded layer;
 * here the answer is what the test told the fake, and c is only checked to be there). */
static inline bool SM_FN(owner_local)(const void *p, uintptr_t w, sm_mctx_t *c)
{
    (void)p;
    __atomic_add_fetch(&SM_FN(obj).owner_locals, 1, __ATOMIC_RELAXED);
    if (!c)
        __atomic_add_fetch(&SM_FN(obj).no_context, 1, __ATOMIC_RELAXED);
    const struct SM_FN(slab) *s = (const struct SM_FN(slab) *)w;
    if (!s)
        return true; /* not a slab's: nothing to say */
    if (__atomic_load_n(&SM_FN(obj).not_local, __ATOMIC_RELAXED) || __atomic_load_n(&s->remote, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&SM_FN(obj).not_local_answers, 1, __ATOMIC_RELAXED);
        return false;
    }
    return true;
}

/* The fake's words name no partition: nothing is foreign on a free's hit path. */
static inline uintptr_t SM_FN(owner_foreign)(sm_mctx_t *c)
{
    (void)c;
    return 0;
}

/* ---- for tests ---- */
/* owner_local answers false (on) or true again for the objects of p's slab; false if p is in none. */
static inline bool SM_FN(mark_remote)(const void *p, bool on)
{
    struct SM_FN(slab) *s = SM_FN(slab_of)(p);
    if (s)
        __atomic_store_n(&s->remote, on ? 1 : 0, __ATOMIC_RELAXED);
    return s != NULL;
}
/* 1: p is an object or large block handed out and not freed; 0: free or unknown. */
static inline int SM_FN(is_live)(const void *p)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    struct SM_FN(slab) *s = SM_FN(slab_of)(p);
    long i = s ? SM_FN(index_in)(s, p) : SM_FN(large_find_locked)(p);
    int live = s ? i >= 0 && s->state[i] : i >= 0;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return live;
}
static inline void SM_FN(log_reset)(void)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).log_n = 0;
    pthread_mutex_unlock(&SM_FN(obj).lock);
}
/* A snapshot of a counter, taken under the lock. */
#define FAKE_BATCH_GET(inst, field)                                                                                  \
    ({                                                                                                               \
        pthread_mutex_lock(&inst##_obj.lock);                                                                        \
        __typeof__(inst##_obj.field) v_ = inst##_obj.field;                                                          \
        pthread_mutex_unlock(&inst##_obj.lock);                                                                      \
        v_;                                                                                                          \
    })

#define SM_LAYER_OFFERS (SM_CAP_BATCH | SM_CAP_OWNER)
#include <sunmao/core/layer_end.h>
