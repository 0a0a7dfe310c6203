/* smc — the model-language compiler: one line describes an allocator, one command builds it.
 *   smc check   LINE|FILE      is the line valid? (errors and warnings with a caret)
 *   smc explain LINE|FILE      each layer, slot and option with its value, the sizes each serves
 *   smc emit    LINE|FILE      the C composition file the line stands for
 *   smc build   LINE|FILE -o libX.so | libX.a
 *   smc catalogue              every layer, socket and policy the language knows
 * docs/model-language.md is the manual. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "model.h"

#ifndef SMC_VERSION
#define SMC_VERSION "unknown"
#endif
#ifndef SMC_INCLUDEDIR
#define SMC_INCLUDEDIR "/usr/local/include"
#endif
#ifndef SMC_DATADIR
#define SMC_DATADIR "/usr/local/share"
#endif

static const char *prog = "smc";

static void usage_main(FILE *f)
{
    fprintf(f,
            "usage: smc COMMAND [options] LINE|FILE\n\n"
            "The Mortise model language: a line such as\n"
            "  brk_heap::tlsf_glk(sync=ccsynch, size_handle=[0, SIZE_MAX])::malloc_socket\n"
            "names an allocator's layers from the OS layer up to the socket; smc checks, explains,\n"
            "emits and builds it. LINE may also be a FILE holding the line ('-': standard input).\n\n"
            "commands:\n"
            "  check      validate the line; errors and warnings with the position and a caret\n"
            "  explain    each layer, its slots and options with values and defaults, sizes served\n"
            "  emit       the C composition file the line stands for\n"
            "  build      compile it: -o libX.so (drop-in malloc) or -o libX.a / --prefix (prefixed)\n"
            "  catalogue  the layers, sockets and policies, with their keys (--markdown for the docs)\n\n"
            "`smc COMMAND --help` describes each; docs/model-language.md is the manual.\n"
            "  --version  smc's version\n");
}

static const char *help_check =
    "usage: smc check [--fragment | --syntax] [-q] LINE|FILE\n\n"
    "Validates a model line: layer, key and policy names, value types and units, the OS layer first\n"
    "and the socket last, slots left empty, each layer's needs of the layer below it, where secure\n"
    "layers stand, and ranges that can never be reached (a warning). Each problem is one line\n"
    "FILE:LINE:COL: error: ... with the source line and a caret under the position.\n\n"
    "  --fragment  a part of a line: no OS layer or socket needed (`tail_chksum(chk_sum=xor)`,\n"
    "              `malloc_heap::wacet_stat`)\n"
    "  --syntax    the grammar only, names unresolved (the paper's Figure 1 schema A::B(...)::F)\n"
    "  -q          print nothing when the line is valid\n"
    "Exit status: 0 valid (warnings allowed), 1 invalid, 2 bad usage.\n";

static const char *help_explain =
    "usage: smc explain [--fragment] [--sizes LIST] LINE|FILE\n"
    "       smc explain --layer NAME\n\n"
    "Prints the chain from the OS layer up: each layer's kind, header, summary, the sizes it is asked\n"
    "to serve, its capabilities and properties, and every slot and option with its value and where\n"
    "the value comes from (the line, the header's default, a neighbour, the family's default).\n"
    "  --sizes LIST  comma-separated sizes (64, 4KB, 1MB): which layer serves each\n"
    "  --layer NAME  one catalogue entry, with no line\n";

static const char *help_emit =
    "usage: smc emit [--fragment] [--name NAME] [-o FILE] LINE|FILE\n\n"
    "Writes the C composition file of the line (standard output by default): the model line in its\n"
    "head comment, the policies it uses, then one header inclusion per layer. NAME (default smc)\n"
    "prefixes the layers' C names; a line without a socket gets custom_socket, prefix NAME_.\n";

static const char *help_build =
    "usage: smc build -o OUT [--prefix PREFIX] [--name NAME] [-I DIR] [--cc CC] [--keep FILE]\n"
    "                 [--fragment] LINE|FILE\n\n"
    "Compiles the line. OUT ending in .so: a shared library; with malloc_socket it is a drop-in\n"
    "malloc (LD_PRELOAD=OUT). OUT ending in .a, or --prefix: a static library whose functions are\n"
    "PREFIX + malloc, free, ... (custom_socket; PREFIX default NAME_). A line without a socket (such\n"
    "as malloc_heap::wacet_stat) builds as a library to link into a program, with the prefix.\n"
    "  -I DIR     the directory holding sunmao/ headers (default: $SUNMAO_INCLUDE, else beside\n"
    "             smc as installed, else the include directory smc was built for)\n"
    "  --cc CC    the C compiler (default $CC, else cc)\n"
    "  --keep F   keep the emitted C file as F\n"
    "  --name N   the C prefix of the layers (default: from OUT, libX.so -> X)\n";

static const char *help_catalogue =
    "usage: smc catalogue [--markdown]\n\n"
    "Lists every layer, socket and policy the language knows, with each key's type, default and\n"
    "meaning. The list is generated from the headers' own declarations when smc is built.\n"
    "  --markdown  the tables of docs/model-language.md\n";

static char *read_all(FILE *f)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (n + 1 < cap) break;
        if (cap > (1u << 24)) {
            free(buf);
            errno = EFBIG;
            return NULL;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            return NULL;
        }
        buf = nb;
        cap *= 2;
    }
    buf[n] = 0;
    if (strlen(buf) != n) { /* a NUL inside: not text */
        free(buf);
        errno = EINVAL;
        return NULL;
    }
    return buf;
}

