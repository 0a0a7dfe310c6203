/* realloc: many buffers grown by small random steps (interleaved, so they fragment the
 * heap), occasionally shrunk; every byte written is checked after each move.
 * usage: realloc [buffers=64] [rounds=40] [max_size=262144] */
#include "common.h"

static inline unsigned char pat(long buf, size_t i) { return (unsigned char)(buf * 131 + i * 7 + (i >> 9)); }

int main(int argc, char **argv) {
    long NBUF = arg_l(argc, argv, 1, 64), R = arg_l(argc, argv, 2, 40);
    size_t MAXS = (size_t)arg_l(argc, argv, 3, 262144);
    uint64_t rs = seed_for(7);
    unsigned char **p = calloc((size_t)NBUF, sizeof *p);
    size_t *n = calloc((size_t)NBUF, sizeof *n);
    long moves = 0;
    for (long r = 0; r < R; r++) {
        int done = 0;
        while (!done) {
            done = 1;
            for (long b = 0; b < NBUF; b++) {
                if (n[b] >= MAXS) continue;
                done = 0;
                size_t nn = n[b] + 1 + rnd(&rs) % (n[b] / 4 + 64);
                if (nn > MAXS) nn = MAXS;
                unsigned char *q = realloc(p[b], nn);
                if (!q) FAIL("realloc(%zu) failed", nn);
                if (q != p[b]) moves++;
                for (size_t i = 0; i < n[b]; i += 97) if (q[i] != pat(b, i)) FAIL("realloc: content lost at %zu", i);
                if (n[b] && q[n[b] - 1] != pat(b, n[b] - 1)) FAIL("realloc: tail lost");
                for (size_t i = n[b]; i < nn; i++) q[i] = pat(b, i);
                p[b] = q; n[b] = nn;
            }
        }
        for (long b = 0; b < NBUF; b++) {   /* shrink to a random prefix and start growing again */
            size_t nn = 1 + rnd(&rs) % 256;
            unsigned char *q = realloc(p[b], nn);
            if (!q) FAIL("realloc shrink failed");
            for (size_t i = 0; i < nn; i++) if (q[i] != pat(b, i)) FAIL("realloc: shrink lost data");
            p[b] = q; n[b] = nn;
        }
    }
    for (long b = 0; b < NBUF; b++) free(p[b]);
    free(p); free(n);
    printf("metric moves %ld\n", moves);
    return 0;
}
