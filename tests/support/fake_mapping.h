/* A fake bottom layer offering capability MAPPING (core/capability.h: L_split, L_remap, L_join), for unit
 * tests of the layers that consume it (decay_cache with SM_OPT_GROW 1) without mmap. Template: define
 * SM_LAYER (no SM_NEXT) before including.
 *
 * Blocks are whole pages (FAKE_MAPPING_PAGE, 4 KiB) of libc memory (posix_memalign), filled with 0xCD
 * garbage when handed out, like fake_next's, and tracked in a table: getmeta, free without a size
 * and the detection of blocks it never gave out work as the contract says. A block is a piece of a
 * region (one libc allocation): split cuts a piece in two pieces of the same region, each freed,
 * resized or remapped on its own, and the region goes back to libc when its last piece is freed.
 * remap grows a piece by moving it (a new region, the old bytes copied, the old piece freed: the
 * tail is garbage, not zero as mremap's would be) and shrinks it in place; resize shrinks in place
 * and grows only what already fits, like mmap_heap.
 *
 * Records every call (L_obj: counts, live blocks and bytes, remap moves) and can be told to fail:
 *   limit_bytes   0 = unlimited; an allocation or a remap's move that would take live_bytes above it
 *                 fails (NULL / false, errno = ENOMEM). 1: every allocation fails.
 *   fail_split, fail_remap, fail_join   nonzero: every split answers NULL, every remap or join false
 *                 (blocks unchanged).
 * Contract violations it counts: bad_frees (a block it never gave out, or a sized free larger than
 * the block), bad_purges (a range outside every block). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sunmao/core/bits.h>
#include <sunmao/core/layer.h>

#ifndef SM_LAYER
#error "fake_mapping: define SM_LAYER before including"
#endif
#ifdef SM_NEXT
#error "fake_mapping: a bottom layer; SM_NEXT must not be defined"
#endif
#define FAKE_MAPPING_PAGE ((size_t)4096)
#define FAKE_MAPPING_MAX 4096

struct SM_FN(region) { char *mem; unsigned pieces; };
struct SM_FN(piece) { char *ptr; size_t size; struct SM_FN(region) *region; };

static struct {
    pthread_mutex_t lock;
    struct SM_FN(piece) pieces[FAKE_MAPPING_MAX];
    size_t live_blocks, live_bytes, regions;
    size_t limit_bytes; /* 0 = unlimited */
    int fail_split, fail_remap, fail_join;
    unsigned long creates, allocs, frees, failed, bad_frees, getmetas, resizes, purges, bad_purges;
    unsigned long splits, split_fails, remaps, remap_moves, remap_fails, joins, join_fails;
    unsigned long releases, thread_exits, forks;
} SM_FN(obj) = { .lock = PTHREAD_MUTEX_INITIALIZER };

enum { SM_FN(thread_safe) = 1, SM_FN(min_align) = 4096, SM_FN(zeroed) = 0 };

static inline int SM_FN(create)(void)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).creates++;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return 0;
}

static inline long SM_FN(find_locked)(const void *p)
{
    for (size_t i = 0; i < SM_FN(obj).live_blocks; i++)
        if (SM_FN(obj).pieces[i].ptr == p)
            return (long)i;
    return -1;
}

/* A new region of `bytes` (page multiple) aligned to align, as a piece; NULL if refused. Lock held. */
static inline char *SM_FN(map_locked)(size_t bytes, size_t align)
{
    void *mem = NULL;
    struct SM_FN(region) *r = NULL;
    if ((SM_FN(obj).limit_bytes && SM_FN(obj).live_bytes + bytes > SM_FN(obj).limit_bytes) ||
        SM_FN(obj).live_blocks == FAKE_MAPPING_MAX || bytes > ((size_t)1 << 40) ||
        !(r = (struct SM_FN(region) *)calloc(1, sizeof *r)) ||
        posix_memalign(&mem, align < FAKE_MAPPING_PAGE ? FAKE_MAPPING_PAGE : align, bytes) != 0) {
        free(r);
        return NULL;
    }
    memset(mem, 0xCD, bytes);
    r->mem = (char *)mem;
    r->pieces = 1;
    SM_FN(obj).regions++;
    SM_FN(obj).pieces[SM_FN(obj).live_blocks++] = (struct SM_FN(piece)){ (char *)mem, bytes, r };
    SM_FN(obj).live_bytes += bytes;
    return (char *)mem;
}

