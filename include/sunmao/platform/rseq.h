/* Restartable sequences (rseq): which CPU a thread runs on, and short critical sections on that
 * CPU's data that the kernel restarts when the thread is preempted, migrated or signalled. The
 * service a per-CPU cache (layers/addon/carrcache_rseq.h) is built on. Framework platform.
 *
 * The mode, decided once per process by the first thread that asks (sm_rseq_thread_setup):
 *   SM_RSEQ_GLIBC   glibc (2.35 and later) registered an area for every thread: it is used as it is,
 *                   found through the weak symbols __rseq_offset / __rseq_size; nothing is registered
 *   SM_RSEQ_OWN     no glibc registration (older glibc, musl, GLIBC_TUNABLES=glibc.pthread.rseq=0):
 *                   each thread registers an area of ours, once, on its first slow path
 *   SM_RSEQ_THREAD  no rseq at all (old kernel, a seccomp filter, not x86-64, freestanding): each
 *                   thread gets a *virtual CPU* of its own, an index above the real CPUs' that it
 *                   alone uses, so the same sections run unprotected and a per-CPU cache becomes a
 *                   per-thread one. Indices are reused after their thread exits.
 * Only the fields of the original 20-byte ABI are read (cpu_id) or written (rseq_cs): never
 * cpu_id_start, node_id or mm_cid, and nothing is kept on top of the area.
 *
 * The sections. A thread's area pointer (sm_rseq_tls) starts at a shared boot area whose cpu_id is
 * -1, the kernel's "not registered". The caller keeps, per thread, the CPU it was on at its last
 * slow path and that CPU's slab; a pop or push section compares the cpu_id it reads inside itself
 * with that CPU and misses, changing nothing, when they differ (a migration, a thread not set up:
 * the caller starts with a CPU no area has). So the slab's address is no step of the section's
 * chain of loads. A zero header is a stack that is empty and full at once: a section changes
 * nothing there either. A per-CPU slab (little-endian words):
 *   word 0          always 0
 *   byte 8 + 4 c    class c's header: u16 top (the word index of its last item), u16 end (the most
 *                   top may reach); a class with no items has top = begin(c) - 1, a word that
 *                   stays 0, so "the item at top is 0" is the empty test and needs no table
 * pop: item = slab[top]; 0: empty; else commit top - 1. push: top >= end: full; else store the item
 * at top + 1, commit top + 1. set_end: if the thread is still on cpu and end is `old`, commit end.
 * Each commit is one 16-bit store, the last instruction of the section; an aborted section restarts
 * from its beginning. Sections on one CPU never interleave, so they need no atomic instruction.
 * x86-64 only; elsewhere the mode is always SM_RSEQ_THREAD and the sections are plain C. */
#ifndef SUNMAO_PLATFORM_RSEQ_H
#define SUNMAO_PLATFORM_RSEQ_H

#include "platform.h" /* included by it, last */

#if defined(__x86_64__) && !(defined(SM_FREESTANDING) && SM_FREESTANDING)
#define SM_RSEQ_ASM 1
#else
#define SM_RSEQ_ASM 0
#endif

/* The kernel's struct rseq, its first 32 bytes (the length registered). */
struct sm_rseq_area {
    uint32_t cpu_id_start, cpu_id;
    uint64_t rseq_cs;
    uint32_t flags, pad[3];
} __attribute__((aligned(32)));

enum sm_rseq_mode { SM_RSEQ_UNDECIDED, SM_RSEQ_GLIBC, SM_RSEQ_OWN, SM_RSEQ_THREAD };
enum {
    SM_RSEQ_SIG = 0x53053053,    /* glibc's and the kernel selftests' x86 signature */
    SM_RSEQ_VIRTUAL_MAX = 1024,  /* SM_RSEQ_THREAD: threads beyond this many at once go uncached */
    SM_RSEQ_AFFINITY_WORDS = 64, /* sm_rseq_pin: 4096 CPUs */
};

