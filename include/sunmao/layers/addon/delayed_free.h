/* delayed_free: an add-on layer that holds freed blocks back in a per-thread FIFO quarantine before
 * the next layer may reuse them (the Mortise paper's `delayed`, which layers/addon/delayed.h also
 * names), so a dangling pointer keeps pointing at a dead block for a while instead of at a new
 * one, and checks every free: invalid and double frees, and writes after free, are reported.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: SM_CHKSUM (the paper's chk_sum; a policy of policies/chksum/
 * with a 64-bit word: magic, xor (default), ...): the check word of each block's header; SM_ERR
 * (required; the paper's err_handle): each invalid free, double free or write after free is
 * reported once (detail: what, and the block's size), then ignored; a damaged block is leaked.
 * Options:
 *   SM_OPT_DELAYED_SIZE  bytes the calling thread's quarantine may hold, headers included (default
 *                  64 KiB, the paper's delayed_size=64KB); above it the oldest blocks leave it. A
 *                  block larger than this on its own is checked and freed at once; 0: no quarantine.
 *   SM_OPT_NODE_XOR  1 (default; the paper's node_xor): the link and size a held block stores in its
 *                  first 16 bytes are encoded with per-thread secret keys, and verified when it leaves,
 *                  so a write after free into them is reported and the queue is never followed
 *                  through a forged link; 0: plain words, only the size is compared.
 *   SM_OPT_FILL    1: a held block's other bytes are filled with a pattern, verified when it leaves
 *                  (any write after free is caught); 0 (default): a free costs a few words, not a
 *                  write and a read of the whole block (docs/layers.md, delayed_free).
 * Properties: thread_safe of the next layer (a quarantine is its thread's own), min_align 16 (a block
 * starts 16 bytes into the next layer's; a larger alignment asked for with c->align is served), zeroed
 * 0. Capabilities: needs none; offers MOVE when the next layer does (its pages move, the header
 * among them, and the header is sealed again where it lands); offers HIT: the hit paths do the
 * whole work of the common request, inlined in the socket, over the next layer's own hit paths
 * when it has them (over a thread cache, malloc is its pop and a header; free is the checks, the
 * hold, and its push of what leaves);
 * anything unusual (an aligned block, a page start, no quarantine yet, an error) misses, changing and
 * reporting nothing, and the miss checks it from the start. It goes directly under the socket, where
 * it sees every free: under a thread cache it would see only what the cache gives back, late and in
 * batches. Static TLS: one 8-byte initial-exec pointer, the free path's only per-thread access (the
 * default model's __tls_get_addr call cost 2 ns a pair). Also L_quarantine_bytes(),
 * L_quarantine_blocks(): the calling thread's quarantine. Cost: about 7 ns a malloc+free pair over
 * libsunmao's thread cache, 259 instructions against 106 (the first version: 23 ns, 540); the steps
 * and what is left: docs/layers.md, delayed_free.
 *
 * Invariants:
 * - Each block has a 16-byte header just before it (core/block_prefix.h): info = size << 9 |
 *   resized << 8 | log2(offset) << 2 | state (live, held, gone), and the check word, the chksum of
 *   (block address, info) xor the address (so no policy's header verifies at another address). The
 *   block starts `offset` bytes into the next layer's block: 16, or c->align for an aligned request;
 *   at least 16 user bytes are reserved whatever the size (a held block's link and size live there).
 *   getmeta reports the requested size; resize asks the next layer to resize its block in place and
 *   rewrites the header, marked resized.
 * - Finding a header: where it lies in the pointer's page, it is read directly and taken if it
 *   verifies as live (offset 16, or an aligned one that divides the pointer): no lookup below. A
 *   wild pointer into unmapped memory then faults, as it does in glibc's free. Else (a page start,
 *   or a header that is not a live one: held, gone, damaged, none) the careful look: the next layer's
 *   getmeta is asked 16 bytes below the pointer, then `a` below for each power of two a >= 32 that
 *   divides it, and a header is read only where it says a live block of its own covers it, until one
 *   verifies with its offset. None: invalid free; held: double free; gone (passed down, and the next
 *   layer still answers for it): double free.
 * - The quarantine is a singly linked FIFO through the held blocks; the thread's head, tail, byte and
 *   block counts and keys are in one cache line made from the metadata route on its first held free.
 *   No lock and no atomic read-modify-write on the request paths, but in sm_thread_attach then. A
 *   held block's words: link xor a per-thread key, and size xor a keyed mix (one 64x64->128-bit
 *   multiply) of that word and the block's address; the tail's (link NULL) size word is size xor a
 *   third key and its address. Appending rewrites the old tail's words by xor with the difference,
 *   so a write after free made before it still shows. On leaving, header, state, link and size are
 *   verified, and the link is NULL exactly at the tail (words written back from another place or
 *   time fail); a block that fails is reported and leaked with every block queued after it (none is
 *   followed through an unverified link); a fill mismatch leaks that block.
 * - A block leaving goes down marked gone, as a free sized with what was asked of the next layer (a
 *   thread cache takes it with no owner lookup), unsized once resized or when aligned (a block served
 *   further down and shrunk into a cached class's range is no object of that class).
 * - Thread exit, and release(SM_RELEASE_ALL) on the calling thread, pass its quarantine down.
 * @model: name=delayed_free kind=addon flag secure
 * @model: slot chksum=xor paper=chk_sum slot err paper=err_handle
 * @model: key delayed_size size key node_xor bool key fill bool
 * @check: <sunmao/policies/err/warn.h> SM_LAYER=t SM_ERR=warn
 * @check-next: fake */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/msg.h"