/* Removes piece i; its region goes back to libc with its last piece. Lock held. */
static inline void SM_FN(unmap_locked)(long i)
{
    struct SM_FN(piece) pc = SM_FN(obj).pieces[i];
    SM_FN(obj).pieces[i] = SM_FN(obj).pieces[--SM_FN(obj).live_blocks];
    SM_FN(obj).live_bytes -= pc.size;
    if (--pc.region->pieces == 0) {
        free(pc.region->mem);
        free(pc.region);
        SM_FN(obj).regions--;
    }
}

static inline void *SM_FN(alloc)(sm_mctx_t *c)
{
    size_t bytes = c->size > ((size_t)1 << 40) ? SIZE_MAX : sm_align_up(c->size ? c->size : 1, FAKE_MAPPING_PAGE);
    pthread_mutex_lock(&SM_FN(obj).lock);
    char *p = SM_FN(map_locked)(bytes, c->align);
    if (p)
        SM_FN(obj).allocs++;
    else
        SM_FN(obj).failed++;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    if (!p)
        errno = ENOMEM;
    c->flags &= ~(unsigned)SM_F_FRESH;
    return c->ptr = p;
}

static inline void SM_FN(free)(sm_mctx_t *c)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    long i = SM_FN(find_locked)(c->ptr);
    if (i < 0 || ((c->flags & SM_F_SIZED) && c->size > SM_FN(obj).pieces[i].size)) {
        SM_FN(obj).bad_frees++;
    } else {
        SM_FN(unmap_locked)(i);
        SM_FN(obj).frees++;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
}

static inline bool SM_FN(getmeta)(sm_mctx_t *c)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).getmetas++;
    long i = SM_FN(find_locked)(c->ptr);
    if (i >= 0) {
        c->usable = SM_FN(obj).pieces[i].size;
        c->owner = SM_LAYER_NAME;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return i >= 0;
}

/* Shrinks in place (the tail stays in the region, unused); grows only what already fits. */
static inline bool SM_FN(resize)(sm_mctx_t *c, size_t n)
{
    size_t want = n > ((size_t)1 << 40) ? SIZE_MAX : sm_align_up(n ? n : 1, FAKE_MAPPING_PAGE);
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).resizes++;
    long i = SM_FN(find_locked)(c->ptr);
    bool ok = i >= 0 && want <= SM_FN(obj).pieces[i].size;
    if (ok) {
        SM_FN(obj).live_bytes -= SM_FN(obj).pieces[i].size - want;
        SM_FN(obj).pieces[i].size = want;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return ok;
}

static inline bool SM_FN(purge)(sm_mctx_t *c)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    bool inside = false;
    for (size_t i = 0; i < SM_FN(obj).live_blocks && !inside; i++) {
        char *b = SM_FN(obj).pieces[i].ptr;
        size_t n = SM_FN(obj).pieces[i].size;
        inside = (char *)c->ptr >= b && c->size <= n && (size_t)((char *)c->ptr - b) <= n - c->size;
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

static inline void SM_FN(release)(sm_release_t *r)
{
    (void)r;
    __atomic_add_fetch(&SM_FN(obj).releases, 1, __ATOMIC_RELAXED);
}
static inline void SM_FN(thread_exit)(void) { __atomic_add_fetch(&SM_FN(obj).thread_exits, 1, __ATOMIC_RELAXED); }
static inline void SM_FN(fork_prepare)(void)
{
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).forks++;
}
static inline void SM_FN(fork_parent)(void) { pthread_mutex_unlock(&SM_FN(obj).lock); }
static inline void SM_FN(fork_child)(void) { pthread_mutex_init(&SM_FN(obj).lock, NULL); }

/* ---- capability MAPPING ---- */
/* Cuts the live block c->ptr after n bytes (rounded up to pages): the tail becomes a block of its
 * own, returned; NULL (block unchanged) for anything else, nothing to cut, or when told to fail. */
