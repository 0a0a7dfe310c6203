/* Fuzzing smc's front end (tests/smc/fuzz.sh): any bytes go through the parser and, when they
 * parse, the checker in both modes, the emitter and the explainer. Asserted beyond "no crash, no
 * sanitizer report": a text that does not parse gets exactly one error; a text that passes the
 * checker produced no error; every position printed lies inside the text (the caret code reads
 * the source at it, so ASan sees a wrong one). With libFuzzer (clang) this is its entry point;
 * built with -DSMC_FUZZ_STANDALONE, main() runs each file named and then random mutations of them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

static FILE *sink(void)
{
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    return f;
}

static void one(const uint8_t *data, size_t size)
{
    if (size > 4096) return;
    char *text = malloc(size + 1);
    if (!text) return;
    memcpy(text, data, size);
    text[size] = 0;
    static struct smc_line line;
    static struct smc_comp comp;
    smc_diag_stream(sink());
    smc_diag_reset();
    if (smc_parse(text, "fuzz", &line) < 0) {
        if (smc_errors() != 1) {
            fprintf(stderr, "fuzz_smc: a parse failure printed %u errors\n", smc_errors());
            abort();
        }
    } else {
        for (int mode = 0; mode < 2; mode++) {
            smc_diag_reset();
            int r = smc_check(&line, mode, "fz", &comp);
            if ((r == 0) != (smc_errors() == 0)) {
                fprintf(stderr, "fuzz_smc: check returned %d with %u errors\n", r, smc_errors());
                abort();
            }
            if (r == 0) {
                static const unsigned long long sizes[] = {0, 16, 4096, 65536, 1ull << 20, ~0ull};
                smc_emit(sink(), &comp, "fz");
                smc_explain(sink(), &comp, sizes, 6);
            }
        }
    }
    smc_diag_stream(NULL);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    return 0;
}

#ifdef SMC_FUZZ_STANDALONE
static const char alphabet[] = ":()[],=._ \n\\0123456789KMGBSIZE_MAXsynclab_slab_lkmmap_heapmalloc_socket\xe2\x80\xa6";

int main(int argc, char **argv)
{
    unsigned long rounds = 20000, seed = 1;
    char *env = getenv("SMC_FUZZ_ROUNDS");
    if (env) rounds = strtoul(env, NULL, 10);
    srandom((unsigned)seed);
    static uint8_t seeds[256][4096];
    static size_t lens[256];
    int n = 0;
    for (int i = 1; i < argc && n < 256; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) continue;
        lens[n] = fread(seeds[n], 1, sizeof seeds[n], f);
        fclose(f);
        one(seeds[n], lens[n]);
        n++;
    }
    if (!n) return 0;
    static uint8_t buf[4096];
    for (unsigned long r = 0; r < rounds; r++) {
        int s = (int)(random() % n);
        size_t len = lens[s];
        memcpy(buf, seeds[s], len);
        int edits = 1 + (int)(random() % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = len ? (size_t)random() % len : 0;
            switch (random() % 4) {
            case 0: if (len) buf[at] = (uint8_t)random(); break;
            case 1: if (len) buf[at] = (uint8_t)alphabet[random() % (sizeof alphabet - 1)]; break;
            case 2: if (len) { memmove(buf + at, buf + at + 1, len - at - 1); len--; } break;
            default:
                if (len < sizeof buf - 1) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = (uint8_t)alphabet[random() % (sizeof alphabet - 1)];
                    len++;
                }
            }
        }
        one(buf, len);
    }
    printf("fuzz_smc: %d seeds, %lu mutations\n", n, rounds);
    return 0;
}
#endif
