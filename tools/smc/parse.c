/* The model language's parser: text to struct smc_line, or one error with its position.
 *
 *   line  := term (join term)* ['.']          join := '::' | ':::' | ':'   (the paper uses all three)
 *   term  := NAME ['(' [arg (',' arg)*] ')']
 *   arg   := KEY ['=' value] | '…' | '...'    a bare KEY: the slot's default policy
 *   value := NUMBER [UNIT] | 'SIZE_MAX' | NAME | '[' value ',' value ']'
 *   UNIT  := B | KB | MB | GB | TB | KiB | MiB | GiB | TiB   (binary: 64KB = 65536)
 * Blanks and line breaks may stand between any two tokens; '#' starts a comment that runs to the
 * end of its line. The paper's text as extracted (and Markdown) writes an underscore as `\_` and the
 * ellipsis as LaTeX's `\dots`: both are read as written in print. docs/model-language.md has the
 * grammar with examples. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "model.h"

static FILE *diag_out;
static unsigned n_errors, n_warnings;

void smc_diag_stream(FILE *f) { diag_out = f; }
unsigned smc_errors(void) { return n_errors; }
unsigned smc_warnings(void) { return n_warnings; }
void smc_diag_reset(void) { n_errors = n_warnings = 0; }

static void diag(const struct smc_line *l, struct smc_pos at, const char *what, const char *fmt, va_list ap)
{
    FILE *f = diag_out ? diag_out : stderr;
    fprintf(f, "%s:%u:%u: %s: ", l->file ? l->file : "line", at.line, at.col, what);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    /* The source line, then a caret under the column (tabs kept so the caret lines up). */
    const char *s = l->src + at.off - (at.col - 1), *e = strchr(s, '\n');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    fprintf(f, "  %.*s\n  ", (int)len, s);
    for (unsigned i = 1; i < at.col; i++) fputc(s[i - 1] == '\t' ? '\t' : ' ', f);
    fputs("^\n", f);
}

void smc_error(const struct smc_line *l, struct smc_pos at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag(l, at, "error", fmt, ap);
    va_end(ap);
    n_errors++;
}

void smc_warning(const struct smc_line *l, struct smc_pos at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag(l, at, "warning", fmt, ap);
    va_end(ap);
    n_warnings++;
}

struct lexer {
    struct smc_line *l;
    const char *s;
    size_t i;
    unsigned line, col;
};

static struct smc_pos here(const struct lexer *x) { return (struct smc_pos){x->line, x->col, x->i}; }

static void advance(struct lexer *x, size_t n)
{
    while (n-- && x->s[x->i]) {
        if (x->s[x->i] == '\n') {
            x->line++;
            x->col = 1;
        } else {
            x->col++;
        }
        x->i++;
    }
}

/* Blanks, line breaks and comment lines. */
static void skip_blank(struct lexer *x)
{
    for (;;) {
        char c = x->s[x->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            advance(x, 1);
        } else if (c == '#') { /* to the end of its line: '#' means nothing else in the language */
            while (x->s[x->i] && x->s[x->i] != '\n') advance(x, 1);
        } else {
            return;
        }
    }
}

static int is_name_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static int is_name_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Bytes of an escaped underscore `\_` at p, else 0. */
static int escaped_underscore(const char *p) { return p[0] == '\\' && p[1] == '_' ? 2 : 0; }

/* Whether the text at the cursor is the word SIZE_MAX (also SIZE\_MAX); its length in bytes. */
static size_t at_size_max(const struct lexer *x)
{
    const char *p = x->s + x->i;
    size_t n = !strncmp(p, "SIZE_MAX", 8) ? 8 : !strncmp(p, "SIZE\\_MAX", 9) ? 9 : 0;
    return n && !is_name_char(p[n]) && !escaped_underscore(p + n) ? n : 0;
}

static int at_ellipsis(const struct lexer *x)
{
    const char *p = x->s + x->i;
    if (!strncmp(p, "\xe2\x80\xa6", 3)) return 3;
    if (!strncmp(p, "...", 3)) return 3;
    if (!strncmp(p, "\\dots", 5) && !isalpha((unsigned char)p[5])) return 5;
    return 0;
}

/* What the character at the cursor is, for "expected X, found Y". */
static void describe(const struct lexer *x, char *buf, size_t n)
{
    unsigned char c = (unsigned char)x->s[x->i];
    if (!c)
        snprintf(buf, n, "the end of the line");
    else if (c == '\n')
        snprintf(buf, n, "a line break");
    else if (c >= 0x80)
        snprintf(buf, n, "a non-ASCII character");
    else if (isprint(c))
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "character 0x%02x", c);
}

static int expected(struct lexer *x, const char *what)
{
    char found[40];
    describe(x, found, sizeof found);
    smc_error(x->l, here(x), "expected %s, found %s", what, found);
    return -1;
}

