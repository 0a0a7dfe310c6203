/* Run-time configuration: the values an operator sets with SUNMAO_CONF (MALLOC_CONF's syntax and,
 * where the meaning is the same, its key names). Framework core.
 *
 * One sm_conf per composition (each composition is one translation unit). It holds the defaults
 * below until sm_conf_init() runs, once, at the socket's start-up, before any layer is created:
 * layers and sockets read sm_conf on their slow paths and in their create hooks, never on a hit path.
 *
 * Sources, read in this order, each pair taking effect at once (so a later source wins a key):
 *   1. the string `const char *sunmao_conf` an application defines (a weak reference here: a
 *      preloaded library sees it only if the executable exports it, e.g. linked with -rdynamic);
 *   2. the name the symbolic link /etc/sunmao.conf points to (its target is never opened);
 *   3. the environment variable SUNMAO_CONF (secure_getenv: ignored in setuid programs).
 * Syntax: `key:value,key:value`; keys [A-Za-z0-9_]+, a value runs to the next comma; booleans are
 * exactly true/false; integers take an optional sign and C's prefixes (0x hex, 0 octal) and must
 * use the whole value. Keys and values are matched whole, never by prefix.
 *
 * Errors, one line each on stderr (the default stays in force for a bad pair):
 *   <sunmao>: Invalid conf pair: KEY:VALUE          the key is unknown
 *   <sunmao>: Invalid conf value: KEY:VALUE         the value does not parse (or overflows)
 *   <sunmao>: Out-of-range conf value: KEY:VALUE    it parses but is outside the key's range
 *   <sunmao>: Malformed conf string -- REST         a pair without a key or ':'  } the rest of
 *   <sunmao>: Conf string ends with key -- REST     a key without ':' at the end } that source
 *   <sunmao>: Conf string ends with comma                                         } is skipped
 * With abort_conf:true, any of them (in any source) ends the process after every source was read:
 *   <sunmao>: Abort (abort_conf:true) on invalid conf value (see above).
 * confirm_conf:true (in any source: a first pass reads only that key) prints each source present as
 *   <sunmao>: conf #N (SOURCE): "STRING"       and each accepted pair as
 *   <sunmao>: -- Set conf value: KEY:VALUE
 *
 * Parsing allocates nothing and calls nothing that may (it runs inside the first malloc, maybe
 * before main): messages are written from a fixed buffer. Core includes no platform header, so the
 * OS services come in a table (sm_conf_io_t); sm_conf_init() is a macro that builds it from the
 * platform's functions where the socket expands it, and tests pass their own table.
 *
 * Values that mean "the composition's own" (SM_CONF_DEFAULT) leave the compiled-in choice of each
 * layer in force; docs/operations.md lists every key, its default and what it changes. */
#ifndef SUNMAO_CORE_CONF_H
#define SUNMAO_CORE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "compiler.h"

/* A signed value left at the composition's compiled-in choice. */
#define SM_CONF_DEFAULT INT64_MIN
/* A decay of -1 (never on time), as milliseconds: far enough that since + 2 x decay cannot wrap. */
#define SM_CONF_DECAY_NEVER ((uint64_t)1 << 60)
#define SM_CONF_DECAY_MAX   ((int64_t)1 << 43) /* ms, about 278 years */

enum { SM_CONF_JUNK_NONE = 0, SM_CONF_JUNK_ALLOC = 1, SM_CONF_JUNK_FREE = 2, SM_CONF_JUNK_ALL = 3 };
enum { SM_CONF_THP_DEFAULT = 0, SM_CONF_THP_ALWAYS = 1, SM_CONF_THP_NEVER = 2 };
enum { SM_CONF_PROF_FORMAT_LEGACY = 0, SM_CONF_PROF_FORMAT_JEMALLOC = 1 };
/* sm_conf.fill: the junk bits as they are, and zero. */
enum { SM_CONF_FILL_ZERO = 4 };

