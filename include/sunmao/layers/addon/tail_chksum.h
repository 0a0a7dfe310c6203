/* tail_chksum: an add-on layer that puts a check value right after the end of every block the
 * program asked for and verifies it when the block comes back (the Mortise paper's tail_chksum,
 * keys chk_sum and err_handle): an overflow of even one byte past the requested end is caught.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots: chksum (required: magic|xor|crc32c, the check value of a
 * block from its address and header), err (required: what a damaged block is reported to).
 * Options:
 *   SM_OPT_CHECK_REALLOC  1 (default): getmeta and resize verify the tail too, so realloc and
 *                         malloc_usable_size catch an overflow before the block moves or grows in
 *                         place; 0: only free compares it (getmeta and resize still verify the
 *                         header), and a resize rewrites it, so an overflow made before a realloc
 *                         that stays in place goes unnoticed
 * Properties: thread_safe of the next layer, min_align 16 (larger alignments asked with c->align
 * are served), zeroed 0. Capabilities: needs none; offers HIT when the next layer does (a thread
 * cache): its hit paths wrap the next layer's, so the socket keeps its inlined fast paths; and MOVE
 * when the next layer does: its pages move, and the block is sealed again where it lands. Place it
 * directly under the socket, where it sees every request: below a thread cache it would see only
 * the cache's refills and flushes, and the frees it checks would come long after the overflow.
 *
 * Layout (core/block_prefix.h): a request of n bytes asks the next layer for off + max(n, 8) + 8
 * bytes, off = 16 (or c->align, asked of the next layer too, for a larger alignment), and the
 * block starts off bytes in. With K = chksum(block, info) ^ a hash of info:
 *   16 bytes before  the header: K ^ the state's tag, then info = n << 8 | flags | log2(off);
 *   bytes n .. n+7   T = K, unaligned: the check value an overflow hits first.
 * So free, getmeta and resize find n and the offset from the pointer, with no lookup below, when
 * the header lies in the pointer's page; only at the start of a page (or when the header does not
 * verify) is the next layer's getmeta asked where the block starts (block_prefix.h). A wild pointer
 * into unmapped memory faults, as it does in the C library.
 * States, in the header's tag, so the same block is never reported twice:
 * - live: free checks T, tags the header freed and passes the next layer's block down (sized with
 *   what was asked of it, so a thread cache needs no owner lookup; unsized once resized, or when
 *   aligned); getmeta answers n (malloc_usable_size and the socket's realloc see the user's size);
 *   resize asks the next layer to resize in place (a shrink it refuses stays in place) and moves
 *   T; SM_F_FRESH passes up untouched, since only the header and bytes past n are written.
 * - T overwritten (an overflow): reported once through the err policy as SM_ERR_CORRUPTION with
 *   the size and what found it, e.g. "tail check value overwritten: block of 40 bytes, overflow
 *   past its end (found by free)", then kept out of reuse (leaked, never passed down) unless the
 *   err policy does not return. Found by free: leaked, and a second free is a double free
 *   (reported here: the next layer still holds the block); found by getmeta or resize: reported,
 *   still the program's (getmeta answers n, resize refuses so the socket moves it, its free leaks
 *   it silently).
 * - freed: a second free is reported here as SM_ERR_DOUBLE_FREE; getmeta and resize say "no block".
 *   The free also stamps the block's first 16 bytes with a freed copy of the header, so a double
 *   free is recognised when the next layer has reused the header for its own free list and still
 *   calls the block live (a thread cache's lists, slab_lk).
 * - header damaged (an underflow), found when it does not verify and the next layer has a live
 *   block 16 bytes below: reported once as SM_ERR_CORRUPTION ("header overwritten"), leaked; its
 *   size is taken as the most the block below can hold. Its state is remembered in a table of the
 *   last 16 such blocks, not in the header: the bytes may be the next layer's free list. An
 *   aligned block's damaged header cannot be told from a pointer that is not ours.
 * - not this layer's (no verified header, nothing live 16 bytes below): passed down as it is, for
 *   the next layer to report the invalid free; getmeta and resize say "no block".
 * The hit paths: alloc_hit wraps the next layer's for a request of the default alignment; free_hit
 * takes an intact block only (anything else is the miss's), tags it, and restores it if the next
 * layer's hit misses, so the miss checks it again from the start. The check values depend on the
 * process secret: it must not change while blocks are live (the socket seeds it before its first
 * request, and a hit path serves nothing before the next layer's is set up).
 * @model: name=tail_chksum kind=addon flag secure
 * @model: slot chksum paper=chk_sum slot err paper=err_handle key check_realloc bool
 * @check: <sunmao/policies/chksum/crc32c.h> <sunmao/policies/err/warn.h> SM_LAYER=t SM_CHKSUM=crc32c SM_ERR=warn
 * @check-next: fake */
