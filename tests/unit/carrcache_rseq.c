/* Unit test of the carrcache_rseq add-on layer (per-CPU caches on restartable sequences) over a
 * capability fake (fake_batch, tc):
 *     pc :: fb     cpu_bytes 256 KiB (so the budget is reached), batch 16
 * Every CPU's slab is walked after each case: each class's top within [begin - 1, end], its end
 * within its cap, the room granted equal to the sum of (end - begin + 1) x class size and within
 * cpu_bytes, and every cached object a live object of the fake with the cached tag. Cases: the
 * mode is the one the process must get; a refill of one batch; frees fill a CPU's stack, then the
 * room grows, then a full stack gives half a batch down; room stolen from an idle class when the
 * budget is spent; a double free reported once and ignored; an overwritten tag reported at the
 * pop and the object never handed out twice; release(ALL) empties every CPU's
 * stacks (by moving onto each); threads re-pinned across CPUs with fill patterns; frees while
 * another thread moves the freeing one between CPUs, and a push section made to restart on another
 * CPU after its tag store (a watchpoint), neither reported nor lost; fork; the release clock's pass
 * empties idle CPUs only. */
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"
#include "tests/support/err_record.h"

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"

#define SM_LAYER pc
#define SM_NEXT fb
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_CPU_BYTES (256u << 10)
#define SM_OPT_BATCH_MAX 16
#include <sunmao/layers/addon/carrcache_rseq.h>

_Static_assert(pc_caps == (SM_CAP_HIT | SM_CAP_MOVE) && pc_thread_safe == 1, "properties");
#define FB(field) FAKE_BATCH_GET(fb, field)

static void *alloc(size_t n)
{
    sm_mctx_t c = sm_mctx_alloc(n, 0, SM_F_USER);
    return pc_alloc(&c);
}
static void release(void *p)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    pc_free(&c);
}
static uint32_t header(long cpu, unsigned cls) { return __atomic_load_n(pc_header(cpu, cls), __ATOMIC_RELAXED); }
static unsigned count(long cpu, unsigned cls)
{
    uint32_t h = header(cpu, cls);
    return pc_obj.begin[cls] ? (h & 0xffff) - (pc_obj.begin[cls] - 1u) : 0;
}
static unsigned room(long cpu, unsigned cls)
{
    uint32_t h = header(cpu, cls);
    return pc_obj.begin[cls] ? (h >> 16) - (pc_obj.begin[cls] - 1u) : 0;
}
static size_t cached_total(void)
{
    size_t n = 0;
    for (unsigned cpu = 0; cpu < pc_obj.slots; cpu++)
        if (pc_obj.cpu[cpu].ready)
            for (unsigned cls = 0; cls < pc_class_count; cls++)
                n += count(cpu, cls);
    return n;
}

/* The invariants, on every CPU set up (the test is quiet when it calls this). */
static void walk(void)
{
    for (unsigned cpu = 0; cpu < pc_obj.slots; cpu++) {
        if (!pc_obj.cpu[cpu].ready)
            continue;
        size_t bytes = 0;
        for (unsigned cls = 0; cls < pc_class_count; cls++) {
            if (!pc_obj.begin[cls]) {
                CHECKF(header(cpu, cls) == 0, "cpu %u class %u: uncached class with a header", cpu, cls);
                continue;
            }
            uint32_t h = header(cpu, cls);
            unsigned top = h & 0xffff, end = h >> 16, first = pc_obj.begin[cls] - 1u;
            CHECKF(top >= first && top <= end && end <= first + pc_obj.cap[cls], "cpu %u class %u: top %u end %u first %u",
                   cpu, cls, top, end, first);
            uintptr_t *slab = (uintptr_t *)(pc_base_now() + ((uintptr_t)cpu << pc_shift));
            CHECKF(slab[0] == 0 && slab[first] == 0, "cpu %u class %u: word 0 or the marker word is not 0", cpu, cls);
            for (unsigned i = first + 1; i <= top; i++) {
                uintptr_t *p = (uintptr_t *)slab[i];
                CHECKF(p && p[1] == pc_obj.tag && fb_slab_of(p), "cpu %u class %u: item %u not a tagged object", cpu,
                       cls, i);
            }
            bytes += (size_t)(end - first) * pc_obj.class_bytes[cls];
        }
        CHECKF(bytes == pc_obj.cpu[cpu].room && bytes <= (256u << 10), "cpu %u: room %zu, sum %zu", cpu,
               pc_obj.cpu[cpu].room, bytes);
    }
}

