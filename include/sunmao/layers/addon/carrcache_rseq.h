/* carrcache_rseq: per-CPU array caches whose hit paths are restartable sequences (the paper's
 * Table 2 `carrcache` family, its lock-free form): per CPU and size class, a stack of free objects
 * in a slab of that CPU, in front of a layer that serves those classes in batches (slab_lk). It
 * takes thread_cache's place in a composition: the caches scale with CPUs, not threads, and a
 * thread's exit leaves nothing to give back. An add-on layer.
 *
 * Parameters: SM_LAYER, SM_NEXT. Slots:
 *   SM_SIZECLASS  (required) the class sizes: the next layer's policy (checked)
 *   SM_ERR        (required) a double free caught in the caches, and a cached object written over,
 *                 are reported through it (the free ignored, the object dropped)
 *   size_handle   SM_SIZE_MIN/SM_SIZE_MAX (default max 8 KiB): the sizes cached; others, and
 *                 alignments above SM_MIN_ALIGN, go down (in range: asked as their whole class)
 * Options:
 *   SM_OPT_CPU_BYTES    most bytes one CPU's caches hold together (default 1.5 MiB): its classes'
 *                       room, granted on misses, never adds up to more
 *   SM_OPT_CLASS_BYTES  most bytes one class may hold on a CPU (default 256 KiB), within
 *                       [8, SM_OPT_CAP_MAX] objects
 *   SM_OPT_CAP_MAX      most objects one class may hold on a CPU (default 2048)
 *   SM_OPT_SLAB_SHIFT   log2 of a CPU's slab (default 18, 256 KiB of address space, touched as used)
 *   SM_OPT_BATCH_MAX    most objects moved per refill or release (default 32)
 *   SM_OPT_BATCH_BYTES  a refill or release moves about this many bytes (default 64 KiB)
 *   SM_OPT_IDLE_MS      a CPU whose caches took no slow path for this long gives its objects back
 *                       (default 1000; 0: never): the release clock's thread moves there to empty
 *                       them, so caches the program stopped using do not keep its memory
 * Modes (platform/rseq.h, decided once per process): glibc's rseq registration, our own, or, where
 * the kernel offers none, one virtual CPU per thread (per-thread caches, given back at thread exit).
 * The mode is mallctl `percpu.mode` and the statistics' `percpu:` line.
 * Paths. malloc: one section pops its class's stack on the current CPU; the object's second word
 * must be the cached tag (else it was written after its free: reported, and the object dropped),
 * and is cleared. free: the class (the size's, or the next layer's owner_slot); a free
 * of an object whose second word is the tag is a double free (the slow path reports it); else one
 * section pushes it, writing the tag. No lock, no atomic read-modify-write, no system call. A miss
 * (empty, full, a CPU whose slab is not set up, a thread not set up) goes to the slow paths: room is
 * granted under the CPU's mutex (held for a few loads and sections: a steal pops what it evicts),
 * refills and releases move a batch through sections, whatever CPU the thread is on by then.
 * Lock order: a CPU's lock nests under nothing of this layer and is never held while the next layer
 * is called. The fork hooks take every CPU lock, then the virtual CPUs' lock, then the next layer's.
 * Invariants: on every CPU, sum over classes of (end - begin + 1) x class size <= SM_OPT_CPU_BYTES,
 * and begin - 1 <= top <= end (a shrink is a section that checks it); every cached object holds at
 * least its class's bytes and its second word is the tag.
 * Requires of the next layer: BATCH (refills and releases) and OWNER (an unsized free's class).
 * Offers HIT. Properties: thread_safe = the next layer's; min_align the next layer's; zeroed 0.
 * @model: name=carrcache_rseq kind=addon flag cache slot sizeclass slot err range
 * @model: key cpu_bytes size key class_bytes size key cap_max int key slab_shift int
 * @model: key batch_max int key batch_bytes size key idle_ms int
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn
 * @check-next: fake
 * Design, measurements and what was tried: docs/percpu.md. */
#include <string.h>
#include "../../core/bits.h"
#include "../../core/conf.h"
#include "../../core/errors.h"
#include "../../core/secret.h"
#include "../../core/layer.h"
#include "../../platform/platform.h"

#ifndef SM_LAYER
#error "carrcache_rseq: define SM_LAYER (this instance's name) before including"
#endif
#ifndef SM_NEXT
#error "carrcache_rseq: define SM_NEXT (the layer below) before including"
#endif
#ifndef SM_SIZECLASS
#error "carrcache_rseq: policy slot 'sizeclass' is empty (SM_SIZECLASS = the next layer's: tc|log2b|prime|...)"
#endif
#ifndef SM_ERR
#error "carrcache_rseq: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_OPT_CPU_BYTES
#define SM_OPT_CPU_BYTES ((size_t)3 << 19)
#endif
#ifndef SM_OPT_CLASS_BYTES
#define SM_OPT_CLASS_BYTES ((size_t)256 << 10)
#endif
#ifndef SM_OPT_CAP_MAX
#define SM_OPT_CAP_MAX 2048
#endif
#ifndef SM_OPT_SLAB_SHIFT
#define SM_OPT_SLAB_SHIFT 18
#endif
#ifndef SM_OPT_BATCH_MAX
#define SM_OPT_BATCH_MAX 32
#endif
#ifndef SM_OPT_BATCH_BYTES
#define SM_OPT_BATCH_BYTES (64u << 10)
#endif
#ifndef SM_OPT_IDLE_MS
#define SM_OPT_IDLE_MS 1000
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX (8u << 10)
#endif
#include "../../policies/size_handle.h"
_Static_assert(SM_SIZE_USER, "carrcache_rseq: SM_SIZE_USER must be 1: a CPU cache serves the program's requests");
_Static_assert((SM_OPT_SLAB_SHIFT) >= 12 && (SM_OPT_SLAB_SHIFT) <= 19,
               "carrcache_rseq: SM_OPT_SLAB_SHIFT must be in [12, 19] (a top is a 16-bit word index)");
