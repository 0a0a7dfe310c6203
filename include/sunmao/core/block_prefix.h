/* A 16-byte header right before each block a layer hands out, and how to find it from the pointer
 * alone (no include guard: a template, included by a layer after SM_LAYER and SM_NEXT are set).
 * Framework core, for add-on layers that keep a record of each block in front of it (tail_chksum;
 * delayed_free keeps the same layout).
 *
 * Layout: the layer asks the next layer for 2^alog more bytes than it needs and starts its block
 * 2^alog bytes in; alog 4 (16 bytes) up to SM_MIN_ALIGN, log2(align) for a larger alignment, which
 * is asked of the next layer as it is, so the block keeps that alignment. Its header is the 16
 * bytes before the block, inside the next layer's block.
 *
 *   L_prefix_max_alog                      larger alignments are the layer's to refuse
 *   unsigned L_prefix_alog(size_t align)   the offset's log2 for an alignment (a power of two)
 *   bool L_prefix_in_page(const void *p)   the header lies in p's page, so reading it cannot fault
 *                                          when p itself is mapped: what makes the common paths
 *                                          free of any lookup. A wild pointer into unmapped
 *                                          memory faults there, as it does in the C library.
 *   unsigned L_prefix_find(p, verifies, &below16)  for a p whose header is not known to be
 *                                          readable (at the start of a page) or does not verify:
 *                                          asks the next layer's getmeta, 16 bytes below p, then
 *                                          2^alog below for each larger power of two that divides
 *                                          p, for a live block of at least 2^alog bytes (the header
 *                                          lies inside it) whose header `verifies(p, alog)`. The
 *                                          first such alog, or 0. *below16: the usable size of the
 *                                          next layer's live block 16 bytes below p, 0 if none.
 *                                          Reads nothing the next layer does not call its own,
 *                                          and asks with SM_F_PROBE, so a header layer below
 *                                          (tail_chksum under delayed_free) does not read its own
 *                                          header in place at a candidate: free() of a page from
 *                                          mmap crashed sunmao-secure there (bad_input free_mmap).
 *   void L_prefix_words(const char *p, uint64_t w[2])  the 16 bytes before p, for a p that may not
 *                                          be the layer's own: under AddressSanitizer those can be
 *                                          another allocator's redzone, legitimately read here, so
 *                                          this read is left unchecked (and is then not inlined).
 * Why 4 KiB: no platform sunmao runs on maps pages smaller, so any page is whole 4 KiB units.
 * @check: <sunmao/core/layer.h> SM_LAYER=t @check-next: fake */
#include "bits.h"
#include "layer.h"

#ifndef SM_PREFIX_WORDS_FN
#if defined(__SANITIZE_ADDRESS__)
#define SM_PREFIX_WORDS_FN static __attribute__((noinline, no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SM_PREFIX_WORDS_FN static __attribute__((noinline, no_sanitize_address))
#endif
#endif
#ifndef SM_PREFIX_WORDS_FN
#define SM_PREFIX_WORDS_FN SM_HOT
#endif
#endif

enum { SM_FN(prefix_max_alog) = 40 };

SM_PREFIX_WORDS_FN SM_UNUSED void SM_FN(prefix_words)(const char *p, uint64_t w[2])
{
    __builtin_memcpy(w, p - 16, 16);
}

SM_INLINE SM_UNUSED unsigned SM_FN(prefix_alog)(size_t align)
{
    return sm_log2_floor(align | SM_MIN_ALIGN); /* 16 and below: 4; a larger power of two: its log */
}

SM_INLINE SM_UNUSED bool SM_FN(prefix_in_page)(const void *p) { return (sm_addr(p) & 4095) >= 16; }

SM_SLOWPATH SM_UNUSED unsigned SM_FN(prefix_find)(char *p, bool (*verifies)(const char *p, unsigned alog),
                                                  size_t *below16)
{
    *below16 = 0;
    if (!sm_ptr_aligned(p, SM_MIN_ALIGN))
        return 0;
    uintptr_t a_top = sm_addr(p) & (0 - sm_addr(p)); /* the largest power of two dividing p */
    for (unsigned alog = 4; alog <= SM_FN(prefix_max_alog); alog++) {
        uintptr_t a = (uintptr_t)1 << alog;
        if (a > a_top || a >= sm_addr(p))
            break;
        sm_mctx_t m = sm_mctx_block(p - a, 0, SM_F_PROBE); /* below p's page: maybe unmapped */
        if (!SM_NEXT_FN(getmeta)(&m) || m.usable < a)
            continue;
        if (alog == 4)
            *below16 = m.usable;
        if (verifies(p, alog))
            return alog;
    }
    return 0;
}