#include "../../core/secret.h"
#include "../../platform/platform.h"
#include "../../policies/chksum/xor.h" /* the default chksum policy */

#ifndef SM_LAYER
#error "delayed_free: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "delayed_free: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_ERR
#error "delayed_free: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_CHKSUM
#define SM_CHKSUM xor
#endif
#ifndef SM_OPT_DELAYED_SIZE
#define SM_OPT_DELAYED_SIZE ((size_t)64 << 10)
#endif
#ifndef SM_OPT_NODE_XOR
#define SM_OPT_NODE_XOR 1
#endif
#ifndef SM_OPT_FILL
#define SM_OPT_FILL 0
#endif
#if SM_OPT_NODE_XOR != 0 && SM_OPT_NODE_XOR != 1
#error "delayed_free: SM_OPT_NODE_XOR must be the literal 0 or 1"
#endif
#if SM_OPT_FILL != 0 && SM_OPT_FILL != 1
#error "delayed_free: SM_OPT_FILL must be the literal 0 or 1"
#endif
_Static_assert((uint64_t)(SM_OPT_DELAYED_SIZE) <= ((uint64_t)1 << 40), "delayed_free: SM_OPT_DELAYED_SIZE must be at most 1 TiB");
#include "../../core/meta_route.h"
#include "../../core/block_prefix.h"

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_MIN_ALIGN,
    SM_FN(zeroed) = 0,
    SM_FN(node_xor) = SM_OPT_NODE_XOR,
    SM_FN(fill) = SM_OPT_FILL,
    /* Header states (info's low two bits); 0 never verifies. */
    SM_FN(s_live) = 1,
    SM_FN(s_held) = 2, /* in a quarantine */
    SM_FN(s_gone) = 3, /* left the quarantine: passed down */
    /* Larger alignments are refused (ENOMEM), as are sizes of 2^55 and more. */
    SM_FN(max_alog) = SM_FN(prefix_max_alog),
    SM_FN(fill_byte) = 0xd7,
};
static const size_t SM_FN(delayed_size) = (size_t)(SM_OPT_DELAYED_SIZE);

struct SM_FN(hdr) {
    uint64_t info;
    SM_CHKSUM_FN(t) check;
};
_Static_assert(sizeof(struct SM_FN(hdr)) == 16, "delayed_free: the chksum policy's word must be 8 bytes");

/* A thread's quarantine: head is the oldest held block, tail the newest (user addresses). One
 * cache line, which every free touches. */
struct SM_FN(queue) {
    char *head, *tail;
    size_t bytes, blocks;
    uint64_t key;      /* a held block's link word is its link xor this */
    uint64_t mac;      /* the secret of the size word's keyed mix */
    uint64_t nkey;     /* the secret of the tail's size word (null_mask) */
};

/* Initial-exec: one %fs-relative load per free instead of a __tls_get_addr call; 8 bytes, within
 * what glibc keeps for a library loaded later with dlopen (docs/architecture.md). */
static __thread struct SM_FN(queue) *SM_FN(tq) __attribute__((tls_model("initial-exec")));