/* The line itself, or the text of the file it names. *file gets the name for messages. */
static char *load(const char *arg, const char **file)
{
    struct stat st;
    FILE *f = NULL;
    if (!strcmp(arg, "-")) {
        *file = "<stdin>";
        f = stdin;
    } else if (!strpbrk(arg, ":()[]=\n ") && stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
        *file = arg;
        f = fopen(arg, "r");
        if (!f) {
            fprintf(stderr, "%s: cannot read %s: %s\n", prog, arg, strerror(errno));
            return NULL;
        }
    } else {
        *file = "line";
        return strdup(arg);
    }
    char *text = read_all(f);
    if (!text) fprintf(stderr, "%s: cannot read %s: %s\n", prog, *file, strerror(errno));
    if (f != stdin) fclose(f);
    return text;
}

/* A C identifier from a name: libfoo-bar.so -> foo_bar. */
static void ident_from(const char *s, char *out, size_t n)
{
    const char *base = strrchr(s, '/');
    base = base ? base + 1 : s;
    if (!strncmp(base, "lib", 3) && base[3]) base += 3;
    size_t k = 0;
    for (; *base && *base != '.' && k + 1 < n; base++)
        out[k++] = (char)((*base >= 'a' && *base <= 'z') || (*base >= 'A' && *base <= 'Z') ||
                                  (*base >= '0' && *base <= '9') || *base == '_'
                              ? *base
                              : '_');
    out[k] = 0;
    if (!k || (out[0] >= '0' && out[0] <= '9')) snprintf(out, n, "smc");
}