_Static_assert((SM_OPT_CAP_MAX) >= 8 && (SM_OPT_CAP_MAX) <= 8192, "carrcache_rseq: SM_OPT_CAP_MAX must be in [8, 8192]");
_Static_assert((SM_OPT_BATCH_MAX) >= 2 && (SM_OPT_BATCH_MAX) <= 64, "carrcache_rseq: SM_OPT_BATCH_MAX must be in [2, 64]");
_Static_assert((SM_OPT_CPU_BYTES) >= (64u << 10), "carrcache_rseq: SM_OPT_CPU_BYTES must be at least 64 KiB");
_Static_assert((SM_OPT_IDLE_MS) >= 0, "carrcache_rseq: SM_OPT_IDLE_MS must be 0 (off) or a time in ms");
_Static_assert((size_t)(SM_SIZE_MAX) <= (size_t)SM_SIZECLASS_FN(max_size),
               "carrcache_rseq: SM_SIZE_MAX is above the largest size of the sizeclass policy");
SM_REQUIRE_CAP(BATCH, "refills and releases move objects of one class in batches");
SM_REQUIRE_CAP(OWNER, "an unsized free finds its class with owner_slot");
_Static_assert((long)SM_PROP(SM_NEXT, batch_classes) == (long)SM_SIZECLASS_FN(count) &&
                   (long)SM_PROP(SM_NEXT, batch_max_size) == (long)SM_SIZECLASS_FN(max_size),
               SM_STR(SM_LAYER) ": its sizeclass policy differs from that of its next layer " SM_STR(SM_NEXT)
                                " (give both the same SM_SIZECLASS)");

enum {
    SM_FN(thread_safe) = SM_PROP(SM_NEXT, thread_safe),
    SM_FN(min_align) = SM_PROP(SM_NEXT, min_align),
    SM_FN(zeroed) = 0,
    SM_FN(class_count) = SM_SIZECLASS_FN(count),
    SM_FN(shift) = SM_OPT_SLAB_SHIFT,
    /* word 0, then one 32-bit header per class and one for the sentinel class_count, which stays 0 */
    SM_FN(head_words) = 1 + (4 * (SM_SIZECLASS_FN(count) + 1) + 7) / 8,
    SM_FN(table_len) = (int)(((size_t)(SM_SIZE_MAX) + 15) / 16 + 1),
};
#define SM_CARR_SLAB ((size_t)1 << SM_OPT_SLAB_SHIFT)

/* Per CPU (or virtual CPU): the slow paths' state, beside the slabs. */
struct SM_FN(cpu) {
    sm_plat_lock_t lock; /* a mutex: with many threads per CPU, a spinner would wait out a preempted holder */
    unsigned misses;     /* grows refused for want of bytes: a steal is tried on every 16th */
    bool ready;       /* its headers are set: each class empty, with no room */
    unsigned steal;   /* where the next search for unused room starts */
    size_t room;      /* bytes of room granted: sum of (end - begin + 1) x class size */
    /* Idle CPUs (drain_idle): slow paths count events and note the release clock once after each
     * drain; the clock's thread alone reads the count and keeps the rest. */
    unsigned long events;
    bool noted;
    bool quiet;                /* events was `seen` at quiet_ms, and nothing since */
    unsigned long seen;
    uint64_t quiet_ms;
} SM_CACHE_ALIGNED; /* each CPU's own lines: their slow paths write here */

static struct {
    sm_plat_once_t once;
    bool ready;
    int mode;                   /* platform/rseq.h, for the statistics */
    char *region;               /* one slab per slot, then the slots' struct cpu */
    size_t region_bytes;
    unsigned slots;
    struct SM_FN(cpu) *cpu;
    uintptr_t tag;              /* the cached objects' second word: random, odd */
    uint16_t begin[SM_FN(class_count)];  /* word index of a class's first item; 0: not cached */
    uint16_t cap[SM_FN(class_count)];    /* the most room a class may have */
    uint32_t class_bytes[SM_FN(class_count)];
    uint8_t batch[SM_FN(class_count)];
} SM_FN(obj) = { .once = SM_PLAT_ONCE_INIT };

/* The slabs: CPU k's at base + (k << shift). Read by slow paths only, after init_once. */
static char *SM_FN(base);

/* hdr_table[(size + 15) / 16]: the byte offset of the size's class header (8 + 4 x class); 0 until
 * built, which is word 0's, a header that is always empty and full. */
static uint16_t SM_FN(hdr_table)[SM_FN(table_len)];

SM_HOT uintptr_t SM_FN(base_now)(void) { return (uintptr_t)__atomic_load_n(&SM_FN(base), __ATOMIC_RELAXED); }
SM_HOT uintptr_t SM_FN(hdr_of_slot)(unsigned slot) { return 8 + (slot >> 2); } /* slot: 16 x class */
SM_INLINE uintptr_t SM_FN(hdr_of)(unsigned cls) { return 8 + 4 * (uintptr_t)cls; }