/* info = size << 9 | resized << 8 | log2(offset) << 2 | state. */
enum { SM_FN(resized) = 1 << 8 };
SM_HOT uint64_t SM_FN(info)(size_t size, unsigned alog, unsigned state)
{
    return (uint64_t)size << 9 | (uint64_t)alog << 2 | state;
}
SM_HOT size_t SM_FN(info_size)(uint64_t info) { return (size_t)(info >> 9); }
SM_HOT unsigned SM_FN(info_alog)(uint64_t info) { return (unsigned)(info >> 2) & 63; }
SM_HOT unsigned SM_FN(info_state)(uint64_t info) { return (unsigned)info & 3; }

/* Bytes asked of the next layer for a block of `size` at offset 2^alog; what the quarantine counts. */
SM_HOT size_t SM_FN(footprint)(size_t size, unsigned alog)
{
    return ((size_t)1 << alog) + (size < 16 ? 16 : size);
}

/* The check word of the header of the block at p: the chksum of (p, info), xor p, so that a header
 * copied to another address never verifies there, whatever the policy (magic's word is the same
 * for every block): a header is read without asking the next layer whether a block starts there. */
SM_HOT uint64_t SM_FN(check_of)(const char *p, uint64_t info)
{
    return (uint64_t)SM_CHKSUM_FN(compute)(p, (size_t)info) ^ sm_addr(p);
}

/* Writes the header of the block at p: info and its check word. */
SM_HOT void SM_FN(seal)(char *p, uint64_t info)
{
    struct SM_FN(hdr) *h = (struct SM_FN(hdr) *)p - 1;
    h->info = info;
    h->check = SM_FN(check_of)(p, info);
}

SM_INLINE bool SM_FN(verifies)(const char *p, const struct SM_FN(hdr) *h, unsigned alog)
{
    uint64_t info = h->info;
    return SM_FN(info_alog)(info) == alog && SM_FN(info_state)(info) != 0 &&
           h->check == SM_FN(check_of)(p, info);
}

/* ---- finding a block's header ---- */

/* The direct look: the info of the live block at p read from the 16 bytes before it, where these
 * lie in p's own page (core/block_prefix.h: the read cannot fault when p is mapped), or 0.
 * `aligned`: also a block of an aligned request (offset 32 B .. 2 KiB, p a multiple of it), else
 * offset 16 only (the hot path's one compare of the low byte). */
SM_HOT uint64_t SM_FN(look)(const char *p, bool aligned)
{
    if (sm_unlikely(!sm_ptr_aligned(p, SM_MIN_ALIGN) || !SM_FN(prefix_in_page)(p)))
        return 0;
    uint64_t w[2];
    SM_FN(prefix_words)(p, w);
    uint64_t info = w[0];
    unsigned alog = SM_FN(info_alog)(info);
    bool shape = aligned ? SM_FN(info_state)(info) == SM_FN(s_live) && alog >= 4 &&
                               sm_ptr_aligned(p, (size_t)1 << alog)
                         : (info & 0xff) == SM_FN(info)(0, 4, SM_FN(s_live));
    return shape && w[1] == SM_FN(check_of)(p, info) ? info : 0;
}

static SM_UNUSED bool SM_FN(verifies_at)(const char *p, unsigned alog)
{
    return SM_FN(verifies)(p, (const struct SM_FN(hdr) *)p - 1, alog);
}

/* The careful look: the verified header of the block at p in any state, or NULL (no block of this
 * layer starts there). Reads nothing the next layer does not say is a live block of its own: its
 * getmeta is asked 16 bytes below p, then 2^alog below for each larger power of two dividing p,
 * until the header verifies with that offset (block_prefix.h). Every candidate is tried: a
 * layer's getmeta may answer yes for an address inside one of its live blocks where stale bytes
 * look like one of its headers (tlsf_glk reads the word before the address). */
SM_SLOWPATH struct SM_FN(hdr) *SM_FN(header_of)(char *p)
{
    size_t below16;
    return SM_FN(prefix_find)(p, SM_FN(verifies_at), &below16) ? (struct SM_FN(hdr) *)p - 1 : NULL;
}

/* The info of the live block at p, or 0, after the direct look at offset 16 missed. */
SM_SLOWPATH uint64_t SM_FN(live_info_slow)(char *p)
{
    uint64_t info = SM_FN(look)(p, true);
    if (info)
        return info;
    struct SM_FN(hdr) *h = SM_FN(header_of)(p);
    return h && SM_FN(info_state)(h->info) == SM_FN(s_live) ? h->info : 0;
}

