/* Unit tests of the framework core's small parts: the none sync policy, chksum, err and reclaim
 * policies, the size_handle slot, the diagnostics formatter and the page map. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/core/layer.h>
#include <sunmao/core/msg.h>
#include <sunmao/core/pagemap.h>
#include <sunmao/policies/chksum/crc32c.h>
#include <sunmao/policies/chksum/magic.h>
#include <sunmao/policies/chksum/xor.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/err/fatal.h>
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/reclaim/lowwater.h>
#include <sunmao/policies/reclaim/none.h>
#include <sunmao/policies/sync/none.h>
#include "tests/support/check.h"

#define SM_LAYER sh_small
#define SM_SIZE_MIN 1
#define SM_SIZE_MAX 4096
#include <sunmao/policies/size_handle.h>
#undef SM_LAYER
#undef SM_SIZE_MIN
#undef SM_SIZE_MAX
#define SM_LAYER sh_all
#include <sunmao/policies/size_handle.h>
#undef SM_LAYER

static void size_handle_ranges(void)
{
    CHECK(!sh_small_handles_size(0));
    CHECK(sh_small_handles_size(1) && sh_small_handles_size(4096));
    CHECK(!sh_small_handles_size(4097) && !sh_small_handles_size(SIZE_MAX));
    CHECK(sh_all_handles_size(0) && sh_all_handles_size(SIZE_MAX));
}

/* --- sync: the thread-safe policies have their own test (tests/unit/sync_policies.c). */
static unsigned long shared_counter;
static void bump(void *arg) { shared_counter += (uintptr_t)arg; }
static void sync_none_runs_inline(void)
{
    sm_sync_none_t l = SM_SYNC_none_INIT;
    shared_counter = 0;
    sm_sync_none_atomic_exec(&l, bump, (void *)5);
    CHECK(shared_counter == 5);
    CHECK(sm_sync_none_thread_safe == 0);
    CHECK(sm_sync_none_trylock(&l));
}

/* --- chksum */
static void chksum_xor_detects_changes(void)
{
    char a[64], b[64];
    uint64_t base = sm_chksum_xor_compute(a, 48);
    CHECK(base == sm_chksum_xor_compute(a, 48));
    CHECK(base != sm_chksum_xor_compute(b, 48));      /* header copied to another block */
    for (unsigned bit = 0; bit < 40; bit++)            /* size rewritten */
        CHECKF(base != sm_chksum_xor_compute(a, 48u ^ ((size_t)1 << bit)), "bit %u", bit);
    uint64_t before = sm_chksum_xor_compute(a, 48);
    uint64_t old_secret = sm_secret();
    sm_secret_seed(0x1234567890abcdefull);
    CHECK(before != sm_chksum_xor_compute(a, 48));     /* keyed by the process secret */
    sm_secret_seed(old_secret);
}
static void chksum_magic_is_fixed_and_keyed(void)
{
    char a[8], b[8];
    CHECK(sm_chksum_magic_compute(a, 1) == sm_chksum_magic_compute(b, 999));
    uint64_t m = sm_chksum_magic_compute(a, 1), old_secret = sm_secret();
    sm_secret_seed(42);
    CHECK(m != sm_chksum_magic_compute(a, 1));
    sm_secret_seed(old_secret);
}

/* covers_size says whether a policy's word tells sizes apart (tail_chksum then mixes no hash of
 * the size in itself): for xor and crc32c, 2^17 headers' worth of sizes and flags on one block give
 * 2^17 distinct words; magic declares 0 and ignores the size. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static void chksum_covers_size_is_honest(void)
{
    enum { N = 1 << 17 };
    static uint64_t w[2][N];
    char block[64];
    for (size_t i = 0; i < N; i++) {
        size_t info = (i >> 1) << 8 | (i & 1) << 6 | 4; /* tail_chksum's header: n << 8 | flags | log2(16) */
        w[0][i] = sm_chksum_xor_compute(block, info);
        w[1][i] = sm_chksum_crc32c_compute(block, info);
    }
    CHECK(sm_chksum_xor_covers_size == 1 && sm_chksum_crc32c_covers_size == 1 && sm_chksum_magic_covers_size == 0);
    for (int k = 0; k < 2; k++) {
        qsort(w[k], N, sizeof w[k][0], cmp_u64);
        size_t same = 0;
        for (size_t i = 1; i < N; i++)
            same += w[k][i] == w[k][i - 1];
        CHECKF(same == 0, "%s: %zu sizes share a word with another", k ? "crc32c" : "xor", same);
    }
    CHECK(sm_chksum_magic_compute(block, 48) == sm_chksum_magic_compute(block, 4096));
}