static void mode_chosen(void)
{
    void *p = alloc(64);
    CHECK(p != NULL);
    release(p);
    int mode = sm_rseq.mode;
    CHECKF(mode == SM_RSEQ_GLIBC || mode == SM_RSEQ_OWN || mode == SM_RSEQ_THREAD, "mode %d", mode);
    if (getenv("GLIBC_TUNABLES") && strstr(getenv("GLIBC_TUNABLES"), "rseq=0"))
        CHECKF(mode != SM_RSEQ_GLIBC, "glibc's registration is off, yet the mode is %s", sm_rseq_mode_name(mode));
    printf("# mode %s, %u slots\n", sm_rseq_mode_name(mode), pc_obj.slots);
    walk();
}

static void pin(long cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET((int)cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
}
static void unpin(void)
{
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int i = 0; i < CPU_SETSIZE; i++)
        CPU_SET(i, &all);
    (void)sched_setaffinity(0, sizeof all, &all);
}

static void refill_and_overflow(void)
{
    pin(0);
    long cpu = sm_rseq_cpu();
    unsigned cls = sm_sizeclass_tc_size_to_class(96);
    unsigned long ab = FB(alloc_batch_calls), fbc = FB(free_batch_calls);
    void *p = alloc(96);
    unsigned n = count(cpu, cls);
    CHECKF(p && FB(alloc_batch_calls) >= ab + 1 && n >= 1, "refill: %lu batches, %u cached", FB(alloc_batch_calls) - ab, n);
    check_fill(p, 96, 3);
    /* frees up to the class's cap: each miss grows the room by a batch */
    enum { N = 3000 };
    static void *v[N];
    for (int i = 0; i < N; i++)
        v[i] = alloc(96);
    for (int i = 0; i < N; i++)
        release(v[i]);
    CHECKF(count(cpu, cls) <= pc_obj.cap[cls] && room(cpu, cls) <= pc_obj.cap[cls], "count %u room %u cap %u",
           count(cpu, cls), room(cpu, cls), pc_obj.cap[cls]);
    CHECKF(FB(free_batch_calls) > fbc, "a full stack gave nothing down");
    CHECK(check_verify(p, 96, 3));
    release(p);
    walk();
    unpin();
}

static void budget_and_steal(void)
{
    pin(0);
    long cpu = sm_rseq_cpu();
    /* fill many classes until the 256 KiB are granted, then a new class must steal */
    static void *v[20000];
    int n = 0;
    for (size_t size = 16; size <= 4096 && n < 19000; size += 48)
        for (int i = 0; i < 60 && n < 19000; i++)
            v[n++] = alloc(size);
    for (int i = 0; i < n; i++)
        release(v[i]);
    walk();
    CHECKF(pc_obj.cpu[cpu].room <= (256u << 10), "room %zu", pc_obj.cpu[cpu].room);
    /* take the objects back out and keep them: the classes' stacks are empty, their room stays
     * granted; a class that had none then gets some by stealing that unused room */
    for (int i = 0; i < n; i++)
        v[i] = alloc(16 + (size_t)(i / 60) * 48);
    unsigned big = sm_sizeclass_tc_size_to_class(8192);
    for (int round = 0; round < 40 && !room(cpu, big); round++) {
        void *q[4];
        for (int i = 0; i < 4; i++)
            q[i] = alloc(8192);
        for (int i = 0; i < 4; i++)
            release(q[i]);
    }
    CHECKF(room(cpu, big) > 0, "8 KiB objects got no room on a CPU whose budget other classes hold (room %zu)",
           pc_obj.cpu[cpu].room);
    for (int i = 0; i < n; i++)
        release(v[i]);
    walk();
    unpin();
}

