/* release: is memory given back after the program frees it? Three phases, one after the other:
 *   small   small_mib MiB requested in blocks of 16..512 B,
 *   medium  medium_blocks blocks of 100..600 KB (400: about 134 MiB),
 *   large   large_blocks blocks of 10 MiB.
 * Each phase allocates, writes a pattern on every page (every byte of the small blocks),
 * verifies and frees everything in a scattered order, then stays alive for wait_ms doing only a
 * few small malloc/free calls (4 every 5 ms, 16..256 B; no malloc_trim): requests that never
 * reach the parts of an allocator that hold the freed memory. RSS is read from /proc/self/statm
 * right after the last free and 0.1, 0.5, 1 and 2 s later (the ones within wait_ms).
 * Metrics (MiB): <phase>_base_mib (before the phase), <phase>_peak_mib (everything live),
 * <phase>_rss_0s_mib, _rss_100ms_mib, _rss_500ms_mib, _rss_1s_mib, _rss_2s_mib (after the frees).
 * The bookkeeping arrays are mmap'ed, so the allocator sees only the phases' blocks.
 * usage: release [small_mib=64] [medium_blocks=400] [large_blocks=10] [wait_ms=2000] */
#include "common.h"
#include <sys/mman.h>

#define MiB (1024.0 * 1024.0)
#define PAGE 4096

static const double sample_s[] = {0.0, 0.1, 0.5, 1.0, 2.0};
static const char *const sample_name[] = {"0s", "100ms", "500ms", "1s", "2s"};
#define NSAMPLES ((int)(sizeof sample_s / sizeof sample_s[0]))

static long WAIT_MS;

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

/* The pattern: small blocks are filled whole (a 64-bit tag, then a byte); bigger blocks get a
 * 64-bit word at the start of every page and at their end. */
static inline uint64_t tag_of(uint64_t phase, size_t i) { return (phase << 56) ^ (0x9E3779B97F4A7C15ULL * (i + 1)); }

static void write_block(unsigned char *p, size_t n, uint64_t tag, int whole) {
    if (whole) {
        memcpy(p, &tag, 8);
        memset(p + 8, (int)(tag >> 32) & 0xff, n - 8);
        return;
    }
    for (size_t k = 0; k + 16 <= n; k += PAGE) {
        uint64_t v = tag ^ k;
        memcpy(p + k, &v, 8);
    }
    uint64_t v = ~tag;
    memcpy(p + n - 8, &v, 8);
}

static int block_ok(const unsigned char *p, size_t n, uint64_t tag, int whole) {
    uint64_t v;
    if (whole) {
        memcpy(&v, p, 8);
        if (v != tag) return 0;
        unsigned char b = (unsigned char)(tag >> 32);
        for (size_t k = 8; k < n; k++)
            if (p[k] != b) return 0;
        return 1;
    }
    for (size_t k = 0; k + 16 <= n; k += PAGE) {
        memcpy(&v, p + k, 8);
        if (v != (tag ^ k)) return 0;
    }
    memcpy(&v, p + n - 8, 8);
    return v == ~tag;
}

/* The only allocator traffic while waiting: a ring of small blocks, 4 replaced every 5 ms. */
#define RING 16
static unsigned char *ring[RING];
static size_t ring_n[RING];
static uint64_t ring_seed = 0x5151;
static long ring_ops;

static void ring_step(int k) {
    for (int i = 0; i < k; i++) {
        unsigned j = (unsigned)(rnd(&ring_seed) % RING);
        if (ring[j]) {
            if (!stamp_ok(ring[j], ring_n[j], 0xA110C000u + j)) FAIL("release: small idle block %u corrupted", j);
            free(ring[j]);
        }
        ring_n[j] = (size_t)rnd_range(&ring_seed, 16, 256);
        ring[j] = xmalloc(ring_n[j]);
        stamp(ring[j], ring_n[j], 0xA110C000u + j);
        ring_ops++;
    }
}