/* Threads not set up use this area: cpu_id -1, which no caller's CPU is, so every section misses.
 * Its rseq_cs is written by such threads' sections and never read. */
static struct sm_rseq_area sm_rseq_boot SM_UNUSED = { .cpu_id = (uint32_t)-1 };
static __thread struct sm_rseq_area *sm_rseq_tls __attribute__((tls_model("initial-exec"), unused)) = &sm_rseq_boot;
/* SM_RSEQ_OWN: the area this thread registers; SM_RSEQ_THREAD: where its virtual CPU is kept. */
static __thread struct sm_rseq_area sm_rseq_own __attribute__((tls_model("initial-exec"), unused)) = {
    .cpu_id = (uint32_t)-1
};
static __thread int sm_rseq_virtual __attribute__((tls_model("initial-exec"), unused)) = -1;
/* The thread gave its virtual CPU back (it is exiting): it gets no other. */
static __thread bool sm_rseq_retired __attribute__((tls_model("initial-exec"), unused));

static struct {
    sm_plat_once_t once;
    int mode;             /* enum sm_rseq_mode */
    unsigned cpus;        /* possible CPUs: every cpu_id the kernel gives is below */
    sm_plat_lock_t lock;  /* the virtual CPUs' bitmap */
    uint64_t used[SM_RSEQ_VIRTUAL_MAX / 64];
} sm_rseq = { .once = SM_PLAT_ONCE_INIT, .lock = SM_PLAT_LOCK_INIT };

static inline const char *sm_rseq_mode_name(int mode)
{
    return mode == SM_RSEQ_GLIBC ? "rseq-glibc" : mode == SM_RSEQ_OWN ? "rseq-own" : mode == SM_RSEQ_THREAD ? "per-thread" : "off";
}

/* Slabs a per-CPU cache needs: the CPUs, and the virtual ones in
 * SM_RSEQ_THREAD. Valid once the mode is decided. */
static inline unsigned sm_rseq_slots(void)
{
    return sm_rseq.cpus + (sm_rseq.mode == SM_RSEQ_THREAD ? SM_RSEQ_VIRTUAL_MAX : 0);
}

#if SM_RSEQ_ASM
/* glibc's __rseq_offset and __rseq_size: weak, declared in platform/linux.h (sm_plat_cpu reads
 * them too). */

/* The descriptor (32-byte aligned, immortal, in its own section) and the abort handler (preceded
 * by the signature, outside the section, back to its start), for a section from 1: to 2:. */
#define SM_RSEQ_SECTION_HEAD                                                       \
    ".pushsection __rseq_cs, \"aw\"\n\t.balign 32\n"                              \
    "3:\n\t.long 0, 0\n\t.quad 1f, 2f - 1f, 4f\n\t.popsection\n\t"                \
    ".pushsection .text.sm_rseq_abort, \"ax\"\n\t.long 0x53053053\n"                   \
    "4:\n\tjmp 1f\n\t.popsection\n"

/* SM_RSEQ_POP(area, cpu, slab, hdr, item): item (a uintptr_t lvalue) = the top of class hdr's
 * stack (hdr: its header's byte offset) in slab, taken off, if the thread is still on cpu (the
 * caller's cached pair: the section compares, so the slab's address is no load of the chain);
 * 0 when it is not, or the stack is empty. */
#define SM_RSEQ_POP(area_, cpu_, slab_, hdr_, item_)                                               \
    do {                                                                                           \
        uintptr_t on_, top_;                                                                       \
        __asm__ __volatile__(SM_RSEQ_SECTION_HEAD                                                  \
                             "1:\n\t"                                                              \
                             "leaq 3b(%%rip), %[it]\n\t"                                           \
                             "movq %[it], 8(%[area])\n\t"                                          \
                             "movslq 4(%[area]), %[on]\n\t"                                        \
                             "xorl %k[it], %k[it]\n\t"                                             \
                             "cmpq %[cpu], %[on]\n\t"                                              \
                             "jne 2f\n\t"                                                          \
                             "movzwl (%[slab],%[hdr]), %k[top]\n\t"                                \
                             "movq (%[slab],%[top],8), %[it]\n\t"                                  \
                             "testq %[it], %[it]\n\t"                                              \
                             "jz 2f\n\t"                                                           \
                             "decl %k[top]\n\t"                                                    \
                             "movw %w[top], (%[slab],%[hdr])\n"                                    \
                             "2:\n"                                                                \
                             : [on] "=&r"(on_), [top] "=&r"(top_), [it] "=&r"(item_)               \
                             : [area] "r"(area_), [cpu] "r"(cpu_), [slab] "r"(slab_), [hdr] "r"(hdr_) \
                             : "memory", "cc");                                                    \
    } while (0)

