/* Unit test of the run-time configuration (core/conf.h): every key's accepted values and ranges, each
 * message exactly, the order of the sources, confirm_conf, abort_conf (a fake abort here, the real
 * one in a forked child through the platform's sm_conf_init), the derived fields, and the two keys a
 * thread cache honours, on a real one:
 *     tc :: slab_lk :: fake
 * tcache:false (through the derived tcache_on) leaves a thread nothing cached; tcache_max gives the
 * classes above it no room, and is clipped to the layer's compiled maximum and stored back. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sunmao/core/conf.h>
#include <sunmao/platform/platform.h>
#include <sunmao/policies/err/callback.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#include "tests/support/check.h"
#include "tests/support/layer_calls.h"

#define SM_LAYER fk
#include "tests/support/fake_next.h"
#define SM_LAYER sl
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER sl4
#define SM_NEXT fk
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_OPT_SHARDS 4
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER tc
#define SM_NEXT sl
#define SM_SIZECLASS tc
#define SM_ERR callback
#define SM_SIZE_MAX (8u << 10)
#include <sunmao/layers/addon/thread_cache.h>

LAYER_CALLS(t, tc)
CACHE_BYTES(t, tc)

/* The application's string (source 1): defined here, so the weak reference finds it. */
const char *sunmao_conf;

/* ---- A fake platform: sources from these variables, messages into out, abort counted. */
static const char *env_value, *link_value;
static char out[16384];
static size_t out_len;
static int aborts;

static const char *fake_getenv(const char *name) { return strcmp(name, "SUNMAO_CONF") == 0 ? env_value : NULL; }
static long fake_readlink(const char *path, char *buf, size_t n)
{
    if (strcmp(path, "/etc/sunmao.conf") != 0 || !link_value)
        return -1;
    size_t len = strlen(link_value);
    len = len < n ? len : n;
    memcpy(buf, link_value, len);
    return (long)len;
}
static void fake_write(const char *s, size_t n)
{
    if (out_len + n < sizeof out) {
        memcpy(out + out_len, s, n);
        out_len += n;
        out[out_len] = '\0';
    }
}
static void fake_abort(void) { aborts++; }
static const sm_conf_io_t io = { fake_getenv, fake_readlink, fake_write, fake_abort };

static sm_conf_t conf;
/* One source string through the parser's two passes, from the defaults; its error count. */
static unsigned parse(const char *s)
{
    conf = (sm_conf_t)SM_CONF_DEFAULTS;
    out_len = 0, out[0] = '\0';
    (void)sm_conf_parse(&conf, s, true, &io);
    return sm_conf_parse(&conf, s, false, &io);
}
/* All three sources, as start-up reads them. */
static unsigned load(const char *app, const char *link, const char *env)
{
    sunmao_conf = app, link_value = link, env_value = env;
    conf = (sm_conf_t)SM_CONF_DEFAULTS;
    out_len = 0, out[0] = '\0';
    aborts = 0;
    return sm_conf_load(&conf, &io);
}

#define EXPECT_OUT(text) CHECKF(strcmp(out, text) == 0, "stderr was \"%s\", expected \"%s\"", out, text)

static void defaults_are_documented(void)
{
    sm_conf_t d = SM_CONF_DEFAULTS;
    CHECK(!d.stats_print && d.stats_print_opts[0] == '\0' && d.junk == SM_CONF_JUNK_NONE && !d.zero);
    CHECK(d.tcache && d.tcache_max == SM_CONF_DEFAULT && d.narenas == SM_CONF_DEFAULT);
    CHECK(d.dirty_decay_ms == SM_CONF_DEFAULT && d.muzzy_decay_ms == SM_CONF_DEFAULT);
    CHECK(d.background_thread && d.thp == SM_CONF_THP_DEFAULT && d.retain && !d.prof && d.prof_active);
    CHECK(strcmp(d.prof_prefix, "sunmao") == 0 && d.lg_prof_sample == 19 && d.lg_prof_interval == -1);
    CHECK(!d.prof_gdump && !d.prof_final && !d.prof_leak && d.prof_format == SM_CONF_PROF_FORMAT_LEGACY);
    CHECK(!d.abort_conf && !d.confirm_conf && d.tcache_on && d.fill == 0);
    CHECK(load(NULL, NULL, NULL) == 0 && out_len == 0 && memcmp(&conf, &d, sizeof d) == 0);
}

