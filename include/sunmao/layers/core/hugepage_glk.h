/* hugepage_glk: a core layer, a page heap that packs spans of 4 KiB pages into 2 MiB hugepages under
 * one global lock, so transparent huge pages can back the memory in use without backing the memory
 * that is free (the idea of TCMalloc's Temeraire, OSDI 2021; beyond the Mortise paper's Table 2).
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required), err (required), size_handle (requests
 * outside it go to the next layer).
 * Options:
 *   SM_OPT_SPAN_MAX       largest span served, at most a hugepage (default 2 MiB); larger requests,
 *                         and alignments above 2 MiB, go to the next layer
 *   SM_OPT_REGION_SIZE    bytes taken from the next layer at a time, whole hugepages aligned to
 *                         2 MiB (default 8 MiB); regions are never given back, their free
 *                         hugepages are purged instead
 *   SM_OPT_DECAY_MS       a free hugepage idle this long is purged whole by L_release (default 1000)
 *   SM_OPT_SPARSE_PAGES   a used hugepage with at most this many of its 512 pages in use, idle for
 *                         the decay, has its free runs of PURGE_MIN or more purged, which breaks it
 *                         into small pages; denser ones keep theirs until SM_RELEASE_ALL (default 128)
 *   SM_OPT_PURGE_MIN      smallest free run a decay pass purges inside a used hugepage (default 64 KiB)
 *   SM_OPT_HUGE_AFTER     with thp:default, a hugepage taken into use is hinted huge (MADV_HUGEPAGE)
 *                         once the layer has this many bytes in use (default 16 MiB), so a small
 *                         program is not backed by 2 MiB pages it would barely fill
 *   SM_OPT_LIFETIME_SETS  1 (default): a layer's spans (slabs: they live as long as any object in
 *                         them) and the program's spans fill different hugepages; 0: one set
 * Properties: thread_safe from the sync policy; min_align 4096 (a span is aligned to its requested
 * alignment up to 2 MiB); zeroed 0. The unit is a 4 KiB page wherever the kernel's page is larger.
 *
 * Each hugepage has a descriptor (metadata route), found in O(1) through a page map at 2 MiB
 * granularity, with a bitmap of pages taken, a bitmap of pages purged, and the length of each span
 * at its first page; no header sits in the memory. A hugepage is on exactly one list: free (no
 * page taken; dirty, or clean once purged), partial (by set, longest free run class and fullness),
 * or none (full, or taken whole by a release pass). An allocation takes, in this order: the
 * partial hugepage of its set whose longest free run is the smallest that fits, the fullest
 * among those (so free runs stay long and sparse hugepages drain); a dirty free hugepage; a clean
 * one; a new region. Within a hugepage a span goes to the lowest free run that fits.
 *
 * Giving memory back (L_release, hugepage_glk/release.h): a free hugepage is purged whole after the
 * decay (the kernel frees a huge page without splitting it); inside used hugepages only sparse
 * ones are purged on the decay, and every free run under SM_RELEASE_ALL (malloc_trim), so dense
 * hugepages stay huge. Lock order: the layer's lock, then the next layer's (grow calls it under
 * the lock); purges run without the lock, on runs marked taken meanwhile.
 * Parts, in layers/core/hugepage_glk/ and included below (by this template only): filler.h (page
 * bitmaps, lists, regions), release.h (the release pass).
 * @model: name=hugepage_glk kind=core flag serves-max=span_max slot sync slot err range
 * @model: key span_max size key region_size size key decay_ms int key sparse_pages int
 * @model: key purge_min size key huge_after size key lifetime_sets bool
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "hugepage_glk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "hugepage_glk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "hugepage_glk: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "hugepage_glk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

#ifndef SM_OPT_SPAN_MAX
#define SM_OPT_SPAN_MAX ((size_t)2 << 20)
#endif
#ifndef SM_OPT_REGION_SIZE
#define SM_OPT_REGION_SIZE ((size_t)8 << 20)
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
#ifndef SM_OPT_SPARSE_PAGES
#define SM_OPT_SPARSE_PAGES 128
#endif
#ifndef SM_OPT_PURGE_MIN
#define SM_OPT_PURGE_MIN ((size_t)64 << 10)
#endif
#ifndef SM_OPT_HUGE_AFTER
#define SM_OPT_HUGE_AFTER ((size_t)16 << 20)
#endif
#ifndef SM_OPT_LIFETIME_SETS
#define SM_OPT_LIFETIME_SETS 1
#endif
_Static_assert((SM_OPT_SPAN_MAX) >= 4096 && (SM_OPT_SPAN_MAX) <= ((size_t)2 << 20),
               "hugepage_glk: SM_OPT_SPAN_MAX must be in [4 KiB, 2 MiB]");
_Static_assert((SM_OPT_REGION_SIZE) >= ((size_t)2 << 20) && (SM_OPT_REGION_SIZE) % ((size_t)2 << 20) == 0 &&
                   (SM_OPT_REGION_SIZE) <= ((size_t)1 << 30),
               "hugepage_glk: SM_OPT_REGION_SIZE must be a multiple of 2 MiB, at most 1 GiB");
_Static_assert((SM_OPT_DECAY_MS) >= 1, "hugepage_glk: SM_OPT_DECAY_MS must be at least 1 ms");
_Static_assert((SM_OPT_SPARSE_PAGES) <= 512, "hugepage_glk: SM_OPT_SPARSE_PAGES must be in [0, 512]");
_Static_assert((SM_OPT_PURGE_MIN) >= 4096 && (SM_OPT_PURGE_MIN) <= ((size_t)2 << 20),
               "hugepage_glk: SM_OPT_PURGE_MIN must be in [4 KiB, 2 MiB]");
_Static_assert((SM_OPT_LIFETIME_SETS) == 0 || (SM_OPT_LIFETIME_SETS) == 1,
               "hugepage_glk: SM_OPT_LIFETIME_SETS must be 0 or 1");

enum {
    SM_FN(page_shift) = 12,
    SM_FN(huge_shift) = 21,
    SM_FN(pages) = 512,                /* pages per hugepage */
    SM_FN(words) = 8,                  /* 64-bit words of a page bitmap */
    SM_FN(classes) = 9,                /* longest free run classes: log2 of 1..511 */
    SM_FN(tiers) = 4,                  /* fullness tiers: pages in use / 128 */
    SM_FN(sets) = 1 + (SM_OPT_LIFETIME_SETS),
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe),
    SM_FN(min_align) = 4096 < SM_PROP(SM_NEXT, min_align) ? 4096 : SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
};

