/* kernel_socket (paper Table 2: "the Linux kernel's allocation interface"; §1, §2.2: page_alloc and
 * kmalloc): an operating system's allocator over a composed stack, for a kernel or any program
 * with no C library. It needs nothing from an OS: built -ffreestanding with SM_FREESTANDING=1 over
 * sheap (a static pool) and, say, buddy_glk (pages) and slab_lk (small objects), it links with no
 * libc at all (tests/build/kernel_socket.sh does exactly that).
 * Template: define SM_NEXT (top layer), SM_ERR and optionally SM_PREFIX (default sm_, giving
 * sm_kmalloc: a kernel has its own kmalloc, and plain names would collide with it), optional
 * SM_START / SM_START_USE as in cmalloc_socket.h. Declarations and flags: sockets/kernel_api.h.
 * The API (P = SM_PREFIX):
 *   void *P_kmalloc(size_t size, unsigned flags)   a block of >= size bytes, 16-aligned; size 0
 *                              gets a 1-byte block (Linux answers a special non-NULL pointer)
 *   void *P_kzalloc(size_t size, unsigned flags)   kmalloc(size, flags | SM_GFP_ZERO)
 *   void *P_kcalloc(size_t n, size_t size, unsigned flags)  zero-filled, overflow-checked
 *   void *P_krealloc(void *p, size_t size, unsigned flags)  p itself while size fits its usable
 *                              size (a kernel's krealloc never shrinks), else grown in place or
 *                              moved; with SM_GFP_ZERO the bytes past the old usable size are zero;
 *                              size 0 frees p and returns NULL; NULL p is kmalloc
 *   void  P_kfree(const void *p)        NULL is ignored
 *   size_t P_ksize(const void *p)       the usable size (0 for NULL)
 *   void *P_alloc_pages(unsigned flags, unsigned order)  2^order pages (sm_plat_page_size()),
 *                              aligned to their size: an address, as Linux's __get_free_pages
 *   void  P_free_pages(void *addr, unsigned order)       addr from alloc_pages(., order)
 * Flags (kernel_api.h): SM_GFP_ZERO, SM_GFP_NOWARN; SM_GFP_KERNEL is 0. Any other bit, an order
 * above SM_KMAX_ORDER, a free_pages whose order or address does not match a live block, and a
 * pointer no layer owns given to ksize/krealloc are bugs of the caller: reported through SM_ERR
 * (err=fatal is a kernel's BUG()), then refused (NULL, errno EINVAL; a bad free is ignored).
 * Out of memory is not a bug: NULL with errno ENOMEM and, unless SM_GFP_NOWARN, one line through
 * sm_plat_write_stderr (the freestanding platform's sm_diag_write: a console, a log buffer).
 *
 * Needs: a stack aligned to 16. Not necessarily thread-safe: a kernel with one CPU, or its own
 * locking, composes with sync=none; the layers' sync policies decide. Memory comes from the OS
 * layer at the bottom: sheap's pool, or an embedder's SM_PLAT_MAP_HOOK. Start-up: sockets/start.h,
 * on the first request (no fork handlers, no configuration from the environment when freestanding).
 * Kernel flags that sleep or not (GFP_ATOMIC) have no meaning here: no layer sleeps but through
 * its sync policy, which the composition chose.
 * @model: name=kernel_socket kind=socket slot err
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_PREFIX=t_
 * @check-next: fake */
#include <stdint.h>
#include <string.h>
#include "../core/bits.h"
#include "../core/errnum.h"
#include "../core/errors.h"
#include "../core/layer.h"
#include "../core/msg.h"
#include "../platform/platform.h"
#include "kernel_api.h"

#ifndef SM_NEXT
#error "kernel_socket: define SM_NEXT (the top layer of the composition) before including"
#endif
#ifndef SM_ERR
#error "kernel_socket: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_PREFIX
#define SM_PREFIX sm_
#define SM_KSOCK_OWN_PREFIX /* ours: undefined at the end, so select.h after this still picks malloc_socket */
#endif

_Static_assert(SM_PROP(SM_NEXT, min_align) >= SM_MIN_ALIGN, "kernel_socket: the layer below must align blocks to 16 bytes");

#ifdef SM_START_USE
#define SM_START SM_START_USE
#define SM_START_FN(name) SM_CAT3(SM_START, _, name)
#else
#ifndef SM_START
#define SM_START SM_CAT(SM_PREFIX, kstart)
#endif
#include "start.h"
#endif

#define SM_KAPI(name) SM_CAT(SM_PREFIX, name)
#define SM_KSOCK(name) SM_CAT3(SM_PREFIX, ksock_, name)
SM_KERNEL_API_DECLARE(SM_PREFIX)

/* No object may exceed PTRDIFF_MAX, as in user space. */
#define SM_KSOCK_MAX ((size_t)PTRDIFF_MAX)

/* A caller's bug: reported, then the request is refused. */
SM_SLOWPATH void *SM_KSOCK(bad)(const char *api, const void *p, const char *why)
{
    SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, api, p, why);
    errno = EINVAL;
    return NULL;
}

SM_SLOWPATH void *SM_KSOCK(no_memory)(const char *api, size_t size, unsigned flags)
{
    if (!(flags & SM_GFP_NOWARN)) {
        char line[96];
        size_t n = sm_msg_format(line, sizeof line, "%s%s: out of memory (%zu bytes)\n", SM_STR(SM_PREFIX), api, size);
        sm_plat_write_stderr(line, n);
    }
    errno = ENOMEM;
    return NULL;
}