/* SM_RSEQ_PUSH(area, cpu, slab, hdr, item, tag, ok): puts item on top of class hdr's stack in slab
 * if the thread is still on cpu, and tag in its second word (before the commit: a section that
 * restarts stores it again); ok (a bool lvalue) false when the thread moved or the stack is full.
 * A false ok leaves the stack as it was, but not always item: a section preempted between the tag
 * and the commit restarts, and when it finds the thread on another CPU, fails with the tag stored
 * (the caller puts the word back if it matters). ok is the carry flag: 0 after the xor that
 * compares the CPUs, and after the room test when it fails; 1 when it passes, which nothing after
 * it changes (incl and mov leave it). top and end are read as two 16-bit loads, not one 32-bit
 * one: a pop's 16-bit commit just before forwards to a load of the same width only (one wide load
 * after it stalled a malloc+free pair 2.5 ns). */
#define SM_RSEQ_PUSH(area_, cpu_, slab_, hdr_, item_, tag_, ok_)                                   \
    do {                                                                                           \
        uintptr_t on_, top_, end_;                                                                 \
        __asm__ __volatile__(SM_RSEQ_SECTION_HEAD                                                  \
                             "1:\n\t"                                                              \
                             "leaq 3b(%%rip), %[top]\n\t"                                          \
                             "movq %[top], 8(%[area])\n\t"                                         \
                             "movslq 4(%[area]), %[on]\n\t"                                        \
                             "xorq %[cpu], %[on]\n\t"                                              \
                             "jnz 2f\n\t"                                                          \
                             "movzwl (%[slab],%[hdr]), %k[top]\n\t"                                \
                             "movzwl 2(%[slab],%[hdr]), %k[end]\n\t"                               \
                             "cmpl %k[end], %k[top]\n\t"                                           \
                             "jae 2f\n\t"                                                          \
                             "incl %k[top]\n\t"                                                    \
                             "movq %[it], (%[slab],%[top],8)\n\t"                                  \
                             "movq %[tag], 8(%[it])\n\t"                                           \
                             "movw %w[top], (%[slab],%[hdr])\n"                                    \
                             "2:\n"                                                                \
                             : [on] "=&r"(on_), [top] "=&r"(top_), [end] "=&r"(end_), "=@ccb"(ok_) \
                             : [area] "r"(area_), [cpu] "r"(cpu_), [slab] "r"(slab_), [hdr] "r"(hdr_), \
                               [it] "r"(item_), [tag] "r"(tag_)                                    \
                             : "memory");                                                          \
    } while (0)

/* If the thread is on cpu, class hdr's end there is `old` and its top at most new_end, makes the
 * end new_end (a class's room grows or shrinks, never below its items); else false. */
