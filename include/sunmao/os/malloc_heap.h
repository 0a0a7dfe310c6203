/* malloc_heap: OS layer on top of the C library's allocator (paper Table 2). No SM_NEXT.
 *
 * Parameters: SM_LAYER. Slots: err (required: invalid and double frees). Options:
 *   SM_OPT_MALLOC_FN, SM_OPT_FREE_FN, SM_OPT_MEMALIGN_FN  the functions to use, all three together
 *       (defaults: glibc's __libc_malloc, __libc_free, __libc_memalign, which the library this
 *       layer is built into leaves to the C library (malloc_socket.h), so the layer works inside a
 *       library that itself replaces malloc without calling itself back)
 * Properties: thread-safe (the C library's allocator is), 16-byte alignment, not zero-filled.
 * Fork: the C library's allocator keeps itself fork-safe; the hooks have nothing to lock.
 *
 * A 16-byte header just before each block holds the requested size and a tag: a hash of the size,
 * the block address and the process secret, with the log2 of the distance back to the underlying
 * allocation in its low byte. A pointer whose tag does not match is not ours: getmeta says so and
 * free reports it. The tag is wiped on free, so a second free is reported too (as long as the C
 * library has not handed the memory out again). Limit: the 16 bytes before a foreign pointer are
 * read, so the pointer must at least point into readable memory.
 * @model: name=malloc_heap kind=os slot err opaque malloc_fn opaque free_fn opaque memalign_fn */
#include "../core/layer.h"
#include "../core/errors.h"
#include "../core/bits.h"
#include "../core/secret.h"
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(SM_MALLOC_HEAP_ASAN)
#define SM_MALLOC_HEAP_ASAN 1
#endif
#endif

#ifndef SM_LAYER
#error "malloc_heap: define SM_LAYER (this instance's name) before including"
#endif
#ifdef SM_NEXT
#error "malloc_heap: an OS layer is the bottom of a composition; SM_NEXT must not be defined"
#endif
#ifndef SM_ERR
#error "malloc_heap: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#if !defined(SM_OPT_MALLOC_FN) && (defined(__SANITIZE_ADDRESS__) || defined(SM_MALLOC_HEAP_ASAN))
/* AddressSanitizer replaces __libc_memalign but not __libc_malloc/__libc_free, so the trio stops
 * being one allocator; its own malloc, free and memalign are, and it then checks our blocks too. */
#include <malloc.h>
#define SM_OPT_MALLOC_FN malloc
#define SM_OPT_FREE_FN free
#define SM_OPT_MEMALIGN_FN memalign
#endif
#ifndef SM_OPT_MALLOC_FN
void *__libc_malloc(size_t size);
void __libc_free(void *ptr);
void *__libc_memalign(size_t align, size_t size);
#define SM_OPT_MALLOC_FN __libc_malloc
#define SM_OPT_FREE_FN __libc_free
#define SM_OPT_MEMALIGN_FN __libc_memalign
#endif
#if !defined(SM_OPT_FREE_FN) || !defined(SM_OPT_MEMALIGN_FN)
#error "malloc_heap: SM_OPT_MALLOC_FN, SM_OPT_FREE_FN and SM_OPT_MEMALIGN_FN go together"
#endif
/* This composition gets its memory from another malloc: malloc_socket must then leave glibc's
 * internal names (__libc_malloc ...) to the C library, which this layer or the allocator it wraps
 * may be calling. */
#define SM_COMPOSITION_WRAPS_MALLOC 1

typedef struct SM_FN(hdr) { size_t size, tag; } SM_FN(hdr_t);

enum {
    SM_FN(thread_safe) = 1,
    SM_FN(min_align) = SM_MIN_ALIGN,
    SM_FN(zeroed) = 0,
    /* malloc itself returns blocks aligned for the header and payload alike */
    SM_FN(malloc_is_enough) = _Alignof(max_align_t) >= SM_MIN_ALIGN,
};

/* Its address goes into the tag, so two instances (which may free with different functions)
 * never take each other's blocks. */
static const char SM_FN(instance_id);