/* The slabs are made by the first slow path (init_once), which may come before this. */
SM_INLINE int SM_FN(create)(void) { return SM_NEXT_FN(create)(); }

/* ---- The hit paths ---- */

/* The calling thread's area, its CPU when it last took a slow path, and that CPU's slab: the
 * sections compare the CPU instead of computing the slab from it, so a hit's chain of dependent
 * loads is the thread's, then the header's, then the slot's. A CPU no area ever has (-3) until
 * the thread is set up: every section misses. Refreshed by setup(). */
struct SM_FN(here) {
    struct sm_rseq_area *area;
    long cpu;
    uintptr_t slab;
};
static __thread struct SM_FN(here) SM_FN(here) __attribute__((tls_model("initial-exec"))) = { &sm_rseq_boot, -3, 0 };

/* The sections on the calling thread's (virtual) CPU, platform/rseq.h. */
SM_HOT void *SM_FN(pop)(uintptr_t hdr)
{
    uintptr_t item;
    SM_RSEQ_POP(SM_FN(here).area, SM_FN(here).cpu, SM_FN(here).slab, hdr, item);
    return (void *)item;
}
SM_HOT bool SM_FN(push)(uintptr_t hdr, void *p, uintptr_t tag)
{
    bool ok;
    SM_RSEQ_PUSH(SM_FN(here).area, SM_FN(here).cpu, SM_FN(here).slab, hdr, p, tag, ok);
    return ok;
}

/* A popped object whose tag is gone: written after it was freed, or freed again after such a
 * write (then it is on a stack twice). Reported, and never handed out (it stays allocated below). */
SM_SLOWPATH void SM_FN(damaged)(void *p)
{
    SM_ERR_FN(raise)(SM_ERR_CORRUPTION, SM_LAYER_NAME, p,
                     "a cached object's second word was overwritten (a write after free, or a double free after one); "
                     "the object is dropped");
}

/* The object the last hit found damaged, for its miss to report. */
static __thread void *SM_FN(suspect) __attribute__((tls_model("initial-exec")));

SM_HOT void *SM_FN(alloc_hit)(size_t size)
{
    if (!SM_FN(handles_size)(size))
        return NULL;
    uintptr_t hdr = __atomic_load_n(&SM_FN(hdr_table)[(size + 15) >> 4], __ATOMIC_RELAXED);
    uintptr_t *p = (uintptr_t *)SM_FN(pop)(hdr);
    if (sm_likely(p != NULL)) {
        if (sm_unlikely(p[1] != SM_FN(obj).tag)) {
            SM_FN(suspect) = p; /* reported by the miss, which serves the request: no call here */
            return NULL;
        }
        p[1] = 0; /* no longer marked as cached */
        sm_stats_thread_bytes[0] += size; /* thread.allocated: a CPU's stacks are no thread's */
    }
    return p;
}

/* 16 x p's class, or 16 x class_count (the sentinel, whose header stays 0) for a block of none. */
SM_HOT unsigned SM_FN(free_slot)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    if (flags & SM_F_SIZED)
        return SM_FN(handles_size)(size) ? (unsigned)__atomic_load_n(&SM_FN(hdr_table)[(size + 15) >> 4], __ATOMIC_RELAXED) * 4 - 32
                                         : (unsigned)SM_FN(class_count) << 4;
    uintptr_t w = SM_NEXT_FN(block_owner)(p);
    *owner_word = w;
    return SM_NEXT_FN(owner_slot)(p, w);
}

SM_HOT bool SM_FN(free_hit)(void *p, size_t size, unsigned flags, uintptr_t *owner_word)
{
    unsigned slot = SM_FN(free_slot)(p, size, flags, owner_word);
    uintptr_t tag = __atomic_load_n(&SM_FN(obj).tag, __ATOMIC_RELAXED);
    /* the second word is read only off an object of a class: a stray pointer is never dereferenced */
    if (slot >= ((unsigned)SM_FN(class_count) << 4))
        return false;
    uintptr_t second = ((uintptr_t *)p)[1];
    if (second == tag)
        return false;
    if (sm_unlikely(!SM_FN(push)(SM_FN(hdr_of_slot)(slot), p, tag))) {
        /* A section that stored the tag, was preempted, and restarted on another CPU failed with
         * the tag left behind: the miss would take the object for a cached one freed again. */
        ((uintptr_t *)p)[1] = second;
        return false;
    }
    sm_stats_thread_bytes[1] += SM_FN(obj).class_bytes[slot >> 4]; /* thread.deallocated */
    return true;
}

/* ---- Set-up ---- */

