/* How the socket's introspection (sunmao_mallctl's prof.* names) reaches a heap-profiling layer,
 * when the composition has one. Framework core.
 *
 * The profiling layer (layers/addon/prof.h) sets sm_prof_hooks in its create hook; a composition
 * without one leaves it NULL, and the prof.* names answer ENOENT, as jemalloc's do when profiling is
 * compiled out. One pointer per composition (each composition is one translation unit). */
#ifndef SUNMAO_CORE_PROF_HOOKS_H
#define SUNMAO_CORE_PROF_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sm_prof_hooks {
    int (*dump)(const char *path);     /* write a profile now (NULL: the automatic name); 0 or an errno */
    bool (*active)(void);              /* sampling on? */
    int (*set_active)(bool on);        /* 0, or ENOENT when profiling is not enabled (prof:false) */
    bool (*gdump)(void);               /* dump on each new high-water mark? */
    void (*set_gdump)(bool on);
    int (*reset)(int64_t lg_sample);   /* forget every sample; a new rate (-1: keep); 0 or an errno */
    uint64_t (*interval)(void);        /* bytes between interval dumps, 0 when off */
} sm_prof_hooks_t;

static const sm_prof_hooks_t *sm_prof_hooks;

#endif