static void sleep_until(double t) {
    double d = t - now_s();
    if (d <= 0) return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

static size_t gcd(size_t a, size_t b) {
    while (b) { size_t t = a % b; a = b; b = t; }
    return a;
}

static void phase(const char *name, uint64_t id, size_t n, size_t (*size_fn)(uint64_t *), int whole) {
    unsigned char **blk = map_array(n * sizeof *blk);
    size_t *len = map_array(n * sizeof *len);
    uint64_t rs = seed_for(id + 40);
    double base = rss_mib();
    for (size_t i = 0; i < n; i++) {
        len[i] = size_fn(&rs);
        blk[i] = xmalloc(len[i]);
        write_block(blk[i], len[i], tag_of(id, i), whole);
    }
    double peak = rss_mib();
    /* free in a scattered order: i * stride mod n, stride prime to n */
    size_t stride = n * 5 / 8 + 1;
    while (gcd(stride, n) != 1) stride++;
    for (size_t k = 0, i = 0; k < n; k++, i = (i + stride) % n) {
        if (!blk[i]) FAIL("release: %s block %zu freed twice (bad stride)", name, i);
        if (!block_ok(blk[i], len[i], tag_of(id, i), whole)) FAIL("release: %s block %zu (%zu B) corrupted", name, i, len[i]);
        free(blk[i]);
        blk[i] = NULL;
    }
    double t0 = now_s();
    double rss[NSAMPLES];
    int ns = 0;
    for (int s = 0; s < NSAMPLES && sample_s[s] * 1000 <= (double)WAIT_MS; s++) ns = s + 1;
    rss[0] = rss_mib();
    double next_op = t0 + 0.005;
    for (int s = 1; s < ns; s++) {
        double at = t0 + sample_s[s];
        while (now_s() < at) {
            sleep_until(next_op < at ? next_op : at);
            if (now_s() >= next_op) {
                ring_step(4);
                next_op += 0.005;
            }
        }
        rss[s] = rss_mib();
    }
    while (now_s() < t0 + (double)WAIT_MS / 1000) {  /* the rest of the wait, if any */
        sleep_until(next_op);
        ring_step(4);
        next_op += 0.005;
    }
    printf("metric %s_base_mib %.2f\nmetric %s_peak_mib %.2f\n", name, base, name, peak);
    for (int s = 0; s < ns; s++) printf("metric %s_rss_%s_mib %.2f\n", name, sample_name[s], rss[s]);
    munmap(blk, n * sizeof *blk);
    munmap(len, n * sizeof *len);
}

static size_t small_size(uint64_t *s) { return (size_t)rnd_range(s, 16, 512); }
static size_t medium_size(uint64_t *s) { return (size_t)rnd_range(s, 100000, 600000); }
static size_t large_size(uint64_t *s) { (void)s; return (size_t)10 << 20; }

int main(int argc, char **argv) {
    long small_mib = arg_l(argc, argv, 1, 64), nmed = arg_l(argc, argv, 2, 400), nlarge = arg_l(argc, argv, 3, 10);
    WAIT_MS = arg_l(argc, argv, 4, 2000);
    if (small_mib < 1 || nmed < 1 || nlarge < 1 || WAIT_MS < 0) FAIL("bad arguments");
    ring_step(RING);
    printf("metric start_mib %.2f\n", rss_mib());
    /* blocks of 16..512 B average 264 B: small_mib MiB of requests */
    phase("small", 1, (size_t)((double)small_mib * MiB / 264), small_size, 1);
    phase("medium", 2, (size_t)nmed, medium_size, 0);
    phase("large", 3, (size_t)nlarge, large_size, 0);
    for (int j = 0; j < RING; j++) {
        if (ring[j] && !stamp_ok(ring[j], ring_n[j], 0xA110C000u + j)) FAIL("release: small idle block %d corrupted", j);
        free(ring[j]);
    }
    printf("metric idle_ops %ld\n", ring_ops);
    return 0;
}
