/* slab_wf: a wait-free slab for small blocks (Mortise paper, Table 2 and §3 (3): wfslab's small
 * blocks). Every malloc and free is a bounded number of steps whatever other threads do, uses
 * atomics even single-threaded, and neither batches nor caches remote frees: the paper's trade of
 * throughput for the lowest worst case and a low RSS (docs/latency.md).
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sizeclass (required; the paper's is prime), err (required),
 * size_handle. No sync slot. Options:
 *   SM_OPT_SLAB_SIZE    a power of two >= 16 KiB: bytes per slab, aligned to it (default 64 KiB)
 *   SM_OPT_TLLABS       thread-local allocation slabs: the most slabs a thread owns at once, over
 *                       all classes (default 40; docs/latency.md has the measurement)
 *   SM_OPT_MIN_OBJECTS  a class is served if a slab holds at least this many of its objects
 *                       (default 4); larger requests go down
 *   SM_OPT_DECAY_MS     an empty slab idle this long is purged by L_release (default 1000)
 * Properties: thread-safe; 16-byte alignment (aligned requests above it go down); zeroed 0.
 * Capabilities: HIT (an allocation from the thread's slab of the class, a free of any object of
 * ours: the socket then builds no request context on them); MOVE where the next layer has it (for
 * blocks not its own). Needs: STABLE from the next layer
 * for slab-sized blocks (core/capability.h).
 *
 * A slab holds objects of one class after a header: a link, a control word, and a bitmap of
 * atomic words, a set bit per free object. A thread owns one slab per class it allocates from
 * (up to SM_OPT_TLLABS over all classes: then the next class round gives its slab up) and allocates
 * by clearing a set bit (an atomic and: only the owner clears bits, so it cannot fail); every
 * free, local or remote, sets its bit by an atomic or, whose old value tells a double free, and
 * finds the object's index by a multiply (no division). The owner's scan for a set bit is at most
 * the bitmap's words. A slab the owner finds full is detached: it counts the frees it gets in its
 * control word, and the free that reaches a quarter of its objects pushes it onto its class's
 * stack of partial slabs, where a thread needing a slab of the class adopts it. A detached slab
 * whose last object comes back is pushed onto the stack of empty slabs, which any class takes
 * from before asking the next layer. Stacks are tagged Treiber stacks (core/tagged_stack.h).
 * Slabs are never given back: release purges idle empty ones (but the page holding their
 * header), so the memory of a slab stays a slab, and a late reader of one (a pop, a free that
 * lost a race) finds a header or zeros, never another layer's data.
 *
 * Control word: state (owned, detached, queued, empty) | epoch, bumped at each adoption, so a
 * compare-and-swap of a late thread fails | count of frees since it was detached. Invariants:
 * only the owner clears bits; a slab is in at most one stack, in state queued (class) or empty;
 * a free updates the control word before it sets its bit, so once every bit is set no free is
 * still about to change the slab (but a push it decided on, and epoch-checked looks). The page
 * map (slab granule; nodes installed by compare-and-swap) holds each slab's class + 1, set when
 * it is formatted.
 * Progress: the per-object steps are wait-free; a slab's change of hands (at most once per
 * quarter slab of frees) takes lock-free stack operations. Fork: nothing to lock.
 * @model: name=slab_wf kind=core flag serves-max=slab_size/min_objects slot sizeclass slot err range
 * @model: key slab_size size key tllabs int key min_objects int key decay_ms int
 * @check: SM_LAYER=t <sunmao/policies/sizeclass/prime.h> SM_SIZECLASS=prime <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: stable */
#include <stdint.h>
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"
#include "../../core/tagged_stack.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "slab_wf: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "slab_wf: define SM_NEXT (the layer below) before including"
#endif
#ifdef SM_SYNC
#error "slab_wf: wait-free by construction, it has no sync slot; undefine SM_SYNC"
#endif
#ifndef SM_SIZECLASS
#error "slab_wf: policy slot 'sizeclass' is empty (SM_SIZECLASS = prime|tc|...: its classes)"
#endif
#ifndef SM_ERR
#error "slab_wf: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

