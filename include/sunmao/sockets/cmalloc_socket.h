/* cmalloc_socket (paper Table 2: "malloc(3) with an extra core ID"): allocation by partition, for
 * the allocators the paper cites for DRAM-bank and cache-set partitioning, where a task asks for
 * memory of its own core's partition whichever core it runs on now. The partition travels down in
 * the request context (mctx.cpu), where a per-CPU layer reads it through sm_mctx_cpu()
 * (platform/platform.h) before it would ask the platform: slab_lk's CPU shards (SM_OPT_SHARDS)
 * take the objects from partition cpu & (shards - 1), and the per-CPU caches of issue 15
 * (carrcache_lk) index their arrays with it. A layer that is not per-CPU ignores it.
 * Template: define SM_NEXT (top layer), SM_ERR and SM_PREFIX (e.g. sm_part_), then include;
 * optional SM_START (the name of the start-up it defines, default <prefix>start) or SM_START_USE
 * (the start-up an earlier socket over the same stack in this file defined: the stack is then
 * created once). Declarations for callers: sockets/cmalloc_api.h. The API (P = SM_PREFIX):
 *   void *P_cmalloc(size_t size, int cpu)                    malloc from partition cpu
 *   void *P_ccalloc(size_t n, size_t size, int cpu)          zero-filled, overflow-checked
 *   void *P_caligned_alloc(size_t align, size_t size, int cpu)  align a power of two (else EINVAL)
 *   void *P_crealloc(void *p, size_t size, int cpu)          in place where the block can change
 *                                 size where it is (it keeps its partition), else moved to
 *                                 partition cpu; size 0 frees (NULL), as libc_api.h's realloc
 *   void  P_cfree(void *p)        the block goes back to the partition that owns it (a layer finds
 *                                 it; no argument needed)
 *   void  P_cfree_cpu(void *p, int cpu)  the same, telling a layer that keeps freed blocks per CPU
 *                                 (a per-CPU cache) whose they are: the partition p came from
 *   size_t P_cmalloc_usable_size(void *p);  int P_cmalloc_trim(void)  (releases what layers hold free)
 * cpu: a partition number >= 0, or SM_CPU_ANY (-1): none, malloc's behaviour (the platform's CPU).
 * Below -1 the request fails with EINVAL (a free reports it through SM_ERR and frees anyway).
 * A number past the layer's partitions wraps in that layer (slab_lk masks it): the socket does not
 * know how many a composition has. Other failures as malloc(3): NULL with errno ENOMEM.
 *
 * Needs: a thread-safe stack aligned to 16 whose top layer has no hit path (capability HIT): a
 * thread cache on top would hand out whatever its lists hold, from any partition, so per-CPU
 * layers must be the top of a cmalloc composition (a compile error says so). Start-up:
 * sockets/start.h, on the first request. Memory goes back on the layers' own paths and on
 * P_cmalloc_trim: no background thread (libc_api.h's release clock is its own).
 * @model: name=cmalloc_socket kind=socket flag mt slot err
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_PREFIX=t_
 * @check-next: fake */
#include <stdint.h>
#include <string.h>
#include "../core/bits.h"
#include "../core/errnum.h"
#include "../core/errors.h"
#include "../core/layer.h"
#include "../platform/platform.h"
#include "cmalloc_api.h"

#ifndef SM_NEXT
#error "cmalloc_socket: define SM_NEXT (the top layer of the composition) before including"
#endif
#ifndef SM_ERR
#error "cmalloc_socket: policy slot 'err' is empty (SM_ERR = warn|fatal|callback)"
#endif
#ifndef SM_PREFIX
#error "cmalloc_socket: define SM_PREFIX, the prefix of the exported names (e.g. sm_part_)"
#endif

_Static_assert(SM_PROP(SM_NEXT, thread_safe), "cmalloc_socket: the layer below must be thread-safe");
_Static_assert(SM_PROP(SM_NEXT, min_align) >= SM_MIN_ALIGN, "cmalloc_socket: the layer below must align blocks to 16 bytes");
_Static_assert(!SM_HAS_CAP(SM_NEXT, SM_CAP_HIT), "cmalloc_socket: its top layer " SM_STR(SM_NEXT) " has a hit path "
               "(a thread cache), which would serve a partition's request from any partition's objects");

#ifdef SM_START_USE
#define SM_START SM_START_USE
#define SM_START_FN(name) SM_CAT3(SM_START, _, name)
#else
#ifndef SM_START
#define SM_START SM_CAT(SM_PREFIX, start)
#endif
#include "start.h"
#endif

#define SM_CAPI(name) SM_CAT(SM_PREFIX, name)
#define SM_CSOCK(name) SM_CAT3(SM_PREFIX, csock_, name)
SM_CMALLOC_API_DECLARE(SM_PREFIX) /* the definitions below must match what callers declare */

/* As glibc: no object may exceed PTRDIFF_MAX. */
#define SM_CSOCK_MAX ((size_t)PTRDIFF_MAX)

