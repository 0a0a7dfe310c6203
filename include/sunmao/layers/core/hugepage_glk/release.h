/* hugepage_glk/release.h: the release pass, L_release. A free hugepage is stamped by the first pass
 * that sees it (frees read no clock; they note the release clock) and purged whole one decay later.
 * A used hugepage with at most SPARSE_PAGES pages in use, and no allocation since a pass stamped
 * it, has its free runs of PURGE_MIN or more purged one decay later; SM_RELEASE_ALL purges every
 * free run of every hugepage at once. Runs are marked taken under the lock (so no span is carved
 * from them and a bad free of one is still reported), purged without it, and freed back marked
 * purged.
 * A part of hugepage_glk.h; defines L_release. Included alone, as tools/check-headers.sh does, it
 * instantiates the whole layer.
 * @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
 * @check-next: fake */
#ifndef SM_HUGEPAGE_GLK_PARTS
#include "../hugepage_glk.h"
#else

struct SM_FN(run) { struct SM_FN(hp) *hp; uint16_t at, n; };

/* Whether hp, idle since its stamp, is due at r's time; stamps it if no pass saw it yet. */
SM_INLINE bool SM_FN(due)(struct SM_FN(hp) *hp, sm_release_t *r, uint64_t decay)
{
    if (r->how == SM_RELEASE_ALL)
        return true;
    if (!hp->stamp)
        hp->stamp = r->now_ms ? r->now_ms : 1;
    if (hp->stamp + decay > r->now_ms) {
        sm_release_due(r, hp->stamp + decay);
        return false;
    }
    return true;
}

/* Marks the free runs of hp worth a purge taken and adds them to runs; false when runs is full. */
SM_INLINE bool SM_FN(take_runs)(struct SM_FN(hp) *hp, struct SM_FN(run) *runs, unsigned *nruns, unsigned max,
                                unsigned min_pages)
{
    bool room = true;
    for (unsigned at = SM_FN(first_free)(hp->taken, 0); at < SM_FN(pages);) {
        unsigned end = SM_FN(first_taken)(hp->taken, at, SM_FN(pages));
        if (end - at >= min_pages && SM_FN(first_free)(hp->purged, at) < end) { /* a page still backed */
            if (*nruns == max) {
                room = false;
                break;
            }
            runs[(*nruns)++] = (struct SM_FN(run)){ hp, (uint16_t)at, (uint16_t)(end - at) };
            SM_FN(set_range)(hp->taken, at, end, true);
        }
        at = SM_FN(first_free)(hp->taken, end);
    }
    SM_FN(refresh)(hp);
    return room;
}

SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
    enum { max_runs = 64, max_visits = 4096 };
    struct SM_FN(run) runs[max_runs];
    struct SM_FN(hp) *sparse[max_runs];
    unsigned nruns = 0, nsparse = 0, visits = 0;
    const bool all = r->how == SM_RELEASE_ALL;
    const uint64_t decay = SM_FN(decay_ms);
    const unsigned min_pages = all ? 1 : (unsigned)((SM_OPT_PURGE_MIN) >> SM_FN(page_shift));
    SM_SYNC_FN(lock)(&SM_FN(obj).lock);
    /* Free hugepages first: purged whole, they stay huge-page-able and cost no split. */
    for (struct SM_FN(hp) *hp = SM_FN(obj).dirty, *next; hp && nruns < max_runs && visits < max_visits; hp = next, visits++) {
        next = hp->next;
        if (SM_FN(due)(hp, r, decay))
            SM_FN(take_runs)(hp, runs, &nruns, max_runs, 1);
    }
    /* Then used hugepages: the sparse ones, or all of them under SM_RELEASE_ALL. They are gathered
     * before any is touched, since marking runs taken moves a hugepage to another list. */
    for (unsigned set = 0; set < SM_FN(sets); set++)
        for (unsigned b = 0; b < SM_FN(classes) * SM_FN(tiers) && nsparse < max_runs; b++)
            for (struct SM_FN(hp) *hp = SM_FN(obj).partial[set][b]; hp && nsparse < max_runs && visits < max_visits;
                 hp = hp->next, visits++)
                if ((all || hp->used <= (SM_OPT_SPARSE_PAGES)) && hp->used + hp->npurged < SM_FN(pages) &&
                    SM_FN(due)(hp, r, decay))
                    sparse[nsparse++] = hp;
    bool full = nsparse == max_runs || visits >= max_visits;
    for (unsigned i = 0; i < nsparse && !full; i++)
        full = !SM_FN(take_runs)(sparse[i], runs, &nruns, max_runs, min_pages);
    SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    if (full || nruns == max_runs)
        sm_release_due(r, r->now_ms + 1); /* more to look at: the next pass comes at once */
    bool purged[max_runs];
    for (unsigned i = 0; i < nruns; i++) {
        sm_mctx_t c = sm_mctx_block(runs[i].hp->base + ((size_t)runs[i].at << SM_FN(page_shift)),
                                    (size_t)runs[i].n << SM_FN(page_shift), SM_F_ZERO);
        purged[i] = SM_NEXT_FN(purge)(&c);
    }
    if (nruns) {
        SM_SYNC_FN(lock)(&SM_FN(obj).lock);
        for (unsigned i = 0; i < nruns; i++) {
            struct SM_FN(hp) *hp = runs[i].hp;
            unsigned at = runs[i].at, end = at + runs[i].n;
            SM_FN(set_range)(hp->taken, at, end, false);
            if (purged[i]) {
                unsigned fresh = runs[i].n - SM_FN(set_range)(hp->purged, at, end, true);
                hp->npurged = (uint16_t)(hp->npurged + fresh);
                r->released += (size_t)fresh << SM_FN(page_shift);
            }
            hp->stamp = 0; /* what is freed from now on waits a decay of its own */
            SM_FN(refresh)(hp);
        }
        SM_SYNC_FN(unlock)(&SM_FN(obj).lock);
    }
    SM_NEXT_FN(release)(r);
}

#endif