/* Where a hugepage is listed (struct hp.list). */
enum { SM_FN(on_none) = 0, SM_FN(on_partial), SM_FN(on_dirty), SM_FN(on_clean) };

struct SM_FN(hp) {
    char *base;
    struct SM_FN(hp) *next, *prev;        /* on its list */
    uint64_t taken[SM_FN(words)];         /* pages in spans, and pages a release pass is purging */
    uint64_t purged[SM_FN(words)];        /* free pages whose memory was given back */
    uint16_t span[SM_FN(pages)];          /* at a span's first page: its length in pages */
    uint16_t used, longest, npurged;      /* pages in spans; longest free run; purged pages */
    uint8_t list, set, bucket;            /* on_*; the set it fills while used; its partial list */
    uint8_t hinted;                       /* MADV_HUGEPAGE was asked for */
    uint64_t stamp;                       /* when a release pass first saw it idle (ms); 0 not yet */
};

struct SM_FN(region) {
    struct SM_FN(region) *next;
    char *base;
    size_t count;                         /* hugepages */
    struct SM_FN(hp) hp[];
};

static struct {
    SM_SYNC_FN(t) lock;
    struct SM_FN(hp) *partial[SM_FN(sets)][SM_FN(classes) * SM_FN(tiers)];
    uint64_t nonempty[SM_FN(sets)];       /* bit: that partial list has a hugepage */
    struct SM_FN(hp) *dirty, *clean;      /* free hugepages */
    struct SM_FN(region) *regions;
    size_t region_count, hugepages, used_pages, map_nodes, hinted_count;
    uintptr_t *map[SM_PAGEMAP2_ROOT_LEN(21)];
} SM_FN(obj) = { .lock = SM_SYNC_INIT };

#define SM_HUGEPAGE_GLK_PARTS 1
#include "hugepage_glk/filler.h"

static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    return SM_NEXT_FN(create)();
}

/* Critical sections, handed to the sync policy's atomic_exec, which may run them on another thread
 * (a combining policy): they set no errno and raise nothing; results travel back in the argument. */