#include "../../core/bits.h"
#include "../../core/errors.h"
#include "../../core/layer.h"
#include "../../core/msg.h"

#ifndef SM_LAYER
#error "tail_chksum: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "tail_chksum: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_CHKSUM
#error "tail_chksum: policy slot 'chksum' is empty (SM_CHKSUM = magic|xor|crc32c)"
#endif
#ifndef SM_ERR
#error "tail_chksum: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_CHECK_REALLOC
#define SM_OPT_CHECK_REALLOC 1
#endif
#if SM_OPT_CHECK_REALLOC != 0 && SM_OPT_CHECK_REALLOC != 1
#error "tail_chksum: SM_OPT_CHECK_REALLOC must be the literal 0 or 1"
#endif
#include "../../core/block_prefix.h"

/* The states' tags (xor-ed into the header's check value) and info's hash: arbitrary, distinct, dense. */
#ifndef SM_TAILCK_TAGS
#define SM_TAILCK_TAGS
#define SM_TAILCK_INFO_MIX ((uint64_t)0xd6e8feb86659fd93ull)
#define SM_TAILCK_REPORTED ((uint64_t)0x1f7d2c5ae3904b6bull)
#define SM_TAILCK_LEAKED   ((uint64_t)0x93e45b0c7a1d62f5ull)
#define SM_TAILCK_FREED    ((uint64_t)0x2ab9f4718c5e03d7ull)
#define SM_TAILCK_MAX_SIZE (((uint64_t)1 << 48) - 1) /* no address space is larger */
#define SM_TAILCK_MSG_TAIL   "tail check value overwritten: block of %zu bytes, overflow past its end (found by %s)"
#define SM_TAILCK_MSG_HEADER "header overwritten: block of at most %zu bytes, underflow before its start (found by %s)"
#endif

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_MIN_ALIGN,
    SM_FN(zeroed) = 0,
    SM_FN(resized) = 64, /* info: resized, so freed unsized (SM_FN(below)) */
    /* what a block is (SM_FN(classify)) */
    SM_FN(s_live) = 1, SM_FN(s_reported), SM_FN(s_leaked), SM_FN(s_freed), SM_FN(s_overflow),
    SM_FN(s_damaged), SM_FN(s_foreign),
    SM_FN(memo_size) = 16,
};
_Static_assert(sizeof(SM_CHKSUM_FN(t)) == 8, "tail_chksum: the chksum policy's word must be 8 bytes");

/* Blocks found with a damaged header: address | state (reported or leaked), the last memo_size. */
static struct {
    uintptr_t damaged[SM_FN(memo_size)];
    unsigned next;
} SM_FN(obj);

