/* buddy_glk: a core layer that serves power-of-two blocks carved from chunks of the next layer by a
 * binary buddy system under one global lock (Mortise paper, Table 2).
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: sync (required), err (required), size_handle (requests
 * outside it go to the next layer), sizeclass (optional; the paper's buddy_glk(sizeclass=tc)): a
 * request up to the policy's largest class gets its class size, rounded up to min blocks, and
 * the rest of its power-of-two block goes back to the free lists at once (see "trimmed blocks").
 * Options:
 *   SM_OPT_MIN_BLOCK   smallest block, a power of two >= 16 (default 4096, so a slab layer above can
 *                      build its pages from it)
 *   SM_OPT_CHUNK_SIZE  bytes taken from the next layer at a time, aligned to their own size; also the
 *                      largest block: bigger requests go to the next layer (default 4 MiB)
 *   SM_OPT_KEEP_SPARE  1 (default): keep one entirely free chunk as a spare; 0: give every free chunk
 *                      back to the next layer at once (see below)
 *   SM_OPT_DECAY_MS    free memory idle this long is given back by L_release (default 1000): the
 *                      pages of free blocks are purged (next layer's L_purge), a kept spare chunk
 *                      goes back to the next layer
 *   SM_OPT_PURGE_MIN   smallest free block worth a purge (default 64 KiB; at least a page: smaller
 *                      free blocks are reused soon, and each purge is a system call)
 *   SM_OPT_STABLE      1: never give a chunk back to the next layer (free ones are purged after the
 *                      decay instead), so every block up to a chunk stays mapped: the layer then
 *                      offers STABLE, which slab_wf above it needs; 0 (default): chunks go back
 * Capabilities: STABLE with SM_OPT_STABLE 1 (stable_max: the chunk size); MOVE, forwarded for the
 * blocks it passes on (its own stay in their chunks).
 * Properties: thread_safe from the sync policy; min_align is SM_OPT_MIN_BLOCK, or the next layer's
 * if smaller (requests this layer passes on keep the next layer's alignment); zeroed 0.
 *
 * A block of order k is 2^k bytes at a chunk offset that is a multiple of 2^k, so it is aligned to
 * its own size: an alignment request costs nothing beyond asking for max(size, align) bytes.
 * No header sits in the blocks (users get exact powers of two, a slab layer above gets 64 KiB blocks
 * aligned to 64 KiB). Instead each chunk has a descriptor, taken from the metadata route, with one
 * state byte per min block, found in O(1) through a page map at chunk granularity. The byte of a
 * block's first min block holds its order and whether it is free or allocated; all others are 0.
 * Free blocks are linked per order through links in the descriptor (see struct link).
 *
 * When a chunk becomes entirely free it goes back to the next layer, unless no other chunk is
 * entirely free: that one stays as a spare, so a program hovering around a chunk boundary does not
 * map and unmap a chunk on every call, and at most one idle chunk is ever held.
 * SM_OPT_KEEP_SPARE 0 gives every free chunk back at once: right when the layer below already
 * caches and purges freed memory on a timer (decay_cache), where a spare here would only hold
 * dirty pages the decay cannot see.
 *
 * Trimmed blocks (sizeclass slot): a block of class size S is the start of a 2^K block (K = log2
 * of S rounded up, so it keeps that alignment) cut into the pieces of S's binary form, largest
 * first, each a buddy block of its own; the tail is freed as buddies. The head's state byte is
 * USED | order, each later piece's USED | PART | order, and every piece but the last has MORE:
 * a free walks the pieces (at most one per set bit of S / min block: 3 for tc's classes) and frees
 * each, so they merge back as any blocks do. A trimmed block resizes only within its size.
 *
 * Giving memory back (L_release, buddy_glk/release.h): free blocks of PURGE_MIN or more are purged
 * one decay after a release pass first saw them (BUSY while purged); the spare chunk goes back one
 * decay after it became free.
 * Parts, in layers/core/buddy_glk/ and included below (by this template only): chunks.h (chunks
 * from and back to the next layer, the free lists), release.h (the release pass).
 * @model: name=buddy_glk kind=core flag serves-max=chunk_size slot sync slot err slot sizeclass= range
 * @model: key min_block size key chunk_size size key keep_spare bool key decay_ms int
 * @model: key purge_min size key stable bool
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/pagemap.h"

#ifndef SM_LAYER
#error "buddy_glk: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "buddy_glk: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SYNC
#error "buddy_glk: policy slot 'sync' is empty (SM_SYNC = a policy of policies/sync/, e.g. mutex)"
#endif
#ifndef SM_ERR
#error "buddy_glk: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#include "../../policies/size_handle.h"
#include "../../core/meta_route.h"

#ifndef SM_OPT_MIN_BLOCK
#define SM_OPT_MIN_BLOCK 4096
#endif
#ifndef SM_OPT_KEEP_SPARE
#define SM_OPT_KEEP_SPARE 1
#endif
#ifndef SM_OPT_CHUNK_SIZE
#define SM_OPT_CHUNK_SIZE ((size_t)4 << 20)
#endif
#ifndef SM_OPT_DECAY_MS
#define SM_OPT_DECAY_MS 1000
#endif
#ifndef SM_OPT_PURGE_MIN
#define SM_OPT_PURGE_MIN ((size_t)64 << 10)
#endif
#ifndef SM_OPT_STABLE
#define SM_OPT_STABLE 0
#endif
_Static_assert((SM_OPT_STABLE) == 0 || (SM_OPT_STABLE) == 1, "buddy_glk: SM_OPT_STABLE must be 0 or 1");
_Static_assert((SM_OPT_DECAY_MS) >= 1, "buddy_glk: SM_OPT_DECAY_MS must be at least 1 ms");
_Static_assert((SM_OPT_PURGE_MIN) >= 4096, "buddy_glk: SM_OPT_PURGE_MIN must be at least one page");
_Static_assert((SM_OPT_MIN_BLOCK) >= 16 && ((SM_OPT_MIN_BLOCK) & ((SM_OPT_MIN_BLOCK) - 1)) == 0,
               "buddy_glk: SM_OPT_MIN_BLOCK must be a power of two >= 16 (a free block holds two links)");
_Static_assert((SM_OPT_CHUNK_SIZE) >= 4096 && (SM_OPT_CHUNK_SIZE) >= (SM_OPT_MIN_BLOCK) &&
                   ((SM_OPT_CHUNK_SIZE) & ((SM_OPT_CHUNK_SIZE) - 1)) == 0,
               "buddy_glk: SM_OPT_CHUNK_SIZE must be a power of two >= 4096 and >= SM_OPT_MIN_BLOCK");

enum {
    SM_FN(min_order) = __builtin_ctzll(SM_OPT_MIN_BLOCK),  /* log2 of the smallest block */
    SM_FN(max_order) = __builtin_ctzll(SM_OPT_CHUNK_SIZE), /* log2 of a chunk, the largest block */
    /* The smallest order a release pass purges: PURGE_MIN rounded up to a power of two, within
     * [min_order, max_order] (PURGE_MIN is at least a page). */
    SM_FN(purge_want) = 63 - __builtin_clzll((SM_OPT_PURGE_MIN) * 2 - 1),
    SM_FN(purge_order) = SM_FN(purge_want) < SM_FN(min_order)   ? SM_FN(min_order)
                         : SM_FN(purge_want) > SM_FN(max_order) ? SM_FN(max_order)
                                                                : SM_FN(purge_want),
    SM_FN(thread_safe) = SM_SYNC_FN(thread_safe),
    SM_FN(min_align) = (SM_OPT_MIN_BLOCK) < SM_PROP(SM_NEXT, min_align) ? (SM_OPT_MIN_BLOCK)
                                                                       : SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
};
/* One bit per order in a 64-bit mask of non-empty free lists; orders fit the state byte's 5 bits. */
_Static_assert(SM_FN(max_order) - SM_FN(min_order) < 64, "buddy_glk: too many orders between min block and chunk");
_Static_assert(SM_FN(max_order) < 32, "buddy_glk: SM_OPT_CHUNK_SIZE must be below 4 GiB");

