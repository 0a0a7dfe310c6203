/* The layer-conformance suite: the generic cases of the layer contract (core/layer.h, core/release.h),
 * run against any layer instance. A template, like the layers: define the parameters, include, and
 * call conf_<L>_run() (the file may be included again for another layer).
 *
 *   CONF_L        the layer instance under test (composed already, with SM_ERR callback)
 *   CONF_NAME     its name in the case lines, a string: "ok <prog>: <CONF_NAME>/<case>"
 *   CONF_F        its next layer, a fake from tests/support/ (fake_next.h, fake_batch.h or
 *                 fake_mapping.h: they share the fields the suite reads: lock, live_blocks, frees,
 *                 bad_frees, limit_bytes, releases, thread_exits, forks); absent for an OS layer
 * Knobs (all optional; the default first):
 *   CONF_MAX_SIZE      3 MiB     the largest size of the round trips
 *   CONF_MAX_ALIGN     1 MiB     the largest alignment of the round trips
 *   CONF_HAMMER_MAX    20000     the sizes of the threaded hammer, and one request in 16 up to
 *   CONF_HAMMER_BIG    300000
 *   CONF_HAMMER_OPS    4000      operations per hammer thread
 *   CONF_FOREIGN_SIZE  5000      the size of the next layer's block the pass-down case frees through L
 *                                (a size L would not keep: a cache keeps blocks of its own kind)
 *   CONF_BLOCK_SIZE    256       the size of the blocks the bad-free cases free wrongly
 *   CONF_INTERIOR_BY_F 0         1: blocks of CONF_BLOCK_SIZE are the next layer's (L passes them
 *                                on), so an interior free is the fake's to catch, not L's err policy
 *   CONF_DOUBLE        CONF_DOUBLE_L    who catches a double free: the layer's err policy, once
 *                      CONF_DOUBLE_F    the fake (the block is the next layer's)
 *                      CONF_DOUBLE_CACHED  L keeps freed blocks (a cache): a second free while the
 *                                       block is kept is L's to report; once it went back below
 *                                       (L_release(ALL)), the next layer's
 *   CONF_DOUBLE_KIND   SM_ERR_DOUBLE_FREE  the kind L reports a double free as (a layer that forgets
 *                                a block entirely on free can only say INVALID_FREE)
 *   CONF_OOM_SIZE      4096      the size requested until the next layer's refusal shows (with
 *                                CONF_F) or memory runs out (OS layers: at most CONF_OOM_TRIES
 *   CONF_OOM_TRIES     100000    requests; CONF_OOM_TRIES 1: an OS layer that cannot run out asks
 *                                once for 128 TiB, more than a 47-bit user address space holds)
 *   CONF_KEEPS()       0         blocks the fake may still hold after everything was freed and
 *                                L_release(ALL): what the layer documents it keeps (page-map nodes)
 *   CONF_RELEASE_CHECK()  (OS layers) what must hold after everything was freed and released
 *
 * The cases (each adapted where the layer's documented semantics differ, see the knobs):
 *   round_trips         sizes 1 .. CONF_MAX_SIZE at alignments 16 .. CONF_MAX_ALIGN and at random,
 *                       patterns verified, getmeta (usable, owner), min_align, SM_F_FRESH blocks zero,
 *                       shrinking resize keeps contents, sized and unsized frees
 *   foreign_pass_down   a block of the next layer: getmeta, resize and free through L reach the fake;
 *                       a pointer nobody owns reaches the fake's violation count, not L's err policy
 *   foreign_pointer     (OS layers) a pointer nobody owns: getmeta false, free reported once
 *   bad_frees           an interior-pointer free and a double free each reach the err policy exactly
 *                       once (or the fake's count, see the knobs); the neighbours stay intact
 *   out_of_memory       the next layer refusing: NULL with ENOMEM, then recovery and no leak
 *   fork                fork with the layer in use (and, if thread-safe, a thread allocating): the
 *                       child allocates and frees, the parent goes on; the hooks reach the fake
 *   hammer              (thread-safe layers) threads alloc, free (sized or not, or by another thread)
 *                       and resize (realloc in place, else by copy), every block's pattern verified
 *   release             after everything was freed, L_release(DECAYED), then (ALL): the fake holds
 *                       only what the layer keeps, and both releases reached it */
#ifndef SUNMAO_TEST_CONFORMANCE_H
#define SUNMAO_TEST_CONFORMANCE_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sunmao/core/bits.h>
#include <sunmao/core/layer.h>
#include <sunmao/policies/err/callback.h>
#include "check.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CONF_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CONF_SANITIZED 1
#endif
#endif
#ifndef CONF_SANITIZED
#define CONF_SANITIZED 0
#endif

enum { CONF_DOUBLE_L = 0, CONF_DOUBLE_F = 1, CONF_DOUBLE_CACHED = 2 };
enum { CONF_THREADS = 4, CONF_SLOTS = 64 };