SM_INLINE uint64_t SM_FN(load)(const char *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
SM_INLINE void SM_FN(store)(char *p, uint64_t v) { __builtin_memcpy(p, &v, sizeof v); }

SM_INLINE size_t SM_FN(info_size)(uint64_t info) { return (size_t)(info >> 8); }
SM_INLINE unsigned SM_FN(info_alog)(uint64_t info) { return (unsigned)info & 63; }

/* What is asked of the next layer: the offset, n, and T, with at least 16 bytes from the block's
 * start for the freed stamp. */
SM_INLINE size_t SM_FN(footprint)(size_t n, unsigned alog) { return ((size_t)1 << alog) + (n < 8 ? 8 : n) + 8; }

/* K. A hash of info makes it depend on info under a policy that ignores the size (`magic`), so a
 * header with another size never verifies; `xor` and `crc32c` cover it already, and the multiply
 * cost 0.3 ns of sunmao-secure's malloc+free pair (docs/layers.md, tail_chksum). */
SM_INLINE uint64_t SM_FN(key)(const char *p, uint64_t info)
{
    uint64_t k = (uint64_t)SM_CHKSUM_FN(compute)(p, (size_t)info);
    return SM_CHKSUM_FN(covers_size) ? k : k ^ info * SM_TAILCK_INFO_MIX;
}

/* Writes block p's header with state `tag`, and T for a live block. */
SM_INLINE void SM_FN(seal)(char *p, uint64_t info, uint64_t tag)
{
    uint64_t k = SM_FN(key)(p, info);
    SM_FN(store)(p - 16, k ^ tag);
    SM_FN(store)(p - 8, info);
    if (!tag)
        SM_FN(store)(p + SM_FN(info_size)(info), k);
}

/* The common paths' test: p's header read in place says live, and T holds if `tail` is asked. */
SM_INLINE bool SM_FN(intact)(const char *p, bool tail, uint64_t *info, uint64_t *k)
{
    if (sm_unlikely(!SM_FN(prefix_in_page)(p)))
        return false;
    uint64_t h[2];
    SM_FN(prefix_words)(p, h);
    *info = h[1];
    *k = SM_FN(key)(p, h[1]);
    /* && keeps T unread until the header has verified: n is then ours, and T inside the block */
    return h[0] == *k && (!tail || SM_FN(load)(p + SM_FN(info_size)(h[1])) == *k);
}

/* The tag that the two words h (check value, info: a header, or a freed block's stamp) carry for
 * block p, or something that is no tag if they do not verify. */
SM_INLINE uint64_t SM_FN(tag_of)(const char *p, const uint64_t h[2], uint64_t *info)
{
    *info = h[1];
    return h[0] ^ SM_FN(key)(p, h[1]);
}
SM_INLINE bool SM_FN(is_tag)(uint64_t d)
{
    return d == 0 || d == SM_TAILCK_REPORTED || d == SM_TAILCK_LEAKED || d == SM_TAILCK_FREED;
}

/* block_prefix.h's question: does p's header verify, in any state, with this offset? */
SM_SLOWPATH bool SM_FN(verifies)(const char *p, unsigned alog)
{
    uint64_t h[2], info;
    SM_FN(prefix_words)(p, h);
    return SM_FN(is_tag)(SM_FN(tag_of)(p, h, &info)) && SM_FN(info_alog)(info) == alog;
}

SM_SLOWPATH unsigned SM_FN(memo_get)(const char *p)
{
    for (unsigned i = 0; i < SM_FN(memo_size); i++) {
        uintptr_t w = __atomic_load_n(&SM_FN(obj).damaged[i], __ATOMIC_RELAXED);
        if ((w & ~(uintptr_t)15) == sm_addr(p))
            return (unsigned)w & 15;
    }
    return 0;
}

SM_SLOWPATH void SM_FN(memo_set)(const char *p, unsigned state)
{
    unsigned i = 0;
    while (i < SM_FN(memo_size) &&
           (__atomic_load_n(&SM_FN(obj).damaged[i], __ATOMIC_RELAXED) & ~(uintptr_t)15) != sm_addr(p))
        i++;
    if (i == SM_FN(memo_size)) /* a new one replaces the oldest */
        i = __atomic_fetch_add(&SM_FN(obj).next, 1, __ATOMIC_RELAXED) % SM_FN(memo_size);
    __atomic_store_n(&SM_FN(obj).damaged[i], sm_addr(p) | state, __ATOMIC_RELAXED);
}

/* What p is, for the slow paths. *info: its header's (live .. overflow) or its stamp's (freed);
 * *u: for damaged, the usable size of the next layer's block 16 bytes below. */
SM_SLOWPATH unsigned SM_FN(classify)(char *p, bool tail, uint64_t *info, size_t *u)
{
    bool in_page = SM_FN(prefix_in_page)(p);
    uint64_t d = 1, h[2]; /* d: no tag yet */
    *u = 0;
    if (in_page || SM_FN(prefix_find)(p, SM_FN(verifies), u)) {
        SM_FN(prefix_words)(p, h);
        d = SM_FN(tag_of)(p, h, info);
    }
    if (SM_FN(is_tag)(d) && SM_FN(info_alog)(*info) >= 4 && SM_FN(info_alog)(*info) <= SM_FN(prefix_max_alog)) {
        if (d == SM_TAILCK_REPORTED)
            return SM_FN(s_reported);
        if (d == SM_TAILCK_LEAKED)
            return SM_FN(s_leaked);
        if (d == SM_TAILCK_FREED)
            return SM_FN(s_freed);
        if (tail && SM_FN(load)(p + SM_FN(info_size)(*info)) != SM_FN(key)(p, *info))
            return SM_FN(s_overflow);
        return SM_FN(s_live);
    }
    if (in_page && sm_ptr_aligned(p, SM_MIN_ALIGN)) {
        sm_mctx_t m = sm_mctx_block(p - 16, 0, 0);
        if (SM_NEXT_FN(getmeta)(&m))
            *u = m.usable;
    }
    if (*u < SM_FN(footprint)(0, 4) || !sm_ptr_aligned(p, SM_MIN_ALIGN))
        return SM_FN(s_foreign);
    /* One of ours with an unreadable header, unless it was freed and the stamp still says so (the
     * next layer's block at p - 16 covers the stamp). */
    __builtin_memcpy(h, p, 16);
    uint64_t si;
    if (SM_FN(tag_of)(p, h, &si) == SM_TAILCK_FREED && SM_FN(info_alog)(si) == 4 &&
        SM_FN(info_size)(si) <= SM_TAILCK_MAX_SIZE && SM_FN(footprint)(SM_FN(info_size)(si), 4) <= *u) {
        *info = si;
        return SM_FN(s_freed);
    }
    return SM_FN(s_damaged);
}

SM_SLOWPATH void SM_FN(report)(sm_err_kind_t kind, const char *p, const char *fmt, ...)
{
    char detail[160];
    va_list ap;
    va_start(ap, fmt);
    sm_msg_vformat(detail, sizeof detail, fmt, ap);
    va_end(ap);
    SM_ERR_FN(raise)(kind, SM_LAYER_NAME, p, detail);
}

/* The most a block with a damaged header can hold in the next layer's block of u bytes. */
SM_INLINE size_t SM_FN(damaged_size)(size_t u) { return u - SM_FN(footprint)(0, 4) + 8; }

/* free's slow path: reports what is wrong, updates the state, and says what the free does now:
 * s_live (*info set): pass the block down; s_foreign: pass p down as it is; else nothing. */
SM_SLOWPATH unsigned SM_FN(free_slow)(char *p, uint64_t *info)
{
    size_t u = 0;
    unsigned s = SM_FN(classify)(p, true, info, &u), m;
    size_t n = SM_FN(info_size)(*info);
    switch (s) {
    case SM_FN(s_overflow):
        SM_FN(report)(SM_ERR_CORRUPTION, p, SM_TAILCK_MSG_TAIL, n, "free");
        SM_FN(seal)(p, *info, SM_TAILCK_LEAKED);
        break;
    case SM_FN(s_reported):
        SM_FN(seal)(p, *info, SM_TAILCK_LEAKED);
        break;
    case SM_FN(s_leaked):
        SM_FN(report)(SM_ERR_DOUBLE_FREE, p,
                      "block of %zu bytes freed twice (its first free found it overwritten and kept it out of reuse)", n);
        break;
    case SM_FN(s_freed):
        SM_FN(report)(SM_ERR_DOUBLE_FREE, p, "block of %zu bytes freed twice", n);
        break;
    case SM_FN(s_damaged):
        m = SM_FN(memo_get)(p);
        if (m == SM_FN(s_leaked))
            SM_FN(report)(SM_ERR_DOUBLE_FREE, p,
                          "block of at most %zu bytes freed twice (its first free found its header overwritten)",
                          SM_FN(damaged_size)(u));
        else if (!m)
            SM_FN(report)(SM_ERR_CORRUPTION, p, SM_TAILCK_MSG_HEADER, SM_FN(damaged_size)(u), "free");
        SM_FN(memo_set)(p, SM_FN(s_leaked));
        break;
    default: /* live (at the start of a page), or not ours: the next layer reports it */
        break;
    }
    return s;
}

/* getmeta's and resize's slow path: what newly found damage is reported (found_by) and marked
 * reported. Returns s_live or s_reported with the block's size in *n, else it is not the program's. */
SM_SLOWPATH unsigned SM_FN(held)(char *p, const char *found_by, uint64_t *info, size_t *n)
{
    size_t u = 0;
    unsigned s = SM_FN(classify)(p, SM_OPT_CHECK_REALLOC, info, &u), m;
    if (s == SM_FN(s_overflow)) {
        SM_FN(report)(SM_ERR_CORRUPTION, p, SM_TAILCK_MSG_TAIL, SM_FN(info_size)(*info), found_by);
        SM_FN(seal)(p, *info, SM_TAILCK_REPORTED);
        s = SM_FN(s_reported);
    } else if (s == SM_FN(s_damaged)) {
        if ((m = SM_FN(memo_get)(p)) == SM_FN(s_leaked))
            return m;
        if (!m) {
            SM_FN(report)(SM_ERR_CORRUPTION, p, SM_TAILCK_MSG_HEADER, SM_FN(damaged_size)(u), found_by);
            SM_FN(memo_set)(p, SM_FN(s_reported));
        }
        *n = SM_FN(damaged_size)(u);
        return SM_FN(s_reported);
    }
    *n = SM_FN(info_size)(*info);
    return s;
}

/* A live block (header info, check value k) leaves the program: tagged freed, stamped (see the head
 * comment), and its free below described: the next layer's block, and the size and flag it is
 * freed with. Sized with what was asked of the next layer, so a thread cache takes it by its size
 * with no owner lookup; unsized once resized (a block the next layer's own next layer served,
 * shrunk into a cached class's range, is not that class's object) or aligned (maybe served by
 * another layer than its size would say). */
SM_INLINE char *SM_FN(below)(char *p, uint64_t info, uint64_t k, size_t *bytes, unsigned *flags)
{
    SM_FN(store)(p - 16, k ^ SM_TAILCK_FREED);
    SM_FN(store)(p, k ^ SM_TAILCK_FREED);
    SM_FN(store)(p + 8, info);
    unsigned alog = SM_FN(info_alog)(info);
    bool sized = (info & (SM_FN(resized) | 63)) == 4;
    *flags = sized ? SM_F_SIZED : 0u;
    *bytes = sized ? SM_FN(footprint)(SM_FN(info_size)(info), 4) : 0;
    return p - ((size_t)1 << alog);
}

/* Undoes below() for a free the next layer's hit did not take: the header's info word is still in
 * place, so nothing of the free needs to stay live across the next layer's hit path. */
SM_SLOWPATH void SM_FN(unfree)(char *p) { SM_FN(seal)(p, SM_FN(load)(p - 8), 0); }

SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* ---- the hit paths (capability HIT; they miss whenever the next layer's do) ---- */

SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (sm_unlikely((uint64_t)size > SM_TAILCK_MAX_SIZE))
        return NULL; /* the miss refuses it */
    char *base = (char *)SM_NEXT_FN(alloc_hit)(SM_FN(footprint)(size, 4));
    if (sm_unlikely(!base))
        return NULL;
    SM_FN(seal)(base + 16, (uint64_t)size << 8 | 4, 0);
    return base + 16;
}

/* On a miss the block is as it was (tag and T restored; only its freed bytes hold the stamp), and
 * *owner_word holds what the next layer read of its own block, for the miss to pass on. */
SM_HOT bool SM_FN(free_hit)(void *ptr, size_t size, unsigned flags, uintptr_t *owner_word)
{
    (void)size, (void)flags; /* the size the program claims: what matters is the header's */
    char *p = (char *)ptr;
    uint64_t info, k;
    if (sm_unlikely(!SM_FN(intact)(p, true, &info, &k)))
        return false;
    size_t bytes;
    unsigned below_flags;
    char *base = SM_FN(below)(p, info, k, &bytes, &below_flags);
    if (sm_likely(SM_NEXT_FN(free_hit)(base, bytes, below_flags, owner_word)))
        return true;
    SM_FN(unfree)(p);
    return false;
}

/* ---- the misses, and the whole requests for a layer above ---- */

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    size_t n = c->size;
    if (sm_unlikely((uint64_t)n > SM_TAILCK_MAX_SIZE || c->align > ((size_t)1 << SM_FN(prefix_max_alog)))) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    unsigned alog = SM_FN(prefix_alog)(c->align);
    /* The context goes down as it came, asking for the footprint: what the next layer learns (the
     * CPU, SM_F_FRESH) comes back in it. */
    c->size = SM_FN(footprint)(n, alog);
    c->flags &= ~(unsigned)SM_F_FRESH;
    char *base = (char *)SM_NEXT_FN(alloc_miss)(c);
    c->size = n;
    if (sm_unlikely(!base))
        return NULL;
    char *p = base + ((size_t)1 << alog);
    SM_FN(seal)(p, (uint64_t)n << 8 | alog, 0);
    return c->ptr = p;
}

