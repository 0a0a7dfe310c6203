/* Unit test of the szcls_stat add-on layer (sizeclass tc) over the fake next layer:
 *     sz, szt, szs, szp :: fk        a known request pattern, threads, stats, the exit table
 *     szh :: tarrcache :: fk        the HIT paths forwarded (each request counted once)
 *     szb :: fake_batch             the BATCH calls forwarded (every object counted)
 * The pattern: 10 x 24 B, 5 x 100 B, 3 x 5000 B, 2 x 1 MiB, each block filled and checked, freed
 * sized and unsized in turn. The fake's getmeta answers the size asked, so an unsized free lands in
 * the same bucket as its allocation and the histogram is exact: 10 in class 32, 5 in 112, 3 in
 * 5120, 2 in the large bucket (512 KiB, 1 MiB], every other bucket 0, for mallocs and frees. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include "tests/support/check.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"

#define SM_LAYER sz
#define SM_NEXT fk
#define SM_SIZECLASS tc
#include <sunmao/layers/addon/szcls_stat.h>

#define SM_LAYER szt
#define SM_NEXT fk
#define SM_SIZECLASS tc
#include <sunmao/layers/addon/szcls_stat.h>

#define SM_LAYER szs
#define SM_NEXT fk
#define SM_SIZECLASS tc
#include <sunmao/layers/addon/szcls_stat.h>

#define SM_LAYER szp
#define SM_NEXT fk
#define SM_SIZECLASS tc
#define SM_OPT_PRINT_AT_EXIT 1
#include <sunmao/layers/addon/szcls_stat.h>

#define SM_LAYER tac
#define SM_NEXT fk
#define SM_SIZECLASS tc
#define SM_ERR warn
#include <sunmao/layers/addon/tarrcache.h>
#define SM_LAYER szh
#define SM_NEXT tac
#define SM_SIZECLASS tc
#include <sunmao/layers/addon/szcls_stat.h>

#define SM_LAYER fb
#define SM_SIZECLASS tc
#include "tests/support/fake_batch.h"
#define SM_LAYER szb
#define SM_NEXT fb
#define SM_SIZECLASS tc
#include <sunmao/layers/addon/szcls_stat.h>

_Static_assert((long)sz_caps == (long)fk_caps && (long)szh_caps == (long)tac_caps && (long)szb_caps == (long)fb_caps,
               "szcls_stat offers exactly its next layer's capabilities");
_Static_assert((long)sz_min_align == (long)fk_min_align && (long)sz_thread_safe == (long)fk_thread_safe, "properties forwarded");

enum { NREQ = 20 };
static const size_t pattern[] = { 24, 100, 5000, 1u << 20 };
static const unsigned times[] = { 10, 5, 3, 2 };

/* The pattern through layer L: NREQ blocks, filled, checked, freed (sized and unsized in turn). */
#define PATTERN(L)                                                                                 \
    do {                                                                                           \
        void *p_[NREQ];                                                                            \
        size_t s_[NREQ];                                                                           \
        unsigned k_ = 0;                                                                           \
        for (unsigned i_ = 0; i_ < 4; i_++)                                                        \
            for (unsigned j_ = 0; j_ < times[i_]; j_++, k_++) {                                    \
                sm_mctx_t a_ = sm_mctx_alloc(s_[k_] = pattern[i_], 16, 0);                        \
                p_[k_] = L##_alloc(&a_);                                                           \
                CHECK(p_[k_] != NULL);                                                             \
                check_fill(p_[k_], s_[k_], k_);                                                    \
            }                                                                                      \
        for (k_ = 0; k_ < NREQ; k_++) {                                                            \
            CHECK(check_verify(p_[k_], s_[k_], k_));                                               \
            sm_mctx_t f_ = sm_mctx_block(p_[k_], (k_ & 1) ? s_[k_] : 0, (k_ & 1) ? SM_F_SIZED : 0); \
            L##_free(&f_);                                                                         \
        }                                                                                          \
    } while (0)