static inline bool sm_rseq_set_end(struct sm_rseq_area *area, uintptr_t base, unsigned shift, uintptr_t hdr, long cpu,
                                   unsigned old, unsigned new_end)
{
    uintptr_t slab, word, half;
    unsigned ok;
    __asm__ __volatile__(SM_RSEQ_SECTION_HEAD
                         "1:\n\t"
                         "xorl %[ok], %[ok]\n\t"
                         "leaq 3b(%%rip), %[word]\n\t"
                         "movq %[word], 8(%[area])\n\t"
                         "movslq 4(%[area]), %[slab]\n\t"
                         "cmpq %[cpu], %[slab]\n\t"
                         "jne 2f\n\t"
                         "shlq %%cl, %[slab]\n\t"
                         "addq %[base], %[slab]\n\t"
                         "movl (%[slab],%[hdr]), %k[word]\n\t"
                         "movl %k[word], %k[half]\n\t"
                         "shrl $16, %k[half]\n\t"
                         "cmpl %[old], %k[half]\n\t"
                         "jne 2f\n\t"
                         "movzwl %w[word], %k[half]\n\t"
                         "cmpl %[new_end], %k[half]\n\t"
                         "ja 2f\n\t"
                         "movl $1, %[ok]\n\t"
                         "movw %w[new_end], 2(%[slab],%[hdr])\n"
                         "2:\n"
                         : [slab] "=&r"(slab), [word] "=&r"(word), [half] "=&r"(half), [ok] "=&r"(ok)
                         : [area] "r"(area), [base] "r"(base), "c"(shift), [hdr] "r"(hdr), [cpu] "r"(cpu),
                           [old] "r"(old), [new_end] "r"(new_end)
                         : "memory", "cc");
    return ok;
}
#else
/* No rseq here: only SM_RSEQ_THREAD, where a slab has one user, so the same steps in plain C. */
static inline uint16_t *sm_rseq_hdr_(struct sm_rseq_area *area, uintptr_t base, unsigned shift, uintptr_t hdr)
{
    intptr_t cpu = (int32_t)area->cpu_id;
    return (uint16_t *)(base + (uintptr_t)(cpu * ((intptr_t)1 << shift)) + hdr);
}
static inline void *sm_rseq_pop_(uintptr_t slab, uintptr_t hdr)
{
    uint16_t *h = (uint16_t *)(slab + hdr);
    uintptr_t *slot = (uintptr_t *)slab;
    void *item = (void *)slot[h[0]];
    if (item)
        h[0]--;
    return item;
}
static inline bool sm_rseq_push_(uintptr_t slab, uintptr_t hdr, void *item, uintptr_t tag)
{
    uint16_t *h = (uint16_t *)(slab + hdr);
    uintptr_t *slot = (uintptr_t *)slab;
    if (h[0] >= h[1])
        return false;
    slot[h[0] + 1] = (uintptr_t)item;
    ((uintptr_t *)item)[1] = tag;
    h[0]++;
    return true;
}
#define SM_RSEQ_POP(area, cpu, slab, hdr, item)                                                    \
    ((item) = (int32_t)(area)->cpu_id == (cpu) ? (uintptr_t)sm_rseq_pop_((uintptr_t)(slab), hdr) : 0)
#define SM_RSEQ_PUSH(area, cpu, slab, hdr, item, tag, ok)                                          \
    ((ok) = (int32_t)(area)->cpu_id == (cpu) && sm_rseq_push_((uintptr_t)(slab), hdr, item, tag))
static inline bool sm_rseq_set_end(struct sm_rseq_area *area, uintptr_t base, unsigned shift, uintptr_t hdr, long cpu,
                                   unsigned old, unsigned new_end)
{
    if ((int32_t)area->cpu_id != cpu)
        return false;
    uint16_t *h = sm_rseq_hdr_(area, base, shift, hdr);
    if (h[1] != old || h[0] > new_end)
        return false;
    h[1] = (uint16_t)new_end;
    return true;
}
#endif

/* The CPU a set-up thread's sections use now (a hint: it may move at once); negative: none. */
static inline long sm_rseq_cpu(void) { return (int32_t)__atomic_load_n(&sm_rseq_tls->cpu_id, __ATOMIC_RELAXED); }

