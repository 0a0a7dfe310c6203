/* An err-policy callback for tests that counts what layers report, by kind (thread-safe): install
 * it with sm_err_callback_set(on_error) (policies/err/callback.h), read err_counts[kind] and
 * err_total(), clear with err_reset(); errs holds the last report. */
#ifndef SUNMAO_TESTS_ERR_RECORD_H
#define SUNMAO_TESTS_ERR_RECORD_H

#include <string.h>
#include <sunmao/core/compiler.h>
#include <sunmao/core/errors.h>

static unsigned long err_counts[SM_ERR_KIND_COUNT];
/* The reports since the last memset(&errs, 0, sizeof errs), and the last one's kind, layer,
 * pointer and detail text (cut to 255 bytes): what single-threaded cases check a report against. */
static struct {
    int calls;
    sm_err_kind_t kind;
    const char *layer;
    const void *ptr;
    char detail[256];
} errs;
static void on_error(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    __atomic_add_fetch(&err_counts[kind], 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i + 1 < sizeof errs.detail; i++) { /* byte by byte, atomic: threads may report at once */
        char ch = detail ? detail[i] : 0;
        __atomic_store_n(&errs.detail[i], ch, __ATOMIC_RELAXED);
        if (!ch)
            break;
    }
    __atomic_add_fetch(&errs.calls, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&errs.kind, kind, __ATOMIC_RELAXED);
    __atomic_store_n(&errs.layer, layer, __ATOMIC_RELAXED);
    __atomic_store_n(&errs.ptr, ptr, __ATOMIC_RELAXED);
}
SM_UNUSED static unsigned long err_total(void)
{
    unsigned long n = 0;
    for (int k = 0; k < SM_ERR_KIND_COUNT; k++)
        n += __atomic_load_n(&err_counts[k], __ATOMIC_RELAXED);
    return n;
}
SM_UNUSED static void err_reset(void) { memset(err_counts, 0, sizeof err_counts); }

#endif
