/* errno for the allocator: the C library's, or in a freestanding build (SM_FREESTANDING=1: bare
 * metal over sheap, no libc) a variable of the allocator's own, so layers report ENOMEM/EINVAL the
 * same way everywhere. Framework core. */
#ifndef SUNMAO_CORE_ERRNUM_H
#define SUNMAO_CORE_ERRNUM_H

#if defined(SM_FREESTANDING) && SM_FREESTANDING
static int sm_errno_value;
#define errno  sm_errno_value
#define ENOMEM 12
#define EINVAL 22
#define ENOENT 2  /* Linux's values: the introspection API returns them (sockets/introspect_ctl.h) */
#define EPERM  1
#define EFAULT 14
#else
#include <errno.h>
#endif

#endif