/* State byte of a block's first min block; the bytes of the rest of the block are 0. */
#define SM_BUDDY_FREE  0x40u
#define SM_BUDDY_USED  0x80u
#define SM_BUDDY_BUSY  0x20u /* free, but taken off its list by a release pass for its purge */
#define SM_BUDDY_ORDER 0x1fu
/* With USED only (the two bits mean nothing else on a used block): a trimmed block's pieces. */
#define SM_BUDDY_PART  0x40u /* a piece after the first: not a block start */
#define SM_BUDDY_MORE  0x20u /* another piece follows this one */
/* A free block's stamp: 0 not yet seen by a release pass; PURGED its pages were dropped. */
#define SM_BUDDY_PURGED UINT64_MAX
#define SM_BUDDY_BIT(k) ((uint64_t)1 << ((k) - SM_FN(min_order)))

/* A free block's place on its order's free list. The links live in the chunk's descriptor, one per
 * min block, never in the free block itself: a free block's pages stay untouched. Splitting a fresh
 * chunk down to 64 KiB wrote a link into six of its pages (24 KiB resident in every process that
 * made one slab), and a link written into a block the layers below have purged faults a page in
 * again. */
struct SM_FN(link) {
    struct SM_FN(link) *next, *prev;
    char *block;
    uint64_t stamp; /* when a release pass first saw the block free (ms), 0 or SM_BUDDY_PURGED */
};