static int valid_ident(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

static int parse_sizes(const char *list, unsigned long long *out, unsigned max, unsigned *n)
{
    *n = 0;
    char *dup = strdup(list), *save = NULL;
    for (char *w = strtok_r(dup, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        struct smc_line l;
        char text[128];
        snprintf(text, sizeof text, "x(v=%s)", w);
        FILE *null = fopen("/dev/null", "w");
        smc_diag_stream(null);
        int bad = smc_parse(text, "sizes", &l) < 0 || l.terms[0].nargs != 1 || l.terms[0].args[0].val.kind != SMC_V_NUMBER;
        smc_diag_stream(NULL);
        if (null) fclose(null);
        smc_diag_reset();
        if (bad || *n == max) {
            fprintf(stderr, "%s: --sizes: '%s' is not a size (64, 4KB, 1MB, SIZE_MAX)\n", prog, w);
            free(dup);
            return -1;
        }
        out[(*n)++] = l.terms[0].args[0].val.num;
    }
    free(dup);
    return 0;
}

struct opts {
    int fragment, syntax, quiet;
    const char *out, *name, *prefix, *incdir, *cc, *keep, *sizes, *layer;
    const char *input;
    int markdown;
};

static int parse_opts(int argc, char **argv, struct opts *o, const char *cmd, const char *help, const char *allowed)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
#define TAKES_VALUE(flag, field)                                                                        \
    if (!strcmp(a, flag)) {                                                                             \
        if (!strstr(allowed, flag " ")) goto unknown;                                                   \
        if (i + 1 >= argc) {                                                                            \
            fprintf(stderr, "%s %s: option %s needs a value (see smc %s --help)\n", prog, cmd, flag, cmd); \
            return 2;                                                                                   \
        }                                                                                               \
        o->field = argv[++i];                                                                           \
        continue;                                                                                       \
    }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return 0;
        }
#define FLAG(flag, field)                                   \
    if (!strcmp(a, flag)) {                                 \
        if (!strstr(allowed, flag " ")) goto unknown;       \
        o->field = 1;                                       \
        continue;                                           \
    }
        FLAG("--fragment", fragment)
        FLAG("--syntax", syntax)
        FLAG("-q", quiet)
        FLAG("--markdown", markdown)
        TAKES_VALUE("-o", out)
        TAKES_VALUE("--name", name)
        TAKES_VALUE("--prefix", prefix)
        TAKES_VALUE("-I", incdir)
        TAKES_VALUE("--cc", cc)
        TAKES_VALUE("--keep", keep)
        TAKES_VALUE("--sizes", sizes)
        TAKES_VALUE("--layer", layer)
        if (a[0] == '-' && a[1]) {
        unknown:
            fprintf(stderr, "%s %s: unknown option '%s' (see smc %s --help)\n", prog, cmd, a, cmd);
            return 2;
        }
        if (o->input) {
            fprintf(stderr, "%s %s: one line or file only; '%s' is a second (quote a line that has blanks)\n", prog,
                    cmd, a);
            return 2;
        }
        o->input = a;
    }
    return -1;
}

/* Loads, parses and checks o->input; 0 and *c filled when valid. */
static int front_end(const struct opts *o, const char *cmd, const char *name, struct smc_line *l, struct smc_comp *c,
                     char **text)
{
    const char *file;
    if (!o->input) {
        fprintf(stderr, "%s %s: no model line given (see smc %s --help)\n", prog, cmd, cmd);
        return 2;
    }
    *text = load(o->input, &file);
    if (!*text) return 2;
    if (smc_parse(*text, file, l) < 0) return 1;
    if (o->syntax) return 0;
    return smc_check(l, o->fragment ? SMC_CHECK_FRAGMENT : SMC_CHECK_FULL, name, c) < 0 ? 1 : 0;
}

static int cmd_check(int argc, char **argv)
{
    struct opts o = {0};
    int r = parse_opts(argc, argv, &o, "check", help_check, "--fragment --syntax -q ");
    if (r >= 0) return r;
    static struct smc_line l;
    static struct smc_comp c;
    char *text = NULL;
    r = front_end(&o, "check", "smc", &l, &c, &text);
    if (!r && !o.quiet) {
        printf("ok: %u layer%s:", l.nterms, l.nterms == 1 ? "" : "s");
        for (unsigned i = 0; i < l.nterms; i++)
            printf("%s%s", i ? " :: " : " ", o.syntax || !c.e[i].layer ? l.terms[i].name : c.e[i].layer->name);
        printf("%s\n", smc_warnings() ? " (with warnings)" : "");
    }
    free(text);
    return r;
}

static const struct smc_layer *layer_named(const char *name)
{
    const char *near = "";
    const struct smc_layer *L = smc_find_layer(name, &near);
    if (!L) fprintf(stderr, "%s: unknown layer '%s'%s%s%s\n", prog, name, *near ? " (did you mean '" : "", near, *near ? "'?)" : "");
    return L;
}

