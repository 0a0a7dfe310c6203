/* The request context (paper Table 1: mctx). A socket builds one per request on its stack, every
 * layer reads and updates it, and the result travels back in it. Framework core. */
#ifndef SUNMAO_CORE_MCTX_H
#define SUNMAO_CORE_MCTX_H

#include <stddef.h>
#include <stdint.h>

/* Request flags. */
enum {
    SM_F_ZERO  = 1u << 0, /* the block must be returned zero-filled (calloc) */
    SM_F_SIZED = 1u << 1, /* free: ctx->size is the size the user asked for (free_sized, sized delete) */
    SM_F_FRESH = 1u << 2, /* alloc result: the block is fresh zero-filled memory from the OS, so a
                           * calloc need not clear it (set by the layer that returns such a block) */
    SM_F_USER  = 1u << 3, /* alloc: the program asked for this block (set by the socket); absent on
                           * the requests layers make for their own use (slabs, chunks, refills,
                           * metadata), which size_handle's SM_SIZE_USER tells apart */
    SM_F_OWNER = 1u << 4, /* free: owner_word holds ptr's owner word, read by a layer above
                           * (capability OWNER, core/capability.h); without it the field is unset */
    SM_F_PROBE = 1u << 5, /* getmeta: ptr is a candidate nobody has checked (core/block_prefix.h
                           * searching below a pointer), and its page may not be mapped: answer
                           * from records, reading memory only where a layer below has confirmed a
                           * live block, and report nothing (a miss is the expected answer) */
};

typedef struct sm_mctx {
    size_t size;     /* alloc: bytes requested; free: user size if SM_F_SIZED, else 0 */
    size_t align;    /* alloc: required alignment, a power of two (SM_MIN_ALIGN when unspecified) */
    unsigned flags;  /* SM_F_* */
    int cpu;         /* cmalloc-style sockets pass a CPU/partition hint; -1 when none */
    void *ptr;       /* alloc: the result; free/getmeta/resize: the block in question */
    size_t usable;   /* getmeta: bytes usable at ptr, filled by the owning layer */
    const char *owner; /* getmeta: name of the layer that owns ptr (for diagnostics and tests) */
    uintptr_t owner_word; /* free, with SM_F_OWNER: ptr's owner word, as a layer above read it */
} sm_mctx_t;

/* A hit path's answer "no owner word was read" (L_free_hit; no real owner word has all bits set). */
#define SM_OWNER_UNKNOWN (~(uintptr_t)0)

/* Every layer hands out blocks aligned to at least this, as malloc(3) requires on x86-64. */
#define SM_MIN_ALIGN 16u

static inline sm_mctx_t sm_mctx_alloc(size_t size, size_t align, unsigned flags)
{
    sm_mctx_t c = { size, align < SM_MIN_ALIGN ? SM_MIN_ALIGN : align, flags, -1, NULL, 0, NULL, 0 };
    return c;
}

/* p, what request c got (or NULL), zero-filled: cleared unless the layer that served it reported
 * fresh memory (SM_F_FRESH). For a layer's own zeroed metadata (page-map nodes) from its next layer. */
static inline void *sm_mctx_zeroed(const sm_mctx_t *c, void *p)
{
    if (p && !(c->flags & SM_F_FRESH))
        __builtin_memset(p, 0, c->size);
    return p;
}

static inline sm_mctx_t sm_mctx_block(void *ptr, size_t size, unsigned flags)
{
    sm_mctx_t c = { size, SM_MIN_ALIGN, flags, -1, ptr, 0, NULL, 0 };
    return c;
}

#endif
