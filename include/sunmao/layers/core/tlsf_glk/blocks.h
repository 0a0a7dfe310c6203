/* tlsf_glk/blocks.h: blocks and the segregated free lists. A block is an 8-byte header word
 * (size | FREE | PREV_FREE | PURGED | BUSY) followed by its payload; block addresses are 8 mod 16 so
 * payloads are 16-aligned with 8 bytes of overhead. A free block keeps its list links after the
 * header and a pointer to itself in its last word, which is where the next block finds it
 * (PREV_FREE tells it the word is valid). Below 2^FL_SHIFT the classes are exact; above, each power
 * of two has SL_COUNT lists, found by two find-first-set operations (mapping, search_size,
 * find_free). A part of tlsf_glk.h; defines L_bsize, L_bnext, L_bprev, L_set_self_tail,
 * L_first_block, L_sentinel, L_set_prev_free, L_block_size, L_mapping, L_search_size,
 * L_list_insert, L_list_remove, L_find_free, L_release_block, L_trim and L_carve. All run with the
 * lock held. Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_TLSF_GLK_PARTS
#include "../tlsf_glk.h"
#else

SM_INLINE size_t SM_FN(bsize)(const struct SM_FN(block) *b) { return b->head & ~SM_TLSF_FLAGS; }
SM_INLINE struct SM_FN(block) *SM_FN(bnext)(struct SM_FN(block) *b)
{
    return (struct SM_FN(block) *)((char *)b + SM_FN(bsize)(b));
}
SM_INLINE struct SM_FN(block) *SM_FN(bprev)(struct SM_FN(block) *b) { return ((struct SM_FN(block) **)b)[-1]; }
SM_INLINE void SM_FN(set_self_tail)(struct SM_FN(block) *b)
{
    ((struct SM_FN(block) **)SM_FN(bnext)(b))[-1] = b;
}
SM_INLINE struct SM_FN(block) *SM_FN(first_block)(struct SM_FN(span) *s)
{
    return (struct SM_FN(block) *)((char *)s + SM_TLSF_FIRST_OFFSET);
}
SM_INLINE char *SM_FN(sentinel)(struct SM_FN(span) *s) { return (char *)s + s->bytes - SM_TLSF_HDR; }
/* The PREV_FREE bit lives in the header of the *next* block, which may be live and read by getmeta
 * without the lock; so that bit changes with an atomic store (a plain load and store under the lock,
 * on x86-64 the same instructions) and getmeta reads headers atomically: no data race in C11 terms. */
SM_INLINE void SM_FN(set_prev_free)(struct SM_FN(block) *b, bool prev_free)
{
    size_t h = b->head;
    __atomic_store_n(&b->head, prev_free ? h | SM_TLSF_PREV_FREE : h & ~SM_TLSF_PREV_FREE, __ATOMIC_RELAXED);
}

/* Block size for a payload of n bytes (n <= MAX_REQUEST). */
SM_INLINE size_t SM_FN(block_size)(size_t n)
{
    size_t s = sm_align_up(n + SM_TLSF_HDR, 16);
    return s < SM_TLSF_MIN_BLOCK ? SM_TLSF_MIN_BLOCK : s;
}

/* ---- segregated lists ---- */
SM_INLINE void SM_FN(mapping)(size_t size, unsigned *fl, unsigned *sl)
{
    if (size < ((size_t)1 << SM_TLSF_FL_SHIFT)) {
        *fl = 0;
        *sl = (unsigned)(size >> 4);
    } else {
        unsigned l = sm_log2_floor(size);
        *fl = l - SM_TLSF_FL_SHIFT + 1;
        *sl = (unsigned)(size >> (l - (SM_OPT_SL_BITS))) - SM_TLSF_SL_COUNT;
    }
}

/* Round a size up so that every block in its class is large enough ("good fit"): the search
 * then never walks a list. */
SM_INLINE size_t SM_FN(search_size)(size_t size)
{
    if (size >= ((size_t)1 << SM_TLSF_FL_SHIFT))
        size += ((size_t)1 << (sm_log2_floor(size) - (SM_OPT_SL_BITS))) - 1;
    return size;
}

SM_INLINE void SM_FN(list_insert)(struct SM_FN(block) *b)
{
    unsigned fl, sl;
    SM_FN(mapping)(SM_FN(bsize)(b), &fl, &sl);
    struct SM_FN(block) *head = SM_FN(obj).heads[fl][sl];
    b->next_free = head;
    b->prev_free = NULL;
    if (head)
        head->prev_free = b;
    SM_FN(obj).heads[fl][sl] = b;
    SM_FN(obj).sl_map[fl] |= (uint64_t)1 << sl;
    SM_FN(obj).fl_map |= (uint64_t)1 << fl;
}

