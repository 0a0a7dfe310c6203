/* orphan: objects outlive the thread that allocated them. Each generation the main thread
 * starts P producer threads; each allocates a batch of small objects (stamped, random sizes,
 * mostly 16..256 B, one in eight up to `max`), hands the batch over and exits. Only after the
 * main thread has joined the producers are their batches queued for the C consumer threads,
 * which live through the whole run and verify and free them — so every free is remote and
 * every object's allocating thread is already gone (its thread-local state must have been
 * handed over, and its pages take frees from strangers). The consumers free generation g
 * while generation g+1 is being allocated; at most two generations are queued at a time.
 * usage: orphan [producers=2] [consumers=1] [generations=2000] [batch=2000] [max=2048] */
#include "common.h"

typedef struct batch { struct batch *next; long n; uint64_t seed; void *p[]; } batch;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static batch *head, *tail;
static long queued, done;
static long P, C, G, B, MAXS;
static atomic_long freed;

static size_t size_of(uint64_t tag) {
    uint64_t r = tag >> 8;
    return (tag & 7) ? 16 + r % 241 : 16 + r % (uint64_t)(MAXS - 15);
}

typedef struct { uint64_t seed; batch *out; } parg;

static void *producer(void *a) {
    parg *pa = a;
    uint64_t rs = pa->seed;
    batch *b = xmalloc(sizeof *b + (size_t)B * sizeof(void *));
    b->n = B; b->next = NULL; b->seed = pa->seed;
    for (long j = 0; j < B; j++) {
        uint64_t tag = rnd(&rs);
        size_t n = size_of(tag);
        b->p[j] = xmalloc(n);
        stamp(b->p[j], n, tag);
    }
    pa->out = b;   /* handed over; the thread exits with all of it alive */
    return NULL;
}

static void *consumer(void *a) {
    (void)a;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!head && !done) pthread_cond_wait(&cv, &mu);
        batch *b = head;
        if (b) { head = b->next; if (!head) tail = NULL; }
        pthread_mutex_unlock(&mu);
        if (!b) return NULL;
        uint64_t rs = b->seed;   /* the producer's sequence again: sizes and tags */
        for (long j = 0; j < b->n; j++) {
            uint64_t tag = rnd(&rs);
            if (!stamp_ok(b->p[j], size_of(tag), tag)) FAIL("orphan: corrupted object");
            free(b->p[j]);
        }
        atomic_fetch_add(&freed, b->n);
        free(b);
        pthread_mutex_lock(&mu);
        queued--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
}

int main(int argc, char **argv) {
    P = arg_l(argc, argv, 1, 2); C = arg_l(argc, argv, 2, 1); G = arg_l(argc, argv, 3, 2000);
    B = arg_l(argc, argv, 4, 2000); MAXS = arg_l(argc, argv, 5, 2048);
    if (P < 1 || C < 1 || G < 1 || B < 1) FAIL("bad arguments");
    if (MAXS < 32) MAXS = 32;
    pthread_t *ct = calloc((size_t)C, sizeof *ct), *pt = calloc((size_t)P, sizeof *pt);
    parg *pa = calloc((size_t)P, sizeof *pa);
    if (!ct || !pt || !pa) FAIL("calloc");
    for (long i = 0; i < C; i++)
        if (pthread_create(&ct[i], NULL, consumer, NULL)) FAIL("pthread_create");
    for (long g = 0; g < G; g++) {
        for (long i = 0; i < P; i++) {
            pa[i].seed = seed_for((uint64_t)(g * P + i));
            pa[i].out = NULL;
            if (pthread_create(&pt[i], NULL, producer, &pa[i])) FAIL("pthread_create");
        }
        for (long i = 0; i < P; i++) pthread_join(pt[i], NULL);
        pthread_mutex_lock(&mu);
        while (queued > P) pthread_cond_wait(&cv, &mu);   /* at most the previous generation left */
        for (long i = 0; i < P; i++) {
            batch *b = pa[i].out;
            if (!b) FAIL("orphan: producer handed over nothing");
            if (tail) tail->next = b; else head = b;
            tail = b; queued++;
        }
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (long i = 0; i < C; i++) pthread_join(ct[i], NULL);
    if (freed != G * P * B) FAIL("orphan: made %ld freed %ld", G * P * B, (long)freed);
    printf("metric threads_exited %ld\n", G * P);
    free(ct); free(pt); free(pa);
    return 0;
}