/* The info of the live block at p (non-NULL), or 0: the direct look, else the careful one. */
SM_HOT uint64_t SM_FN(live_info)(char *p)
{
    uint64_t info = SM_FN(look)(p, false);
    return sm_likely(info != 0) ? info : SM_FN(live_info_slow)(p);
}

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* ---- capability HIT ----
 * The hit paths do this layer's whole work for the common request, inlined in the socket; they
 * miss (changing nothing, reporting nothing) for everything else, which the misses then check
 * from the start. */

/* An unaligned request's block from the next layer's hit path (a thread cache's pop), sealed; a
 * miss without a next layer's hit path. Also misses before the stack is created, as the next
 * layer's hit does. */
SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT) || sm_unlikely(size >= ((size_t)1 << 55)))
        return NULL;
    char *base = (char *)SM_NEXT_FN(alloc_hit)(SM_FN(footprint)(size, 4));
    if (sm_unlikely(!base))
        return NULL;
    char *p = base + 16;
    SM_FN(seal)(p, SM_FN(info)(size, 4, SM_FN(s_live)));
    return p;
}

/* The rest of L_alloc: the next layer's miss (its hit was tried, or an aligned request's is not). */
SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    size_t size = c->size, align = c->align;
    if (sm_unlikely(size >= ((size_t)1 << 55) || align > ((size_t)1 << SM_FN(max_alog)))) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    unsigned alog = SM_FN(prefix_alog)(align);
    /* The context goes down as it came, asking for the footprint: what the next layer learns (the
     * CPU, SM_F_FRESH) comes back in it. */
    unsigned flags = c->flags;
    c->size = SM_FN(footprint)(size, alog);
    c->flags = flags & ~(unsigned)SM_F_FRESH;
    char *base = (char *)SM_NEXT_FN(alloc_miss)(c);
    c->size = size;
    if (sm_unlikely(!base))
        return c->ptr = NULL;
    char *p = base + ((size_t)1 << alog);
    SM_FN(seal)(p, SM_FN(info)(size, alog, SM_FN(s_live)));
    /* The header lies before p, so fresh memory below stays fresh for the user's bytes. Cleared
     * here otherwise, and marked fresh, so the socket does not clear it again. */
    if (sm_unlikely(flags & SM_F_ZERO)) {
        if (!(c->flags & SM_F_FRESH))
            memset(p, 0, size);
        c->flags |= SM_F_FRESH;
    }
    return c->ptr = p;
}

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (c->align <= SM_MIN_ALIGN) {
        char *p = (char *)SM_FN(alloc_hit)(c->size);
        if (sm_likely(p != NULL)) {
            c->flags &= ~(unsigned)SM_F_FRESH;
            if (c->flags & SM_F_ZERO) {
                memset(p, 0, c->size);
                c->flags |= SM_F_FRESH;
            }
            return c->ptr = p;
        }
    }
    return SM_FN(alloc_miss)(c);
}

/* ---- the quarantine ---- */

/* The keyed mix that makes a held block's size word depend on its link word and its address (mixed
 * with x = link word ^ address): a link word changed without the thread's secret, or both words
 * copied from another held block, no longer match. One multiply; not linear in xor, so flipping bits
 * of the link word does not flip a predictable set of bits of the mix. 0 without NODE_XOR. */
SM_HOT uint64_t SM_FN(mix)(const struct SM_FN(queue) *q, uint64_t x)
{
    if (!SM_OPT_NODE_XOR)
        return 0;
#ifdef __SIZEOF_INT128__
    /* Both halves of the 128-bit product: a flipped input bit moves the high half by a multiple of
     * the constant, carries and all, where the low half alone would flip its top bit for certain. */
    unsigned __int128 m = (unsigned __int128)(x ^ q->mac) * 0x9e3779b97f4a7c15ull;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
#else
    return sm_mix64(x ^ q->mac);
#endif
}

/* A held block's size word while its link is NULL (the tail) is its size xor this: linear, since
 * that link is never followed; the append that gives the block its link makes it the size xor the
 * mix. 0 without NODE_XOR. */
SM_HOT uint64_t SM_FN(null_mask)(const struct SM_FN(queue) *q, const char *p)
{
    return SM_OPT_NODE_XOR ? q->nkey ^ sm_addr(p) : 0;
}

/* The next layer's miss, out of line: its context stays off the stack of the free that inlines
 * pass_down. */