static void double_free_reported(void)
{
    err_reset();
    void *p = alloc(48);
    release(p);
    release(p);
    CHECKF(err_counts[SM_ERR_DOUBLE_FREE] == 1 && err_total() == 1, "%lu double, %lu in all",
           err_counts[SM_ERR_DOUBLE_FREE], err_total());
    void *a = alloc(48), *b = alloc(48);
    CHECK(a != b);
    release(a);
    release(b);
    walk();
}

/* A write after free over the tag, then a second free: the object is on the stack twice; the
 * second pop sees the tag gone, reports it and drops the object instead of handing it out again. */
static void overwritten_tag_never_handed_out_twice(void)
{
    pin(0);
    err_reset();
    void *a = alloc(80);
    release(a);
    ((volatile uintptr_t *)a)[1] = 0;
    release(a);
    void *v[64];
    unsigned same = 0;
    for (int i = 0; i < 64; i++) {
        v[i] = alloc(80);
        same += v[i] == a;
    }
    CHECKF(same == 1, "the object was handed out %u times", same);
    CHECKF(err_counts[SM_ERR_CORRUPTION] == 1 && err_total() == 1, "%lu corruption reports, %lu in all",
           err_counts[SM_ERR_CORRUPTION], err_total());
    for (int i = 0; i < 64; i++)
        release(v[i]);
    walk();
    unpin();
}

static void release_all_empties_every_cpu(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < ncpu && cpu < 8; cpu++) {
        pin(cpu);
        void *v[100];
        for (int i = 0; i < 100; i++)
            v[i] = alloc(32 + (size_t)i * 8);
        for (int i = 0; i < 100; i++)
            release(v[i]);
    }
    unpin();
    CHECK(cached_total() > 0);
    sm_release_t r = { .how = SM_RELEASE_ALL };
    pc_release(&r);
    if (sm_rseq.mode == SM_RSEQ_THREAD) /* only the calling thread's virtual CPU */
        CHECKF(cached_total() == 0, "%zu objects left", cached_total());
    else
        CHECKF(cached_total() == 0 && r.released > 0, "%zu objects left after release(ALL), %zu bytes released",
               cached_total(), r.released);
    walk();
}

static long ncpus;
static void *repin_thread(void *arg)
{
    uintptr_t id = (uintptr_t)arg, bad = 0;
    for (int round = 0; round < 30; round++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET((int)((id + (uintptr_t)round) % (uintptr_t)ncpus), &one);
        sched_setaffinity(0, sizeof one, &one);
        void *v[300];
        for (int i = 0; i < 300; i++) {
            size_t n = 16 + (size_t)((i * 37 + round) % 900);
            v[i] = alloc(n);
            if (!v[i])
                return (void *)(uintptr_t)-1;
            check_fill(v[i], n, (unsigned)(id * 131 + (uintptr_t)i));
        }
        for (int i = 0; i < 300; i++) {
            size_t n = 16 + (size_t)((i * 37 + round) % 900);
            bad += !check_verify(v[i], n, (unsigned)(id * 131 + (uintptr_t)i));
            release(v[i]);
        }
    }
    pc_thread_exit();
    return (void *)bad;
}
static void threads_repinned(void)
{
    ncpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpus < 1)
        ncpus = 1;
    check_threads(8, repin_thread);
    walk();
}

/* Frees while another thread moves this one between CPUs as fast as it can: a push section the
 * migration aborts after it stored the tag, then restarted on the other CPU, fails; the object must
 * not look freed already (it did: a "double free" reported, the object lost). */