typedef struct sm_conf {
    bool stats_print;            /* print statistics at exit */
    char stats_print_opts[32];   /* jemalloc's letters (J: JSON) */
    unsigned junk;               /* SM_CONF_JUNK_*: fill 0xa5 on alloc, 0x5a on free */
    bool zero;                   /* every allocation zero-filled */
    bool tcache;                 /* thread caches in use */
    int64_t tcache_max;          /* bytes: largest request a thread cache serves (<= its compiled max) */
    int64_t narenas;             /* slab shards (docs/operations.md) */
    int64_t dirty_decay_ms;      /* -1: never purge on time, 0: at once */
    int64_t muzzy_decay_ms;
    bool background_thread;      /* the release clock's thread may run */
    unsigned thp;                /* SM_CONF_THP_* */
    bool retain;                 /* keep virtual memory instead of unmapping it */
    bool prof;                   /* heap profiling compiled in and enabled */
    bool prof_active;            /* sampling on (prof.active) */
    char prof_prefix[256];       /* dump files: <prefix>.<pid>.<seq>.<kind>.heap; "" no automatic dumps */
    int64_t lg_prof_sample;      /* mean bytes between samples: 2^lg_prof_sample */
    int64_t lg_prof_interval;    /* dump every 2^this bytes allocated; -1 off */
    bool prof_gdump;             /* dump on each new high-water mark */
    bool prof_final;             /* dump at exit */
    bool prof_leak;              /* leak summary at exit */
    unsigned prof_format;        /* SM_CONF_PROF_FORMAT_* */
    int64_t guard_sample;        /* guard layers: one eligible request in this many per thread; 0 off */
    bool abort_conf;             /* an invalid pair is fatal */
    bool confirm_conf;           /* print each source and accepted pair */
    /* Derived by sm_conf_init from the keys above (no key of their own): */
    bool tcache_on;              /* tcache, and no fill: a fill must see every block, and a cached
                                  * block never reaches the socket's slow path */
    unsigned fill;               /* junk | SM_CONF_FILL_ZERO when zero: the socket's one test */
} sm_conf_t;

#define SM_CONF_DEFAULTS                                                                               \
    {                                                                                                  \
        .stats_print = false, .stats_print_opts = "", .junk = SM_CONF_JUNK_NONE, .zero = false,        \
        .tcache = true, .tcache_max = SM_CONF_DEFAULT, .narenas = SM_CONF_DEFAULT,                     \
        .dirty_decay_ms = SM_CONF_DEFAULT, .muzzy_decay_ms = SM_CONF_DEFAULT,                          \
        .background_thread = true, .thp = SM_CONF_THP_DEFAULT, .retain = true, .prof = false,          \
        .prof_active = true, .prof_prefix = "sunmao", .lg_prof_sample = 19, .lg_prof_interval = -1,    \
        .prof_gdump = false, .prof_final = false, .prof_leak = false,                                  \
        .prof_format = SM_CONF_PROF_FORMAT_LEGACY, .guard_sample = SM_CONF_DEFAULT,                    \
        .abort_conf = false, .confirm_conf = false,                                                    \
        .tcache_on = true, .fill = 0,                                                                  \
    }

static sm_conf_t sm_conf = SM_CONF_DEFAULTS;

/* The application's string (source 1). Weak: most programs define none, and the reference must
 * then resolve to NULL rather than fail the link. Not in a freestanding build, whose objects must
 * leave nothing for a C library or loader to resolve (tests/build/freestanding.sh). */
#if !(defined(SM_FREESTANDING) && SM_FREESTANDING)
#define SM_CONF_APP_SYMBOL 1
extern const char *sunmao_conf __attribute__((weak));
#else
#define SM_CONF_APP_SYMBOL 0
#endif

/* The OS services parsing needs; the platform's, or a test's. */
typedef struct sm_conf_io {
    const char *(*getenv)(const char *name);                  /* NULL when unset */
    long (*readlink)(const char *path, char *buf, size_t n);  /* bytes stored (no NUL), or -1 */
    void (*write)(const char *s, size_t n);                   /* stderr */
    void (*abort)(void);                                       /* does not return on a platform */
} sm_conf_io_t;