static __attribute__((noinline)) SM_UNUSED void SM_FN(pass_down_miss)(char *base, size_t bytes, unsigned flags,
                                                                       uintptr_t owner_word)
{
    sm_mctx_t f = sm_mctx_block(base, bytes, owner_word != SM_OWNER_UNKNOWN ? flags | SM_F_OWNER : flags);
    f.owner_word = owner_word;
    SM_NEXT_FN(free_miss)(&f);
}

/* An unsized free of the next layer's block at base, out of line: the rare case (pass_down). */
static __attribute__((noinline)) SM_UNUSED void SM_FN(pass_down_unsized)(char *base)
{
    uintptr_t owner_word = SM_OWNER_UNKNOWN;
    if (!SM_NEXT_FN(free_hit)(base, 0, 0, &owner_word))
        SM_FN(pass_down_miss)(base, 0, 0, owner_word);
}

/* Hands the block at p (info verified, in `state`, `bytes` its footprint) to the next layer, marked
 * gone first: the next layer's hit path inlined, then its miss (its free, without capability HIT).
 * Sized with what was asked of the next layer, so a thread cache below takes it by its size, with
 * no owner lookup; unsized once resized (a block a layer further down served, shrunk in place into
 * a cached class's range, is no object of that class) or aligned (its size need not say which
 * layer served it). */
SM_HOT void SM_FN(pass_down)(char *p, uint64_t info, unsigned state, size_t bytes)
{
    SM_FN(seal)(p, info ^ state ^ SM_FN(s_gone));
    char *base = p - ((size_t)1 << SM_FN(info_alog)(info));
    if (sm_unlikely((info & (SM_FN(resized) | 63 << 2)) != 4 << 2)) {
        SM_FN(pass_down_unsized)(base);
        return;
    }
    uintptr_t owner_word = SM_OWNER_UNKNOWN;
    if (sm_likely(SM_NEXT_FN(free_hit)(base, bytes, SM_F_SIZED, &owner_word)))
        return;
    SM_FN(pass_down_miss)(base, bytes, SM_F_SIZED, owner_word);
}

SM_INLINE void SM_FN(thread_exit)(void);

/* The calling thread's quarantine, made on its first held free; NULL if none can be had (its frees
 * are then checked and passed down at once). */
SM_SLOWPATH struct SM_FN(queue) *SM_FN(queue_make)(void)
{
    if (!sm_thread_attach(SM_FN(thread_exit)))
        return NULL; /* nothing would flush it at exit */
    sm_mctx_t r = sm_mctx_alloc(sizeof(struct SM_FN(queue)), SM_CACHELINE, 0);
    struct SM_FN(queue) *q = (struct SM_FN(queue) *)SM_FN(meta_alloc)(&r);
    if (!q)
        return NULL;
    q->head = q->tail = NULL;
    q->bytes = q->blocks = 0;
    q->key = sm_mix64(sm_secret() ^ (uint64_t)sm_addr(q) ^ sm_plat_cycles());
    q->mac = sm_mix64(q->key ^ sm_secret() ^ 0x6a09e667f3bcc909ull);
    q->nkey = sm_mix64(q->mac ^ sm_plat_cycles());
    return SM_FN(tq) = q;
}

SM_SLOWPATH void SM_FN(report)(sm_err_kind_t kind, const void *p, const char *fmt, size_t a, size_t b)
{
    char detail[160];
    sm_msg_format(detail, sizeof detail, fmt, a, b);
    SM_ERR_FN(raise)(kind, SM_LAYER_NAME, p, detail);
}

/* A free that does not verify: no live block at c->ptr, or a sized free larger than the block.
 * The careful look tells which (held or gone: a double free). Reported, then ignored. */
