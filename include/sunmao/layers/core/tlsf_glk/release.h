/* tlsf_glk/release.h: the release pass, L_release ("Giving memory back"). A free block large enough
 * to hold PURGE_MIN of whole pages is stamped by the first release pass that sees it (frees never
 * read a clock; the free notes the release clock instead) and purged by the first pass after the
 * decay time: taken off its list under the lock (BUSY: neither free nor live, so a bad free of it
 * is still reported), purged outside it, freed back and marked PURGED so later passes skip it until
 * it is allocated from or merged. The pages of its header, links and tail word stay. An empty span
 * that free kept for reuse goes back to the next layer the same way, one decay after it emptied.
 * A part of tlsf_glk.h; defines L_release. Included alone, as tools/check-headers.sh does, it
 * instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_TLSF_GLK_PARTS
#include "../tlsf_glk.h"
#else

/* One release pass (see "Giving memory back"): stamp what is new, return a kept empty span and take
 * the free blocks that are due, under the lock; purge the taken blocks without it; free them back. */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    enum { max_taken = 64, max_visits = 4096 };
    struct SM_FN(block) *taken[max_taken];
    /* Their sizes, read under the lock: the purge runs without it, while a neighbour's free may
     * flip a taken block's PREV_FREE bit (set_prev_free), the same header word. */
    size_t taken_size[max_taken];
    unsigned ntaken = 0, visits = 0;
    const bool all = r->how == SM_RELEASE_ALL;
    const uint64_t now = r->now_ms, decay = SM_FN(decay_ms);
    unsigned fl0, sl0;
    SM_FN(mapping)(SM_FN(purge_block), &fl0, &sl0);
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    /* Largest first: if the bounds stop the pass, the pages it leaves are the fewest. */
    for (unsigned fl = SM_TLSF_FL_COUNT; fl-- > fl0 && ntaken < max_taken && visits < max_visits;) {
        if (!(SM_FN(obj).fl_map & ((uint64_t)1 << fl)))
            continue;
        for (unsigned sl = 0; sl < SM_TLSF_SL_COUNT && ntaken < max_taken && visits < max_visits; sl++) {
            struct SM_FN(block) *b = SM_FN(obj).heads[fl][sl], *next;
            for (; b && ntaken < max_taken && visits < max_visits; b = next, visits++) {
                next = b->next_free;
                size_t size = SM_FN(bsize)(b);
                if (size < SM_FN(purge_block) || ((b->head & SM_TLSF_PURGED) && !all))
                    continue;
                if (!all && (!b->stamp || b->stamp + decay > now)) {
                    if (!b->stamp)
                        b->stamp = now ? now : 1;
                    sm_release_due(r, b->stamp + decay);
                    continue;
                }
                struct SM_FN(span) *span = SM_FN(span_of)(sm_pagemap_get(&SM_FN(obj).map, SM_TLSF_PAGE_SHIFT, b));
                if (b == SM_FN(first_block)(span) && SM_FN(bsize)(SM_FN(bnext)(b)) == 0) {
                    r->released += span->bytes;
                    SM_FN(return_span)(span, b); /* empty: the whole span goes back */
                    continue;
                }
                if (b->head & SM_TLSF_PURGED)
                    continue; /* a release of everything: already purged */
                SM_FN(list_remove)(b);
                b->head = size | SM_TLSF_BUSY;
                SM_FN(set_prev_free)(SM_FN(bnext)(b), false);
                taken_size[ntaken] = size;
                taken[ntaken++] = b;
            }
        }
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (ntaken == max_taken || visits == max_visits)
        sm_release_due(r, now + 1); /* more to look at: the next pass comes at once */
    bool purged[max_taken];
    for (unsigned i = 0; i < ntaken; i++) {
        char *b = (char *)taken[i], *end = b + taken_size[i];
        char *from = (char *)sm_align_up((uintptr_t)(b + sizeof(struct SM_FN(block))), SM_TLSF_PAGE);
        char *to = (char *)sm_align_down((uintptr_t)(end - SM_TLSF_HDR), SM_TLSF_PAGE);
        sm_mctx_t c = sm_mctx_block(from, (size_t)(to - from), SM_F_ZERO);
        purged[i] = SM_NEXT_FN(purge)(&c);
        r->released += purged[i] ? (size_t)(to - from) : 0;
    }
    if (ntaken) {
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        for (unsigned i = 0; i < ntaken; i++) {
            struct SM_FN(block) *b = taken[i];
            size_t size = SM_FN(bsize)(b);
            b->head = size | (b->head & SM_TLSF_PREV_FREE); /* a neighbour may have been freed since */
            struct SM_FN(block) *merged = SM_FN(release_block)(b);
            if (merged == b && SM_FN(bsize)(b) == size && purged[i])
                b->head |= SM_TLSF_PURGED;
            else if (!all)
                sm_release_due(r, now + decay); /* merged with dirty neighbours: stamped next pass */
        }
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    SM_NEXT_FN(release)(r);
}

#endif /* SM_TLSF_GLK_PARTS */
