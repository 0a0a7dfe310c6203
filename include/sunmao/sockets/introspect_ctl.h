/* sunmao_mallctl and its name-to-mib and by-mib forms: one table of names (name, type, mode,
 * handler) drives all three, docs/operations.md's table and tests/api/introspect.c's round trip.
 * A part of sockets/introspect_api.h (no include guard: one copy per composition).
 *
 * Semantics and errno returns are mallctl's (jemalloc): 0 or an errno value, errno untouched;
 * ENOENT for an unknown name or index; EINVAL for a wrong newlen, or a wrong *oldlenp (after copying
 * what fits and setting *oldlenp to it); EPERM for a write to a read-only name, a read of a write-only
 * one, and any access with oldp or newp to a void one; EFAULT when an action fails. A name's `#`
 * component is a number (arena.<i>.purge: 0 or 4096, MALLCTL_ARENAS_ALL).
 * Included alone (tools/check-headers.sh), it instantiates the whole socket (libc_api.h).
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_API(n)=t_##n
 * @check-next: fake */
#ifndef SM_INTROSPECT_PARTS
#include "libc_api.h"
#else

enum { SM_CTL_VOID, SM_CTL_BOOL, SM_CTL_SIZE, SM_CTL_U64, SM_CTL_I64, SM_CTL_UNSIGNED, SM_CTL_STR, SM_CTL_U64P };
enum { SM_CTL_R = 1, SM_CTL_W = 2 };
#define SM_CTL_ARENAS_ALL 4096u

/* A handler reads into *v (read) or acts on *v (write, v the new value); idx is the `#` number. */
typedef union {
    bool b;
    size_t z;
    uint64_t u64;
    int64_t i64;
    unsigned u;
    const char *s;
    uint64_t *p;
} sm_ctl_val_t;
typedef int sm_ctl_fn(bool write, sm_ctl_val_t *v, size_t idx);

typedef struct {
    const char *name;
    unsigned type, mode;
    sm_ctl_fn *fn;
} sm_ctl_t;

static const size_t sm_ctl_size[] = { 0, sizeof(bool), sizeof(size_t), sizeof(uint64_t), sizeof(int64_t),
                                      sizeof(unsigned), sizeof(const char *), sizeof(uint64_t *) };

static int sm_ctl_version(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->s = SUNMAO_VERSION_STRING; return 0; }
static int sm_ctl_epoch(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)i;
    if (w)
        sm_intro_refresh();
    else
        v->u64 = __atomic_load_n(&sm_intro_epoch, __ATOMIC_RELAXED);
    return 0;
}
#define SM_CTL_STAT(field)                                                                         \
    static int sm_ctl_stats_##field(bool w, sm_ctl_val_t *v, size_t i)                             \
    {                                                                                              \
        (void)w, (void)i;                                                                          \
        sm_plat_lock(&sm_intro_lock);                                                              \
        v->z = sm_intro_snap.field;                                                                \
        sm_plat_unlock(&sm_intro_lock);                                                            \
        return 0;                                                                                  \
    }
SM_CTL_STAT(allocated)
SM_CTL_STAT(active)
SM_CTL_STAT(metadata)
SM_CTL_STAT(resident)
SM_CTL_STAT(mapped)
SM_CTL_STAT(retained)
#undef SM_CTL_STAT

static int sm_ctl_thread_alloc(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->u64 = sm_stats_thread_bytes[0]; return 0; }
static int sm_ctl_thread_dealloc(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->u64 = sm_stats_thread_bytes[1]; return 0; }
static int sm_ctl_thread_allocp(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->p = &sm_stats_thread_bytes[0]; return 0; }
static int sm_ctl_thread_deallocp(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->p = &sm_stats_thread_bytes[1]; return 0; }

/* The calling thread's cache back to the layers below (the contract's SM_RELEASE_THREAD). */
static int sm_ctl_tcache_flush(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)w, (void)v, (void)i;
    if (sm_socket_ready()) {
        sm_release_t r = sm_release_request(sm_plat_now_ms(), SM_RELEASE_THREAD);
        SM_NEXT_FN(release)(&r);
    }
    return 0;
}
static int sm_ctl_tcache_enabled(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->b = sm_conf.tcache; return 0; }