static void booleans_are_exactly_true_or_false(void)
{
    static const struct { const char *key; size_t off; } keys[] = {
        { "stats_print", offsetof(sm_conf_t, stats_print) },   { "zero", offsetof(sm_conf_t, zero) },
        { "tcache", offsetof(sm_conf_t, tcache) },             { "background_thread", offsetof(sm_conf_t, background_thread) },
        { "retain", offsetof(sm_conf_t, retain) },             { "prof", offsetof(sm_conf_t, prof) },
        { "prof_active", offsetof(sm_conf_t, prof_active) },   { "prof_gdump", offsetof(sm_conf_t, prof_gdump) },
        { "prof_final", offsetof(sm_conf_t, prof_final) },     { "prof_leak", offsetof(sm_conf_t, prof_leak) },
        { "abort_conf", offsetof(sm_conf_t, abort_conf) },     { "confirm_conf", offsetof(sm_conf_t, confirm_conf) },
    };
    char s[128], want[160];
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        for (int v = 0; v < 2; v++) {
            snprintf(s, sizeof s, "%s:%s", keys[i].key, v ? "true" : "false");
            CHECKF(parse(s) == 0 && *(bool *)((char *)&conf + keys[i].off) == (bool)v, "%s", s);
        }
        static const char *const bad[] = { "TRUE", "1", "yes", "", "true ", "tru" };
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            snprintf(s, sizeof s, "%s:%s", keys[i].key, bad[b]);
            bool before = *(bool *)((char *)&(sm_conf_t)SM_CONF_DEFAULTS + keys[i].off);
            CHECKF(parse(s) == 1, "%s accepted", s);
            CHECKF(*(bool *)((char *)&conf + keys[i].off) == before, "%s: the default was not kept", s);
            snprintf(want, sizeof want, "<sunmao>: Invalid conf value: %s\n", s);
            EXPECT_OUT(want);
        }
    }
}

static void choices(void)
{
    CHECK(parse("junk:true") == 0 && conf.junk == SM_CONF_JUNK_ALL);
    CHECK(parse("junk:false") == 0 && conf.junk == SM_CONF_JUNK_NONE);
    CHECK(parse("junk:alloc") == 0 && conf.junk == SM_CONF_JUNK_ALLOC);
    CHECK(parse("junk:free") == 0 && conf.junk == SM_CONF_JUNK_FREE);
    CHECK(parse("junk:allocs") == 1 && conf.junk == SM_CONF_JUNK_NONE);
    EXPECT_OUT("<sunmao>: Invalid conf value: junk:allocs\n");
    CHECK(parse("thp:default") == 0 && conf.thp == SM_CONF_THP_DEFAULT);
    CHECK(parse("thp:always") == 0 && conf.thp == SM_CONF_THP_ALWAYS);
    CHECK(parse("thp:never") == 0 && conf.thp == SM_CONF_THP_NEVER);
    CHECK(parse("thp:Always") == 1);
    EXPECT_OUT("<sunmao>: Invalid conf value: thp:Always\n");
    CHECK(parse("prof_format:jemalloc") == 0 && conf.prof_format == SM_CONF_PROF_FORMAT_JEMALLOC);
    CHECK(parse("prof_format:legacy") == 0 && conf.prof_format == SM_CONF_PROF_FORMAT_LEGACY);
    CHECK(parse("prof_format:pprof") == 1);
    EXPECT_OUT("<sunmao>: Invalid conf value: prof_format:pprof\n");
}

