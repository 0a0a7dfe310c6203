/* biggrow: large buffers grown by realloc, the way a program appends to a log, a file image or a
 * growing array it never sizes up front. Each round grows one buffer from `step` bytes to `max`
 * in steps of `step`, writing every new byte, checks all of it, and frees it; another buffer of
 * a quarter of the size, grown in the same steps, is kept alive beside it so the two interleave.
 * An allocator that copies the buffer at every step does O(max^2 / step) bytes of copying (glibc
 * moves such blocks with mremap, without copying).
 * usage: biggrow [rounds=3] [max_mib=256] [step_kib=1024]; metric `moves` (reallocs that moved) */
#include "common.h"

static inline unsigned char pat(long round, size_t i) { return (unsigned char)(round * 37 + (i >> 12) * 11 + i); }

static unsigned char *grow(unsigned char *p, size_t from, size_t to, long round, long *moves) {
    unsigned char *q = realloc(p, to);
    if (!q) FAIL("biggrow: realloc(%zu) failed", to);
    if (p && q != p) (*moves)++;
    for (size_t i = from; i < to; i++) q[i] = pat(round, i);
    return q;
}

static void check(const unsigned char *p, size_t n, long round) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(round, i)) FAIL("biggrow: round %ld: byte %zu lost", round, i);
}

int main(int argc, char **argv) {
    long R = arg_l(argc, argv, 1, 3), MAXM = arg_l(argc, argv, 2, 256), STEPK = arg_l(argc, argv, 3, 1024);
    if (R < 1 || MAXM < 1 || STEPK < 4 || (size_t)STEPK * 1024 > (size_t)MAXM << 20) FAIL("bad arguments");
    size_t max = (size_t)MAXM << 20, step = (size_t)STEPK << 10;
    long moves = 0;
    for (long r = 0; r < R; r++) {
        unsigned char *big = NULL, *small = NULL;
        size_t nb = 0, ns = 0;
        while (nb + step <= max) {
            big = grow(big, nb, nb + step, r, &moves);
            nb += step;
            if (ns + step <= nb / 4) {
                small = grow(small, ns, ns + step, r + 1, &moves);
                ns += step;
            }
        }
        check(big, nb, r);
        check(small, ns, r + 1);
        free(big);
        free(small);
    }
    printf("metric moves %ld\n", moves);
    return 0;
}