SM_SLOWPATH void SM_FN(init_once)(void)
{
    int mode = sm_rseq_mode();
    unsigned first = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MIN));
    while (SM_SIZECLASS_FN(class_to_size)(first) < 16) /* the tag is the second word */
        first++;
    unsigned last = SM_SIZECLASS_FN(size_to_class)((size_t)(SM_SIZE_MAX));
    /* Room for every class in one slab: halve the per-class bound until the stacks fit. */
    size_t words = SM_CARR_SLAB / 8, class_bytes = (size_t)(SM_OPT_CLASS_BYTES);
    for (;;) {
        size_t at = SM_FN(head_words);
        for (unsigned cls = first; cls <= last; cls++) {
            size_t size = SM_SIZECLASS_FN(class_to_size)(cls), n = class_bytes / size;
            n = n < 8 ? 8 : n > (SM_OPT_CAP_MAX) ? (SM_OPT_CAP_MAX) : n;
            SM_FN(obj).begin[cls] = (uint16_t)(at + 1); /* after its marker word, which stays 0 */
            SM_FN(obj).cap[cls] = (uint16_t)n;
            SM_FN(obj).class_bytes[cls] = (uint32_t)size;
            size_t b = (SM_OPT_BATCH_BYTES) / size;
            SM_FN(obj).batch[cls] = (uint8_t)(b < 2 ? 2 : b > (SM_OPT_BATCH_MAX) ? (SM_OPT_BATCH_MAX) : b);
            at += 1 + n;
        }
        if (at <= words)
            break;
        if (class_bytes < 1024) {
            SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, SM_LAYER_NAME, NULL, "the classes do not fit a CPU slab; caching off");
            return;
        }
        class_bytes /= 2;
    }
    unsigned slots = sm_rseq_slots();
    size_t slabs = (size_t)slots * SM_CARR_SLAB;
    size_t bytes = slabs + (size_t)slots * sizeof(struct SM_FN(cpu));
    char *region = (char *)sm_plat_map(bytes);
    if (!region)
        return; /* no caching: every request goes down */
    SM_FN(obj).region = region;
    SM_FN(obj).region_bytes = bytes;
    SM_FN(obj).slots = slots;
    SM_FN(obj).cpu = (struct SM_FN(cpu) *)(region + slabs);
    for (unsigned i = 0; i < slots; i++)
        sm_plat_lock_reinit(&SM_FN(obj).cpu[i].lock);
    SM_FN(obj).mode = mode;
    for (size_t i = 0; i < (size_t)SM_FN(table_len); i++) {
        unsigned cls = SM_SIZECLASS_FN(size_to_class)(i ? i * 16 : 1);
        if (i && SM_SIZECLASS_FN(size_to_class)(i * 16 - 15) != cls) {
            SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, SM_LAYER_NAME, NULL,
                             "a class boundary of the sizeclass policy is not a multiple of 16; caching off");
            return;
        }
        /* classes without a stack keep a header that stays 0: every section misses on it */
        __atomic_store_n(&SM_FN(hdr_table)[i], (uint16_t)SM_FN(hdr_of)(SM_FN(obj).begin[cls] ? cls : SM_FN(class_count)),
                         __ATOMIC_RELAXED);
    }
    __atomic_store_n(&SM_FN(obj).tag, (uintptr_t)sm_mix64(sm_secret() ^ 0x3c6ef372fe94f82bull) | 1, __ATOMIC_RELAXED);
    __atomic_store_n(&SM_FN(base), region, __ATOMIC_RELEASE);
    SM_FN(obj).ready = true;
}

SM_INLINE uint32_t *SM_FN(header)(long cpu, unsigned cls)
{
    return (uint32_t *)(SM_FN(base_now)() + ((uintptr_t)cpu << SM_FN(shift)) + SM_FN(hdr_of)(cls));
}

SM_INLINE void SM_FN(thread_exit)(void);

/* The calling thread's CPU, with the layer, the thread and that CPU's slab set up; -1: serve this
 * request uncached. */
SM_SLOWPATH long SM_FN(setup)(void)
{
    if (!sm_conf.tcache_on)
        return -1; /* tcache:false, or junk/zero (core/conf.h): nothing is cached */
    sm_plat_once(&SM_FN(obj).once, SM_FN(init_once));
    if (!SM_FN(obj).ready)
        return -1;
    if (sm_rseq_virtual < 0 && sm_rseq_tls == &sm_rseq_boot) {
        if (!sm_rseq_thread_setup())
            return -1;
        if (sm_rseq_virtual >= 0 && !sm_thread_attach(SM_FN(thread_exit))) {
            sm_rseq_thread_exit(); /* no exit hook: a virtual CPU's objects would leak at the end */
            return -1;
        }
    }
    long cpu = sm_rseq_cpu();
    if (cpu < 0 || cpu >= (long)SM_FN(obj).slots)
        return -1;
    struct SM_FN(cpu) *m = &SM_FN(obj).cpu[cpu];
    if (!__atomic_load_n(&m->ready, __ATOMIC_ACQUIRE)) {
        sm_plat_lock(&m->lock);
        if (!m->ready) {
            /* A zero header is never changed by a section, so these plain stores race with none. */
            for (unsigned cls = 0; cls < SM_FN(class_count); cls++)
                if (SM_FN(obj).begin[cls]) {
                    uint32_t top = SM_FN(obj).begin[cls] - 1u;
                    __atomic_store_n(SM_FN(header)(cpu, cls), top | top << 16, __ATOMIC_RELAXED);
                }
            __atomic_store_n(&m->ready, true, __ATOMIC_RELEASE);
        }
        sm_plat_unlock(&m->lock);
    }
    SM_FN(here) = (struct SM_FN(here)){ sm_rseq_tls, cpu, SM_FN(base_now)() + ((uintptr_t)cpu << SM_FN(shift)) };
    return cpu;
}