struct bounce {
    pid_t tid;
    int stop;
    unsigned long frees, moves;
};
static void *bounce_worker(void *arg)
{
    struct bounce *b = arg;
    __atomic_store_n(&b->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    uintptr_t bad = 0;
    while (!__atomic_load_n(&b->stop, __ATOMIC_RELAXED)) {
        void *v[8];
        for (unsigned i = 0; i < 8; i++) {
            v[i] = alloc(32 + 16 * i);
            if (!v[i])
                return (void *)(uintptr_t)-1;
            ((volatile uintptr_t *)v[i])[1] = 0x5a5a5a5a5a5a5a5aull + i;
        }
        for (unsigned i = 0; i < 8; i++) {
            bad += ((volatile uintptr_t *)v[i])[1] != 0x5a5a5a5a5a5a5a5aull + i;
            release(v[i]);
        }
        b->frees += 8;
    }
    pc_thread_exit();
    return (void *)bad;
}
static void frees_while_migrated(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 2 || sm_rseq.mode == SM_RSEQ_THREAD) {
        check_skip("frees_while_migrated", ncpu < 2 ? "one CPU" : "per-thread mode: no migration aborts");
        return;
    }
    err_reset();
    sm_release_t r = { .how = SM_RELEASE_ALL };
    pc_release(&r);
    size_t live = FB(live_objs); /* every CPU's caches empty: the objects other cases keep */
    struct bounce b = { 0 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, bounce_worker, &b) == 0);
    while (!__atomic_load_n(&b.tid, __ATOMIC_ACQUIRE))
        sched_yield();
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET((int)(b.moves % 2), &one);
        b.moves += sched_setaffinity(b.tid, sizeof one, &one) == 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 1000000000L);
    __atomic_store_n(&b.stop, 1, __ATOMIC_RELAXED);
    void *bad;
    CHECK(pthread_join(t, &bad) == 0);
    printf("# %lu frees over %lu moves\n", b.frees, b.moves);
    CHECKF(bad == NULL, "%lu objects came back changed", (unsigned long)(uintptr_t)bad);
    CHECKF(err_total() == 0, "%lu reports (%lu double frees) from frees that never were double",
           err_total(), err_counts[SM_ERR_DOUBLE_FREE]);
    pc_release(&r);
    CHECKF(FB(live_objs) == live, "%zu objects live below, %zu before: %zd lost", (size_t)FB(live_objs), live,
           (ssize_t)(FB(live_objs) - live));
    walk();
}

/* The same, made certain: a write watchpoint on the freed object's second word traps right after
 * the push section stores the tag, before its commit; the trap's signal aborts the section and its
 * handler moves the thread to another CPU, so the restarted section fails there. The free must
 * still land (in the other CPU's cache or below), with no report. */