/* arena.<i>.purge and .decay: everything held free goes back now, as malloc_trim. */
static int sm_ctl_arena_purge(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)w, (void)v;
    if (i != 0 && i != SM_CTL_ARENAS_ALL)
        return ENOENT;
    (void)SM_API(malloc_trim)(0);
    return 0;
}
static int sm_ctl_narenas(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->u = 1; return 0; }
static int sm_ctl_background(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)i;
    if (w)
        sm_conf.background_thread = v->b;
    else
        v->b = sm_conf.background_thread;
    return 0;
}
static int sm_ctl_config_stats(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->b = true; return 0; }
static int sm_ctl_config_prof(bool w, sm_ctl_val_t *v, size_t i) { (void)w, (void)i; v->b = sm_prof_hooks != NULL; return 0; }

/* prof.*: through the profiling layer's hooks; ENOENT without one or with profiling off. */
static const sm_prof_hooks_t *sm_ctl_prof(void) { return sm_conf.prof ? sm_prof_hooks : NULL; }
static int sm_ctl_prof_dump(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)w, (void)i;
    const sm_prof_hooks_t *h = sm_ctl_prof();
    if (!h || !h->dump)
        return ENOENT;
    return h->dump(v->s) ? EFAULT : 0;
}
static int sm_ctl_prof_active(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)i;
    const sm_prof_hooks_t *h = sm_ctl_prof();
    if (!h || !h->active)
        return ENOENT;
    if (!w) {
        v->b = h->active();
        return 0;
    }
    return h->set_active ? h->set_active(v->b) : ENOENT;
}
static int sm_ctl_prof_gdump(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)i;
    const sm_prof_hooks_t *h = sm_ctl_prof();
    if (!h || !h->gdump || !h->set_gdump)
        return ENOENT;
    if (w)
        h->set_gdump(v->b);
    else
        v->b = h->gdump();
    return 0;
}
static int sm_ctl_prof_reset(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)w, (void)i;
    const sm_prof_hooks_t *h = sm_ctl_prof();
    if (!h || !h->reset)
        return ENOENT;
    return h->reset(v ? (int64_t)v->z : -1) ? EFAULT : 0;
}
static int sm_ctl_prof_interval(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)w, (void)i;
    const sm_prof_hooks_t *h = sm_ctl_prof();
    if (!h || !h->interval)
        return ENOENT;
    v->u64 = h->interval();
    return 0;
}

/* opt.<key>: every key of sm_conf_t, read only (strings as const char *). */
#define SM_CTL_OPT(key, member, expr)                                                              \
    static int sm_ctl_opt_##key(bool w, sm_ctl_val_t *v, size_t i)                                 \
    {                                                                                              \
        (void)w, (void)i;                                                                          \
        v->member = (expr);                                                                        \
        return 0;                                                                                  \
    }
SM_CTL_OPT(stats_print, b, sm_conf.stats_print)
SM_CTL_OPT(stats_print_opts, s, sm_conf.stats_print_opts)
SM_CTL_OPT(junk, s, sm_conf.junk == SM_CONF_JUNK_ALL ? "true" : sm_conf.junk == SM_CONF_JUNK_ALLOC ? "alloc"
                    : sm_conf.junk == SM_CONF_JUNK_FREE ? "free" : "false")
