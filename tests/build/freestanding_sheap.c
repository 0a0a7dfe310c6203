/* A bare-metal allocator: a static pool and a TLSF heap, no OS, no libc (paper Table 2: sheap_glk).
 * Built with -ffreestanding -nostdlib -DSM_FREESTANDING=1 by freestanding.sh, which checks that the
 * object needs nothing but what a freestanding C implementation provides (memcpy/memset/memmove,
 * which the compiler may emit) and the program's diagnostics hook sm_diag_write. */
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sync/none.h>

#define SM_LAYER         bare_pool
#define SM_SYNC          none
#define SM_ERR           callback
#define SM_OPT_POOL_SIZE (1u << 20)
#include <sunmao/os/sheap.h>

#define SM_LAYER bare_heap
#define SM_NEXT  bare_pool
#define SM_SYNC  none
#define SM_ERR   callback
#define SM_OPT_REGION_SIZE (64u << 10)
#include <sunmao/layers/core/tlsf_glk.h>

void *bare_malloc(size_t size)
{
    sm_mctx_t c = sm_mctx_alloc(size, SM_MIN_ALIGN, 0);
    return bare_heap_alloc(&c);
}

void bare_free(void *ptr)
{
    sm_mctx_t c = sm_mctx_block(ptr, 0, 0);
    if (ptr)
        bare_heap_free(&c);
}
