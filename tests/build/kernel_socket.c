/* kernel_socket with no C library at all: a kernel-like allocator
 *     sheap(4 MiB pool) :: buddy_glk(pages, 256 KiB chunks) :: slab_lk([0, 2K], 8 KiB slabs) :: kernel_socket
 * (metadata from a second sheap, SM_META)
 * over the freestanding platform (SM_FREESTANDING=1), and a test program that is its own runtime:
 * _start below, memset/memcpy/memmove/memcmp (which compilers emit calls to even freestanding),
 * the diagnostics hook, and write/exit by system call. tests/build/kernel_socket.sh builds it
 * -ffreestanding, links it -nostdlib -static, checks with nm that nothing of a libc is in it, and
 * runs it. It prints `ok kernel_socket: <case>` / `not ok kernel_socket: <case>: <why>` and exits
 * with the number of failed cases. x86-64 and AArch64 Linux (the system calls). */
#include <stddef.h>
#include <stdint.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/none.h>

/* The layers' own metadata (page-map leaves of 8 MiB each for buddy_glk and slab_lk, chunk
 * descriptors) from a pool of its own (SM_META): the memory pool below holds only blocks, so its
 * exhaustion is the program's, and counts exactly. */
#define SM_LAYER         k_meta
#define SM_SYNC          none
#define SM_ERR           callback
#define SM_OPT_POOL_SIZE (20u << 20)
#include <sunmao/os/sheap_glk.h> /* the paper's name for sheap: both names compose */

#define SM_LAYER         k_pool
#define SM_SYNC          none
#define SM_ERR           callback
#define SM_OPT_POOL_SIZE (4u << 20)
#include <sunmao/os/sheap.h>

#define SM_LAYER          k_pages
#define SM_NEXT           k_pool
#define SM_SYNC           none
#define SM_ERR            callback
#define SM_OPT_MIN_BLOCK  4096
#define SM_OPT_CHUNK_SIZE (256u << 10)
#define SM_META           k_meta
#include <sunmao/layers/core/buddy_glk.h>

#define SM_LAYER     k_slab
#define SM_NEXT      k_pages
#define SM_SYNC      none
#define SM_SIZECLASS tc
#define SM_ERR       callback
#define SM_SIZE_MAX  2048
#define SM_OPT_SLAB_SIZE 8192 /* a kernel's slabs are a page or two: 64 KiB per class would fill the pool */
#define SM_META      k_meta
#include <sunmao/layers/core/slab_lk.h>

#define SM_NEXT   k_slab
#define SM_ERR    callback
#define SM_PREFIX sm_
#include <sunmao/sockets/kernel_socket.h>

/* ---- the runtime a libc would have given ---- */
#if defined(__x86_64__)
__asm__(".text\n.global _start\n.type _start,@function\n_start:\n"
        "  xor %ebp, %ebp\n  and $-16, %rsp\n  call k_main\n"
        "  mov %eax, %edi\n  mov $231, %eax\n  syscall\n  hlt\n");
static long k_syscall3(long n, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
enum { K_SYS_WRITE = 1 };
#elif defined(__aarch64__)
__asm__(".text\n.global _start\n.type _start,%function\n_start:\n"
        "  mov x29, #0\n  mov x30, #0\n  bl k_main\n  mov x8, #94\n  svc #0\n");
static long k_syscall3(long n, long a, long b, long c)
{
    register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}
enum { K_SYS_WRITE = 64 };
#else
#error "kernel_socket test: _start and system calls are written for x86-64 and AArch64 only"
#endif

/* Byte loops through volatile pointers: a compiler must not turn them back into calls to themselves. */
void *memset(void *d, int c, size_t n)
{
    volatile unsigned char *p = (volatile unsigned char *)d;
    while (n--)
        *p++ = (unsigned char)c;
    return d;
}
void *memcpy(void *restrict d, const void *restrict s, size_t n)
{
    volatile unsigned char *p = (volatile unsigned char *)d;
    const unsigned char *q = (const unsigned char *)s;
    while (n--)
        *p++ = *q++;
    return d;
}
void *memmove(void *d, const void *s, size_t n)
{
    volatile unsigned char *p = (volatile unsigned char *)d;
    const unsigned char *q = (const unsigned char *)s;
    if (p < q)
        while (n--)
            *p++ = *q++;
    else
        while (n--)
            p[n] = q[n];
    return d;
}
int memcmp(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *p = (const volatile unsigned char *)a, *q = (const volatile unsigned char *)b;
    for (; n--; p++, q++)
        if (*p != *q)
            return *p < *q ? -1 : 1;
    return 0;
}

static size_t k_strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}
static void k_puts(const char *s) { k_syscall3(K_SYS_WRITE, 1, (long)s, (long)k_strlen(s)); }

/* The diagnostics hook: lines counted, shown on stderr for whoever reads the log. */
static unsigned long diag_lines;
void sm_diag_write(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        diag_lines += s[i] == '\n';
    k_syscall3(K_SYS_WRITE, 2, (long)s, (long)n);
}

