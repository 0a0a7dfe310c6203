/* First-class heaps, for programs (installed as <sunmao/heap.h>). The drop-in libraries
 * (lib<name>.so) export these names; a prefixed build (libsm_<name>.a) exports them as
 * sm_<name>_sunmao_heap_create, ... Kinds, specs and measurements: docs/heaps.md.
 *
 * A heap is used from any thread. Its blocks may also be freed, reallocated and sized with the
 * plain calls (free, realloc, malloc_usable_size, free_sized, C++ delete): they find the heap the
 * block belongs to. sunmao_heap_reset frees every block of a heap at once; sunmao_heap_destroy
 * frees them and the heap. */
#ifndef SUNMAO_HEAP_H
#define SUNMAO_HEAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sunmao_heap sunmao_heap_t;

struct sunmao_heap_stats {
    size_t allocated;      /* usable bytes of the live blocks */
    size_t peak_allocated; /* the most `allocated` has been since create or the last reset */
    size_t blocks;         /* live blocks */
    size_t mapped;         /* bytes of the heap's memory (the caller's range included) */
    uint64_t allocs, frees, resets;
    uint64_t refused;      /* requests refused because of the heap's limit */
};

/* spec: NULL, "kind:tlsf,chunk:1MB,limit:0,retain:1MB,name:x" or the model line's
 * "region(chunk=256KB, limit=64MB)". NULL with errno EINVAL (a bad spec: one line on stderr
 * names the problem) or ENOMEM. */
sunmao_heap_t *sunmao_heap_create(const char *spec);
/* A heap that lives inside [base, base + size) and never maps memory: its object at the start,
 * its blocks in the rest. Plain free() recognises the blocks in the pages wholly inside the range.
 * NULL with errno EINVAL (and one line on stderr) for a range too small or above 64 GiB. */
sunmao_heap_t *sunmao_heap_create_in(void *base, size_t size, const char *spec);
void sunmao_heap_destroy(sunmao_heap_t *heap);
/* Frees every block. The memory the heap used since its last reset stays mapped for the next
 * cycle; memory that sat idle through a whole cycle goes back to the OS, beyond `retain` bytes. */
void sunmao_heap_reset(sunmao_heap_t *heap);

void *sunmao_heap_malloc(sunmao_heap_t *heap, size_t size);
void *sunmao_heap_calloc(sunmao_heap_t *heap, size_t n, size_t size);
void *sunmao_heap_aligned_alloc(sunmao_heap_t *heap, size_t align, size_t size);
/* Stays in `heap`: a block of another heap or of malloc moves into it. */
void *sunmao_heap_realloc(sunmao_heap_t *heap, void *ptr, size_t size);
void sunmao_heap_free(sunmao_heap_t *heap, void *ptr);

/* The heap ptr's block belongs to, or NULL (malloc's blocks, foreign pointers). ptr: a block's
 * start; an address inside a block larger than the heap's chunk answers NULL. */
sunmao_heap_t *sunmao_heap_of(const void *ptr);
/* 0, or EINVAL for a handle that is not a live heap (a destroyed heap's handle is reported by the
 * other calls, which do nothing). */
int sunmao_heap_stats(sunmao_heap_t *heap, struct sunmao_heap_stats *out);

#ifdef __cplusplus
}
#endif
#endif