/* crc32c: the standard check values (RFC 3720's iSCSI vectors among them) on both paths, chaining,
 * the paths agreeing on every length and offset, and the policy's value keyed like xor's. */
static void chksum_crc32c_values(void)
{
    static const struct { const char *what; unsigned char fill; size_t n; uint32_t crc; } known[] = {
        { "empty", 0, 0, 0 }, { "32 zeros", 0x00, 32, 0x8a9136aa }, { "32 x 0xff", 0xff, 32, 0x62a8ab43 },
    };
    unsigned char buf[64], ramp[32];
    for (unsigned i = 0; i < 32; i++)
        ramp[i] = (unsigned char)i;
    bool hw = sm_chksum_crc32c_hw_ok();
    for (int path = 0; path < 2; path++) {
        uint32_t (*crc)(uint32_t, const void *, size_t) = path ? sm_chksum_crc32c_bytes_hw : sm_chksum_crc32c_bytes_sw;
        if (path && !hw)
            break;
        CHECKF(crc(0, "123456789", 9) == 0xe3069283u, "path %d: %#x", path, crc(0, "123456789", 9));
        for (unsigned k = 0; k < sizeof known / sizeof *known; k++) {
            memset(buf, known[k].fill, known[k].n);
            CHECKF(crc(0, buf, known[k].n) == known[k].crc, "path %d, %s: %#x", path, known[k].what, crc(0, buf, known[k].n));
        }
        CHECKF(crc(0, ramp, 32) == 0x46dd794eu, "path %d, 0..31: %#x", path, crc(0, ramp, 32));
        CHECK(crc(crc(0, "1234", 4), "56789", 5) == 0xe3069283u);
    }
    CHECK(sm_chksum_crc32c_bytes(0, "123456789", 9) == 0xe3069283u);
    if (!hw)
        check_skip("chksum_crc32c_values/hardware", "this CPU has no crc32 instruction (SSE4.2)");
}
static void chksum_crc32c_paths_agree(void)
{
    if (!sm_chksum_crc32c_hw_ok()) {
        check_skip("chksum_crc32c_paths_agree", "this CPU has no crc32 instruction (SSE4.2)");
        return;
    }
    unsigned char buf[300];
    uint64_t x = 0x243f6a8885a308d3ull;
    for (unsigned i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= 290; n++)
            CHECKF(sm_chksum_crc32c_bytes_sw(7, buf + off, n) == sm_chksum_crc32c_bytes_hw(7, buf + off, n),
                   "offset %zu, %zu bytes", off, n);
    for (unsigned i = 0; i < 1000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const void *block = (const void *)(uintptr_t)(x >> (i % 17));
        size_t size = (size_t)(x >> (i % 61));
        CHECKF(sm_chksum_crc32c_compute_sw(block, size) == sm_chksum_crc32c_compute_hw(block, size), "%p, %zu", block, size);
    }
    char a[8];
    CHECK(sm_chksum_crc32c_compute(a, 40) == sm_chksum_crc32c_compute_hw(a, 40));
}
static void chksum_crc32c_detects_changes(void)
{
    char a[64], b[64];
    uint64_t base = sm_chksum_crc32c_compute(a, 48);
    CHECK(base == sm_chksum_crc32c_compute(a, 48));
    CHECK(base != sm_chksum_crc32c_compute(b, 48));
    for (unsigned bit = 0; bit < 64; bit++) {
        CHECKF(base != sm_chksum_crc32c_compute(a, 48u ^ ((size_t)1 << bit)), "size bit %u", bit);
        CHECKF(base != sm_chksum_crc32c_compute((char *)((uintptr_t)a ^ ((uintptr_t)1 << bit)), 48), "address bit %u", bit);
        /* both halves change: neither is a copy of the other */
        uint64_t d = base ^ sm_chksum_crc32c_compute(a, 48u ^ ((size_t)1 << bit));
        CHECKF((uint32_t)d != 0 && (d >> 32) != 0, "size bit %u: %#llx", bit, (unsigned long long)d);
    }
    uint64_t old_secret = sm_secret();
    sm_secret_seed(0x1234567890abcdefull);
    CHECK(base != sm_chksum_crc32c_compute(a, 48)); /* keyed by the process secret */
    sm_secret_seed(old_secret);
    CHECK(base == sm_chksum_crc32c_compute(a, 48));
}

