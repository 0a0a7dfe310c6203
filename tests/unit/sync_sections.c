/* Critical sections go through the sync policy (contract v2): tlsf_glk and buddy_glk hand every
 * request's section to atomic_exec, which may run it on another thread, as a combining policy does.
 * So do brk_heap, sheap, mmap_heap (whose carving must leave the caller's thread-local region to
 * the caller), decay_cache and slab_lk (alloc, free, both batches, with two CPU shards). Here a test policy, `remote`, runs every section on a server thread
 * (the shape of remote core locking) and checks that the caller never runs one. The layers must
 * still give the caller its results, set the caller's errno on out of memory, and raise a bad free
 * once, on the caller's thread, after the section. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

/* ---- the `remote` sync policy (test only) ---- */
typedef struct { pthread_mutex_t m; } sm_sync_remote_t;
#define SM_SYNC_remote_INIT { PTHREAD_MUTEX_INITIALIZER }
enum { sm_sync_remote_thread_safe = 1 };

static struct {
    pthread_mutex_t m;
    pthread_cond_t posted, done;
    void (*fn)(void *);
    void *arg;
    bool busy;
    pthread_t thread;
    unsigned long ran;
} server = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, false, 0, 0 };
static __thread bool in_section; /* set on the thread running a section */

static void *server_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&server.m);
    for (;;) {
        while (!server.fn)
            pthread_cond_wait(&server.posted, &server.m);
        in_section = true;
        errno = 0;
        server.fn(server.arg); /* errno the section leaves here is the server's, not the caller's */
        in_section = false;
        server.ran++;
        server.fn = NULL;
        pthread_cond_broadcast(&server.done);
    }
    return NULL;
}

SM_UNUSED static inline void sm_sync_remote_lock(sm_sync_remote_t *l) { pthread_mutex_lock(&l->m); }
SM_UNUSED static inline void sm_sync_remote_unlock(sm_sync_remote_t *l) { pthread_mutex_unlock(&l->m); }
SM_UNUSED static inline bool sm_sync_remote_trylock(sm_sync_remote_t *l) { return pthread_mutex_trylock(&l->m) == 0; }
SM_UNUSED static inline void sm_sync_remote_reinit(sm_sync_remote_t *l) { pthread_mutex_init(&l->m, NULL); }
#include <sunmao/policies/sync/owner.h>
SM_SYNC_FORK_PLAIN(remote) /* a test policy: no fork from a signal handler here */
SM_UNUSED static inline void sm_sync_remote_atomic_exec(sm_sync_remote_t *l, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&l->m); /* exclusive with lock(): the release passes still take it */
    pthread_mutex_lock(&server.m);
    server.fn = fn, server.arg = arg;
    pthread_cond_signal(&server.posted);
    while (server.fn)
        pthread_cond_wait(&server.done, &server.m);
    pthread_mutex_unlock(&server.m);
    pthread_mutex_unlock(&l->m);
}

/* ---- the layers, over fakes ---- */
#define SM_LAYER ft
#include "tests/support/fake_next.h"
#define SM_LAYER heap
#define SM_NEXT ft
#define SM_SYNC remote
#define SM_ERR callback
#define SM_OPT_REGION_SIZE (256u << 10)
#include <sunmao/layers/core/tlsf_glk.h>

#define SM_LAYER fb
#include "tests/support/fake_next.h"
#define SM_LAYER pages
#define SM_NEXT fb
#define SM_SYNC remote
#define SM_ERR callback
#define SM_OPT_CHUNK_SIZE (1u << 20)
#include <sunmao/layers/core/buddy_glk.h>

#define SM_LAYER brk
#define SM_SYNC remote
#define SM_ERR callback
#include <sunmao/os/brk_heap.h>

#define SM_LAYER pool
#define SM_SYNC remote
#define SM_ERR callback
#define SM_OPT_POOL_SIZE (16u << 20)
#include <sunmao/os/sheap.h>

#define SM_LAYER fd
#include "tests/support/fake_next.h"
#define SM_LAYER large
#define SM_NEXT fd
#define SM_SYNC remote
#define SM_ERR callback
#include <sunmao/layers/addon/decay_cache.h>