SM_SLOWPATH void SM_FN(bad_free)(sm_mctx_t *c)
{
    struct SM_FN(hdr) *h = SM_FN(header_of)((char *)c->ptr);
    size_t claimed = (c->flags & SM_F_SIZED) ? c->size : 0;
    uint64_t w[2];
    if (!h && sm_ptr_aligned(c->ptr, SM_MIN_ALIGN) && SM_FN(prefix_in_page)(c->ptr)) {
        /* No live block below any more (the block left the quarantine and the next layer freed
         * it: the first free's thread exited, or the quarantine moved on). Its gone header may
         * still be there, readable as the direct look reads (in p's page), and verifies only at
         * this address. */
        SM_FN(prefix_words)((const char *)c->ptr, w);
        if (SM_FN(info_state)(w[0]) == SM_FN(s_gone) && w[1] == SM_FN(check_of)((const char *)c->ptr, w[0])) {
            SM_FN(report)(SM_ERR_DOUBLE_FREE, c->ptr, "block of %zu bytes was already freed (it left the quarantine); ignored",
                          SM_FN(info_size)(w[0]), 0);
            return;
        }
    }
    if (!h)
        SM_FN(report)(SM_ERR_INVALID_FREE, c->ptr, "no live block of this layer starts here (never allocated here, or freed already; size %zu claimed); ignored", claimed, 0);
    else if (SM_FN(info_state)(h->info) == SM_FN(s_held))
        SM_FN(report)(SM_ERR_DOUBLE_FREE, c->ptr, "block of %zu bytes is already in the quarantine; ignored",
                      SM_FN(info_size)(h->info), 0);
    else if (SM_FN(info_state)(h->info) == SM_FN(s_gone))
        SM_FN(report)(SM_ERR_DOUBLE_FREE, c->ptr, "block of %zu bytes was already freed (it left the quarantine); ignored",
                      SM_FN(info_size)(h->info), 0);
    else
        SM_FN(report)(SM_ERR_INVALID_FREE, c->ptr, "sized free of %zu bytes, the block has %zu; ignored", claimed,
                      SM_FN(info_size)(h->info));
}

/* The first byte of [from, from + n) that is not the fill pattern, or n. */
SM_INLINE size_t SM_FN(fill_mismatch)(const unsigned char *from, size_t n)
{
    const uint64_t word = 0x0101010101010101ull * SM_FN(fill_byte);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, from + i, 8);
        if (w != word)
            break;
    }
    for (; i < n; i++)
        if (from[i] != SM_FN(fill_byte))
            return i;
    return n;
}

/* Puts the block at p (live, info verified, `bytes` its footprint) at the tail of q. */
SM_HOT void SM_FN(hold)(struct SM_FN(queue) *q, char *p, uint64_t info, size_t bytes)
{
    size_t size = SM_FN(info_size)(info);
    SM_FN(seal)(p, info ^ SM_FN(s_live) ^ SM_FN(s_held));
    uint64_t *w = (uint64_t *)(void *)p, key = SM_OPT_NODE_XOR ? q->key : 0;
    w[0] = key; /* the link NULL, encoded */
    w[1] = (uint64_t)size ^ SM_FN(null_mask)(q, p);
    if (SM_OPT_FILL && size > 16)
        memset(p + 16, SM_FN(fill_byte), size - 16);
    char *t = q->tail;
    if (t) {
        /* t's words change by the difference between its old link (NULL) and p, whatever they hold
         * now: a write after free into them still fails the check when t leaves. */
        uint64_t *tw = (uint64_t *)(void *)t;
        tw[0] ^= (uint64_t)sm_addr(p);
        tw[1] ^= SM_FN(null_mask)(q, t) ^ SM_FN(mix)(q, key ^ sm_addr(p) ^ sm_addr(t));
    } else {
        q->head = p;
    }
    q->tail = p;
    q->bytes += bytes;
    q->blocks++;
}

SM_SLOWPATH void SM_FN(leave_damaged)(struct SM_FN(queue) *q, char *p, size_t size)
{
    size_t dropped = q->blocks - 1;
    q->head = q->tail = NULL;
    q->bytes = q->blocks = 0;
    SM_FN(report)(SM_ERR_CORRUPTION, p,
                  "held block's header, link or size (%zu bytes) was written after free; it and the %zu blocks "
                  "queued after it are leaked",
                  size, dropped);
}

/* The oldest block leaves q: verified, then passed down; a damaged one is reported and leaked (with
 * every block after it, when its link cannot be trusted). */
