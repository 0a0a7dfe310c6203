/* err policy `callback`: hand the error to a function the program registered (tests, fault
 * injection, custom logging). With none registered it reports like `warn`. The callback may
 * return (the layer takes its safe action) or not return (longjmp, abort).
 * @model: name=callback kind=policy family=err */
#ifndef SUNMAO_POLICY_ERR_CALLBACK_H
#define SUNMAO_POLICY_ERR_CALLBACK_H

#include "report.h"

typedef void sm_err_callback_fn(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail);

static sm_err_callback_fn *sm_err_callback_handler;

static inline void sm_err_callback_set(sm_err_callback_fn *fn)
{
    __atomic_store_n(&sm_err_callback_handler, fn, __ATOMIC_RELEASE);
}

static inline void sm_err_callback_raise(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    sm_err_callback_fn *fn = __atomic_load_n(&sm_err_callback_handler, __ATOMIC_ACQUIRE);
    if (fn)
        fn(kind, layer, ptr, detail);
    else
        sm_err_report(kind, layer, ptr, detail);
}

#endif