static void *SM_KSOCK(alloc)(const char *api, size_t size, size_t align, unsigned flags)
{
    if (sm_unlikely(flags & ~(unsigned)SM_GFP_VALID))
        return SM_KSOCK(bad)(api, NULL, "unknown flag bits (not SM_GFP_ZERO or SM_GFP_NOWARN)");
    if (sm_unlikely(size > SM_KSOCK_MAX || !SM_START_FN(ready)()))
        return SM_KSOCK(no_memory)(api, size, flags);
    sm_mctx_t c = sm_mctx_alloc(size ? size : 1, align, (flags & SM_GFP_ZERO ? SM_F_ZERO : 0u) | SM_F_USER);
    void *p = SM_NEXT_FN(alloc)(&c);
    if (sm_unlikely(!p))
        return SM_KSOCK(no_memory)(api, size, flags);
    if ((flags & SM_GFP_ZERO) && !(c.flags & SM_F_FRESH))
        memset(p, 0, size);
    return p;
}

/* The usable size of a live block, or 0 when no layer owns p. */
static size_t SM_KSOCK(usable)(const void *p)
{
    sm_mctx_t c = sm_mctx_block((void *)p, 0, 0);
    return SM_START_FN(ready)() && SM_NEXT_FN(getmeta)(&c) ? c.usable : 0;
}

static void SM_KSOCK(free)(void *p, size_t sized)
{
    (void)SM_START_FN(ready)();
    sm_mctx_t c = sm_mctx_block(p, sized, sized ? SM_F_SIZED : 0u);
    SM_NEXT_FN(free)(&c);
}

SM_EXPORT void *SM_KAPI(kmalloc)(size_t size, unsigned flags) { return SM_KSOCK(alloc)("kmalloc", size, SM_MIN_ALIGN, flags); }

SM_EXPORT void *SM_KAPI(kzalloc)(size_t size, unsigned flags)
{
    return SM_KSOCK(alloc)("kzalloc", size, SM_MIN_ALIGN, flags | SM_GFP_ZERO);
}

SM_EXPORT void *SM_KAPI(kcalloc)(size_t n, size_t size, unsigned flags)
{
    size_t total;
    if (sm_unlikely(__builtin_mul_overflow(n, size, &total)))
        total = SIZE_MAX; /* refused as too large: ENOMEM, as Linux's kcalloc answers NULL */
    return SM_KSOCK(alloc)("kcalloc", total, SM_MIN_ALIGN, flags | SM_GFP_ZERO);
}

SM_EXPORT void SM_KAPI(kfree)(const void *ptr)
{
    if (ptr)
        SM_KSOCK(free)((void *)ptr, 0);
}

SM_EXPORT size_t SM_KAPI(ksize)(const void *ptr)
{
    if (!ptr)
        return 0;
    size_t usable = SM_KSOCK(usable)(ptr);
    if (!usable)
        SM_ERR_FN(raise)(SM_ERR_INVALID_POINTER, "ksize", ptr, "not a block allocated here");
    return usable;
}

SM_EXPORT void *SM_KAPI(krealloc)(void *ptr, size_t size, unsigned flags)
{
    if (sm_unlikely(flags & ~(unsigned)SM_GFP_VALID))
        return SM_KSOCK(bad)("krealloc", ptr, "unknown flag bits (not SM_GFP_ZERO or SM_GFP_NOWARN)");
    if (!ptr)
        return SM_KSOCK(alloc)("krealloc", size, SM_MIN_ALIGN, flags);
    if (size == 0) {
        SM_KSOCK(free)(ptr, 0);
        return NULL;
    }
    size_t usable = SM_KSOCK(usable)(ptr);
    if (sm_unlikely(!usable))
        return SM_KSOCK(bad)("krealloc", ptr, "not a block allocated here");
    if (size <= usable)
        return ptr;
    sm_mctx_t c = sm_mctx_block(ptr, 0, 0);
    if (size <= SM_KSOCK_MAX && SM_NEXT_FN(resize)(&c, size)) {
        if (flags & SM_GFP_ZERO)
            memset((char *)ptr + usable, 0, size - usable);
        return ptr;
    }
    char *moved = (char *)SM_KSOCK(alloc)("krealloc", size, SM_MIN_ALIGN, flags);
    if (!moved)
        return NULL; /* the old block stays, as Linux's krealloc leaves it */
    memcpy(moved, ptr, usable);
    SM_KSOCK(free)(ptr, 0);
    return moved;
}

SM_EXPORT void *SM_KAPI(alloc_pages)(unsigned flags, unsigned order)
{
    if (sm_unlikely(order > SM_KMAX_ORDER))
        return SM_KSOCK(bad)("alloc_pages", NULL, "order above SM_KMAX_ORDER");
    size_t bytes = sm_plat_page_size() << order;
    return SM_KSOCK(alloc)("alloc_pages", bytes, bytes, flags);
}

SM_EXPORT void SM_KAPI(free_pages)(void *addr, unsigned order)
{
    if (!addr)
        return;
    size_t bytes = order <= SM_KMAX_ORDER ? sm_plat_page_size() << order : 0;
    size_t usable = bytes && sm_ptr_aligned(addr, bytes) ? SM_KSOCK(usable)(addr) : 0;
    if (sm_unlikely(usable < bytes || !usable)) { /* freeing a wrong size would corrupt a buddy's lists */
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, "free_pages", addr, "not the start of a live block of 2^order pages; ignored");
        return;
    }
    SM_KSOCK(free)(addr, bytes);
}

#ifdef SM_KSOCK_OWN_PREFIX
#undef SM_KSOCK_OWN_PREFIX
#undef SM_PREFIX
#endif
#undef SM_KSOCK_MAX
#undef SM_KSOCK
#undef SM_KAPI
#undef SM_START_FN
#undef SM_START
#undef SM_START_USE
#undef SM_NEXT
#undef SM_ERR