static unsigned long errs[SM_ERR_KIND_COUNT];
static void on_err(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    errs[kind]++;
}

/* ---- cases ---- */
static const char *case_why;
static int failures;
#define EXPECT(cond)                                                                                   \
    do {                                                                                               \
        if (!(cond) && !case_why)                                                                      \
            case_why = #cond;                                                                          \
    } while (0)
static void run(const char *name, void (*fn)(void))
{
    case_why = NULL;
    fn();
    k_puts(case_why ? "not ok kernel_socket: " : "ok kernel_socket: ");
    k_puts(name);
    if (case_why) {
        k_puts(": ");
        k_puts(case_why);
        failures++;
    }
    k_puts("\n");
}

static unsigned char pat(const void *block, size_t i, unsigned seed)
{
    size_t x = (size_t)block ^ (i * 0x9e3779b1u) ^ seed;
    return (unsigned char)(x ^ (x >> 11) ^ (x >> 23));
}
static void fill(void *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)b)[i] = pat(b, i, seed);
}
static int intact(const void *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)b)[i] != pat(b, i, seed))
            return 0;
    return 1;
}
static int all_zero(const void *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)b)[i])
            return 0;
    return 1;
}

enum { PAGE = 4096, NB = 64 };

/* Blocks of many sizes, small (slab_lk) and large (buddy_glk), all live at once: every pattern
 * survives the others' allocation. */
static void fill_patterns(void)
{
    void *b[NB];
    size_t sz[NB];
    for (unsigned i = 0; i < NB; i++) {
        sz[i] = 1 + (i * 977u) % (i % 4 == 3 ? 20000u : 2048u);
        b[i] = sm_kmalloc(sz[i], SM_GFP_KERNEL);
        EXPECT(b[i] != NULL && ((uintptr_t)b[i] & 15) == 0);
        if (!b[i])
            return;
        EXPECT(sm_ksize(b[i]) >= sz[i]);
        fill(b[i], sz[i], i);
    }
    for (unsigned i = 0; i < NB; i++)
        EXPECT(intact(b[i], sz[i], i));
    for (unsigned i = 0; i < NB; i++)
        sm_kfree(b[i]);
    sm_kfree(NULL);
    EXPECT(sm_ksize(NULL) == 0);
}

/* kzalloc and kcalloc clear what the block held before; so does a page allocation with ZERO. */
static void kzalloc_zeroes(void)
{
    static const size_t sizes[] = { 24, 200, 2000, 3000, 3 * PAGE };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *d = sm_kmalloc(sizes[i], 0);
        EXPECT(d != NULL);
        if (!d)
            return;
        memset(d, 0xAA, sizes[i]);
        sm_kfree(d);
        unsigned char *z = sm_kzalloc(sizes[i], 0);
        EXPECT(z == d); /* the block just freed comes back: the test means something */
        EXPECT(z && all_zero(z, sizes[i]));
        sm_kfree(z);
    }
    unsigned char *d = sm_kmalloc(1000, 0);
    memset(d, 0x55, 1000);
    sm_kfree(d);
    unsigned char *c = sm_kcalloc(10, 100, 0);
    EXPECT(c == d && c && all_zero(c, 1000));
    sm_kfree(c);
    unsigned char *p = sm_alloc_pages(0, 1);
    memset(p, 0x77, 2 * PAGE);
    sm_free_pages(p, 1);
    unsigned char *q = sm_alloc_pages(SM_GFP_ZERO, 1);
    EXPECT(q == p && q && all_zero(q, 2 * PAGE));
    sm_free_pages(q, 1);
}

/* alloc_pages(order): 2^order pages aligned to their size, usable whole. */
static void pages_by_order(void)
{
    void *p[7];
    for (unsigned order = 0; order < 7; order++) { /* order 6 is a whole 256 KiB chunk */
        size_t bytes = (size_t)PAGE << order;
        p[order] = sm_alloc_pages(0, order);
        EXPECT(p[order] != NULL);
        if (!p[order])
            return;
        EXPECT(((uintptr_t)p[order] & (bytes - 1)) == 0);
        EXPECT(sm_ksize(p[order]) >= bytes);
        fill(p[order], bytes, order);
    }
    for (unsigned order = 0; order < 7; order++) {
        EXPECT(intact(p[order], (size_t)PAGE << order, order));
        sm_free_pages(p[order], order);
    }
}

/* A freed block is what the next request of its size gets; krealloc keeps contents, grows in
 * place or moves, zeroes the new part with ZERO, never shrinks, frees on size 0. */
