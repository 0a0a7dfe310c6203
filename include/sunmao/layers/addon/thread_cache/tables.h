/* thread_cache's lookup tables: the class of a size, the list an aligned request is served from,
 * the size and the batch of each class. A part of layers/addon/thread_cache.h, which includes it
 * after its types (no include guard; it needs the layer's SM_FN names, class_count, batch_max and
 * batch_bytes, and handles_size). The tables are shared by all threads, built once per process by
 * the first slow path (init_once, under sm_plat_once) and read only after; until then they are all
 * zero, which the hit paths tolerate: every size maps to class 0, whose list is empty with limit 0
 * in the static caches every thread starts with, so the hit misses and the slow path, having built
 * the tables, computes the class again. Tables instead of the policy's arithmetic: one load, with
 * no branches to mispredict when sizes vary; malloc's holds 16 x the class, the offset of its list
 * entry, so the hit adds it to the cache pointer as it is (docs/layers.md, thread_cache).
 * Included alone, as tools/check-headers.sh does, it instantiates the whole layer.
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake */
#ifndef SM_THREAD_CACHE_PARTS
#include "../thread_cache.h"
#else

enum {
    SM_FN(class_table_len) = (int)(((size_t)(SM_SIZE_MAX) + 15) / 16 + 1),
    /* Aligned requests: alignments 32 .. align_max are served from the lists (see aligned_of). */
    SM_FN(align_min_log) = 5,
    SM_FN(align_max) = 4096,
    SM_FN(align_steps) = 12 - 5 + 1,
    SM_FN(core_table_len) = 256, /* CPUs beyond share entries (cpu modulo this) */
};
_Static_assert(SM_SIZECLASS_FN(count) <= 256, "thread_cache: the class table stores classes in bytes");

/* Shared, written once (by the first slow path of the process, under sm_plat_once), then read only. */
static struct {
    sm_plat_once_t once;
    bool ready; /* the tables are built; false also if that failed */
    uint32_t class_bytes[SM_FN(class_count)]; /* the size of each cached class, 0 for the others:
                                                * only lists of a nonzero size ever get a limit */
    /* aligned_of[log2(align) - 5][cls] = the smallest cached class >= cls whose size is a multiple
     * of align, or 0 for none (class 0 never is: its objects would be smaller than align). */
    uint8_t aligned_of[SM_FN(align_steps)][SM_FN(class_count)];
    uint8_t batch[SM_FN(class_count)], batch_big[SM_FN(class_count)]; /* see batch_of, batch_for */
    /* SM_OPT_CORE_AWARE: each CPU's level-2 cache in KiB, and the largest (platform/core_table.h) */
    uint32_t core_kib[SM_OPT_CORE_AWARE ? SM_FN(core_table_len) : 1];
    uint32_t core_max_kib;
    /* SM_OPT_HARDEN: the check word every cache of the process uses (lifecycle.h), odd. */
    uintptr_t check;
    unsigned caches_made; /* caches ever made (atomic): with one, no object is another thread's */
} SM_FN(obj) = { .once = SM_PLAT_ONCE_INIT };

/* slot_of[(size + 15) / 16] = 16 x size_to_class(size) for size <= SM_SIZE_MAX, the offset of the
 * size's list (free_slot's unit): all class sizes are multiples of 16, checked when the table is
 * built. An array of its own, not in obj: the hit path's atomic load (slot_of) then needs no
 * displacement, which gcc does not fold into an atomic load's address (2 instructions more). */
static uint16_t SM_FN(slot_table)[SM_FN(class_table_len)];

/* The list of a size <= SM_SIZE_MAX, as 16 x its class, and the class (0 before the tables exist). */
/* The hit paths' two tables are read with relaxed atomic loads (the same instructions as plain
 * ones), because a thread on the empty cache may read them while the first slow path writes them:
 * whatever it reads, its lists are empty and it misses (above). Threads with a cache read them
 * after sm_plat_once, which orders the build before. */
SM_HOT unsigned SM_FN(slot_of)(size_t size) { return __atomic_load_n(&SM_FN(slot_table)[(size + 15) >> 4], __ATOMIC_RELAXED); }
SM_HOT unsigned SM_FN(class_of)(size_t size) { return SM_FN(slot_of)(size) >> 4; }

/* Objects moved per refill or release of class cls: about batch_bytes, within [2, batch_max]. */
SM_INLINE unsigned SM_FN(batch_of)(unsigned cls) { return SM_FN(obj).batch[cls]; }
/* What a refill or release of a list with limit `limit` moves: batch_of, or for a list whose limit
 * has grown past 4 of them, a quarter of the limit up to about batch_bytes_max. */
SM_INLINE unsigned SM_FN(batch_for)(unsigned limit, unsigned cls)
{
    unsigned batch = SM_FN(obj).batch[cls], big = SM_FN(obj).batch_big[cls], quarter = limit / 4;
    return quarter <= batch ? batch : quarter < big ? quarter : big;
}

