/* Address space running out (RLIMIT_AS a little above what the process has mapped): plain
 * malloc & co., run under LD_PRELOAD=lib<inst>.so by tests/api/api.sh.
 *
 * After a warm-up that touches every range, the soft limit is set to the process's size plus
 * 192 MiB, and the program allocates a mix of sizes (16 B .. 16 MiB) until the allocator refuses
 * 64 requests in a row. Cases:
 *   refusals_enomem    every refusal is NULL with errno ENOMEM (no crash, no abort)
 *   blocks_intact      every block served under the limit kept its pattern
 *   served_some        the allocator served at least 64 MiB under the limit before refusing
 *   reuse_after_free   with everything freed, still under the limit, requests of 64 B, 100 KiB
 *                      and 4 MiB are served (the allocator's held memory is usable, or given
 *                      back and mapped again, when the OS says no)
 *   after_limit_lifted with the limit back where it was, 256 MiB is served and written */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tests/support/check.h"

#define MAX_BLOCKS 200000
static void *block[MAX_BLOCKS];
static size_t block_size[MAX_BLOCKS];
static unsigned nblocks, refused, bad_errno, damaged;
static size_t served_bytes;
static struct rlimit original;

static uint64_t rng = 88172645463325252u;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static size_t pick_size(void)
{
    unsigned r = (unsigned)(rnd() % 100);
    if (r < 70)
        return 16 + rnd() % 4096;
    if (r < 95)
        return 8192 + rnd() % (1u << 20);
    return (2u << 20) + rnd() % (14u << 20);
}
/* Only the first and last 256 bytes carry a pattern (all of a block up to 512): large blocks stay
 * mostly untouched. */
static void mark(void *p, size_t n, unsigned seed)
{
    if (n <= 512) {
        check_fill(p, n, seed);
        return;
    }
    check_fill(p, 256, seed);
    check_fill((char *)p + n - 256, 256, seed + 1);
}
static int marked(void *p, size_t n, unsigned seed)
{
    if (n <= 512)
        return check_verify(p, n, seed);
    return check_verify(p, 256, seed) && check_verify((char *)p + n - 256, 256, seed + 1);
}

static size_t mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void fill_until_refused(void)
{
    unsigned streak = 0;
    while (streak < 64 && nblocks < MAX_BLOCKS && served_bytes < ((size_t)4 << 30)) {
        size_t n = pick_size();
        errno = 0;
        void *p = malloc(n);
        if (!p) {
            refused++;
            streak++;
            bad_errno += errno != ENOMEM;
            continue;
        }
        streak = 0;
        mark(p, n, nblocks);
        block[nblocks] = p;
        block_size[nblocks++] = n;
        served_bytes += n;
    }
}

static void refusals_enomem(void)
{
    CHECKF(refused > 0, "nothing was refused under the limit (%zu MiB served)", served_bytes >> 20);
    CHECKF(bad_errno == 0, "%u of %u refusals left errno other than ENOMEM", bad_errno, refused);
}
static void blocks_intact(void) { CHECKF(damaged == 0, "%u of %u blocks damaged", damaged, nblocks); }
static void served_some(void) { CHECKF(served_bytes >= (64u << 20), "only %zu MiB served", served_bytes >> 20); }

static void reuse_after_free(void)
{
    static const size_t sizes[] = { 64, 100 << 10, 4 << 20 };
    for (unsigned i = 0; i < 3; i++) {
        errno = 0;
        void *p = malloc(sizes[i]);
        CHECKF(p != NULL, "malloc(%zu) refused (errno %d) with everything freed", sizes[i], errno);
        if (p) {
            memset(p, 0xab, sizes[i]);
            free(p);
        }
    }
}

static void after_limit_lifted(void)
{
    CHECK(setrlimit(RLIMIT_AS, &original) == 0);
    size_t n = (size_t)256 << 20;
    char *p = malloc(n);
    CHECKF(p != NULL, "malloc(256 MiB) refused with the limit lifted");
    if (p) {
        for (size_t i = 0; i < n; i += 4096)
            p[i] = (char)i;
        free(p);
    }
}

int main(void)
{
    check_begin("rlimit_as");
    /* Warm-up: every range once, so start-up mappings are made before the limit. */
    for (size_t n = 16; n <= (16u << 20); n *= 4)
        free(malloc(n));
    getrlimit(RLIMIT_AS, &original);
    struct rlimit tight = original;
    tight.rlim_cur = mapped_bytes() + ((size_t)192 << 20);
    if (setrlimit(RLIMIT_AS, &tight) != 0) {
        check_skip("all", "setrlimit(RLIMIT_AS) refused");
        return 0;
    }
    fill_until_refused();
    for (unsigned i = 0; i < nblocks; i++) {
        damaged += !marked(block[i], block_size[i], i);
        free(block[i]);
    }
    printf("# %u blocks (%zu MiB) served under a limit of %zu MiB, %u refused\n", nblocks, served_bytes >> 20,
           (size_t)tight.rlim_cur >> 20, refused);
    RUN_CASE(refusals_enomem);
    RUN_CASE(blocks_intact);
    RUN_CASE(served_some);
    RUN_CASE(reuse_after_free);
    RUN_CASE(after_limit_lifted);
    return check_end();
}