/* c->ptr was not taken by free_hit (or free_hit was not tried). With SM_F_OWNER, c->owner_word is
 * what the next layer's hit read of its block under the same pointer: passed down with it. */
SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    char *p = (char *)c->ptr;
    uint64_t info, k;
    bool live = SM_FN(intact)(p, true, &info, &k);
    if (sm_unlikely(!live)) {
        unsigned s = SM_FN(free_slow)(p, &info);
        if (s != SM_FN(s_live) && s != SM_FN(s_foreign))
            return;
        if ((live = s == SM_FN(s_live)))
            k = SM_FN(key)(p, info);
    }
    if (sm_likely(live)) {
        size_t bytes;
        unsigned flags;
        char *base = SM_FN(below)(p, info, k, &bytes, &flags);
        uintptr_t owner_word = c->owner_word;
        *c = sm_mctx_block(base, bytes, flags | (c->flags & SM_F_OWNER));
        c->owner_word = owner_word;
    }
    SM_NEXT_FN(free_miss)(c); /* one call site: the stack below is inlined once */
}

/* The hit, then the miss; the hit only where the next layer has one (a constant test), else a free
 * would tag the block and restore it for nothing. */
SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    if (SM_HAS_CAP(SM_NEXT, SM_CAP_HIT) && c->align <= SM_MIN_ALIGN) {
        void *p = SM_FN(alloc_hit)(c->size);
        if (sm_likely(p != NULL)) {
            c->flags &= ~(unsigned)SM_F_FRESH;
            return c->ptr = p;
        }
    }
    return SM_FN(alloc_miss)(c);
}

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    uintptr_t w = SM_OWNER_UNKNOWN;
    if (SM_HAS_CAP(SM_NEXT, SM_CAP_HIT) && sm_likely(SM_FN(free_hit)(c->ptr, c->size, c->flags, &w)))
        return;
    /* an owner word from above is of the pointer, not of the block below: only ours goes down */
    c->flags = (c->flags & ~(unsigned)SM_F_OWNER) | (w != SM_OWNER_UNKNOWN ? SM_F_OWNER : 0u);
    c->owner_word = w;
    SM_FN(free_miss)(c);
}

