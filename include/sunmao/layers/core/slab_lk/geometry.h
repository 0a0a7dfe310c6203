/* slab_lk/geometry.h: what a slab of each class looks like, and how a pointer becomes an object.
 * A class's geometry is the same for all its slabs, computed on its first: the slab size
 * (SM_OPT_SLAB_SIZE, or the next power of two that holds at least 8 objects), the first object's
 * offset (after the descriptor and its bitmap, aligned to the largest power of two dividing the
 * class size, at most 4 KiB: every object is aligned that much, which is how an aligned request is
 * served, by the first class whose size is a multiple of the alignment; 0 for a class of 1 KiB or
 * more whose objects would fill the slab exactly, whose descriptors are kept outside: offslab,
 * slab_lk/map.h), the object count, and the
 * inverse of the size's odd part, which object_index_from turns, with a multiply, a rotate and one
 * compare, into an exact "is p an object start, and which" without a division or a descriptor load.
 * Colouring: the bitmap hands out the lowest free objects first, so the objects in use crowd at the
 * start of their slabs, whose starts are aligned alike; each slab of a class aligned to <= 64 B
 * starts its objects 0..SM_OPT_COLOURS-1 cache lines later, chosen by the slab's address, and the
 * class reserves room for the largest shift (448 B of 64 KiB at 8 colours).
 * A part of slab_lk.h (which includes it after its descriptor types); defines struct L_geo, the
 * table L_geometry, L_object_index_from, L_compute_geometry, L_slab_colour and L_aligned_class. Included
 * alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_SLAB_LK_PARTS
#include "../slab_lk.h"
#else

/* A class's geometry: what block_slot, getmeta and free need to check an object start without
 * loading the descriptor. 16 bytes, so the table of the small classes is a few lines, in an array of
 * its own: read on every free, never written near anything that is. Written (map lock held) before
 * the class's first slab is mapped, then read only: a block of the class reaches a reader only after
 * that. The class size is not here: the policy computes it off the free's hit path, and the check
 * needs only its trailing zeros. */
struct SM_FN(geo) {
    uint64_t inverse;   /* of the odd part of the class size, modulo 2^64 (see object_index) */
    uint16_t offset;    /* of the first object from the slab's start (<= 4096 + descriptor) */
    uint16_t nobjs;     /* objects per slab (<= 4096); 0 until the class's first slab */
    uint8_t twos;       /* trailing zero bits of the class size */
    uint8_t slab_shift; /* log2 of the class's slab size */
    uint8_t coloured;   /* the class's slabs are coloured */
    uint8_t offslab;    /* the descriptor is kept outside the slab (slab_lk/slabs.h), the first
                         * object at the slab's start: offset 0, no colour */
};

static struct SM_FN(geo) SM_FN(geometry)[SM_FN(class_count)] SM_CACHE_ALIGNED;

/* The index of the object starting at p in the slab whose first object is at `first` (its class's
 * geometry g): below g->nobjs if p is an object start, at least g->nobjs otherwise. One compare,
 * which the caller makes: an exact divisibility test by multiplication (Granlund and Montgomery
 * 1994). With size = odd << twos and inverse the odd part's inverse modulo 2^64, rotating
 * off * inverse right by twos gives off / size when size divides off; when it does not, either a low
 * bit of off below twos is set (the rotation moves it to the top: a huge result) or the odd part does
 * not divide (off >> twos) and the product, taken modulo 2^(64 - twos), is not below
 * 2^(64 - twos) / odd > nobjs. An off that wrapped (p below the first object) fails the same way. So
 * idx < nobjs holds exactly when off = idx * size for an idx < nobjs: no division, no second
 * multiply, no bounds test of its own. As p - first < 2^33 for a valid index, a p at 2^48 or above
 * never passes, whatever owner-map word its lower bits found. */
SM_HOT size_t SM_FN(object_index_from)(const struct SM_FN(geo) *g, uintptr_t first, const void *p)
{
    uint64_t off = (uint64_t)((uintptr_t)p - first);
    uint64_t q = off * g->inverse;
    unsigned twos = g->twos;
    return (size_t)((q >> twos) | (q << ((64 - twos) & 63)));
}