struct SM_FN(chunk) {
    char *base;
    struct SM_FN(chunk) *next, *prev; /* every chunk, so diagnostics and tests can walk the heap */
    uint8_t state[(SM_OPT_CHUNK_SIZE) / (SM_OPT_MIN_BLOCK)];
    struct SM_FN(link) links[(SM_OPT_CHUNK_SIZE) / (SM_OPT_MIN_BLOCK)]; /* used while that block is free */
};

static struct {
    SM_SYNC_FN(t) lock;
    uint64_t nonempty; /* bit k - min_order: the free list of order k has a block */
    struct SM_FN(link) *free[SM_FN(max_order) - SM_FN(min_order) + 1];
    struct SM_FN(chunk) *chunks;
    size_t chunk_count, map_nodes;
    /* chunk granule -> its descriptor. Two-level: a root of 64 words for 4 MiB chunks, and 8 MiB
     * leaves that the next layers pass on to the OS, so they arrive zeroed and only the pages in use
     * become resident. The three-level map's 32 KiB nodes came from the layer above the OS (TLSF
     * here), were not fresh, and were cleared: 64 KiB resident in every process for two nodes. */
    uintptr_t *map[SM_PAGEMAP2_ROOT_LEN(SM_FN(max_order))];
} SM_FN(obj) = { .lock = SM_SYNC_INIT };

#define SM_BUDDY_GLK_PARTS 1
#include "buddy_glk/chunks.h"

/* The decay in force: SM_OPT_DECAY_MS, or dirty_decay_ms (core/conf.h), read once here. */
static uint64_t SM_FN(decay_ms) = SM_OPT_DECAY_MS;

SM_INLINE int SM_FN(create)(void)
{
    SM_FN(decay_ms) = sm_conf_decay_ms(SM_OPT_DECAY_MS);
    return SM_NEXT_FN(create)();
}

/* Critical sections, handed to the sync policy's atomic_exec, which may run them on another thread
 * (a combining policy): they set no errno and raise nothing; results travel back in the argument. */
/* Marks [off, off + 2^order) of ch, allocated, as a block of `keep` bytes (a multiple of the min
 * block, more than half of 2^order): its pieces, largest first, and the rest freed as buddies. */