/* The err policy's reports, by kind (install with sm_err_callback_set(conf_on_error)). */
static unsigned long conf_errors[SM_ERR_KIND_COUNT];
static void conf_on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    __atomic_add_fetch(&conf_errors[kind], 1, __ATOMIC_RELAXED);
}
static inline unsigned long conf_err_total(void)
{
    unsigned long n = 0;
    for (int k = 0; k < SM_ERR_KIND_COUNT; k++)
        n += __atomic_load_n(&conf_errors[k], __ATOMIC_RELAXED);
    return n;
}
static inline void conf_err_reset(void)
{
    for (int k = 0; k < SM_ERR_KIND_COUNT; k++)
        __atomic_store_n(&conf_errors[k], 0, __ATOMIC_RELAXED);
}

static inline unsigned conf_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* Patterns (check.h's bytes, which depend on the block's address): every byte of the first 1 KiB,
 * 16 bytes of every page after it, and the last 256 bytes. Positions depend on `filled` (the size
 * the pattern was laid for) only through the tail, so a prefix can be checked after a resize. */
static inline size_t conf_next(size_t i, size_t filled)
{
    i++;
    if (i < 1024 || (i & 4095) < 16 || i + 256 >= filled)
        return i;
    size_t page = (i | 4095) + 1, tail = filled - 256;
    return page < tail ? page : tail;
}
static inline void conf_fill(void *p, size_t n, unsigned seed)
{
    unsigned char *b = (unsigned char *)p;
    for (size_t i = 0; i < n; i = conf_next(i, n))
        b[i] = check_pattern_byte(p, i, seed);
}
/* The first `upto` bytes of data hold the pattern laid at `key` for a block of `filled` bytes. */
static inline bool conf_verify_at(const void *data, const void *key, size_t filled, size_t upto, unsigned seed)
{
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < upto && i < filled; i = conf_next(i, filled))
        if (b[i] != check_pattern_byte(key, i, seed))
            return false;
    return true;
}
static inline bool conf_verify(const void *p, size_t n, unsigned seed) { return conf_verify_at(p, p, n, n, seed); }
static inline bool conf_zero(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i += (i < 65536 ? 1 : 509))
        if (b[i])
            return false;
    return !n || !b[n - 1];
}