SM_CTL_OPT(zero, b, sm_conf.zero)
SM_CTL_OPT(tcache, b, sm_conf.tcache)
SM_CTL_OPT(tcache_max, i64, sm_conf.tcache_max)
SM_CTL_OPT(narenas, i64, sm_conf.narenas)
SM_CTL_OPT(dirty_decay_ms, i64, sm_conf.dirty_decay_ms)
SM_CTL_OPT(muzzy_decay_ms, i64, sm_conf.muzzy_decay_ms)
SM_CTL_OPT(background_thread, b, sm_conf.background_thread)
SM_CTL_OPT(thp, s, sm_conf.thp == SM_CONF_THP_ALWAYS ? "always" : sm_conf.thp == SM_CONF_THP_NEVER ? "never" : "default")
SM_CTL_OPT(retain, b, sm_conf.retain)
SM_CTL_OPT(prof, b, sm_conf.prof)
SM_CTL_OPT(prof_active, b, sm_conf.prof_active)
SM_CTL_OPT(prof_prefix, s, sm_conf.prof_prefix)
SM_CTL_OPT(lg_prof_sample, i64, sm_conf.lg_prof_sample)
SM_CTL_OPT(lg_prof_interval, i64, sm_conf.lg_prof_interval)
SM_CTL_OPT(prof_gdump, b, sm_conf.prof_gdump)
SM_CTL_OPT(prof_final, b, sm_conf.prof_final)
SM_CTL_OPT(prof_leak, b, sm_conf.prof_leak)
SM_CTL_OPT(prof_format, s, sm_conf.prof_format == SM_CONF_PROF_FORMAT_JEMALLOC ? "jemalloc" : "legacy")
SM_CTL_OPT(guard_sample, i64, sm_conf.guard_sample)
SM_CTL_OPT(abort_conf, b, sm_conf.abort_conf)
SM_CTL_OPT(confirm_conf, b, sm_conf.confirm_conf)
#undef SM_CTL_OPT

/* The first-class heaps' totals, read now (not the epoch's snapshot: no layer holds them). */
#define SM_CTL_HEAPS(field)                                                                        \
    static int sm_ctl_heaps_##field(bool w, sm_ctl_val_t *v, size_t i)                             \
    {                                                                                              \
        (void)w, (void)i;                                                                          \
        size_t count, allocated, mapped;                                                           \
        sm_heaps_totals(&count, &allocated, &mapped);                                              \
        v->z = field;                                                                              \
        return 0;                                                                                  \
    }
SM_CTL_HEAPS(count)
SM_CTL_HEAPS(allocated)
SM_CTL_HEAPS(mapped)
#undef SM_CTL_HEAPS

/* The per-CPU caches' mode (platform/rseq.h): decided by the first request a carrcache_rseq layer
 * sees; "off" in a composition without one. */
static int sm_ctl_percpu_mode(bool w, sm_ctl_val_t *v, size_t i)
{
    (void)w, (void)i;
    v->s = sm_rseq_mode_name(__atomic_load_n(&sm_rseq.mode, __ATOMIC_ACQUIRE));
    return 0;
}