static int cmd_explain(int argc, char **argv)
{
    struct opts o = {0};
    int r = parse_opts(argc, argv, &o, "explain", help_explain, "--fragment --sizes --layer ");
    if (r >= 0) return r;
    if (o.layer) {
        const struct smc_layer *L = layer_named(o.layer);
        if (!L) return 1;
        /* An entry alone: explained as the one-term fragment of it with no arguments. */
        static struct smc_line l;
        static struct smc_comp c;
        smc_parse(L->name, "catalogue", &l);
        smc_diag_stream(fopen("/dev/null", "w"));
        smc_check(&l, SMC_CHECK_FRAGMENT, "smc", &c);
        smc_diag_stream(NULL);
        c.n = 1;
        c.e[0].layer = L;
        c.e[0].term = &l.terms[0];
        snprintf(c.e[0].ident, sizeof c.e[0].ident, "smc_%s", L->name);
        smc_explain(stdout, &c, NULL, 0);
        return 0;
    }
    unsigned long long sizes[64];
    unsigned nsizes = 0;
    if (o.sizes && parse_sizes(o.sizes, sizes, 64, &nsizes) < 0) return 2;
    static struct smc_line l;
    static struct smc_comp c;
    char *text = NULL;
    r = front_end(&o, "explain", "smc", &l, &c, &text);
    if (!r) smc_explain(stdout, &c, sizes, nsizes);
    free(text);
    return r;
}

static int cmd_emit(int argc, char **argv)
{
    struct opts o = {0};
    int r = parse_opts(argc, argv, &o, "emit", help_emit, "--fragment --name -o ");
    if (r >= 0) return r;
    const char *name = o.name ? o.name : "smc";
    if (!valid_ident(name)) {
        fprintf(stderr, "%s emit: --name '%s' is not a C identifier\n", prog, name);
        return 2;
    }
    static struct smc_line l;
    static struct smc_comp c;
    char *text = NULL;
    r = front_end(&o, "emit", name, &l, &c, &text);
    if (!r) {
        FILE *f = o.out ? fopen(o.out, "w") : stdout;
        if (!f) {
            fprintf(stderr, "%s emit: cannot write %s: %s\n", prog, o.out, strerror(errno));
            r = 2;
        } else {
            smc_emit(f, &c, name);
            if (o.out && fclose(f)) {
                fprintf(stderr, "%s emit: cannot write %s: %s\n", prog, o.out, strerror(errno));
                r = 2;
            }
        }
    }
    free(text);
    return r;
}

/* The headers: -I, $SUNMAO_INCLUDE, beside the executable (bin/../include, as installed; the build
 * tree's BUILD/../include), or the INCLUDEDIR smc was built for. */
static int find_includes(const char *given, char *out, size_t n)
{
    char probe[PATH_MAX + 64];
    const char *env = getenv("SUNMAO_INCLUDE");
    const char *cands[2] = {given, given ? NULL : env};
    for (int k = 0; k < 2; k++) {
        if (!cands[k]) continue;
        snprintf(probe, sizeof probe, "%s/sunmao/core/layer.h", cands[k]);
        if (access(probe, R_OK) == 0) {
            snprintf(out, n, "%s", cands[k]);
            return 0;
        }
        fprintf(stderr, "%s build: no sunmao headers in %s (looked for %s)\n", prog, cands[k], probe);
        return -1;
    }
    char exe[PATH_MAX - 32];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(probe, sizeof probe, "%s/../include/sunmao/core/layer.h", exe);
        if (access(probe, R_OK) == 0) {
            snprintf(out, n, "%s/../include", exe);
            return 0;
        }
    }
    snprintf(probe, sizeof probe, "%s/sunmao/core/layer.h", SMC_INCLUDEDIR);
    if (access(probe, R_OK) == 0) {
        snprintf(out, n, "%s", SMC_INCLUDEDIR);
        return 0;
    }
    fprintf(stderr, "%s build: cannot find the sunmao headers (beside smc or in %s); give -I DIR or SUNMAO_INCLUDE\n",
            prog, SMC_INCLUDEDIR);
    return -1;
}