static void integers_and_ranges(void)
{
    CHECK(parse("tcache_max:4096") == 0 && conf.tcache_max == 4096);
    CHECK(parse("tcache_max:0x1000") == 0 && conf.tcache_max == 4096);
    CHECK(parse("tcache_max:0X1f") == 0 && conf.tcache_max == 31);
    CHECK(parse("tcache_max:010") == 0 && conf.tcache_max == 8); /* octal, as strtoll base 0 */
    CHECK(parse("tcache_max:0") == 0 && conf.tcache_max == 0);
    CHECK(parse("tcache_max:+7") == 0 && conf.tcache_max == 7);
    CHECK(parse("tcache_max:9223372036854775807") == 0 && conf.tcache_max == INT64_MAX);
    CHECK(parse("tcache_max:9223372036854775808") == 1 && conf.tcache_max == SM_CONF_DEFAULT);
    EXPECT_OUT("<sunmao>: Invalid conf value: tcache_max:9223372036854775808\n");
    static const char *const bad[] = { "12k", "", "0x", "-", "08", "1 ", " 1", "1.5" };
    char s[64], want[128];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(s, sizeof s, "tcache_max:%s", bad[i]);
        CHECKF(parse(s) == 1 && conf.tcache_max == SM_CONF_DEFAULT, "%s", s);
        snprintf(want, sizeof want, "<sunmao>: Invalid conf value: %s\n", s);
        EXPECT_OUT(want);
    }
    CHECK(parse("tcache_max:-1") == 1);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: tcache_max:-1\n");

    CHECK(parse("narenas:1") == 0 && conf.narenas == 1);
    CHECK(parse("narenas:1024") == 0 && conf.narenas == 1024);
    CHECK(parse("narenas:default") == 0 && conf.narenas == SM_CONF_DEFAULT);
    CHECK(parse("narenas:0") == 1 && conf.narenas == SM_CONF_DEFAULT);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: narenas:0\n");
    CHECK(parse("narenas:1025") == 1);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: narenas:1025\n");

    CHECK(parse("guard_sample:0") == 0 && conf.guard_sample == 0);
    CHECK(parse("guard_sample:1073741824") == 0 && conf.guard_sample == (int64_t)1 << 30);
    CHECK(parse("guard_sample:default") == 0 && conf.guard_sample == SM_CONF_DEFAULT);
    CHECK(parse("guard_sample:1073741825") == 1 && conf.guard_sample == SM_CONF_DEFAULT);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: guard_sample:1073741825\n");
    CHECK(parse("guard_sample:-1") == 1);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: guard_sample:-1\n");

    static const char *const decays[] = { "dirty_decay_ms", "muzzy_decay_ms" };
    for (int k = 0; k < 2; k++) {
        int64_t *field = k ? &conf.muzzy_decay_ms : &conf.dirty_decay_ms;
        snprintf(s, sizeof s, "%s:-1", decays[k]);
        CHECKF(parse(s) == 0 && *field == -1, "%s", s);
        snprintf(s, sizeof s, "%s:0", decays[k]);
        CHECKF(parse(s) == 0 && *field == 0, "%s", s);
        snprintf(s, sizeof s, "%s:10000", decays[k]);
        CHECKF(parse(s) == 0 && *field == 10000, "%s", s);
        snprintf(s, sizeof s, "%s:-2", decays[k]);
        CHECKF(parse(s) == 1 && *field == SM_CONF_DEFAULT, "%s", s);
        snprintf(want, sizeof want, "<sunmao>: Out-of-range conf value: %s\n", s);
        EXPECT_OUT(want);
    }
    CHECK(parse("lg_prof_sample:0") == 0 && conf.lg_prof_sample == 0);
    CHECK(parse("lg_prof_sample:63") == 0 && conf.lg_prof_sample == 63);
    CHECK(parse("lg_prof_sample:64") == 1 && conf.lg_prof_sample == 19);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: lg_prof_sample:64\n");
    CHECK(parse("lg_prof_sample:-1") == 1);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: lg_prof_sample:-1\n");
    CHECK(parse("lg_prof_interval:-1") == 0 && conf.lg_prof_interval == -1);
    CHECK(parse("lg_prof_interval:30") == 0 && conf.lg_prof_interval == 30);
    CHECK(parse("lg_prof_interval:63") == 0 && conf.lg_prof_interval == 63);
    CHECK(parse("lg_prof_interval:64") == 1 && conf.lg_prof_interval == -1);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: lg_prof_interval:64\n");
    CHECK(parse("lg_prof_interval:-2") == 1);
    EXPECT_OUT("<sunmao>: Out-of-range conf value: lg_prof_interval:-2\n");
}

static void strings_fit_their_fields(void)
{
    CHECK(parse("stats_print_opts:Jmda") == 0 && strcmp(conf.stats_print_opts, "Jmda") == 0);
    CHECK(parse("prof_prefix:/tmp/app:x") == 0 && strcmp(conf.prof_prefix, "/tmp/app:x") == 0);
    CHECK(parse("prof_prefix:") == 0 && conf.prof_prefix[0] == '\0'); /* no automatic dumps */
    char s[600], want[700];
    snprintf(s, sizeof s, "stats_print_opts:%031d", 0);
    CHECK(parse(s) == 0 && strlen(conf.stats_print_opts) == 31);
    snprintf(s, sizeof s, "stats_print_opts:%032d", 0);
    CHECK(parse(s) == 1 && conf.stats_print_opts[0] == '\0');
    snprintf(want, sizeof want, "<sunmao>: Out-of-range conf value: %s\n", s);
    EXPECT_OUT(want);
    memcpy(s, "prof_prefix:", 12);
    memset(s + 12, 'p', 255);
    s[12 + 255] = '\0';
    CHECK(parse(s) == 0 && strlen(conf.prof_prefix) == 255);
    memset(s + 12, 'p', 256);
    s[12 + 256] = '\0';
    CHECK(parse(s) == 1 && strcmp(conf.prof_prefix, "sunmao") == 0);
    snprintf(want, sizeof want, "<sunmao>: Out-of-range conf value: %s\n", s);
    EXPECT_OUT(want); /* longer than the message buffer: printed whole all the same */
}

