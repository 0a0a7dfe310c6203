/* buddy_glk/release.h: the release pass, L_release. A free block of PURGE_MIN or more is stamped
 * by the first release pass that sees it (frees read no clock; they note the release clock) and,
 * one decay later, taken off its list under the lock (BUSY: neither free nor allocated, so a bad
 * free of it is still reported and no neighbour merges with it), purged outside the lock, and freed
 * back (merging with neighbours freed meanwhile) marked purged, so later passes skip it until it is
 * split, merged or allocated. Links live in the descriptor, so a purged block's pages are all
 * dropped and none is touched again until it is allocated. A free whole chunk (the spare) goes back
 * one decay after it became free.
 * A part of buddy_glk.h; defines L_release. Included alone, as tools/check-headers.sh does, it
 * instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_BUDDY_GLK_PARTS
#include "../buddy_glk.h"
#else

/* One release pass (see "Giving memory back"): stamp what is new, hand back a spare chunk and take
 * the free blocks that are due, under the lock; purge the taken blocks without it; free them back. */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    enum { max_taken = 64, max_visits = 4096 };
    struct SM_FN(link) *taken[max_taken];
    unsigned taken_order[max_taken], ntaken = 0, visits = 0;
    const bool all = r->how == SM_RELEASE_ALL;
    const uint64_t now = r->now_ms, decay = SM_FN(decay_ms);
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    /* Largest first: if the bounds stop the pass, the pages it leaves are the fewest. */
    for (unsigned k = SM_FN(max_order) + 1; k-- > SM_FN(purge_order) && ntaken < max_taken && visits < max_visits;) {
        struct SM_FN(link) *b = SM_FN(obj).free[k - SM_FN(min_order)], *next;
        for (; b && ntaken < max_taken && visits < max_visits; b = next, visits++) {
            next = b->next;
            /* A whole free chunk is a spare (others went back when freed) and goes back; with
             * SM_OPT_STABLE chunks never go back, and a free one is purged like any block. */
            const bool whole = !(SM_OPT_STABLE) && k == SM_FN(max_order);
            if (whole && b->stamp == SM_BUDDY_PURGED)
                b->stamp = 0; /* clean or not, a spare goes back one decay after a pass saw it */
            if (b->stamp == SM_BUDDY_PURGED)
                continue;
            if (!all && (!b->stamp || b->stamp + decay > now)) {
                if (!b->stamp)
                    b->stamp = now ? now : 1;
                sm_release_due(r, b->stamp + decay);
                continue;
            }
            struct SM_FN(chunk) *ch = SM_FN(chunk_of)(b->block);
            size_t off = (size_t)(b->block - ch->base);
            SM_FN(unlink)(k, ch, off);
            if (whole) {
                ch->state[0] = 0;
                SM_FN(release_chunk)(ch);
                r->released += SM_OPT_CHUNK_SIZE;
                continue;
            }
            ch->state[off >> SM_FN(min_order)] = (uint8_t)(SM_BUDDY_BUSY | k);
            taken_order[ntaken] = k;
            taken[ntaken++] = b;
        }
    }
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (ntaken == max_taken || visits == max_visits)
        sm_release_due(r, now + 1); /* more to look at: the next pass comes at once */
    bool purged[max_taken];
    for (unsigned i = 0; i < ntaken; i++) {
        /* Off its list and BUSY: no other thread touches this block or its link until it is back. */
        sm_mctx_t c = sm_mctx_block(taken[i]->block, (size_t)1 << taken_order[i], SM_F_ZERO);
        purged[i] = SM_NEXT_FN(purge)(&c);
        r->released += purged[i] ? c.size : 0;
    }
    if (ntaken) {
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        for (unsigned i = 0; i < ntaken; i++) {
            struct SM_FN(chunk) *ch = SM_FN(chunk_of)(taken[i]->block);
            size_t off = (size_t)(taken[i]->block - ch->base);
            ch->state[off >> SM_FN(min_order)] = 0;
            unsigned k = SM_FN(insert_free)(ch, off, taken_order[i], purged[i] ? SM_BUDDY_PURGED : 0);
            size_t merged = off & ~(((size_t)1 << k) - 1); /* blocks are aligned to their size */
            if (!all && k && ch->links[merged >> SM_FN(min_order)].stamp != SM_BUDDY_PURGED)
                sm_release_due(r, now + decay); /* merged with dirty neighbours: stamped next pass */
        }
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    SM_NEXT_FN(release)(r);
}

#endif
