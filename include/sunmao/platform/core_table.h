/* The core table: for each CPU, the size of its level-2 cache, so that per-thread state can follow
 * the core a thread runs on (hybrid CPUs give their core types different caches). Platform layer.
 *
 * Built once, at start-up or a layer's first slow path: from the environment variable
 * SUNMAO_CORE_CACHE when set (a list of CPU ranges and sizes, "0-3:2M,4-7:1M,8:512K"; a CPU it does
 * not name keeps what the platform says), else from the platform (sm_plat_cpu_cache_bytes: sysfs on
 * Linux). The variable is there so identical cores can be told apart in tests, and so an operator
 * can correct a kernel that reports nothing. A malformed entry is reported once on stderr and the
 * rest of the list is ignored. Sizes are kept in KiB; CPUs at or beyond the table's length share
 * entries (cpu modulo the length). */
#ifndef SUNMAO_PLATFORM_CORE_TABLE_H
#define SUNMAO_PLATFORM_CORE_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include "../core/compiler.h"
#include "platform.h"

/* Parses "<cpu>[-<cpu>]:<size>[K|M]" entries separated by commas into kib[0..n); false at the
 * first malformed entry (entries before it are kept). */
static inline bool sm_core_table_parse(const char *s, uint32_t *kib, unsigned n)
{
    while (*s) {
        unsigned long lo = 0, hi, size = 0;
        if (*s < '0' || *s > '9')
            return false;
        for (; *s >= '0' && *s <= '9'; s++)
            lo = lo * 10 + (unsigned long)(*s - '0');
        hi = lo;
        if (*s == '-') {
            s++;
            if (*s < '0' || *s > '9')
                return false;
            for (hi = 0; *s >= '0' && *s <= '9'; s++)
                hi = hi * 10 + (unsigned long)(*s - '0');
        }
        if (*s++ != ':' || *s < '0' || *s > '9' || hi < lo)
            return false;
        for (; *s >= '0' && *s <= '9'; s++)
            size = size * 10 + (unsigned long)(*s - '0');
        if (*s == 'M')
            size <<= 10, s++;
        else if (*s == 'K')
            s++;
        else
            size = (size + 1023) >> 10; /* bytes */
        if (*s && *s++ != ',')
            return false;
        for (unsigned long cpu = lo; cpu <= hi && cpu < n; cpu++)
            kib[cpu] = (uint32_t)size;
    }
    return true;
}

/* Fills kib[0..n) for CPUs 0..n-1; returns the largest entry (0: nothing known). */
SM_SLOWPATH SM_UNUSED uint32_t sm_core_table_build(uint32_t *kib, unsigned n)
{
    for (unsigned cpu = 0; cpu < n; cpu++) {
        size_t bytes = sm_plat_cpu_cache_bytes((int)cpu);
        kib[cpu] = (uint32_t)(bytes >> 10);
        if (!bytes && cpu > 0)
            break; /* past the last CPU the kernel lists: the rest stay 0 */
    }
    const char *env = sm_plat_getenv("SUNMAO_CORE_CACHE");
    if (env && !sm_core_table_parse(env, kib, n)) {
        static const char warning[] =
            "sunmao: SUNMAO_CORE_CACHE: malformed entry (want cpu[-cpu]:size[K|M],...); the rest is ignored\n";
        sm_plat_write_stderr(warning, sizeof warning - 1);
    }
    uint32_t max = 0;
    for (unsigned cpu = 0; cpu < n; cpu++)
        max = kib[cpu] > max ? kib[cpu] : max;
    return max;
}

#endif
