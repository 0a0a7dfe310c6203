/* hugewalk: a large working set of small objects visited in random order, the case where TLB
 * misses cost a program time. Builds `mib` MiB of objects of 16..512 bytes (most of them small:
 * the size is 16 << k with k uniform in 0..5, plus a few bytes), links them into one cycle in a
 * random order, and chases the cycle `hops` times; then frees a random half and allocates it
 * again (other sizes, so slabs of several classes empty and refill), relinks, and chases again.
 * Every object is stamped with its index and checked on each visit and before its free.
 * Prints metrics: walk_ns (per hop, both walks), huge_mib and rss_mib (AnonHugePages and Rss of
 * /proc/self/smaps_rollup at the end: how much of the heap transparent huge pages back).
 * usage: hugewalk [mib=512] [hops=20000000] [seed=1] */
#include "common.h"
#include <sys/mman.h>

typedef struct obj { struct obj *next; uint64_t stamp; } obj;

static void *bk_alloc(size_t bytes) /* bookkeeping outside the allocator under test */
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        FAIL("mmap %zu", bytes);
    return p;
}

static size_t obj_size(uint64_t *s) { return ((size_t)16 << rnd_range(s, 0, 5)) + rnd_range(s, 0, 7); }

static obj *make(size_t i, size_t n)
{
    obj *o = malloc(n);
    if (!o)
        FAIL("malloc %zu", n);
    o->stamp = i * 0x9E3779B97F4A7C15ULL;
    return o;
}

/* Links objs in the order of perm into one cycle. */
static void link_cycle(obj **objs, const size_t *perm, size_t n)
{
    for (size_t i = 0; i < n; i++)
        objs[perm[i]]->next = objs[perm[(i + 1) % n]];
}

static double walk(obj *start, long hops, obj **objs, size_t n)
{
    double t0 = now_s();
    obj *o = start;
    uint64_t sum = 0;
    for (long h = 0; h < hops; h++) {
        sum += o->stamp;
        o = o->next;
    }
    double t = now_s() - t0;
    /* The walk's sum cannot be predicted without the objects: check the cycle instead. */
    if (!o || (sum == 0 && hops > 1))
        FAIL("walk lost its way");
    for (size_t i = 0; i < n; i += n / 1024 + 1)
        if (objs[i]->stamp != i * 0x9E3779B97F4A7C15ULL)
            FAIL("object %zu overwritten", i);
    return t;
}

static long smaps_kib(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            v = strtol(line + strlen(key), NULL, 10);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    const size_t mib = (size_t)arg_l(argc, argv, 1, 512);
    const long hops = arg_l(argc, argv, 2, 20000000);
    uint64_t s = seed_for((uint64_t)arg_l(argc, argv, 3, 1));
    const size_t n = (mib << 20) / 190; /* the sizes' mean, with each size class's rounding */
    obj **objs = bk_alloc(n * sizeof *objs);
    size_t *perm = bk_alloc(n * sizeof *perm);
    for (size_t i = 0; i < n; i++) {
        objs[i] = make(i, obj_size(&s));
        perm[i] = i;
    }
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd(&s) % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    link_cycle(objs, perm, n);
    double t1 = walk(objs[0], hops, objs, n);
    for (size_t i = 0; i < n; i++)
        if (rnd(&s) & 1) {
            if (objs[i]->stamp != i * 0x9E3779B97F4A7C15ULL)
                FAIL("object %zu overwritten before its free", i);
            free(objs[i]);
            objs[i] = NULL;
        }
    for (size_t i = 0; i < n; i++)
        if (!objs[i])
            objs[i] = make(i, obj_size(&s));
    link_cycle(objs, perm, n);
    double t2 = walk(objs[0], hops, objs, n);
    printf("metric walk_ns %.2f\n", (t1 + t2) * 1e9 / (2.0 * (double)hops));
    printf("metric huge_mib %.1f\n", smaps_kib("AnonHugePages:") / 1024.0);
    printf("metric rss_mib %.1f\n", smaps_kib("Rss:") / 1024.0);
    for (size_t i = 0; i < n; i++)
        free(objs[i]);
    return 0;
}
