/* strgrow: strings grown by small realloc steps, hundreds alive at once. S strings each
 * have a target length of 2..8 KiB (random); each step picks a random string and appends
 * 1..16 bytes with realloc (length + 1 for the NUL), so the strings grow interleaved, each
 * through every small size class. A string that reached its target is checked whole, freed
 * and started again (a fresh malloc of its first 1..16 bytes, a new target). Each step checks
 * the terminating NUL, the last byte and one random byte of the string before growing it.
 * usage: strgrow [strings=300] [steps=12000000] [min_target=2048] [max_target=8192] [max_step=16] */
#include "common.h"

typedef struct { char *p; size_t len, target; uint32_t gen; } str;

static inline char pat(long s, uint32_t gen, size_t i) {
    return (char)('a' + (uint32_t)(s * 7 + gen * 13 + i * 5 + (i >> 7)) % 26);
}

int main(int argc, char **argv) {
    long S = arg_l(argc, argv, 1, 300), STEPS = arg_l(argc, argv, 2, 12000000);
    long TMIN = arg_l(argc, argv, 3, 2048), TMAX = arg_l(argc, argv, 4, 8192), STEP = arg_l(argc, argv, 5, 16);
    if (S < 1 || STEPS < 1 || STEP < 1 || TMIN < STEP || TMAX < TMIN) FAIL("bad arguments");
    uint64_t rs = seed_for(4711);
    str *s = calloc((size_t)S, sizeof *s);
    if (!s) FAIL("calloc");
    long strings_done = 0, moves = 0;
    for (long i = 0; i < STEPS; i++) {
        long k = (long)(rnd(&rs) % (uint64_t)S);
        str *x = &s[k];
        uint64_t r = rnd(&rs);
        size_t add = 1 + (size_t)(r % (uint64_t)STEP);
        if (x->p && x->len >= x->target) {   /* done: check it all, free, start again */
            if (strlen(x->p) != x->len) FAIL("strgrow: length changed");
            for (size_t j = 0; j < x->len; j++)
                if (x->p[j] != pat(k, x->gen, j)) FAIL("strgrow: string %ld corrupted at %zu", k, j);
            free(x->p);
            x->p = NULL;
            strings_done++;
        }
        if (!x->p) {
            x->gen++;
            x->len = 0;
            x->target = (size_t)rnd_range(&rs, (uint64_t)TMIN, (uint64_t)TMAX);
            x->p = xmalloc(add + 1);
        } else {
            if (x->p[x->len] != 0 || x->p[x->len - 1] != pat(k, x->gen, x->len - 1)) FAIL("strgrow: tail of string %ld lost", k);
            size_t j = (size_t)(r >> 32) % x->len;
            if (x->p[j] != pat(k, x->gen, j)) FAIL("strgrow: string %ld lost byte %zu", k, j);
            char *q = realloc(x->p, x->len + add + 1);
            if (!q) FAIL("realloc(%zu) failed", x->len + add + 1);
            if (q != x->p) moves++;
            x->p = q;
        }
        for (size_t j = 0; j < add; j++) x->p[x->len + j] = pat(k, x->gen, x->len + j);
        x->len += add;
        x->p[x->len] = 0;
    }
    for (long k = 0; k < S; k++)
        if (s[k].p) {
            for (size_t j = 0; j < s[k].len; j++)
                if (s[k].p[j] != pat(k, s[k].gen, j)) FAIL("strgrow: string %ld corrupted at end", k);
            free(s[k].p);
        }
    free(s);
    printf("metric strings %ld\nmetric moves %ld\n", strings_done, moves);
    return 0;
}