/* --- err: capture what a policy writes to stderr. */
static size_t capture_stderr(void (*fn)(void), char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 0;
    int saved = dup(2);
    dup2(fds[1], 2);
    fn();
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    ssize_t n = read(fds[0], out, cap - 1);
    close(fds[0]);
    out[n > 0 ? n : 0] = '\0';
    return n > 0 ? (size_t)n : 0;
}
static void raise_warn(void) { sm_err_warn_raise(SM_ERR_DOUBLE_FREE, "layer_x", (void *)0x1000, "already free"); }
static void err_warn_reports_one_line(void)
{
    char buf[512];
    capture_stderr(raise_warn, buf, sizeof buf);
    CHECKF(strcmp(buf, "sunmao: layer_x: double free (0x1000): already free\n") == 0, "got '%s'", buf);
}
static int callback_calls;
static sm_err_kind_t callback_kind;
static const void *callback_ptr;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    callback_calls++;
    callback_kind = kind;
    callback_ptr = ptr;
    (void)layer, (void)detail;
}
static void raise_callback(void) { sm_err_callback_raise(SM_ERR_CORRUPTION, "layer_y", (void *)0x2000, "tail"); }
static void err_callback_receives_errors(void)
{
    char buf[512];
    sm_err_callback_set(NULL);
    capture_stderr(raise_callback, buf, sizeof buf); /* no handler yet: reported like warn */
    CHECKF(strstr(buf, "heap corruption") != NULL, "got '%s'", buf);
    sm_err_callback_set(on_error);
    capture_stderr(raise_callback, buf, sizeof buf);
    CHECK(callback_calls == 1 && callback_kind == SM_ERR_CORRUPTION && callback_ptr == (void *)0x2000);
    CHECKF(buf[0] == '\0', "handler set, yet stderr got '%s'", buf);
    sm_err_callback_set(NULL);
}
static void err_fatal_aborts(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        close(2); /* keep the test output clean */
        sm_err_fatal_raise(SM_ERR_OUT_OF_MEMORY, "l", NULL, "returns"); /* OOM is not fatal */
        sm_err_fatal_raise(SM_ERR_INVALID_FREE, "l", NULL, "must abort");
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
}

/* --- msg formatting never allocates and never overruns. */
static void msg_format_conversions(void)
{
    char buf[128];
    size_t n = sm_msg_format(buf, sizeof buf, "%s|%d|%d|%u|%zu|%zx|%p|%c|%%", "ab", -42, 7, 3000000000u,
                             (size_t)123456789012ull, (size_t)0xbeef, (void *)0x10, 'z');
    CHECKF(strcmp(buf, "ab|-42|7|3000000000|123456789012|beef|0x10|z|%") == 0, "got '%s'", buf);
    CHECK(n == strlen(buf));
    char small[8];
    memset(small, 'X', sizeof small);
    sm_msg_format(small, 5, "%s", "abcdefgh");
    CHECK(strcmp(small, "abcd") == 0 && small[5] == 'X');
}

/* --- pagemap */
static void *node_alloc(size_t n) { return calloc(1, n); }
static sm_pagemap_t map16; /* 64 KiB granules */
static void pagemap_set_get_clear(void)
{
    char *base = (char *)(uintptr_t)0x7f1234560000ull;
    CHECK(sm_pagemap_get(&map16, 16, base) == 0);
    CHECK(sm_pagemap_set(&map16, 16, base, 3 << 16, 0xabc, node_alloc));
    CHECK(sm_pagemap_get(&map16, 16, base) == 0xabc);
    CHECK(sm_pagemap_get(&map16, 16, base + (3 << 16) - 1) == 0xabc);
    CHECK(sm_pagemap_get(&map16, 16, base + (3 << 16)) == 0);
    CHECK(sm_pagemap_get(&map16, 16, base - 1) == 0);
    CHECK(sm_pagemap_set(&map16, 16, base + (1 << 16), 1, 0, node_alloc));
    CHECK(sm_pagemap_get(&map16, 16, base) == 0xabc && sm_pagemap_get(&map16, 16, base + (1 << 16)) == 0);
    CHECK(sm_pagemap_get(&map16, 16, (void *)(uintptr_t)0xffff800000000000ull) == 0); /* kernel half */
    /* Granules 1 GiB apart land in different leaves; both stay visible. */
    CHECK(sm_pagemap_set(&map16, 16, base + (1ull << 30), 1, 7, node_alloc));
    CHECK(sm_pagemap_get(&map16, 16, base + (1ull << 30)) == 7 && sm_pagemap_get(&map16, 16, base) == 0xabc);
}