#ifndef SM_OPT_SLAB_SIZE
#define SM_OPT_SLAB_SIZE ((size_t)64 << 10)
#endif
#ifndef SM_OPT_TLLABS
#define SM_OPT_TLLABS 40
#endif
#ifndef SM_OPT_MIN_OBJECTS
#define SM_OPT_MIN_OBJECTS 4
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
_Static_assert((SM_OPT_DECAY_MS) >= 1, "slab_wf: SM_OPT_DECAY_MS must be at least 1 ms");
_Static_assert((SM_OPT_SLAB_SIZE) >= (16u << 10) && (SM_OPT_SLAB_SIZE) <= ((size_t)1 << 24) &&
                   ((SM_OPT_SLAB_SIZE) & ((SM_OPT_SLAB_SIZE) - 1)) == 0,
               "slab_wf: SM_OPT_SLAB_SIZE must be a power of two in [16 KiB, 16 MiB]");
_Static_assert((SM_OPT_TLLABS) >= 1 && (SM_OPT_TLLABS) <= 4096, "slab_wf: SM_OPT_TLLABS must be in [1, 4096]");
_Static_assert((SM_OPT_MIN_OBJECTS) >= 1 && (SM_OPT_MIN_OBJECTS) <= 64, "slab_wf: SM_OPT_MIN_OBJECTS must be in [1, 64]");
SM_REQUIRE_CAP(STABLE, "a pop reads the link of a slab another thread may have taken");
_Static_assert(SM_PROP(SM_NEXT, stable_max) >= (SM_OPT_SLAB_SIZE),
               "slab_wf: the next layer keeps blocks mapped only below the slab size (STABLE's stable_max)");

enum {
    SM_FN(classes) = SM_SIZECLASS_FN(count),
    SM_FN(shift) = __builtin_ctzll(SM_OPT_SLAB_SIZE),
    SM_FN(thread_safe) = 1,
    SM_FN(min_align) = 16,
    SM_FN(zeroed) = 0,
};

/* Bytes at a slab's start never purged: its header and largest bitmap (16-byte objects). */
#define SM_SLABWF_HEADER_PAGE \
    sm_align_up(offsetof(struct SM_FN(slab), bits) + ((SM_OPT_SLAB_SIZE) / 16 + 63) / 64 * 8, 4096)

/* An empty slab's pages. */
#define SM_SLABWF_FRESH  0u
#define SM_SLABWF_AGED   1u
#define SM_SLABWF_PURGED 2u

/* Control word. */
#define SM_SLABWF_OWNED    ((uint64_t)0)
#define SM_SLABWF_DETACHED ((uint64_t)1 << 62)
#define SM_SLABWF_QUEUED   ((uint64_t)2 << 62)
#define SM_SLABWF_EMPTY    ((uint64_t)3 << 62)
#define SM_SLABWF_STATE    ((uint64_t)3 << 62)
#define SM_SLABWF_EPOCH1   ((uint64_t)1 << 40)
#define SM_SLABWF_EPOCHS   (((uint64_t)1 << 62) - SM_SLABWF_EPOCH1)
#define SM_SLABWF_COUNT    (SM_SLABWF_EPOCH1 - 1)

struct SM_FN(slab) {
    sm_tnode_t link;       /* in a stack: the next slab */
    uint32_t cursor;       /* owner only: the bitmap word it looks at first */
    uint32_t purged;       /* in the empty stack: FRESH, AGED (seen by a release pass), PURGED */
    SM_CACHE_ALIGNED uint64_t ctl;
    SM_CACHE_ALIGNED uint64_t bits[];
};

/* A class's slab layout, made by create. */
struct SM_FN(geometry) {
    uint32_t size, count, words, first; /* object bytes, objects, bitmap words, first object's offset */
    uint64_t recip;                     /* ceil(2^40 / size): offset -> index by a multiply */
    uint64_t last_mask;                 /* the bits of the last bitmap word that are objects */
    uint32_t threshold;                 /* frees that make a detached slab worth adopting */
};

/* A thread's slabs. */
struct SM_FN(owner) {
    sm_tnode_t link; /* in the stack of spare ones */
    unsigned owned, victim;
    struct SM_FN(slab) *cur[SM_FN(classes)];
};

static struct {
    struct SM_FN(geometry) geo[SM_FN(classes)];
    size_t max_size; /* the largest request served (0 until create) */
    sm_pagemap_t map;
    void *spare_node;
    size_t map_nodes, slabs, empties; /* atomic counters */
    sm_tstack_t empty, owners;
    struct {
        SM_CACHE_ALIGNED sm_tstack_t partial;
        size_t emptied; /* about how many slabs on the stack are all free (a hint) */
    } cls[SM_FN(classes)];
} SM_FN(obj);

static __thread struct SM_FN(owner) *SM_FN(tls) __attribute__((tls_model("initial-exec")));

