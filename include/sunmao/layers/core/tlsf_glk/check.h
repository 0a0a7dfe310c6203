/* tlsf_glk/check.h: the debug checker, for tests and debugging. L_check walks every span and list
 * and checks the layer's invariants (headers, neighbours, self pointers, page map, lists against
 * bitmaps, free blocks walked against free blocks listed). A part of tlsf_glk.h; defines L_check.
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_TLSF_GLK_PARTS
#include "../tlsf_glk.h"
#else

/* Walk every span and list and check the invariants. Returns NULL when the heap is consistent,
 * else a description of the first problem (in a static buffer). Takes the lock; O(heap). */
static inline const char *SM_FN(check)(void)
{
    static char why[160];
    const char *bad = NULL;
    const void *where = NULL;
    size_t walked_free = 0, listed_free = 0, spans = 0;
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    for (struct SM_FN(span) *s = SM_FN(obj).spans; s && !bad; s = s->next, spans++) {
        char *sentinel = SM_FN(sentinel)(s);
        uintptr_t tag = sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, s);
        if (tag != ((uintptr_t)s | SM_TLSF_CHUNK_START) ||
            SM_FN(span_of)(sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, sentinel)) != s) {
            bad = "span is not registered in the page map", where = s;
            break;
        }
        size_t prev_free = 0;
        struct SM_FN(block) *b = SM_FN(first_block)(s);
        while ((char *)b < sentinel) {
            size_t size = SM_FN(bsize)(b), free = b->head & SM_TLSF_FREE;
            where = b;
            if (size < SM_TLSF_MIN_BLOCK || size > (size_t)(sentinel - (char *)b)) {
                bad = "block size out of range";
                break;
            }
            if (!!(b->head & SM_TLSF_PREV_FREE) != !!prev_free) {
                bad = "PREV_FREE bit does not match the previous block";
                break;
            }
            if (free && prev_free) {
                bad = "two adjacent free blocks (missed coalescing)";
                break;
            }
            if (free && ((struct SM_FN(block) **)SM_FN(bnext)(b))[-1] != b) {
                bad = "free block's tail does not point to it";
                break;
            }
            walked_free += free != 0;
            prev_free = free;
            b = SM_FN(bnext)(b);
        }
        if (!bad && ((char *)b != sentinel || SM_FN(bsize)(b) != 0 || (b->head & SM_TLSF_FREE) ||
                     !!(b->head & SM_TLSF_PREV_FREE) != !!prev_free))
            bad = "span does not end in a consistent sentinel", where = b;
    }
    if (!bad && spans != SM_FN(obj).span_count)
        bad = "span count is wrong", where = NULL;
    for (unsigned fl = 0; fl < SM_TLSF_FL_COUNT && !bad; fl++) {
        if (!!(SM_FN(obj).fl_map & ((uint64_t)1 << fl)) != !!SM_FN(obj).sl_map[fl]) {
            bad = "first-level bitmap disagrees with the second level", where = NULL;
            break;
        }
        for (unsigned sl = 0; sl < SM_TLSF_SL_COUNT && !bad; sl++) {
            struct SM_FN(block) *head = SM_FN(obj).heads[fl][sl], *prev = NULL;
            if (!!(SM_FN(obj).sl_map[fl] & ((uint64_t)1 << sl)) != !!head) {
                bad = "second-level bitmap disagrees with the list", where = head;
                break;
            }
            for (struct SM_FN(block) *b = head; b; prev = b, b = b->next_free, listed_free++) {
                unsigned bfl, bsl;
                SM_FN(mapping)(SM_FN(bsize)(b), &bfl, &bsl);
                where = b;
                if (!(b->head & SM_TLSF_FREE) || b->prev_free != prev || bfl != fl || bsl != sl ||
                    !sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, b)) {
                    bad = "listed block is not free, in the wrong class, or badly linked";
                    break;
                }
            }
        }
    }
    if (!bad && walked_free != listed_free)
        bad = "free blocks in spans and in lists differ in number", where = NULL;
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (!bad)
        return NULL;
    sm_msg_format(why, sizeof why, "%s (at %p)", bad, where);
    return why;
}

#endif /* SM_TLSF_GLK_PARTS */