/* The two-level map and its window: lookups inside the window (one load) and outside it (through
 * the root) agree with sm_pagemap2_get; an unset window sends everything through the root; an
 * address 2^48 above a mapped one finds nothing. */
static uintptr_t *map2[SM_PAGEMAP2_ROOT_LEN(16)];
static sm_pagemap2_window_t window2 = SM_PAGEMAP2_WINDOW_INIT;
static void pagemap2_window(void)
{
    char *base = (char *)(uintptr_t)0x7f1234560000ull, *far = base + (64ull << 30); /* next window */
    CHECK(sm_pagemap2_get_windowed(map2, &window2, 16, base) == 0);
    CHECK(sm_pagemap2_set(map2, 16, base, 2 << 16, 0x11, node_alloc));
    CHECK(sm_pagemap2_get_windowed(map2, &window2, 16, base) == 0x11); /* window unset: the root */
    sm_pagemap2_window_note(&window2, map2, 16, base);
    CHECKF(window2.leaf != NULL && window2.first == ((uintptr_t)base & ~((64ull << 30) - 1)) >> 16,
           "window at granule %#lx", (unsigned long)window2.first);
    CHECK(sm_pagemap2_set(map2, 16, far, 1 << 16, 0x22, node_alloc));
    sm_pagemap2_window_note(&window2, map2, 16, far); /* already set: stays where it is */
    CHECK(window2.first == ((uintptr_t)base & ~((64ull << 30) - 1)) >> 16);
    const char *probes[] = { base, base + (2 << 16) - 1, base + (2 << 16), base - 1, far, far + (1 << 16),
                             far - 1, (const char *)((uintptr_t)base & ~((64ull << 30) - 1)) };
    for (unsigned i = 0; i < sizeof probes / sizeof *probes; i++)
        CHECKF(sm_pagemap2_get_windowed(map2, &window2, 16, probes[i]) == sm_pagemap2_get(map2, 16, probes[i]),
               "probe %u: windowed %#lx, root %#lx", i, (unsigned long)sm_pagemap2_get_windowed(map2, &window2, 16, probes[i]),
               (unsigned long)sm_pagemap2_get(map2, 16, probes[i]));
    CHECK(sm_pagemap2_get_windowed(map2, &window2, 16, base) == 0x11 &&
          sm_pagemap2_get_windowed(map2, &window2, 16, far) == 0x22);
    CHECK(sm_pagemap2_get(map2, 16, base + (1ull << 48)) == 0);
}

/* --- reclaim: lowwater collects every `period` events (under pressure from period / 4), gives back
 * half of a list's low-water mark, or all of a list longer than a batch that sat idle since the last
 * pass; its scan (every `period` refills) gives back only such idle lists; the marks follow. */
