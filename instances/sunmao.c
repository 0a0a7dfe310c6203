/* sunmao — the default allocator (libsunmao.so): per-thread caches over slabs, a TLSF heap for
 * medium blocks, and a decaying cache of large mappings, every part a framework layer.
 *
 *   mmap_heap
 *   :: decay_cache(sync=mutex)                                  large blocks kept dirty, purged after 250 ms
 *   :: tlsf_glk(sync=spinlock, sizeclass=tc5, size_handle=[8 KiB+1, 2 MiB])
 *                                                                medium blocks, good fit, O(1)
 *   :: buddy_glk(sync=mutex, size_handle=[64 KiB, 64 KiB], layers' requests only)
 *                                                                the slabs: 64 KiB aligned to 64 KiB
 *   :: slab_lk(sync=spinlock, sizeclass=tc5, size_handle=[0, 8 KiB])  objects, one lock per class
 *                                                                and CPU shard, 2 empty slabs kept
 *   :: thread_cache(sizeclass=tc5, size_handle=[0, 8 KiB])      no lock, no atomics, 1.5 MiB
 *   :: prof(sync=mutex)                                         heap profiles, off unless prof:true
 *   :: malloc_socket
 *
 * Design, measurements and what was tried: docs/default-allocator.md.
 */
/* The hit paths are forced inline (SM_HOT); the rest is left to gcc, which keeps one copy of each
 * slow path instead of one per caller: less text resident in every process that loads the library,
 * the pair and the suite's times unchanged (core/compiler.h, docs/layers.md). */
#define SM_FORCE_INLINE 0
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc5.h>
#include <sunmao/policies/sync/mutex.h>
#include <sunmao/policies/sync/spinlock.h>

#define SM_LAYER sunmao_os
#define SM_ERR   warn
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER sunmao_large
#define SM_NEXT  sunmao_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#define SM_OPT_GROW 1
/* Up to 1 GiB of chunks the heaps above gave back, for their next phase to reuse without a page
 * fault (300 MiB of small objects freed and allocated again, in six sizes: 1.26 -> 0.86 s); a
 * program's own block above 128 MiB goes back at once, as it did under the old 128 MiB bound (a
 * 256 MiB buffer's old copies kept dirty took biggrow's peak 333 -> 409 MB). Decay purges it all
 * either way within 250 ms (docs/default-allocator.md). */
#define SM_OPT_MAX_BYTES ((size_t)1 << 30)
#define SM_OPT_MAX_BLOCK ((size_t)128 << 20)
/* The slots to hold that bound in the heaps' 4 MiB chunks, which seldom touch and join: with the
 * layer's 64, a phase of 300 MiB had 11 of its 75 chunks unmapped at its end and faulted them in
 * again in the next (phases: 158k faults -> 94k, 0.84 -> 0.70 s). A lookup scans the slots: a
 * loop of 32 MiB blocks did not measurably slow down. */
#define SM_OPT_MAX_BLOCKS 256
/* Not the layer's 1 s: sqlite's sorter frees 33 MiB of realloc-grown buffers that sat dirty here
 * for up to a second while its tables kept growing (peak RSS 167 -> 135 MiB, glibc 108); a loop
 * reusing large blocks reuses them within milliseconds either way. */
#define SM_OPT_DECAY_MS 250
#include <sunmao/layers/addon/decay_cache.h>

#define SM_LAYER           sunmao_medium
#define SM_NEXT            sunmao_large
/* A spinlock, not a mutex: a TLSF alloc or free holds the lock for a few hundred nanoseconds, and
 * a mutex's waiter slept in the kernel for each one. rptest (1 request in 16 is 8-64 KiB, two
 * threads) made 400-3,300 context switches per run with the mutex, 80-110 with this, and went from
 * 1.3-1.6x to 1.05-1.15x tcmalloc's time; glibc's adaptive mutex cut the switches as well but
 * cost alloc-test 10%. The spinlock yields the CPU after a bounded spin, so a holder that is in
 * mmap (region growth through decay_cache) or preempted does not stall the waiters. */
