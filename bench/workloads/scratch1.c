/* scratch1: passive false sharing with a single worker thread. Each round the main thread
 * allocates a run of small objects of `size` bytes — four neighbours, the object it hands
 * over, four more neighbours — and gives the middle one to the worker. The worker writes it
 * `writes` times, frees it (a remote free of a main-thread object) and then, `objects` times,
 * allocates an object of the same size, writes it `writes` times and frees it. Meanwhile the
 * main thread keeps writing its neighbours (and now and then frees one and allocates a
 * replacement) until the worker is done. An allocator that hands the worker the freed
 * object, or other memory in the main thread's cache lines, makes every one of the worker's
 * writes a cache-line transfer between the cores; the worker's work is fixed, so the time
 * shows it (on machines where false sharing costs: where the two CPUs share a core's caches
 * it does not). Every byte is checked (worker sums, neighbours' counts). Metric shared_pct:
 * the share of the worker's objects (the handed one included) that lay on a cache line of
 * the main thread's first neighbours of the round — the allocator's placement, whatever the
 * machine.
 * usage: scratch1 [rounds=100] [objects=150] [writes=100000] [size=8] */
#include "common.h"

#define NB 8
static long R, NOBJ, W, SZ;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned char *handed;
static long given = -1;
static atomic_long finished = -1;
static uint64_t worker_sum;
static uintptr_t main_lines[2 * NB];   /* cache lines of the round's first neighbours */
static long shared;                    /* worker objects placed on one of those lines */

static int on_main_line(const volatile void *p) {
    uintptr_t a = (uintptr_t)p >> 6, b = ((uintptr_t)p + (uintptr_t)SZ - 1) >> 6;
    for (int k = 0; k < 2 * NB; k++)
        if (main_lines[k] == a || main_lines[k] == b) return 1;
    return 0;
}

static uint64_t obj_sum(volatile unsigned char *p) {
    uint64_t s = 0;
    for (long k = 0; k < SZ; k++) s += p[k];
    return s;
}

static void *worker(void *a) {
    (void)a;
    for (long r = 0; r < R; r++) {
        pthread_mutex_lock(&mu);
        while (given < r) pthread_cond_wait(&cv, &mu);
        volatile unsigned char *g = handed;
        pthread_mutex_unlock(&mu);
        shared += on_main_line(g);
        for (long j = 0; j < W; j++) g[j % SZ]++;
        uint64_t sum = obj_sum(g);
        free((void *)g);
        for (long i = 0; i < NOBJ; i++) {
            volatile unsigned char *p = xmalloc((size_t)SZ);
            shared += on_main_line(p);
            for (long k = 0; k < SZ; k++) p[k] = 0;
            for (long j = 0; j < W; j++) p[j % SZ]++;
            sum += obj_sum(p);
            free((void *)p);
        }
        worker_sum = sum;
        atomic_store_explicit(&finished, r, memory_order_release);
    }
    return NULL;
}

static unsigned char *fresh(void) {
    unsigned char *p = xmalloc((size_t)SZ);
    memset(p, 0, (size_t)SZ);
    return p;
}
static void check_neighbour(const unsigned char *p, long c) {
    for (long k = 0; k < SZ; k++)
        if (p[k] != (unsigned char)(c / SZ + (k < c % SZ))) FAIL("scratch1: neighbour corrupted");
}

int main(int argc, char **argv) {
    R = arg_l(argc, argv, 1, 100); NOBJ = arg_l(argc, argv, 2, 150); W = arg_l(argc, argv, 3, 100000);
    SZ = arg_l(argc, argv, 4, 8);
    if (R < 1 || NOBJ < 0 || W < 1 || SZ < 1) FAIL("bad arguments");
    uint64_t per = 0;   /* byte sum of one object after W increments spread over its bytes */
    for (long k = 0; k < SZ; k++) per += (unsigned char)(W / SZ + (k < W % SZ));
    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL)) FAIL("pthread_create");
    long passes = 0;
    for (long r = 0; r < R; r++) {
        unsigned char *nb[NB], *g = NULL;
        long cnt[NB] = {0};
        for (int k = 0; k < NB; k++) {
            if (k == NB / 2) g = fresh();
            nb[k] = fresh();
        }
        for (int k = 0; k < NB; k++) {
            main_lines[2 * k] = (uintptr_t)nb[k] >> 6;
            main_lines[2 * k + 1] = ((uintptr_t)nb[k] + (uintptr_t)SZ - 1) >> 6;
        }
        pthread_mutex_lock(&mu);
        handed = g; given = r;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        for (long it = 0; atomic_load_explicit(&finished, memory_order_acquire) < r; it++) {
            for (int k = 0; k < NB; k++) {
                volatile unsigned char *v = nb[k];
                v[cnt[k] % SZ]++;
                cnt[k]++;
            }
            if ((it & 4095) == 4095) {   /* replace a neighbour */
                int k = (int)((it >> 12) % NB);
                check_neighbour(nb[k], cnt[k]);
                free(nb[k]);
                nb[k] = fresh(); cnt[k] = 0;
            }
            passes++;
        }
        for (int k = 0; k < NB; k++) { check_neighbour(nb[k], cnt[k]); free(nb[k]); }
        if (worker_sum != per * (uint64_t)(NOBJ + 1)) FAIL("scratch1: worker sum mismatch in round %ld", r);
    }
    pthread_join(th, NULL);
    printf("metric main_passes %ld\n", passes);
    /* share of the worker's objects (the handed one included) that lay on a cache line of the
     * main thread's neighbours: where false sharing costs, this is what costs */
    printf("metric shared_pct %.1f\n", 100.0 * shared / ((double)R * (NOBJ + 1)));
    return 0;
}