static void reclaim_lowwater_answers(void)
{
    unsigned events = 0, due = 0;
    for (int i = 0; i < 10; i++)
        due += sm_reclaim_lowwater_gc_due(&events, 4);
    CHECKF(events == 10 && due == 7, "events %u, %u collections due", events, due); /* from the 4th on */
    CHECK(!sm_reclaim_lowwater_gc_pressed(15, 64) && sm_reclaim_lowwater_gc_pressed(16, 64));
    CHECK(!sm_reclaim_lowwater_gc_pressed(0, 2) && sm_reclaim_lowwater_gc_pressed(1, 2));
    unsigned refills = 0, scans = 0;
    for (int i = 0; i < 12; i++)
        scans += sm_reclaim_lowwater_scan_due(&refills, 4);
    CHECK(refills == 12 && scans == 3);

    /* A list in use: 10 objects, never below 4 since the last collection (the scan's mark says 6). */
    sm_reclaim_lowwater_mark_t m = { .low = 6, .count = 9 };
    uint16_t low = 4;
    CHECK(sm_reclaim_lowwater_gc(&m, &low, 10, 2) == 2); /* (4 + 1) / 2 */
    CHECK(low == 8 && m.low == 8 && m.count == 8);
    m.low = 3, low = 7; /* used since; a scan saw it lower: the collection halves the lower of the two */
    CHECK(sm_reclaim_lowwater_gc(&m, &low, 8, 2) == 2 && low == 6);
    /* Idle since the last pass (length = low-water mark = what the pass left), longer than a batch. */
    CHECK(sm_reclaim_lowwater_gc(&m, &low, 6, 2) == 6 && low == 0 && m.low == 0 && m.count == 0);
    /* Idle but not longer than a batch: halved only. */
    m = (sm_reclaim_lowwater_mark_t){ .low = 2, .count = 2 }, low = 2;
    CHECK(sm_reclaim_lowwater_gc(&m, &low, 2, 2) == 1 && low == 1);

    /* The scan: a list of a batch or less is left alone, marks included. */
    m = (sm_reclaim_lowwater_mark_t){ .low = 1, .count = 7 }, low = 2;
    CHECK(sm_reclaim_lowwater_scan(&m, &low, 2, 2) == 0 && low == 2 && m.low == 1 && m.count == 7);
    /* In use since the last pass (popped below its length): kept; the collection's mark takes the low. */
    m = (sm_reclaim_lowwater_mark_t){ .low = 9, .count = 10 }, low = 5;
    CHECK(sm_reclaim_lowwater_scan(&m, &low, 10, 2) == 0 && low == 10 && m.low == 5 && m.count == 10);
    /* Untouched since that scan: all of it goes back. */
    CHECK(sm_reclaim_lowwater_scan(&m, &low, 10, 2) == 10 && low == 0 && m.count == 0 && m.low == 5);
    /* Grown since (frees): not idle. */
    m = (sm_reclaim_lowwater_mark_t){ .low = 4, .count = 4 }, low = 4;
    CHECK(sm_reclaim_lowwater_scan(&m, &low, 12, 2) == 0 && low == 12 && m.count == 12 && m.low == 4);

    sm_reclaim_lowwater_clear(&m, &low);
    CHECK(low == 0 && m.low == 0 && m.count == 0);
    CHECK(sm_reclaim_lowwater_low_water == 1);
}

/* --- reclaim: none never collects or scans, gives back nothing and keeps no low-water mark. */
static void reclaim_none_answers(void)
{
    unsigned events = 0, refills = 0;
    for (int i = 0; i < 100; i++)
        CHECK(!sm_reclaim_none_gc_due(&events, 1) && !sm_reclaim_none_scan_due(&refills, 1));
    CHECK(events == 0 && refills == 0 && !sm_reclaim_none_gc_pressed(1000, 1));
    sm_reclaim_none_mark_t m = { 0 };
    uint16_t low = 7;
    CHECK(sm_reclaim_none_gc(&m, &low, 100, 2) == 0 && sm_reclaim_none_scan(&m, &low, 100, 2) == 0);
    sm_reclaim_none_clear(&m, &low);
    CHECK(low == 7 && sm_reclaim_none_low_water == 0);
}

int main(void)
{
    check_begin("policies");
    RUN_CASE(size_handle_ranges);
    RUN_CASE(sync_none_runs_inline);
    RUN_CASE(chksum_xor_detects_changes);
    RUN_CASE(chksum_magic_is_fixed_and_keyed);
    RUN_CASE(chksum_covers_size_is_honest);
    RUN_CASE(chksum_crc32c_values);
    RUN_CASE(chksum_crc32c_paths_agree);
    RUN_CASE(chksum_crc32c_detects_changes);
    RUN_CASE(err_warn_reports_one_line);
    RUN_CASE(err_callback_receives_errors);
    RUN_CASE(err_fatal_aborts);
    RUN_CASE(msg_format_conversions);
    RUN_CASE(pagemap_set_get_clear);
    RUN_CASE(pagemap2_window);
    RUN_CASE(reclaim_lowwater_answers);
    RUN_CASE(reclaim_none_answers);
    return check_end();
}