/* Checks that the counts of layer L are `mult` times the pattern in both columns, zero elsewhere. */
#define EXPECT_PATTERN(L, mult)                                                                    \
    do {                                                                                           \
        struct L##_counts k_;                                                                      \
        L##_szcls_read(&k_);                                                                       \
        unsigned want_[L##_buckets + 1];                                                           \
        memset(want_, 0, sizeof want_);                                                            \
        for (unsigned i_ = 0; i_ < 4; i_++)                                                        \
            want_[L##_bucket_of(pattern[i_])] += times[i_] * (mult);                               \
        for (unsigned b_ = 0; b_ <= (unsigned)L##_buckets; b_++)                                   \
            for (unsigned op_ = 0; op_ < 2; op_++)                                                 \
                CHECKF(k_.n[op_][b_] == (op_ == 1 && b_ == (unsigned)L##_unknown ? 0 : want_[b_]), \
                       #L " %s bucket %u (size <= %zu): %llu, want %u", op_ ? "free" : "malloc", b_, \
                       L##_bucket_top(b_), (unsigned long long)k_.n[op_][b_], want_[b_]);           \
    } while (0)

static void buckets(void)
{
    /* The pattern's buckets, by hand from the tc policy (tc.h) and the large buckets' definition. */
    CHECK(sz_bucket_top(sz_bucket_of(24)) == 32 && sz_bucket_top(sz_bucket_of(100)) == 112);
    CHECK(sz_bucket_top(sz_bucket_of(5000)) == 5120);
    CHECK(sz_bucket_of(256u << 10) == sz_classes - 1 && sz_bucket_of((256u << 10) + 1) == sz_classes);
    CHECK(sz_bucket_of(1u << 20) == sz_classes + 1 && sz_bucket_of((1u << 19) + 1) == sz_classes + 1);
    CHECK(sz_bucket_top(sz_classes + 1) == (1u << 20) && sz_bucket_of((1u << 20) + 1) == sz_classes + 2);
    CHECK(sz_bucket_of(SIZE_MAX) == sz_buckets - 1 && sz_bucket_top(sz_buckets - 1) == SIZE_MAX);
    CHECK(sz_bucket_of(0) == 0);
    /* every size in the bucket whose range holds it */
    for (size_t s = 1; s < ((size_t)4 << 20); s = s * 9 / 8 + 1) {
        unsigned b = sz_bucket_of(s);
        CHECKF(b < (unsigned)sz_buckets && sz_bucket_top(b) >= s && (b == 0 || sz_bucket_top(b - 1) < s),
               "size %zu in bucket %u", s, b);
    }
}

static void histogram_of_a_known_pattern(void)
{
    CHECK(sz_create() == 0);
    unsigned long allocs = fk_obj.allocs, frees = fk_obj.frees;
    PATTERN(sz);
    CHECK(fk_obj.allocs - allocs == NREQ && fk_obj.frees - frees == NREQ && fk_obj.bad_frees == 0);
    EXPECT_PATTERN(sz, 1);
    PATTERN(sz);
    EXPECT_PATTERN(sz, 2);
    /* An unsized free of a block the next layer does not know: counted as unknown, passed on. */
    static char foreign[64];
    sm_mctx_t f = sm_mctx_block(foreign, 0, 0);
    sz_free(&f);
    struct sz_counts k;
    sz_szcls_read(&k);
    CHECK(k.n[1][sz_unknown] == 1 && k.n[0][sz_unknown] == 0 && fk_obj.bad_frees == 1);
    fk_obj.bad_frees = 0;
}

/* 4 threads: 2 have exited, 2 are still running (parked) when the counts are read. */
static pthread_barrier_t parked, resume;
static void *pattern_thread(void *arg)
{
    PATTERN(szt);
    if ((intptr_t)arg >= 2) {
        pthread_barrier_wait(&parked);
        pthread_barrier_wait(&resume);
    }
    return NULL;
}

static void merged_over_threads(void)
{
    CHECK(szt_create() == 0);
    PATTERN(szt);
    pthread_t t[4];
    for (intptr_t i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, pattern_thread, (void *)i) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(pthread_barrier_init(&parked, NULL, 3) == 0 && pthread_barrier_init(&resume, NULL, 3) == 0);
    for (intptr_t i = 2; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, pattern_thread, (void *)i) == 0);
    pthread_barrier_wait(&parked);
    /* main + 2 exited + 2 live: 3 blocks linked, 2 folded into the total */
    unsigned linked = 0;
    for (struct szt_tls_t *b = szt_obj.head; b; b = b->next)
        linked++;
    CHECKF(linked == 3, "%u blocks linked", linked);
    EXPECT_PATTERN(szt, 5);
    pthread_barrier_wait(&resume);
    for (int i = 2; i < 4; i++)
        pthread_join(t[i], NULL);
    EXPECT_PATTERN(szt, 5); /* folded at exit, not counted twice */
    CHECK(szt_obj.head == &szt_tls && szt_tls.next == NULL);
    pthread_barrier_destroy(&parked);
    pthread_barrier_destroy(&resume);
    CHECK(fk_obj.bad_frees == 0);
}

static void stats_entry(void)
{
    CHECK(szs_create() == 0);
    PATTERN(szs);
    PATTERN(szs);
    static sm_stats_t s;
    memset(&s, 0, sizeof s);
    s.exact = true;
    szs_stats(&s);
    CHECK(s.nlayers == 2 && strcmp(s.layer[0].name, "szs") == 0 && strcmp(s.layer[1].name, "fk") == 0);
    CHECKF(s.layer[0].nmalloc == 2 * NREQ && s.layer[0].nfree == 2 * NREQ, "nmalloc %llu nfree %llu",
           (unsigned long long)s.layer[0].nmalloc, (unsigned long long)s.layer[0].nfree);
    CHECK(s.layer[0].in_use == 0 && s.layer[0].held == 0 && s.nclasses == 0 && s.exact);
}

/* Through tarrcache's HIT paths, as a socket calls them: hit, else the miss. */
static void hit_paths_count_once(void)
{
    CHECK(szh_create() == 0);
    void *p[NREQ];
    unsigned hits = 0;
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < NREQ; i++) {
            if (!(p[i] = szh_alloc_hit(100))) {
                sm_mctx_t a = sm_mctx_alloc(100, 16, 0);
                p[i] = szh_alloc_miss(&a);
            } else {
                hits++;
            }
            CHECK(p[i] != NULL);
        }
        for (unsigned i = 0; i < NREQ; i++) {
            size_t sz = (i & 1) ? 100 : 0;
            unsigned fl = (i & 1) ? SM_F_SIZED : 0;
            uintptr_t w = SM_OWNER_UNKNOWN;
            if (!szh_free_hit(p[i], sz, fl, &w)) {
                sm_mctx_t f = sm_mctx_block(p[i], sz, fl);
                szh_free_miss(&f);
            }
        }
    }
    CHECK(hits > 0);
    struct szh_counts k;
    szh_szcls_read(&k);
    /* unsized frees of cached blocks: getmeta of the fake answers the class size tarrcache asked */
    CHECKF(k.n[0][szh_bucket_of(100)] == 3 * NREQ && k.n[1][szh_bucket_of(100)] == 3 * NREQ,
           "malloc %llu free %llu (hits %u)", (unsigned long long)k.n[0][szh_bucket_of(100)],
           (unsigned long long)k.n[1][szh_bucket_of(100)], hits);
}

static void batches_count_every_object(void)
{
    CHECK(szb_create() == 0);
    void *out[8];
    sm_mctx_t a = sm_mctx_alloc(100, 16, 0);
    unsigned got = szb_alloc_batch(&a, out, 8);
    CHECK(got == 8);
    szb_free_batch(out, got);
    struct szb_counts k;
    szb_szcls_read(&k);
    CHECKF(k.n[0][szb_bucket_of(100)] == 8 && k.n[1][szb_bucket_of(112)] == 8, "malloc %llu free %llu",
           (unsigned long long)k.n[0][szb_bucket_of(100)], (unsigned long long)k.n[1][szb_bucket_of(112)]);
}

/* SM_OPT_PRINT_AT_EXIT 1: a child that exits normally prints the table on stderr. */
static void table_at_exit(void)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (szp_create() != 0)
            _exit(3);
        PATTERN(szp);
        exit(0);
    }
    close(fd[1]);
    char text[4096] = { 0 };
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof text && (r = read(fd[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)r;
    close(fd[0]);
    int status = -1;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char want[5][64];
    snprintf(want[0], sizeof want[0], "%16s%15s%15s\n", "32", "10", "10");
    snprintf(want[1], sizeof want[1], "%16s%15s%15s\n", "112", "5", "5");
    snprintf(want[2], sizeof want[2], "%16s%15s%15s\n", "5120", "3", "3");
    snprintf(want[3], sizeof want[3], "  large%9s%15s%15s\n", "1M", "2", "2");
    snprintf(want[4], sizeof want[4], "%16s%15s%15s\n", "total", "20", "20");
    CHECKF(strstr(text, "szcls_stat szp: requests passed down by size class\n"), "child's stderr: %s", text);
    for (unsigned i = 0; i < 5; i++)
        CHECKF(strstr(text, want[i]), "no row '%s' in the child's stderr:\n%s", want[i], text);
    unsigned lines = 0;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    CHECKF(lines == 7, "%u lines (heading, columns, 4 buckets, total):\n%s", lines, text);
}

int main(void)
{
    check_begin("szcls_stat");
    RUN_CASE(buckets);
    RUN_CASE(histogram_of_a_known_pattern);
    RUN_CASE(merged_over_threads);
    RUN_CASE(stats_entry);
    RUN_CASE(hit_paths_count_once);
    RUN_CASE(batches_count_every_object);
    RUN_CASE(table_at_exit);
    return check_end();
}