SM_INLINE void SM_FN(thread_exit)(void);

SM_PAGEMAP_SHARED_NODE_ALLOC(SM_CACHELINE, SM_FN(obj).spare_node, SM_FN(obj).map_nodes)

/* The decay in force: SM_OPT_DECAY_MS, or dirty_decay_ms (core/conf.h), read once in create. */
static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    size_t max = 0;
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        struct SM_FN(geometry) *g = &SM_FN(obj).geo[i];
        size_t size = SM_SIZECLASS_FN(class_to_size)(i), head = offsetof(struct SM_FN(slab), bits);
        size_t count = ((SM_OPT_SLAB_SIZE) - head) / size, words = (count + 63) / 64;
        size_t first = sm_align_up(head + words * 8, 16);
        count = ((SM_OPT_SLAB_SIZE) - first) / size;
        if (count < (SM_OPT_MIN_OBJECTS))
            break; /* classes grow: no larger one fits either */
        words = (count + 63) / 64;
        *g = (struct SM_FN(geometry)){ (uint32_t)size, (uint32_t)count, (uint32_t)words, (uint32_t)first,
                                       (((uint64_t)1 << 40) + size - 1) / size,
                                       count % 64 ? ((uint64_t)1 << (count % 64)) - 1 : ~(uint64_t)0,
                                       (uint32_t)(count / 4 ? count / 4 : 1) };
        max = size;
    }
    __atomic_store_n(&SM_FN(obj).max_size, max, __ATOMIC_RELEASE);
    return SM_NEXT_FN(create)();
}

SM_INLINE struct SM_FN(slab) *SM_FN(slab_of)(const void *p)
{
    return (struct SM_FN(slab) *)((uintptr_t)p & ~((uintptr_t)(SM_OPT_SLAB_SIZE) - 1));
}

/* The owner's next object of slab s (class geometry g), or NULL: at most g->words loads. */
SM_HOT void *SM_FN(take)(struct SM_FN(slab) *s, const struct SM_FN(geometry) *g)
{
    unsigned w = s->cursor;
    for (unsigned i = 0; i < g->words; i++) {
        uint64_t v = __atomic_load_n(&s->bits[w], __ATOMIC_RELAXED);
        if (sm_likely(v)) {
            unsigned b = (unsigned)__builtin_ctzll(v);
            __atomic_fetch_and(&s->bits[w], ~((uint64_t)1 << b), __ATOMIC_ACQUIRE);
            s->cursor = w;
            return (char *)s + g->first + (size_t)(w * 64 + b) * g->size;
        }
        w = w + 1 == g->words ? 0 : w + 1;
    }
    return NULL;
}

/* Free objects of s now (loads: an estimate while others free). */
SM_INLINE size_t SM_FN(free_objects)(struct SM_FN(slab) *s, const struct SM_FN(geometry) *g)
{
    size_t n = 0;
    for (unsigned w = 0; w < g->words; w++)
        n += (size_t)__builtin_popcountll(__atomic_load_n(&s->bits[w], __ATOMIC_SEQ_CST));
    return n;
}

/* The same, by a free after its bit: the slab may be in its next life by then, with fewer bitmap
 * words and objects where these were (core/tagged_stack.h's sm_stable_look). */
SM_INLINE bool SM_FN(looks_all_free)(struct SM_FN(slab) *s, const struct SM_FN(geometry) *g)
{
    size_t n = 0;
    for (unsigned w = 0; w < g->words; w++)
        n += (size_t)__builtin_popcountll(sm_stable_look(&s->bits[w]));
    return n == g->count;
}

SM_INLINE void SM_FN(push_empty)(struct SM_FN(slab) *s)
{
    __atomic_add_fetch(&SM_FN(obj).empties, 1, __ATOMIC_RELAXED);
    sm_tstack_push(&SM_FN(obj).empty, &s->link);
    sm_release_note();
}

/* A detached slab of epoch `seen` whose every object is free goes to the empty stack, once:
 * whoever wins the CAS (the last freer, or its detaching owner) pushes it. */