/* ---- Messages: one line each, built in a fixed buffer and flushed when full, so a value of any
 * length is printed whole without allocating. */
typedef struct sm_conf_line {
    const sm_conf_io_t *io;
    size_t n;
    char buf[256];
} sm_conf_line_t;

static inline void sm_conf_put(sm_conf_line_t *l, const char *s, size_t n)
{
    while (n) {
        if (l->n == sizeof l->buf) {
            l->io->write(l->buf, l->n);
            l->n = 0;
        }
        size_t k = sizeof l->buf - l->n < n ? sizeof l->buf - l->n : n;
        memcpy(l->buf + l->n, s, k);
        l->n += k, s += k, n -= k;
    }
}
/* strlen's job, here because a freestanding build has no C library to call. */
static inline size_t sm_conf_len(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}
static inline void sm_conf_puts(sm_conf_line_t *l, const char *s) { sm_conf_put(l, s, sm_conf_len(s)); }
static inline void sm_conf_end(sm_conf_line_t *l)
{
    sm_conf_put(l, "\n", 1);
    l->io->write(l->buf, l->n);
    l->n = 0;
}

/* "<sunmao>: WHAT: KEY:VALUE", or "<sunmao>: WHAT -- REST" (key NULL), or "<sunmao>: WHAT". */
static void sm_conf_say(const sm_conf_io_t *io, const char *what, const char *key, size_t klen, const char *v, size_t vlen)
{
    sm_conf_line_t l;
    l.io = io, l.n = 0;
    sm_conf_puts(&l, "<sunmao>: ");
    sm_conf_puts(&l, what);
    if (key) {
        sm_conf_put(&l, ": ", 2);
        sm_conf_put(&l, key, klen);
        sm_conf_put(&l, ":", 1);
        sm_conf_put(&l, v, vlen);
    } else if (v) {
        sm_conf_put(&l, " -- ", 4);
        sm_conf_put(&l, v, vlen);
    }
    sm_conf_end(&l);
}

/* ---- Values. */

/* A signed integer over the whole of [v, v + n): optional sign, then 0x/0X hex, a leading 0 for
 * octal, or decimal. False when a character is not a digit of the base, there is none, or the value
 * does not fit int64_t (strtoll's ERANGE, which jemalloc reports as an invalid value too). */
static bool sm_conf_int(const char *v, size_t n, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < n && (v[i] == '+' || v[i] == '-'))
        neg = v[i++] == '-';
    unsigned base = 10;
    if (n - i >= 2 && v[i] == '0' && (v[i + 1] == 'x' || v[i + 1] == 'X'))
        base = 16, i += 2;
    else if (n - i >= 2 && v[i] == '0')
        base = 8, i += 1;
    if (i == n)
        return false;
    const uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t acc = 0;
    for (; i < n; i++) {
        char ch = v[i];
        unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                     : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10)
                                              : 99u;
        if (d >= base || acc > (limit - d) / base)
            return false;
        acc = acc * base + d;
    }
    *out = !neg ? (int64_t)acc : acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    return true;
}

static inline bool sm_conf_is(const char *s, size_t n, const char *word)
{
    return sm_conf_len(word) == n && memcmp(s, word, n) == 0;
}

/* ---- Keys: one row each, the field it sets and how its value is read. */
enum { SM_CONF_K_BOOL, SM_CONF_K_INT, SM_CONF_K_STR, SM_CONF_K_CHOICE };

typedef struct sm_conf_key {
    const char *name;
    unsigned char kind;      /* SM_CONF_K_* */
    bool takes_default;      /* an integer key that also accepts the word `default` */
    unsigned short off;      /* offsetof(sm_conf_t, field) */
    unsigned short size;     /* a string field's bytes, its NUL included */
    int64_t min, max;        /* an integer's range */
    const char *choices[5];  /* a choice's words; the field stores the index (the enums above) */
} sm_conf_key_t;