/* ---- Room ----
 * A class starts with no room on a CPU and is granted some on its misses, a batch at a time, out
 * of the CPU's SM_OPT_CPU_BYTES. When that is spent, every 16th refused grow takes room back from
 * the other classes, half a class's at most, unused room first, then objects (popped here, on
 * that CPU, and given down by the caller once the lock is dropped). */

SM_SLOWPATH unsigned SM_FN(take)(unsigned cls, void **out, unsigned n);
enum { SM_FN(steal_max) = 64 }; /* objects one steal may evict */

/* Takes back at least `want` bytes of room from classes other than keep on cpu, if it can (lock
 * held); the objects it evicted are in out[0 .. *nout). */
SM_SLOWPATH void SM_FN(steal)(long cpu, unsigned keep, size_t want, void **out, unsigned *nout)
{
    struct SM_FN(cpu) *m = &SM_FN(obj).cpu[cpu];
    size_t got = 0;
    for (unsigned i = 0; i < SM_FN(class_count) && got < want; i++) {
        unsigned cls = (m->steal + i) % SM_FN(class_count);
        if (cls == keep || !SM_FN(obj).begin[cls])
            continue;
        size_t size = SM_FN(obj).class_bytes[cls];
        uint32_t h = __atomic_load_n(SM_FN(header)(cpu, cls), __ATOMIC_RELAXED);
        unsigned top = h & 0xffff, end = h >> 16, first = SM_FN(obj).begin[cls] - 1u;
        unsigned drop = (unsigned)((want - got + size - 1) / size), half = (end - first + 1) / 2;
        if (drop > half)
            drop = half;
        if (!drop)
            continue;
        if (end - top < drop) { /* evict the objects above the new end */
            unsigned evict = drop - (end - top);
            if (evict > SM_FN(steal_max) - *nout)
                evict = SM_FN(steal_max) - *nout;
            *nout += SM_FN(take)(cls, out + *nout, evict);
            h = __atomic_load_n(SM_FN(header)(cpu, cls), __ATOMIC_RELAXED);
            top = h & 0xffff;
            end = h >> 16;
            drop = end - top < drop ? end - top : drop;
        }
        if (drop && sm_rseq_set_end(sm_rseq_tls, SM_FN(base_now)(), SM_FN(shift), SM_FN(hdr_of)(cls), cpu, end, end - drop)) {
            m->room -= (size_t)drop * size;
            got += (size_t)drop * size;
        }
    }
    m->steal = (m->steal + 1) % SM_FN(class_count);
}

/* Grants class cls on cpu up to `want` more objects of room; how many it got (0 when the thread
 * moved to another CPU, or the CPU's bytes are spent). */
SM_SLOWPATH unsigned SM_FN(grow)(long cpu, unsigned cls, unsigned want)
{
    struct SM_FN(cpu) *m = &SM_FN(obj).cpu[cpu];
    size_t size = SM_FN(obj).class_bytes[cls];
    if ((__atomic_load_n(SM_FN(header)(cpu, cls), __ATOMIC_RELAXED) >> 16) >= SM_FN(obj).begin[cls] - 1u + SM_FN(obj).cap[cls])
        return 0; /* at its cap: no lock */
    void *evicted[SM_FN(steal_max)];
    unsigned nevicted = 0;
    sm_plat_lock(&m->lock);
    uint32_t h = __atomic_load_n(SM_FN(header)(cpu, cls), __ATOMIC_RELAXED);
    unsigned end = h >> 16, max_end = SM_FN(obj).begin[cls] - 1u + SM_FN(obj).cap[cls];
    unsigned n = end >= max_end ? 0 : max_end - end < want ? max_end - end : want;
    if (n && m->room + n * size > (size_t)(SM_OPT_CPU_BYTES) && (m->misses++ & 15) == 0)
        SM_FN(steal)(cpu, cls, m->room + n * size - (size_t)(SM_OPT_CPU_BYTES), evicted, &nevicted);
    if (n && m->room + n * size > (size_t)(SM_OPT_CPU_BYTES))
        n = (unsigned)(((size_t)(SM_OPT_CPU_BYTES) - m->room) / size);
    if (n && sm_rseq_set_end(sm_rseq_tls, SM_FN(base_now)(), SM_FN(shift), SM_FN(hdr_of)(cls), cpu, end, end + n))
        m->room += n * size;
    else
        n = 0;
    sm_plat_unlock(&m->lock);
    if (nevicted)
        SM_NEXT_FN(free_batch)(evicted, nevicted);
    return n;
}

/* ---- The misses ---- */

SM_SLOWPATH void SM_FN(give_blocks)(void **blocks, unsigned n)
{
    if (n)
        SM_NEXT_FN(free_batch)(blocks, n);
}

/* Pops up to n objects of class cls from the current CPU into out (they keep the tag: given back
 * below, a second free of one is still seen); how many. */
SM_SLOWPATH unsigned SM_FN(take)(unsigned cls, void **out, unsigned n)
{
    unsigned got = 0;
    while (got < n) {
        void *p = SM_FN(pop)(SM_FN(hdr_of)(cls));
        if (!p)
            break;
        out[got++] = p;
    }
    return got;
}

/* A slow path ran on cpu: it is not idle. The first one after a drain (or ever) notes the release
 * clock, which then watches the CPU until it is idle and emptied (drain_idle). Plain stores: the
 * count is a hint, and two threads racing on it only lose a count. */