SM_SLOWPATH void SM_FN(empty_if_done)(struct SM_FN(slab) *s, const struct SM_FN(geometry) *g, uint64_t seen)
{
    uint64_t c = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
    if ((c & ~SM_SLABWF_COUNT) != (SM_SLABWF_DETACHED | (seen & SM_SLABWF_EPOCHS)))
        return; /* queued, emptied, or in its next life: its bits are not this look's to read */
    if (!SM_FN(looks_all_free)(s, g))
        return;
    c = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
    while ((c & SM_SLABWF_STATE) == SM_SLABWF_DETACHED && (c & SM_SLABWF_EPOCHS) == (seen & SM_SLABWF_EPOCHS))
        if (__atomic_compare_exchange_n(&s->ctl, &c, SM_SLABWF_EMPTY | (c & SM_SLABWF_EPOCHS), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            (void)SM_FN(free_objects)(s, g); /* the slab is ours now: these loads acquire every free */
            SM_FN(push_empty)(s);
            return;
        }
}

/* The owner lets s go: to the empty stack if all free, to its class's partial stack if a quarter
 * is, else detached (its frees count, and the one that reaches the quarter queues it). */
SM_SLOWPATH void SM_FN(detach)(struct SM_FN(slab) *s, unsigned cls)
{
    const struct SM_FN(geometry) *g = &SM_FN(obj).geo[cls];
    uint64_t epoch = __atomic_load_n(&s->ctl, __ATOMIC_RELAXED) & SM_SLABWF_EPOCHS;
    size_t f = SM_FN(free_objects)(s, g);
    if (f == g->count) { /* no free can be on its way (all are done), but a double one */
        __atomic_store_n(&s->ctl, SM_SLABWF_EMPTY | epoch, __ATOMIC_SEQ_CST);
        SM_FN(push_empty)(s);
    } else if (f >= g->threshold) {
        __atomic_store_n(&s->ctl, SM_SLABWF_QUEUED | epoch, __ATOMIC_SEQ_CST);
        sm_tstack_push(&SM_FN(obj).cls[cls].partial, &s->link);
    } else {
        /* Frees that saw it owned after the count above are in nobody's count; if they were the
         * last ones, nobody else will find it done: look again. */
        __atomic_exchange_n(&s->ctl, SM_SLABWF_DETACHED | epoch | f, __ATOMIC_SEQ_CST);
        SM_FN(empty_if_done)(s, g, epoch);
    }
}

/* s becomes the calling thread's, epoch bumped, as its slab of class cls. */
SM_INLINE void SM_FN(install)(struct SM_FN(owner) *t, unsigned cls, struct SM_FN(slab) *s, uint64_t epoch)
{
    __atomic_store_n(&s->ctl, SM_SLABWF_OWNED | ((epoch + SM_SLABWF_EPOCH1) & SM_SLABWF_EPOCHS), __ATOMIC_SEQ_CST);
    t->cur[cls] = s;
    t->owned++;
}

/* An all-free slab from the partial stack of a class whose hint says it has one (they stay on
 * their class's stack when their last object comes back there): a few pops per class, the
 * others pushed back. Bounded: SM_FN(classes) x 4 pops. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(scavenge)(void)
{
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        if (!__atomic_load_n(&SM_FN(obj).cls[i].emptied, __ATOMIC_RELAXED))
            continue;
        sm_tnode_t *first = NULL, *last = NULL;
        struct SM_FN(slab) *found = NULL;
        for (unsigned k = 0; k < 4 && !found; k++) {
            struct SM_FN(slab) *s = (struct SM_FN(slab) *)sm_tstack_pop(&SM_FN(obj).cls[i].partial);
            if (!s)
                break;
            if (SM_FN(free_objects)(s, &SM_FN(obj).geo[i]) == SM_FN(obj).geo[i].count) {
                found = s;
                break;
            }
            s->link.next = first, first = &s->link;
            if (!last)
                last = first;
        }
        if (first)
            sm_tstack_push_chain(&SM_FN(obj).cls[i].partial, first, last);
        if (found) {
            __atomic_sub_fetch(&SM_FN(obj).cls[i].emptied, 1, __ATOMIC_RELAXED);
            return found;
        }
        __atomic_store_n(&SM_FN(obj).cls[i].emptied, 0, __ATOMIC_RELAXED); /* none near the top */
    }
    return NULL;
}

/* A slab of class cls from the empty stack, another class's all-free ones, or the next layer,
 * formatted, every object free. */