struct SM_FN(cs_alloc) { unsigned n, align, set; char *ptr, *hint; };
SM_INLINE void SM_FN(cs_alloc)(void *arg)
{
    struct SM_FN(cs_alloc) *a = (struct SM_FN(cs_alloc) *)arg;
    unsigned start = SM_FN(pages);
    struct SM_FN(hp) *hp = SM_FN(find_partial)(a->set, a->n, a->align, &start);
    if (!hp) {
        hp = SM_FN(obj).dirty ? SM_FN(obj).dirty : SM_FN(obj).clean;
        if (!hp && SM_FN(grow)())
            hp = SM_FN(obj).clean;
        if (!hp) {
            a->ptr = NULL;
            return;
        }
        hp->set = (uint8_t)a->set;
        start = 0;
        if (!hp->hinted && SM_FN(want_huge)()) {
            hp->hinted = 1;
            SM_FN(obj).hinted_count++;
            a->hint = hp->base;
        }
    }
    SM_FN(take)(hp, start, a->n);
    a->ptr = hp->base + ((size_t)start << SM_FN(page_shift));
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t need = sm_align_up(c->size ? c->size : 1, 4096);
    if (!SM_FN(serves)(c) || need > (SM_OPT_SPAN_MAX) || c->align > ((size_t)2 << 20))
        return SM_NEXT_FN(alloc)(c);
    struct SM_FN(cs_alloc) a = { (unsigned)(need >> SM_FN(page_shift)),
                                 c->align > 4096 ? (unsigned)(c->align >> SM_FN(page_shift)) : 1,
                                 (SM_OPT_LIFETIME_SETS) && (c->flags & SM_F_USER) ? 1u : 0u, NULL, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_alloc), &a);
    if (sm_unlikely(!a.ptr))
        errno = ENOMEM;
    else if (a.hint)
        sm_plat_hint_huge(a.hint, (size_t)1 << SM_FN(huge_shift)); /* a hint: racing first touches may miss it */
    return c->ptr = a.ptr;
}

/* Why page i of hp is not the start of a span it may free. Caller holds the lock. */
SM_SLOWPATH sm_err_kind_t SM_FN(diagnose_free)(const struct SM_FN(hp) *hp, unsigned i, size_t size, const char **detail)
{
    if (hp->span[i]) {
        *detail = "sized free is larger than the block";
        return size ? SM_ERR_INVALID_FREE : SM_ERR_CORRUPTION;
    }
    if (!SM_FN(bit)(hp->taken, i)) {
        *detail = "block is already free";
        return SM_ERR_DOUBLE_FREE;
    }
    *detail = "pointer is inside an allocated block, not at its start";
    return SM_ERR_INVALID_FREE;
}

struct SM_FN(cs_free) {
    struct SM_FN(hp) *hp;
    char *ptr;
    size_t size;         /* the user's, for a sized free; else 0 */
    bool note, bad;      /* bad: not freed, error and detail say why */
    sm_err_kind_t error;
    const char *detail;
};
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    struct SM_FN(hp) *hp = f->hp;
    unsigned i = (unsigned)((size_t)(f->ptr - hp->base) >> SM_FN(page_shift));
    unsigned n = hp->span[i];
    if (sm_unlikely(!n || ((uintptr_t)f->ptr & 4095) || f->size > ((size_t)n << SM_FN(page_shift)))) {
        f->bad = true;
        if ((uintptr_t)f->ptr & 4095) {
            f->error = SM_ERR_INVALID_FREE;
            f->detail = "pointer is not at the start of a block";
        } else {
            f->error = SM_FN(diagnose_free)(hp, i, f->size, &f->detail);
        }
        return;
    }
    SM_FN(give)(hp, i, n);
    f->note = hp->list == SM_FN(on_dirty) || n >= ((SM_OPT_PURGE_MIN) >> SM_FN(page_shift));
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    struct SM_FN(hp) *hp = SM_FN(hp_of)(c->ptr);
    if (!hp) {
        SM_NEXT_FN(free)(c);
        return;
    }
    struct SM_FN(cs_free) f = { hp, (char *)c->ptr, (c->flags & SM_F_SIZED) ? c->size : 0, false, false, SM_ERR_INVALID_FREE, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_free), &f);
    if (sm_unlikely(f.bad))
        SM_ERR_FN(raise)(f.error, SM_LAYER_NAME, c->ptr, f.detail); /* safe action: ignore the free */
    else if (f.note)
        sm_release_note();
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    struct SM_FN(hp) *hp = SM_FN(hp_of)(c->ptr);
    if (!hp)
        return SM_NEXT_FN(getmeta)(c);
    /* No lock: a span's length changes only when its owner frees or resizes it. */
    if ((uintptr_t)c->ptr & 4095)
        return false;
    unsigned n = __atomic_load_n(&hp->span[(size_t)((char *)c->ptr - hp->base) >> SM_FN(page_shift)], __ATOMIC_RELAXED);
    if (!n)
        return false;
    c->usable = (size_t)n << SM_FN(page_shift);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* In place: shrinking frees the tail pages; growing takes the free pages that follow, inside the
 * hugepage. */
