/* reclaim policy `lowwater` (the default): a per-thread cache gives back what its thread did not
 * use, judged by each list's low-water mark — TCMalloc's garbage collection, plus a test for lists
 * that went idle. Also the slot's contract, which every reclaim policy P keeps:
 *
 * A reclaim policy decides when a per-thread cache (layers/addon/thread_cache.h, slot SM_RECLAIM)
 * gives back objects it holds, and how many. The layer moves them to its next layer and keeps its
 * byte budget; a policy only answers, so it cannot break the budget invariant. It provides:
 *   enum sm_reclaim_P_low_water  1: every list keeps `low`, its lowest length since the last pass,
 *                 lowered by each pop (one compare on malloc's hit path) for the policy to read;
 *                 0: the lists keep none and the pop makes no compare.
 *   type sm_reclaim_P_mark_t     the policy's state per list, kept off the hit paths' lines; all
 *                 zero bytes is its start (a new cache is zeroed).
 *   bool sm_reclaim_P_gc_due(unsigned *events, unsigned period)  a slow-path event (a refill or an
 *                 overflow): count it in *events if the policy counts; true runs a collection now
 *                 (the layer then zeroes *events). period: the layer's SM_OPT_GC_EVENTS.
 *   bool sm_reclaim_P_gc_pressed(unsigned events, unsigned period)  a list cannot grow within the
 *                 budget: true runs a collection first, under pressure (every other list also gives
 *                 up half of its unused room).
 *   unsigned sm_reclaim_P_gc(sm_reclaim_P_mark_t *m, uint16_t *low, unsigned count, unsigned batch)
 *                 at a collection, for each list (count objects on it, batch those a refill moves):
 *                 how many objects go back from its head (its limit shrinks by as many); sets the
 *                 marks (*m, *low) for what stays.
 *   bool sm_reclaim_P_scan_due(unsigned *refills, unsigned period)  before a refill: count it in
 *                 *refills if the policy counts; true runs a scan first (what it gives back may
 *                 make room for the refill). period: the layer's SM_OPT_IDLE_SCAN_REFILLS.
 *   unsigned sm_reclaim_P_scan(sm_reclaim_P_mark_t *m, uint16_t *low, unsigned count, unsigned batch)
 *                 at a scan, for each list: as sm_reclaim_P_gc.
 *   void sm_reclaim_P_clear(sm_reclaim_P_mark_t *m, uint16_t *low)  the list was emptied outright
 *                 (malloc_trim): back to the start state.
 * Other policies: none.h (no collection: only the byte budget bounds the cache).
 *
 * lowwater's rules (figures and what else was tried: docs/layers.md, thread_cache):
 *   collection  every `period` slow-path events, or under budget pressure at most every period / 4:
 *               half of each list's low-water mark since the last collection (objects the thread did
 *               not need at all) goes back, except that a list idle for the whole period (its length
 *               is its low-water mark and what the last pass left) and longer than a batch goes back
 *               whole: a finished burst of one size. Short lists keep the halving, or a class used
 *               now and then would refill from its slab on each use.
 *   scan        every `period` refills, the idle test alone, on the lists longer than a batch: when
 *               the thread asks for more memory is when what it no longer uses can make room. A
 *               scan's own low-water marks are folded into the collection's, so the halving still
 *               sees a whole collection period.
 * No timers, no threads: an idle thread keeps its cache until it runs a slow path or exits.
 * @model: name=lowwater kind=policy family=reclaim */
#ifndef SUNMAO_POLICY_RECLAIM_LOWWATER_H
#define SUNMAO_POLICY_RECLAIM_LOWWATER_H

#include <stdbool.h>
#include <stdint.h>
#include "../../core/compiler.h"

enum { sm_reclaim_lowwater_low_water = 1 };

typedef struct {
    uint16_t low;   /* the list's low-water mark since the last collection, as of the last pass */
    uint16_t count; /* the list's length after the last pass: equal to it now means untouched */
} sm_reclaim_lowwater_mark_t;

SM_INLINE bool sm_reclaim_lowwater_gc_due(unsigned *events, unsigned period) { return ++*events >= period; }

/* At most one collection under pressure per period / 4 events: when the working set is larger than
 * the budget, lists stop growing rather than collect on every miss. */
SM_INLINE bool sm_reclaim_lowwater_gc_pressed(unsigned events, unsigned period)
{
    return events >= (period >= 4 ? period / 4 : 1);
}

SM_INLINE unsigned sm_reclaim_lowwater_gc(sm_reclaim_lowwater_mark_t *m, uint16_t *low, unsigned count,
                                          unsigned batch)
{
    unsigned lowest = *low < m->low ? *low : m->low; /* since the last collection */
    bool idle = count > batch && *low == count && count == m->count;
    unsigned drop = idle ? count : (lowest + 1u) / 2;
    *low = m->low = m->count = (uint16_t)(count - drop);
    return drop;
}

SM_INLINE bool sm_reclaim_lowwater_scan_due(unsigned *refills, unsigned period) { return ++*refills % period == 0; }

/* Lists of a batch or less are skipped with their marks left alone, which only makes their next
 * idle test cover a longer time. */
SM_INLINE unsigned sm_reclaim_lowwater_scan(sm_reclaim_lowwater_mark_t *m, uint16_t *low, unsigned count,
                                            unsigned batch)
{
    if (count <= batch)
        return 0;
    unsigned drop = *low == count && count == m->count ? count : 0;
    if (*low < m->low) /* the collection's low-water mark spans its whole period */
        m->low = *low;
    *low = m->count = (uint16_t)(count - drop);
    return drop;
}

SM_INLINE void sm_reclaim_lowwater_clear(sm_reclaim_lowwater_mark_t *m, uint16_t *low)
{
    *low = 0;
    m->low = m->count = 0;
}

#endif
