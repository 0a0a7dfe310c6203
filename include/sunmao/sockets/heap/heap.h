/* First-class heaps: allocators a program creates, uses from any thread, empties at once
 * (reset) and destroys, beside the composition's own malloc. A socket API of the framework
 * (sockets/heap_api.h exports it from every malloc_socket and custom_socket); decisions and
 * measurements: docs/heaps.md. Its parts, in this directory: registry.h, tlsf.h, region.h, spec.h,
 * ops.h.
 *
 * Template: define SM_HEAP_RAISE, the err policy's raise (e.g. sm_err_warn_raise), then include.
 *
 * Kinds (the heap's algorithm, chosen at create time by its spec, heap/spec.h):
 *   tlsf    Two-Level Segregated Fit over the heap's spans (heap/tlsf.h): O(1) malloc and free
 *           with immediate coalescing, in-place realloc, empty spans handed back. The general
 *           kind: a tenant's heap with its own limit and statistics, a real-time pool.
 *   region  a bump allocator (heap/region.h): malloc is a pointer increment; free gives memory
 *           back only for the block allocated last; the rest returns at reset. A request's arena.
 * Memory: spans mapped from the OS (page-aligned, `chunk` bytes or one request's size), or the
 * one range the caller gave (sm_heap_create_in): then the heap never maps, and its own object
 * lives at the start of that range.
 *
 * Invariants:
 * - Every page of every span maps to its heap in the registry (heap/registry.h), and no other
 *   page does: that is how a plain free(), realloc() or malloc_usable_size() finds a heap's block,
 *   and how a pointer that is no heap's is told apart (one lock-free lookup). Except a solo span,
 *   made for one block larger than a chunk: only the pages of its block's header and start are
 *   registered
 *   (a terabyte block costs one registry word, not 2 GiB of them), and it never serves another
 *   block: it goes back with its block, and a reset drops it.
 * - Each block starts with a header whose top 16 bits are a tag of the block's address and the
 *   heap's key: a free of an interior or stray pointer inside a span is reported, not followed.
 * - h->stats.allocated is the sum of usable sizes of live blocks; mapped the bytes of all spans.
 * Lock order: sm_heaps_list_lock -> a heap's lock -> sm_heaps_map_lock. Every operation on a heap
 * runs under its lock (the spinlock sync policy: a few list operations, rarely a system call, and
 * a waiter yields after a bounded spin); errors are raised after it is released. fork: the socket's handlers take all three (sm_heaps_fork_*).
 * @check: <sunmao/policies/err/warn.h> SM_HEAP_RAISE=sm_err_warn_raise */
#ifndef SM_SOCKET_HEAP_INCLUDED
#define SM_SOCKET_HEAP_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "../../core/bits.h"
#include "../../core/errnum.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/secret.h"
#include "../../platform/platform.h"
#include "../../policies/sync/spinlock.h"

#ifndef SM_HEAP_RAISE
#error "heap: define SM_HEAP_RAISE (the err policy's raise function) before including"
#endif

enum sm_heap_kind { SM_HEAP_TLSF, SM_HEAP_REGION };

/* A run of pages a heap carves blocks from; blocks start SM_HEAP_SPAN_HDR bytes in. */
typedef struct sm_heap_span {
    struct sm_heap_span *next, *prev;
    struct sm_heap_span *ready; /* region: the next span a reset kept to carve from */
    size_t bytes;      /* the whole span, header included */
    uintptr_t solo;    /* a span made for one block larger than a chunk: the first of its pages in
                        * the registry, those of the block's header and start (0: every page is) */
    uint32_t solo_bytes; /* how much is registered from `solo` (one or two pages) */
    uint8_t mapped;    /* 1: from sm_plat_map (given back with it); 0: the caller's range */
    uint8_t used;      /* 1: served a block since the last reset (or made since) */
    uint8_t alone;     /* region: made or taken for one big block, which no other block shares
                        * until a reset (region.h, sm_hr_alloc) */
} sm_heap_span_t;
#define SM_HEAP_SPAN_HDR 48u
_Static_assert(sizeof(sm_heap_span_t) <= SM_HEAP_SPAN_HDR, "heap: the span header outgrew its room");

/* Counters of one heap, read under its lock (sunmao_heap_stats). */
typedef struct sm_heap_counts {
    size_t allocated;      /* usable bytes of the live blocks */
    size_t peak_allocated; /* the most `allocated` has been since create or the last reset */
    size_t blocks;         /* live blocks */
    size_t mapped;         /* bytes of the heap's spans (the caller's range included) */
    uint64_t allocs, frees, resets;
    uint64_t refused;      /* requests refused because the heap's limit would be exceeded */
} sm_heap_counts_t;

