/* The one-line report shared by the error policies ..
 *   sunmao: <layer>: <kind> (<ptr>): <detail> */
#ifndef SUNMAO_POLICY_ERR_REPORT_H
#define SUNMAO_POLICY_ERR_REPORT_H

#include "../../core/errors.h"
#include "../../core/msg.h"
#if defined(SM_FREESTANDING) && SM_FREESTANDING
/* Bare metal: the program says where diagnostics go (a UART, a log buffer). */
void sm_diag_write(const char *s, size_t n);
#else
#include "../../os/prim.h"
#define sm_diag_write sm_os_write_stderr
#endif

static inline void sm_err_report(sm_err_kind_t kind, const char *layer, const void *ptr, const char *detail)
{
    char line[256];
    size_t n = sm_msg_format(line, sizeof line, "sunmao: %s: %s (%p)%s%s\n", layer, sm_err_kind_name(kind),
                             ptr, detail && *detail ? ": " : "", detail ? detail : "");
    sm_diag_write(line, n);
}

#endif
