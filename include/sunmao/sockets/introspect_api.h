/* Statistics and introspection over a composed stack: sunmao_stats_print, sunmao_mallctl (with its
 * name-to-mib and by-mib forms), and glibc's malloc_stats, malloc_info, mallinfo2 and mallinfo,
 * answered from the layers' own figures (core/stats.h). Included at the end of libc_api.h, with its
 * SM_API(name): the drop-in build exports sunmao_stats_print, sunmao_mallctl,
 * sunmao_mallctlnametomib, sunmao_mallctlbymib and the glibc names; a prefixed build exports the
 * same names under its prefix (sm_<inst>_sunmao_mallctl, sm_<inst>_mallinfo2, ...). Declarations
 * for programs: <sunmao/introspect.h>. Names, types and output: docs/operations.md.
 *
 * Nothing here allocates: text is formatted into stack buffers (glibc's snprintf allocates nothing
 * for the %s, %zu and %llu conversions used) and handed to the writer a line at a time; the
 * snapshot the stats.* names read is static, refreshed by writing `epoch`. A freestanding build
 * (no stdio: platform/report.h) exports sunmao_mallctl and its forms only.
 * Included alone (tools/check-headers.sh), it instantiates the whole socket (libc_api.h).
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_API(n)=t_##n
 * @check-next: fake */
#ifndef SM_INTROSPECT_PARTS
#include "libc_api.h"
#else
#include <stdarg.h>
#include "../core/conf.h"
#include "../core/prof_hooks.h"
#include "../core/stats.h"
#include "../core/version.h"

/* ---- The snapshot ---- */
static sm_stats_t sm_intro_snap;
static uint64_t sm_intro_epoch;
static sm_plat_lock_t sm_intro_lock = SM_PLAT_LOCK_INIT;

/* A fresh reading of every layer into *s. */
SM_SLOWPATH void sm_intro_read(sm_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->exact = true;
    if (sm_socket_ready())
        SM_NEXT_FN(stats)(s);
    sm_stats_total(s);
}

SM_SLOWPATH void sm_intro_refresh(void)
{
    sm_plat_lock(&sm_intro_lock);
    sm_intro_read(&sm_intro_snap);
    sm_intro_epoch++;
    sm_plat_unlock(&sm_intro_lock);
}

#if SM_PLAT_REPORT
/* ---- Text output ---- */
typedef struct {
    void (*cb)(void *, const char *);
    void *opaque;
} sm_intro_out_t;