/* Waits for a forked child at most `seconds`, then kills it. Its exit status, or -1. */
static inline int conf_wait_child(pid_t pid, int seconds)
{
    int status = 0;
    for (int i = 0; i < seconds * 100; i++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0)
            return -1;
        struct timespec t = { 0, 10 * 1000 * 1000 };
        nanosleep(&t, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* A size for the random phases: log-uniform in [1, max]. */
static inline size_t conf_size(unsigned *seed, size_t max)
{
    unsigned bits = conf_rand(seed) % 23;
    size_t n = 1 + ((size_t)conf_rand(seed) << 8 ^ conf_rand(seed)) % ((size_t)1 << bits);
    return n > max ? 1 + n % max : n;
}

#endif /* SUNMAO_TEST_CONFORMANCE_H */

/* ---- the template ---- */
#ifndef CONF_L
#error "conformance.h: define CONF_L (the layer instance) before including"
#endif
#ifndef CONF_NAME
#error "conformance.h: define CONF_NAME (the layer's name in case lines) before including"
#endif
#ifndef CONF_MAX_SIZE
#define CONF_MAX_SIZE ((size_t)3 << 20)
#endif
#ifndef CONF_MAX_ALIGN
#define CONF_MAX_ALIGN ((size_t)1 << 20)
#endif
#ifndef CONF_HAMMER_MAX
#define CONF_HAMMER_MAX 20000
#endif
#ifndef CONF_HAMMER_BIG
#define CONF_HAMMER_BIG 300000
#endif
#ifndef CONF_HAMMER_OPS
#define CONF_HAMMER_OPS 4000
#endif
#ifndef CONF_FOREIGN_SIZE
#define CONF_FOREIGN_SIZE 5000
#endif
#ifndef CONF_BLOCK_SIZE
#define CONF_BLOCK_SIZE 256
#endif
#ifndef CONF_INTERIOR_BY_F
#define CONF_INTERIOR_BY_F 0
#endif
#ifndef CONF_DOUBLE
#define CONF_DOUBLE CONF_DOUBLE_L
#endif
#ifndef CONF_DOUBLE_KIND
#define CONF_DOUBLE_KIND SM_ERR_DOUBLE_FREE
#endif
#ifndef CONF_OOM_SIZE
#define CONF_OOM_SIZE 4096
#endif
#ifndef CONF_OOM_TRIES
#define CONF_OOM_TRIES 100000
#endif
#ifndef CONF_KEEPS
#define CONF_KEEPS() 0
#endif
#ifndef CONF_RELEASE_CHECK
#define CONF_RELEASE_CHECK() ((void)0)
#endif

#define CONF_FN(name) SM_CAT4(conf_, CONF_L, _, name)
#define CONF_LFN(name) SM_CAT3(CONF_L, _, name)
#ifdef CONF_F
#define CONF_FFN(name) SM_CAT3(CONF_F, _, name)
#define CONF_FOBJ SM_CAT(CONF_F, _obj)
/* A field of the fake, read or written under its lock. */
#define CONF_F_GET(field)                                                                                            \
    ({                                                                                                               \
        pthread_mutex_lock(&CONF_FOBJ.lock);                                                                         \
        __typeof__(CONF_FOBJ.field) v_ = CONF_FOBJ.field;                                                            \
        pthread_mutex_unlock(&CONF_FOBJ.lock);                                                                       \
        v_;                                                                                                          \
    })
#define CONF_F_SET(field, v)                                                                                         \
    do {                                                                                                             \
        pthread_mutex_lock(&CONF_FOBJ.lock);                                                                         \
        CONF_FOBJ.field = (v);                                                                                       \
        pthread_mutex_unlock(&CONF_FOBJ.lock);                                                                       \
    } while (0)
#endif

/* ---- the API as a socket would call it ---- */
static inline void *CONF_FN(alloc)(size_t size, size_t align, unsigned *flags)
{
    sm_mctx_t c = sm_mctx_alloc(size, align, flags ? *flags : 0);
    void *p = CONF_LFN(alloc)(&c);
    if (flags)
        *flags = c.flags;
    return p;
}
static inline void CONF_FN(free)(void *p, size_t size, bool sized)
{
    sm_mctx_t c = sm_mctx_block(p, sized ? size : 0, sized ? SM_F_SIZED : 0);
    CONF_LFN(free)(&c);
}
static inline size_t CONF_FN(usable)(void *p, const char **owner)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    bool ok = CONF_LFN(getmeta)(&c);
    if (owner)
        *owner = ok ? c.owner : NULL;
    return ok ? c.usable : 0;
}
static inline bool CONF_FN(resize)(void *p, size_t n)
{
    sm_mctx_t c = sm_mctx_block(p, 0, 0);
    return CONF_LFN(resize)(&c, n);
}
static inline sm_release_t CONF_FN(release)(uint64_t now, unsigned how)
{
    sm_release_t r = sm_release_request(now, how);
    CONF_LFN(release)(&r);
    return r;
}

/* One block: checks what the contract promises about a fresh one, then lays its pattern. */
static inline bool CONF_FN(take)(void *p, size_t size, size_t align, unsigned flags, unsigned seed)
{
    const char *owner;
    size_t usable = p ? CONF_FN(usable)(p, &owner) : 0;
    CHECKF(p && sm_ptr_aligned(p, align) && sm_ptr_aligned(p, (size_t)CONF_LFN(min_align)),
           "alloc(%zu, align %zu) = %p (min_align %zu)", size, align, p, (size_t)CONF_LFN(min_align));
    if (!p)
        return false;
    CHECKF(usable >= size && owner != NULL, "alloc(%zu, align %zu): usable %zu, owner %s", size, align, usable,
           owner ? owner : "none");
    if ((flags & SM_F_FRESH) || CONF_LFN(zeroed))
        CHECKF(conf_zero(p, size), "alloc(%zu, align %zu): %s block is not zero", size, align,
               (flags & SM_F_FRESH) ? "a SM_F_FRESH" : "a zeroed layer's");
    conf_fill(p, size, seed);
    return true;
}

/* ---- round trips ---- */
static void CONF_FN(round_trips)(void)
{
    static const size_t sizes[] = { 1, 8, 15, 16, 17, 31, 48, 100, 255, 256, 257, 1000, 1024, 4095, 4096, 4097,
                                    8192, 8193, 12345, 32768, 65535, 65536, 65537, 100000, 131072, 262144, 262145,
                                    500000, (size_t)1 << 20, ((size_t)1 << 20) + 1, (size_t)3 << 20 };
    static const size_t aligns[] = { 16, 32, 64, 128, 256, 4096, 8192, 65536, (size_t)1 << 20 };
    enum { NS = sizeof sizes / sizeof *sizes, NR = 200 };
    static void *p[NR];
    static size_t n[NR];
    static unsigned sd[NR];
    conf_err_reset();
#ifdef CONF_F
    unsigned long bad = CONF_F_GET(bad_frees);
#endif
    unsigned seed = 12345;
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns && aligns[a] <= CONF_MAX_ALIGN; a++) {
        int k = 0;
        for (size_t s = 0; s < NS && sizes[s] <= CONF_MAX_SIZE; s++, k++) {
            unsigned flags = k % 3 == 0 ? SM_F_ZERO : 0;
            n[k] = sizes[s];
            p[k] = CONF_FN(alloc)(n[k], aligns[a], &flags);
            if (!CONF_FN(take)(p[k], n[k], aligns[a], flags, (unsigned)(k + 100 * a)))
                n[k] = 0;
        }
        for (int i = 0; i < k; i++) {
            if (!p[i])
                continue;
            CHECKF(conf_verify(p[i], n[i], (unsigned)(i + 100 * a)), "block of %zu at align %zu overwritten", n[i],
                   aligns[a]);
            if (i % 4 == 1 && n[i] > 1) { /* shrink in place, if the layer can: the prefix stays */
                size_t want = n[i] / 2 + 1;
                if (CONF_FN(resize)(p[i], want)) {
                    CHECKF(CONF_FN(usable)(p[i], NULL) >= want && conf_verify_at(p[i], p[i], n[i], want, (unsigned)(i + 100 * a)),
                           "resize(%zu -> %zu) lost the block or its contents", n[i], want);
                    n[i] = want;
                }
            }
        }
        for (int i = k; i-- > 0;)
            if (p[i])
                CONF_FN(free)(p[i], n[i], i % 2);
    }
    /* many blocks live at once, random sizes and alignments, freed in random order */
    for (int i = 0; i < NR; i++) {
        n[i] = conf_size(&seed, CONF_MAX_SIZE / 4);
        size_t align = conf_rand(&seed) % 8 ? 16 : aligns[conf_rand(&seed) % 7];
        unsigned flags = 0;
        p[i] = CONF_FN(alloc)(n[i], align, &flags);
        sd[i] = (unsigned)i * 7u;
        if (!CONF_FN(take)(p[i], n[i], align, flags, sd[i]))
            return;
    }
    for (int i = NR; i > 1; i--) {
        int j = (int)(conf_rand(&seed) % (unsigned)i);
        void *tp = p[i - 1];
        size_t tn = n[i - 1];
        unsigned ts = sd[i - 1];
        p[i - 1] = p[j], n[i - 1] = n[j], sd[i - 1] = sd[j];
        p[j] = tp, n[j] = tn, sd[j] = ts;
    }
    for (int i = 0; i < NR; i++) {
        CHECKF(conf_verify(p[i], n[i], sd[i]) && CONF_FN(usable)(p[i], NULL) >= n[i],
               "random block of %zu overwritten or shrunk", n[i]);
        CONF_FN(free)(p[i], n[i], i % 3 == 0);
    }
    CHECKF(conf_err_total() == 0, "%lu errors reported", conf_err_total());
#ifdef CONF_F
    CHECKF(CONF_F_GET(bad_frees) == bad, "%lu contract violations reached the next layer", CONF_F_GET(bad_frees) - bad);
#endif
}