SM_SLOWPATH struct SM_FN(slab) *SM_FN(fresh)(unsigned cls, uint64_t *epoch)
{
    const struct SM_FN(geometry) *g = &SM_FN(obj).geo[cls];
    struct SM_FN(slab) *s = (struct SM_FN(slab) *)sm_tstack_pop(&SM_FN(obj).empty);
    if (s)
        __atomic_sub_fetch(&SM_FN(obj).empties, 1, __ATOMIC_RELAXED);
    else
        s = SM_FN(scavenge)();
    if (s) {
        *epoch = __atomic_load_n(&s->ctl, __ATOMIC_RELAXED);
    } else {
        sm_mctx_t r = sm_mctx_alloc(SM_OPT_SLAB_SIZE, SM_OPT_SLAB_SIZE, 0);
        s = (struct SM_FN(slab) *)SM_NEXT_FN(alloc)(&r);
        if (!s)
            return NULL;
        if (!sm_ptr_aligned(s, SM_OPT_SLAB_SIZE)) {
            SM_NEXT_FN(free)(&r);
            return NULL;
        }
        __atomic_add_fetch(&SM_FN(obj).slabs, 1, __ATOMIC_RELAXED);
        *epoch = 0;
        sm_release_note(); /* from now on slabs may empty: the release clock runs */
    }
    /* The class first: a late free of the slab's old life then reads a geometry that matches
     * its bits (all set: reported as a double free) or none. */
    if (!sm_pagemap_set_shared(&SM_FN(obj).map, SM_FN(shift), s, 1, cls + 1, SM_FN(map_node_alloc),
                               SM_FN(map_node_lost))) {
        SM_FN(push_empty)(s); /* formatted or not, it is free */
        return NULL;
    }
    s->cursor = 0;
    s->purged = SM_SLABWF_FRESH;
    for (unsigned w = 0; w < g->words; w++)
        __atomic_store_n(&s->bits[w], w + 1 == g->words ? g->last_mask : ~(uint64_t)0, __ATOMIC_RELAXED);
    return s;
}

/* No record under junk or zero (core/conf.h): this layer serves on its hit paths, where the
 * socket's fills cannot reach, so with a fill it serves nothing and every block comes from the
 * next layer through the socket's slow paths (a debugging mode: slower, every byte filled). */
SM_SLOWPATH struct SM_FN(owner) *SM_FN(owner_make)(void)
{
    if (!SM_FN(obj).max_size || sm_conf.fill || !sm_thread_attach(SM_FN(thread_exit)))
        return NULL;
    struct SM_FN(owner) *t = (struct SM_FN(owner) *)sm_tstack_pop(&SM_FN(obj).owners);
    if (!t) {
        sm_mctx_t r = sm_mctx_alloc(sizeof *t, SM_CACHELINE, 0);
        t = (struct SM_FN(owner) *)SM_FN(meta_alloc)(&r);
        if (!t)
            return NULL;
    }
    memset(t, 0, sizeof *t);
    return SM_FN(tls) = t;
}

/* The rest of alloc: the thread's slab of the class is used up (or there is none). */
SM_SLOWPATH void *SM_FN(alloc_slow)(sm_mctx_t *c, unsigned cls)
{
    struct SM_FN(owner) *t = SM_FN(tls) ? SM_FN(tls) : SM_FN(owner_make)();
    if (!t) /* no exit hook left for this thread, or before create: not served here */
        return SM_NEXT_FN(alloc)(c);
    const struct SM_FN(geometry) *g = &SM_FN(obj).geo[cls];
    if (t->cur[cls]) {
        struct SM_FN(slab) *old = t->cur[cls];
        t->cur[cls] = NULL;
        t->owned--;
        SM_FN(detach)(old, cls);
    }
    while (t->owned >= (SM_OPT_TLLABS)) { /* make room: the next class round the thread's slabs */
        unsigned v = t->victim = t->victim + 1 >= SM_FN(classes) ? 0 : t->victim + 1;
        if (t->cur[v]) {
            struct SM_FN(slab) *old = t->cur[v];
            t->cur[v] = NULL;
            t->owned--;
            SM_FN(detach)(old, v);
        }
    }
    for (unsigned tries = 0; tries < 4; tries++) { /* a partial slab of the class */
        struct SM_FN(slab) *s = (struct SM_FN(slab) *)sm_tstack_pop(&SM_FN(obj).cls[cls].partial);
        if (!s)
            break;
        SM_FN(install)(t, cls, s, __atomic_load_n(&s->ctl, __ATOMIC_RELAXED));
        void *p = SM_FN(take)(s, g);
        if (p)
            return c->ptr = p;
        t->cur[cls] = NULL; /* its frees were counted, not made yet: let it wait for them */
        t->owned--;
        SM_FN(detach)(s, cls);
    }
    uint64_t epoch;
    struct SM_FN(slab) *s = SM_FN(fresh)(cls, &epoch);
    if (!s) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    SM_FN(install)(t, cls, s, epoch);
    return c->ptr = SM_FN(take)(s, g);
}