static void sm_intro_stderr(void *unused, const char *s)
{
    (void)unused;
    sm_plat_write_stderr(s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void sm_intro_printf(sm_intro_out_t *o, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    sm_plat_vformat(buf, sizeof buf, fmt, ap);
    va_end(ap);
    o->cb(o->opaque, buf);
}

static bool sm_intro_opt(const char *opts, char letter) { return opts && strchr(opts, letter) != NULL; }

/* The first-class heaps the statistics list (sockets/heap/ops.h), guarded by sm_intro_lock. */
#define SM_INTRO_HEAPS_SHOWN 64
static sm_heap_row_t sm_intro_heaps[SM_INTRO_HEAPS_SHOWN];

SM_SLOWPATH void sm_intro_print_text(sm_intro_out_t *o, const sm_stats_t *s, const char *opts)
{
    sm_intro_printf(o, "___ Begin sunmao statistics ___\n");
    if (!sm_intro_opt(opts, 'g'))
        sm_intro_printf(o, "Version: \"%s\"\nLayers: %u\nExact: %s\n", SUNMAO_VERSION_STRING, s->nlayers,
                        s->exact ? "true" : "false");
    sm_intro_printf(o, "Allocated: %zu, active: %zu, metadata: %zu, resident: %zu, mapped: %zu, retained: %zu\n",
                    s->allocated, s->active, s->metadata, s->resident, s->mapped, s->retained);
    if (!sm_intro_opt(opts, 'a')) {
        sm_intro_printf(o, "layers:%26s %14s %14s %14s %12s %12s %14s %14s\n", "in_use", "held", "dirty",
                        "metadata", "blocks", "nmalloc", "nfree", "mapped");
        for (unsigned i = 0; i < s->nlayers; i++) {
            const sm_stats_layer_t *l = &s->layer[i];
            sm_intro_printf(o, "  %-24s %14zu %14zu %14zu %14zu %12zu %12llu %14llu %14zu\n", l->name, l->in_use,
                            l->held, l->dirty, l->metadata, l->blocks, (unsigned long long)l->nmalloc,
                            (unsigned long long)l->nfree, l->mapped);
        }
    }
    if (!sm_intro_opt(opts, 'b') && s->nclasses) {
        sm_intro_printf(o, "bins:%12s %10s %12s %12s %14s %14s\n", "size", "slabs", "live", "tcached", "nmalloc",
                        "nfree");
        for (unsigned i = 0; i < s->nclasses; i++) {
            const sm_stats_class_t *c = &s->cls[i];
            sm_intro_printf(o, "  %15zu %10zu %12zu %12zu %14llu %14llu\n", c->size, c->slabs, c->live, c->cached,
                            (unsigned long long)c->nmalloc, (unsigned long long)c->nfree);
        }
    }
    sm_intro_printf(o, "tcache: threads: %zu, objects: %zu, bytes: %zu\n", s->tcache_threads, s->tcache_objects,
                    s->tcache_bytes);
    if (s->percpu_mode)
        sm_intro_printf(o, "percpu: mode: %s, cpus: %zu, objects: %zu, bytes: %zu\n", s->percpu_mode, s->percpu_slabs,
                        s->percpu_objects, s->percpu_bytes);
    size_t nheaps = sm_intro_opt(opts, 'h') ? 0 : sm_heaps_rows(sm_intro_heaps, SM_INTRO_HEAPS_SHOWN);
    if (nheaps) {
        sm_intro_printf(o, "heaps: %zu\n  %-20s %-6s %14s %14s %12s %14s %12s %12s %8s %8s\n", nheaps, "name", "kind",
                        "allocated", "peak", "blocks", "mapped", "nmalloc", "nfree", "resets", "refused");
        for (size_t i = 0; i < nheaps && i < SM_INTRO_HEAPS_SHOWN; i++) {
            const sm_heap_row_t *r = &sm_intro_heaps[i];
            sm_intro_printf(o, "  %-20s %-6s %14zu %14zu %12zu %14zu %12llu %12llu %8llu %8llu\n",
                            r->name[0] ? r->name : "-", sm_heap_kind_name(r->kind), r->stats.allocated,
                            r->stats.peak_allocated, r->stats.blocks, r->stats.mapped,
                            (unsigned long long)r->stats.allocs, (unsigned long long)r->stats.frees,
                            (unsigned long long)r->stats.resets, (unsigned long long)r->stats.refused);
        }
        if (nheaps > SM_INTRO_HEAPS_SHOWN)
            sm_intro_printf(o, "  (%zu more)\n", nheaps - SM_INTRO_HEAPS_SHOWN);
    }
    sm_intro_printf(o, "--- End sunmao statistics ---\n");
}

/* JSON: names and figures are ours (layer names are C identifiers: nothing to escape). */
SM_SLOWPATH void sm_intro_print_json(sm_intro_out_t *o, const sm_stats_t *s, const char *opts)
{
    sm_intro_printf(o, "{\n\"sunmao\": {\n");
    if (!sm_intro_opt(opts, 'g'))
        sm_intro_printf(o, "\"version\": \"%s\",\n\"config\": {\"stats\": true, \"prof\": %s},\n",
                        SUNMAO_VERSION_STRING, sm_prof_hooks ? "true" : "false");
    sm_intro_printf(o,
                    "\"stats\": {\"allocated\": %zu, \"active\": %zu, \"metadata\": %zu, \"resident\": %zu, "
                    "\"mapped\": %zu, \"retained\": %zu, \"exact\": %s},\n",
                    s->allocated, s->active, s->metadata, s->resident, s->mapped, s->retained,
                    s->exact ? "true" : "false");
    sm_intro_printf(o, "\"layers\": [");
    for (unsigned i = 0; !sm_intro_opt(opts, 'a') && i < s->nlayers; i++) {
        const sm_stats_layer_t *l = &s->layer[i];
        sm_intro_printf(o,
                        "%s\n {\"name\": \"%s\", \"in_use\": %zu, \"held\": %zu, \"dirty\": %zu, \"metadata\": %zu, "
                        "\"blocks\": %zu, \"nmalloc\": %llu, \"nfree\": %llu, \"mapped\": %zu, \"resident\": %zu, "
                        "\"retained\": %zu}",
                        i ? "," : "", l->name, l->in_use, l->held, l->dirty, l->metadata, l->blocks,
                        (unsigned long long)l->nmalloc, (unsigned long long)l->nfree, l->mapped, l->resident,
                        l->retained);
    }
    sm_intro_printf(o, "],\n\"bins\": [");
    for (unsigned i = 0; !sm_intro_opt(opts, 'b') && i < s->nclasses; i++) {
        const sm_stats_class_t *c = &s->cls[i];
        sm_intro_printf(o,
                        "%s\n {\"size\": %zu, \"slabs\": %zu, \"live\": %zu, \"tcached\": %zu, \"nmalloc\": %llu, "
                        "\"nfree\": %llu}",
                        i ? "," : "", c->size, c->slabs, c->live, c->cached, (unsigned long long)c->nmalloc,
                        (unsigned long long)c->nfree);
    }
    sm_intro_printf(o, "],\n\"tcache\": {\"threads\": %zu, \"objects\": %zu, \"bytes\": %zu},\n", s->tcache_threads,
                    s->tcache_objects, s->tcache_bytes);
    sm_intro_printf(o, "\"percpu\": {\"mode\": \"%s\", \"cpus\": %zu, \"objects\": %zu, \"bytes\": %zu},\n\"heaps\": [",
                    s->percpu_mode ? s->percpu_mode : "off", s->percpu_slabs, s->percpu_objects, s->percpu_bytes);
    size_t nheaps = sm_intro_opt(opts, 'h') ? 0 : sm_heaps_rows(sm_intro_heaps, SM_INTRO_HEAPS_SHOWN);
    for (size_t i = 0; i < nheaps && i < SM_INTRO_HEAPS_SHOWN; i++) {
        const sm_heap_row_t *r = &sm_intro_heaps[i];
        /* a name is the program's text: printed only if it needs no escaping */
        bool plain = true;
        for (const char *c = r->name; *c; c++)
            plain &= *c >= 0x20 && *c != '"' && *c != '\\';
        sm_intro_printf(o,
                        "%s\n {\"name\": \"%s\", \"kind\": \"%s\", \"allocated\": %zu, \"peak\": %zu, \"blocks\": %zu, "
                        "\"mapped\": %zu, \"nmalloc\": %llu, \"nfree\": %llu, \"resets\": %llu, \"refused\": %llu}",
                        i ? "," : "", plain ? r->name : "?", sm_heap_kind_name(r->kind), r->stats.allocated,
                        r->stats.peak_allocated, r->stats.blocks, r->stats.mapped, (unsigned long long)r->stats.allocs,
                        (unsigned long long)r->stats.frees, (unsigned long long)r->stats.resets,
                        (unsigned long long)r->stats.refused);
    }
    sm_intro_printf(o, "]\n}\n}\n");
}

/* Prints a fresh reading (not the epoch's snapshot: jemalloc's prints current figures too). */
SM_EXPORT void SM_API(sunmao_stats_print)(void (*write_cb)(void *, const char *), void *opaque, const char *opts)
{
    static sm_stats_t s; /* too large for a small thread stack; guarded by sm_intro_lock */
    sm_intro_out_t o = { write_cb ? write_cb : sm_intro_stderr, write_cb ? opaque : NULL };
    sm_plat_lock(&sm_intro_lock);
    sm_intro_read(&s);
    if (sm_intro_opt(opts, 'J'))
        sm_intro_print_json(&o, &s, opts);
    else
        sm_intro_print_text(&o, &s, opts);
    sm_plat_unlock(&sm_intro_lock);
}

/* stats_print:true (SUNMAO_CONF): at exit, registered once the stack is up. */
static void sm_intro_at_exit(void) { SM_API(sunmao_stats_print)(NULL, NULL, sm_conf.stats_print_opts); }
#include "introspect_glibc.h"
#else
static void sm_intro_at_exit(void) {}
#endif

#include "introspect_ctl.h"

#endif /* SM_INTROSPECT_PARTS */
