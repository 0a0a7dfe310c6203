/* Statistics: the snapshot every layer instance fills with L_stats (core/layer.h), and how the
 * totals are made from what each layer knows. Framework core.
 *
 *   void L_stats(sm_stats_t *s)   add this layer's figures (sm_stats_layer), then call the next
 *                                 layer's; an OS layer only adds. Slow path: may take the layer's
 *                                 lock, never allocates. core/caps_default.h gives every layer a
 *                                 default that adds an entry with its name and forwards; a layer
 *                                 with figures of its own defines L_stats and SM_LAYER_STATS 1.
 *
 * Fixed size, no pointers into the heap: the socket keeps one snapshot in static storage (epoch).
 *
 * Figures, in jemalloc's meaning (bytes):
 *   mapped     obtained from the OS and still mapped (OS layers)
 *   resident   upper bound on what is backed: mapped minus what an OS layer knows it purged
 *   retained   address space kept without backing (reservations not handed out)
 *   metadata   the layers' own bookkeeping: page maps, descriptors, per-thread caches
 *   active     blocks handed out, at page granularity (the OS layers' in_use)
 *   allocated  the program's live blocks, at their usable sizes
 *
 * How `allocated` is exact without a counter on any hit path. Each layer counts, under the lock it
 * already takes, the bytes of the blocks it handed up and has not had back (in_use, in its own
 * units: what its getmeta calls usable), and the bytes it holds from its next layer (held: slabs,
 * spans, chunks, cached blocks, in the next layer's units). A block the program holds is in the
 * in_use of exactly one layer that nobody above holds it from; every other byte of in_use is held
 * by the layer above, or is metadata taken through the metadata route (counted at the end of the
 * route, core/meta_route.h, in the serving layer's units). So
 *     allocated = sum(in_use) - sum(held) - meta_route
 * exactly, for a quiescent process; a thread cache's held is the objects on its lists, read racily
 * from every thread's cache (merged on read). A layer without a lock derives its figures from its
 * own records when asked (segfit_lf's and slab_wf's maps and bitmaps). A layer that cannot count its
 * in_use exactly (no lock, no record of each block but the block's own header) clears `exact`: its
 * allocated is then the sum of what the others know. */
#ifndef SUNMAO_CORE_STATS_H
#define SUNMAO_CORE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SM_STATS_LAYERS  16
#define SM_STATS_CLASSES 96

typedef struct sm_stats_layer {
    const char *name;   /* SM_LAYER_NAME: a string literal */
    size_t in_use;      /* bytes in blocks handed up, not had back */
    size_t held;        /* bytes held from the next layer (or the OS), in its units */
    size_t dirty;       /* bytes held free for reuse, still backed */
    size_t metadata;    /* this layer's own bookkeeping */
    size_t mapped, resident, retained; /* OS layers */
    size_t blocks;      /* blocks held from below (slabs, spans, chunks, cached blocks) */
    uint64_t nmalloc, nfree; /* requests served and taken back, where the layer counts them */
} sm_stats_layer_t;

typedef struct sm_stats_class {
    size_t size;         /* object size */
    size_t slabs;        /* slabs of the class */
    size_t live;         /* objects handed up (thread caches' included) */
    size_t cached;       /* objects on thread caches' lists */
    uint64_t nmalloc, nfree; /* counted under the class lock: objects to and from the layer above */
} sm_stats_class_t;

typedef struct sm_stats {
    size_t allocated, active, metadata, resident, mapped, retained;
    bool exact;          /* false: a layer could not count its in_use (see above) */
    size_t meta_route;   /* metadata blocks taken through the route, in the serving layer's units */
    unsigned nlayers, nclasses;
    sm_stats_layer_t layer[SM_STATS_LAYERS];
    sm_stats_class_t cls[SM_STATS_CLASSES];
    size_t tcache_threads, tcache_objects, tcache_bytes;
    const char *percpu_mode; /* a per-CPU cache's mode (platform/rseq.h); NULL: none in the stack */
    size_t percpu_slabs, percpu_objects, percpu_bytes; /* CPUs set up, objects and bytes they hold */
} sm_stats_t;

/* Bytes of metadata blocks handed out through the metadata route (core/meta_route.h); per
 * composition, atomic (metadata requests are rare and come from any thread). */
static size_t sm_stats_meta_route_bytes __attribute__((unused));

/* thread.allocated / thread.deallocated: bytes that moved between the calling thread and the
 * layers, counted off the hit paths. Under a thread cache, at its refills and drains (so they
 * include what the cache holds); elsewhere, at the socket's requests. Plain adds: per thread. */
static __thread uint64_t sm_stats_thread_bytes[2] __attribute__((tls_model("initial-exec"), unused));

/* A new entry for the calling layer; the last one is reused if there are more layers than room. */
static inline sm_stats_layer_t *sm_stats_layer(sm_stats_t *s, const char *name)
{
    unsigned i = s->nlayers < SM_STATS_LAYERS ? s->nlayers++ : SM_STATS_LAYERS - 1;
    sm_stats_layer_t *l = &s->layer[i];
    memset(l, 0, sizeof *l);
    l->name = name;
    return l;
}

/* The stats function of a layer that holds memory but keeps no count of it (tail_chksum,
 * delayed_free: their blocks' usable sizes differ from the next layer's by an overhead only each
 * block's header records): its name, then the next layer's, and `allocated` is marked inexact. */
#define SM_STATS_INEXACT                                                                           \
    SM_INLINE void SM_FN(stats)(sm_stats_t *s)                                                     \
    {                                                                                              \
        sm_stats_layer(s, SM_LAYER_NAME);                                                          \
        s->exact = false;                                                                          \
        SM_NEXT_FN(stats)(s);                                                                      \
    }

/* The entry of class size `size` (slab layers add, thread caches add their cached counts). */
static inline sm_stats_class_t *sm_stats_class(sm_stats_t *s, size_t size)
{
    for (unsigned i = 0; i < s->nclasses; i++)
        if (s->cls[i].size == size)
            return &s->cls[i];
    unsigned i = s->nclasses < SM_STATS_CLASSES ? s->nclasses++ : SM_STATS_CLASSES - 1;
    memset(&s->cls[i], 0, sizeof s->cls[i]);
    s->cls[i].size = size;
    return &s->cls[i];
}

/* The totals, from the entries (see the header comment). */
static inline void sm_stats_total(sm_stats_t *s)
{
    size_t in_use = 0, held = 0;
    s->metadata = s->mapped = s->resident = s->retained = s->active = 0;
    for (unsigned i = 0; i < s->nlayers; i++) {
        const sm_stats_layer_t *l = &s->layer[i];
        in_use += l->in_use;
        held += l->held;
        s->metadata += l->metadata;
        s->mapped += l->mapped;
        s->resident += l->resident;
        s->retained += l->retained;
    }
    s->meta_route = __atomic_load_n(&sm_stats_meta_route_bytes, __ATOMIC_RELAXED);
    s->metadata += s->meta_route;
    s->allocated = in_use - held - s->meta_route;
    /* active: the OS layers' in_use less what layers hold free (page granular where they are) */
    size_t dirty = 0;
    for (unsigned i = 0; i < s->nlayers; i++)
        dirty += s->layer[i].dirty;
    size_t os_in_use = s->nlayers ? s->layer[s->nlayers - 1].in_use : 0;
    s->active = os_in_use > dirty + s->meta_route ? os_in_use - dirty - s->meta_route : s->allocated;
    if (s->active < s->allocated)
        s->active = s->allocated;
}

#endif