struct SM_FN(cs_resize) { struct SM_FN(hp) *hp; unsigned i, want; bool ok, note; };
SM_INLINE void SM_FN(cs_resize)(void *arg)
{
    struct SM_FN(cs_resize) *r = (struct SM_FN(cs_resize) *)arg;
    struct SM_FN(hp) *hp = r->hp;
    unsigned i = r->i, n = hp->span[i], want = r->want;
    r->ok = n != 0;
    if (!n || want == n)
        return;
    if (want < n) {
        hp->span[i] = (uint16_t)want;
        hp->span[i + want] = (uint16_t)(n - want);
        SM_FN(give)(hp, i + want, n - want);
        r->note = n - want >= ((SM_OPT_PURGE_MIN) >> SM_FN(page_shift));
        return;
    }
    if (i + want > SM_FN(pages) || SM_FN(first_taken)(hp->taken, i + n, i + want) < i + want) {
        r->ok = false;
        return;
    }
    SM_FN(take)(hp, i + n, want - n);
    hp->span[i + n] = 0;
    hp->span[i] = (uint16_t)want;
}

/* Its blocks stay in their hugepages; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return !SM_FN(hp_of)(c->ptr) && SM_NEXT_FN(move)(c, n); }

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    struct SM_FN(hp) *hp = SM_FN(hp_of)(c->ptr);
    if (!hp)
        return SM_NEXT_FN(resize)(c, n);
    if (n > ((size_t)2 << 20) || ((uintptr_t)c->ptr & 4095))
        return false;
    struct SM_FN(cs_resize) r = { hp, (unsigned)((size_t)((char *)c->ptr - hp->base) >> SM_FN(page_shift)),
                                  (unsigned)(sm_align_up(n ? n : 1, 4096) >> SM_FN(page_shift)), false, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_resize), &r);
    if (r.note)
        sm_release_note();
    return r.ok;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

#include "hugepage_glk/release.h"
#undef SM_HUGEPAGE_GLK_PARTS

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

/* Counted from the descriptors under the lock: no counter on the request paths. Regions are the
 * next layer's blocks, held; a hugepage counts as a block once a page of it was taken. */
SM_INLINE void SM_FN(cs_stats)(void *arg)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    for (struct SM_FN(region) *g = SM_FN(obj).regions; g; g = g->next) {
        l->held += g->count << SM_FN(huge_shift);
        for (size_t k = 0; k < g->count; k++) {
            const struct SM_FN(hp) *hp = &g->hp[k];
            l->in_use += (size_t)hp->used << SM_FN(page_shift);
            l->dirty += (size_t)(SM_FN(pages) - hp->used - hp->npurged) << SM_FN(page_shift);
            l->blocks += hp->used != 0;
        }
    }
}
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_stats), sm_stats_layer(s, SM_LAYER_NAME));
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

SM_FORK_HOOKS_ONE_LOCK(&SM_FN(obj).lock)

#undef SM_OPT_SPAN_MAX
#undef SM_OPT_REGION_SIZE
#undef SM_OPT_DECAY_MS
#undef SM_OPT_SPARSE_PAGES
#undef SM_OPT_PURGE_MIN
#undef SM_OPT_HUGE_AFTER
#undef SM_OPT_LIFETIME_SETS
#define SM_LAYER_OFFERS SM_CAP_MOVE
#include "../../core/layer_end.h"