SM_INLINE void SM_FN(list_remove)(struct SM_FN(block) *b)
{
    unsigned fl, sl;
    SM_FN(mapping)(SM_FN(bsize)(b), &fl, &sl);
    if (b->next_free)
        b->next_free->prev_free = b->prev_free;
    if (b->prev_free) {
        b->prev_free->next_free = b->next_free;
    } else {
        SM_FN(obj).heads[fl][sl] = b->next_free;
        if (!b->next_free) {
            SM_FN(obj).sl_map[fl] &= ~((uint64_t)1 << sl);
            if (!SM_FN(obj).sl_map[fl])
                SM_FN(obj).fl_map &= ~((uint64_t)1 << fl);
        }
    }
}

/* A free block of at least `size` bytes, still in its list, or NULL. */
SM_INLINE struct SM_FN(block) *SM_FN(find_free)(size_t size)
{
    unsigned fl, sl;
    SM_FN(mapping)(SM_FN(search_size)(size), &fl, &sl);
    if (sm_unlikely(fl >= SM_TLSF_FL_COUNT))
        return NULL;
    uint64_t sl_bits = SM_FN(obj).sl_map[fl] & (~(uint64_t)0 << sl);
    if (!sl_bits) {
        uint64_t fl_bits = SM_FN(obj).fl_map & (~(uint64_t)0 << fl << 1);
        if (!fl_bits)
            return NULL;
        fl = sm_ctz(fl_bits);
        sl_bits = SM_FN(obj).sl_map[fl];
    }
    return SM_FN(obj).heads[fl][sm_ctz(sl_bits)];
}

/* Free block b (its header says used, with its true size) and merge it with free neighbours.
 * Returns the merged block, which is in its list. The FREE bit is set in b's own header first,
 * so that a second free of b is still recognised after b was absorbed by its predecessor. */
static inline struct SM_FN(block) *SM_FN(release_block)(struct SM_FN(block) *b)
{
    b->head |= SM_TLSF_FREE;
    size_t size = SM_FN(bsize)(b);
    struct SM_FN(block) *next = SM_FN(bnext)(b);
    if (next->head & SM_TLSF_FREE) {
        SM_FN(list_remove)(next);
        size += SM_FN(bsize)(next);
    }
    if (b->head & SM_TLSF_PREV_FREE) {
        struct SM_FN(block) *prev = SM_FN(bprev)(b);
        SM_FN(list_remove)(prev);
        size += SM_FN(bsize)(prev);
        b = prev;
    }
    b->head = size | SM_TLSF_FREE; /* its predecessor is in use: free blocks are never adjacent */
    if (size >= SM_FN(purge_block))
        b->stamp = 0;
    SM_FN(set_self_tail)(b);
    SM_FN(set_prev_free)(SM_FN(bnext)(b), true);
    SM_FN(list_insert)(b);
    return b;
}

/* b is in use (in no list): give back its tail beyond `size` bytes if that tail can be a block.
 * Returns the free block the tail became part of (merged with a free successor), or NULL. */
static inline struct SM_FN(block) *SM_FN(trim)(struct SM_FN(block) *b, size_t size)
{
    size_t have = SM_FN(bsize)(b);
    if (have - size < SM_TLSF_MIN_BLOCK)
        return NULL;
    b->head = size | (b->head & SM_TLSF_PREV_FREE);
    struct SM_FN(block) *rest = SM_FN(bnext)(b);
    rest->head = have - size;
    return SM_FN(release_block)(rest);
}

/* Hand out free block b (in its list) with at least `size` bytes at an `align`-aligned payload. */
SM_INLINE void *SM_FN(carve)(struct SM_FN(block) *b, size_t size, size_t align)
{
    SM_FN(list_remove)(b);
    uintptr_t payload = sm_addr(b) + SM_TLSF_HDR;
    if (sm_unlikely(!sm_ptr_aligned((void *)payload, align))) {
        /* The gap in front becomes a free block of its own, so it must be able to hold one. */
        size_t gap = sm_align_up(payload, align) - payload;
        if (gap < SM_TLSF_MIN_BLOCK)
            gap += align;
        size_t total = SM_FN(bsize)(b);
        b->head = gap | SM_TLSF_FREE;
        SM_FN(set_self_tail)(b);
        SM_FN(list_insert)(b);
        b = (struct SM_FN(block) *)((char *)b + gap);
        b->head = (total - gap) | SM_TLSF_PREV_FREE;
    } else {
        b->head &= ~(SM_TLSF_FREE | SM_TLSF_PURGED);
    }
    SM_FN(set_prev_free)(SM_FN(bnext)(b), false);
    (void)SM_FN(trim)(b, size); /* the tail of a free block: already on the clock, or never touched */
    return (char *)b + SM_TLSF_HDR;
}

#endif /* SM_TLSF_GLK_PARTS */