/* The hit path (capability HIT): the thread's slab of the class, or a miss. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    struct SM_FN(owner) *t = SM_FN(tls);
    /* max_size is 0 and no thread has a record before create; read atomically, as create writes
     * it while other threads may already be here */
    if (sm_unlikely(!(SM_SIZE_USER) || !SM_FN(handles_size)(size) ||
                    size > __atomic_load_n(&SM_FN(obj).max_size, __ATOMIC_RELAXED) || t == NULL))
        return NULL;
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(size);
    struct SM_FN(slab) *s = t->cur[cls];
    return sm_likely(s != NULL) ? SM_FN(take)(s, &SM_FN(obj).geo[cls]) : NULL;
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (sm_unlikely(!SM_FN(serves)(c) || c->size > SM_FN(obj).max_size || c->align > 16))
        return SM_NEXT_FN(alloc)(c);
    unsigned cls = SM_SIZECLASS_FN(size_to_class)(c->size);
    struct SM_FN(owner) *t = SM_FN(tls);
    if (t && t->cur[cls]) {
        void *p = SM_FN(take)(t->cur[cls], &SM_FN(obj).geo[cls]);
        if (p)
            return c->ptr = p;
    }
    return SM_FN(alloc_slow)(c, cls);
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c) { return SM_FN(alloc)(c); }

/* The class of p's slab + 1 (0: not a slab of ours), and p's index in it; false: not the start
 * of an object. */
SM_HOT bool SM_FN(locate)(const void *p, uintptr_t *word, const struct SM_FN(geometry) **geo, size_t *index)
{
    uintptr_t w = sm_pagemap_get(&SM_FN(obj).map, SM_FN(shift), p);
    *word = w;
    if (!w)
        return false;
    const struct SM_FN(geometry) *g = &SM_FN(obj).geo[w - 1];
    size_t off = (uintptr_t)p - (uintptr_t)SM_FN(slab_of)(p) - g->first;
    size_t i = (size_t)(((uint64_t)off * g->recip) >> 40); /* off < 2^24: exact */
    *geo = g, *index = i;
    return i < g->count && i * g->size == off;
}

SM_SLOWPATH SM_UNUSED void SM_FN(bad_free)(const void *p, bool twice)
{
    SM_ERR_FN(raise)(twice ? SM_ERR_DOUBLE_FREE : SM_ERR_INVALID_FREE, SM_LAYER_NAME, p,
                     twice ? "object already freed" : "pointer is not the start of an object");
}

/* Frees p if it is in a slab of ours (bad frees reported): false if it is not. */
SM_HOT bool SM_FN(free_here)(void *p, size_t size, unsigned flags)
{
    uintptr_t w;
    const struct SM_FN(geometry) *g;
    size_t i;
    if (sm_unlikely(!SM_FN(locate)(p, &w, &g, &i))) {
        if (w)
            SM_FN(bad_free)(p, false);
        return w != 0;
    }
    struct SM_FN(slab) *s = SM_FN(slab_of)(p);
    uint64_t *word = &s->bits[i / 64], bit = (uint64_t)1 << (i % 64);
    if (sm_unlikely(((flags & SM_F_SIZED) && size > g->size) || (__atomic_load_n(word, __ATOMIC_RELAXED) & bit))) {
        SM_FN(bad_free)(p, !(flags & SM_F_SIZED) || size <= g->size);
        return true;
    }
    uint64_t ctl = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
    bool queue = false;
    if (sm_unlikely((ctl & SM_SLABWF_STATE) == SM_SLABWF_DETACHED)) {
        uint64_t old = __atomic_fetch_add(&s->ctl, 1, __ATOMIC_SEQ_CST);
        if ((old & ~SM_SLABWF_COUNT) == (ctl & ~SM_SLABWF_COUNT) && (old & SM_SLABWF_COUNT) + 1 == g->threshold) {
            __atomic_fetch_add(&s->ctl, SM_SLABWF_QUEUED - SM_SLABWF_DETACHED, __ATOMIC_SEQ_CST);
            queue = true;
        }
    }
    uint64_t old = __atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
    if (sm_unlikely(old & bit)) {
        SM_FN(bad_free)(p, true);
        return true;
    }
    /* After the bit, only a push decided above, or a look (loads, an epoch-checked CAS): the
     * slab may be empty and in another life by now. A free that fills its word looks whether the
     * whole slab is free; its control word is read after the bit, so a detach that read the bits
     * before it (and missed it) is seen: one of the two finds the slab done. */
    if (sm_unlikely(queue))
        sm_tstack_push(&SM_FN(obj).cls[w - 1].partial, &s->link);
    else if (sm_unlikely((old | bit) == (word + 1 == &s->bits[g->words] ? g->last_mask : ~(uint64_t)0))) {
        ctl = __atomic_load_n(&s->ctl, __ATOMIC_SEQ_CST);
        if ((ctl & SM_SLABWF_STATE) == SM_SLABWF_DETACHED)
            SM_FN(empty_if_done)(s, g, ctl);
        else if ((ctl & SM_SLABWF_STATE) == SM_SLABWF_QUEUED && SM_FN(looks_all_free)(s, g)) {
            __atomic_add_fetch(&SM_FN(obj).cls[w - 1].emptied, 1, __ATOMIC_RELAXED);
            sm_release_note();
        }
    }
    return true;
}

SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    (void)owner_word; /* no OWNER capability: nothing to hand on */
    return SM_FN(free_here)(p, size, flags);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (!SM_FN(free_here)(c->ptr, c->size, c->flags))
        SM_NEXT_FN(free)(c);
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c) { SM_FN(free)(c); }



SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uintptr_t w;
    const struct SM_FN(geometry) *g;
    size_t i;
    if (!SM_FN(locate)(c->ptr, &w, &g, &i))
        return w ? false : SM_NEXT_FN(getmeta)(c);
    if (__atomic_load_n(&SM_FN(slab_of)(c->ptr)->bits[i / 64], __ATOMIC_RELAXED) & ((uint64_t)1 << (i % 64)))
        return false; /* free */
    c->usable = g->size;
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Within the object only. */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    uintptr_t w;
    const struct SM_FN(geometry) *g;
    size_t i;
    if (!SM_FN(locate)(c->ptr, &w, &g, &i))
        return w ? false : SM_NEXT_FN(resize)(c, n);
    return n <= g->size;
}

/* Capability MOVE: its objects stay in their slabs; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    uintptr_t w;
    const struct SM_FN(geometry) *g;
    size_t i;
    return !SM_FN(locate)(c->ptr, &w, &g, &i) && !w && SM_NEXT_FN(move)(c, n);
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* All-free slabs of the partial stacks move to the empty stack (no free is on its way to them:
 * all are done; only the classes whose hint says so, or all on ALL). Empty slabs are purged past
 * their header's page once idle: a pass marks them aged, a pass SM_OPT_DECAY_MS later purges those
 * still there (ALL: every one at once), all but SM_OPT_TLLABS of them. The stack is taken whole
 * only to split it: the slabs to purge are purged outside it, the rest go back at once. */