SM_HOT void SM_FN(leave)(struct SM_FN(queue) *q)
{
    char *p = q->head;
    struct SM_FN(hdr) *h = (struct SM_FN(hdr) *)p - 1;
    uint64_t info = h->info, *w = (uint64_t *)(void *)p, w0 = w[0], w1 = w[1];
    size_t size = SM_FN(info_size)(info);
    unsigned alog = SM_FN(info_alog)(info);
    char *next = (char *)(uintptr_t)(w0 ^ (SM_OPT_NODE_XOR ? q->key : 0));
    /* The link is NULL exactly at the tail: else these are words the block held in another place
     * of the queue (or in an earlier stay in it), written back. */
    uint64_t words = next ? w1 ^ SM_FN(mix)(q, w0 ^ sm_addr(p)) : w1 ^ SM_FN(null_mask)(q, p);
    bool ok = SM_FN(info_state)(info) == SM_FN(s_held) && alog - 4 <= SM_FN(max_alog) - 4 &&
              h->check == SM_FN(check_of)(p, info) &&
              words == size && sm_ptr_aligned(next, SM_MIN_ALIGN) && (next ? p != q->tail : p == q->tail);
    if (sm_unlikely(!ok)) {
        SM_FN(leave_damaged)(q, p, size);
        return;
    }
    size_t bytes = SM_FN(footprint)(size, alog);
    q->head = next;
    if (!next)
        q->tail = NULL;
    q->bytes -= bytes;
    q->blocks--;
    size_t at;
    if (SM_OPT_FILL && size > 16 && (at = SM_FN(fill_mismatch)((const unsigned char *)p + 16, size - 16)) != size - 16) {
        SM_FN(report)(SM_ERR_CORRUPTION, p, "held block of %zu bytes was written after free (byte %zu); leaked", size,
                      at + 16);
        return;
    }
    SM_FN(pass_down)(p, info, SM_FN(s_held), bytes);
}

SM_SLOWPATH void SM_FN(drain)(struct SM_FN(queue) *q)
{
    while (q->head)
        SM_FN(leave)(q);
}

/* Holds the block at p (live, info verified, `bytes` its footprint) and lets the oldest blocks
 * leave while the quarantine is over its bound. */
SM_HOT void SM_FN(quarantine)(struct SM_FN(queue) *q, char *p, uint64_t info, size_t bytes)
{
    SM_FN(hold)(q, p, info, bytes);
    while (q->bytes > SM_FN(delayed_size))
        SM_FN(leave)(q);
}

/* free's hit: a block whose header the direct look verifies at offset 16, of a thread that has its
 * quarantine, small enough to be held. Anything else misses. The owner word is not read. */
SM_HOT bool SM_FN(free_hit)(void *ptr, size_t size, unsigned flags, uintptr_t *owner_word)
{
    (void)owner_word;
    char *p = (char *)ptr;
    uint64_t info = SM_FN(look)(p, false);
    struct SM_FN(queue) *q = SM_FN(tq);
    size_t bytes = SM_FN(footprint)(SM_FN(info_size)(info), 4);
    if (sm_unlikely(!info || !q || bytes > SM_FN(delayed_size) ||
                    ((flags & SM_F_SIZED) && size > SM_FN(info_size)(info))))
        return false;
    SM_FN(quarantine)(q, p, info, bytes);
    return true;
}

/* The whole free, checked from the start: what free_hit does not take. */
SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    char *p = (char *)c->ptr;
    if (sm_unlikely(!p))
        return;
    uint64_t info = SM_FN(live_info)(p);
    if (sm_unlikely(!info || ((c->flags & SM_F_SIZED) && c->size > SM_FN(info_size)(info)))) {
        SM_FN(bad_free)(c);
        return;
    }
    struct SM_FN(queue) *q = SM_FN(tq);
    size_t bytes = SM_FN(footprint)(SM_FN(info_size)(info), SM_FN(info_alog)(info));
    if (bytes > SM_FN(delayed_size) || sm_unlikely(!q && !(q = SM_FN(queue_make)()))) {
        SM_FN(pass_down)(p, info, SM_FN(s_live), bytes); /* it could never be held */
        return;
    }
    SM_FN(quarantine)(q, p, info, bytes);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    if (c->ptr && SM_FN(free_hit)(c->ptr, c->size, c->flags, &c->owner_word))
        return;
    SM_FN(free_miss)(c);
}

SM_SLOWPATH uint64_t SM_FN(probe_info)(char *p)
{
    struct SM_FN(hdr) *h = SM_FN(header_of)(p);
    return h && SM_FN(info_state)(h->info) == SM_FN(s_live) ? h->info : 0;
}

/* SM_F_PROBE (a candidate from a search above, its page maybe unmapped): only the careful look,
 * which reads nothing the next layer has not confirmed. */
SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    uint64_t info = !c->ptr                   ? 0
                    : (c->flags & SM_F_PROBE) ? SM_FN(probe_info)((char *)c->ptr)
                                              : SM_FN(live_info)((char *)c->ptr);
    if (!info)
        return false;
    c->usable = SM_FN(info_size)(info);
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Resize and move: the live block at c->ptr given n bytes by the next layer, in place
 * (next_resize) or by moving its pages there (next_move: the header moves with them), then sealed
 * again where it is, marked resized: its check word depends on the address, and only the header
 * says the size. Only a live block changes: a held, gone or damaged one stays where it is, and the
 * socket's copy path reports it as realloc's would. */
