/* retain policy `none` (slot SM_RETAIN): keep no empty slab; each goes back to the next layer the
 * moment its last object is freed. The least memory held, and an alloc/free pair at a slab boundary
 * maps and returns a slab every time (no hysteresis): for layers whose next layer caches anyway, or
 * programs that must not hold free memory. What every retain policy provides: keep_last.h.
 * @model: name=none kind=policy family=retain */
#ifndef SUNMAO_POLICY_RETAIN_NONE_H
#define SUNMAO_POLICY_RETAIN_NONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../../core/compiler.h"

typedef struct { char unused_; } sm_retain_none_t;
typedef struct { char unused_; } sm_retain_none_class_t;

SM_INLINE bool sm_retain_none_keep(sm_retain_none_t *r, sm_retain_none_class_t *c, void *block, size_t max,
                                   bool *evict)
{
    (void)r, (void)c, (void)block, (void)max, (void)evict;
    return false;
}
SM_INLINE void *sm_retain_none_kept(const sm_retain_none_class_t *c) { (void)c; return NULL; }
SM_INLINE void sm_retain_none_unkeep(sm_retain_none_t *r, sm_retain_none_class_t *c) { (void)r, (void)c; }
SM_INLINE void *sm_retain_none_peek(const sm_retain_none_class_t *c) { (void)c; return NULL; }
SM_INLINE uint64_t sm_retain_none_evict_rank(const sm_retain_none_class_t *c) { (void)c; return UINT64_MAX; }
SM_INLINE unsigned sm_retain_none_count(const sm_retain_none_t *r) { (void)r; return 0; }

#endif