SM_INLINE size_t SM_FN(tag)(const void *user, size_t size, unsigned offset_log2)
{
    uint64_t x = ((uint64_t)(uintptr_t)user ^ ((uint64_t)size << 23 | (uint64_t)size >> 41)) ^ sm_secret();
    x += (uint64_t)(uintptr_t)&SM_FN(instance_id);
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return (size_t)((x & ~(uint64_t)0xff) | offset_log2);
}

SM_INLINE int SM_FN(create)(void) { return 0; }

SM_INLINE void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t align = c->align > sizeof(SM_FN(hdr_t)) ? c->align : sizeof(SM_FN(hdr_t));
    if (c->size > SIZE_MAX / 2 || align > SIZE_MAX / 4) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    /* The header sits in the `align` bytes in front, so the payload keeps the alignment. */
    unsigned char *raw = align == sizeof(SM_FN(hdr_t)) && SM_FN(malloc_is_enough)
                             ? (unsigned char *)SM_OPT_MALLOC_FN(align + c->size)
                             : (unsigned char *)SM_OPT_MEMALIGN_FN(align, align + c->size);
    if (!raw) {
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    unsigned char *user = raw + align;
    SM_FN(hdr_t) *h = (SM_FN(hdr_t) *)user - 1;
    h->size = c->size;
    h->tag = SM_FN(tag)(user, c->size, sm_log2_floor(align));
    return c->ptr = user;
}

/* The header of p if p is one of our live blocks, else NULL. Under AddressSanitizer the bytes in
 * front of a foreign pointer are another allocator's redzone, so the check reads them unchecked. */
#if defined(__SANITIZE_ADDRESS__) || defined(SM_MALLOC_HEAP_ASAN)
#define SM_MALLOC_HEAP_NOINLINE_UNCHECKED static __attribute__((noinline, no_sanitize_address))
#else
#define SM_MALLOC_HEAP_NOINLINE_UNCHECKED SM_INLINE
#endif
SM_MALLOC_HEAP_NOINLINE_UNCHECKED SM_FN(hdr_t) *SM_FN(header_of)(const void *p)
{
    if ((uintptr_t)p < 4096 || !sm_ptr_aligned(p, SM_MIN_ALIGN))
        return NULL;
    SM_FN(hdr_t) *h = (SM_FN(hdr_t) *)p - 1;
    return h->tag == SM_FN(tag)(p, h->size, (unsigned)(h->tag & 0xff)) ? h : NULL;
}
#undef SM_MALLOC_HEAP_NOINLINE_UNCHECKED

SM_INLINE void SM_FN(free)(sm_mctx_t *c)
{
    SM_FN(hdr_t) *h = SM_FN(header_of)(c->ptr);
    if (sm_unlikely(!h)) {
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, SM_LAYER_NAME, c->ptr,
                         "no valid malloc_heap header (foreign pointer, or freed twice)");
        return;
    }
    if (sm_unlikely((c->flags & SM_F_SIZED) && c->size > h->size)) {
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, SM_LAYER_NAME, c->ptr, "sized free larger than the block; ignored");
        return;
    }
    size_t offset = (size_t)1 << (h->tag & 0xff);
    h->tag = 0;
    SM_OPT_FREE_FN((unsigned char *)c->ptr - offset);
}

SM_INLINE bool SM_FN(getmeta)(sm_mctx_t *c)
{
    SM_FN(hdr_t) *h = SM_FN(header_of)(c->ptr);
    if (!h)
        return false;
    c->usable = h->size;
    c->owner = SM_LAYER_NAME;
    return true;
}

/* Only what already fits: growing in place is not something malloc can promise. */
SM_INLINE bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    SM_FN(hdr_t) *h = SM_FN(header_of)(c->ptr);
    return h && n <= h->size;
}

/* The C library's pages are its own to give back (malloc_trim). */
SM_INLINE bool SM_FN(purge)(sm_mctx_t *c)
{
    (void)c;
    return false;
}
SM_INLINE void SM_FN(release)(sm_release_t *r) { (void)r; }

SM_INLINE void SM_FN(thread_exit)(void) {}
SM_INLINE void SM_FN(fork_prepare)(void) {}
SM_INLINE void SM_FN(fork_parent)(void) {}
SM_INLINE void SM_FN(fork_child)(void) {}

#undef SM_OPT_MALLOC_FN
#undef SM_OPT_FREE_FN
#undef SM_OPT_MEMALIGN_FN
#include "../core/layer_end.h"