SM_INLINE void SM_FN(release)(sm_release_t *r)
{
    for (unsigned i = 0; i < SM_FN(classes); i++) {
        if (r->how != SM_RELEASE_ALL && !__atomic_load_n(&SM_FN(obj).cls[i].emptied, __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&SM_FN(obj).cls[i].emptied, 0, __ATOMIC_RELAXED);
        sm_tnode_t *first = sm_tstack_take_all(&SM_FN(obj).cls[i].partial), *keep = NULL, *keep_last = NULL;
        while (first) {
            struct SM_FN(slab) *s = (struct SM_FN(slab) *)first;
            first = first->next;
            if (SM_FN(free_objects)(s, &SM_FN(obj).geo[i]) == SM_FN(obj).geo[i].count) {
                __atomic_store_n(&s->ctl, SM_SLABWF_EMPTY | (s->ctl & SM_SLABWF_EPOCHS), __ATOMIC_SEQ_CST);
                __atomic_add_fetch(&SM_FN(obj).empties, 1, __ATOMIC_RELAXED);
                sm_tstack_push(&SM_FN(obj).empty, &s->link);
            } else {
                s->link.next = keep, keep = &s->link;
                if (!keep_last)
                    keep_last = keep;
            }
        }
        if (keep)
            sm_tstack_push_chain(&SM_FN(obj).cls[i].partial, keep, keep_last);
    }
    size_t reserve = r->how == SM_RELEASE_ALL ? 0 : (SM_OPT_TLLABS), seen = 0;
    bool pending = false;
    sm_tnode_t *n = sm_tstack_take_all(&SM_FN(obj).empty), *back = NULL, *back_last = NULL, *purge = NULL;
    while (n) {
        struct SM_FN(slab) *s = (struct SM_FN(slab) *)n;
        n = n->next;
        bool to_purge = ++seen > reserve && s->purged != SM_SLABWF_PURGED &&
                        ((s->purged == SM_SLABWF_AGED && SM_FN(decay_ms) != SM_CONF_DECAY_NEVER) ||
                         r->how == SM_RELEASE_ALL);
        if (to_purge) {
            s->link.next = purge, purge = &s->link;
            continue;
        }
        if (seen > reserve && s->purged == SM_SLABWF_FRESH)
            s->purged = SM_SLABWF_AGED, pending = true;
        s->link.next = back, back = &s->link;
        if (!back_last)
            back_last = back;
    }
    if (back)
        sm_tstack_push_chain(&SM_FN(obj).empty, back, back_last);
    while (purge) {
        struct SM_FN(slab) *s = (struct SM_FN(slab) *)purge;
        purge = purge->next;
        sm_mctx_t p = sm_mctx_block((char *)s + SM_SLABWF_HEADER_PAGE, (SM_OPT_SLAB_SIZE) - SM_SLABWF_HEADER_PAGE, SM_F_ZERO);
        if (SM_NEXT_FN(purge)(&p))
            r->released += p.size;
        s->purged = SM_SLABWF_PURGED;
        sm_tstack_push(&SM_FN(obj).empty, &s->link);
    }
    if (pending)
        sm_release_due(r, r->now_ms + SM_FN(decay_ms));
    SM_NEXT_FN(release)(r);
}

/* The thread's slabs are detached; its record is kept for the next thread. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(owner) *t = SM_FN(tls);
    if (t) {
        SM_FN(tls) = NULL;
        for (unsigned i = 0; i < SM_FN(classes); i++)
            if (t->cur[i])
                SM_FN(detach)(t->cur[i], i);
        sm_tstack_push(&SM_FN(obj).owners, &t->link);
    }
    SM_NEXT_FN(thread_exit)();
}

SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAP_HIT | (SM_CAPS(SM_NEXT) & SM_CAP_MOVE))

/* Counted from the slabs at read time: the hit paths keep no counter, and a slab's bitmap is
 * already the truth (a clear bit is an object handed up). Every formatted slab is in the map
 * (slabs are never given back), so the walk finds each one; an empty one's bits are all set. */
SM_INLINE void SM_FN(stats_slab)(void *arg, uintptr_t at, uintptr_t w)
{
    sm_stats_t *s = (sm_stats_t *)arg;
    sm_stats_layer_t *l = &s->layer[s->nlayers - 1];
    struct SM_FN(slab) *slab = (struct SM_FN(slab) *)at;
    const struct SM_FN(geometry) *g = &SM_FN(obj).geo[w - 1];
    if ((__atomic_load_n(&slab->ctl, __ATOMIC_RELAXED) & SM_SLABWF_STATE) == SM_SLABWF_EMPTY) {
        l->dirty += slab->purged == SM_SLABWF_PURGED ? SM_SLABWF_HEADER_PAGE : (SM_OPT_SLAB_SIZE);
        return;
    }
    size_t live = g->count - SM_FN(free_objects)(slab, g);
    sm_stats_class_t *c = sm_stats_class(s, g->size);
    c->slabs++;
    c->live += live;
    l->in_use += live * g->size;
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    l->blocks = __atomic_load_n(&SM_FN(obj).slabs, __ATOMIC_RELAXED);
    l->held = l->blocks * (SM_OPT_SLAB_SIZE);
    sm_pagemap_each(&SM_FN(obj).map, SM_FN(shift), SM_FN(stats_slab), s);
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

#undef SM_SLABWF_HEADER_PAGE
#undef SM_SLABWF_FRESH
#undef SM_SLABWF_AGED
#undef SM_SLABWF_PURGED
#undef SM_SLABWF_OWNED
#undef SM_SLABWF_DETACHED
#undef SM_SLABWF_QUEUED
#undef SM_SLABWF_EMPTY
#undef SM_SLABWF_STATE
#undef SM_SLABWF_EPOCH1
#undef SM_SLABWF_EPOCHS
#undef SM_SLABWF_COUNT
#undef SM_OPT_SLAB_SIZE
#undef SM_OPT_TLLABS
#undef SM_OPT_MIN_OBJECTS
#undef SM_OPT_DECAY_MS

#include "../../core/layer_end.h"
