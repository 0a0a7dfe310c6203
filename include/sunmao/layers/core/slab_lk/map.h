/* slab_lk/map.h: the owner map, which slab (if any) owns an address. A two-level page map
 * (core/pagemap.h) whose granule is SM_OPT_SLAB_SIZE maps every granule of a live slab to one word:
 * the address of the slab's first object shifted up by 16 bits, and 16 x the slab's class in the
 * low 16 (the class's slot: the byte offset of its 16-byte entry in the geometry table and in a
 * thread cache's lists). So a free, getmeta or block_slot needs no descriptor: from the word comes
 * the class, from the class the geometry (slab_lk/geometry.h), from both the object index and the
 * descriptor's address (the first object less the class's offset and the slab's colour, rounded
 * down to the slab size; for a class whose descriptors are kept outside, the descriptor map's word
 * for that address). Lookups go through the map's window, one load where the address is inside
 * it; updates take the map lock; leaves come from the metadata route (SM_PAGEMAP_NODE_ALLOC) and are
 * never returned. A part of slab_lk.h; defines L_map_window, L_lookup, the word's decoders
 * L_word_slot, L_word_cls, L_word_first, L_word_base, L_word_slab, L_object_index, and L_make_word, L_map_slab.
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_SLAB_LK_PARTS
#include "../slab_lk.h"
#else

_Static_assert(SM_SIZECLASS_FN(count) < 4096, "slab_lk: 16 x the class must fit the page-map word's 16 bits");
_Static_assert(sizeof(uintptr_t) == 8 && SM_PAGEMAP_ADDR_BITS == 48, "slab_lk: the page-map word needs 64-bit words");

/* The map's first leaf, for lookup (core/pagemap.h). Not in obj: its initial value is not
 * zero, and obj (36 KiB with the map's root) would leave .bss for .data, whose pages the kernel
 * maps in 64 KiB at a time once one is read: 36 KiB of RSS in every process instead of the
 * few pages in use. */
static sm_pagemap2_window_t SM_FN(map_window) = SM_PAGEMAP2_WINDOW_INIT;

/* The word of p's granule: 0 if this layer does not own it, else first object | 16 x class. One
 * load through the map's window where p is inside it (core/pagemap.h). An address at 2^48 or above
 * may find the word of its low 48 bits: every caller checks p against the word (object_index),
 * which no such address passes. */
SM_HOT uintptr_t SM_FN(lookup)(const void *p)
{
    return sm_pagemap2_get_windowed(SM_FN(obj).map, &SM_FN(map_window), SM_FN(map_shift), p);
}
/* The home shard's bit (shard_bit, slab_lk/shards.h) sits in the word's low bits beside the slot
 * when the classes leave room (64 or fewer: the slot takes bits 4-9) and there are 2-8 shards: a
 * thread cache's free tests it against owner_foreign with no descriptor load (slab_lk/batch.h). */
enum { SM_FN(word_shards) = SM_OPT_SHARDS > 1 && SM_OPT_SHARDS <= 8 && SM_SIZECLASS_FN(count) <= 64 };
SM_HOT unsigned SM_FN(word_slot)(uintptr_t w) { return SM_FN(word_shards) ? (unsigned)w & 0x3f0u : (unsigned)(uint16_t)w; }
SM_INLINE unsigned SM_FN(word_cls)(uintptr_t w) { return SM_FN(word_slot)(w) >> 4; }
SM_INLINE uintptr_t SM_FN(word_first)(uintptr_t w) { return w >> 16; }
/* The slab's start: the first object's address less the class's offset and the slab's colour,
 * which is less than a slab, whose start is aligned to its size. */
SM_HOT uintptr_t SM_FN(word_base)(uintptr_t w, const struct SM_FN(geo) *g)
{
    return (SM_FN(word_first)(w) - g->offset) & ~(((uintptr_t)1 << g->slab_shift) - 1);
}
/* The descriptor: at the slab's start, or for a class that keeps it outside (g->offslab) in the
 * descriptor map, which a live slab's start maps to it (slab_lk/slabs.h). */
SM_HOT struct SM_FN(slab) *SM_FN(word_slab)(uintptr_t w, const struct SM_FN(geo) *g)
{
    uintptr_t base = SM_FN(word_base)(w, g);
    if (sm_unlikely(g->offslab))
        return (struct SM_FN(slab) *)sm_pagemap_get(&SM_FN(obj).desc_map, SM_FN(map_shift), (const void *)base);
    return (struct SM_FN(slab) *)base;
}
/* The index of the object starting at p in the slab of word w: below g->nobjs exactly when p is an
 * object start (slab_lk/geometry.h). */
