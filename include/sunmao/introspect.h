/* sunmao's statistics and introspection, for programs (installed as <sunmao/introspect.h>).
 * The drop-in libraries (lib<name>.so) export these names; a prefixed build (libsm_<name>.a)
 * exports them as sm_<name>_sunmao_stats_print, ... Names, types and output: docs/operations.md,
 * "Statistics and introspection". The glibc calls malloc_stats, malloc_info, mallinfo2 and
 * mallinfo are declared by <malloc.h>; the drop-in libraries answer them from their own state. */
#ifndef SUNMAO_INTROSPECT_H
#define SUNMAO_INTROSPECT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Text (jemalloc's layout, sunmao's names) or, with 'J' in opts, JSON; write_cb NULL: stderr. */
void sunmao_stats_print(void (*write_cb)(void *, const char *), void *opaque, const char *opts);
/* mallctl's contract: 0 or an errno value (ENOENT, EINVAL, EPERM, EFAULT). */
int sunmao_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
int sunmao_mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp);
int sunmao_mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

/* arena.<i>.purge's <i> for every arena (sunmao has one). */
#define SUNMAO_ARENAS_ALL 4096

#ifdef __cplusplus
}
#endif
#endif
