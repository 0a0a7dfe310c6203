/* xmalloc: producer/consumer. Producers allocate batches of blocks and hand them over a
 * shared queue; consumers verify and free them (every free is a remote free).
 * usage: xmalloc [threads=2] [batches_per_producer=20000] [batch=64] [max_size=256] */
#include "common.h"

typedef struct batch { struct batch *next; long n; void *p[]; } batch;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static batch *head, *tail;
static long queued, producers_left;
static long NB, B, MAXS;
static atomic_long made, freed;

static size_t size_of(uint64_t tag) { return 16 + tag % (uint64_t)(MAXS - 15); }

static void *producer(void *a) {
    uint64_t rs = seed_for((uint64_t)(uintptr_t)a);
    for (long i = 0; i < NB; i++) {
        batch *b = xmalloc(sizeof *b + (size_t)B * sizeof(void *));
        b->n = B; b->next = NULL;
        for (long j = 0; j < B; j++) {
            uint64_t tag = rnd(&rs);
            size_t n = size_of(tag);
            b->p[j] = xmalloc(n);
            stamp(b->p[j], n, tag);
            memcpy(b->p[j], &tag, 8);
        }
        atomic_fetch_add(&made, B);
        pthread_mutex_lock(&mu);
        while (queued > 64) pthread_cond_wait(&cv, &mu);   /* bounded queue */
        if (tail) tail->next = b; else head = b;
        tail = b; queued++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    producers_left--;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *consumer(void *a) {
    (void)a;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!head && producers_left > 0) pthread_cond_wait(&cv, &mu);
        batch *b = head;
        if (b) { head = b->next; if (!head) tail = NULL; queued--; pthread_cond_broadcast(&cv); }
        pthread_mutex_unlock(&mu);
        if (!b) return NULL;
        for (long j = 0; j < b->n; j++) {
            uint64_t tag;
            memcpy(&tag, b->p[j], 8);
            if (!stamp_ok(b->p[j], size_of(tag), tag)) FAIL("xmalloc: corrupted block");
            free(b->p[j]);
        }
        atomic_fetch_add(&freed, b->n);
        free(b);
    }
}

int main(int argc, char **argv) {
    long T = arg_l(argc, argv, 1, 2);
    NB = arg_l(argc, argv, 2, 20000); B = arg_l(argc, argv, 3, 64); MAXS = arg_l(argc, argv, 4, 256);
    if (T < 2) T = 2;
    if (MAXS < 32) MAXS = 32;
    long P = T / 2, C = T - P;
    producers_left = P;
    pthread_t *th = calloc((size_t)T, sizeof *th);
    for (long i = 0; i < P; i++) pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)(i + 1));
    for (long i = 0; i < C; i++) pthread_create(&th[P + i], NULL, consumer, NULL);
    for (long i = 0; i < T; i++) pthread_join(th[i], NULL);
    if (made != freed || made != P * NB * B) FAIL("xmalloc: made %ld freed %ld", (long)made, (long)freed);
    free(th);
    return 0;
}