#ifdef CONF_F
/* ---- a block of the next layer, handled through L ---- */
static void CONF_FN(foreign_pass_down)(void)
{
    conf_err_reset();
    const size_t n = CONF_FOREIGN_SIZE;
    sm_mctx_t fc = sm_mctx_alloc(n, 16, 0);
    void *b = CONF_FFN(alloc)(&fc);
    CHECK(b != NULL);
    if (!b)
        return;
    conf_fill(b, n, 77);
    unsigned long frees = CONF_F_GET(frees), bad = CONF_F_GET(bad_frees);
    size_t live = CONF_F_GET(live_blocks);
    const char *owner;
    size_t usable = CONF_FN(usable)(b, &owner);
    CHECKF(usable >= n && owner && !strcmp(owner, SM_STR(CONF_F)), "getmeta through L: usable %zu, owner %s", usable,
           owner ? owner : "none");
    CHECKF(CONF_FN(resize)(b, n / 2), "resize (shrink) through L did not reach the next layer");
    CHECK(conf_verify_at(b, b, n, n / 2, 77));
    CONF_FN(free)(b, 0, false);
    CHECKF(CONF_F_GET(frees) == frees + 1 && CONF_F_GET(live_blocks) == live - 1,
           "free through L: %lu frees reached the next layer, it holds %zu blocks (%zu before)",
           CONF_F_GET(frees) - frees, CONF_F_GET(live_blocks), live);
    /* a pointer nobody owns: down to the bottom, whose contract violation it is */
    long on_stack[8] __attribute__((aligned(16)));
    memset(on_stack, 0, sizeof on_stack);
    void *nobody = &on_stack[4];
    CHECK(CONF_FN(usable)(nobody, NULL) == 0);
    CONF_FN(free)(nobody, 0, false);
    CHECKF(CONF_F_GET(bad_frees) == bad + 1 && conf_err_total() == 0,
           "a pointer nobody owns: %lu violations below, %lu errors reported by L", CONF_F_GET(bad_frees) - bad,
           conf_err_total());
}
#else
/* ---- a pointer the OS layer never gave out ---- */
static void CONF_FN(foreign_pointer)(void)
{
    conf_err_reset();
    long on_stack[8] __attribute__((aligned(16)));
    memset(on_stack, 0, sizeof on_stack);
    void *nobody = &on_stack[4];
    CHECK(CONF_FN(usable)(nobody, NULL) == 0);
    CONF_FN(free)(nobody, 0, false);
    CHECKF(conf_errors[SM_ERR_INVALID_FREE] == 1 && conf_err_total() == 1, "%lu reports (%lu invalid frees)",
           conf_err_total(), conf_errors[SM_ERR_INVALID_FREE]);
}
#endif

