/* keepgrow: strings built by small realloc steps and then kept, as a program builds the strings it
 * stores (lines read into a growing buffer, keys and values assembled piece by piece). One string
 * at a time is grown by 1..max_step bytes per realloc (length + 1 for the NUL) to a random length
 * in [min_len, max_len] and kept; when all are built, each is checked whole and freed. strgrow's
 * strings are freed when done; these stay, so any headroom a realloc leaves in a block stays with
 * them: the workload that shows what a growth policy costs in memory.
 * usage: keepgrow [strings=200000] [min_len=16] [max_len=1000] [max_step=16] */
#include "common.h"

static inline char pat(long s, size_t i) { return (char)('a' + (uint32_t)(s * 11 + i * 7 + (i >> 6)) % 26); }

int main(int argc, char **argv) {
    long S = arg_l(argc, argv, 1, 200000), LMIN = arg_l(argc, argv, 2, 16), LMAX = arg_l(argc, argv, 3, 1000);
    long STEP = arg_l(argc, argv, 4, 16);
    if (S < 1 || LMIN < 1 || LMAX < LMIN || STEP < 1) FAIL("bad arguments");
    uint64_t rs = seed_for(9127);
    char **v = calloc((size_t)S, sizeof *v);
    size_t *lens = calloc((size_t)S, sizeof *lens);
    if (!v || !lens) FAIL("calloc");
    long moves = 0;
    for (long k = 0; k < S; k++) {
        size_t target = (size_t)rnd_range(&rs, (uint64_t)LMIN, (uint64_t)LMAX), len = 0;
        char *p = NULL;
        while (len < target) {
            size_t add = 1 + (size_t)(rnd(&rs) % (uint64_t)STEP);
            if (p && (p[len] != 0 || p[len - 1] != pat(k, len - 1))) FAIL("keepgrow: tail of string %ld lost", k);
            char *q = realloc(p, len + add + 1);
            if (!q) FAIL("realloc(%zu) failed", len + add + 1);
            if (p && q != p) moves++;
            p = q;
            for (size_t j = 0; j < add; j++) p[len + j] = pat(k, len + j);
            len += add;
            p[len] = 0;
        }
        v[k] = p;
        lens[k] = len;
    }
    for (long k = 0; k < S; k++) {
        if (strlen(v[k]) != lens[k]) FAIL("keepgrow: string %ld changed length", k);
        for (size_t j = 0; j < lens[k]; j++)
            if (v[k][j] != pat(k, j)) FAIL("keepgrow: string %ld corrupted at %zu", k, j);
        free(v[k]);
    }
    free(v);
    free(lens);
    printf("metric strings %ld\nmetric moves %ld\n", S, moves);
    return 0;
}