/* getmeta of a candidate (SM_F_PROBE): a block of ours only where the next layer confirms a live
 * block and the header there verifies; nothing is read before that, nothing reported. */
SM_SLOWPATH bool SM_FN(probe_meta)(sm_mctx_t *c)
{
    char *p = (char *)c->ptr;
    size_t below16;
    uint64_t h[2], info;
    if (!SM_FN(prefix_find)(p, SM_FN(verifies), &below16))
        return false;
    SM_FN(prefix_words)(p, h);
    uint64_t d = SM_FN(tag_of)(p, h, &info);
    if (d != 0 && d != SM_TAILCK_REPORTED) /* freed or leaked: not the program's */
        return false;
    c->usable = SM_FN(info_size)(info);
    c->owner = SM_LAYER_NAME;
    return true;
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    char *p = (char *)c->ptr;
    uint64_t info, k;
    size_t n;
    if (sm_unlikely(c->flags & SM_F_PROBE))
        return SM_FN(probe_meta)(c);
    if (sm_likely(SM_FN(intact)(p, SM_OPT_CHECK_REALLOC, &info, &k)))
        n = SM_FN(info_size)(info);
    else if (SM_FN(held)(p, "realloc or malloc_usable_size", &info, &n) > SM_FN(s_reported))
        return false;
    c->usable = n;
    c->owner = SM_LAYER_NAME;
    return true;
}