/* ---- an interior-pointer free and a double free ---- */
static void CONF_FN(bad_frees)(void)
{
    const size_t n = CONF_BLOCK_SIZE;
    conf_err_reset();
#ifdef CONF_F
    unsigned long fbad = CONF_F_GET(bad_frees);
#define CONF_FBAD() (CONF_F_GET(bad_frees) - fbad)
#else
#define CONF_FBAD() 0ul
#endif
    /* b between two live neighbours, so its span, slab or chunk stays in use */
    void *a = CONF_FN(alloc)(n, 16, NULL), *b = CONF_FN(alloc)(n, 16, NULL), *c = CONF_FN(alloc)(n, 16, NULL);
    CHECK(a && b && c);
    if (!a || !b || !c)
        return;
    conf_fill(a, n, 1), conf_fill(b, n, 2), conf_fill(c, n, 3);
    CONF_FN(free)((char *)b + 16, 0, false);
    if (CONF_INTERIOR_BY_F) /* the block is the next layer's: L passes the free on */
        CHECKF(conf_err_total() == 0 && CONF_FBAD() == 1, "interior free: %lu reports by L, %lu violations below",
               conf_err_total(), CONF_FBAD());
    else
        CHECKF(conf_errors[SM_ERR_INVALID_FREE] == 1 && conf_err_total() == 1 && CONF_FBAD() == 0,
               "interior free: %lu reports (%lu invalid frees), %lu violations below", conf_err_total(),
               conf_errors[SM_ERR_INVALID_FREE], CONF_FBAD());
    CHECKF(conf_verify(b, n, 2) && CONF_FN(usable)(b, NULL) >= n, "the interior free changed the block");
    unsigned long before = conf_err_total(), fbefore = CONF_FBAD();
    CONF_FN(free)(b, 0, false);
    CHECKF(conf_err_total() == before && CONF_FBAD() == fbefore, "a valid free was reported");
    CONF_FN(free)(b, 0, false);
    if (CONF_DOUBLE == CONF_DOUBLE_F) {
        CHECKF((conf_err_total() - before) + (CONF_FBAD() - fbefore) == 1, "double free: %lu reports by L, %lu below",
               conf_err_total() - before, CONF_FBAD() - fbefore);
    } else {
        CHECKF(conf_errors[CONF_DOUBLE_KIND] == (CONF_DOUBLE_KIND == SM_ERR_INVALID_FREE && !CONF_INTERIOR_BY_F ? 2u : 1u) &&
                   conf_err_total() == before + 1 && CONF_FBAD() == fbefore,
               "double free: %lu reports (%lu of kind %s), %lu violations below", conf_err_total() - before,
               conf_errors[CONF_DOUBLE_KIND], sm_err_kind_name(CONF_DOUBLE_KIND), CONF_FBAD() - fbefore);
    }
    if (CONF_DOUBLE == CONF_DOUBLE_CACHED) {
        /* The cache reported it and kept the block once: it comes back once. Then, gone below after a
         * release of everything, a second free of it is reported once: by the thread cache, whose
         * mark it still carries (any thread's cache would see it), or by the next layer. */
        void *x = CONF_FN(alloc)(n, 16, NULL), *y = CONF_FN(alloc)(n, 16, NULL);
        CHECKF(x == b && y != b, "a double-freed block was kept twice (%p, %p; freed %p)", x, y, b);
        CONF_FN(free)(y, 0, false);
        CONF_FN(free)(x, 0, false);
        CONF_FN(release)(sm_plat_now_ms(), SM_RELEASE_ALL);
        before = conf_err_total(), fbefore = CONF_FBAD();
        CONF_FN(free)(b, 0, false);
        CHECKF((conf_err_total() - before) + (CONF_FBAD() - fbefore) == 1,
               "double free after the block went back: %lu reports by L, %lu violations below",
               conf_err_total() - before, CONF_FBAD() - fbefore);
    }
    CHECKF(conf_verify(a, n, 1) && conf_verify(c, n, 3), "a neighbour of the badly freed block was overwritten");
    CONF_FN(free)(a, 0, false);
    CONF_FN(free)(c, n, true);
#undef CONF_FBAD
    conf_err_reset();
}

/* ---- out of memory ---- */
static void CONF_FN(out_of_memory)(void)
{
    enum { TRIES = CONF_OOM_TRIES };
    void **held = (void **)calloc(TRIES, sizeof *held);
    CHECK(held != NULL);
    if (!held)
        return;
    conf_err_reset();
#ifdef CONF_F
    CONF_F_SET(limit_bytes, 1); /* the next layer refuses everything */
#endif
    int i = 0;
    void *p = NULL;
    int err = 0;
    for (; i < TRIES; i++) {
        errno = 0;
        p = CONF_FN(alloc)(TRIES == 1 ? (size_t)1 << 47 : (size_t)(CONF_OOM_SIZE), 16, NULL);
        err = errno;
        if (!p)
            break;
        held[i] = p;
        conf_fill(p, CONF_OOM_SIZE < 64 ? CONF_OOM_SIZE : 64, (unsigned)i);
    }
    CHECKF(!p && err == ENOMEM, "after %d requests: %p, errno %d", i, p, err);
#ifdef CONF_F
    CONF_F_SET(limit_bytes, 0);
#endif
    for (int k = 0; k < i; k++) {
        CHECKF(conf_verify(held[k], CONF_OOM_SIZE < 64 ? CONF_OOM_SIZE : 64, (unsigned)k), "block %d overwritten", k);
        CONF_FN(free)(held[k], 0, false);
    }
    free(held);
    void *q = CONF_FN(alloc)(CONF_OOM_SIZE, 16, NULL); /* memory again: served again */
    CHECK(q != NULL);
    if (q)
        CONF_FN(free)(q, CONF_OOM_SIZE, true);
    CONF_FN(release)(sm_plat_now_ms(), SM_RELEASE_ALL);
#ifdef CONF_F
    CHECKF(CONF_F_GET(live_blocks) == (size_t)(CONF_KEEPS()), "the next layer holds %zu blocks, the layer keeps %zu",
           CONF_F_GET(live_blocks), (size_t)(CONF_KEEPS()));
#endif
    CHECKF(conf_err_total() == 0, "%lu errors reported", conf_err_total());
}