#define SM_LAYER mapped
#define SM_SYNC remote
#define SM_ERR callback
#define SM_OPT_THREAD_HEAP_SIZE ((size_t)16 << 20)
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER fs
#include "tests/support/fake_next.h"
#define SM_LAYER objs
#define SM_NEXT fs
#define SM_SYNC remote
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#define SM_OPT_SHARDS 2
#include <sunmao/layers/core/slab_lk.h>

static struct { int calls; sm_err_kind_t kind; bool on_server; } raised;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    (void)layer, (void)ptr, (void)detail;
    raised.calls++;
    raised.kind = kind;
    raised.on_server |= in_section;
}

#define ROUND_TRIP(L)                                                                                 \
    do {                                                                                              \
        enum { N = 200 };                                                                             \
        void *p[N];                                                                                   \
        size_t n[N];                                                                                  \
        unsigned long before = server.ran;                                                            \
        for (int i = 0; i < N; i++) {                                                                 \
            n[i] = 16 + (size_t)(i * 7919) % 60000;                                                   \
            sm_mctx_t c = sm_mctx_alloc(n[i], i % 5 ? 16 : 256, 0);                                   \
            p[i] = L##_alloc(&c);                                                                     \
            CHECKF(p[i] != NULL && p[i] == c.ptr, #L ": alloc %d of %zu bytes", i, n[i]);             \
            if (p[i])                                                                                 \
                check_fill(p[i], n[i], (unsigned)i);                                                  \
        }                                                                                             \
        for (int i = 0; i < N; i += 3) {                                                              \
            sm_mctx_t c = sm_mctx_block(p[i], 0, 0);                                                  \
            if (p[i] && L##_resize(&c, n[i] / 2 + 1)) {                                               \
                n[i] = n[i] / 2 + 1;                                                                  \
                CHECK(L##_getmeta(&c) && c.usable >= n[i]);                                           \
            }                                                                                         \
        }                                                                                             \
        for (int i = 0; i < N; i++) {                                                                 \
            CHECKF(p[i] && check_verify(p[i], n[i], (unsigned)i), #L ": block %d lost its contents", i); \
            sm_mctx_t c = sm_mctx_block(p[i], 0, 0);                                                  \
            L##_free(&c);                                                                             \
        }                                                                                             \
        CHECKF(server.ran >= before + 2 * N, #L ": %lu sections ran on the server for %d requests",    \
               server.ran - before, 3 * N);                                                           \
    } while (0)

static void tlsf_sections_run_remotely(void) { ROUND_TRIP(heap); }
static void buddy_sections_run_remotely(void) { ROUND_TRIP(pages); }
static void brk_sections_run_remotely(void) { ROUND_TRIP(brk); }
static void sheap_sections_run_remotely(void) { ROUND_TRIP(pool); }
static void mmap_heap_sections_run_remotely(void) { ROUND_TRIP(mapped); }

/* HOLD first takes what the layer keeps free (a spare chunk), so SIZE needs the next layer. */
#define OUT_OF_MEMORY(L, F, HOLD, SIZE)                                                               \
    do {                                                                                              \
        sm_mctx_t h = sm_mctx_alloc(HOLD, 16, 0);                                                     \
        void *held = L##_alloc(&h);                                                                   \
        CHECK(held != NULL);                                                                          \
        F##_obj.limit_bytes = F##_obj.live_bytes + 1;                                                 \
        errno = 0;                                                                                    \
        sm_mctx_t c = sm_mctx_alloc(SIZE, 16, 0);                                                     \
        void *q = L##_alloc(&c);                                                                      \
        int err = errno;                                                                              \
        F##_obj.limit_bytes = 0;                                                                      \
        CHECKF(q == NULL && err == ENOMEM, #L ": out of memory gave %p, errno %d in the caller", q, err); \
        h = sm_mctx_block(held, 0, 0);                                                                \
        L##_free(&h);                                                                                 \
    } while (0)

static void tlsf_out_of_memory_reaches_the_caller(void) { OUT_OF_MEMORY(heap, ft, 16, 900u << 10); }
static void buddy_out_of_memory_reaches_the_caller(void) { OUT_OF_MEMORY(pages, fb, 1u << 20, 512u << 10); }

#define BAD_FREES(L, MERGES)                                                                          \
    do {                                                                                              \
        sm_mctx_t c = sm_mctx_alloc(20000, 16, 0);                                                    \
        char *q = (char *)L##_alloc(&c);                                                              \
        CHECK(q != NULL);                                                                             \
        memset(&raised, 0, sizeof raised);                                                            \
        sm_mctx_t inner = sm_mctx_block(q + 4096, 0, 0);                                              \
        L##_free(&inner);                                                                             \
        CHECKF(raised.calls == 1 && raised.kind == SM_ERR_INVALID_FREE && !raised.on_server,          \
               #L ": interior free raised %d times (kind %d, on the server: %d)", raised.calls, raised.kind, \
               raised.on_server);                                                                     \
        sm_mctx_t f = sm_mctx_block(q, 0, 0);                                                         \
        L##_free(&f);                                                                                 \
        memset(&raised, 0, sizeof raised);                                                            \
        f = sm_mctx_block(q, 0, 0);                                                                   \
        L##_free(&f);                                                                                 \
        CHECKF(raised.calls == 1 && (raised.kind == SM_ERR_DOUBLE_FREE || MERGES) && !raised.on_server, \
               #L ": double free raised %d times (kind %d, on the server: %d)", raised.calls, raised.kind, \
               raised.on_server);                                                                     \
    } while (0)

static void tlsf_bad_frees_raised_by_the_caller(void) { BAD_FREES(heap, 0); }
static void buddy_bad_frees_raised_by_the_caller(void) { BAD_FREES(pages, 0); }
/* brk_heap merges a freed block into its free neighbours, so a second free finds no block start:
 * reported once, as an invalid free ("or freed twice"). */
static void brk_bad_frees_raised_by_the_caller(void) { BAD_FREES(brk, 1); }
static void sheap_bad_frees_raised_by_the_caller(void) { BAD_FREES(pool, 0); }
static void mmap_heap_bad_frees_raised_by_the_caller(void) { BAD_FREES(mapped, 0); }

/* decay_cache: a freed large block is kept and handed out again (both in sections on the server);
 * a second free of a kept block is raised once, by the caller. */
static void decay_cache_sections_run_remotely(void)
{
    unsigned long before = server.ran;
    sm_mctx_t c = sm_mctx_alloc(1u << 20, 16, 0);
    char *p = (char *)large_alloc(&c);
    CHECK(p != NULL);
    check_fill(p, 1u << 20, 7);
    sm_mctx_t f = sm_mctx_block(p, 0, 0);
    large_free(&f);
    CHECKF(large_obj.blocks == 1, "%zu blocks cached", (size_t)large_obj.blocks);
    memset(&raised, 0, sizeof raised);
    f = sm_mctx_block(p, 0, 0);
    large_free(&f);
    CHECKF(raised.calls == 1 && raised.kind == SM_ERR_DOUBLE_FREE && !raised.on_server,
           "double free raised %d times (kind %d, on the server: %d)", raised.calls, raised.kind, raised.on_server);
    c = sm_mctx_alloc(1u << 20, 16, 0);
    CHECK(large_alloc(&c) == p && check_verify(p, 1u << 20, 7)); /* the cached block, contents kept */
    CHECKF(server.ran >= before + 3, "%lu sections ran on the server", server.ran - before);
    f = sm_mctx_block(p, 0, 0);
    large_free(&f);
}

/* slab_lk: objects and batches of them in sections on the server, contents kept; out of memory and
 * bad frees reach the caller. */
static void slab_sections_run_remotely(void)
{
    enum { N = 300, B = 40 };
    void *p[N], *batch[B];
    size_t n[N];
    unsigned long before = server.ran;
    for (int i = 0; i < N; i++) {
        n[i] = 1 + (size_t)(i * 7919) % (8u << 10);
        sm_mctx_t c = sm_mctx_alloc(n[i], 16, 0);
        p[i] = objs_alloc(&c);
        CHECKF(p[i] != NULL, "alloc %d of %zu bytes", i, n[i]);
        if (p[i])
            check_fill(p[i], n[i], (unsigned)i);
    }
    sm_mctx_t c = sm_mctx_alloc(96, 16, 0);
    unsigned got = objs_alloc_batch(&c, batch, B);
    CHECKF(got == B, "batch of %u", got);
    for (unsigned i = 0; i < got; i++)
        check_fill(batch[i], 96, 1000 + i);
    for (int i = 0; i < N; i++) {
        CHECKF(p[i] && check_verify(p[i], n[i], (unsigned)i), "object %d lost its contents", i);
        sm_mctx_t f = sm_mctx_block(p[i], 0, 0);
        objs_free(&f);
    }
    for (unsigned i = 0; i < got; i++)
        CHECKF(check_verify(batch[i], 96, 1000 + i), "batch object %u lost its contents", i);
    objs_free_batch(batch, got);
    CHECKF(server.ran >= before + 2 * N + 2, "%lu sections ran on the server", server.ran - before);
    CHECK(fs_obj.bad_frees == 0);
}

static void slab_out_of_memory_and_bad_frees(void)
{
    fs_obj.limit_bytes = fs_obj.live_bytes + 1;
    errno = 0;
    sm_mctx_t c = sm_mctx_alloc(4000, 16, 0); /* a class with no slab yet */
    void *q = objs_alloc(&c);
    int err = errno;
    void *out[4];
    errno = 0;
    unsigned got = objs_alloc_batch(&c, out, 4);
    int batch_err = errno;
    fs_obj.limit_bytes = 0;
    CHECKF(q == NULL && err == ENOMEM, "out of memory gave %p, errno %d in the caller", q, err);
    CHECKF(got == 0 && batch_err == ENOMEM, "out of memory: batch of %u, errno %d in the caller", got, batch_err);
    c = sm_mctx_alloc(200, 16, 0);
    char *o = (char *)objs_alloc(&c);
    CHECK(o != NULL);
    memset(&raised, 0, sizeof raised);
    sm_mctx_t f = sm_mctx_block(o + 16, 0, 0);
    objs_free(&f);
    CHECKF(raised.calls == 1 && raised.kind == SM_ERR_INVALID_FREE && !raised.on_server,
           "interior free raised %d times (kind %d, on the server: %d)", raised.calls, raised.kind, raised.on_server);
    f = sm_mctx_block(o, 0, 0);
    objs_free(&f);
    memset(&raised, 0, sizeof raised);
    f = sm_mctx_block(o, 0, 0);
    objs_free(&f);
    CHECKF(raised.calls == 1 && raised.kind == SM_ERR_DOUBLE_FREE && !raised.on_server,
           "double free raised %d times (kind %d, on the server: %d)", raised.calls, raised.kind, raised.on_server);
    memset(&raised, 0, sizeof raised);
    void *twice[1] = { o };
    objs_free_batch(twice, 1);
    CHECKF(raised.calls == 1 && raised.kind == SM_ERR_DOUBLE_FREE && !raised.on_server,
           "double free in a batch raised %d times (kind %d, on the server: %d)", raised.calls, raised.kind,
           raised.on_server);
}

int main(void)
{
    check_begin("sync_sections");
    sm_err_callback_set(on_error);
    CHECK(pthread_create(&server.thread, NULL, server_main, NULL) == 0);
    CHECK(heap_create() == 0 && pages_create() == 0 && brk_create() == 0 && pool_create() == 0 &&
          large_create() == 0 && mapped_create() == 0 && objs_create() == 0);
    RUN_CASE(tlsf_sections_run_remotely);
    RUN_CASE(buddy_sections_run_remotely);
    RUN_CASE(tlsf_out_of_memory_reaches_the_caller);
    RUN_CASE(buddy_out_of_memory_reaches_the_caller);
    RUN_CASE(tlsf_bad_frees_raised_by_the_caller);
    RUN_CASE(buddy_bad_frees_raised_by_the_caller);
    RUN_CASE(brk_sections_run_remotely);
    RUN_CASE(sheap_sections_run_remotely);
    RUN_CASE(brk_bad_frees_raised_by_the_caller);
    RUN_CASE(sheap_bad_frees_raised_by_the_caller);
    RUN_CASE(mmap_heap_sections_run_remotely);
    RUN_CASE(mmap_heap_bad_frees_raised_by_the_caller);
    RUN_CASE(decay_cache_sections_run_remotely);
    RUN_CASE(slab_out_of_memory_and_bad_frees); /* first: its class has no slab yet */
    RUN_CASE(slab_sections_run_remotely);
    return check_end();
}