#define SM_CONF_BOOL_KEY(f)           { #f, SM_CONF_K_BOOL, false, offsetof(sm_conf_t, f), 0, 0, 0, { 0 } }
#define SM_CONF_INT_KEY(f, lo, hi)    { #f, SM_CONF_K_INT, false, offsetof(sm_conf_t, f), 0, lo, hi, { 0 } }
#define SM_CONF_STR_KEY(f)            { #f, SM_CONF_K_STR, false, offsetof(sm_conf_t, f), sizeof(((sm_conf_t *)0)->f), 0, 0, { 0 } }
#define SM_CONF_CHOICE_KEY(f, ...)    { #f, SM_CONF_K_CHOICE, false, offsetof(sm_conf_t, f), 0, 0, 0, { __VA_ARGS__ } }

static const sm_conf_key_t sm_conf_keys[] = {
    SM_CONF_BOOL_KEY(stats_print),
    SM_CONF_STR_KEY(stats_print_opts),
    /* indexes are SM_CONF_JUNK_*: none, alloc, free, all */
    SM_CONF_CHOICE_KEY(junk, "false", "alloc", "free", "true"),
    SM_CONF_BOOL_KEY(zero),
    SM_CONF_BOOL_KEY(tcache),
    SM_CONF_INT_KEY(tcache_max, 0, INT64_MAX),
    { "narenas", SM_CONF_K_INT, true, offsetof(sm_conf_t, narenas), 0, 1, 1024, { 0 } },
    SM_CONF_INT_KEY(dirty_decay_ms, -1, SM_CONF_DECAY_MAX),
    SM_CONF_INT_KEY(muzzy_decay_ms, -1, SM_CONF_DECAY_MAX),
    SM_CONF_BOOL_KEY(background_thread),
    SM_CONF_CHOICE_KEY(thp, "default", "always", "never"),
    SM_CONF_BOOL_KEY(retain),
    SM_CONF_BOOL_KEY(prof),
    SM_CONF_BOOL_KEY(prof_active),
    SM_CONF_STR_KEY(prof_prefix),
    SM_CONF_INT_KEY(lg_prof_sample, 0, 63),
    SM_CONF_INT_KEY(lg_prof_interval, -1, 63),
    SM_CONF_BOOL_KEY(prof_gdump),
    SM_CONF_BOOL_KEY(prof_final),
    SM_CONF_BOOL_KEY(prof_leak),
    SM_CONF_CHOICE_KEY(prof_format, "legacy", "jemalloc"),
    { "guard_sample", SM_CONF_K_INT, true, offsetof(sm_conf_t, guard_sample), 0, 0, (int64_t)1 << 30, { 0 } },
    SM_CONF_BOOL_KEY(abort_conf),
    SM_CONF_BOOL_KEY(confirm_conf),
};

/* The message for a bad value, or NULL after storing a good one in conf. */
static const char *sm_conf_set(sm_conf_t *conf, const sm_conf_key_t *k, const char *v, size_t n)
{
    char *field = (char *)conf + k->off;
    switch (k->kind) {
    case SM_CONF_K_BOOL:
        if (!sm_conf_is(v, n, "true") && !sm_conf_is(v, n, "false"))
            return "Invalid conf value";
        *(bool *)field = n == 4;
        return NULL;
    case SM_CONF_K_INT: {
        int64_t x;
        if (k->takes_default && sm_conf_is(v, n, "default")) {
            *(int64_t *)field = SM_CONF_DEFAULT;
            return NULL;
        }
        if (!sm_conf_int(v, n, &x))
            return "Invalid conf value";
        if (x < k->min || x > k->max)
            return "Out-of-range conf value";
        *(int64_t *)field = x;
        return NULL;
    }
    case SM_CONF_K_STR:
        if (n >= k->size)
            return "Out-of-range conf value";
        memcpy(field, v, n);
        field[n] = '\0';
        return NULL;
    default:
        for (unsigned i = 0; i < sizeof k->choices / sizeof k->choices[0] && k->choices[i]; i++)
            if (sm_conf_is(v, n, k->choices[i])) {
                *(unsigned *)field = i;
                return NULL;
            }
        return "Invalid conf value";
    }
}