SM_INLINE void SM_FN(busy)(long cpu)
{
    struct SM_FN(cpu) *m = &SM_FN(obj).cpu[cpu];
    __atomic_store_n(&m->events, __atomic_load_n(&m->events, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    if ((SM_OPT_IDLE_MS) > 0 && sm_unlikely(!__atomic_load_n(&m->noted, __ATOMIC_RELAXED))) {
        __atomic_store_n(&m->noted, true, __ATOMIC_RELAXED);
        sm_release_note();
    }
}

/* An object of c->size's class for the caller, and a batch for the current CPU; NULL: not served. */
SM_SLOWPATH void *SM_FN(refill)(sm_mctx_t *c, unsigned cls, long cpu)
{
    SM_FN(busy)(cpu);
    unsigned n = SM_FN(obj).batch[cls];
    uint32_t h = __atomic_load_n(SM_FN(header)(cpu, cls), __ATOMIC_RELAXED);
    unsigned room = (h >> 16) - (h & 0xffff);
    if (room < n)
        room += SM_FN(grow)(cpu, cls, n - room);
    void *out[SM_OPT_BATCH_MAX + 1];
    unsigned want = 1 + (room < n ? room : n);
    sm_mctx_t r = sm_mctx_alloc(SM_FN(obj).class_bytes[cls], SM_MIN_ALIGN, 0);
    unsigned got = SM_NEXT_FN(alloc_batch)(&r, out, want);
    if (!got)
        return NULL;
    uintptr_t tag = SM_FN(obj).tag;
    unsigned i = 1;
    while (i < got && SM_FN(push)(SM_FN(hdr_of)(cls), out[i], tag))
        i++;
    SM_FN(give_blocks)(out + i, got - i);
    (void)c;
    ((uintptr_t *)out[0])[1] = 0;
    sm_stats_thread_bytes[0] += SM_FN(obj).class_bytes[cls];
    return out[0];
}

SM_INLINE unsigned SM_FN(class_of_request)(size_t size)
{
    return (unsigned)(__atomic_load_n(&SM_FN(hdr_table)[(size + 15) >> 4], __ATOMIC_RELAXED) - 8) / 4;
}

SM_INLINE void *SM_FN(alloc_miss)(sm_mctx_t *c)
{
    if (sm_unlikely(SM_FN(suspect) != NULL)) {
        SM_FN(damaged)(SM_FN(suspect));
        SM_FN(suspect) = NULL;
    }
    if (SM_FN(serves)(c)) {
        long cpu = c->align <= SM_MIN_ALIGN ? SM_FN(setup)() : -1;
        if (cpu >= 0) {
            unsigned cls = SM_FN(class_of_request)(c->size);
            void *p = NULL;
            if (cls < SM_FN(class_count) && SM_FN(obj).begin[cls]) {
                p = SM_FN(alloc_hit)(c->size); /* the thread may have been set up just now (counted there) */
                if (sm_unlikely(SM_FN(suspect) != NULL)) {
                    SM_FN(damaged)(SM_FN(suspect));
                    SM_FN(suspect) = NULL;
                }
                if (!p)
                    p = SM_FN(refill)(c, cls, cpu);
            }
            if (p)
                return c->ptr = p;
        }
        /* Served below: ask for the whole class, as a sized free of it will name the class. */
        c->size = SM_SIZECLASS_FN(class_to_size)(SM_SIZECLASS_FN(size_to_class)(c->size));
        void *p = SM_NEXT_FN(alloc)(c);
        if (p) {
            ((uintptr_t *)p)[1] = 0; /* an object given back below keeps its tag */
            sm_stats_thread_bytes[0] += c->size;
        }
        return p;
    }
    sm_stats_thread_bytes[0] += c->size;
    return SM_NEXT_FN(alloc)(c);
}

/* A slow path's class of c->ptr, with no second lookup of its owner. */
SM_INLINE unsigned SM_FN(free_class)(sm_mctx_t *c)
{
    if (c->flags & SM_F_SIZED)
        return SM_FN(handles_size)(c->size) ? SM_FN(class_of_request)(c->size) : SM_FN(class_count);
    if (!(c->flags & SM_F_OWNER)) {
        c->owner_word = SM_NEXT_FN(block_owner)(c->ptr);
        c->flags |= SM_F_OWNER;
    }
    return SM_NEXT_FN(owner_slot)(c->ptr, c->owner_word) >> 4;
}

SM_INLINE void SM_FN(free_miss)(sm_mctx_t *c)
{
    unsigned cls = SM_FN(free_class)(c);
    if (cls < SM_FN(class_count) && SM_FN(obj).ready && SM_FN(obj).begin[cls]) {
        if (((uintptr_t *)c->ptr)[1] == SM_FN(obj).tag) {
            SM_ERR_FN(raise)(SM_ERR_DOUBLE_FREE, SM_LAYER_NAME, c->ptr, "double free of a cached object");
            return;
        }
        sm_stats_thread_bytes[1] += SM_FN(obj).class_bytes[cls];
        long cpu = SM_FN(setup)();
        if (cpu >= 0) {
            SM_FN(busy)(cpu);
            uintptr_t tag = SM_FN(obj).tag;
            uintptr_t hdr = SM_FN(hdr_of)(cls);
            if (SM_FN(push)(hdr, c->ptr, tag))
                return; /* the thread was just set up, or another thread made room */
            if (SM_FN(grow)(cpu, cls, SM_FN(obj).batch[cls]) &&
                SM_FN(push)(hdr, c->ptr, tag))
                return;
            /* full, with no more room: half a batch goes down, and p takes its place */
            void *out[SM_OPT_BATCH_MAX];
            unsigned n = SM_FN(take)(cls, out, (SM_FN(obj).batch[cls] + 1) / 2);
            bool pushed = SM_FN(push)(hdr, c->ptr, tag);
            SM_FN(give_blocks)(out, n);
            if (pushed)
                return;
        }
        /* marked as the stacks' objects are, so a second free of it is seen while it is below */
        ((uintptr_t *)c->ptr)[1] = SM_FN(obj).tag;
    } else {
        sm_mctx_t q = sm_mctx_block(c->ptr, 0, 0);
        if (SM_NEXT_FN(getmeta)(&q))
            sm_stats_thread_bytes[1] += q.usable;
    }
    SM_NEXT_FN(free)(c);
}

SM_ALLOC_FREE_BY_HIT()

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c) { return SM_NEXT_FN(getmeta)(c); }
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(resize)(c, n); }
SM_INLINE bool SM_FN(move)(sm_mctx_t *c, size_t n) { return SM_NEXT_FN(move)(c, n); }
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c) { return SM_NEXT_FN(purge)(c); }