/* ---- fork ---- */
static volatile int CONF_FN(fork_stop);
static void *CONF_FN(fork_busy)(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *p[16] = { 0 };
    size_t n[16] = { 0 };
    long bad = 0;
    while (!__atomic_load_n(&CONF_FN(fork_stop), __ATOMIC_RELAXED)) {
        unsigned k = conf_rand(&seed) % 16;
        if (p[k]) {
            bad += !conf_verify(p[k], n[k], k);
            CONF_FN(free)(p[k], n[k], true);
        }
        n[k] = 1 + conf_rand(&seed) % CONF_HAMMER_MAX;
        p[k] = CONF_FN(alloc)(n[k], 16, NULL);
        if (p[k])
            conf_fill(p[k], n[k], k);
        else
            bad++;
    }
    for (int k = 0; k < 16; k++)
        if (p[k]) {
            bad += !conf_verify(p[k], n[k], k);
            CONF_FN(free)(p[k], 0, false);
        }
    CONF_LFN(thread_exit)();
    return (void *)bad;
}
static void CONF_FN(fork)(void)
{
    enum { LIVE = 20, ROUNDS = 3 };
    void *live[LIVE];
    size_t n[LIVE];
    unsigned seed = 99;
    conf_err_reset();
#ifdef CONF_F
    unsigned long forks = CONF_F_GET(forks);
#endif
    for (int i = 0; i < LIVE; i++) {
        n[i] = conf_size(&seed, CONF_HAMMER_MAX);
        live[i] = CONF_FN(alloc)(n[i], 16, NULL);
        CHECK(live[i] != NULL);
        if (!live[i])
            return;
        conf_fill(live[i], n[i], (unsigned)i);
    }
    pthread_t busy;
    /* A second thread allocates through the layer while it forks, unless a sanitizer is on: the
     * fakes take their memory from the C library's malloc, which under ASan is the sanitizer's
     * allocator, and a fork while the other thread is inside it left the child hung on its lock
     * (decay_cache over fake_next, one run in a few under ASan; never with glibc's malloc, whose
     * fork takes its arena locks). The layer's own fork hooks are what this case is about. */
    bool threaded = CONF_LFN(thread_safe) && !CONF_SANITIZED;
    __atomic_store_n(&CONF_FN(fork_stop), 0, __ATOMIC_RELAXED);
    if (threaded)
        pthread_create(&busy, NULL, CONF_FN(fork_busy), (void *)(uintptr_t)7);
    for (int round = 0; round < ROUNDS; round++) {
        CONF_LFN(fork_prepare)();
        pid_t pid = fork();
        if (pid == 0) {
            CONF_LFN(fork_child)();
            int bad = 0;
            for (int i = 0; i < LIVE; i++)
                bad |= !conf_verify(live[i], n[i], (unsigned)i);
            void *mine[100];
            size_t m[100];
            unsigned s = (unsigned)round * 31u + 1;
            for (int i = 0; i < 100; i++) {
                m[i] = conf_size(&s, CONF_HAMMER_BIG);
                mine[i] = CONF_FN(alloc)(m[i], 16, NULL);
                if (!mine[i])
                    bad |= 2;
                else
                    conf_fill(mine[i], m[i], (unsigned)i);
            }
            for (int i = 0; i < 100; i++)
                if (mine[i]) {
                    bad |= !conf_verify(mine[i], m[i], (unsigned)i) << 2;
                    CONF_FN(free)(mine[i], m[i], i & 1);
                }
            CONF_FN(free)(live[round], 0, false); /* the parent's block, the child's copy */
            _exit(bad);
        }
        CONF_LFN(fork_parent)();
        CHECKF(pid > 0, "fork failed");
        if (pid > 0) {
            int status = conf_wait_child(pid, 30);
            CHECKF(status == 0, "round %d: the child %s (status %d)", round, status < 0 ? "hung or crashed" : "failed",
                   status);
        }
        /* the parent goes on */
        size_t k = (size_t)round * 5 + 3;
        void *q = CONF_FN(alloc)(k * 100, 16, NULL);
        CHECK(q != NULL);
        if (q) {
            conf_fill(q, k * 100, 5);
            CHECK(conf_verify(q, k * 100, 5));
            CONF_FN(free)(q, 0, false);
        }
    }
    if (threaded) {
        __atomic_store_n(&CONF_FN(fork_stop), 1, __ATOMIC_RELAXED);
        void *r;
        pthread_join(busy, &r);
        CHECKF(r == NULL, "the allocating thread found %ld bad blocks", (long)(intptr_t)r);
    }
    for (int i = 0; i < LIVE; i++) {
        CHECKF(conf_verify(live[i], n[i], (unsigned)i), "the parent's block %d overwritten", i);
        CONF_FN(free)(live[i], 0, false);
    }
#ifdef CONF_F
    CHECKF(CONF_F_GET(forks) == forks + ROUNDS, "%lu of %d fork_prepare reached the next layer",
           CONF_F_GET(forks) - forks, ROUNDS);
#endif
    CHECKF(conf_err_total() == 0, "%lu errors reported", conf_err_total());
}

