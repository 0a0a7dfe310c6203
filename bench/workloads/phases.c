/* phases: a program that works in phases, each building a large set of small objects of one size
 * and dropping all of it before the next phase builds a set of another size (a compiler's passes,
 * a batch job's stages). Each phase allocates MiB mebibytes of objects of its size, writes every
 * byte, checks a stamp on each and frees them all; the sizes cycle through 64, 256, 1024, 48, 4096
 * and 128 bytes. An allocator that hands the freed memory back to the OS between phases faults it
 * in again for the next one; one that keeps it for the next phase does not.
 * usage: phases [mib=300] [phases=6]; metrics alloc_s and free_s (the phases' totals) */
#include "common.h"

int main(int argc, char **argv) {
    static const size_t sizes[] = { 64, 256, 1024, 48, 4096, 128 };
    long mib = arg_l(argc, argv, 1, 300), phases = arg_l(argc, argv, 2, 6);
    if (mib < 1 || phases < 1) FAIL("bad arguments");
    double alloc_s = 0, free_s = 0;
    for (long ph = 0; ph < phases; ph++) {
        size_t size = sizes[ph % (long)(sizeof sizes / sizeof sizes[0])];
        size_t n = ((size_t)mib << 20) / size;
        void **v = xmalloc(n * sizeof *v);
        double t0 = now_s();
        for (size_t i = 0; i < n; i++) {
            v[i] = xmalloc(size);
            memset(v[i], (int)(ph + 1), size);
            stamp(v[i], size, (uint64_t)ph << 32 | i);
        }
        double t1 = now_s();
        for (size_t i = 0; i < n; i++) {
            if (!stamp_ok(v[i], size, (uint64_t)ph << 32 | i)) FAIL("phases: object %zu of phase %ld damaged", i, ph);
            unsigned char *b = v[i];
            if (b[8] != (unsigned char)(ph + 1) && size > 16) FAIL("phases: object %zu of phase %ld lost its fill", i, ph);
            free(v[i]);
        }
        double t2 = now_s();
        free(v);
        alloc_s += t1 - t0;
        free_s += t2 - t1;
    }
    printf("metric alloc_s %.3f\nmetric free_s %.3f\n", alloc_s, free_s);
    return 0;
}
