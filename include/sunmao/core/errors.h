/* Error kinds raised by layers through the `err` policy slot, and the raise signature every
 * error policy implements:  void sm_err_<policy>_raise(sm_err_kind_t, const char *layer,
 * const void *ptr, const char *detail). Framework core. */
#ifndef SUNMAO_CORE_ERRORS_H
#define SUNMAO_CORE_ERRORS_H

typedef enum sm_err_kind {
    SM_ERR_INVALID_FREE,   /* free of a pointer no layer owns */
    SM_ERR_DOUBLE_FREE,    /* free of a block that is already free */
    SM_ERR_CORRUPTION,     /* a checksum or header no longer matches: overflow or use after free */
    SM_ERR_OUT_OF_MEMORY,  /* the OS or the static pool refused memory */
    SM_ERR_BAD_REQUEST,    /* absurd size or alignment */
    SM_ERR_INVALID_POINTER, /* a pointer no layer owns, handed to realloc or malloc_usable_size */
    SM_ERR_KIND_COUNT
} sm_err_kind_t;

static inline const char *sm_err_kind_name(sm_err_kind_t k)
{
    static const char *const names[SM_ERR_KIND_COUNT] = {
        "invalid free", "double free", "heap corruption", "out of memory", "bad request",
        "invalid pointer",
    };
    return (unsigned)k < SM_ERR_KIND_COUNT ? names[k] : "unknown error";
}

#endif