#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
/* Possible CPUs, from the kernel's list ("0-3,8-11": the last one + 1): cpu_id is always below. */
static inline unsigned sm_rseq_possible_cpus(void)
{
    char line[256];
    size_t n = sm_plat_read_line("/sys/devices/system/cpu/possible", line, sizeof line);
    unsigned last = 0, value = 0;
    bool digits = false;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && line[i] >= '0' && line[i] <= '9') {
            value = value * 10 + (unsigned)(line[i] - '0');
            digits = true;
        } else {
            if (digits && value > last)
                last = value;
            value = 0;
            digits = false;
        }
    }
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    unsigned cpus = last + 1;
    if (conf > 0 && (unsigned long)conf > cpus)
        cpus = (unsigned)conf;
    return cpus > 65536 ? 65536 : cpus;
}

#if SM_RSEQ_ASM
#ifndef SYS_rseq
#define SYS_rseq 334 /* x86-64 */
#endif
/* Registers this thread's own area: 0, or the errno. */
static inline int sm_rseq_register_own(void)
{
    if (syscall(SYS_rseq, &sm_rseq_own, (unsigned)sizeof sm_rseq_own, 0, SM_RSEQ_SIG) == 0)
        return 0;
    return errno == EBUSY ? 0 : errno; /* EBUSY: this very area is registered already */
}
#endif

static inline void sm_rseq_decide(void)
{
    sm_rseq.cpus = sm_rseq_possible_cpus();
    int mode = SM_RSEQ_THREAD;
#if SM_RSEQ_ASM
    if (&__rseq_size && &__rseq_offset && __rseq_size >= 20) {
        struct sm_rseq_area *glibc = (struct sm_rseq_area *)(sm_plat_self() + (uintptr_t)__rseq_offset);
        if ((int32_t)__atomic_load_n(&glibc->cpu_id, __ATOMIC_RELAXED) >= 0)
            mode = SM_RSEQ_GLIBC;
    } else if (sm_rseq_register_own() == 0) {
        mode = SM_RSEQ_OWN;
    }
#endif
    __atomic_store_n(&sm_rseq.mode, mode, __ATOMIC_RELEASE);
}

/* The mode, decided on the first call. */
static inline int sm_rseq_mode(void)
{
    sm_plat_once(&sm_rseq.once, sm_rseq_decide);
    return sm_rseq.mode;
}

/* Sets the calling thread up for sections (slow path; idempotent): true when its sections now run
 * on a real or virtual CPU of its own, false when it has none (glibc's registration
 * failed for it, the kernel refused ours, or every virtual CPU is taken: the caller serves it
 * uncached, and asks again later). */
static inline bool sm_rseq_thread_setup(void)
{
    if (sm_rseq_tls != &sm_rseq_boot)
        return sm_rseq_cpu() >= 0;
    if (sm_rseq_retired)
        return false;
    switch (sm_rseq_mode()) {
#if SM_RSEQ_ASM
    case SM_RSEQ_GLIBC: {
        struct sm_rseq_area *glibc = (struct sm_rseq_area *)(sm_plat_self() + (uintptr_t)__rseq_offset);
        if ((int32_t)__atomic_load_n(&glibc->cpu_id, __ATOMIC_RELAXED) < 0)
            return false;
        sm_rseq_tls = glibc;
        return true;
    }
    case SM_RSEQ_OWN:
        if (sm_rseq_register_own() != 0)
            return false;
        sm_rseq_tls = &sm_rseq_own;
        return true;
#endif
    default: {
        int v = -1;
        sm_plat_lock(&sm_rseq.lock);
        for (unsigned w = 0; w < SM_RSEQ_VIRTUAL_MAX / 64 && v < 0; w++)
            if (~sm_rseq.used[w]) {
                unsigned bit = (unsigned)__builtin_ctzll(~sm_rseq.used[w]);
                sm_rseq.used[w] |= (uint64_t)1 << bit;
                v = (int)(w * 64 + bit);
            }
        sm_plat_unlock(&sm_rseq.lock);
        if (v < 0)
            return false;
        sm_rseq_virtual = v;
        sm_rseq_own.cpu_id = sm_rseq.cpus + (unsigned)v;
        sm_rseq_tls = &sm_rseq_own;
        return true;
    }
    }
}