#define SM_HT_SL_BITS  4u
#define SM_HT_SL_COUNT (1u << SM_HT_SL_BITS)
#define SM_HT_FL_COUNT 41u /* first level 0: sizes below 256 in 16-byte steps; then one per power of two up to 2^47 */
#define SM_HT_QUICK_CLASSES 15u /* block sizes 32..256 */
#define SM_HT_QUICK_MAX 16u     /* blocks each quick list holds */

typedef struct sm_heap {
    uint64_t magic;        /* SM_HEAP_MAGIC ^ the object's address while the heap exists */
    sm_sync_spinlock_t lock; /* the spinlock sync policy: it yields, and a fork finds its owner */
    unsigned kind;         /* enum sm_heap_kind */
    uint16_t key;          /* mixed into every block tag */
    bool in_range;         /* built inside the caller's range (sm_heap_create_in) */
    uintptr_t reg_lo, reg_hi; /* in_range: the pages of the range in the registry */
    struct sm_heap *reg_prev; /* in_range: who had them (a heap whose block is the range), restored at destroy */
    size_t chunk;          /* bytes mapped at a time */
    size_t limit;          /* most bytes mapped at once; 0: no limit */
    size_t retain;         /* bytes of idle spans a reset keeps for reuse */
    char name[32];
    struct sm_heap *next, *prev; /* all heaps, under sm_heaps_list_lock */
    sm_heap_span_t *spans;
    sm_heap_counts_t stats;
    union {
        struct {           /* tlsf */
            uint64_t fl_map;
            uint32_t sl_map[SM_HT_FL_COUNT];
            size_t empty_spans; /* spans that are one free block */
            struct sm_ht_block *heads[SM_HT_FL_COUNT][SM_HT_SL_COUNT];
            struct sm_ht_block *quick[SM_HT_QUICK_CLASSES]; /* freed small blocks, not coalesced */
            uint8_t quick_n[SM_HT_QUICK_CLASSES];
        } t;
        struct {           /* region */
            char *cur, *end; /* next header goes at cur (cur + 8 is 16-aligned); end of the span */
            sm_heap_span_t *at; /* the span cur is in */
            sm_heap_span_t *ready; /* spans a reset kept, carved from before new ones are mapped */
        } r;
    } u;
} sm_heap_t;

#define SM_HEAP_MAGIC 0x68656170534d3031ull
/* Block sizes live in the low 48 bits of a header word, the tag in the top 16. */
#define SM_HEAP_SIZE_BITS 48
#define SM_HEAP_MAX_REQUEST ((size_t)1 << 46)
/* The largest caller range: its pages are all registered, 8 bytes each (128 MiB for 64 GiB). */
#define SM_HEAP_RANGE_MAX ((size_t)64 << 30)

static inline uint64_t sm_heap_tag(const sm_heap_t *h, const void *block)
{
    uint64_t t = (((uint64_t)(uintptr_t)block >> 3) * 0x9e3779b97f4a7c15ull) >> 48;
    return (t ^ h->key) << SM_HEAP_SIZE_BITS;
}

static inline bool sm_heap_valid(const sm_heap_t *h)
{
    return h && h->magic == (SM_HEAP_MAGIC ^ (uint64_t)(uintptr_t)h);
}

static inline void sm_heap_count_alloc(sm_heap_t *h, size_t usable)
{
    h->stats.allocated += usable;
    h->stats.blocks++;
    h->stats.allocs++;
    if (h->stats.allocated > h->stats.peak_allocated)
        h->stats.peak_allocated = h->stats.allocated;
}
static inline void sm_heap_count_free(sm_heap_t *h, size_t usable)
{
    h->stats.allocated -= usable;
    h->stats.blocks--;
    h->stats.frees++;
}

/* An error found under the heap's lock, raised once the lock is released. */
typedef struct sm_heap_fault {
    sm_err_kind_t kind;
    const void *ptr;
    const char *detail; /* NULL: none */
} sm_heap_fault_t;
static inline void sm_heap_fault(sm_heap_fault_t *f, sm_err_kind_t kind, const void *ptr, const char *detail)
{
    f->kind = kind, f->ptr = ptr, f->detail = detail;
}
static inline void sm_heap_raise_fault(const sm_heap_fault_t *f, const char *api)
{
    if (f->detail)
        SM_HEAP_RAISE(f->kind, api, f->ptr, f->detail);
}

