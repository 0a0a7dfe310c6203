/* sunmao benchmark workload (bench/README.md, "memcached"): a load client for a memcached server
 * (our own code). Each thread opens one loopback connection and performs a fixed number of
 * operations on its own keys with the text protocol, one request at a time: set (values of
 * random size, contents derived from key and version), get (the value must be the one last set:
 * size and every byte are compared; a miss of a key that was set is an error too) and delete.
 * Prints "ok <ops> <sets> <gets> <deletes> <value bytes set>" and metrics; exits 3 on any
 * mismatch, protocol error or lost connection.
 * usage: memcl port [threads=4] [ops_per_thread=20000] [max_value=65536] [keys_per_thread=3000] */
#include "common.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static int port, nthreads, ops, maxval, nkeys;
static _Atomic long tot_sets, tot_gets, tot_dels, tot_bytes, tot_hits;

typedef struct { int fd; char buf[1 << 16]; size_t lo, hi; } conn_t;

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) FAIL("write to memcached: %s", strerror(errno));
        p += w, n -= (size_t)w;
    }
}
static void fill(conn_t *c) {
    if (c->lo == c->hi) c->lo = c->hi = 0;
    if (c->hi == sizeof c->buf) {
        memmove(c->buf, c->buf + c->lo, c->hi - c->lo);
        c->hi -= c->lo, c->lo = 0;
    }
    ssize_t r;
    do r = read(c->fd, c->buf + c->hi, sizeof c->buf - c->hi); while (r < 0 && errno == EINTR);
    if (r <= 0) FAIL("memcached closed the connection (%s)", r ? strerror(errno) : "EOF");
    c->hi += (size_t)r;
}
/* One reply line (without \r\n) into line[cap]. */
static void read_line(conn_t *c, char *line, size_t cap) {
    for (;;) {
        char *e = memchr(c->buf + c->lo, '\n', c->hi - c->lo);
        if (e) {
            size_t n = (size_t)(e - (c->buf + c->lo));
            if (n == 0 || e[-1] != '\r' || n >= cap) FAIL("bad reply line from memcached");
            memcpy(line, c->buf + c->lo, n - 1);
            line[n - 1] = 0;
            c->lo += n + 1;
            return;
        }
        if (c->hi - c->lo >= cap) FAIL("reply line too long");
        fill(c);
    }
}
static void read_n(conn_t *c, char *dst, size_t n) {
    while (n) {
        if (c->lo == c->hi) fill(c);
        size_t k = c->hi - c->lo < n ? c->hi - c->lo : n;
        memcpy(dst, c->buf + c->lo, k);
        c->lo += k, dst += k, n -= k;
    }
}
/* The value of (thread, key, version): its size and its bytes. */
static size_t val_size(uint64_t h) {
    uint64_t s = h | 1, r = rnd(&s) % 100;
    if (r < 70) return (size_t)rnd_range(&s, 16, 512);
    if (r < 95) return (size_t)rnd_range(&s, 513, 8192);
    return (size_t)rnd_range(&s, 8193, (uint64_t)maxval);
}
static void val_fill(char *p, size_t n, uint64_t h) {
    uint64_t s = h ^ 0x5bd1e995u;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { uint64_t v = rnd(&s); memcpy(p + i, &v, 8); }
    for (; i < n; i++) p[i] = (char)('a' + (i & 15));
}