SM_INLINE bool SM_FN(reshape)(sm_mctx_t *c, size_t n, bool (*below)(sm_mctx_t *, size_t))
{
    char *p = (char *)c->ptr;
    uint64_t info = p ? SM_FN(live_info)(p) : 0;
    if (!info || n >= ((size_t)1 << 55))
        return false;
    unsigned alog = SM_FN(info_alog)(info);
    sm_mctx_t m = sm_mctx_block(p - ((size_t)1 << alog), 0, 0);
    size_t fp = SM_FN(footprint)(n, alog), old_fp = SM_FN(footprint)(SM_FN(info_size)(info), alog);
    if (!below(&m, fp))
        return false;
    /* A shrink the next layer kept whole (its block still fits a class): no, so the socket moves the
     * block by its own rule (core/release.h), as tail_chksum does; this layer's usable size is the
     * size asked, so the socket cannot see the next layer's. The header, untouched, still holds.
     * Asked only of a shrink to half or less, as the socket's rule needs: the others keep their
     * direct look (no call to the next layer). */
    sm_mctx_t g = sm_mctx_block(m.ptr, 0, 0);
    if (fp <= old_fp / 2 && m.ptr == p - ((size_t)1 << alog) && SM_NEXT_FN(getmeta)(&g) &&
        sm_shrink_declined(g.usable, old_fp, fp))
        return false;
    p = (char *)m.ptr + ((size_t)1 << alog);
    SM_FN(seal)(p, SM_FN(info)(n, alog, SM_FN(s_live)) | SM_FN(resized));
    c->ptr = p;
    return true;
}

SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_FN(reshape)(c, n, SM_NEXT_FN(resize)); }

/* The socket's move of a large growth (capability MOVE). */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    /* An aligned block's header is found from the pointer's alignment, which pages moved elsewhere
     * need not keep (tail_chksum's move, the same): it is copied. */
    uint64_t info = c->ptr ? SM_FN(live_info)((char *)c->ptr) : 0;
    return info && SM_FN(info_alog)(info) == 4 && SM_FN(reshape)(c, n, SM_NEXT_FN(move));
}

/* A range of a block the caller holds lies inside the next layer's block. */
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

SM_INLINE void SM_FN(release)(sm_release_t *r)
{
    if (r->how == SM_RELEASE_ALL && SM_FN(tq))
        SM_FN(drain)(SM_FN(tq));
    SM_NEXT_FN(release)(r);
}

SM_INLINE void SM_FN(thread_exit)(void)
{
    struct SM_FN(queue) *q = SM_FN(tq);
    if (q) {
        SM_FN(tq) = NULL; /* a free from a later destructor makes a new one */
        SM_FN(drain)(q);
        sm_mctx_t f = sm_mctx_block(q, sizeof *q, SM_F_SIZED);
        SM_FN(meta_free)(&f);
    }
    SM_NEXT_FN(thread_exit)();
}

/* Nothing shared to lock: a quarantine belongs to its thread. In the child, the forking thread's
 * stays valid; other threads' are lost, their blocks left allocated below. */
SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

SM_INLINE SM_UNUSED size_t SM_FN(quarantine_bytes)(void) { return SM_FN(tq) ? SM_FN(tq)->bytes : 0; }
SM_INLINE SM_UNUSED size_t SM_FN(quarantine_blocks)(void) { return SM_FN(tq) ? SM_FN(tq)->blocks : 0; }

/* HIT's four functions and move are defined above; MOVE is declared where the next layer has it. */
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAP_HIT | (SM_CAPS(SM_NEXT) & SM_CAP_MOVE))

#undef SM_OPT_DELAYED_SIZE
#undef SM_OPT_NODE_XOR
#undef SM_OPT_FILL
/* Statistics: inexact (core/stats.h). in_use (the sizes asked) differs from what this layer holds
 * below (footprints at the next layer's usable sizes, quarantined blocks included) by each live
 * block's header and rounding, which only the block's header records. alloc_hit touches no
 * per-thread state (the quarantine record is made on a thread's first held free, and no registry
 * lists them): a count would be a new TLS access on malloc's hit path and a registry of records to
 * merge on read, or an atomic on both hit paths. Until that is worth its cost, allocated is marked
 * inexact. */
SM_STATS_INEXACT
#define SM_LAYER_STATS 1

#include "../../core/layer_end.h"