static void unknown_keys_and_prefixes(void)
{
    CHECK(parse("nope:1") == 1);
    EXPECT_OUT("<sunmao>: Invalid conf pair: nope:1\n");
    CHECK(parse("zer:true") == 1 && !conf.zero); /* never matched by prefix */
    EXPECT_OUT("<sunmao>: Invalid conf pair: zer:true\n");
    CHECK(parse("zeroo:true") == 1 && !conf.zero);
    CHECK(parse("lg_tcache_max:10") == 1);
    EXPECT_OUT("<sunmao>: Invalid conf pair: lg_tcache_max:10\n");
    /* A bad pair is reported and skipped; the pairs around it still count. */
    CHECK(parse("zero:true,nope:,junk:free") == 1 && conf.zero && conf.junk == SM_CONF_JUNK_FREE);
    EXPECT_OUT("<sunmao>: Invalid conf pair: nope:\n");
    CHECK(parse("") == 0 && out_len == 0);
}

static void syntax_errors_stop_the_source(void)
{
    CHECK(parse("zero:true,bad key:1,junk:true") == 1 && conf.zero && conf.junk == SM_CONF_JUNK_NONE);
    EXPECT_OUT("<sunmao>: Malformed conf string -- bad key:1,junk:true\n");
    CHECK(parse(":1") == 1);
    EXPECT_OUT("<sunmao>: Malformed conf string -- :1\n");
    CHECK(parse("zero=true") == 1 && !conf.zero);
    EXPECT_OUT("<sunmao>: Malformed conf string -- zero=true\n");
    CHECK(parse("zero:true,junk") == 1 && conf.zero);
    EXPECT_OUT("<sunmao>: Conf string ends with key -- junk\n");
    CHECK(parse("zero:true,") == 1 && conf.zero);
    EXPECT_OUT("<sunmao>: Conf string ends with comma\n");
    CHECK(parse("zero:true,,junk:true") == 1 && conf.junk == SM_CONF_JUNK_NONE);
    EXPECT_OUT("<sunmao>: Malformed conf string -- ,junk:true\n");
}

static void sources_in_order(void)
{
    /* app < link < env, pair by pair: a later source wins a key it names, and only that key. */
    CHECK(load("junk:true,zero:true,narenas:4", "narenas:8,thp:never", "zero:false") == 0);
    CHECK(conf.junk == SM_CONF_JUNK_ALL && !conf.zero && conf.narenas == 8 && conf.thp == SM_CONF_THP_NEVER);
    CHECK(out_len == 0);
    CHECK(load("tcache:false", NULL, "tcache:true") == 0 && conf.tcache);
    CHECK(load("tcache:false", NULL, NULL) == 0 && !conf.tcache);
    CHECK(load(NULL, "dirty_decay_ms:0", "dirty_decay_ms:-1") == 0 && conf.dirty_decay_ms == -1);
    /* A syntax error ends only its own source. */
    CHECK(load("zero:true,oops", NULL, "junk:alloc") == 1 && conf.zero && conf.junk == SM_CONF_JUNK_ALLOC);
    EXPECT_OUT("<sunmao>: Conf string ends with key -- oops\n");
}

static void confirm_conf_prints_sources_and_pairs(void)
{
    /* Set in the last source, it still confirms the first (the first pass reads only that key). */
    CHECK(load("junk:alloc", "thp:never", "confirm_conf:true,nope:1") == 1);
    EXPECT_OUT("<sunmao>: conf #1 (global variable sunmao_conf): \"junk:alloc\"\n"
               "<sunmao>: -- Set conf value: junk:alloc\n"
               "<sunmao>: conf #2 (symbolic link /etc/sunmao.conf): \"thp:never\"\n"
               "<sunmao>: -- Set conf value: thp:never\n"
               "<sunmao>: conf #3 (environment variable SUNMAO_CONF): \"confirm_conf:true,nope:1\"\n"
               "<sunmao>: -- Set conf value: confirm_conf:true\n"
               "<sunmao>: Invalid conf pair: nope:1\n");
    /* A later false wins over an earlier true, in both passes. */
    CHECK(load("confirm_conf:true", NULL, "confirm_conf:false,zero:true") == 0 && !conf.confirm_conf && conf.zero);
    CHECK(out_len == 0);
    CHECK(load(NULL, NULL, "confirm_conf:maybe") == 1 && !conf.confirm_conf);
    EXPECT_OUT("<sunmao>: Invalid conf value: confirm_conf:maybe\n");
}