#define SM_SYNC            spinlock
#define SM_ERR             warn
/* The classes above: a block realloc shrinks below 8 KiB keeps its new size's class size, not
 * 8 KiB (20,000 buffers of 64 KiB shrunk to 1000 bytes and kept: 165 -> 23 MB, glibc 21). */
#define SM_SIZECLASS       tc5
#define SM_SIZE_MIN        ((8u << 10) + 1)
#define SM_SIZE_MAX        (2u << 20)
#define SM_OPT_REGION_SIZE (4u << 20)
/* Free pages inside medium blocks go back on the large cache's clock (docs/reliability.md). */
#define SM_OPT_DECAY_MS    250
#include <sunmao/layers/core/tlsf_glk.h>

/* sunmao-hugepage: the slabs packed into hugepages (instances/sunmao-hugepage.c). */
#ifdef SM_INSTANCE_HUGEPAGE
#define SM_LAYER          sunmao_pages
#define SM_NEXT           sunmao_medium
#define SM_SYNC           mutex
#define SM_ERR            warn
#define SM_SIZE_MIN       (64u << 10)
#define SM_SIZE_MAX       (64u << 10)
#define SM_SIZE_USER      0
#define SM_OPT_DECAY_MS   250 /* the clock of the layers below */
#include <sunmao/layers/core/hugepage_glk.h>
#else
#define SM_LAYER          sunmao_pages
#define SM_NEXT           sunmao_medium
#define SM_SYNC           mutex
#define SM_ERR            warn
#define SM_SIZE_MIN       (64u << 10)
#define SM_SIZE_MAX       (64u << 10)
#define SM_SIZE_USER      0 /* the slabs only: a program's 64 KiB block goes on to the TLSF heap */
#define SM_OPT_MIN_BLOCK  (64u << 10)
#define SM_OPT_CHUNK_SIZE (4u << 20)
#define SM_OPT_KEEP_SPARE 0 /* decay_cache below keeps freed chunks and purges them on time */
/* Free slab-sized blocks inside chunks that still hold live slabs: dropped on the same clock. */
#define SM_OPT_DECAY_MS   250
#include <sunmao/layers/core/buddy_glk.h>
#endif

/* sunmao-sharded: one layer of thread-owned slabs in place of the two below
 * (instances/sunmao-sharded.c). */
#ifdef SM_INSTANCE_SHARDED
#define SM_LAYER         sunmao_sharded
#define SM_NEXT          sunmao_pages
#define SM_SYNC          spinlock
#define SM_SIZECLASS     tc5
#define SM_ERR           warn
#define SM_SIZE_MAX      (8u << 10)
#define SM_OPT_SLAB_SIZE (64u << 10)
#define SM_OPT_DECAY_MS  250 /* the clock of the layers below */
#include <sunmao/layers/core/slab_sharded.h>
#define SUNMAO_SMALL sunmao_sharded
#else
#define SUNMAO_SMALL sunmao_cache
#define SM_LAYER         sunmao_slab
#define SM_NEXT          sunmao_pages
#define SM_SYNC          spinlock
#define SM_SIZECLASS     tc5
#define SM_ERR           warn
#define SM_SIZE_MAX      (8u << 10)
#define SM_OPT_SLAB_SIZE (64u << 10)
/* The empty slabs kept (retain policy keep_last, the default): one per class pinned 18 x 64 KiB on
 * glibc-simple (bursts over 20 classes); the two kept last are enough for the classes in use to
 * keep their hysteresis. Threads on different CPUs allocate from different shards' slabs; eight:
 * the CPUs beyond eight share shards by their low bits. Classes above 512 B are not sharded: a
 * partly used slab per shard costs them more than it buys. The measurements behind all three:
 * docs/layers.md, slab_lk. */
#define SM_OPT_EMPTY_MAX 2
#define SM_OPT_SHARDS 8
#define SM_OPT_SHARD_MAX 512
#include <sunmao/layers/core/slab_lk.h>

