/* How much cheaper is emptying a first-class heap at once than freeing its blocks one by one?
 * One process per measurement (bench/heaps/reset.sh runs them in turns): `blocks` blocks of 16..256
 * bytes (a fixed pseudo-random sequence) are allocated and each one's first word written, then the
 * heap is emptied one of five ways and only that is timed:
 *   free       sunmao_heap_free of every block, in allocation order (a teardown loop)
 *   plainfree  the same with free() (the registry finds the heap)
 *   reset      sunmao_heap_reset: the spans used in the cycle stay mapped for the next one
 *   twice      two sunmao_heap_reset in a row: the second gives the idle spans back to the OS
 *              (all but `retain`, one chunk), what a heap that shrinks pays once
 *   destroy    sunmao_heap_destroy
 *   malloc     no heap: malloc's blocks, freed one by one with free() (the reference)
 * kind: tlsf or region. Prints one line: <kind> <how> <blocks> alloc_ns_per_block=<x> empty_ms=<y>
 * usage: reset tlsf|region free|plainfree|reset|twice|destroy|malloc [blocks=1000000] */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "include/sunmao/heap.h"

/* Resolved from the preloaded library (LD_PRELOAD=libsunmao.so); NULL without one. */
#pragma weak sunmao_heap_create
#pragma weak sunmao_heap_malloc
#pragma weak sunmao_heap_free
#pragma weak sunmao_heap_reset
#pragma weak sunmao_heap_destroy

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: reset tlsf|region free|plainfree|reset|twice|destroy|malloc [blocks]\n");
        return 2;
    }
    const char *kind = argv[1], *how = argv[2];
    size_t n = argc > 3 ? strtoul(argv[3], NULL, 10) : 1000000;
    void **v = malloc(n * sizeof *v);
    if (!v)
        return 1;
    bool use_heap = strcmp(how, "malloc") != 0;
    char spec[64];
    snprintf(spec, sizeof spec, "kind:%s", kind);
    sunmao_heap_t *h = use_heap && sunmao_heap_create ? sunmao_heap_create(spec) : NULL;
    if (use_heap && !h) {
        fprintf(stderr, "reset: sunmao_heap_create(\"%s\") failed (is a sunmao library preloaded?)\n", spec);
        return 1;
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    double t0 = now();
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t size = 16 + (size_t)(x % 241);
        v[i] = use_heap ? sunmao_heap_malloc(h, size) : malloc(size);
        if (!v[i])
            return 1;
        *(size_t *)v[i] = i;
    }
    double t1 = now();
    for (size_t i = 0; i < n; i += 4096) /* the blocks were written: check a sample */
        if (*(size_t *)v[i] != i)
            return 3;
    double t2 = now();
    if (strcmp(how, "free") == 0)
        for (size_t i = 0; i < n; i++)
            sunmao_heap_free(h, v[i]);
    else if (strcmp(how, "plainfree") == 0 || !use_heap)
        for (size_t i = 0; i < n; i++)
            free(v[i]);
    else if (strcmp(how, "reset") == 0)
        sunmao_heap_reset(h);
    else if (strcmp(how, "twice") == 0)
        sunmao_heap_reset(h), sunmao_heap_reset(h);
    else if (strcmp(how, "destroy") == 0)
        sunmao_heap_destroy(h), h = NULL;
    else {
        fprintf(stderr, "reset: unknown way '%s'\n", how);
        return 2;
    }
    double t3 = now();
    printf("%s %s %zu alloc_ns_per_block=%.1f empty_ms=%.3f\n", kind, how, n, (t1 - t0) * 1e9 / (double)n, (t3 - t2) * 1e3);
    if (h)
        sunmao_heap_destroy(h);
    free(v);
    return 0;
}