static void *SM_CSOCK(alloc)(size_t size, size_t align, unsigned flags, int cpu)
{
    if (sm_unlikely(cpu < SM_CPU_ANY)) {
        errno = EINVAL;
        return NULL;
    }
    if (sm_unlikely(size > SM_CSOCK_MAX || align > SM_CSOCK_MAX / 2 || !SM_START_FN(ready)())) {
        errno = ENOMEM;
        return NULL;
    }
    sm_mctx_t c = sm_mctx_alloc(size ? size : 1, align, flags | SM_F_USER);
    c.cpu = cpu; /* SM_CPU_ANY is the context's "none" too: sm_mctx_cpu() then asks the platform */
    void *p = SM_NEXT_FN(alloc)(&c);
    if (sm_unlikely(!p)) {
        errno = ENOMEM;
        return NULL;
    }
    if ((flags & SM_F_ZERO) && !(c.flags & SM_F_FRESH))
        memset(p, 0, size);
    return p;
}

static void SM_CSOCK(free)(void *p, int cpu)
{
    if (!p)
        return;
    if (sm_unlikely(cpu < SM_CPU_ANY)) { /* the block is still freed: a free that fails would leak */
        SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, "cmalloc_socket", p, "cfree_cpu: partition below -1; freed as SM_CPU_ANY");
        cpu = SM_CPU_ANY;
    }
    (void)SM_START_FN(ready)(); /* a failed start-up leaves the free to the stack, as libc_api.h does */
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    c.cpu = cpu;
    SM_NEXT_FN(free)(&c);
}

/* Usable size of an owned block; 0 (after reporting) for a pointer no layer owns. */
static size_t SM_CSOCK(usable)(void *p, const char *api)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    if (sm_likely(SM_START_FN(ready)() && SM_NEXT_FN(getmeta)(&c)))
        return c.usable;
    SM_ERR_FN(raise)(SM_ERR_INVALID_POINTER, api, p, "not a block allocated here");
    return 0;
}

SM_EXPORT void *SM_CAPI(cmalloc)(size_t size, int cpu) { return SM_CSOCK(alloc)(size, SM_MIN_ALIGN, 0, cpu); }

SM_EXPORT void *SM_CAPI(ccalloc)(size_t n, size_t size, int cpu)
{
    size_t total;
    if (sm_unlikely(__builtin_mul_overflow(n, size, &total)))
        total = SIZE_MAX; /* refused below with ENOMEM, the one failure path */
    return SM_CSOCK(alloc)(total, SM_MIN_ALIGN, SM_F_ZERO, cpu);
}

SM_EXPORT void *SM_CAPI(caligned_alloc)(size_t align, size_t size, int cpu)
{
    if (!sm_is_pow2(align)) { /* C17 DR 460, as aligned_alloc */
        errno = EINVAL;
        return NULL;
    }
    return SM_CSOCK(alloc)(size, align, 0, cpu);
}

SM_EXPORT void SM_CAPI(cfree)(void *ptr) { SM_CSOCK(free)(ptr, SM_CPU_ANY); }
SM_EXPORT void SM_CAPI(cfree_cpu)(void *ptr, int cpu) { SM_CSOCK(free)(ptr, cpu); }

SM_EXPORT void *SM_CAPI(crealloc)(void *ptr, size_t size, int cpu)
{
    if (sm_unlikely(cpu < SM_CPU_ANY)) { /* before anything changes: the block stays as it was */
        errno = EINVAL;
        return NULL;
    }
    if (!ptr)
        return SM_CSOCK(alloc)(size, SM_MIN_ALIGN, 0, cpu);
    if (size == 0) {
        SM_CSOCK(free)(ptr, SM_CPU_ANY);
        return NULL;
    }
    if (sm_unlikely(size > SM_CSOCK_MAX)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t usable = SM_CSOCK(usable)(ptr, "crealloc");
    if (sm_unlikely(usable == 0)) {
        errno = EINVAL;
        return NULL;
    }
    if (size <= usable && size >= usable / 2) /* fits, wasting at most half: keep it (libc_api.h's rule) */
        return ptr;
    sm_mctx_t c = sm_mctx_block(ptr, 0, 0);
    c.cpu = cpu;
    if (SM_NEXT_FN(resize)(&c, size))
        return ptr;
    void *moved = SM_CSOCK(alloc)(size, SM_MIN_ALIGN, 0, cpu);
    if (!moved)
        return size <= usable ? ptr : NULL; /* a shrink that cannot move still succeeds */
    memcpy(moved, ptr, size < usable ? size : usable);
    SM_CSOCK(free)(ptr, SM_CPU_ANY); /* its partition is the owner's to know, not the caller's */
    return moved;
}

SM_EXPORT size_t SM_CAPI(cmalloc_usable_size)(void *ptr) { return ptr ? SM_CSOCK(usable)(ptr, "cmalloc_usable_size") : 0; }

SM_EXPORT int SM_CAPI(cmalloc_trim)(void)
{
    if (!SM_START_FN(ready)())
        return 0;
    sm_release_t r = sm_release_request(sm_plat_now_ms(), SM_RELEASE_ALL);
    SM_NEXT_FN(release)(&r);
    return r.released != 0;
}

#undef SM_CSOCK_MAX
#undef SM_CSOCK
#undef SM_CAPI
#undef SM_START_FN
#undef SM_START
#undef SM_START_USE
#undef SM_NEXT
#undef SM_ERR