/* The calling thread is exiting (after its caches gave their virtual CPU's objects back): its
 * virtual CPU is free for the next thread. Idempotent; nothing to do with rseq, whose CPUs stay. */
static inline void sm_rseq_thread_exit(void)
{
    if (sm_rseq_virtual < 0)
        return;
    int v = sm_rseq_virtual;
    sm_rseq_virtual = -1;
    sm_rseq_retired = true;
    sm_rseq_own.cpu_id = (uint32_t)-1;
    sm_rseq_tls = &sm_rseq_boot;
    sm_plat_lock(&sm_rseq.lock);
    sm_rseq.used[v / 64] &= ~((uint64_t)1 << (v % 64));
    sm_plat_unlock(&sm_rseq.lock);
}

/* Fork: the child has one thread, the caller, whose virtual CPU (if any) is the only one in use;
 * the others' slabs keep their objects for the child's next threads. The kernel keeps the forking
 * thread's rseq registration in the child. */
static inline void sm_rseq_fork_prepare(void) { sm_plat_lock(&sm_rseq.lock); }
static inline void sm_rseq_fork_parent(void) { sm_plat_unlock(&sm_rseq.lock); }
static inline void sm_rseq_fork_child(void)
{
    sm_plat_lock_reinit(&sm_rseq.lock);
    memset(sm_rseq.used, 0, sizeof sm_rseq.used);
    if (sm_rseq_virtual >= 0)
        sm_rseq.used[sm_rseq_virtual / 64] |= (uint64_t)1 << (sm_rseq_virtual % 64);
}

/* The calling thread's affinity, as the kernel's bitmap (raw system calls: cpu_set_t needs
 * _GNU_SOURCE, which this platform does not ask of its includers). */
typedef struct {
    unsigned long bits[SM_RSEQ_AFFINITY_WORDS];
    bool saved;
} sm_rseq_affinity_t;

/* Moves the calling thread onto CPU cpu (to work on that CPU's slab with sections), saving its
 * affinity first into *a (sm_rseq_unpin restores it); false if it may not run there. */
static inline bool sm_rseq_pin(unsigned cpu, sm_rseq_affinity_t *a)
{
    const unsigned word_bits = 8 * sizeof(unsigned long);
    if (!a->saved) {
        memset(a->bits, 0, sizeof a->bits);
        if (syscall(SYS_sched_getaffinity, 0, sizeof a->bits, a->bits) < 0)
            return false;
        a->saved = true;
    }
    if (cpu >= SM_RSEQ_AFFINITY_WORDS * word_bits || !(a->bits[cpu / word_bits] >> (cpu % word_bits) & 1))
        return false;
    unsigned long one[SM_RSEQ_AFFINITY_WORDS];
    memset(one, 0, sizeof one);
    one[cpu / word_bits] = 1ul << (cpu % word_bits);
    if (syscall(SYS_sched_setaffinity, 0, sizeof one, one) != 0)
        return false;
    return sm_rseq_cpu() == (long)cpu;
}
static inline void sm_rseq_unpin(sm_rseq_affinity_t *a)
{
    if (a->saved)
        (void)syscall(SYS_sched_setaffinity, 0, sizeof a->bits, a->bits);
}
#else
/* Freestanding: one CPU, no threads; its one thread gets virtual CPU 0. */
static inline int sm_rseq_mode(void)
{
    sm_rseq.cpus = 1;
    sm_rseq.mode = SM_RSEQ_THREAD;
    return sm_rseq.mode;
}
static inline bool sm_rseq_thread_setup(void)
{
    sm_rseq_mode();
    sm_rseq_own.cpu_id = 1;
    sm_rseq_virtual = 0;
    sm_rseq_tls = &sm_rseq_own;
    return true;
}
static inline void sm_rseq_thread_exit(void) {}
static inline void sm_rseq_fork_prepare(void) {}
static inline void sm_rseq_fork_parent(void) {}
static inline void sm_rseq_fork_child(void) {}
#endif

#endif /* SUNMAO_PLATFORM_RSEQ_H */