SM_INLINE void SM_FN(trim_block)(struct SM_FN(chunk) *ch, size_t off, unsigned order, size_t keep)
{
    unsigned part = 0;
    for (unsigned k = order; k > SM_FN(min_order);) {
        size_t whole = (size_t)1 << k, half = whole >> 1;
        if (keep == whole)
            break;
        k--;
        if (keep <= half) { /* the upper half is not needed */
            ch->state[(off + half) >> SM_FN(min_order)] = (uint8_t)(SM_BUDDY_FREE | k);
            SM_FN(push)(k, ch, off + half, 0);
            continue;
        }
        ch->state[off >> SM_FN(min_order)] = (uint8_t)(SM_BUDDY_USED | part | SM_BUDDY_MORE | k); /* the lower half is a piece */
        part = SM_BUDDY_PART;
        off += half;
        keep -= half;
    }
    ch->state[off >> SM_FN(min_order)] = (uint8_t)(SM_BUDDY_USED | part | sm_log2_floor(keep));
}

struct SM_FN(cs_alloc) { unsigned order; size_t keep; char *ptr; };
SM_INLINE void SM_FN(cs_alloc)(void *arg)
{
    struct SM_FN(cs_alloc) *a = (struct SM_FN(cs_alloc) *)arg;
    unsigned order = a->order;
    uint64_t fits = SM_FN(obj).nonempty >> (order - SM_FN(min_order));
    if (sm_unlikely(!fits)) {
        if (!SM_FN(grow)()) {
            a->ptr = NULL;
            return;
        }
        fits = SM_FN(obj).nonempty >> (order - SM_FN(min_order));
    }
    unsigned k = order + (unsigned)__builtin_ctzll(fits);
    char *p = SM_FN(obj).free[k - SM_FN(min_order)]->block;
    struct SM_FN(chunk) *ch = SM_FN(chunk_of)(p);
    size_t off = (size_t)(p - ch->base), i = off >> SM_FN(min_order);
    /* The halves split off a purged block are purged too; any other stamp starts again at 0. */
    uint64_t halves = ch->links[i].stamp == SM_BUDDY_PURGED ? SM_BUDDY_PURGED : 0;
    SM_FN(unlink)(k, ch, off);
    while (k > order) { /* keep the lower half, free the upper one */
        k--;
        ch->state[i + ((size_t)1 << (k - SM_FN(min_order)))] = (uint8_t)(SM_BUDDY_FREE | k);
        SM_FN(push)(k, ch, off + ((size_t)1 << k), halves);
    }
    ch->state[i] = (uint8_t)(SM_BUDDY_USED | order);
    if (a->keep)
        SM_FN(trim_block)(ch, off, order, a->keep);
    a->ptr = p;
}

/* Bytes of the block whose head's state is st at offset off of ch: the sum of its pieces. */
SM_INLINE size_t SM_FN(block_bytes)(const struct SM_FN(chunk) *ch, size_t off, unsigned st)
{
    size_t bytes = 0;
    for (;;) {
        size_t piece = (size_t)1 << (st & SM_BUDDY_ORDER);
        bytes += piece;
        if (!(st & SM_BUDDY_MORE))
            return bytes;
        off += piece;
        st = ch->state[off >> SM_FN(min_order)];
    }
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t need = c->size > c->align ? c->size : c->align;
    if (!SM_FN(serves)(c) || need > (SM_OPT_CHUNK_SIZE))
        return SM_NEXT_FN(alloc)(c);
    struct SM_FN(cs_alloc) a = { 0, 0, NULL };
#ifdef SM_SIZECLASS
    if (need <= (size_t)SM_SIZECLASS_FN(max_size)) { /* a trimmed block of the class size */
        need = sm_align_up(SM_SIZECLASS_FN(class_to_size)(SM_SIZECLASS_FN(size_to_class)(need)), SM_OPT_MIN_BLOCK);
        if (need & (need - 1))
            a.keep = need;
    }
#endif
    a.order = need <= (SM_OPT_MIN_BLOCK) ? (unsigned)SM_FN(min_order) : sm_log2_ceil(need);
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_alloc), &a);
    if (sm_unlikely(!a.ptr))
        errno = ENOMEM;
    return c->ptr = a.ptr;
}

