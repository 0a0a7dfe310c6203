/* retain policy `keep_last` (slot SM_RETAIN, the default of slab_lk): which emptied slabs a layer
 * keeps instead of giving them back to its next layer. Each class keeps the last slab that became
 * empty while it kept none (fullness hysteresis, as jemalloc 2006's runs: an alloc/free pair at a
 * slab boundary does not go to the next layer every time); all classes together keep at most `max`,
 * and the one more kept evicts the one kept longest (classes a program moved away from do not each
 * pin a slab). Measurements: docs/layers.md, slab_lk.
 *
 * Every retain policy P provides, for a layer whose empty blocks (slabs) belong to classes:
 *   types sm_retain_P_t (the layer's state) and sm_retain_P_class_t (a class's), both valid when
 *         zero-filled: static storage needs no initialiser (it stays in .bss)
 *   bool  sm_retain_P_keep(sm_retain_P_t *r, sm_retain_P_class_t *c, void *block, size_t max,
 *                          bool *evict)
 *         block of class c has just become empty: true if the policy keeps it (the layer leaves it
 *         where it is, ready for reuse), false if the layer is to give it back now. When it keeps
 *         it and more than max blocks are kept now, *evict is set: the layer then (holding no lock)
 *         gives back the kept block of the class with the smallest evict_rank, if that class
 *         still keeps it and count is still above max, after unkeep.
 *   void *sm_retain_P_kept(const sm_retain_P_class_t *c)     the block c keeps, or NULL
 *   void  sm_retain_P_unkeep(sm_retain_P_t *r, sm_retain_P_class_t *c)   c's kept block is kept
 *         no more: it is being allocated from, taken by another partition, or given back
 *   void *sm_retain_P_peek(const sm_retain_P_class_t *c)     kept, read without c's lock: a hint
 *   uint64_t sm_retain_P_evict_rank(const sm_retain_P_class_t *c)   without c's lock: the lowest
 *         goes first; UINT64_MAX when c keeps nothing
 *   unsigned sm_retain_P_count(const sm_retain_P_t *r)       blocks kept, read without any lock
 * keep, kept and unkeep are called with the class's lock held. A class keeps at most one block, so
 * the layer's allocation path recognises it with one compare. The other policy: none.h.
 *
 * keep_last's counters are atomics touched only when a block becomes empty or stops being kept
 * (once per slab's worth of objects at most), never on an object's alloc or free.
 * @model: name=keep_last kind=policy family=retain */
#ifndef SUNMAO_POLICY_RETAIN_KEEP_LAST_H
#define SUNMAO_POLICY_RETAIN_KEEP_LAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../../core/compiler.h"

typedef struct {
    unsigned count; /* classes keeping a block (atomic) */
    uint64_t clock; /* stamps for the kept blocks' age (atomic) */
} sm_retain_keep_last_t;

typedef struct {
    void *kept;     /* class lock to write, read without it by peek */
    uint64_t stamp; /* when `kept` was kept (the layer's clock); same access as `kept` */
} sm_retain_keep_last_class_t;

SM_SLOWPATH SM_UNUSED bool sm_retain_keep_last_keep_slow(sm_retain_keep_last_t *r, sm_retain_keep_last_class_t *c,
                                                         void *block, size_t max)
{
    __atomic_store_n(&c->stamp, __atomic_fetch_add(&r->clock, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&c->kept, block, __ATOMIC_RELAXED);
    return __atomic_add_fetch(&r->count, 1, __ATOMIC_RELAXED) > max;
}

SM_INLINE bool sm_retain_keep_last_keep(sm_retain_keep_last_t *r, sm_retain_keep_last_class_t *c, void *block,
                                        size_t max, bool *evict)
{
    if (c->kept)
        return false;
    if (sm_retain_keep_last_keep_slow(r, c, block, max))
        *evict = true;
    return true;
}

SM_INLINE void *sm_retain_keep_last_kept(const sm_retain_keep_last_class_t *c) { return c->kept; }

SM_SLOWPATH SM_UNUSED void sm_retain_keep_last_unkeep(sm_retain_keep_last_t *r, sm_retain_keep_last_class_t *c)
{
    __atomic_store_n(&c->kept, NULL, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&r->count, 1, __ATOMIC_RELAXED);
}

SM_INLINE void *sm_retain_keep_last_peek(const sm_retain_keep_last_class_t *c)
{
    return __atomic_load_n(&c->kept, __ATOMIC_RELAXED);
}

SM_INLINE uint64_t sm_retain_keep_last_evict_rank(const sm_retain_keep_last_class_t *c)
{
    uint64_t stamp = __atomic_load_n(&c->stamp, __ATOMIC_RELAXED);
    return __atomic_load_n(&c->kept, __ATOMIC_RELAXED) ? stamp : UINT64_MAX;
}

SM_INLINE unsigned sm_retain_keep_last_count(const sm_retain_keep_last_t *r)
{
    return __atomic_load_n(&r->count, __ATOMIC_RELAXED);
}

#endif
