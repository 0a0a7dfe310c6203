/* prof/slots.h: where sampled blocks live. Part of layers/addon/prof.h (included by it only).
 *
 * One reserved range of 2^SM_OPT_LG_RANGE bytes (PROT_NONE, no commit charge), made accessible
 * from its start as slots are carved (one RW mapping grows at the front, so live slots cost the
 * kernel no extra mapping however many there are). A sampled block is one slot: 2^k pages, aligned
 * to its own size, so an alignment up to the slot's size costs nothing and a freed slot fits the
 * next block of its class exactly. So a free knows a sampled block by its address alone: the hit
 * path's one subtraction and shift. Per slot, a side-table entry at the index of its first page
 * holds the block's stack record and size (the block itself has no header: its first byte is the
 * slot's, page-aligned). Freed slots go on a list per class (the entry's record pointer links them)
 * and their pages back to the kernel. All under the layer's lock; sampling is rare. *
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sync/mutex.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/addon/thread_cache.h> SM_LAYER=p SM_NEXT=t SM_SYNC=mutex SM_ERR=warn
 * @check-next: fake */
#ifndef SM_PROF_PARTS
#include "../prof.h"
#else

#define SM_PROF_CLASSES 40
/* A free slot's word: 0, or this when it kept its pages (a release purges it). */
#define SM_PROF_SLOT_DIRTY ((uint64_t)1 << 1)
#define SM_PROF_COMMIT_STEP ((uintptr_t)2 << 20) /* the RW front grows 2 MiB at a time */

struct SM_FN(rec);
struct SM_FN(slot) {
    struct SM_FN(rec) *rec; /* live: its stack; free: the next free slot of the class (+1 index) */
    uint64_t word;          /* size << 16 | epoch << 8 | class << 1 | live */
};

SM_INLINE struct SM_FN(slot) *SM_FN(slot_at)(uintptr_t p)
{
    return &SM_FN(obj).table[(p - SM_FN(base)) >> SM_FN(obj).lg_page];
}

/* The live slot that starts at p, or NULL (not a block start, or not live). */
SM_INLINE struct SM_FN(slot) *SM_FN(slot_live)(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (!SM_FN(obj).table || (a & (((uintptr_t)1 << SM_FN(obj).lg_page) - 1)))
        return NULL;
    struct SM_FN(slot) *s = SM_FN(slot_at)(a);
    return (s->word & 1) ? s : NULL;
}

SM_INLINE size_t SM_FN(slot_bytes)(unsigned cls) { return (size_t)1 << (cls + SM_FN(obj).lg_page); }

/* Under the lock: reserve the range and map the side table, once; false if the OS refuses. */
SM_INLINE bool SM_FN(slots_init)(void)
{
    if (SM_FN(obj).table)
        return true;
    if (SM_FN(obj).failed)
        return false;
    size_t page = sm_plat_page_size();
    unsigned lg = sm_log2_ceil(page);
    void *r = sm_plat_reserve((size_t)1 << SM_OPT_LG_RANGE);
    void *t = r ? sm_plat_map(((size_t)1 << (SM_OPT_LG_RANGE - lg)) * sizeof(struct SM_FN(slot))) : NULL;
    if (!t) {
        if (r)
            sm_plat_unmap(r, (size_t)1 << SM_OPT_LG_RANGE);
        SM_FN(obj).failed = true;
        return false;
    }
    SM_FN(obj).meta_bytes += ((size_t)1 << (SM_OPT_LG_RANGE - lg)) * sizeof(struct SM_FN(slot));
    SM_FN(obj).lg_page = lg;
    SM_FN(obj).table = (struct SM_FN(slot) *)t;
    __atomic_store_n(&SM_FN(base), (uintptr_t)r, __ATOMIC_RELEASE);
    return true;
}

