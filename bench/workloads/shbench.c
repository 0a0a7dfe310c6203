/* shbench: LIFO + FIFO mixes of many sizes (sh6bench / sh8bench shapes).
 * Each iteration a thread allocates a batch of blocks of random sizes, frees the newest
 * half in LIFO order, refills it, and then frees the whole batch in FIFO order.
 * mode 8 additionally swaps batches between threads through a mailbox, so the FIFO
 * frees are done by a different thread than the allocating one.
 * usage: shbench 6|8 [threads=2] [iterations=400] [batch=2000] [min=1] [max=1000] */
#include "common.h"

static long T, IT, NB, MIN, MAX;
static int mode8;
typedef struct { void **p; uint32_t *n; uint64_t *tag; } arr;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static arr *mailbox;   /* a single parked batch */
static long mailbox_full;

static arr *new_arr(void) {
    arr *a = xmalloc(sizeof *a);
    a->p = xmalloc((size_t)NB * sizeof(void *));
    a->n = xmalloc((size_t)NB * sizeof(uint32_t));
    a->tag = xmalloc((size_t)NB * sizeof(uint64_t));
    return a;
}
static void fill(arr *a, long from, long to, uint64_t *rs) {
    for (long i = from; i < to; i++) {
        a->n[i] = (uint32_t)rnd_range(rs, MIN, MAX);
        a->tag[i] = rnd(rs);
        a->p[i] = xmalloc(a->n[i]);
        stamp(a->p[i], a->n[i], a->tag[i]);
    }
}
static void release(arr *a, long i) {
    if (!stamp_ok(a->p[i], a->n[i], a->tag[i])) FAIL("shbench: corrupted block");
    free(a->p[i]);
}

static void *work(void *x) {
    uint64_t rs = seed_for((uint64_t)(uintptr_t)x);
    arr *a = new_arr();
    for (long it = 0; it < IT; it++) {
        fill(a, 0, NB, &rs);
        for (long i = NB - 1; i >= NB / 2; i--) release(a, i);   /* LIFO */
        fill(a, NB / 2, NB, &rs);
        if (mode8) {   /* swap with the parked batch, if any */
            pthread_mutex_lock(&mu);
            arr *other = mailbox_full ? mailbox : NULL;
            mailbox = a; mailbox_full = 1;
            if (other) { a = other; mailbox_full = 1; }
            else { mailbox_full = 1; a = NULL; }
            pthread_mutex_unlock(&mu);
            if (!a) { a = new_arr(); continue; }
        }
        for (long i = 0; i < NB; i++) release(a, i);   /* FIFO */
    }
    free(a->p); free(a->n); free(a->tag); free(a);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) FAIL("usage: shbench 6|8 ...");
    mode8 = atoi(argv[1]) == 8;
    T = arg_l(argc, argv, 2, 2); IT = arg_l(argc, argv, 3, 400); NB = arg_l(argc, argv, 4, 2000);
    MIN = arg_l(argc, argv, 5, 1); MAX = arg_l(argc, argv, 6, 1000);
    if (NB < 2) NB = 2;
    pthread_t *th = calloc((size_t)T, sizeof *th);
    for (long i = 0; i < T; i++) pthread_create(&th[i], NULL, work, (void *)(uintptr_t)(i + 1));
    for (long i = 0; i < T; i++) pthread_join(th[i], NULL);
    if (mailbox_full && mailbox) {
        for (long i = 0; i < NB; i++) release(mailbox, i);
        free(mailbox->p); free(mailbox->n); free(mailbox->tag); free(mailbox);
    }
    free(th);
    return 0;
}