static void free_and_realloc_reuse(void)
{
    void *a = sm_kmalloc(100, 0);
    sm_kfree(a);
    EXPECT(sm_kmalloc(100, 0) == a);
    sm_kfree(a);
    void *p = sm_alloc_pages(0, 2);
    sm_free_pages(p, 2);
    EXPECT(sm_alloc_pages(0, 2) == p);
    sm_free_pages(p, 2);

    unsigned char *r = sm_kmalloc(40, 0);
    fill(r, 40, 5);
    EXPECT(sm_krealloc(r, 30, 0) == r); /* fits: the same block */
    unsigned char copy[40];
    for (int i = 0; i < 40; i++)
        copy[i] = r[i];
    size_t old_usable = sm_ksize(r);
    unsigned char *g = sm_krealloc(r, 5000, SM_GFP_ZERO); /* slab object -> pages: moved */
    EXPECT(g != NULL && g != r);
    if (!g)
        return;
    EXPECT(memcmp(g, copy, 40) == 0);
    EXPECT(sm_ksize(g) >= 5000);
    EXPECT(all_zero(g + old_usable, 5000 - old_usable)); /* past the old block's usable bytes */
    EXPECT(sm_krealloc(g, 0, 0) == NULL); /* freed */
    void *again = sm_kmalloc(5000, 0);
    EXPECT(again == g);
    sm_kfree(again);
    EXPECT(sm_krealloc(NULL, 64, 0) != NULL);
}

/* Unknown flag bits, a too-large order, a krealloc of a foreign pointer and a free_pages that does
 * not match its block: reported (err policy), refused, nothing changed. */
static void bad_flags_rejected(void)
{
    unsigned long bad = errs[SM_ERR_BAD_REQUEST], inval = errs[SM_ERR_INVALID_FREE];
    errno = 0;
    EXPECT(sm_kmalloc(64, 1u << 5) == NULL && errno == EINVAL);
    EXPECT(sm_kzalloc(64, 0x400u) == NULL);
    EXPECT(sm_alloc_pages(1u << 8, 0) == NULL);
    EXPECT(sm_alloc_pages(0, SM_KMAX_ORDER + 1) == NULL);
    unsigned char *p = sm_kmalloc(64, 0);
    EXPECT(p != NULL);
    if (!p)
        return;
    fill(p, 64, 11);
    EXPECT(sm_krealloc(p, 4000, 0x80u) == NULL && intact(p, 64, 11));
    EXPECT(errs[SM_ERR_BAD_REQUEST] - bad == 5);
    void *pg = sm_alloc_pages(0, 2);
    sm_free_pages(pg, 3);                 /* larger than the block */
    sm_free_pages((char *)pg + PAGE, 0);  /* inside it */
    sm_free_pages(pg, 40);                /* no such order */
    EXPECT(errs[SM_ERR_INVALID_FREE] - inval == 3);
    EXPECT(sm_ksize(pg) >= 4 * (size_t)PAGE); /* still live */
    sm_free_pages(pg, 2);
    EXPECT(errs[SM_ERR_INVALID_FREE] - inval == 3);
    sm_kfree(p);
    EXPECT(diag_lines == 0);
}

/* Pages until the pool is gone: NULL with ENOMEM, silent with NOWARN; everything freed comes back
 * (the same count again); one line on the console for a failure without NOWARN. */
static void *held[4096];
static unsigned take_all(void)
{
    unsigned n = 0;
    while (n < 4096 && (held[n] = sm_alloc_pages(SM_GFP_NOWARN, 0)) != NULL)
        n++;
    return n;
}
static void exhaustion(void)
{
    unsigned long lines = diag_lines;
    unsigned n1 = take_all();
    EXPECT(n1 > 64 && n1 < 4096 && errno == ENOMEM);
    for (unsigned i = 0; i < n1; i++)
        fill(held[i], 64, i);
    int ok = 1;
    for (unsigned i = 0; i < n1; i++)
        ok &= intact(held[i], 64, i);
    EXPECT(ok);
    EXPECT(diag_lines == lines);
    EXPECT(sm_kmalloc(3000, 0) == NULL && diag_lines == lines + 1); /* pages are gone: warned once */
    for (unsigned i = 0; i < n1; i++)
        sm_free_pages(held[i], 0);
    unsigned n2 = take_all();
    EXPECT(n2 == n1);
    for (unsigned i = 0; i < n2; i++)
        sm_free_pages(held[i], 0);
    EXPECT(sm_kmalloc((size_t)32 << 20, SM_GFP_NOWARN) == NULL && diag_lines == lines + 1);
    void *p = sm_kmalloc(100, 0);
    EXPECT(p != NULL);
    sm_kfree(p);
}

int k_main(void);
__attribute__((used)) int k_main(void)
{
    sm_err_callback_set(on_err);
    run("fill_patterns", fill_patterns);
    run("kzalloc_zeroes", kzalloc_zeroes);
    run("pages_by_order", pages_by_order);
    run("free_and_realloc_reuse", free_and_realloc_reuse);
    run("bad_flags_rejected", bad_flags_rejected);
    run("exhaustion", exhaustion);
    return failures;
}