/* Gives every object of the current (virtual) CPU's stacks back below; their room stays. */
SM_SLOWPATH size_t SM_FN(drain_here)(void)
{
    size_t bytes = 0;
    void *out[64];
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
        if (!SM_FN(obj).begin[cls])
            continue;
        unsigned n;
        while ((n = SM_FN(take)(cls, out, 64)) != 0) {
            bytes += (size_t)n * SM_FN(obj).class_bytes[cls];
            SM_FN(give_blocks)(out, n);
        }
    }
    return bytes;
}

/* Objects of class cls cached on cpu, read without stopping it (a moment old); 0 for a class with
 * no room on the CPUs. */
SM_INLINE unsigned SM_FN(cached_count)(long cpu, unsigned cls)
{
    unsigned begin = SM_FN(obj).begin[cls];
    if (!begin)
        return 0;
    unsigned top = __atomic_load_n(SM_FN(header)(cpu, cls), __ATOMIC_RELAXED) & 0xffff;
    return top >= begin ? top - (begin - 1u) : 0;
}

/* Bytes cached on cpu, as cached_count. */
SM_INLINE size_t SM_FN(cached_bytes)(long cpu)
{
    size_t bytes = 0;
    for (unsigned cls = 0; cls < SM_FN(class_count); cls++)
        bytes += (size_t)SM_FN(cached_count)(cpu, cls) * SM_FN(obj).class_bytes[cls];
    return bytes;
}

#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
/* The release clock's pass (r->may_move: its own thread): a CPU holding objects whose slow paths
 * have not run for SM_OPT_IDLE_MS (no refill, no full stack) has its objects given back, by moving
 * this thread onto it (its affinity restored after), as malloc_trim does for every CPU. Programs
 * that ran on more CPUs than they use now, or whose threads left a CPU, get that memory back;
 * a CPU busy only with hits for that long is emptied too and refills on its next misses. Asks the
 * clock back while any CPU still holds objects. */
SM_SLOWPATH void SM_FN(drain_idle)(sm_release_t *r)
{
    sm_rseq_affinity_t saved = { .saved = false };
    bool moved = false;
    /* The once orders this thread after the set-up (another thread ran it); then with rseq only,
     * this thread's own area, which pinning reads the CPU from. */
    sm_plat_once(&SM_FN(obj).once, SM_FN(init_once));
    if (!SM_FN(obj).ready || SM_FN(obj).mode == SM_RSEQ_THREAD || SM_FN(setup)() < 0)
        return;
    for (unsigned cpu = 0; cpu < SM_FN(obj).slots; cpu++) {
        struct SM_FN(cpu) *m = &SM_FN(obj).cpu[cpu];
        if (!__atomic_load_n(&m->ready, __ATOMIC_ACQUIRE))
            continue;
        unsigned long events = __atomic_load_n(&m->events, __ATOMIC_RELAXED);
        if (!SM_FN(cached_bytes)(cpu)) {
            m->quiet = false;
            __atomic_store_n(&m->noted, false, __ATOMIC_RELAXED); /* its next slow path notes again */
            continue;
        }
        if (!m->quiet || events != m->seen) { /* first seen holding, or busy since */
            m->quiet = true;
            m->seen = events;
            m->quiet_ms = r->now_ms;
        } else if (r->now_ms >= m->quiet_ms + (uint64_t)(SM_OPT_IDLE_MS)) {
            if (sm_rseq_pin(cpu, &saved) && SM_FN(setup)() == (long)cpu)
                r->released += SM_FN(drain_here)();
            moved = true;
            m->quiet = false;
            __atomic_store_n(&m->noted, false, __ATOMIC_RELAXED);
            continue;
        }
        sm_release_due(r, m->quiet_ms + (uint64_t)(SM_OPT_IDLE_MS));
    }
    if (moved) {
        sm_rseq_unpin(&saved);
        (void)SM_FN(setup)();
    }
}
#endif

/* A release of everything (malloc_trim): the calling thread's CPU, then, with rseq, every other CPU
 * whose slab is set up, by moving the thread onto each in turn (its affinity restored after); a
 * CPU it may not run on keeps its objects. A thread's release (thread.tcache.flush): its CPU. The
 * release clock's pass: the idle CPUs (drain_idle). */