/* ---- threads ---- */
static struct {
    pthread_mutex_t lock;
    void *p;
    size_t n;
    unsigned seed;
} CONF_FN(mailbox)[CONF_THREADS];

static void *CONF_FN(hammer_thread)(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, seed = id * 7919u + 17;
    static const size_t aligns[] = { 32, 64, 256, 4096 };
    void *p[CONF_SLOTS] = { 0 };
    size_t n[CONF_SLOTS] = { 0 };
    unsigned s[CONF_SLOTS] = { 0 };
    long bad = 0;
    for (unsigned op = 0; op < (unsigned)(CONF_HAMMER_OPS); op++) {
        unsigned k = conf_rand(&seed) % CONF_SLOTS, r = conf_rand(&seed);
        if (!p[k]) {
            n[k] = 1 + (r % 16 ? conf_rand(&seed) % CONF_HAMMER_MAX : conf_rand(&seed) % CONF_HAMMER_BIG);
            size_t align = r % 8 == 1 ? aligns[conf_rand(&seed) % 4] : 16;
            p[k] = CONF_FN(alloc)(n[k], align, NULL);
            if (!p[k] || !sm_ptr_aligned(p[k], align)) {
                bad++;
                p[k] = NULL;
                continue;
            }
            s[k] = op;
            conf_fill(p[k], n[k], s[k]);
            continue;
        }
        if (!conf_verify(p[k], n[k], s[k])) {
            bad++;
            p[k] = NULL; /* do not free a damaged block: the layer's metadata may be next to it */
            continue;
        }
        switch (r % 4) {
        case 0: { /* realloc: in place if the layer can, else by copy */
            size_t m = 1 + conf_rand(&seed) % CONF_HAMMER_MAX;
            if (CONF_FN(resize)(p[k], m)) {
                if (CONF_FN(usable)(p[k], NULL) < m) { /* said so, did not: do not write past it */
                    bad++;
                    p[k] = NULL;
                    break;
                }
                if (!conf_verify_at(p[k], p[k], n[k], m, s[k]))
                    bad++;
            } else {
                void *q = CONF_FN(alloc)(m, 16, NULL);
                if (!q) {
                    bad++;
                    break;
                }
                memcpy(q, p[k], m < n[k] ? m : n[k]);
                if (!conf_verify_at(q, p[k], n[k], m, s[k]))
                    bad++;
                CONF_FN(free)(p[k], n[k], conf_rand(&seed) & 1);
                p[k] = q;
            }
            n[k] = m, s[k] = op;
            conf_fill(p[k], n[k], s[k]);
            break;
        }
        case 1: /* sized free, with the size asked for */
            CONF_FN(free)(p[k], n[k], true);
            p[k] = NULL;
            break;
        case 2: { /* freed by another thread: swap with the next thread's mailbox */
            unsigned to = (id + 1) % CONF_THREADS;
            pthread_mutex_lock(&CONF_FN(mailbox)[to].lock);
            void *old = CONF_FN(mailbox)[to].p;
            size_t on = CONF_FN(mailbox)[to].n;
            unsigned os = CONF_FN(mailbox)[to].seed;
            CONF_FN(mailbox)[to].p = p[k], CONF_FN(mailbox)[to].n = n[k], CONF_FN(mailbox)[to].seed = s[k];
            pthread_mutex_unlock(&CONF_FN(mailbox)[to].lock);
            p[k] = NULL;
            if (old) {
                if (conf_verify(old, on, os))
                    CONF_FN(free)(old, on, os & 1);
                else
                    bad++;
            }
            break;
        }
        default:
            CONF_FN(free)(p[k], 0, false);
            p[k] = NULL;
            break;
        }
    }
    for (unsigned k = 0; k < CONF_SLOTS; k++)
        if (p[k]) {
            bad += !conf_verify(p[k], n[k], s[k]);
            CONF_FN(free)(p[k], 0, false);
        }
    CONF_LFN(thread_exit)();
    return (void *)bad;
}

