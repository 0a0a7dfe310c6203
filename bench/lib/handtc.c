/* handtc: a hand-written thread-cache allocator, the reference for the fast-path target ("a malloc
 * +free pair within 10% of a hand-written thread-cache pop/push"). Deliberately minimal: it has
 * exactly the work a thread-cache hit must do and nothing else — no layers, no limits, no GC, no
 * large blocks beyond 1 KiB (those go to glibc), memory never returned. Not an allocator to use.
 *   malloc: class = (size + 15) >> 4; pop the thread's list (one initial-exec TLS access).
 *   free:   64 KiB pages are single-class; the class sits in a table indexed by page number
 *           within a 4 GiB reserved region, so free is a range check, one load and a push.
 * Built and compared by bench/fastpath.sh. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define CLASSES 65 /* 16-byte classes up to 1 KiB; class 0 unused */
#define PAGE_SHIFT 16
#define REGION ((size_t)4 << 30)

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_calloc(size_t, size_t);

static char *region;
static unsigned char *page_class; /* one byte per 64 KiB page of the region */
static size_t next_page;          /* pages handed out, shared: taken under an atomic add */

struct tcache { void *head[CLASSES]; };
static __thread struct tcache cache __attribute__((tls_model("initial-exec")));

__attribute__((constructor)) static void handtc_init(void)
{
    region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    page_class = mmap(NULL, REGION >> PAGE_SHIFT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

__attribute__((noinline)) static void *refill(unsigned cls)
{
    size_t page = __atomic_fetch_add(&next_page, 1, __ATOMIC_RELAXED);
    char *base = region + (page << PAGE_SHIFT), *end = base + ((size_t)1 << PAGE_SHIFT);
    size_t size = (size_t)cls << 4;
    page_class[page] = (unsigned char)cls;
    void *head = NULL;
    for (char *p = end - size; p >= base + size; p -= size) { /* keep the first object for the caller */
        *(void **)p = head;
        head = p;
    }
    cache.head[cls] = head;
    return base;
}

void *malloc(size_t size)
{
    if (size > 1024 || !region)
        return __libc_malloc(size);
    unsigned cls = (unsigned)((size + 15) >> 4);
    cls += !cls;
    void *p = cache.head[cls];
    if (__builtin_expect(p != NULL, 1)) {
        cache.head[cls] = *(void **)p;
        return p;
    }
    return refill(cls);
}

void free(void *p)
{
    size_t off = (uintptr_t)p - (uintptr_t)region;
    if (off >= REGION) {
        __libc_free(p);
        return;
    }
    unsigned cls = page_class[off >> PAGE_SHIFT];
    *(void **)p = cache.head[cls];
    cache.head[cls] = p;
}

void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        return NULL;
    void *p = malloc(total);
    return p ? memset(p, 0, total) : NULL;
}

void *realloc(void *p, size_t size)
{
    size_t off = (uintptr_t)p - (uintptr_t)region;
    if (!p || off >= REGION)
        return p ? __libc_realloc(p, size) : malloc(size);
    size_t old = (size_t)page_class[off >> PAGE_SHIFT] << 4;
    void *q = malloc(size);
    if (q) {
        memcpy(q, p, old < size ? old : size);
        free(p);
    }
    return q;
}
