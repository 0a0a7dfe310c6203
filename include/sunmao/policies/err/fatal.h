/* err policy `fatal`: report on stderr and abort, for hardened builds where continuing after heap
 * corruption would hand an attacker a primitive. Running out of memory is not fatal here: it is a
 * defined result (NULL + ENOMEM) that the caller handles.
 * @model: name=fatal kind=policy family=err */
#ifndef SUNMAO_POLICY_ERR_FATAL_H
#define SUNMAO_POLICY_ERR_FATAL_H

#include "report.h"

static inline void sm_err_fatal_raise(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    sm_err_report(kind, layer, ptr, detail);
    if (kind != SM_ERR_OUT_OF_MEMORY)
        sm_plat_abort();
}

#endif
