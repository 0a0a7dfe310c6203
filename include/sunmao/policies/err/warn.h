/* err policy `warn`: report on stderr and continue; the layer then takes its documented safe
 * action (an invalid or double free is ignored, a corrupted block is not reused).
 * Every err policy P provides
 *   void sm_err_P_raise(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
 * (paper §2.2 (5)); it returns only if the policy lets the program continue.
 * @model: name=warn kind=policy family=err alias=default */
#ifndef SUNMAO_POLICY_ERR_WARN_H
#define SUNMAO_POLICY_ERR_WARN_H

#include "report.h"

static inline void sm_err_warn_raise(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    sm_err_report(kind, layer, ptr, detail);
}

#endif
