/* The one-line report shared by the error policies ..
 *   sunmao: <layer>: <kind> (<ptr>): <detail> */
#ifndef SUNMAO_POLICY_ERR_REPORT_H
#define SUNMAO_POLICY_ERR_REPORT_H

#include "../../core/errors.h"
#include "../../core/msg.h"
#include "../../platform/platform.h"

static inline void sm_err_report(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    char line[384];
    size_t n = sm_msg_format(line, sizeof line, "sunmao: %s: %s (%p)%s%s\n", layer, sm_err_kind_name(kind),
                             ptr, detail && *detail ? ": " : "", detail ? detail : "");
    sm_plat_write_stderr(line, n);
}

#endif