static void *worker(void *arg) {
    long t = (long)(intptr_t)arg;
    conn_t *c = xmalloc(sizeof *c);
    c->lo = c->hi = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) FAIL("connect: %s", strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint32_t *ver = calloc((size_t)nkeys, sizeof *ver);
    char *req = xmalloc((size_t)maxval + 256), *val = xmalloc((size_t)maxval + 2), *got = xmalloc((size_t)maxval + 2);
    char line[512], key[64];
    uint64_t s = seed_for((uint64_t)t + 77);
    long sets = 0, gets = 0, dels = 0, hits = 0, bytes = 0;
    for (long i = 0; i < ops; i++) {
        long k = (long)(rnd(&s) % (uint64_t)nkeys);
        snprintf(key, sizeof key, "sm:%ld:%ld", t, k);
        unsigned r = (unsigned)(rnd(&s) % 100);
        if (ver[k] == 0 && r >= 93) r = 0; /* an absent key: set it or read the miss, no delete */
        if (r < 45) {           /* set a new version */
            ver[k]++;
            uint64_t h = ((uint64_t)t << 48) ^ ((uint64_t)k << 20) ^ ver[k];
            size_t n = val_size(h);
            int hl = snprintf(req, 256, "set %s 0 0 %zu\r\n", key, n);
            val_fill(req + hl, n, h);
            memcpy(req + hl + n, "\r\n", 2);
            write_all(c->fd, req, (size_t)hl + n + 2);
            read_line(c, line, sizeof line);
            if (strcmp(line, "STORED")) FAIL("set %s: '%s'", key, line);
            sets++, bytes += (long)n;
        } else if (r < 93) {    /* get: must be the last version set, or a miss if none */
            int hl = snprintf(req, 256, "get %s\r\n", key);
            write_all(c->fd, req, (size_t)hl);
            read_line(c, line, sizeof line);
            gets++;
            if (!strcmp(line, "END")) {
                if (ver[k]) FAIL("get %s: miss, but version %u was set", key, ver[k]);
                continue;
            }
            if (!ver[k]) FAIL("get %s: a value for a key never set / deleted", key);
            char rk[64];
            unsigned fl;
            size_t n;
            if (sscanf(line, "VALUE %63s %u %zu", rk, &fl, &n) != 3 || strcmp(rk, key) || n > (size_t)maxval)
                FAIL("get %s: bad header '%s'", key, line);
            uint64_t h = ((uint64_t)t << 48) ^ ((uint64_t)k << 20) ^ ver[k];
            size_t want = val_size(h);
            read_n(c, got, n + 2);
            if (n != want) FAIL("get %s: %zu bytes, version %u has %zu", key, n, ver[k], want);
            val_fill(val, n, h);
            if (memcmp(got, val, n) || got[n] != '\r' || got[n + 1] != '\n') FAIL("get %s: value differs", key);
            read_line(c, line, sizeof line);
            if (strcmp(line, "END")) FAIL("get %s: '%s' after the value", key, line);
            hits++;
        } else {                /* delete a key that is there */
            int hl = snprintf(req, 256, "delete %s\r\n", key);
            write_all(c->fd, req, (size_t)hl);
            read_line(c, line, sizeof line);
            if (strcmp(line, "DELETED")) FAIL("delete %s: '%s'", key, line);
            ver[k] = 0;
            dels++;
        }
    }
    close(c->fd);
    tot_sets += sets;
    tot_gets += gets;
    tot_dels += dels;
    tot_bytes += bytes;
    tot_hits += hits;
    free(ver), free(req), free(val), free(got), free(c);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) FAIL("usage: memcl port [threads] [ops_per_thread] [max_value] [keys_per_thread]");
    port = (int)arg_l(argc, argv, 1, 11211);
    nthreads = (int)arg_l(argc, argv, 2, 4);
    ops = (int)arg_l(argc, argv, 3, 20000);
    maxval = (int)arg_l(argc, argv, 4, 65536);
    nkeys = (int)arg_l(argc, argv, 5, 3000);
    if (nthreads < 1 || ops < 1 || maxval < 8193 || maxval > 1000000 || nkeys < 1) FAIL("bad arguments");
    pthread_t th[256];
    if (nthreads > 256) FAIL("at most 256 threads");
    double t0 = now_s();
    for (long i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i)) FAIL("pthread_create");
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    double dt = now_s() - t0;
    long total = (long)nthreads * ops;
    if (tot_sets + tot_gets + tot_dels != total) FAIL("op count %ld, expected %ld", tot_sets + tot_gets + tot_dels, total);
    printf("ok %ld %ld %ld %ld %ld\n", total, (long)tot_sets, (long)tot_gets, (long)tot_dels, (long)tot_bytes);
    printf("metric ops_per_s %.0f\nmetric get_hits %ld\n", total / dt, (long)tot_hits);
    return 0;
}