/* Why a free of offset `off` in `ch` is not a free of an allocated block. Caller holds the lock. */
SM_SLOWPATH sm_err_kind_t SM_FN(diagnose_free)(const struct SM_FN(chunk) *ch, size_t off, const char **detail)
{
    if (off & ((SM_OPT_MIN_BLOCK) - 1)) {
        *detail = "pointer is not at the start of a block";
        return SM_ERR_INVALID_FREE;
    }
    /* Blocks are aligned to their size, so the block holding off starts at off rounded down to its
     * order: the first such start, from the smallest order up, whose block is big enough. */
    for (unsigned k = SM_FN(min_order); k <= SM_FN(max_order); k++) {
        size_t start = off & ~(((size_t)1 << k) - 1);
        unsigned st = ch->state[start >> SM_FN(min_order)];
        if (!st || (st & SM_BUDDY_ORDER) < k)
            continue;
        if ((st & SM_BUDDY_USED) && (st & SM_BUDDY_PART)) { /* a later piece of a trimmed block */
            *detail = "pointer is inside an allocated block, not at its start";
            return SM_ERR_INVALID_FREE;
        }
        if (!(st & SM_BUDDY_USED)) {
            *detail = start == off ? "block is already free" : "block lies inside a free block (freed twice?)";
            return SM_ERR_DOUBLE_FREE;
        }
        *detail = start == off ? "sized free is larger than the block" : "pointer is inside an allocated block, not at its start";
        return SM_ERR_INVALID_FREE;
    }
    *detail = "chunk metadata has no block here";
    return SM_ERR_CORRUPTION;
}

/* Frees the block of order k at offset off of ch (its state byte already 0): merges it with its free
 * buddies, then lists it (stamp: 0 or SM_BUDDY_PURGED, kept only if nothing merged) or, a whole free
 * chunk that is not to be kept, hands the chunk back. Returns the order of the resulting free block,
 * 0 when the chunk went back. Caller holds the lock. */
SM_SLOWPATH unsigned SM_FN(insert_free)(struct SM_FN(chunk) *ch, size_t off, unsigned k, uint64_t stamp)
{
    for (; k < SM_FN(max_order); k++) {
        size_t buddy = off ^ ((size_t)1 << k);
        if (ch->state[buddy >> SM_FN(min_order)] != (SM_BUDDY_FREE | k))
            break;
        if (ch->links[buddy >> SM_FN(min_order)].stamp != SM_BUDDY_PURGED)
            stamp = 0;
        SM_FN(unlink)(k, ch, buddy);
        ch->state[buddy >> SM_FN(min_order)] = 0;
        off &= ~((size_t)1 << k);
    }
    if (k == SM_FN(max_order) && !(SM_OPT_STABLE) &&
        (!(SM_OPT_KEEP_SPARE) || (SM_FN(obj).nonempty & SM_BUDDY_BIT(k)))) {
        SM_FN(release_chunk)(ch); /* no spare wanted, or another free chunk is already the spare */
        return 0;
    }
    ch->state[off >> SM_FN(min_order)] = (uint8_t)(SM_BUDDY_FREE | k);
    SM_FN(push)(k, ch, off, stamp);
    return k;
}

