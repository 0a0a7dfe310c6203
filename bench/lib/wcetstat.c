/* libwcetstat.so: the Mortise paper's malloc_heap::wcet_stat (§4.3), a latency meter for whatever
 * allocator is loaded after it in the process:
 *
 *     LD_PRELOAD=build/bench/libwcetstat.so:/path/to/libX.so prog     times allocator X
 *     LD_PRELOAD=build/bench/libwcetstat.so prog                      times the C library's malloc
 *
 *   malloc_heap(next malloc/free/memalign, found with dlsym(RTLD_NEXT)) :: wcet_stat :: malloc_socket
 *
 * Not an instance (instances/ are whole allocators, each run through the allocator test suites):
 * built by the Makefile into $(BUILD)/bench/libwcetstat.so, used by bench/harness.py's
 * `wcetstat+<alloc>` allocators and tests/bench/wcetstat.sh.
 *
 * What a sample is: one malloc and one free in SM_OPT_SAMPLE_EVERY (8), per thread, are timed with
 * the cycle counter around the malloc_heap layer's request, that is the next allocator's call plus
 * malloc_heap's own work: its 16-byte header in front of every block (16 bytes more asked of the
 * next allocator, a tag computed and written on malloc, read and checked and wiped on free). So the
 * figures are those of allocator X for sizes 16 bytes larger, plus a few nanoseconds. The socket
 * above (argument checks, calloc's memset) is outside the timed region. realloc goes through the
 * socket as malloc + copy + free (malloc_heap cannot grow a block in place), so a program's
 * reallocs show up as timed mallocs and frees. Percentiles are the wcet_stat histogram's bucket tops
 * (at most 12.5% above the true value; layers/addon/wcet_stat.h), converted to nanoseconds with the
 * counter's rate measured against CLOCK_MONOTONIC over the process's life.
 *
 * The report is made when the process exits normally (exit, return from main; not _exit, not a
 * signal) and holds the counts of the threads that have exited and of the exiting thread; threads
 * still running at exit are not counted. It goes to the file SUNMAO_WCET_OUT names (created or
 * truncated; "%p" in the name is replaced by the process id, for programs that fork and exit in
 * the child), else to stderr (a copy of file descriptor 2 taken at start-up, numbered 100 or
 * above, so that a program closing its stderr at exit does not lose the report):
 *     # wcetstat: ...                 (a comment line)
 *     metric <name> <value>          (the harness's format: pid, ns_per_cycle, sample_every,
 *                                     header_bytes, boot_bytes, next_dlsym, then malloc_samples,
 *                                     malloc_p90 .. malloc_p99.9999, malloc_max, and free_*, in ns;
 *                                     "inf" for a value above the histogram's cap, 2^23 cycles)
 *     wcet_stat wcetstat malloc: ...  (the layer's own report lines)
 *
 * Start-up: the next allocator's functions are looked up on the first request (or in the
 * constructor, whichever comes first). dlsym may itself call malloc or calloc before they are
 * known; those requests (and any other thread's while the look-up runs) are served from a small
 * static buffer, whose blocks free recognises and ignores. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sunmao/policies/err/warn.h>

/* ---- The next allocator ---- */

static void *wcetstat_next_malloc(size_t size);
static void wcetstat_next_free(void *ptr);
static void *wcetstat_next_memalign(size_t align, size_t size);

#define SM_LAYER wcetstat_os
#define SM_ERR warn
#define SM_OPT_MALLOC_FN wcetstat_next_malloc
#define SM_OPT_FREE_FN wcetstat_next_free
#define SM_OPT_MEMALIGN_FN wcetstat_next_memalign
#include <sunmao/os/malloc_heap.h>

#define SM_LAYER wcetstat
#define SM_NEXT wcetstat_os
#define SM_OPT_SAMPLE_EVERY 8
#define SM_OPT_REPORT_AT_EXIT 0 /* the report below goes where SUNMAO_WCET_OUT says */
#include <sunmao/layers/addon/wcet_stat.h>

#define SM_NEXT wcetstat
#define SM_ERR warn
#include <sunmao/sockets/malloc_socket.h>

enum { WCETSTAT_SAMPLE_EVERY = 8, WCETSTAT_BOOT = 64 << 10 };