#define SM_HEAP_PARTS 1
#include "registry.h"

/* A new span of at least `bytes` (page-rounded), linked first and registered to h (a solo span:
 * not yet, its caller registers its block's page with sm_heap_span_solo); NULL when the limit or
 * the OS refuses. Under h's lock. */
static SM_UNUSED sm_heap_span_t *sm_heap_span_new(sm_heap_t *h, size_t bytes, bool solo)
{
    if (h->in_range)
        return NULL;
    bytes = sm_align_up(bytes, sm_plat_page_size());
    if (h->limit && (bytes > h->limit || h->stats.mapped > h->limit - bytes)) {
        h->stats.refused++;
        return NULL;
    }
    sm_heap_span_t *s = (sm_heap_span_t *)sm_plat_map(bytes);
    if (!s)
        return NULL;
    if (!solo && !sm_heaps_register(s, bytes, h)) {
        sm_plat_unmap(s, bytes);
        return NULL;
    }
    s->solo = 0;
    s->bytes = bytes;
    s->mapped = 1;
    s->used = 1;
    s->alone = 0;
    s->prev = NULL;
    s->next = h->spans;
    if (h->spans)
        h->spans->prev = s;
    h->spans = s;
    h->stats.mapped += bytes;
    return s;
}

static SM_UNUSED void sm_heap_span_drop(sm_heap_t *h, sm_heap_span_t *s);

/* Registers the pages of the block at p (its `hdr` bytes of header and its start), the one block
 * of solo span s; false (s given back) when the registry has no room. Under h's lock. */
static SM_UNUSED bool sm_heap_span_solo(sm_heap_t *h, sm_heap_span_t *s, const void *p, size_t hdr)
{
    s->solo = ((uintptr_t)p - hdr) & ~(uintptr_t)(sm_plat_page_size() - 1);
    s->solo_bytes = (uint32_t)((uintptr_t)p + 1 - s->solo);
    if (!sm_heaps_register((void *)s->solo, s->solo_bytes, h)) {
        sm_heap_span_drop(h, s);
        return false;
    }
    return true;
}

/* Whether the header below p (hdr bytes) may be read: it is in p's page, or in a page of h's. A
 * pointer near the start of a page whose page before belongs to no heap is no block's, and the
 * page before may not even be mapped. */
static inline bool sm_heap_header_readable(const sm_heap_t *h, const void *p, size_t hdr)
{
    return ((uintptr_t)p & (sm_plat_page_size() - 1)) >= hdr || sm_heaps_owner((const char *)p - hdr) == h;
}

/* Unlinks a mapped span, forgets its pages and gives them back. Under h's lock. */
static SM_UNUSED void sm_heap_span_drop(sm_heap_t *h, sm_heap_span_t *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        h->spans = s->next;
    if (s->next)
        s->next->prev = s->prev;
    h->stats.mapped -= s->bytes;
    if (s->solo)
        sm_heaps_register((void *)s->solo, s->solo_bytes, NULL);
    else
        sm_heaps_register(s, s->bytes, NULL);
    sm_plat_unmap(s, s->bytes);
}

/* What a reset keeps: the caller's range, every span that served a block since the last reset (a
 * heap reset per request needs them again: reset costs O(spans), no system call), and of the
 * spans that sat idle through a whole cycle, the newest up to h->retain bytes; the rest goes back
 * to the OS. So memory a heap stopped using is returned one reset late. keep(h, s) is called on
 * each span kept, whose mark is cleared. Under h's lock. */
static SM_UNUSED void sm_heap_spans_trim(sm_heap_t *h, void (*keep)(sm_heap_t *, sm_heap_span_t *))
{
    size_t kept = 0;
    for (sm_heap_span_t *s = h->spans, *next; s; s = next) {
        next = s->next;
        if (s->solo) { /* its other pages are not registered: it serves no other block */
            sm_heap_span_drop(h, s);
            continue;
        }
        if (s->mapped && !s->used) {
            if (s->bytes > h->retain - kept) { /* kept <= retain throughout */
                sm_heap_span_drop(h, s);
                continue;
            }
            kept += s->bytes;
        }
        s->used = 0;
        keep(h, s);
    }
}

#include "tlsf.h"
#include "region.h"
#include "spec.h"
#include "ops.h"
#undef SM_HEAP_PARTS

#endif