static int watch_fd = -1;
static long watch_to = -1;
static void on_watch(int sig)
{
    (void)sig;
    if (watch_fd >= 0)
        ioctl(watch_fd, PERF_EVENT_IOC_DISABLE, 0); /* the first write only */
    if (watch_to >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET((int)watch_to, &one);
        sched_setaffinity(0, sizeof one, &one);
        watch_to = -1;
    }
}
static void push_restarted_on_another_cpu(void)
{
    if (sm_rseq.mode == SM_RSEQ_THREAD || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        check_skip("push_restarted_on_another_cpu", "needs rseq and two CPUs");
        return;
    }
    err_reset();
    sm_release_t r = { .how = SM_RELEASE_ALL };
    pc_release(&r);
    size_t live = FB(live_objs);
    pin(0);
    void *keep = alloc(48), *p = alloc(48); /* keep: the CPU's cache is set up and has room */
    release(keep);
    long from = sm_rseq_cpu();
    struct perf_event_attr pe = { .type = PERF_TYPE_BREAKPOINT, .size = sizeof pe, .bp_type = HW_BREAKPOINT_W,
                                  .bp_addr = (uintptr_t)p + 8, .bp_len = HW_BREAKPOINT_LEN_8, .sample_period = 1,
                                  .disabled = 1, .exclude_kernel = 1, .exclude_hv = 1 };
    watch_fd = (int)syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0);
    struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = (pid_t)syscall(SYS_gettid) };
    struct sigaction sa = { .sa_handler = on_watch }, old;
    if (watch_fd < 0 || fcntl(watch_fd, F_SETOWN_EX, &owner) != 0 || fcntl(watch_fd, F_SETSIG, SIGUSR2) != 0 ||
        fcntl(watch_fd, F_SETFL, O_ASYNC) != 0) {
        check_skip("push_restarted_on_another_cpu", "no hardware watchpoint here (perf_event_open)");
        if (watch_fd >= 0)
            close(watch_fd);
        watch_fd = -1;
        release(p);
        unpin();
        return;
    }
    sigaction(SIGUSR2, &sa, &old);
    watch_to = from == 0 ? 1 : 0;
    ioctl(watch_fd, PERF_EVENT_IOC_ENABLE, 0);
    release(p);
    ioctl(watch_fd, PERF_EVENT_IOC_DISABLE, 0);
    long moved = sm_rseq_cpu();
    close(watch_fd);
    watch_fd = -1;
    sigaction(SIGUSR2, &old, NULL);
    if (watch_to != -1) { /* a machine whose perf events take breakpoints but never raise them */
        watch_to = -1;
        check_skip("push_restarted_on_another_cpu", "the watchpoint was set but never fired");
        unpin();
        return;
    }
    CHECKF(moved != from, "the watchpoint fired but the thread is still on CPU %ld", moved);
    CHECKF(err_total() == 0, "%lu reports (%lu double frees) for one free", err_total(), err_counts[SM_ERR_DOUBLE_FREE]);
    void *again = alloc(48); /* p is the top of this CPU's stack, or below */
    CHECKF(((uintptr_t *)again)[1] == 0, "a handed-out object still marked cached");
    release(again);
    unpin();
    pc_release(&r);
    CHECKF(FB(live_objs) == live, "%zu objects live below, %zu before: the free was lost", (size_t)FB(live_objs), live);
    walk();
}

static void fork_keeps_caches(void)
{
    void *v[50];
    for (int i = 0; i < 50; i++)
        v[i] = alloc(200);
    for (int i = 0; i < 50; i++)
        release(v[i]);
    pc_fork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        pc_fork_child();
        int bad = 0;
        for (int r = 0; r < 20; r++) {
            void *w[100];
            for (int i = 0; i < 100; i++) {
                w[i] = alloc(200);
                check_fill(w[i], 200, (unsigned)i);
            }
            for (int i = 0; i < 100; i++) {
                bad += !check_verify(w[i], 200, (unsigned)i);
                release(w[i]);
            }
        }
        _exit(bad ? 3 : 0);
    }
    pc_fork_parent();
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    walk();
}

/* The release clock's pass (may_move) empties a CPU holding objects once it has taken no slow
 * path for SM_OPT_IDLE_MS (1000 here), by moving onto it; a CPU with a miss in between is left
 * for the next period, and the clock is asked back while a CPU holds objects. A pass without
 * may_move moves nothing. The times are the test's own. */
static size_t cached_on(long cpu)
{
    size_t n = 0;
    for (unsigned cls = 0; cls < pc_class_count; cls++)
        n += count(cpu, cls);
    return n;
}
static void fill_here(size_t size)
{
    void *v[50];
    for (unsigned i = 0; i < 50; i++) {
        v[i] = alloc(size);
        check_fill(v[i], size, i);
    }
    for (unsigned i = 0; i < 50; i++) {
        CHECKF(check_verify(v[i], size, i), "object %u damaged", i);
        release(v[i]);
    }
}
/* One pass, on a thread of its own that has made no request, as the release clock's: its affinity
 * must be what it was after the pass. */