/* sunmao-percpu: per-CPU caches in the thread cache's place (instances/sunmao-percpu.c). */
#ifdef SM_INSTANCE_PERCPU
#define SM_LAYER     sunmao_cache
#define SM_NEXT      sunmao_slab
#define SM_SIZECLASS tc5
#define SM_ERR       warn
#define SM_SIZE_MAX  (8u << 10)
#define SM_OPT_BATCH_BYTES (16u << 10) /* as the thread cache's, below */
#include <sunmao/layers/addon/carrcache_rseq.h>
#else
#define SM_LAYER     sunmao_cache
#define SM_NEXT      sunmao_slab
#define SM_SIZECLASS tc5
#define SM_ERR       warn
#define SM_SIZE_MAX  (8u << 10)
/* 1.5 MiB per thread, 1.5x the layer's default (TCMalloc allows up to 4 MiB). A thread whose
 * working set of small objects is a little above the budget moves every object through the
 * slab's class locks in batches: sh6bench (2000 live blocks of 1..1000 B per thread, about
 * 1.1 MiB) made 66,000 refills and 65,000 batch releases per run with 1 MiB, 1,700 and 900 with
 * 1.5 MiB; 0.10 -> 0.05 s (tcmalloc 0.05), sh8bench 0.09 -> 0.07 (0.06), glibc-thread 0.53 ->
 * 0.50 (0.50). The price: glibc-simple (bursts of one size after another) peaks at 4.6 MiB
 * instead of 3.6 (a finished burst stays cached until the GC finds its list idle); 2 MiB gained
 * no more time and cost sh8bench 0.5 MiB more. */
#define SM_OPT_CACHE_BYTES (3u << 19)
/* Batches of 16 KiB, not the layer's 64: a refill of 2 KiB objects took 32 of them, a whole slab,
 * for a thread that needed one or two, and each shard's slabs of the large classes ended up touched
 * end to end: glibc-thread (random sizes to 4 KiB, two threads) peak 4.6 -> 4.0 MiB, alloc-test
 * 4.8 -> 4.5 MiB; alloc-test 0.29 -> 0.31 s (more refills of its large classes), the rest unchanged
 * (32 KiB: glibc-thread 4.3 MiB, alloc-test unchanged). Only classes above 512 B are affected. */
#define SM_OPT_BATCH_BYTES (16u << 10)
/* ...but a list in heavy use (its limit past 4 batches) moves up to 64 KiB at a time: a thread
 * allocating then freeing 100 MB of 4 KiB objects made four times the refills and releases, each
 * a class section and a slab's trip to the buddy heap (docs/default-allocator.md). */
#define SM_OPT_BATCH_BYTES_MAX (64u << 10)
/* A base's variant may check the lists harder, and hold freed objects back in them (sunmao-secure,
 * docs/security.md). */
#ifdef SM_INSTANCE_HARDEN
#define SM_OPT_HARDEN SM_INSTANCE_HARDEN
#endif
#ifdef SM_INSTANCE_HOLD_BYTES
#define SM_OPT_HOLD_BYTES SM_INSTANCE_HOLD_BYTES
#endif
#ifdef SM_INSTANCE_LINK_AT
#define SM_OPT_LINK_AT SM_INSTANCE_LINK_AT
#endif
#include <sunmao/layers/addon/thread_cache.h>
#endif

#endif /* SM_INSTANCE_SHARDED */

/* Included by another instance as its base (SM_INSTANCE_BASE): that instance composes the
 * layers it adds and the socket on top of sunmao_cache. */
#ifndef SM_INSTANCE_BASE
/* Heap profiling and leak reports (SUNMAO_CONF prof:true, docs/operations.md), off by default: then
 * one byte tested on each hit path (docs/operations.md, heap profiles). */
#define SM_LAYER sunmao_prof
#define SM_NEXT  SUNMAO_SMALL
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/layers/addon/prof.h>

#define SM_NEXT sunmao_prof
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
#endif