static inline void *SM_FN(split)(sm_mctx_t *c, size_t n)
{
    size_t head = n > ((size_t)1 << 40) ? SIZE_MAX : sm_align_up(n ? n : 1, FAKE_MAPPING_PAGE);
    char *tail = NULL;
    pthread_mutex_lock(&SM_FN(obj).lock);
    long i = SM_FN(find_locked)(c->ptr);
    if (i >= 0 && !SM_FN(obj).fail_split && head < SM_FN(obj).pieces[i].size &&
        SM_FN(obj).live_blocks < FAKE_MAPPING_MAX) {
        struct SM_FN(piece) *pc = &SM_FN(obj).pieces[i];
        tail = pc->ptr + head;
        SM_FN(obj).pieces[SM_FN(obj).live_blocks++] = (struct SM_FN(piece)){ tail, pc->size - head, pc->region };
        pc->region->pieces++;
        pc->size = head;
        SM_FN(obj).splits++;
    } else {
        SM_FN(obj).split_fails++;
    }
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return tail;
}

/* Makes the live block c->ptr n bytes long (rounded up to pages): shrinks in place, grows by moving
 * (c->ptr updated; the old address is no block any more). False leaves the block unchanged. */
static inline bool SM_FN(remap)(sm_mctx_t *c, size_t n)
{
    size_t want = n > ((size_t)1 << 40) ? SIZE_MAX : sm_align_up(n ? n : 1, FAKE_MAPPING_PAGE);
    bool ok = false;
    pthread_mutex_lock(&SM_FN(obj).lock);
    SM_FN(obj).remaps++;
    long i = SM_FN(find_locked)(c->ptr);
    if (i >= 0 && want <= SM_FN(obj).pieces[i].size) {
        SM_FN(obj).live_bytes -= SM_FN(obj).pieces[i].size - want;
        SM_FN(obj).pieces[i].size = want;
        ok = true;
    } else if (i >= 0 && !SM_FN(obj).fail_remap) {
        struct SM_FN(piece) old = SM_FN(obj).pieces[i];
        char *q = SM_FN(map_locked)(want, FAKE_MAPPING_PAGE);
        if (q) {
            memcpy(q, old.ptr, old.size);
            SM_FN(unmap_locked)(SM_FN(find_locked)(old.ptr));
            c->ptr = q;
            SM_FN(obj).remap_moves++;
            ok = true;
        }
    }
    if (!ok)
        SM_FN(obj).remap_fails++;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return ok;
}

/* Makes the live block c->ptr and the live block `next`, which starts where it ends, one block; only
 * pieces of one region (the fake's mapping) are joined. False (both unchanged) otherwise, or when
 * told to fail. */
static inline bool SM_FN(join)(sm_mctx_t *c, void *next)
{
    bool ok = false;
    pthread_mutex_lock(&SM_FN(obj).lock);
    long i = SM_FN(find_locked)(c->ptr), j = SM_FN(find_locked)(next);
    if (i >= 0 && j >= 0 && !SM_FN(obj).fail_join) {
        struct SM_FN(piece) *a = &SM_FN(obj).pieces[i], *b = &SM_FN(obj).pieces[j];
        if (a->ptr + a->size == b->ptr && a->region == b->region) {
            a->size += b->size;
            b->region->pieces--;
            *b = SM_FN(obj).pieces[--SM_FN(obj).live_blocks];
            ok = true;
        }
    }
    if (ok)
        SM_FN(obj).joins++;
    else
        SM_FN(obj).join_fails++;
    pthread_mutex_unlock(&SM_FN(obj).lock);
    return ok;
}

/* For tests: a counter read under the lock. */
#define FAKE_MAPPING_GET(inst, field)                                                                                \
    ({                                                                                                               \
        pthread_mutex_lock(&inst##_obj.lock);                                                                        \
        __typeof__(inst##_obj.field) v_ = inst##_obj.field;                                                          \
        pthread_mutex_unlock(&inst##_obj.lock);                                                                      \
        v_;                                                                                                          \
    })

#undef FAKE_MAPPING_PAGE
#undef FAKE_MAPPING_MAX
#define SM_LAYER_OFFERS SM_CAP_MAPPING
#include <sunmao/core/layer_end.h>