typedef struct { sm_release_t r; bool affinity_kept; } pass_t;
static void *pass_main(void *arg)
{
    pass_t *p = arg;
    cpu_set_t before, after;
    bool got = sched_getaffinity(0, sizeof before, &before) == 0;
    pc_release(&p->r);
    p->affinity_kept = got && sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&before, &after);
    return NULL;
}
static sm_release_t pass(uint64_t now_ms, int may_move)
{
    pass_t p = { sm_release_request(now_ms, SM_RELEASE_DECAYED), false };
    p.r.may_move = may_move;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, pass_main, &p) == 0 && pthread_join(t, NULL) == 0);
    CHECKF(p.affinity_kept, "the pass at %llu ms did not restore its thread's affinity", (unsigned long long)now_ms);
    return p.r;
}
static void idle_cpus_emptied(void)
{
    if (sm_rseq.mode == SM_RSEQ_THREAD || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        check_skip("idle_cpus_emptied", "needs rseq and two CPUs");
        return;
    }
    err_reset();
    pin(0);
    fill_here(48);
    long a = sm_rseq_cpu();
    pin(1);
    fill_here(48);
    long b = sm_rseq_cpu();
    unpin();
    CHECKF(a != b && cached_on(a) > 0 && cached_on(b) > 0, "CPUs %ld and %ld hold %zu and %zu objects", a, b,
           cached_on(a), cached_on(b));
    const uint64_t t = 1000000;
    sm_release_t r = pass(t + 5000, 0); /* not the clock's thread */
    CHECKF(cached_on(a) > 0 && cached_on(b) > 0 && r.next_ms == UINT64_MAX, "a pass without may_move acted");

    r = pass(t, 1);
    CHECKF(cached_on(a) > 0 && cached_on(b) > 0 && r.released == 0 && r.next_ms == t + 1000,
           "first pass: %zu and %zu objects, %zu bytes released, next at %+lld ms", cached_on(a), cached_on(b),
           r.released, (long long)(r.next_ms - t));

    pin(0);
    fill_here(2000); /* a miss on CPU a: a class it had not cached */
    unpin();
    size_t on_b = cached_on(b);
    r = pass(t + 1000, 1);
    CHECKF(cached_on(b) == 0 && cached_on(a) > 0 && r.released >= on_b * 48 && r.next_ms == t + 2000,
           "second pass: %zu and %zu objects left, %zu bytes released, next at %+lld ms", cached_on(a),
           cached_on(b), r.released, (long long)(r.next_ms - t));

    r = pass(t + 2000, 1);
    CHECKF(cached_on(a) == 0 && r.released > 0 && r.next_ms == UINT64_MAX,
           "third pass: %zu objects left on CPU %ld, next at %+lld ms", cached_on(a), a, (long long)(r.next_ms - t));
    pin(1);
    fill_here(48); /* emptied CPUs cache again */
    unpin();
    CHECK(cached_on(b) > 0 && err_total() == 0);
    walk();
}

int main(void)
{
    check_begin("carrcache_rseq");
    sm_err_callback_set(on_error);
    CHECK(pc_create() == 0);
    RUN_CASE(mode_chosen);
    RUN_CASE(refill_and_overflow);
    RUN_CASE(budget_and_steal);
    RUN_CASE(double_free_reported);
    RUN_CASE(overwritten_tag_never_handed_out_twice);
    RUN_CASE(release_all_empties_every_cpu);
    RUN_CASE(threads_repinned);
    RUN_CASE(frees_while_migrated);
    RUN_CASE(push_restarted_on_another_cpu);
    RUN_CASE(fork_keeps_caches);
    RUN_CASE(idle_cpus_emptied);
    return check_failures_total != 0;
}