/* In place only: the next layer is asked to resize its block (a shrink too, so a large block gives
 * pages back); a shrink it refuses stays where it is. */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t want)
{
    char *p = (char *)c->ptr;
    uint64_t info, k;
    size_t n;
    if (!SM_FN(intact)(p, SM_OPT_CHECK_REALLOC, &info, &k) && SM_FN(held)(p, "realloc", &info, &n) != SM_FN(s_live))
        return false; /* never grow a block that was overwritten: the socket moves it */
    if ((uint64_t)want > SM_TAILCK_MAX_SIZE)
        return false;
    unsigned alog = SM_FN(info_alog)(info);
    sm_mctx_t r = sm_mctx_block(p - ((size_t)1 << alog), 0, 0);
    size_t fp = SM_FN(footprint)(want, alog);
    if (!SM_NEXT_FN(resize)(&r, fp) && fp > SM_FN(footprint)(SM_FN(info_size)(info), alog))
        return false;
    /* A shrink the next layer kept whole (its block still fits a class): no, so the socket moves
     * the block by its own rule (core/release.h); this layer's usable size is the size asked, so
     * the socket cannot see it; a block the next layer cut (a mapping cut to its pages) is sealed
     * at its new size (core/release.h, sm_shrink_declined). */
    size_t old_fp = SM_FN(footprint)(SM_FN(info_size)(info), alog);
    sm_mctx_t m = sm_mctx_block(r.ptr, 0, 0);
    if (fp < old_fp && SM_NEXT_FN(getmeta)(&m) && sm_shrink_declined(m.usable, old_fp, fp))
        return false;
    SM_FN(seal)(p, (uint64_t)want << 8 | SM_FN(resized) | alog, 0);
    return true;
}

