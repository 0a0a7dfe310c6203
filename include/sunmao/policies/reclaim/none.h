/* reclaim policy `none`: a per-thread cache gives back nothing on its own. Its byte budget alone
 * bounds it: a list that cannot grow within the budget stops growing, and a free into a full list
 * sends a batch to the next layer; what the cache holds goes back when its thread exits or calls
 * malloc_trim. The lists keep no low-water mark, so malloc's hit path makes one compare less.
 * For a thread whose working set stays put (a worker, a benchmark) or an embedded composition that
 * wants no work it did not ask for. Use it with
 *     #include <sunmao/policies/reclaim/none.h>
 *     #define SM_RECLAIM none            (before including layers/addon/thread_cache.h)
 * The slot's contract (what every reclaim policy provides): lowwater.h.
 * @model: name=none kind=policy family=reclaim */
#ifndef SUNMAO_POLICY_RECLAIM_NONE_H
#define SUNMAO_POLICY_RECLAIM_NONE_H

#include <stdbool.h>
#include <stdint.h>
#include "../../core/compiler.h"

enum { sm_reclaim_none_low_water = 0 };

typedef struct { char unused_; } sm_reclaim_none_mark_t;

SM_INLINE bool sm_reclaim_none_gc_due(unsigned *events, unsigned period)
{
    (void)events, (void)period;
    return false;
}

SM_INLINE bool sm_reclaim_none_gc_pressed(unsigned events, unsigned period)
{
    (void)events, (void)period;
    return false;
}

SM_INLINE unsigned sm_reclaim_none_gc(sm_reclaim_none_mark_t *m, uint16_t *low, unsigned count, unsigned batch)
{
    (void)m, (void)low, (void)count, (void)batch;
    return 0;
}

SM_INLINE bool sm_reclaim_none_scan_due(unsigned *refills, unsigned period)
{
    (void)refills, (void)period;
    return false;
}

SM_INLINE unsigned sm_reclaim_none_scan(sm_reclaim_none_mark_t *m, uint16_t *low, unsigned count, unsigned batch)
{
    (void)m, (void)low, (void)count, (void)batch;
    return 0;
}

SM_INLINE void sm_reclaim_none_clear(sm_reclaim_none_mark_t *m, uint16_t *low) { (void)m, (void)low; }

#endif