SM_SLOWPATH void SM_FN(compute_geometry)(unsigned cls)
{
    size_t size = SM_SIZECLASS_FN(class_to_size)(cls);
    size_t align = size & -size;
    if (align > SM_FN(max_object_align))
        align = SM_FN(max_object_align);
    bool coloured = (SM_OPT_COLOURS) > 1 && align <= SM_FN(colour_unit);
    size_t reserve = coloured ? ((SM_OPT_COLOURS) - 1) * (size_t)SM_FN(colour_unit) : 0; /* the largest shift */
    size_t slab = SM_OPT_SLAB_SIZE, offset, nobjs;
    bool offslab = false;
    for (;; slab <<= 1) {
        size_t most = slab / size < SM_FN(max_objects) ? slab / size : SM_FN(max_objects);
        offset = sm_align_up(sizeof(struct SM_FN(slab)) + (most + 63) / 64 * sizeof(uint64_t), align);
        nobjs = offset + reserve < slab ? (slab - offset - reserve) / size : 0;
        /* A class of 1 KiB or more whose objects fill the slab exactly (the powers of two) would
         * give an object to the descriptor, 1/16 of a 4 KiB class's memory: its descriptor goes
         * outside, and its slabs hold whole objects only. */
        if (size >= SM_FN(offslab_min) && most <= 64 && nobjs < most) {
            offslab = true;
            offset = 0;
            nobjs = most;
        }
        if (nobjs >= SM_FN(min_objects))
            break;
    }
    _Static_assert(sizeof(struct SM_FN(slab)) + SM_FN(max_objects) / 8 + SM_FN(max_object_align) <= 65535,
                   "slab_lk: the first object's offset must fit the geometry's 16 bits");
    struct SM_FN(geo) *g = &SM_FN(geometry)[cls];
    /* Newton's iteration for the inverse of an odd number modulo 2^64: x = odd is right in its 3
     * low bits (odd * odd = 1 mod 8) and each step doubles the correct bits: 3, 6, ..., 96. */
    uint64_t odd = (uint64_t)size >> __builtin_ctzll(size), inverse = odd;
    for (int i = 0; i < 5; i++)
        inverse *= 2 - odd * inverse;
    g->inverse = inverse;
    g->twos = (uint8_t)__builtin_ctzll(size);
    g->slab_shift = (uint8_t)__builtin_ctzll(slab);
    g->coloured = coloured && !offslab;
    g->offslab = offslab;
    g->offset = (uint16_t)offset;
    g->nobjs = (uint16_t)(nobjs < SM_FN(max_objects) ? nobjs : SM_FN(max_objects));
}

/* How far the objects of the new slab at s (class geometry g) start after the class's offset: its
 * colour, from the slab's address, in cache lines. */
SM_INLINE size_t SM_FN(slab_colour)(const struct SM_FN(geo) *g, const void *s)
{
    return g->coloured ? (((uintptr_t)s >> g->slab_shift) & ((SM_OPT_COLOURS) - 1)) * SM_FN(colour_unit) : 0;
}

/* An aligned request: the first class from `size` up whose objects are aligned enough (its size
 * is a multiple of align), or class_count when none is. */
SM_SLOWPATH unsigned SM_FN(aligned_class)(size_t size, size_t align)
{
    if (align > SM_FN(max_object_align) || size > (size_t)(SM_SIZE_MAX))
        return SM_FN(class_count);
    size_t need = sm_align_up(size ? size : 1, align);
    if (need > (size_t)(SM_SIZE_MAX))
        return SM_FN(class_count);
    unsigned last = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MAX));
    for (unsigned cls = SM_SIZECLASS_FN(size_to_class)(need); cls <= last; cls++)
        if ((SM_SIZECLASS_FN(class_to_size)(cls) & (align - 1)) == 0)
            return cls;
    return SM_FN(class_count);
}

#endif /* SM_SLAB_LK_PARTS */
