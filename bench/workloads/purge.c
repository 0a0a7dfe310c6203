/* purge: is memory given back when a program frees most of a big working set? One phase per run
 * (a process of its own, so what one phase leaves does not count in the other's figures):
 *   small   ws_mib MiB requested in blocks of 16..512 B,
 *   large   ws_mib MiB requested in blocks of 256 KiB..2 MiB.
 * The phase allocates its working set, writes a pattern on every page, then frees the first 90%
 * in allocation order (the oldest data of a cache or of a finished request batch), keeps the newest
 * 10% live and stays idle for wait_ms doing only a few small malloc/free calls (4 every 5 ms), then
 * calls malloc_trim(0). The survivors are contiguous on purpose: with survivors scattered at random,
 * one live 64-byte object in 10 keeps nearly every page of every slab, and no allocator can give
 * memory back (docs/operations.md, memory return).
 * Metrics (MiB): <phase>_base_mib (before), <phase>_peak_mib (all live), <phase>_idle_mib (wait_ms
 * after the frees, no trim), <phase>_trim_mib (after malloc_trim(0)); <phase>_idle_pct and
 * <phase>_trim_pct: those two as a percentage of the peak, both less the base (what the phase added;
 * the base includes the program's own bookkeeping arrays, 16 bytes per block): the target
 * is below 15%, with 10% live.
 * The survivors are verified and freed before the next phase.
 * usage: purge small|large [ws_mib=1024] [wait_ms=1250] */
#include "common.h"
#include <malloc.h>
#include <sys/mman.h>

#define MiB (1024.0 * 1024.0)
#define PAGE 4096

static double rss_mib(void) {
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) FAIL("cannot open /proc/self/statm");
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) FAIL("cannot parse /proc/self/statm");
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / MiB;
}

static void *map_array(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) FAIL("mmap of %zu bytes for bookkeeping failed", bytes);
    return p;
}

/* A 64-bit word at the start of every page a block covers and at its end. */
static void write_block(unsigned char *p, size_t n, uint64_t tag) {
    for (size_t k = 0; k + 16 <= n; k += PAGE) {
        uint64_t v = tag ^ k;
        memcpy(p + k, &v, 8);
    }
    if (n >= 8) {
        uint64_t v = ~tag;
        memcpy(p + n - 8, &v, 8);
    }
}

static int block_ok(const unsigned char *p, size_t n, uint64_t tag) {
    uint64_t v;
    for (size_t k = 0; k + 16 <= n; k += PAGE) {
        memcpy(&v, p + k, 8);
        if (v != (tag ^ k)) return 0;
    }
    if (n >= 8) {
        memcpy(&v, p + n - 8, 8);
        if (v != ~tag) return 0;
    }
    return 1;
}

static uint64_t tag_of(uint64_t phase, size_t i) { return (phase << 56) ^ (0x9E3779B97F4A7C15ULL * (i + 1)); }

/* The only traffic while idle: a ring of small blocks, 4 replaced every 5 ms. */
#define RING 16
static void *ring[RING];
static uint64_t ring_seed = 0x7070;

static void ring_step(int k) {
    for (int i = 0; i < k; i++) {
        unsigned j = (unsigned)(rnd(&ring_seed) % RING);
        free(ring[j]);
        ring[j] = xmalloc((size_t)rnd_range(&ring_seed, 16, 256));
        memset(ring[j], 0x3c, 16);
    }
}

static void idle_for(double seconds) {
    double end = now_s() + seconds;
    while (now_s() < end) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        ring_step(4);
    }
}

static void phase(const char *name, uint64_t id, double ws_mib, size_t lo, size_t hi, double wait_s) {
    size_t avg = (lo + hi) / 2, n = (size_t)(ws_mib * MiB / (double)avg) + 1;
    unsigned char **blk = map_array(n * sizeof *blk);
    size_t *len = map_array(n * sizeof *len);
    memset(blk, 0, n * sizeof *blk); /* the bookkeeping's pages count in the base, not the phase */
    memset(len, 0, n * sizeof *len);
    uint64_t rs = seed_for(id + 70);
    double base = rss_mib();
    for (size_t i = 0; i < n; i++) {
        len[i] = (size_t)rnd_range(&rs, lo, hi);
        blk[i] = xmalloc(len[i]);
        write_block(blk[i], len[i], tag_of(id, i));
    }
    double peak = rss_mib();
    size_t keep_from = n - n / 10; /* the newest 10% stay live */
    for (size_t i = 0; i < keep_from; i++) {
        if (!block_ok(blk[i], len[i], tag_of(id, i))) FAIL("purge: %s block %zu (%zu B) corrupted", name, i, len[i]);
        free(blk[i]);
        blk[i] = NULL;
    }
    idle_for(wait_s);
    double idle = rss_mib();
    malloc_trim(0);
    double trimmed = rss_mib();
    for (size_t i = keep_from; i < n; i++) {
        if (!block_ok(blk[i], len[i], tag_of(id, i))) FAIL("purge: %s survivor %zu (%zu B) corrupted", name, i, len[i]);
        free(blk[i]);
    }
    printf("metric %s_base_mib %.2f\nmetric %s_peak_mib %.2f\nmetric %s_idle_mib %.2f\nmetric %s_trim_mib %.2f\n", name,
           base, name, peak, name, idle, name, trimmed);
    double grown = peak - base > 0 ? peak - base : 1;
    printf("metric %s_idle_pct %.1f\nmetric %s_trim_pct %.1f\n", name, 100.0 * (idle - base) / grown, name,
           100.0 * (trimmed - base) / grown);
    munmap(blk, n * sizeof *blk);
    munmap(len, n * sizeof *len);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "";
    long ws_mib = arg_l(argc, argv, 2, 1024), wait_ms = arg_l(argc, argv, 3, 1250);
    int small = strcmp(which, "small") == 0;
    if ((!small && strcmp(which, "large") != 0) || ws_mib < 1 || wait_ms < 0)
        FAIL("bad arguments (usage: purge small|large [ws_mib=1024] [wait_ms=1250])");
    ring_step(RING);
    if (small)
        phase("small", 1, (double)ws_mib, 16, 512, (double)wait_ms / 1000);
    else
        phase("large", 2, (double)ws_mib, 256 << 10, 2 << 20, (double)wait_ms / 1000);
    for (int j = 0; j < RING; j++) free(ring[j]);
    return 0;
}