static void CONF_FN(hammer)(void)
{
    conf_err_reset();
#ifdef CONF_F
    unsigned long bad = CONF_F_GET(bad_frees);
    unsigned long exits = __atomic_load_n(&CONF_FOBJ.thread_exits, __ATOMIC_RELAXED);
#endif
    for (int i = 0; i < CONF_THREADS; i++) {
        pthread_mutex_init(&CONF_FN(mailbox)[i].lock, NULL);
        CONF_FN(mailbox)[i].p = NULL;
    }
    check_threads(CONF_THREADS, CONF_FN(hammer_thread));
    for (int i = 0; i < CONF_THREADS; i++)
        if (CONF_FN(mailbox)[i].p) {
            CHECKF(conf_verify(CONF_FN(mailbox)[i].p, CONF_FN(mailbox)[i].n, CONF_FN(mailbox)[i].seed),
                   "a block left in a mailbox was overwritten");
            CONF_FN(free)(CONF_FN(mailbox)[i].p, 0, false);
        }
    CHECKF(conf_err_total() == 0, "%lu errors reported", conf_err_total());
#ifdef CONF_F
    CHECKF(CONF_F_GET(bad_frees) == bad, "%lu contract violations reached the next layer", CONF_F_GET(bad_frees) - bad);
    /* fake_next counts thread exits without a lock: racing threads may lose an update, not all */
    CHECKF(__atomic_load_n(&CONF_FOBJ.thread_exits, __ATOMIC_RELAXED) > exits, "thread_exit did not reach the next layer");
#endif
}

/* ---- release ---- */
static void CONF_FN(release_case)(void)
{
    enum { N = 150 };
    static void *p[N];
    static size_t n[N];
    unsigned seed = 4242;
    conf_err_reset();
    for (int i = 0; i < N; i++) {
        n[i] = conf_size(&seed, i % 10 ? CONF_HAMMER_MAX : CONF_MAX_SIZE / 2);
        p[i] = CONF_FN(alloc)(n[i], 16, NULL);
        CHECK(p[i] != NULL);
        if (!p[i])
            return;
        conf_fill(p[i], n[i], (unsigned)i);
    }
    for (int i = 0; i < N; i++) {
        CHECKF(conf_verify(p[i], n[i], (unsigned)i), "block %d overwritten", i);
        CONF_FN(free)(p[i], n[i], i & 1);
    }
#ifdef CONF_F
    unsigned long releases = CONF_F_GET(releases);
#endif
    sm_release_t d = CONF_FN(release)(sm_plat_now_ms(), SM_RELEASE_DECAYED);
    sm_release_t r = CONF_FN(release)(sm_plat_now_ms(), SM_RELEASE_ALL);
    CHECKF(d.next_ms > 0 && r.how == SM_RELEASE_ALL, "release: next %llu", (unsigned long long)d.next_ms);
#ifdef CONF_F
    CHECKF(CONF_F_GET(releases) == releases + 2, "%lu of 2 releases reached the next layer",
           CONF_F_GET(releases) - releases);
    CHECKF(CONF_F_GET(live_blocks) == (size_t)(CONF_KEEPS()),
           "everything freed and released, the next layer still holds %zu blocks; the layer keeps %zu",
           CONF_F_GET(live_blocks), (size_t)(CONF_KEEPS()));
#endif
    CONF_RELEASE_CHECK();
    /* and the layer goes on */
    void *q = CONF_FN(alloc)(1000, 16, NULL);
    CHECK(q != NULL);
    if (q) {
        conf_fill(q, 1000, 1);
        CHECK(conf_verify(q, 1000, 1));
        CONF_FN(free)(q, 1000, true);
    }
    CHECKF(conf_err_total() == 0, "%lu errors reported", conf_err_total());
}

/* Runs every case; their lines read "<CONF_NAME>/<case>". */
static void CONF_FN(run)(void)
{
    check_run_case(CONF_NAME "/round_trips", CONF_FN(round_trips));
#ifdef CONF_F
    check_run_case(CONF_NAME "/foreign_pass_down", CONF_FN(foreign_pass_down));
#else
    check_run_case(CONF_NAME "/foreign_pointer", CONF_FN(foreign_pointer));
#endif
    check_run_case(CONF_NAME "/bad_frees", CONF_FN(bad_frees));
    check_run_case(CONF_NAME "/out_of_memory", CONF_FN(out_of_memory));
    check_run_case(CONF_NAME "/fork", CONF_FN(fork));
    if (CONF_LFN(thread_safe))
        check_run_case(CONF_NAME "/hammer", CONF_FN(hammer));
    else
        check_skip(CONF_NAME "/hammer", "the layer is not thread-safe");
    check_run_case(CONF_NAME "/release", CONF_FN(release_case));
}

#undef CONF_L
#undef CONF_NAME
#undef CONF_F
#undef CONF_MAX_SIZE
#undef CONF_MAX_ALIGN
#undef CONF_HAMMER_MAX
#undef CONF_HAMMER_BIG
#undef CONF_HAMMER_OPS
#undef CONF_FOREIGN_SIZE
#undef CONF_BLOCK_SIZE
#undef CONF_INTERIOR_BY_F
#undef CONF_DOUBLE
#undef CONF_DOUBLE_KIND
#undef CONF_OOM_SIZE
#undef CONF_OOM_TRIES
#undef CONF_KEEPS
#undef CONF_RELEASE_CHECK
#undef CONF_FN
#undef CONF_LFN
#undef CONF_FFN
#undef CONF_FOBJ
#undef CONF_F_GET
#undef CONF_F_SET