#define SM_CTL_OPT_ROW(key, type) { "opt." #key, type, SM_CTL_R, sm_ctl_opt_##key }
static const sm_ctl_t sm_ctl_table[] = {
    { "version", SM_CTL_STR, SM_CTL_R, sm_ctl_version },
    { "epoch", SM_CTL_U64, SM_CTL_R | SM_CTL_W, sm_ctl_epoch },
    { "stats.allocated", SM_CTL_SIZE, SM_CTL_R, sm_ctl_stats_allocated },
    { "stats.active", SM_CTL_SIZE, SM_CTL_R, sm_ctl_stats_active },
    { "stats.metadata", SM_CTL_SIZE, SM_CTL_R, sm_ctl_stats_metadata },
    { "stats.resident", SM_CTL_SIZE, SM_CTL_R, sm_ctl_stats_resident },
    { "stats.mapped", SM_CTL_SIZE, SM_CTL_R, sm_ctl_stats_mapped },
    { "stats.retained", SM_CTL_SIZE, SM_CTL_R, sm_ctl_stats_retained },
    { "thread.allocated", SM_CTL_U64, SM_CTL_R, sm_ctl_thread_alloc },
    { "thread.deallocated", SM_CTL_U64, SM_CTL_R, sm_ctl_thread_dealloc },
    { "thread.allocatedp", SM_CTL_U64P, SM_CTL_R, sm_ctl_thread_allocp },
    { "thread.deallocatedp", SM_CTL_U64P, SM_CTL_R, sm_ctl_thread_deallocp },
    { "thread.tcache.flush", SM_CTL_VOID, 0, sm_ctl_tcache_flush },
    { "thread.tcache.enabled", SM_CTL_BOOL, SM_CTL_R, sm_ctl_tcache_enabled },
    { "arena.#.purge", SM_CTL_VOID, 0, sm_ctl_arena_purge },
    { "arena.#.decay", SM_CTL_VOID, 0, sm_ctl_arena_purge },
    { "arenas.narenas", SM_CTL_UNSIGNED, SM_CTL_R, sm_ctl_narenas },
    { "heaps.count", SM_CTL_SIZE, SM_CTL_R, sm_ctl_heaps_count },
    { "heaps.allocated", SM_CTL_SIZE, SM_CTL_R, sm_ctl_heaps_allocated },
    { "heaps.mapped", SM_CTL_SIZE, SM_CTL_R, sm_ctl_heaps_mapped },
    { "percpu.mode", SM_CTL_STR, SM_CTL_R, sm_ctl_percpu_mode },
    { "background_thread", SM_CTL_BOOL, SM_CTL_R | SM_CTL_W, sm_ctl_background },
    { "config.stats", SM_CTL_BOOL, SM_CTL_R, sm_ctl_config_stats },
    { "config.prof", SM_CTL_BOOL, SM_CTL_R, sm_ctl_config_prof },
    { "prof.dump", SM_CTL_STR, SM_CTL_W, sm_ctl_prof_dump },
    { "prof.active", SM_CTL_BOOL, SM_CTL_R | SM_CTL_W, sm_ctl_prof_active },
    { "prof.gdump", SM_CTL_BOOL, SM_CTL_R | SM_CTL_W, sm_ctl_prof_gdump },
    { "prof.reset", SM_CTL_SIZE, SM_CTL_W, sm_ctl_prof_reset },
    { "prof.interval", SM_CTL_U64, SM_CTL_R, sm_ctl_prof_interval },
    SM_CTL_OPT_ROW(stats_print, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(stats_print_opts, SM_CTL_STR),
    SM_CTL_OPT_ROW(junk, SM_CTL_STR),
    SM_CTL_OPT_ROW(zero, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(tcache, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(tcache_max, SM_CTL_I64),
    SM_CTL_OPT_ROW(narenas, SM_CTL_I64),
    SM_CTL_OPT_ROW(dirty_decay_ms, SM_CTL_I64),
    SM_CTL_OPT_ROW(muzzy_decay_ms, SM_CTL_I64),
    SM_CTL_OPT_ROW(background_thread, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(thp, SM_CTL_STR),
    SM_CTL_OPT_ROW(retain, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(prof, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(prof_active, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(prof_prefix, SM_CTL_STR),
    SM_CTL_OPT_ROW(lg_prof_sample, SM_CTL_I64),
    SM_CTL_OPT_ROW(lg_prof_interval, SM_CTL_I64),
    SM_CTL_OPT_ROW(prof_gdump, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(prof_final, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(prof_leak, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(prof_format, SM_CTL_STR),
    SM_CTL_OPT_ROW(guard_sample, SM_CTL_I64),
    SM_CTL_OPT_ROW(abort_conf, SM_CTL_BOOL),
    SM_CTL_OPT_ROW(confirm_conf, SM_CTL_BOOL),
};
#undef SM_CTL_OPT_ROW
enum { SM_CTL_COUNT = sizeof sm_ctl_table / sizeof sm_ctl_table[0], SM_CTL_MIB_MAX = 4 };

/* Whether a row's name has a numbered component (strchr is not there in a freestanding build). */
static bool sm_ctl_numbered(const char *name)
{
    while (*name && *name != '#')
        name++;
    return *name == '#';
}

/* Splits a dotted name against the table: the row (or -1) and the mib (row, then one number per
 * component: the `#` component's value, 0 for the others). */
SM_SLOWPATH int sm_ctl_lookup(const char *name, size_t *mib, size_t *ncomp)
{
    if (!name)
        return -1;
    for (int row = 0; row < (int)SM_CTL_COUNT; row++) {
        const char *pat = sm_ctl_table[row].name, *p = name;
        size_t n = 1, idx = 0;
        bool ok = true;
        while (ok && *pat) {
            if (*pat == '#') {
                if (*p < '0' || *p > '9')
                    ok = false;
                for (idx = 0; ok && *p >= '0' && *p <= '9'; p++)
                    idx = idx < SIZE_MAX / 10 ? idx * 10 + (size_t)(*p - '0') : SIZE_MAX;
                pat++;
            } else {
                ok = *pat++ == *p++;
            }
        }
        if (!ok || *p)
            continue;
        for (const char *c = sm_ctl_table[row].name; *c; c++)
            n += *c == '.';
        mib[0] = (size_t)row;
        for (size_t k = 1; k < n && k < SM_CTL_MIB_MAX; k++)
            mib[k] = 0;
        if (sm_ctl_numbered(sm_ctl_table[row].name))
            mib[1] = idx; /* `#` is always the second component */
        *ncomp = n < SM_CTL_MIB_MAX ? n : SM_CTL_MIB_MAX;
        return row;
    }
    return -1;
}

SM_SLOWPATH int sm_ctl_do(const sm_ctl_t *e, size_t idx, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    size_t sz = sm_ctl_size[e->type];
    bool reading = oldp != NULL || oldlenp != NULL, writing = newp != NULL || newlen != 0;
    if (e->type == SM_CTL_VOID) {
        if (oldp || newp)
            return EPERM;
        return e->fn(true, NULL, idx);
    }
    if ((reading && !(e->mode & SM_CTL_R) && oldp) || (writing && !(e->mode & SM_CTL_W)))
        return EPERM;
    if (writing && (!newp || newlen != sz))
        return EINVAL;
    sm_ctl_val_t v;
    memset(&v, 0, sizeof v);
    int rc = 0;
    if (oldp && oldlenp) {
        if ((rc = e->fn(false, &v, idx)) != 0)
            return rc;
    }
    if (writing) {
        sm_ctl_val_t nv;
        memset(&nv, 0, sizeof nv);
        memcpy(&nv, newp, sz);
        if ((rc = e->fn(true, &nv, idx)) != 0)
            return rc;
    }
    if (oldp && oldlenp) {
        if (*oldlenp != sz) {
            size_t n = *oldlenp < sz ? *oldlenp : sz;
            memcpy(oldp, &v, n);
            *oldlenp = n;
            return EINVAL;
        }
        memcpy(oldp, &v, sz);
    } else if (oldlenp && !oldp) {
        *oldlenp = sz; /* a size query */
    }
    return 0;
}

SM_EXPORT int SM_API(sunmao_mallctl)(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    size_t mib[SM_CTL_MIB_MAX], n;
    int row = sm_ctl_lookup(name, mib, &n);
    if (row < 0)
        return ENOENT;
    return sm_ctl_do(&sm_ctl_table[row], n > 1 ? mib[1] : 0, oldp, oldlenp, newp, newlen);
}

SM_EXPORT int SM_API(sunmao_mallctlnametomib)(const char *name, size_t *mibp, size_t *miblenp)
{
    size_t mib[SM_CTL_MIB_MAX], n;
    if (!mibp || !miblenp)
        return EINVAL;
    if (sm_ctl_lookup(name, mib, &n) < 0)
        return ENOENT;
    if (*miblenp > n)
        *miblenp = n;
    memcpy(mibp, mib, *miblenp * sizeof *mib);
    return 0;
}

SM_EXPORT int SM_API(sunmao_mallctlbymib)(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp,
                                          size_t newlen)
{
    if (!mib || miblen == 0 || mib[0] >= SM_CTL_COUNT)
        return ENOENT;
    const sm_ctl_t *e = &sm_ctl_table[mib[0]];
    size_t n = 1;
    for (const char *c = e->name; *c; c++)
        n += *c == '.';
    if (miblen != n)
        return ENOENT;
    size_t idx = sm_ctl_numbered(e->name) ? mib[1] : 0;
    if (idx > 0xffffffffu)
        return EFAULT;
    if (sm_ctl_numbered(e->name) && idx != 0 && idx != SM_CTL_ARENAS_ALL)
        return ENOENT;
    return sm_ctl_do(e, idx, oldp, oldlenp, newp, newlen);
}

#endif /* SM_INTROSPECT_PARTS */
