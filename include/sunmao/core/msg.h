/* A tiny printf subset that formats into a caller's buffer: allocator diagnostics must never call
 * malloc (the allocator may be the one that is broken, or not initialised yet). Framework core.
 * Conversions: %s %d %u %zu %zx %p %c %%. */
#ifndef SUNMAO_CORE_MSG_H
#define SUNMAO_CORE_MSG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sm_msgbuf {
    char *buf;
    size_t len, cap; /* cap includes the terminating NUL */
} sm_msgbuf_t;

static inline void sm_msg_putc(sm_msgbuf_t *m, char c)
{
    if (m->len + 1 < m->cap)
        m->buf[m->len++] = c;
}

static inline void sm_msg_puts(sm_msgbuf_t *m, const char *s)
{
    if (!s)
        s = "(null)";
    while (*s)
        sm_msg_putc(m, *s++);
}

static inline void sm_msg_putu(sm_msgbuf_t *m, uintmax_t v, unsigned base)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (n)
        sm_msg_putc(m, tmp[--n]);
}

static inline size_t sm_msg_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
    sm_msgbuf_t m = { buf, 0, cap };
    for (; *fmt; fmt++) {
        if (*fmt != '%') {
            sm_msg_putc(&m, *fmt);
            continue;
        }
        switch (*++fmt) {
        case 's': sm_msg_puts(&m, va_arg(ap, const char *)); break;
        case 'c': sm_msg_putc(&m, (char)va_arg(ap, int)); break;
        case 'd': {
            int v = va_arg(ap, int);
            if (v < 0) {
                sm_msg_putc(&m, '-');
                sm_msg_putu(&m, (uintmax_t)0 - (uintmax_t)(intmax_t)v, 10);
            } else {
                sm_msg_putu(&m, (uintmax_t)v, 10);
            }
            break;
        }
        case 'u': sm_msg_putu(&m, va_arg(ap, unsigned), 10); break;
        case 'z':
            fmt++;
            sm_msg_putu(&m, va_arg(ap, size_t), *fmt == 'x' ? 16 : 10);
            break;
        case 'p':
            sm_msg_puts(&m, "0x");
            sm_msg_putu(&m, (uintptr_t)va_arg(ap, void *), 16);
            break;
        case '%': sm_msg_putc(&m, '%'); break;
        case '\0': fmt--; break;
        default: sm_msg_putc(&m, '?'); break;
        }
    }
    if (cap)
        buf[m.len] = '\0';
    return m.len;
}

static inline size_t sm_msg_format(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = sm_msg_vformat(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

#endif