static int read_name(struct lexer *x, char *out, const char *what)
{
    if (!is_name_start(x->s[x->i]) && !escaped_underscore(x->s + x->i)) return expected(x, what);
    struct smc_pos at = here(x);
    size_t n = 0;
    for (;;) {
        int esc = escaped_underscore(x->s + x->i);
        if (!esc && !is_name_char(x->s[x->i])) break;
        if (n + 1 >= SMC_NAME_MAX) {
            smc_error(x->l, at, "name too long (at most %d characters)", SMC_NAME_MAX - 1);
            return -1;
        }
        out[n++] = esc ? '_' : x->s[x->i];
        advance(x, esc ? 2 : 1);
    }
    out[n] = 0;
    return 0;
}

static const struct {
    const char *name;
    unsigned shift;
} units[] = {{"B", 0},    {"KB", 10},  {"MB", 20},  {"GB", 30},  {"TB", 40},
             {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};

/* A number with an optional unit, or SIZE_MAX. */
static int read_number(struct lexer *x, unsigned long long *v, int *has_unit, int *is_max)
{
    struct smc_pos at = here(x);
    *has_unit = *is_max = 0;
    size_t max_len = at_size_max(x);
    if (max_len) {
        advance(x, max_len);
        *v = SIZE_MAX;
        *is_max = 1;
        return 0;
    }
    if (!isdigit((unsigned char)x->s[x->i])) return expected(x, "a number, a size (64KB) or SIZE_MAX");
    int base = 10;
    if (x->s[x->i] == '0' && (x->s[x->i + 1] == 'x' || x->s[x->i + 1] == 'X') &&
        isxdigit((unsigned char)x->s[x->i + 2])) {
        base = 16;
        advance(x, 2);
    }
    unsigned long long n = 0;
    while (base == 16 ? isxdigit((unsigned char)x->s[x->i]) : isdigit((unsigned char)x->s[x->i])) {
        char c = x->s[x->i];
        unsigned d = isdigit((unsigned char)c) ? (unsigned)(c - '0') : (unsigned)(tolower(c) - 'a' + 10);
        if (n > (ULLONG_MAX - d) / (unsigned)base) {
            smc_error(x->l, at, "number too large (at most %llu)", (unsigned long long)SIZE_MAX);
            return -1;
        }
        n = n * (unsigned)base + d;
        advance(x, 1);
    }
    if (is_name_start(x->s[x->i])) {
        struct smc_pos uat = here(x);
        char unit[SMC_NAME_MAX];
        if (read_name(x, unit, "a unit") < 0) return -1;
        unsigned shift = 99;
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            if (!strcmp(unit, units[k].name)) shift = units[k].shift;
        if (shift == 99) {
            const char *hint = "";
            for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
                if (!strcasecmp(unit, units[k].name)) hint = units[k].name;
            if (*hint)
                smc_error(x->l, uat, "unknown unit '%s' (did you mean '%s'? units: B, KB, MB, GB, TB, binary)", unit, hint);
            else
                smc_error(x->l, uat, "unknown unit '%s' (units: B, KB, MB, GB, TB, binary: 64KB = 65536)", unit);
            return -1;
        }
        if (shift && n > (SIZE_MAX >> shift)) {
            smc_error(x->l, at, "size too large (at most SIZE_MAX bytes)");
            return -1;
        }
        n <<= shift;
        *has_unit = 1;
    }
    if (n > SIZE_MAX) {
        smc_error(x->l, at, "number too large (at most %llu)", (unsigned long long)SIZE_MAX);
        return -1;
    }
    *v = n;
    return 0;
}

static void copy_text(const struct lexer *x, size_t from, char *out)
{
    size_t n = 0;
    for (size_t i = from; i < x->i && n + 1 < SMC_NAME_MAX; i++)
        if (!isspace((unsigned char)x->s[i])) out[n++] = x->s[i];
    out[n] = 0;
}

static int unterminated_range(struct lexer *x, struct smc_pos open)
{
    smc_error(x->l, open, "unterminated range: '[' has no ']'");
    return -1;
}

/* [lo, hi], the cursor on '['. */
static int read_range(struct lexer *x, struct smc_value *v)
{
    struct smc_pos open = here(x);
    advance(x, 1);
    skip_blank(x);
    if (!x->s[x->i]) return unterminated_range(x, open);
    if (read_number(x, &v->lo, &v->lo_unit, &v->lo_size_max) < 0) return -1;
    skip_blank(x);
    if (x->s[x->i] != ',')
        return x->s[x->i] ? expected(x, "',' between the range's bounds ([lo, hi])") : unterminated_range(x, open);
    advance(x, 1);
    skip_blank(x);
    if (!x->s[x->i]) return unterminated_range(x, open);
    if (read_number(x, &v->hi, &v->hi_unit, &v->hi_size_max) < 0) return -1;
    skip_blank(x);
    if (x->s[x->i] != ']') {
        char c = x->s[x->i];
        return !c || c == ')' || c == ',' ? unterminated_range(x, open) : expected(x, "']' closing the range");
    }
    advance(x, 1);
    return 0;
}

static int read_value(struct lexer *x, struct smc_value *v)
{
    size_t from = x->i;
    v->pos = here(x);
    char c = x->s[x->i];
    if (c == '[') {
        if (read_range(x, v) < 0) return -1;
        v->kind = SMC_V_RANGE;
    } else if (isdigit((unsigned char)c) || at_size_max(x)) {
        if (read_number(x, &v->num, &v->has_unit, &v->is_size_max) < 0) return -1;
        v->kind = SMC_V_NUMBER;
    } else if (is_name_start(c) || escaped_underscore(x->s + x->i)) {
        if (read_name(x, v->name, "a value") < 0) return -1;
        v->kind = SMC_V_NAME;
    } else {
        return expected(x, "a value (a number, a size such as 64KB, SIZE_MAX, a policy name or [lo, hi])");
    }
    copy_text(x, from, v->text);
    return 0;
}

static int read_args(struct lexer *x, struct smc_term *t)
{
    struct smc_pos open = here(x);
    advance(x, 1); /* '(' */
    skip_blank(x);
    if (x->s[x->i] == ')') {
        advance(x, 1);
        return 0;
    }
    for (;;) {
        skip_blank(x);
        if (!x->s[x->i]) {
            smc_error(x->l, open, "unterminated argument list: '(' has no ')'");
            return -1;
        }
        if (t->nargs == SMC_MAX_ARGS) {
            smc_error(x->l, here(x), "too many arguments (at most %d)", SMC_MAX_ARGS);
            return -1;
        }
        struct smc_arg *a = &t->args[t->nargs];
        memset(a, 0, sizeof *a);
        a->pos = here(x);
        int e = at_ellipsis(x);
        if (e) {
            advance(x, (size_t)e);
            a->val.kind = SMC_V_ELIDED;
            a->val.pos = a->pos;
            strcpy(a->key, "…");
        } else {
            if (read_name(x, a->key, "a key (such as sync or size_handle) or ')'") < 0) return -1;
            skip_blank(x);
            if (x->s[x->i] == '=') {
                advance(x, 1);
                skip_blank(x);
                if (!x->s[x->i]) {
                    smc_error(x->l, open, "unterminated argument list: '(' has no ')'");
                    return -1;
                }
                if (read_value(x, &a->val) < 0) return -1;
            } else {
                a->val.kind = SMC_V_NONE;
                a->val.pos = a->pos;
            }
        }
        t->nargs++;
        skip_blank(x);
        if (x->s[x->i] == ',') {
            advance(x, 1);
            continue;
        }
        if (x->s[x->i] == ')') {
            advance(x, 1);
            return 0;
        }
        if (!x->s[x->i] || x->s[x->i] == ':') {
            smc_error(x->l, open, "unterminated argument list: '(' has no ')'");
            return -1;
        }
        return expected(x, "',' or ')' after an argument");
    }
}

int smc_parse(const char *src, const char *file, struct smc_line *out)
{
    memset(out, 0, sizeof *out);
    out->src = src;
    out->file = file;
    struct lexer x = {out, src, 0, 1, 1};
    skip_blank(&x);
    if (!src[x.i]) {
        smc_error(out, here(&x), "empty model line: expected a layer name");
        return -1;
    }
    for (;;) {
        if (out->nterms == SMC_MAX_TERMS) {
            smc_error(out, here(&x), "too many layers (at most %d)", SMC_MAX_TERMS);
            return -1;
        }
        struct smc_term *t = &out->terms[out->nterms];
        t->pos = here(&x);
        if (read_name(&x, t->name, out->nterms ? "a layer name after '::'" : "a layer name") < 0) return -1;
        out->nterms++;
        skip_blank(&x);
        if (src[x.i] == '(' && read_args(&x, t) < 0) return -1;
        skip_blank(&x);
        if (src[x.i] == ':') {
            unsigned n = 0;
            while (src[x.i] == ':' && n < 3) {
                advance(&x, 1);
                n++;
            }
            if (src[x.i] == ':') return expected(&x, "a layer name (joins are '::', ':::' or ':')");
            skip_blank(&x);
            continue;
        }
        if (src[x.i] == '.') { /* the sentence's full stop */
            advance(&x, 1);
            skip_blank(&x);
        }
        if (!src[x.i]) return 0;
        return expected(&x, out->nterms ? "'::' between layers, or the end of the line" : "a layer name");
    }
}