static void abort_conf_after_every_source(void)
{
    CHECK(load("nope:1", NULL, "abort_conf:true") == 1 && aborts == 1);
    EXPECT_OUT("<sunmao>: Invalid conf pair: nope:1\n"
               "<sunmao>: Abort (abort_conf:true) on invalid conf value (see above).\n");
    CHECK(load(NULL, NULL, "abort_conf:true,zero:true,") == 1 && aborts == 1);
    EXPECT_OUT("<sunmao>: Conf string ends with comma\n"
               "<sunmao>: Abort (abort_conf:true) on invalid conf value (see above).\n");
    CHECK(load("abort_conf:true", NULL, "zero:true") == 0 && aborts == 0 && out_len == 0);
    CHECK(load("abort_conf:true", NULL, "abort_conf:false,nope:1") == 1 && aborts == 0);
    EXPECT_OUT("<sunmao>: Invalid conf pair: nope:1\n");
}

/* The real thing: the platform's sm_conf_init in a child, SUNMAO_CONF from the environment, stderr
 * into a pipe; the child must die of SIGABRT after the two lines. */
static void abort_conf_aborts_the_process(void)
{
    if (access("/etc/sunmao.conf", F_OK) == 0 || readlink("/etc/sunmao.conf", (char[8]){ 0 }, 8) >= 0) {
        check_skip("abort_conf_aborts_the_process", "/etc/sunmao.conf exists on this machine");
        return;
    }
    int fd[2];
    CHECK(pipe(fd) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        sunmao_conf = NULL;
        setenv("SUNMAO_CONF", "abort_conf:true,nope:1", 1);
        signal(SIGABRT, SIG_DFL);
        sm_conf_init();
        _exit(0); /* not reached when it works */
    }
    close(fd[1]);
    char buf[512];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %#x", status);
    CHECKF(strcmp(buf, "<sunmao>: Invalid conf pair: nope:1\n"
                       "<sunmao>: Abort (abort_conf:true) on invalid conf value (see above).\n") == 0,
           "stderr: \"%s\"", buf);
}

static void derived_fields(void)
{
    CHECK(load(NULL, NULL, "") == 0 && conf.tcache_on && conf.fill == 0);
    CHECK(load(NULL, NULL, "tcache:false") == 0 && !conf.tcache_on && conf.fill == 0);
    CHECK(load(NULL, NULL, "junk:alloc") == 0 && !conf.tcache_on && conf.fill == SM_CONF_JUNK_ALLOC && conf.tcache);
    CHECK(load(NULL, NULL, "junk:free") == 0 && !conf.tcache_on && conf.fill == SM_CONF_JUNK_FREE);
    CHECK(load(NULL, NULL, "zero:true") == 0 && !conf.tcache_on && conf.fill == SM_CONF_FILL_ZERO);
    CHECK(load(NULL, NULL, "junk:true,zero:true") == 0 && conf.fill == (SM_CONF_JUNK_ALL | SM_CONF_FILL_ZERO));
}

static void decay_for_layers(void)
{
    sm_conf.dirty_decay_ms = SM_CONF_DEFAULT;
    CHECK(sm_conf_decay_ms(250) == 250);
    sm_conf.dirty_decay_ms = 0;
    CHECK(sm_conf_decay_ms(250) == 0);
    sm_conf.dirty_decay_ms = 5000;
    CHECK(sm_conf_decay_ms(250) == 5000);
    sm_conf.dirty_decay_ms = -1;
    CHECK(sm_conf_decay_ms(250) == SM_CONF_DECAY_NEVER);
    sm_conf.dirty_decay_ms = SM_CONF_DEFAULT;
}

/* ---- The thread cache: each scenario on a thread of its own, which starts on the empty cache. */
static size_t cached_after[2];
static void *cache_two_sizes(void *unused)
{
    (void)unused;
    void *a = t_malloc(64), *b = t_malloc(1024);
    memset(a, 1, 64), memset(b, 2, 1024);
    t_free(a);
    cached_after[0] = t_cached_bytes();
    t_free(b);
    cached_after[1] = t_cached_bytes() - cached_after[0];
    tc_thread_exit();
    return NULL;
}
static void run_thread(void)
{
    pthread_t th;
    pthread_create(&th, NULL, cache_two_sizes, NULL);
    pthread_join(th, NULL);
}

