/* The heap registry (part of sockets/heap/heap.h): which heap owns each page, and the list of heaps.
 * A page map with one word per 4 KiB page: the owning sm_heap_t, or 0. Lookups take no lock
 * (three dependent loads, core/pagemap.h); updates hold sm_heaps_map_lock. The map's nodes come
 * straight from the OS and are never given back (8 bytes per page of address space ever used by
 * a heap). sm_heaps_used stays 0 until the first heap exists, so a program without heaps pays one
 * load of it on the paths that ask (a free that missed the top layer's hit path).
 * @check: <sunmao/policies/err/warn.h> SM_HEAP_RAISE=sm_err_warn_raise */
#ifndef SM_HEAP_PARTS
#include "heap.h"
#else
#include "../../core/pagemap.h"

#define SM_HEAPS_PAGE_SHIFT 12u

static SM_UNUSED sm_pagemap_t sm_heaps_map;
static SM_UNUSED sm_plat_lock_t sm_heaps_map_lock = SM_PLAT_LOCK_INIT;
static SM_UNUSED sm_plat_lock_t sm_heaps_list_lock = SM_PLAT_LOCK_INIT;
static SM_UNUSED sm_heap_t *sm_heaps_all;
/* Objects of destroyed heaps (not in caller ranges), kept for the next create: a handle used
 * after its heap's destroy then reads a cleared magic and is reported, instead of faulting on
 * unmapped memory. Linked through `next`, under sm_heaps_list_lock. */
static SM_UNUSED sm_heap_t *sm_heaps_spare;
static SM_UNUSED int sm_heaps_used;

static SM_UNUSED void *sm_heaps_map_node(size_t bytes) { return sm_plat_map(bytes); }

/* Maps [p, p + bytes) to h (NULL: forgets it). False only when a node could not be mapped. */
static SM_UNUSED bool sm_heaps_register(void *p, size_t bytes, sm_heap_t *h)
{
    sm_plat_lock(&sm_heaps_map_lock);
    bool ok = sm_pagemap_set(&sm_heaps_map, SM_HEAPS_PAGE_SHIFT, p, bytes, (uintptr_t)h, sm_heaps_map_node);
    sm_plat_unlock(&sm_heaps_map_lock);
    return ok;
}

/* The heap whose span holds p, or NULL. */
static SM_UNUSED inline sm_heap_t *sm_heaps_owner(const void *p)
{
    if (sm_likely(!__atomic_load_n(&sm_heaps_used, __ATOMIC_RELAXED)))
        return NULL;
    return (sm_heap_t *)sm_pagemap_get(&sm_heaps_map, SM_HEAPS_PAGE_SHIFT, p);
}

static SM_UNUSED void sm_heaps_link(sm_heap_t *h)
{
    sm_plat_lock(&sm_heaps_list_lock);
    h->prev = NULL;
    h->next = sm_heaps_all;
    if (sm_heaps_all)
        sm_heaps_all->prev = h;
    sm_heaps_all = h;
    __atomic_store_n(&sm_heaps_used, 1, __ATOMIC_RELEASE);
    sm_plat_unlock(&sm_heaps_list_lock);
}

/* Under sm_heaps_list_lock. */
static SM_UNUSED void sm_heaps_unlink(sm_heap_t *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        sm_heaps_all = h->next;
    if (h->next)
        h->next->prev = h->prev;
}

/* fork: every heap's lock held across it, in the lock order; the child re-initialises them (the
 * parent's other threads do not exist there). */
static SM_UNUSED void sm_heaps_fork_prepare(void)
{
    sm_plat_lock(&sm_heaps_list_lock);
    for (sm_heap_t *h = sm_heaps_all; h; h = h->next)
        sm_sync_spinlock_fork_lock(&h->lock);
    sm_plat_lock(&sm_heaps_map_lock);
}
static SM_UNUSED void sm_heaps_fork_parent(void)
{
    sm_plat_unlock(&sm_heaps_map_lock);
    for (sm_heap_t *h = sm_heaps_all; h; h = h->next)
        sm_sync_spinlock_fork_unlock(&h->lock);
    sm_plat_unlock(&sm_heaps_list_lock);
}
static SM_UNUSED void sm_heaps_fork_child(void)
{
    sm_plat_lock_reinit(&sm_heaps_map_lock);
    for (sm_heap_t *h = sm_heaps_all; h; h = h->next)
        sm_sync_spinlock_fork_reinit(&h->lock);
    sm_plat_lock_reinit(&sm_heaps_list_lock);
}
#endif
