/* The cost of one malloc + free pair of 64 bytes through a first-class heap, against the
 * process's malloc (bench/heaps/reset.sh runs it beside reset.c; docs/heaps.md has the figures).
 *   malloc   malloc + free (libsunmao's thread cache when preloaded)
 *   tlsf     sunmao_heap_malloc + sunmao_heap_free on a tlsf heap
 *   region   a region heap used as one is: 64-byte mallocs, a sunmao_heap_reset every 4096 (a
 *            request's arena); the figure is per malloc, the resets included
 * threads > 1: that many threads, each on its own pairs, all on one shared heap (malloc: each on
 * its own cache). Each thread keeps 16 blocks live so a pair is not served by one block in a loop.
 * Prints: <way> <threads> ns_per_pair=<x> (wall time over pairs per thread).
 * usage: pair malloc|tlsf|region [threads=1] [pairs=5000000] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "include/sunmao/heap.h"

#pragma weak sunmao_heap_create
#pragma weak sunmao_heap_malloc
#pragma weak sunmao_heap_free
#pragma weak sunmao_heap_reset

static sunmao_heap_t *heap;
static long pairs;
static int region;

static void *run(void *arg)
{
    (void)arg;
    if (region) {
        for (long i = 0; i < pairs; i++) {
            char *p = sunmao_heap_malloc(heap, 64);
            if (!p)
                abort();
            *(volatile char *)p = 1;
            if ((i & 4095) == 4095)
                sunmao_heap_reset(heap);
        }
        return NULL;
    }
    void *live[16];
    for (int i = 0; i < 16; i++)
        live[i] = heap ? sunmao_heap_malloc(heap, 64) : malloc(64);
    for (long i = 0; i < pairs; i++) {
        void *p = heap ? sunmao_heap_malloc(heap, 64) : malloc(64);
        if (!p)
            abort();
        *(volatile char *)p = 1;
        void *old = live[i & 15];
        live[i & 15] = p;
        if (heap)
            sunmao_heap_free(heap, old);
        else
            free(old);
    }
    for (int i = 0; i < 16; i++)
        heap ? sunmao_heap_free(heap, live[i]) : free(live[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pair malloc|tlsf|region [threads] [pairs]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    pairs = argc > 3 ? atol(argv[3]) : 5000000;
    if (threads < 1 || threads > 64)
        return 2;
    region = strcmp(argv[1], "region") == 0;
    if (region && threads != 1)
        return 2; /* a request's arena has one thread */
    if (strcmp(argv[1], "malloc") != 0) {
        if (!sunmao_heap_create || !(heap = sunmao_heap_create(argv[1]))) {
            fprintf(stderr, "pair: no heap of kind '%s' (is a sunmao library preloaded?)\n", argv[1]);
            return 1;
        }
    }
    struct timespec a, b;
    pthread_t t[64];
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)pairs;
    printf("%s %d ns_per_pair=%.1f\n", argv[1], threads, ns);
    return 0;
}