SM_SLOWPATH void SM_FN(report_setup)(const char *detail)
{
    SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, SM_LAYER_NAME, NULL, detail);
}

/* Objects of `size` in a batch of about `bytes`, within [2, batch_max]. */
SM_SLOWPATH uint8_t SM_FN(batch_objects)(size_t bytes, size_t size)
{
    size_t n = bytes / size;
    return (uint8_t)(n < 2 ? 2 : n > SM_FN(batch_max) ? SM_FN(batch_max) : n);
}

/* Once per process, from the first slow path: the tables. */
SM_SLOWPATH void SM_FN(init_once)(void)
{
    /* The cached classes: those of the sizes in [SM_SIZE_MIN, SM_SIZE_MAX]. */
    unsigned first = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MIN));
    while (SM_SIZECLASS_FN(class_to_size)(first) < (size_t)(SM_OPT_LINK_AT) + 16) /* room for the words */
        first++;
    unsigned last = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MAX));
    for (unsigned cls = first; cls <= last; cls++) {
        size_t size = SM_SIZECLASS_FN(class_to_size)(cls);
        /* atomic: usable_hit may read it while this runs (a block the slab served meanwhile) */
        __atomic_store_n(&SM_FN(obj).class_bytes[cls], (uint32_t)size, __ATOMIC_RELAXED);
        SM_FN(obj).batch[cls] = SM_FN(batch_objects)(SM_FN(batch_bytes), size);
        SM_FN(obj).batch_big[cls] = SM_FN(batch_objects)(SM_FN(batch_bytes_max), size);
    }
    for (size_t i = 0; i < (size_t)SM_FN(class_table_len); i++) {
        /* entry 0 serves malloc(0) on the hit path, which the socket would make a 1-byte request */
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(i ? i * 16 : 1);
        if (i && SM_SIZECLASS_FN(size_to_class)(i * 16 - 15) != cls) {
            SM_FN(report_setup)("a class boundary of the sizeclass policy is not a multiple of 16; caching off");
            return;
        }
        __atomic_store_n(&SM_FN(slot_table)[i], (uint16_t)(cls << 4), __ATOMIC_RELAXED);
    }
    for (unsigned a = 0; a < SM_FN(align_steps); a++) {
        size_t align = (size_t)1 << (a + SM_FN(align_min_log));
        for (unsigned cls = first; cls <= last; cls++) {
            unsigned fit = cls;
            while (fit <= last && (SM_FN(obj).class_bytes[fit] & (align - 1)))
                fit++;
            __atomic_store_n(&SM_FN(obj).aligned_of[a][cls], (uint8_t)(fit <= last ? fit : 0), __ATOMIC_RELAXED);
        }
    }
    /* One check for all caches, so any cache can tell an object that is on some cache's list, or
     * that a cache gave back below, from a live one: a second free from another thread is seen
     * (refill.h, overflow). Odd: never the 0 of a fresh or cleared word. */
    SM_FN(obj).check = (uintptr_t)sm_mix64(sm_secret() ^ 0x6a09e667f3bcc909ull) | 1;
    if (SM_OPT_CORE_AWARE)
        SM_FN(obj).core_max_kib = sm_core_table_build(SM_FN(obj).core_kib, SM_FN(core_table_len));
    SM_FN(obj).ready = true;
}

/* A thread's byte budget on CPU cpu: SM_OPT_CACHE_BYTES, or with SM_OPT_CORE_AWARE the share of it
 * the core's level-2 cache is of the largest core's (a core the table knows nothing of, or a table
 * that knows nothing: the whole budget). */
SM_INLINE size_t SM_FN(budget_for)(int cpu)
{
    if (!SM_OPT_CORE_AWARE || !SM_FN(obj).core_max_kib)
        return (size_t)(SM_OPT_CACHE_BYTES);
    uint32_t kib = SM_FN(obj).core_kib[(unsigned)cpu % SM_FN(core_table_len)];
    if (!kib)
        return (size_t)(SM_OPT_CACHE_BYTES);
    return (size_t)((uint64_t)(SM_OPT_CACHE_BYTES) * kib / SM_FN(obj).core_max_kib);
}

/* The list an aligned request (16 < align, a power of two) is served from: the smallest cached
 * class at least as large as size whose size is a multiple of align (two byte loads), or 0 when
 * none is (align above align_max, size out of range, tables not built). A class's objects are that
 * aligned when the next layer aligns its objects to the largest power of two dividing their size,
 * as slab_lk does up to 4 KiB, so they need no class of their own and share the lists of plain
 * requests; the pop checks the address anyway (aligned_hit). */
SM_INLINE unsigned SM_FN(aligned_class)(size_t size, size_t align)
{
    if (!SM_FN(handles_size)(size) || align > SM_FN(align_max) || (align & (align - 1)))
        return 0;
    return __atomic_load_n(&SM_FN(obj).aligned_of[__builtin_ctzll(align) - SM_FN(align_min_log)][SM_FN(class_of)(size)],
                           __ATOMIC_RELAXED);
}

#endif /* SM_THREAD_CACHE_PARTS */