static void tcache_false_caches_nothing(void)
{
    sm_conf = (sm_conf_t)SM_CONF_DEFAULTS;
    CHECK(tc_create() == 0);
    run_thread();
    CHECKF(cached_after[0] >= 64 && cached_after[1] >= 1024, "with the cache: %zu, %zu bytes cached",
           cached_after[0], cached_after[1]);
    sm_conf.tcache_on = false; /* what tcache:false (or junk, or zero) derives */
    run_thread();
    CHECKF(cached_after[0] == 0 && cached_after[1] == 0, "tcache:false: %zu, %zu bytes cached", cached_after[0],
           cached_after[1]);
    sm_conf = (sm_conf_t)SM_CONF_DEFAULTS;
}

/* narenas: the CPU shards slab_lk spreads requests over, rounded down to a power of two and
 * clipped to the compiled SM_OPT_SHARDS (4 here); read at create. */
static unsigned shard_of_cpu(int cpu)
{
    sm_mctx_t c = sm_mctx_alloc(64, 16, 0);
    c.cpu = cpu;
    return sl4_shard_here(sm_sizeclass_tc_size_to_class(64), &c);
}
static void narenas_sets_the_shards(void)
{
    static const struct { const char *conf; unsigned live; } want[] = {
        { "", 4 }, { "narenas:1", 1 }, { "narenas:2", 2 }, { "narenas:3", 2 }, { "narenas:64", 4 }, { "narenas:default", 4 },
    };
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECKF(parse(want[i].conf) == 0, "%s: %s", want[i].conf, out);
        sm_conf = conf;
        CHECK(sl4_create() == 0);
        CHECKF(sl4_shards_live == want[i].live, "%s: %u shards, want %u", want[i].conf, sl4_shards_live, want[i].live);
        for (int cpu = 0; cpu < 8; cpu++)
            CHECKF(shard_of_cpu(cpu) == (unsigned)cpu % want[i].live, "%s: cpu %d -> shard %u", want[i].conf, cpu,
                   shard_of_cpu(cpu));
    }
    sm_conf = (sm_conf_t)SM_CONF_DEFAULTS;
}

static void tcache_max_limits_classes(void)
{
    sm_conf = (sm_conf_t)SM_CONF_DEFAULTS;
    sm_conf.tcache_max = 256;
    CHECK(tc_create() == 0);
    CHECK(sm_conf.tcache_max == 256);
    run_thread();
    CHECKF(cached_after[0] >= 64 && cached_after[1] == 0, "tcache_max:256: %zu, %zu bytes cached", cached_after[0],
           cached_after[1]);
    /* Above the compiled maximum: clipped, and the clipped value is what is reported. */
    sm_conf.tcache_max = (int64_t)1 << 40;
    CHECK(tc_create() == 0);
    CHECKF(sm_conf.tcache_max == 8192, "tcache_max reads %lld", (long long)sm_conf.tcache_max);
    run_thread();
    CHECK(cached_after[0] >= 64 && cached_after[1] >= 1024);
    sm_conf.tcache_max = SM_CONF_DEFAULT;
    CHECK(tc_create() == 0 && sm_conf.tcache_max == 8192);
    sm_conf = (sm_conf_t)SM_CONF_DEFAULTS;
}

int main(void)
{
    check_begin("conf");
    RUN_CASE(defaults_are_documented);
    RUN_CASE(booleans_are_exactly_true_or_false);
    RUN_CASE(choices);
    RUN_CASE(integers_and_ranges);
    RUN_CASE(strings_fit_their_fields);
    RUN_CASE(unknown_keys_and_prefixes);
    RUN_CASE(syntax_errors_stop_the_source);
    RUN_CASE(sources_in_order);
    RUN_CASE(confirm_conf_prints_sources_and_pairs);
    RUN_CASE(abort_conf_after_every_source);
    RUN_CASE(abort_conf_aborts_the_process);
    RUN_CASE(derived_fields);
    RUN_CASE(decay_for_layers);
    RUN_CASE(tcache_false_caches_nothing);
    RUN_CASE(tcache_max_limits_classes);
    RUN_CASE(narenas_sets_the_shards);
    return check_end();
}