static inline bool sm_conf_key_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* Applies the pairs of one source s to conf and returns how many errors it reported. first_pass:
 * only confirm_conf is applied, silently (so that confirm_conf in a later source still confirms the
 * earlier ones); otherwise every other key is applied, reported, and confirmed when conf says so.
 * Pure but for io->write: unit tests feed it strings directly. */
static unsigned sm_conf_parse(sm_conf_t *conf, const char *s, bool first_pass, const sm_conf_io_t *io)
{
    unsigned errors = 0;
    const char *p = s;
    while (*p) {
        const char *key = p;
        while (sm_conf_key_char(*p))
            p++;
        size_t klen = (size_t)(p - key);
        if (*p != ':' || !klen) {
            if (!first_pass)
                sm_conf_say(io, *p || !klen ? "Malformed conf string" : "Conf string ends with key", NULL, 0, key,
                            sm_conf_len(key));
            return errors + 1;
        }
        const char *v = ++p;
        while (*p && *p != ',')
            p++;
        size_t vlen = (size_t)(p - v);
        const sm_conf_key_t *k = NULL;
        for (size_t i = 0; i < sizeof sm_conf_keys / sizeof sm_conf_keys[0] && !k; i++)
            if (sm_conf_is(key, klen, sm_conf_keys[i].name))
                k = &sm_conf_keys[i];
        bool is_confirm = k && k->off == offsetof(sm_conf_t, confirm_conf);
        if (first_pass) {
            if (is_confirm)
                (void)sm_conf_set(conf, k, v, vlen);
        } else {
            /* confirm_conf was settled by the first pass over every source: checked here, not
             * applied again, so a later source's value is not undone by an earlier one's. */
            sm_conf_t scratch;
            const char *bad = !k ? "Invalid conf pair" : sm_conf_set(is_confirm ? &scratch : conf, k, v, vlen);
            if (bad) {
                sm_conf_say(io, bad, key, klen, v, vlen);
                errors++;
            } else if (conf->confirm_conf) {
                sm_conf_say(io, "-- Set conf value", key, klen, v, vlen);
            }
        }
        if (*p == ',' && !*++p) {
            if (!first_pass)
                sm_conf_say(io, "Conf string ends with comma", NULL, 0, NULL, 0);
            return errors + 1;
        }
    }
    return errors;
}

/* The sources, in order (see the top). The link's target is kept in a static buffer: this runs once,
 * under the socket's start-up lock, and a large buffer on the first caller's stack could be a
 * small thread's or a signal handler's. */
enum { SM_CONF_SOURCES = 3 };
static const char *const sm_conf_source_names[SM_CONF_SOURCES] = {
    "global variable sunmao_conf",
    "symbolic link /etc/sunmao.conf",
    "environment variable SUNMAO_CONF",
};
static char sm_conf_link[1024];

static void sm_conf_sources(const sm_conf_io_t *io, const char *src[SM_CONF_SOURCES])
{
    src[0] = NULL;
#if SM_CONF_APP_SYMBOL
    const char *const *app = &sunmao_conf; /* NULL when no program defines it */
    src[0] = app ? *app : NULL;
#endif
    long n = io->readlink("/etc/sunmao.conf", sm_conf_link, sizeof sm_conf_link - 1);
    src[1] = NULL;
    if (n >= 0 && (size_t)n < sizeof sm_conf_link - 1) { /* a target that filled the buffer may be cut */
        sm_conf_link[n] = '\0';
        src[1] = sm_conf_link;
    }
    src[2] = io->getenv("SUNMAO_CONF");
}

