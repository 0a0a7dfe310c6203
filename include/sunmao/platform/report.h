/* The hosted services the introspection API needs (sockets/introspect_api.h): formatting into a
 * caller's buffer, writing to a stdio stream (malloc_info), and glibc's mallinfo structures. A
 * part of the platform layer, included by platform.h. A freestanding build has none of them:
 * SM_PLAT_REPORT is 0 there and the socket exports mallctl only. */
#ifndef SUNMAO_PLATFORM_REPORT_H
#define SUNMAO_PLATFORM_REPORT_H

#if defined(SM_FREESTANDING) && SM_FREESTANDING
#define SM_PLAT_REPORT 0
#else
#define SM_PLAT_REPORT 1
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>

/* glibc's vsnprintf allocates nothing for the conversions the reports use (%s, %zu, %llu, %u). */
static inline void sm_plat_vformat(char *buf, size_t n, const char *fmt, va_list ap) { vsnprintf(buf, n, fmt, ap); }
static inline void sm_plat_fputs(void *stream, const char *s) { fputs(s, (FILE *)stream); }
typedef FILE sm_plat_file_t;
#endif

#endif
