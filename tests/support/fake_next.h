/* A fake bottom layer for per-layer unit tests: serves requests from libc (posix_memalign), fills
 * fresh blocks with 0xCD garbage so a layer that forgets to zero is caught, records every call and
 * can be told to run out of memory. Template: define SM_LAYER (no SM_NEXT) before including.
 * Live blocks are tracked in a table, so getmeta and free without a size work as the contract
 * says and a free of a block the fake never gave out is counted as a contract violation.
 * With FAKE_MOVE defined it also offers MOVE, as mmap_heap's remap does for a large block: a live
 * block's contents at a new address, the old block given back (obj.moves counts them; while
 * obj.refuse_moves is set every move is refused; the new block is aligned to obj.move_align, 0:
 * 16 bytes past a page boundary, so never page-aligned whatever libc's allocator returns). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/core/layer.h>

#ifndef SM_LAYER
#error "fake_next: define SM_LAYER before including"
#endif
#define FAKE_MAX_BLOCKS 8192

struct SM_FN(block) { void *ptr; size_t size; void *base; }; /* base: what libc gave when ptr lies past it, else NULL */
static struct {
    pthread_mutex_t lock;
    struct SM_FN(block) blocks[FAKE_MAX_BLOCKS];
    size_t live_blocks, live_bytes;
    size_t limit_bytes;                  /* 0 = unlimited; above it alloc fails with ENOMEM */
    unsigned long allocs, frees, failed, bad_frees, creates, forks, thread_exits, purges, bad_purges, releases;
    unsigned long moves;
    bool refuse_moves;
    size_t move_align;
} SM_FN(obj) = { PTHREAD_MUTEX_INITIALIZER, { { 0, 0, 0 } }, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, 0 };

enum { SM_FN(thread_safe) = 1, SM_FN(min_align) = 16, SM_FN(zeroed) = 0 };

static inline int SM_FN(create)(void) { SM_FN(obj).creates++; return 0; }

/* A block of n bytes at offset bytes past an align boundary (offset < align). */
static inline void *SM_FN(alloc_at)(sm_mctx_t *c, size_t n, size_t align, size_t offset)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    void *base = NULL;
    if ((SM_FN(obj).limit_bytes && SM_FN(obj).live_bytes + n > SM_FN(obj).limit_bytes) ||
        SM_FN(obj).live_blocks == FAKE_MAX_BLOCKS ||
        posix_memalign(&base, align < sizeof(void *) ? sizeof(void *) : align, n + offset) != 0) {
        SM_FN(obj).failed++;
        pthread_mutex_unlock(&SM_FN(obj).lock);
        errno = ENOMEM;
        return c->ptr = NULL;
    }
    char *p = (char *)base + offset;
    memset(p, 0xCD, n);
    SM_FN(obj).blocks[SM_FN(obj).live_blocks++] = (struct SM_FN(block)){ p, n, offset ? base : NULL };
    SM_FN(obj).live_bytes += n;
    SM_FN(obj).allocs++;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return c->ptr = p;
}

static inline void *SM_FN(alloc)(sm_mctx_t *c) { return SM_FN(alloc_at)(c, c->size ? c->size : 1, c->align, 0); }

static inline long SM_FN(find_locked)(const void *p)
{
    for (size_t i = 0; i < SM_FN(obj).live_blocks; i++)
        if (SM_FN(obj).blocks[i].ptr == p)
            return (long)i;
    return -1;
}

static inline void SM_FN(free)(sm_mctx_t *c)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    long i = SM_FN(find_locked)(c->ptr);
    if (i < 0 || ((c->flags & SM_F_SIZED) && c->size > SM_FN(obj).blocks[i].size)) {
        SM_FN(obj).bad_frees++;
    } else {
        SM_FN(obj).live_bytes -= SM_FN(obj).blocks[i].size;
        free(SM_FN(obj).blocks[i].base ? SM_FN(obj).blocks[i].base : SM_FN(obj).blocks[i].ptr);
        SM_FN(obj).blocks[i] = SM_FN(obj).blocks[--SM_FN(obj).live_blocks];
        SM_FN(obj).frees++;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
}

static inline bool SM_FN(getmeta)(sm_mctx_t *c)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    long i = SM_FN(find_locked)(c->ptr);
    if (i >= 0) {
        c->usable = SM_FN(obj).blocks[i].size;
        c->owner = SM_LAYER_NAME;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return i >= 0;
}

static inline bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    sm_mctx_t m = *c;
    return SM_FN(getmeta)(&m) && n <= m.usable;
}

/* Purge: a range inside a live block; its memory is the C library's, so "dropping" it is filling it
 * with zeros (SM_F_ZERO) or garbage (lazy: contents undefined). A range outside every block counts
 * as a contract violation. */
static inline bool SM_FN(purge)(sm_mctx_t *c)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    bool inside = false;
    for (size_t i = 0; i < SM_FN(obj).live_blocks && !inside; i++) {
        char *b = (char *)SM_FN(obj).blocks[i].ptr;
        inside = (char *)c->ptr >= b && c->size <= SM_FN(obj).blocks[i].size &&
                 (size_t)((char *)c->ptr - b) <= SM_FN(obj).blocks[i].size - c->size;
    }
    if (inside) {
        memset(c->ptr, (c->flags & SM_F_ZERO) ? 0 : 0xCD, c->size);
        SM_FN(obj).purges++;
    } else {
        SM_FN(obj).bad_purges++;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return inside;
}
static inline void SM_FN(release)(sm_release_t *r) { (void)r; SM_FN(obj).releases++; }
static inline void SM_FN(thread_exit)(void) { __atomic_add_fetch(&SM_FN(obj).thread_exits, 1, __ATOMIC_RELAXED); }
static inline void SM_FN(fork_prepare)(void) { pthread_mutex_lock(&SM_FN(obj).lock); SM_FN(obj).forks++; }
static inline void SM_FN(fork_parent)(void) { pthread_mutex_unlock(&SM_FN(obj).lock); }
static inline void SM_FN(fork_child)(void) { pthread_mutex_init(&SM_FN(obj).lock, NULL); }

#ifdef FAKE_MOVE
static inline bool SM_FN(move)(sm_mctx_t *c, size_t n)
{
    size_t align = SM_FN(obj).move_align ? SM_FN(obj).move_align : 4096;
    size_t offset = SM_FN(obj).move_align ? 0 : 16;
    sm_mctx_t old = sm_mctx_block(c->ptr, 0, 0), fresh = sm_mctx_alloc(n, align, 0);
    void *q;
    if (SM_FN(obj).refuse_moves || !SM_FN(getmeta)(&old) || !(q = SM_FN(alloc_at)(&fresh, n, align, offset)))
        return false;
    memcpy(q, c->ptr, old.usable < n ? old.usable : n);
    SM_FN(free)(&old);
    c->ptr = q;
    SM_FN(obj).moves++;
    return true;
}
#define SM_LAYER_OFFERS SM_CAP_MOVE
#undef FAKE_MOVE
#endif

#undef FAKE_MAX_BLOCKS
#include <sunmao/core/layer_end.h>