struct SM_FN(cs_free) {
    struct SM_FN(chunk) *ch; /* looked up without the lock */
    void *ptr;
    size_t size; /* the user's, for a sized free; else 0 */
    bool note, bad;      /* bad: not freed, error and detail say why */
    sm_err_kind_t error;
    const char *detail;
};
SM_INLINE void SM_FN(cs_free)(void *arg)
{
    struct SM_FN(cs_free) *f = (struct SM_FN(cs_free) *)arg;
    struct SM_FN(chunk) *ch = f->ch;
    /* Looked up again inside the section: only a bad free can race with its chunk being released,
     * and that must be reported, not read through a freed descriptor. */
    if (sm_unlikely(SM_FN(chunk_of)(f->ptr) != ch)) {
        f->bad = true;
        f->error = SM_ERR_DOUBLE_FREE;
        f->detail = "chunk was released meanwhile: block freed twice";
        return;
    }
    size_t off = (size_t)((char *)f->ptr - ch->base);
    unsigned st = ch->state[off >> SM_FN(min_order)];
    if (sm_unlikely((st & (SM_BUDDY_USED | SM_BUDDY_PART)) != SM_BUDDY_USED || (off & ((SM_OPT_MIN_BLOCK) - 1)) ||
                    f->size > ((st & SM_BUDDY_MORE) ? SM_FN(block_bytes)(ch, off, st) : (size_t)1 << (st & SM_BUDDY_ORDER)))) {
        f->bad = true;
        f->error = SM_FN(diagnose_free)(ch, off, &f->detail);
        return;
    }
    for (;;) { /* each piece; a later one's state is read before the earlier one merges */
        unsigned k = st & SM_BUDDY_ORDER;
        bool more = st & SM_BUDDY_MORE;
        size_t next = off + ((size_t)1 << k);
        ch->state[off >> SM_FN(min_order)] = 0;
        f->note |= SM_FN(insert_free)(ch, off, k, 0) >= SM_FN(purge_order);
        if (!more)
            return;
        off = next;
        st = ch->state[off >> SM_FN(min_order)];
    }
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    struct SM_FN(chunk) *ch = SM_FN(chunk_of)(c->ptr);
    if (!ch) {
        SM_NEXT_FN(free)(c);
        return;
    }
    struct SM_FN(cs_free) f = { ch, c->ptr, (c->flags & SM_F_SIZED) ? c->size : 0, false, false, SM_ERR_INVALID_FREE, NULL };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_free), &f);
    if (sm_unlikely(f.bad))
        SM_ERR_FN(raise)(f.error, SM_LAYER_NAME, c->ptr, f.detail); /* safe action: ignore the free */
    else if (f.note)
        sm_release_note();
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    struct SM_FN(chunk) *ch = SM_FN(chunk_of)(c->ptr);
    if (!ch)
        return SM_NEXT_FN(getmeta)(c);
    /* No lock: the state byte of an allocated block changes only when its owner frees or resizes
     * it, and other threads' splits and merges write other bytes. */
    size_t off = (size_t)((char *)c->ptr - ch->base);
    unsigned st = ch->state[off >> SM_FN(min_order)];
    if ((off & ((SM_OPT_MIN_BLOCK) - 1)) || (st & (SM_BUDDY_USED | SM_BUDDY_PART)) != SM_BUDDY_USED)
        return false;
    c->usable = SM_FN(block_bytes)(ch, off, st);
    c->owner = SM_LAYER_NAME;
    return true;
}

struct SM_FN(cs_resize) { struct SM_FN(chunk) *ch; size_t off, n; unsigned want; bool ok, note; };
SM_INLINE void SM_FN(cs_resize)(void *arg)
{
    struct SM_FN(cs_resize) *r = (struct SM_FN(cs_resize) *)arg;
    struct SM_FN(chunk) *ch = r->ch;
    size_t off = r->off, i = off >> SM_FN(min_order);
    unsigned st = ch->state[i], k = st & SM_BUDDY_ORDER, want = r->want;
    bool ok = !(off & ((SM_OPT_MIN_BLOCK) - 1)) && (st & (SM_BUDDY_USED | SM_BUDDY_PART)) == SM_BUDDY_USED;
    if (ok && (st & SM_BUDDY_MORE)) { /* a trimmed block: only within its size */
        r->ok = r->n <= SM_FN(block_bytes)(ch, off, st);
        return;
    }
    if (ok && want < k) {
        /* the largest half freed is the first, of order k - 1: the clock hears of it if it is worth
         * a purge (a 256 KiB block shrunk to 4 KiB frees 128 + 64 + ... KiB) */
        r->note = k - 1 >= SM_FN(purge_order);
        while (k > want) {
            k--;
            ch->state[(off + ((size_t)1 << k)) >> SM_FN(min_order)] = (uint8_t)(SM_BUDDY_FREE | k);
            SM_FN(push)(k, ch, off + ((size_t)1 << k), 0);
        }
    } else if (ok && want > k) {
        for (unsigned j = k; ok && j < want; j++)
            ok = !(off & ((size_t)1 << j)) && ch->state[(off + ((size_t)1 << j)) >> SM_FN(min_order)] == (SM_BUDDY_FREE | j);
        for (unsigned j = k; ok && j < want; j++) {
            SM_FN(unlink)(j, ch, off + ((size_t)1 << j));
            ch->state[(off + ((size_t)1 << j)) >> SM_FN(min_order)] = 0;
        }
    }
    if (ok)
        ch->state[i] = (uint8_t)(SM_BUDDY_USED | want);
    r->ok = ok;
}