/* Reads the sources into conf (two passes: confirm_conf, then the rest), derives the fields that
 * have no key, and ends the process through io->abort when abort_conf asks; returns the number of
 * errors (a test's abort may return). */
static unsigned sm_conf_load(sm_conf_t *conf, const sm_conf_io_t *io)
{
    const char *src[SM_CONF_SOURCES];
    sm_conf_sources(io, src);
    for (unsigned i = 0; i < SM_CONF_SOURCES; i++)
        if (src[i])
            (void)sm_conf_parse(conf, src[i], true, io);
    unsigned errors = 0;
    for (unsigned i = 0; i < SM_CONF_SOURCES; i++) {
        if (!src[i])
            continue;
        if (conf->confirm_conf) {
            sm_conf_line_t l;
            char num[2] = { (char)('1' + i), '\0' };
            l.io = io, l.n = 0;
            sm_conf_puts(&l, "<sunmao>: conf #");
            sm_conf_puts(&l, num);
            sm_conf_puts(&l, " (");
            sm_conf_puts(&l, sm_conf_source_names[i]);
            sm_conf_puts(&l, "): \"");
            sm_conf_puts(&l, src[i]);
            sm_conf_puts(&l, "\"");
            sm_conf_end(&l);
        }
        errors += sm_conf_parse(conf, src[i], false, io);
    }
    conf->tcache_on = conf->tcache && !conf->junk && !conf->zero;
    conf->fill = conf->junk | (conf->zero ? (unsigned)SM_CONF_FILL_ZERO : 0u);
    if (errors && conf->abort_conf) {
        sm_conf_say(io, "Abort (abort_conf:true) on invalid conf value (see above).", NULL, 0, NULL, 0);
        io->abort();
    }
    return errors;
}

/* Once per composition: a start-up that failed and is retried must not print its messages twice. */
static bool sm_conf_loaded;
static SM_UNUSED void sm_conf_init_with(const sm_conf_io_t *io)
{
    if (sm_conf_loaded)
        return;
    sm_conf_loaded = true;
    (void)sm_conf_load(&sm_conf, io);
}

/* Expanded in the socket, where the platform is included (core includes none). */
#define sm_conf_init()                                                                                  \
    sm_conf_init_with(&(const sm_conf_io_t){ sm_plat_secure_getenv, sm_plat_readlink, sm_plat_write_stderr, \
                                             sm_plat_abort })

/* ---- For the layers, in their create hooks and slow paths. */

/* The decay a layer uses: its compiled choice unless dirty_decay_ms was set (-1: never). */
static inline SM_UNUSED uint64_t sm_conf_decay_ms(uint64_t compiled)
{
    int64_t v = sm_conf.dirty_decay_ms;
    return v == SM_CONF_DEFAULT ? compiled : v < 0 ? SM_CONF_DECAY_NEVER : (uint64_t)v;
}

/* The CPU shards a layer uses (narenas): its compiled count unless narenas was set, then that,
 * rounded down to a power of two and clipped to the compiled count (the shard arrays are static). */
static inline SM_UNUSED unsigned sm_conf_shards(unsigned compiled)
{
    int64_t v = sm_conf.narenas;
    if (v == SM_CONF_DEFAULT || v < 1 || (uint64_t)v >= compiled)
        return compiled;
    unsigned n = 1;
    while ((int64_t)n * 2 <= v)
        n *= 2;
    return n;
}

/* The largest size a thread cache holds: tcache_max clipped to what the layer was compiled for;
 * stored back, so that what is reported (opt.tcache_max) is what is in force. */
static inline SM_UNUSED size_t sm_conf_tcache_max(size_t compiled)
{
    int64_t v = sm_conf.tcache_max;
    size_t max = v == SM_CONF_DEFAULT || (uint64_t)v > compiled ? compiled : (size_t)v;
    sm_conf.tcache_max = (int64_t)max;
    return max;
}

#endif