static int run(char *const *args)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execvp(args[0], args);
        fprintf(stderr, "%s build: cannot run %s: %s\n", prog, args[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The C++ operator shim malloc_socket libraries carry (src/cxx/new_delete.cc): beside smc in the
 * source tree (BUILD/../src/cxx), or installed in DATADIR/sunmao, or beside the headers' prefix. */
static int find_cxx_shim(const char *inc, char *out, size_t n)
{
    char exe[PATH_MAX - 64];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *cands[3][2] = {{NULL, "/../src/cxx/new_delete.cc"},
                               {SMC_DATADIR, "/sunmao/new_delete.cc"},
                               {inc, "/../share/sunmao/new_delete.cc"}};
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        cands[0][0] = exe;
    }
    for (int k = 0; k < 3; k++) {
        if (!cands[k][0]) continue;
        snprintf(out, n, "%s%s", cands[k][0], cands[k][1]);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int cmd_build(int argc, char **argv)
{
    struct opts o = {0};
    int r = parse_opts(argc, argv, &o, "build", help_build, "--fragment --name -o --prefix -I --cc --keep ");
    if (r >= 0) return r;
    if (!o.out) {
        fprintf(stderr, "%s build: give the output with -o libX.so or -o libX.a (see smc build --help)\n", prog);
        return 2;
    }
    int shared = ends_with(o.out, ".so");
    if (!shared && !ends_with(o.out, ".a")) {
        fprintf(stderr, "%s build: -o %s: the output must end in .so (shared) or .a (static)\n", prog, o.out);
        return 2;
    }
    char name[SMC_NAME_MAX];
    if (o.name) {
        if (!valid_ident(o.name)) {
            fprintf(stderr, "%s build: --name '%s' is not a C identifier\n", prog, o.name);
            return 2;
        }
        snprintf(name, sizeof name, "%s", o.name);
    } else {
        ident_from(o.out, name, sizeof name);
    }
    if (o.prefix && !valid_ident(o.prefix)) {
        fprintf(stderr, "%s build: --prefix '%s' is not a C identifier prefix\n", prog, o.prefix);
        return 2;
    }
    static struct smc_line l;
    static struct smc_comp c;
    char *text = NULL;
    r = front_end(&o, "build", name, &l, &c, &text);
    if (r) {
        free(text);
        return r;
    }
    char inc[PATH_MAX + 32];
    if (find_includes(o.incdir, inc, sizeof inc) < 0) {
        free(text);
        return 2;
    }
    char src[PATH_MAX], obj[PATH_MAX];
    if (o.keep) {
        snprintf(src, sizeof src, "%s", o.keep);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(src, sizeof src, "%s/smc-XXXXXX.c", tmp && *tmp ? tmp : "/tmp");
        int fd = mkstemps(src, 2);
        if (fd < 0) {
            fprintf(stderr, "%s build: cannot create a temporary file: %s\n", prog, strerror(errno));
            free(text);
            return 2;
        }
        close(fd);
    }
    FILE *f = fopen(src, "w");
    if (!f) {
        fprintf(stderr, "%s build: cannot write %s: %s\n", prog, src, strerror(errno));
        free(text);
        return 2;
    }
    smc_emit(f, &c, name);
    fclose(f);

    const char *cc = o.cc ? o.cc : getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    char incflag[PATH_MAX + 64], prefixdef[SMC_NAME_MAX + 32];
    snprintf(incflag, sizeof incflag, "-I%s", inc);
    int prefixed = !shared || o.prefix || !c.socket || strcmp(c.socket->layer->name, "malloc_socket");
    snprintf(prefixdef, sizeof prefixdef, "-DSM_PREFIX=%s%s", o.prefix ? o.prefix : name, o.prefix ? "" : "_");
    /* The flags the Makefile builds instances with, so a line and its hand-written instance
     * compile alike (x86-64: jumps kept off 32-byte boundaries, see the Makefile). */
    const char *branch = NULL;
#if defined(__x86_64__)
    branch = strstr(cc, "clang") ? "-mbranches-within-32B-boundaries" : "-Wa,-mbranches-within-32B-boundaries";
#endif
    /* A drop-in library carries the C++ operators too, as a hand-written instance's does: new and
     * delete then pair with this allocator in every form (sized, aligned, nothrow). */
    char shim[PATH_MAX], shim_obj[PATH_MAX + 8];
    shim_obj[0] = 0;
    if (shared && !prefixed) {
        if (find_cxx_shim(inc, shim, sizeof shim) < 0) {
            fprintf(stderr, "%s build: warning: new_delete.cc not found: C++ operators reach this malloc "
                            "through libstdc++ only\n", prog);
        } else {
            const char *cxx = getenv("CXX") && *getenv("CXX") ? getenv("CXX") : strstr(cc, "clang") ? "clang++" : "c++";
            snprintf(shim_obj, sizeof shim_obj, "%s.cxx.o", src);
            char *cargs[] = {(char *)cxx, "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-c", shim, "-o", shim_obj, NULL};
            char *weaken[] = {"objcopy", "--weaken-symbol=__gxx_personality_v0", "--weaken-symbol=__cxa_begin_catch",
                              "--weaken-symbol=__cxa_end_catch", "--weaken-symbol=_ZSt9terminatev", shim_obj, NULL};
            if (run(cargs) || run(weaken)) {
                fprintf(stderr, "%s build: warning: cannot build the C++ operators (%s): C++ reaches this malloc "
                                "through libstdc++ only\n", prog, cxx);
                unlink(shim_obj);
                shim_obj[0] = 0;
            }
        }
    }
    char *args[40];
    int n = 0;
    args[n++] = (char *)cc;
    char *common[] = {"-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-fPIC", "-fvisibility=hidden", "-D_GNU_SOURCE"};
    for (size_t k = 0; k < sizeof common / sizeof common[0]; k++) args[n++] = common[k];
    if (branch) args[n++] = (char *)branch;
    args[n++] = incflag;
    if (prefixed) args[n++] = prefixdef;
    if (shared) {
        args[n++] = "-shared";
        args[n++] = "-static-libgcc";
        args[n++] = "-o";
        args[n++] = (char *)o.out;
        args[n++] = src;
        if (shim_obj[0]) args[n++] = shim_obj;
        args[n++] = "-lpthread";
        args[n++] = "-ldl";
    } else {
        snprintf(obj, sizeof obj, "%s.o", o.out);
        args[n++] = "-c";
        args[n++] = "-o";
        args[n++] = obj;
        args[n++] = src;
    }
    args[n] = NULL;
    r = run(args);
    if (!r && !shared) {
        unlink(o.out);
        char *ar[] = {"ar", "rcs", (char *)o.out, obj, NULL};
        r = run(ar);
        unlink(obj);
    }
    if (!o.keep) unlink(src);
    if (shim_obj[0]) unlink(shim_obj);
    if (r) fprintf(stderr, "%s build: %s failed (status %d)%s\n", prog, cc, r, o.keep ? "" : "; --keep FILE keeps the C file");
    free(text);
    return r ? 1 : 0;
}

/* catalogue.c writes the listing. */
void smc_print_catalogue(FILE *f, int markdown);

static int cmd_catalogue(int argc, char **argv)
{
    struct opts o = {0};
    int r = parse_opts(argc, argv, &o, "catalogue", help_catalogue, "--markdown ");
    if (r >= 0) return r;
    if (o.input) {
        fprintf(stderr, "%s catalogue: takes no line ('%s')\n", prog, o.input);
        return 2;
    }
    smc_print_catalogue(stdout, o.markdown);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage_main(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("smc (sunmao) %s\n", SMC_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!strcmp(cmd, "explain")) return cmd_explain(argc, argv);
    if (!strcmp(cmd, "emit")) return cmd_emit(argc, argv);
    if (!strcmp(cmd, "build")) return cmd_build(argc, argv);
    if (!strcmp(cmd, "catalogue") || !strcmp(cmd, "catalog")) return cmd_catalogue(argc, argv);
    fprintf(stderr, "%s: unknown command '%s' (check, explain, emit, build, catalogue; see smc --help)\n", prog, cmd);
    return 2;
}
