/* The first-class heap API (<sunmao/heap.h>) over a socket's stack: sunmao_heap_create, ...,
 * exported under SM_API(name) like the rest of the socket (drop-in: sunmao_heap_create; prefixed:
 * sm_<inst>_sunmao_heap_create). Included at the end of libc_api.h, which routes the plain calls
 * (free, free_sized, realloc, malloc_usable_size) of a heap's block to its heap through the
 * registry (heap/registry.h). The heaps themselves: heap/heap.h; decisions: docs/heaps.md.
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_API(n)=t_##n
 * @check-next: fake */
#ifndef SM_HEAP_API_PARTS
#include "libc_api.h"
#else
#include "../heap.h"

struct sunmao_heap {
    sm_heap_t h; /* the handle programs hold is the heap object itself */
};

static inline sm_heap_t *sm_heap_handle(sunmao_heap_t *heap, const char *api)
{
    sm_heap_t *h = heap ? &heap->h : NULL;
    if (sm_likely(sm_heap_valid(h)))
        return h;
    SM_ERR_FN(raise)(SM_ERR_BAD_REQUEST, api, heap, "not a live heap");
    return NULL;
}

SM_SLOWPATH sunmao_heap_t *sm_heap_api_create(void *base, size_t size, const char *spec, const char *api)
{
    sm_heap_spec_t s;
    const char *at;
    const char *err = sm_heap_spec_parse(spec, &s, &at);
    if (err) {
        char line[384];
        size_t n = sm_msg_format(line, sizeof line, "sunmao: %s: bad heap spec \"%s\" at \"%s\": %s\n", api, spec, at, err);
        sm_plat_write_stderr(line, n);
        errno = EINVAL;
        return NULL;
    }
    (void)sm_socket_ready(); /* the secret the block tags mix in */
    sunmao_heap_t *h = (sunmao_heap_t *)sm_heap_new(&s, base, size);
    if (!h && size && errno == EINVAL) { /* the caller's range */
        char line[160];
        size_t n = sm_msg_format(line, sizeof line, "sunmao: %s: the range (%p, %zu bytes) %s\n", api, base, size,
                                 size > SM_HEAP_RANGE_MAX ? "is larger than 64 GiB" : "cannot hold a heap");
        sm_plat_write_stderr(line, n);
        errno = EINVAL;
    }
    return h;
}

SM_EXPORT sunmao_heap_t *SM_API(sunmao_heap_create)(const char *spec)
{
    return sm_heap_api_create(NULL, 0, spec, "sunmao_heap_create");
}

SM_EXPORT sunmao_heap_t *SM_API(sunmao_heap_create_in)(void *base, size_t size, const char *spec)
{
    return sm_heap_api_create(base, size ? size : 1, spec, "sunmao_heap_create_in");
}

SM_EXPORT void SM_API(sunmao_heap_destroy)(sunmao_heap_t *heap)
{
    sm_heap_t *h = sm_heap_handle(heap, "sunmao_heap_destroy");
    if (h)
        sm_heap_delete(h);
}

SM_EXPORT void SM_API(sunmao_heap_reset)(sunmao_heap_t *heap)
{
    sm_heap_t *h = sm_heap_handle(heap, "sunmao_heap_reset");
    if (h)
        sm_heap_empty(h);
}

SM_EXPORT void *SM_API(sunmao_heap_malloc)(sunmao_heap_t *heap, size_t size)
{
    sm_heap_t *h = sm_heap_handle(heap, "sunmao_heap_malloc");
    if (!h) {
        errno = EINVAL;
        return NULL;
    }
    return sm_heap_alloc(h, size, 16);
}

SM_EXPORT void *SM_API(sunmao_heap_calloc)(sunmao_heap_t *heap, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = SM_API(sunmao_heap_malloc)(heap, total);
    return p ? memset(p, 0, total) : NULL;
}

SM_EXPORT void *SM_API(sunmao_heap_aligned_alloc)(sunmao_heap_t *heap, size_t align, size_t size)
{
    sm_heap_t *h = sm_heap_handle(heap, "sunmao_heap_aligned_alloc");
    if (!h || !align || !sm_is_pow2(align)) {
        errno = EINVAL;
        return NULL;
    }
    return sm_heap_alloc(h, size, align);
}

SM_EXPORT void SM_API(sunmao_heap_free)(sunmao_heap_t *heap, void *ptr)
{
    if (!ptr)
        return;
    sm_heap_t *h = sm_heap_handle(heap, "sunmao_heap_free");
    sm_heap_t *owner = sm_heaps_owner(ptr);
    if (!owner && h && h->in_range && h->spans && (char *)ptr > (char *)h->spans &&
        (char *)ptr < (char *)h->spans + h->spans->bytes)
        owner = h; /* a block in a page the range shares with other memory */
    if (!owner) {
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, "sunmao_heap_free", ptr, "not a block of a heap");
        return;
    }
    if (h && owner != h)
        SM_ERR_FN(raise)(SM_ERR_INVALID_FREE, "sunmao_heap_free", ptr, "a block of another heap (freed there)");
    sm_heap_release(owner, ptr, "sunmao_heap_free");
}

SM_EXPORT void *SM_API(sunmao_heap_realloc)(sunmao_heap_t *heap, void *ptr, size_t size)
{
    sm_heap_t *h = sm_heap_handle(heap, "sunmao_heap_realloc");
    if (!h) {
        errno = EINVAL;
        return NULL;
    }
    if (!ptr)
        return sm_heap_alloc(h, size, 16);
    if (size == 0) { /* as realloc(p, 0) here: free, NULL */
        SM_API(sunmao_heap_free)(heap, ptr);
        return NULL;
    }
    sm_heap_t *owner = sm_heaps_owner(ptr);
    if (owner == h)
        return sm_heap_resize(h, ptr, size, "sunmao_heap_realloc");
    /* malloc's block or another heap's: moved into this one */
    size_t usable = SM_API(malloc_usable_size)(ptr);
    if (!usable) {
        errno = EINVAL;
        return NULL;
    }
    void *q = sm_heap_alloc(h, size, 16);
    if (!q)
        return NULL;
    memcpy(q, ptr, usable < size ? usable : size);
    SM_API(free)(ptr);
    return q;
}

SM_EXPORT sunmao_heap_t *SM_API(sunmao_heap_of)(const void *ptr)
{
    return (sunmao_heap_t *)sm_heaps_owner(ptr);
}

SM_EXPORT int SM_API(sunmao_heap_stats)(sunmao_heap_t *heap, struct sunmao_heap_stats *out)
{
    sm_heap_t *h = heap ? &heap->h : NULL;
    if (!sm_heap_valid(h) || !out)
        return EINVAL;
    sm_heap_counts_t c;
    sm_heap_read_stats(h, &c);
    out->allocated = c.allocated;
    out->peak_allocated = c.peak_allocated;
    out->blocks = c.blocks;
    out->mapped = c.mapped;
    out->allocs = c.allocs;
    out->frees = c.frees;
    out->resets = c.resets;
    out->refused = c.refused;
    return 0;
}
#endif