static void *(*wcetstat_malloc_fn)(size_t);
static void (*wcetstat_free_fn)(void *);
static void *(*wcetstat_memalign_fn)(size_t, size_t);
static int wcetstat_ready;     /* the three above are set (release / acquire) */
static int wcetstat_resolving; /* a thread is in dlsym */
static int wcetstat_via_dlsym; /* 0: dlsym found none, the C library's own functions are used */

static _Alignas(64) unsigned char wcetstat_boot[WCETSTAT_BOOT];
static size_t wcetstat_boot_used;

/* The C library's entry points, for a process where dlsym finds no next malloc (it always finds
 * the C library's, unless it fails altogether). */
void *__libc_malloc(size_t size);
void __libc_free(void *ptr);
void *__libc_memalign(size_t align, size_t size);

static void *wcetstat_boot_alloc(size_t align, size_t size)
{
    size_t used = __atomic_load_n(&wcetstat_boot_used, __ATOMIC_RELAXED);
    for (;;) {
        uintptr_t base = (uintptr_t)wcetstat_boot;
        uintptr_t start = (base + used + (align - 1)) & ~(uintptr_t)(align - 1);
        size_t end = (size_t)(start - base);
        if (end > WCETSTAT_BOOT || size > WCETSTAT_BOOT - end)
            return NULL;
        if (__atomic_compare_exchange_n(&wcetstat_boot_used, &used, end + size, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return (void *)start;
    }
}

static bool wcetstat_in_boot(const void *p)
{
    return (uintptr_t)p - (uintptr_t)wcetstat_boot < (uintptr_t)WCETSTAT_BOOT;
}

/* True once the next allocator's functions are known; false while another call (this thread's
 * dlsym calling malloc, or another thread) is looking them up. */
static bool wcetstat_resolve(void)
{
    if (sm_likely(__atomic_load_n(&wcetstat_ready, __ATOMIC_ACQUIRE)))
        return true;
    if (__atomic_exchange_n(&wcetstat_resolving, 1, __ATOMIC_ACQ_REL))
        return false;
    void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    void (*f)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    void *(*a)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    if (m && f && a) {
        wcetstat_via_dlsym = 1;
    } else {
        m = __libc_malloc, f = __libc_free, a = __libc_memalign;
    }
    wcetstat_malloc_fn = m;
    wcetstat_free_fn = f;
    wcetstat_memalign_fn = a;
    __atomic_store_n(&wcetstat_ready, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&wcetstat_resolving, 0, __ATOMIC_RELEASE);
    return true;
}

static void *wcetstat_next_malloc(size_t size)
{
    if (sm_unlikely(!wcetstat_resolve()))
        return wcetstat_boot_alloc(16, size);
    return wcetstat_malloc_fn(size);
}

static void *wcetstat_next_memalign(size_t align, size_t size)
{
    if (sm_unlikely(!wcetstat_resolve()))
        return wcetstat_boot_alloc(align, size);
    return wcetstat_memalign_fn(align, size);
}

static void wcetstat_next_free(void *ptr)
{
    if (sm_unlikely(wcetstat_in_boot(ptr)))
        return; /* served by the start-up buffer: never reused */
    /* Every other block came from the next allocator, so its functions are known. */
    if (sm_likely(__atomic_load_n(&wcetstat_ready, __ATOMIC_ACQUIRE)))
        wcetstat_free_fn(ptr);
}

/* ---- The report ---- */

static uint64_t wcetstat_t0_cycles, wcetstat_t0_ns;
/* Where a report without SUNMAO_WCET_OUT goes: a copy of stderr taken at start-up, above the file
 * descriptors programs count on, since some programs close stderr in their own exit handlers
 * (coreutils' close_stdout), which run before this one. */
static int wcetstat_stderr = 2;

static size_t wcetstat_add(char *buf, size_t at, size_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t wcetstat_add(char *buf, size_t at, size_t n, const char *fmt, ...)
{
    if (at >= n)
        return at;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + at, n - at, fmt, ap);
    va_end(ap);
    if (k < 0)
        return at;
    return (size_t)k < n - at ? at + (size_t)k : n - 1;
}

static size_t wcetstat_add_ns(char *buf, size_t at, size_t n, const char *op, const char *name, uint64_t cycles,
                              double ns_per_cycle)
{
    if (cycles == UINT64_MAX)
        return wcetstat_add(buf, at, n, "metric %s_%s inf\n", op, name);
    return wcetstat_add(buf, at, n, "metric %s_%s %.1f\n", op, name, (double)cycles * ns_per_cycle);
}

static void wcetstat_write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

/* SUNMAO_WCET_OUT with "%p" replaced by the process id (and "%%" by "%"); false if it is unset. */
static bool wcetstat_out_path(char *path, size_t n)
{
    const char *spec = getenv("SUNMAO_WCET_OUT");
    if (!spec || !*spec)
        return false;
    size_t at = 0;
    for (const char *s = spec; *s && at + 1 < n; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            at = wcetstat_add(path, at, n, "%ld", (long)getpid());
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            path[at++] = '%';
            s++;
        } else {
            path[at++] = *s;
        }
    }
    path[at] = 0;
    return true;
}

static void wcetstat_report(void)
{
    static const uint32_t ppm[] = { 900000, 990000, 999000, 999900, 999990, 999999 };
    static const char *const name[] = { "p90", "p99", "p99.9", "p99.99", "p99.999", "p99.9999" };
    static char buf[8192];
    wcetstat_wcet_flush();
    uint64_t cycles = sm_plat_cycles() - wcetstat_t0_cycles, ns = sm_plat_now_ns() - wcetstat_t0_ns;
    double ns_per_cycle = cycles && ns ? (double)ns / (double)cycles : 1.0;
    size_t at = 0, n = sizeof buf;
    at = wcetstat_add(buf, at, n,
                      "# wcetstat: malloc_heap(next allocator, dlsym RTLD_NEXT)::wcet_stat::malloc_socket; one request "
                      "in %d per operation and thread timed, ns; includes malloc_heap's %zu-byte header; values are "
                      "histogram bucket tops (<= 12.5%% high)\n",
                      WCETSTAT_SAMPLE_EVERY, sizeof(wcetstat_os_hdr_t));
    at = wcetstat_add(buf, at, n, "metric pid %ld\n", (long)getpid());
    at = wcetstat_add(buf, at, n, "metric ns_per_cycle %.6f\n", ns_per_cycle);
    at = wcetstat_add(buf, at, n, "metric sample_every %d\n", WCETSTAT_SAMPLE_EVERY);
    at = wcetstat_add(buf, at, n, "metric header_bytes %zu\n", sizeof(wcetstat_os_hdr_t));
    at = wcetstat_add(buf, at, n, "metric boot_bytes %zu\n", __atomic_load_n(&wcetstat_boot_used, __ATOMIC_RELAXED));
    at = wcetstat_add(buf, at, n, "metric next_dlsym %d\n", wcetstat_via_dlsym);
    for (unsigned op = 0; op < 2; op++) {
        const char *opname = op ? "free" : "malloc";
        at = wcetstat_add(buf, at, n, "metric %s_samples %llu\n", opname,
                          (unsigned long long)wcetstat_wcet_samples(op));
        for (unsigned i = 0; i < sizeof ppm / sizeof ppm[0]; i++)
            at = wcetstat_add_ns(buf, at, n, opname, name[i], wcetstat_wcet_quantile(op, ppm[i]), ns_per_cycle);
        at = wcetstat_add_ns(buf, at, n, opname, "max", wcetstat_wcet_quantile(op, 1000000), ns_per_cycle);
    }
    if (at + 1 < n)
        at += wcetstat_wcet_format(buf + at, n - at);
    char path[4096];
    int fd = wcetstat_stderr;
    if (wcetstat_out_path(path, sizeof path)) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            static const char msg[] = "wcetstat: cannot open SUNMAO_WCET_OUT; the report follows\n";
            wcetstat_write_all(wcetstat_stderr, msg, sizeof msg - 1);
            fd = wcetstat_stderr;
        }
    }
    wcetstat_write_all(fd, buf, at);
    if (fd != wcetstat_stderr)
        close(fd);
}

__attribute__((constructor)) static void wcetstat_init(void)
{
    wcetstat_t0_cycles = sm_plat_cycles();
    wcetstat_t0_ns = sm_plat_now_ns();
    (void)wcetstat_resolve();
    const char *out = getenv("SUNMAO_WCET_OUT");
    if (!out || !*out) {
        int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
        if (fd >= 0)
            wcetstat_stderr = fd;
    }
    atexit(wcetstat_report);
}