SM_SLOWPATH SM_UNUSED void SM_FN(release)(sm_release_t *r)
{
#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
    if (r->how == SM_RELEASE_DECAYED && r->may_move && (SM_OPT_IDLE_MS) > 0 && sm_conf.tcache_on &&
        __atomic_load_n(&SM_FN(base), __ATOMIC_ACQUIRE) != NULL) /* set up by some thread */
        SM_FN(drain_idle)(r);
#endif
    if ((r->how == SM_RELEASE_ALL || r->how == SM_RELEASE_THREAD) && SM_FN(obj).ready &&
        !(sm_rseq_virtual < 0 && sm_rseq_tls == &sm_rseq_boot) && SM_FN(setup)() >= 0) {
        r->released += SM_FN(drain_here)();
#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
        if (r->how == SM_RELEASE_ALL && sm_rseq_virtual < 0) {
            sm_rseq_affinity_t saved = { .saved = false };
            unsigned cpus = SM_FN(obj).slots;
            for (unsigned cpu = 0; cpu < cpus; cpu++)
                if (__atomic_load_n(&SM_FN(obj).cpu[cpu].ready, __ATOMIC_ACQUIRE) && sm_rseq_pin(cpu, &saved) &&
                    SM_FN(setup)() == (long)cpu)
                    r->released += SM_FN(drain_here)();
            sm_rseq_unpin(&saved);
            (void)SM_FN(setup)();
        }
#endif
    }
    SM_NEXT_FN(release)(r);
}

/* Statistics: every slab's stacks, read without stopping their CPUs (a count may be a moment old). */
SM_INLINE void SM_FN(stats)(sm_stats_t *s)
{
    sm_stats_layer_t *l = sm_stats_layer(s, SM_LAYER_NAME);
    s->percpu_mode = sm_rseq_mode_name(SM_FN(obj).mode);
    s->percpu_slabs = s->percpu_objects = s->percpu_bytes = 0;
    for (unsigned cpu = 0; SM_FN(obj).ready && cpu < SM_FN(obj).slots; cpu++) {
        if (!__atomic_load_n(&SM_FN(obj).cpu[cpu].ready, __ATOMIC_ACQUIRE))
            continue;
        s->percpu_slabs++;
        for (unsigned cls = 0; cls < SM_FN(class_count); cls++) {
            unsigned n = SM_FN(cached_count)(cpu, cls);
            if (!n)
                continue;
            size_t size = SM_FN(obj).class_bytes[cls];
            sm_stats_class(s, size)->cached += n;
            s->percpu_objects += n;
            s->percpu_bytes += (size_t)n * size;
            l->held += (size_t)n * size;
            l->dirty += (size_t)n * size;
        }
    }
    l->blocks = s->percpu_objects;
    l->metadata += SM_FN(obj).ready ? (size_t)SM_FN(obj).slots * sizeof(struct SM_FN(cpu)) : 0;
    SM_NEXT_FN(stats)(s);
}
#define SM_LAYER_STATS 1

/* A thread on a virtual CPU gives its objects back and frees the CPU for the next thread; with
 * rseq there is nothing of the thread's to give back. */
SM_INLINE void SM_FN(thread_exit)(void)
{
    if (sm_rseq_virtual >= 0 && SM_FN(obj).ready)
        (void)SM_FN(drain_here)();
    SM_NEXT_FN(thread_exit)();
    if (sm_rseq_virtual >= 0)
        SM_FN(here) = (struct SM_FN(here)){ &sm_rseq_boot, -3, 0 };
    sm_rseq_thread_exit();
}

/* Fork: the slabs are consistent at every instant (each change is one store), so the child keeps
 * every CPU's objects; the locks are taken so none is held in the child. */
SM_INLINE void SM_FN(fork_prepare)(void)
{
    for (unsigned i = 0; SM_FN(obj).ready && i < SM_FN(obj).slots; i++)
        sm_plat_lock(&SM_FN(obj).cpu[i].lock);
    sm_rseq_fork_prepare();
    SM_NEXT_FN(fork_prepare)();
}
SM_INLINE void SM_FN(fork_parent)(void)
{
    sm_rseq_fork_parent();
    for (unsigned i = 0; SM_FN(obj).ready && i < SM_FN(obj).slots; i++)
        sm_plat_unlock(&SM_FN(obj).cpu[i].lock);
    SM_NEXT_FN(fork_parent)();
}
SM_INLINE void SM_FN(fork_child)(void)
{
    sm_rseq_fork_child();
    for (unsigned i = 0; SM_FN(obj).ready && i < SM_FN(obj).slots; i++)
        sm_plat_lock_reinit(&SM_FN(obj).cpu[i].lock);
    SM_NEXT_FN(fork_child)();
}

#undef SM_CARR_SLAB
#undef SM_OPT_CPU_BYTES
#undef SM_OPT_CLASS_BYTES
#undef SM_OPT_CAP_MAX
#undef SM_OPT_SLAB_SHIFT
#undef SM_OPT_BATCH_MAX
#undef SM_OPT_BATCH_BYTES
#undef SM_OPT_IDLE_MS
#define SM_LAYER_OFFERS (SM_CAP_HIT | SM_CAP_MOVE)
#include "../../core/layer_end.h"