/* The socket's move of a large growth (capability MOVE): the next layer moves the block's pages,
 * then the block is sealed at its new address, since the check values depend on it. A block that
 * does not verify stays where it is (the socket copies it; its free reports it, as resize's). */
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t want)
{
    char *p = (char *)c->ptr;
    uint64_t info, k;
    size_t n;
    if ((uint64_t)want > SM_TAILCK_MAX_SIZE)
        return false;
    if (!SM_FN(intact)(p, SM_OPT_CHECK_REALLOC, &info, &k) && SM_FN(held)(p, "realloc", &info, &n) != SM_FN(s_live))
        return false;
    unsigned alog = SM_FN(info_alog)(info);
    /* An aligned block's header is found from the pointer's alignment, which pages moved elsewhere
     * need not keep (a 2 MiB-aligned block grown to 64 MiB was not found again): it is copied. */
    if (alog != 4)
        return false;
    sm_mctx_t r = sm_mctx_block(p - ((size_t)1 << alog), 0, 0);
    if (!SM_NEXT_FN(move)(&r, SM_FN(footprint)(want, alog)))
        return false;
    p = (char *)r.ptr + ((size_t)1 << alog);
    SM_FN(seal)(p, (uint64_t)want << 8 | SM_FN(resized) | alog, 0);
    c->ptr = p;
    return true;
}

SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }
SM_INLINE void SM_FN(release)(sm_release_t *r) { SM_NEXT_FN(release)(r); }
SM_INLINE void SM_FN(thread_exit)(void) { SM_NEXT_FN(thread_exit)(); }
SM_INLINE void SM_FN(fork_prepare)(void) { SM_NEXT_FN(fork_prepare)(); }
SM_INLINE void SM_FN(fork_parent)(void) { SM_NEXT_FN(fork_parent)(); }
SM_INLINE void SM_FN(fork_child)(void) { SM_NEXT_FN(fork_child)(); }

#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#define SM_LAYER_CAPS   (SM_CAPS(SM_NEXT) & (SM_CAP_HIT | SM_CAP_MOVE))
#undef SM_OPT_CHECK_REALLOC
/* Statistics: inexact (core/stats.h). This layer's in_use (the sizes asked, what getmeta answers)
 * differs from what it holds below (the footprint, at the next layer's usable size) by each live
 * block's overhead, which nothing but the block's own header records. A count would be an add on
 * both hit paths, with no lock here to put it under and no per-thread record to merge on read
 * (the layer has no state per thread at all): an atomic there, or a per-thread registry made for
 * the statistics alone. Until one of those is worth its cost, allocated is marked inexact. */
SM_STATS_INEXACT
#define SM_LAYER_STATS 1

#include "../../core/layer_end.h"
