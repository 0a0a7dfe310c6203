/* smc's view of a model line: the syntax tree the parser builds (parse.c), the composition the
 * checker resolves against the catalogue (check.c), and the diagnostics both print.
 *
 * Positions are 1-based line and column of the source text (a column counts bytes), so a message
 * can quote the source line and put a caret under the offending character. */
#ifndef SMC_MODEL_H
#define SMC_MODEL_H

#include <stddef.h>
#include <stdio.h>
#include "catalogue.h"

#define SMC_MAX_TERMS 32
#define SMC_MAX_ARGS  32
#define SMC_NAME_MAX  64

struct smc_pos {
    unsigned line, col;
    size_t off;
};

enum smc_vkind {
    SMC_V_NONE,   /* a bare key: `thread_cache(sync, …)` */
    SMC_V_NUMBER, /* 40, 64KB, SIZE_MAX (has_unit: written with KB/MB/GB) */
    SMC_V_NAME,   /* a policy name */
    SMC_V_RANGE,  /* [lo, hi] */
    SMC_V_ELIDED  /* the paper's `…` (Figure 1): arguments left out */
};

struct smc_value {
    enum smc_vkind kind;
    struct smc_pos pos;
    unsigned long long num, lo, hi;
    int has_unit, lo_unit, hi_unit;
    int is_size_max, lo_size_max, hi_size_max;
    char name[SMC_NAME_MAX];
    char text[SMC_NAME_MAX]; /* the value as written, blanks removed */
};

struct smc_arg {
    char key[SMC_NAME_MAX];
    struct smc_pos pos;
    struct smc_value val;
};

struct smc_term {
    char name[SMC_NAME_MAX];
    struct smc_pos pos;
    unsigned nargs;
    struct smc_arg args[SMC_MAX_ARGS];
};

struct smc_line {
    const char *src;  /* the whole text, NUL-terminated */
    const char *file; /* for messages: a file name or "line" */
    unsigned nterms;
    struct smc_term terms[SMC_MAX_TERMS];
};

/* Diagnostics: `FILE:LINE:COL: error: MESSAGE`, the source line, a caret under COL. Warnings the
 * same with `warning:`. They go to the stream set by smc_diag_stream (stderr by default). */
void smc_diag_stream(FILE *f);
void smc_error(const struct smc_line *l, struct smc_pos at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void smc_warning(const struct smc_line *l, struct smc_pos at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
unsigned smc_errors(void);
unsigned smc_warnings(void);
void smc_diag_reset(void);

/* Parses src into *out: 0 on success, -1 after printing one error. */
int smc_parse(const char *src, const char *file, struct smc_line *out);

/* The resolved composition: each term's catalogue entry and a value for every key of it. */
struct smc_setting {
    const struct smc_key *key;
    const struct smc_arg *arg;          /* as written; NULL: not written */
    const struct smc_policy *policy;    /* for a slot: the chosen policy (NULL: slot left empty) */
    const char *origin;                 /* "line", "default", "bare key", "neighbour", ... */
    const char *from;                   /* the layer the origin names, if any */
    unsigned long long num, lo, hi;     /* the value of a number, bool or range */
    int set;                            /* has a value (written or taken) to emit */
};

struct smc_elem {
    const struct smc_term *term;
    const struct smc_layer *layer;
    char ident[2 * SMC_NAME_MAX + 8];   /* the C name of this layer instance */
    unsigned nset;
    struct smc_setting set[SMC_MAX_ARGS * 2];
    unsigned long long lo, hi;          /* the sizes it is asked to serve ([0, max] if not given) */
    unsigned long long serves_max;      /* the largest request it serves itself (0: no such bound) */
    int has_range;
};

struct smc_comp {
    const struct smc_line *line;
    int fragment;
    unsigned n;
    struct smc_elem e[SMC_MAX_TERMS];
    const struct smc_elem *socket;      /* NULL: socketless */
};

enum { SMC_CHECK_FULL = 0, SMC_CHECK_FRAGMENT = 1 };
/* Resolves and checks: 0 when no error was printed. name: the instance's C prefix. */
int smc_check(const struct smc_line *l, int mode, const char *name, struct smc_comp *out);

/* Catalogue lookups. NULL when unknown; `near` gets the nearest known name (or ""). */
const struct smc_layer *smc_find_layer(const char *name, const char **near);
const struct smc_policy *smc_find_policy(const char *family, const char *name, const char **near);
const char *smc_cap_name(unsigned cap);
const char *smc_type_name(enum smc_type t);
const char *smc_kind_name(enum smc_kind k);
/* 1 if name equals one of the comma-separated words in list. */
int smc_in_list(const char *name, const char *list);

/* emit.c, explain.c */
void smc_emit(FILE *f, const struct smc_comp *c, const char *name);
void smc_explain(FILE *f, const struct smc_comp *c, const unsigned long long *sizes, unsigned nsizes);
void smc_format_size(char *buf, size_t n, unsigned long long v, int as_size);

#endif