SM_HOT size_t SM_FN(object_index)(const struct SM_FN(geo) *g, uintptr_t w, const void *p)
{
    return SM_FN(object_index_from)(g, SM_FN(word_first)(w), p);
}
SM_INLINE uintptr_t SM_FN(shard_bit)(unsigned shard);
SM_INLINE uintptr_t SM_FN(make_word)(const struct SM_FN(slab) *s, unsigned cls)
{
    uintptr_t w = (uintptr_t)s->objects << 16 | cls << 4;
    if (SM_FN(word_shards) && SM_SIZECLASS_FN(class_to_size)(cls) <= (size_t)(SM_OPT_SHARD_MAX))
        w |= SM_FN(shard_bit)((unsigned)(s->home - SM_FN(obj).cls) / SM_FN(class_count));
    return w;
}

/* Leaves: 8 MiB, zero-filled, from the metadata route (by default the OS layer, so only the pages
 * in use become resident), kept forever; counted in obj.map_nodes. */
SM_PAGEMAP_NODE_ALLOC(4096, SM_FN(obj).map_nodes)

/* Descriptors kept outside their slabs (geometry's offslab): records of desc_bytes carved from
 * metadata blocks of 4 KiB, on a free list while unused, never returned. Map lock held. */
enum { SM_FN(desc_bytes) = (sizeof(struct SM_FN(slab)) + sizeof(uint64_t) + 63) / 64 * 64 };
_Static_assert(SM_FN(desc_bytes) <= 4096, "slab_lk: a descriptor record must fit a metadata block");
SM_SLOWPATH struct SM_FN(slab) *SM_FN(desc_take)(void)
{
    if (!SM_FN(obj).desc_free) {
        sm_mctx_t r = sm_mctx_alloc(4096, 4096, 0);
        char *block = (char *)SM_FN(meta_alloc)(&r);
        if (!block)
            return NULL;
        SM_FN(obj).desc_pages++;
        for (size_t off = 4096 / SM_FN(desc_bytes) * SM_FN(desc_bytes); off >= SM_FN(desc_bytes);) {
            off -= SM_FN(desc_bytes);
            struct SM_FN(slab) *d = (struct SM_FN(slab) *)(block + off);
            d->next = SM_FN(obj).desc_free;
            SM_FN(obj).desc_free = d;
        }
    }
    struct SM_FN(slab) *d = SM_FN(obj).desc_free;
    SM_FN(obj).desc_free = d->next;
    return d;
}
SM_INLINE void SM_FN(desc_put)(struct SM_FN(slab) *d)
{
    d->next = SM_FN(obj).desc_free;
    SM_FN(obj).desc_free = d;
}

/* Maps every granule of the slab at base to `word` (first object << 16 | 16 x class), or unmaps it
 * with 0; desc: the slab's descriptor when it is kept outside the slab (else NULL), published in
 * the descriptor map before the word, withdrawn after it (and put back on the free list). False if
 * a leaf could not be had. */
SM_INLINE bool SM_FN(map_slab)(uintptr_t word, void *base, size_t bytes, struct SM_FN(slab) *desc)
{
    SM_SYNC_FN(lock)(&SM_FN(obj).map_lock);
    bool ok = true;
    if (word) {
        ok = (!desc || sm_pagemap_set(&SM_FN(obj).desc_map, SM_FN(map_shift), base, 1, (uintptr_t)desc,
                                      SM_FN(map_node_alloc))) &&
             sm_pagemap2_set(SM_FN(obj).map, SM_FN(map_shift), base, bytes, word, SM_FN(map_node_alloc));
        if (ok)
            sm_pagemap2_window_note(&SM_FN(map_window), SM_FN(obj).map, SM_FN(map_shift), base);
    }
    if (!word || !ok) { /* the slab goes back, or undo the granules already set */
        sm_pagemap2_set(SM_FN(obj).map, SM_FN(map_shift), base, bytes, 0, SM_FN(map_node_alloc));
        if (desc) {
            sm_pagemap_set(&SM_FN(obj).desc_map, SM_FN(map_shift), base, 1, 0, SM_FN(map_node_alloc));
            SM_FN(desc_put)(desc);
        }
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).map_lock);
    return ok;
}

#endif /* SM_SLAB_LK_PARTS */