/* Under the lock: a slot for size bytes aligned to align, or NULL (range used up: not sampled). */
SM_INLINE void *SM_FN(slot_take)(size_t size, size_t align, struct SM_FN(rec) *rec)
{
    if (!SM_FN(slots_init)())
        return NULL;
    unsigned lg = SM_FN(obj).lg_page;
    size_t pages = (size + ((size_t)1 << lg) - 1) >> lg, apages = align >> lg;
    if (pages < apages)
        pages = apages;
    unsigned cls = sm_log2_ceil(pages ? pages : 1);
    if (cls >= SM_PROF_CLASSES || cls + lg > SM_OPT_LG_RANGE)
        return NULL;
    size_t bytes = SM_FN(slot_bytes)(cls);
    uintptr_t p;
    uintptr_t head = SM_FN(obj).free_head[cls];
    if (head) {
        p = SM_FN(base) + ((head - 1) << lg);
        struct SM_FN(slot) *f = SM_FN(slot_at)(p);
        SM_FN(obj).free_head[cls] = (uintptr_t)f->rec;
        if (f->word & SM_PROF_SLOT_DIRTY)
            SM_FN(obj).slot_dirty -= bytes;
    } else {
        uintptr_t start = sm_align_up(SM_FN(obj).front, bytes), end = start + bytes;
        if (end > ((uintptr_t)1 << SM_OPT_LG_RANGE))
            return NULL;
        if (end > SM_FN(obj).committed) {
            uintptr_t to = sm_align_up(end, SM_PROF_COMMIT_STEP);
            if (to > ((uintptr_t)1 << SM_OPT_LG_RANGE))
                to = (uintptr_t)1 << SM_OPT_LG_RANGE;
            if (sm_plat_protect((void *)(SM_FN(base) + SM_FN(obj).committed), to - SM_FN(obj).committed, true) != 0)
                return NULL;
            SM_FN(obj).committed = to;
        }
        SM_FN(obj).front = end;
        p = SM_FN(base) + start;
    }
    struct SM_FN(slot) *s = SM_FN(slot_at)(p);
    s->rec = rec;
    s->word = (uint64_t)size << 16 | (uint64_t)(SM_FN(obj).epoch & 0xff) << 8 | cls << 1 | 1;
    SM_FN(obj).slot_usable += sm_align_up(size, (size_t)1 << lg);
    return (void *)p;
}

/* Under the lock: give back slot s at p. A freed slot keeps its pages for the next sample of its
 * class while the kept slots total at most SM_PROF_KEEP_BYTES; they go back when they stayed unused
 * for the decay time (the release clock: L_release) or on malloc_trim. Purging every freed slot cost
 * a TLB shootdown per sampled free in a threaded program, plus a fault on the next sample (shbench
 * 2.6x, larson 1.9x, mstress 1.3x the time without profiling; docs/operations.md). */
#define SM_PROF_KEEP_BYTES ((size_t)64 << 20)
#define SM_PROF_DECAY_MS   1000u
SM_INLINE void SM_FN(slot_give)(struct SM_FN(slot) *s, uintptr_t p)
{
    unsigned cls = (unsigned)(s->word >> 1) & 0x7f;
    size_t bytes = SM_FN(slot_bytes)(cls);
    SM_FN(obj).slot_usable -= sm_align_up((size_t)(s->word >> 16), (size_t)1 << SM_FN(obj).lg_page);
    SM_FN(obj).last_give_ms = sm_plat_now_ms();
    if (SM_FN(obj).slot_dirty + bytes > SM_PROF_KEEP_BYTES) {
        (void)sm_plat_purge((void *)p, bytes, false);
        s->word = 0;
    } else {
        s->word = SM_PROF_SLOT_DIRTY;
        SM_FN(obj).slot_dirty += bytes;
        sm_release_note();
    }
    s->rec = (struct SM_FN(rec) *)SM_FN(obj).free_head[cls];
    SM_FN(obj).free_head[cls] = ((p - SM_FN(base)) >> SM_FN(obj).lg_page) + 1;
}

/* Under the lock: every free slot that kept its pages gives them back; the bytes. */
SM_INLINE size_t SM_FN(slots_purge)(void)
{
    size_t released = 0;
    for (unsigned cls = 0; cls < SM_PROF_CLASSES; cls++) {
        size_t bytes = SM_FN(slot_bytes)(cls);
        for (uintptr_t i = SM_FN(obj).free_head[cls]; i; ) {
            uintptr_t p = SM_FN(base) + ((i - 1) << SM_FN(obj).lg_page);
            struct SM_FN(slot) *f = SM_FN(slot_at)(p);
            if (f->word & SM_PROF_SLOT_DIRTY) {
                (void)sm_plat_purge((void *)p, bytes, false);
                f->word = 0;
                released += bytes;
            }
            i = (uintptr_t)f->rec;
        }
    }
    SM_FN(obj).slot_dirty -= released;
    return released;
}

#endif /* SM_PROF_PARTS */