/* Its blocks stay in their chunks; other blocks are the next layer's to move. */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return !SM_FN(chunk_of)(c->ptr) && SM_NEXT_FN(move)(c, n); }

/* Shrinks by freeing upper halves; grows only while the block is the lower half of a free buddy. */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    struct SM_FN(chunk) *ch = SM_FN(chunk_of)(c->ptr);
    if (!ch)
        return SM_NEXT_FN(resize)(c, n);
    if (n > (SM_OPT_CHUNK_SIZE))
        return false;
    /* Below the smallest size this layer serves (size_handle), the block goes to the layers that
     * serve it: the socket moves it. Shrunk in place instead, a block kept its freed buddies
     * apart until its own free, and a program that trims buffers to fit held each one's whole block
     * resident (6000 buffers of 64 KiB trimmed to 1000 B: 383 MiB under hslab). */
    if (n + 1 <= (size_t)(SM_SIZE_MIN))
        return false;
    struct SM_FN(cs_resize) r = { ch, (size_t)((char *)c->ptr - ch->base), n,
                                  n <= (SM_OPT_MIN_BLOCK) ? (unsigned)SM_FN(min_order) : sm_log2_ceil(n), false, false };
    SM_SYNC_FN(atomic_exec)(&SM_FN(obj).lock, SM_FN(cs_resize), &r);
    if (r.note)
        sm_release_note();
    return r.ok;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

#include "buddy_glk/release.h"
#undef SM_BUDDY_GLK_PARTS

SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }

/* Counted from the chunks' state bytes under the lock: no counter on the request paths. Every
 * used piece counts its size (a trimmed block's pieces add up to its usable size); chunks are the
 * next layer's blocks, held; descriptors and map leaves came through the metadata route. */
SM_INLINE void SM_FN(cs_stats)(void *arg)
{
    sm_stats_layer_t *l = (sm_stats_layer_t *)arg;
    for (struct SM_FN(chunk) *ch = SM_FN(obj).chunks; ch; ch = ch->next) {
        l->held += SM_OPT_CHUNK_SIZE;
        l->blocks++;
        for (size_t i = 0; i < sizeof ch->state; i++) {
            unsigned st = ch->state[i];
            size_t bytes = (size_t)1 << (st & SM_BUDDY_ORDER);
            if (st & SM_BUDDY_USED)
                l->in_use += bytes;
            else if ((st & SM_BUDDY_FREE) && !(st & SM_BUDDY_BUSY))
                l->dirty += bytes;
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

#if SM_OPT_STABLE
enum { SM_FN(stable_max) = (SM_OPT_CHUNK_SIZE) };
#define SM_LAYER_OFFERS (SM_CAP_STABLE | SM_CAP_MOVE)
#else
#define SM_LAYER_OFFERS SM_CAP_MOVE
#endif

#undef SM_BUDDY_FREE
#undef SM_BUDDY_USED
#undef SM_BUDDY_BUSY
#undef SM_BUDDY_ORDER
#undef SM_BUDDY_PART
#undef SM_BUDDY_MORE
#undef SM_BUDDY_PURGED
#undef SM_BUDDY_BIT
#undef SM_OPT_MIN_BLOCK
#undef SM_OPT_CHUNK_SIZE
#undef SM_OPT_KEEP_SPARE
#undef SM_OPT_DECAY_MS
#undef SM_OPT_PURGE_MIN
#undef SM_OPT_STABLE
#include "../../core/layer_end.h"
