/* Resolving a parsed line against the catalogue, and every check the language makes: names, value
 * types and units, the order of OS layer, layers and socket, slots left empty, capabilities each
 * layer needs of the one below it, where secure layers stand, and ranges that can never be reached.
 * Each problem is one error (or warning) at its position; checking goes on past an error so a
 * line's problems are all reported at once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

int smc_in_list(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static unsigned edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    unsigned d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            unsigned best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The nearest of the candidates seen so far, if near enough to be a likely misspelling. */
struct nearest {
    const char *want, *best;
    unsigned dist;
};

static void consider(struct nearest *n, const char *cand)
{
    unsigned d = edit_distance(n->want, cand);
    size_t len = strlen(n->want);
    unsigned limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    if (d <= limit && d < n->dist) {
        n->dist = d;
        n->best = cand;
    }
}

/* Each word of a comma-separated list, for consider(). */
static void consider_list(struct nearest *n, const char *list)
{
    char word[SMC_NAME_MAX];
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len < sizeof word) {
            memcpy(word, p, len);
            word[len] = 0;
            struct nearest tmp = {n->want, NULL, 99};
            consider(&tmp, word);
            if (tmp.best && tmp.dist < n->dist) {
                n->dist = tmp.dist;
                n->best = p; /* points into the list: trimmed by the caller's %.*s */
            }
        }
        if (!e) break;
        p = e + 1;
    }
}

static const char *nearest_text(const struct nearest *n, char *buf, size_t size)
{
    if (!n->best) return "";
    size_t len = strcspn(n->best, ",");
    snprintf(buf, size, "%.*s", (int)len, n->best);
    return buf;
}

const struct smc_layer *smc_find_layer(const char *name, const char **near)
{
    static char buf[SMC_NAME_MAX];
    struct nearest n = {name, NULL, 99};
    for (unsigned i = 0; i < smc_nlayers; i++) {
        if (!strcmp(smc_layers[i].name, name) || smc_in_list(name, smc_layers[i].aliases)) return &smc_layers[i];
        consider(&n, smc_layers[i].name);
        consider_list(&n, smc_layers[i].aliases);
    }
    if (near) *near = nearest_text(&n, buf, sizeof buf);
    return NULL;
}

const struct smc_policy *smc_find_policy(const char *family, const char *name, const char **near)
{
    static char buf[SMC_NAME_MAX];
    struct nearest n = {name, NULL, 99};
    for (unsigned i = 0; i < smc_npolicies; i++) {
        const struct smc_policy *p = &smc_policies[i];
        if (strcmp(p->family, family)) continue;
        if (!strcmp(p->name, name) || smc_in_list(name, p->aliases)) return p;
        consider(&n, p->name);
        consider_list(&n, p->aliases);
    }
    if (near) *near = nearest_text(&n, buf, sizeof buf);
    return NULL;
}

/* The paper's spellings of slot names, for every layer with the slot (§4.1 writes err_handle and
 * chk_sum; Figure 3 chksum). */
static const char *slot_spelling(const char *name)
{
    if (!strcmp(name, "err_handle")) return "err";
    if (!strcmp(name, "chk_sum")) return "chksum";
    return name;
}

static const struct smc_key *find_key(const struct smc_layer *L, const char *name, const char **near)
{
    static char buf[SMC_NAME_MAX];
    struct nearest n = {name, NULL, 99};
    const char *slot = slot_spelling(name);
    for (unsigned i = 0; i < L->nkeys && slot != name; i++)
        if (L->keys[i].type == SMC_T_POLICY && !strcmp(L->keys[i].name, slot)) return &L->keys[i];
    for (unsigned i = 0; i < L->nkeys; i++) {
        if (!strcmp(L->keys[i].name, name) || smc_in_list(name, L->keys[i].paper)) return &L->keys[i];
        consider(&n, L->keys[i].name);
        consider_list(&n, L->keys[i].paper);
    }
    if (near) *near = nearest_text(&n, buf, sizeof buf);
    return NULL;
}

const char *smc_cap_name(unsigned cap)
{
    switch (cap) {
    case SMC_CAP_HIT: return "HIT";
    case SMC_CAP_BATCH: return "BATCH";
    case SMC_CAP_OWNER: return "OWNER";
    case SMC_CAP_MAPPING: return "MAPPING";
    case SMC_CAP_STABLE: return "STABLE";
    case SMC_CAP_MOVE: return "MOVE";
    default: return "?";
    }
}

const char *smc_type_name(enum smc_type t)
{
    switch (t) {
    case SMC_T_INT: return "an integer";
    case SMC_T_SIZE: return "a size";
    case SMC_T_BOOL: return "1 or 0";
    case SMC_T_POLICY: return "a policy";
    case SMC_T_RANGE: return "a range [lo, hi]";
    }
    return "?";
}

const char *smc_kind_name(enum smc_kind k)
{
    switch (k) {
    case SMC_OS: return "OS layer";
    case SMC_CORE: return "core layer";
    case SMC_ADDON: return "add-on layer";
    case SMC_SOCKET: return "socket";
    case SMC_POLICY: return "policy";
    }
    return "?";
}

/* The policies of a family, for messages: "spinlock, mutex, ...". */
static const char *family_list(const char *family)
{
    static char buf[512];
    size_t n = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < smc_npolicies && n + 40 < sizeof buf; i++)
        if (!strcmp(smc_policies[i].family, family))
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? ", " : "", smc_policies[i].name);
    return buf;
}

/* What a slot left empty (or given as a bare key) takes when its header gives no default.
 * No paper line names an err policy: warn (the paper's `default`) reports and goes on. */
static const char *family_default(const char *family)
{
    if (!strcmp(family, "err")) return "warn";
    if (!strcmp(family, "chksum")) return "xor";
    if (!strcmp(family, "sync")) return "spinlock";
    if (!strcmp(family, "retain")) return "keep_last";
    if (!strcmp(family, "reclaim")) return "none";
    return NULL;
}

static struct smc_setting *setting_for(struct smc_elem *e, const struct smc_key *k)
{
    for (unsigned i = 0; i < e->nset; i++)
        if (e->set[i].key == k) return &e->set[i];
    return NULL;
}

static void value_error(const struct smc_line *l, const struct smc_arg *a, const struct smc_key *k,
                        const char *layer)
{
    const struct smc_value *v = &a->val;
    const char *given = v->kind == SMC_V_RANGE ? "a range" : v->kind == SMC_V_NAME ? "a name" : "a number";
    if (k->type == SMC_T_POLICY)
        smc_error(l, v->pos, "%s's key '%s' takes a %s policy (%s), not %s", layer, a->key, k->family,
                  family_list(k->family), given);
    else
        smc_error(l, v->pos, "%s's key '%s' takes %s, not %s '%s'", layer, a->key, smc_type_name(k->type), given,
                  v->text);
}

/* One written argument: its value checked against the key's type. */
static void take_arg(const struct smc_line *l, struct smc_elem *e, const struct smc_arg *a)
{
    const struct smc_layer *L = e->layer;
    const char *near = "";
    if (a->val.kind == SMC_V_ELIDED) {
        smc_error(l, a->pos, "'…' stands for arguments left out (the paper's Figure 1); write them, or check "
                             "the line with --syntax");
        return;
    }
    const struct smc_key *k = find_key(L, a->key, &near);
    if (!k) {
        if (!strcmp(a->key, "size_handle"))
            smc_error(l, a->pos, "%s takes no size_handle: it serves every size it is asked for", L->name);
        else if (*near)
            smc_error(l, a->pos, "unknown key '%s' for %s (did you mean '%s'?)", a->key, L->name, near);
        else if (L->nkeys)
            smc_error(l, a->pos, "unknown key '%s' for %s (its keys: smc explain --layer %s)", a->key, L->name, L->name);
        else
            smc_error(l, a->pos, "unknown key '%s': %s takes no arguments", a->key, L->name);
        return;
    }
    struct smc_setting *s = setting_for(e, k);
    if (s) {
        smc_error(l, a->pos, "%s's key '%s' is given twice (first at column %u)", L->name, a->key, s->arg->pos.col);
        return;
    }
    s = &e->set[e->nset++];
    memset(s, 0, sizeof *s);
    s->key = k;
    s->arg = a;
    s->origin = "line";
    const struct smc_value *v = &a->val;
    switch (k->type) {
    case SMC_T_POLICY:
        if (v->kind == SMC_V_NONE) {
            /* A bare key: the slot's default — its header's, else the family's. */
            const char *d = *k->deflt ? k->deflt : family_default(k->family);
            if (!d && !strcmp(k->family, "sizeclass")) {
                e->nset--; /* as if left out: the nearest layer's classes (fill_slots) */
                return;
            }
            if (!d) {
                smc_error(l, a->pos, "%s's slot '%s' has no default policy: write %s=<%s>", L->name, a->key,
                          a->key, family_list(k->family));
                return;
            }
            s->policy = smc_find_policy(k->family, d, NULL);
            s->origin = "bare key: the slot's default";
            s->set = s->policy != NULL;
            return;
        }
        if (v->kind != SMC_V_NAME) {
            value_error(l, a, k, L->name);
            return; /* kept unset: the slot is not reported empty as well */
        }
        s->policy = smc_find_policy(k->family, v->name, &near);
        if (!s->policy) {
            if (*near)
                smc_error(l, v->pos, "unknown %s policy '%s' (did you mean '%s'?)", k->family, v->name, near);
            else
                smc_error(l, v->pos, "unknown %s policy '%s' (%s policies: %s)", k->family, v->name, k->family,
                          family_list(k->family));
            return; /* kept unset: the slot is not reported empty as well */
        }
        s->set = 1;
        return;
    case SMC_T_RANGE:
        if (v->kind != SMC_V_RANGE) {
            if (v->kind == SMC_V_NONE)
                smc_error(l, a->pos, "%s's key '%s' needs a value: %s=[lo, hi]", L->name, a->key, a->key);
            else
                value_error(l, a, k, L->name);
            return; /* kept unset: the slot is not reported empty as well */
        }
        if (v->lo > v->hi) {
            smc_error(l, v->pos, "empty range [%llu, %llu]: its low bound is above its high bound", v->lo, v->hi);
            return; /* kept unset: the slot is not reported empty as well */
        }
        s->lo = v->lo;
        s->hi = v->hi;
        s->set = 1;
        e->lo = v->lo;
        e->hi = v->hi;
        e->has_range = 1;
        return;
    case SMC_T_INT:
    case SMC_T_SIZE:
    case SMC_T_BOOL:
        if (v->kind == SMC_V_NONE) {
            smc_error(l, a->pos, "%s's key '%s' needs a value (%s)", L->name, a->key, smc_type_name(k->type));
            return; /* kept unset: the slot is not reported empty as well */
        }
        if (v->kind != SMC_V_NUMBER) {
            value_error(l, a, k, L->name);
            return; /* kept unset: the slot is not reported empty as well */
        }
        if (k->type != SMC_T_SIZE && v->has_unit) {
            smc_error(l, v->pos, "%s's key '%s' is %s, not a size: write it without a unit", L->name, a->key,
                      k->type == SMC_T_BOOL ? "1 or 0" : "a count");
            return; /* kept unset: the slot is not reported empty as well */
        }
        if (k->type == SMC_T_BOOL && v->num > 1) {
            smc_error(l, v->pos, "%s's key '%s' is 1 or 0, not %s", L->name, a->key, v->text);
            return; /* kept unset: the slot is not reported empty as well */
        }
        s->num = v->num;
        s->set = 1;
        return;
    }
}

/* The sizeclass policy of the nearest layer that names one, above first. */
static const struct smc_policy *neighbour_sizeclass(struct smc_comp *c, unsigned i, const char **from)
{
    for (unsigned d = 1; d < c->n; d++) {
        unsigned cand[2] = {i + d, i - d};
        for (unsigned k = 0; k < 2; k++) {
            if (k == 1 && d > i) continue;
            unsigned j = cand[k];
            if (j >= c->n || !c->e[j].layer) continue;
            for (unsigned m = 0; m < c->e[j].nset; m++) {
                const struct smc_setting *s = &c->e[j].set[m];
                if (s->key->type == SMC_T_POLICY && !strcmp(s->key->family, "sizeclass") && s->policy &&
                    !strcmp(s->origin, "line")) {
                    *from = c->e[j].layer->name;
                    return s->policy;
                }
            }
        }
    }
    return NULL;
}

/* Slots the line left empty. */
static void fill_slots(struct smc_comp *c, unsigned i, int mt)
{
    const struct smc_line *l = c->line;
    struct smc_elem *e = &c->e[i];
    const struct smc_layer *L = e->layer;
    for (unsigned k = 0; k < L->nkeys; k++) {
        const struct smc_key *key = &L->keys[k];
        if (key->type != SMC_T_POLICY || setting_for(e, key)) continue;
        if (!key->required) continue; /* the header's default (buddy_glk without classes: powers of two) */
        struct smc_setting *s = &e->set[e->nset++];
        memset(s, 0, sizeof *s);
        s->key = key;
        if (!strcmp(key->family, "sync")) {
            if (mt) {
                smc_error(l, e->term->pos,
                          "%s is not thread-safe without a sync policy, and %s is called by many threads at once: "
                          "give it sync=<%s>",
                          L->name, c->socket ? c->socket->layer->name : "the socket", family_list("sync"));
                e->nset--;
                continue;
            }
            s->policy = smc_find_policy("sync", "none", NULL);
            s->origin = "empty slot under a single-threaded socket";
        } else if (!strcmp(key->family, "sizeclass")) {
            const char *from = NULL;
            s->policy = neighbour_sizeclass(c, i, &from);
            if (!s->policy) {
                smc_error(l, e->term->pos, "%s's size classes have no default: give it sizeclass=<%s>", L->name,
                          family_list("sizeclass"));
                e->nset--;
                continue;
            }
            s->origin = "taken from";
            s->from = from;
        } else {
            const char *d = family_default(key->family);
            s->policy = d ? smc_find_policy(key->family, d, NULL) : NULL;
            if (!s->policy) {
                smc_error(l, e->term->pos, "%s's slot '%s' is empty and has no default: give it %s=<%s>", L->name,
                          key->name, key->name, family_list(key->family));
                e->nset--;
                continue;
            }
            s->origin = "the family's default";
        }
        s->set = 1;
    }
}

/* Turns on the option under which element j offers cap, for the layer `above` that needs it:
 * 1 when done; 0 when j cannot offer it or the line set the option to 0. */
static int enable_offer(struct smc_comp *c, unsigned j, unsigned cap, const char *above)
{
    struct smc_elem *e = &c->e[j];
    const struct smc_layer *L = e->layer;
    if (!*L->offers_when || !(L->when_caps & cap)) return 0;
    for (unsigned k = 0; k < L->nkeys; k++) {
        const struct smc_key *key = &L->keys[k];
        if (strcmp(key->macro, L->offers_when)) continue;
        struct smc_setting *s = setting_for(e, key);
        if (s) return 0; /* written on the line (as 0: on would have offered it) */
        s = &e->set[e->nset++];
        memset(s, 0, sizeof *s);
        s->key = key;
        s->num = 1;
        s->set = 1;
        s->origin = "on: its capability is needed above by";
        s->from = above;
        return 1;
    }
    return 0;
}

/* A bound as a header writes its default: 65536, SIZE_MAX, (8u << 10), ((size_t)4 << 20), or
 * SM_SIZECLASS_FN(max_size) (the element's size-class policy's largest class). 0 if unknown. */
static int eval_bound(const char *text, const struct smc_elem *e, unsigned long long *out)
{
    char t[64];
    size_t n = 0;
    for (const char *p = text; *p && n + 1 < sizeof t; p++)
        if (*p != ' ') t[n++] = *p;
    t[n] = 0;
    if (!strcmp(t, "SIZE_MAX")) {
        *out = SIZE_MAX;
        return 1;
    }
    if (!strcmp(t, "SM_SIZECLASS_FN(max_size)")) {
        for (unsigned m = 0; m < e->nset; m++)
            if (e->set[m].policy && !strcmp(e->set[m].key->family, "sizeclass") && e->set[m].policy->max_size) {
                *out = e->set[m].policy->max_size;
                return 1;
            }
        return 0;
    }
    unsigned long long v, sh;
    char u;
    if (sscanf(t, "%llu%c", &v, &u) == 1) {
        *out = v;
        return 1;
    }
    if (sscanf(t, "(%lluu<<%llu)", &v, &sh) == 2 || sscanf(t, "((size_t)%llu<<%llu)", &v, &sh) == 2) {
        *out = sh < 64 ? v << sh : 0;
        return sh < 64;
    }
    return 0;
}

/* An option's value: as written on the line, else its header's default (0: unknown). */
static unsigned long long key_value(const struct smc_elem *e, const char *name)
{
    for (unsigned k = 0; k < e->layer->nkeys; k++) {
        const struct smc_key *key = &e->layer->keys[k];
        if (strcmp(key->name, name)) continue;
        for (unsigned m = 0; m < e->nset; m++)
            if (e->set[m].key == key && e->set[m].set) return e->set[m].num;
        unsigned long long v;
        return eval_bound(key->deflt, e, &v) ? v : 0;
    }
    return 0;
}

/* 1 when option `macro` of element e is non-zero (written, or by the header's default). */
static int option_on(const struct smc_elem *e, const char *macro)
{
    for (unsigned k = 0; k < e->layer->nkeys; k++)
        if (!strcmp(e->layer->keys[k].macro, macro)) return key_value(e, e->layer->keys[k].name) != 0;
    return 0;
}

/* The layer's own bound on what it serves (catalogue serves_max: KEY or KEY/KEY). */
static unsigned long long serves_max(const struct smc_elem *e)
{
    const char *expr = e->layer->serves_max;
    if (!*expr) return 0;
    char a[SMC_NAME_MAX], b[SMC_NAME_MAX] = "";
    const char *slash = strchr(expr, '/');
    snprintf(a, sizeof a, "%.*s", (int)(slash ? (size_t)(slash - expr) : strlen(expr)), expr);
    if (slash) snprintf(b, sizeof b, "%s", slash + 1);
    unsigned long long x = key_value(e, a), y = *b ? key_value(e, b) : 1;
    return x && y ? x / y : 0;
}

/* The sizes an element is asked to serve when its line gives no size_handle: its header's default
 * range, within its size classes. */
static void default_range(struct smc_elem *e)
{
    for (unsigned k = 0; k < e->layer->nkeys; k++) {
        const struct smc_key *key = &e->layer->keys[k];
        if (key->type != SMC_T_RANGE || e->has_range) continue;
        const char *comma = strchr(key->deflt, ',');
        unsigned long long hi;
        if (key->deflt[0] == '[' && comma) {
            char hi_text[64];
            snprintf(hi_text, sizeof hi_text, "%s", comma + 1);
            char *close = strrchr(hi_text, ']');
            if (close) *close = 0;
            if (eval_bound(hi_text, e, &hi)) e->hi = hi;
        }
    }
    for (unsigned m = 0; m < e->nset; m++)
        if (e->set[m].policy && !strcmp(e->set[m].key->family, "sizeclass") && e->set[m].policy->max_size &&
            e->hi > e->set[m].policy->max_size && !e->has_range)
            e->hi = e->set[m].policy->max_size;
}

static void make_ident(struct smc_comp *c, unsigned i, const char *name)
{
    struct smc_elem *e = &c->e[i];
    unsigned same = 0, total = 0;
    for (unsigned j = 0; j < c->n; j++)
        if (c->e[j].layer == e->layer) {
            total++;
            if (j < i) same++;
        }
    if (total > 1)
        snprintf(e->ident, sizeof e->ident, "%s_%s%u", name, e->layer->name, same + 1);
    else
        snprintf(e->ident, sizeof e->ident, "%s_%s", name, e->layer->name);
}

int smc_check(const struct smc_line *l, int mode, const char *name, struct smc_comp *c)
{
    unsigned errors0 = smc_errors();
    memset(c, 0, sizeof *c);
    c->line = l;
    c->fragment = mode == SMC_CHECK_FRAGMENT;
    c->n = l->nterms;
    int unknown = 0;

    for (unsigned i = 0; i < l->nterms; i++) {
        const char *near = "";
        c->e[i].term = &l->terms[i];
        c->e[i].layer = smc_find_layer(l->terms[i].name, &near);
        c->e[i].lo = 0;
        c->e[i].hi = SIZE_MAX;
        if (c->e[i].layer && c->e[i].layer->kind == SMC_POLICY) {
            smc_error(l, l->terms[i].pos, "'%s' is a %s policy, not a layer: give it as a layer's %s=%s",
                      l->terms[i].name, c->e[i].layer->name, c->e[i].layer->name, l->terms[i].name);
            c->e[i].layer = NULL;
        } else if (!c->e[i].layer) {
            const struct smc_policy *p = NULL;
            for (unsigned k = 0; k < smc_npolicies && !p; k++)
                if (!strcmp(smc_policies[k].name, l->terms[i].name)) p = &smc_policies[k];
            if (p)
                smc_error(l, l->terms[i].pos, "'%s' is a %s policy, not a layer: give it as a layer's %s=%s",
                          p->name, p->family, p->family, p->name);
            else if (*near)
                smc_error(l, l->terms[i].pos, "unknown layer '%s' (did you mean '%s'?)", l->terms[i].name, near);
            else
                smc_error(l, l->terms[i].pos, "unknown layer '%s' (the layers: smc explain --catalogue)",
                          l->terms[i].name);
        }
        if (!c->e[i].layer) unknown = 1;
    }

    for (unsigned i = 0; i < c->n; i++)
        if (c->e[i].layer && (c->e[i].layer->flags & SMC_F_C_ONLY))
            smc_error(l, c->e[i].term->pos, "%s needs C code a line cannot give (see <%s>): write it into the C file "
                      "that smc emit makes of the rest", c->e[i].layer->name, c->e[i].layer->header);

    /* Order: one OS layer, first; the socket last. */
    const struct smc_elem *os = NULL;
    for (unsigned i = 0; i < c->n; i++) {
        const struct smc_layer *L = c->e[i].layer;
        if (!L) continue;
        if (L->kind == SMC_OS) {
            if (os)
                smc_error(l, c->e[i].term->pos, "two OS layers: %s and %s (column %u); only the first layer of a "
                          "composition is an OS layer", os->layer->name, L->name, os->term->pos.col);
            else if (i != 0)
                smc_error(l, c->e[i].term->pos, "the OS layer %s must come first: the layers are written from the "
                          "OS layer up to the socket", L->name);
            os = &c->e[i];
        }
        if (L->kind == SMC_SOCKET) {
            if (i != c->n - 1)
                smc_error(l, c->e[i].term->pos, "the socket %s must come last: the layers are written from the OS "
                          "layer up to the socket", L->name);
            else
                c->socket = &c->e[i];
        }
    }
    if (!c->fragment && c->e[0].layer && c->e[0].layer->kind != SMC_OS && !os)
        smc_error(l, c->e[0].term->pos, "no OS layer first: the line starts with the %s %s; start it with an OS "
                  "layer (brk_heap, mmap_heap, sheap, malloc_heap)", smc_kind_name(c->e[0].layer->kind),
                  c->e[0].layer->name);
    int any_socket = 0;
    for (unsigned i = 0; i < c->n; i++) any_socket |= c->e[i].layer && c->e[i].layer->kind == SMC_SOCKET;
    if (!c->fragment && !any_socket && c->e[c->n - 1].layer)
        smc_error(l, c->e[c->n - 1].term->pos, "no socket last: the line ends with the %s %s; end it with a socket "
                  "(malloc_socket, custom_socket, cmalloc_socket, ...), or check it with --fragment",
                  smc_kind_name(c->e[c->n - 1].layer->kind), c->e[c->n - 1].layer->name);

    /* A line without a socket (a fragment) may end up under any socket: treated as multi-threaded. */
    int mt = c->socket ? (c->socket->layer->flags & SMC_F_MT) != 0 : 1;

    for (unsigned i = 0; i < c->n; i++)
        if (c->e[i].layer)
            for (unsigned a = 0; a < c->e[i].term->nargs; a++) take_arg(l, &c->e[i], &c->e[i].term->args[a]);
    for (unsigned i = 0; i < c->n; i++)
        if (c->e[i].layer) fill_slots(c, i, mt);
    if (unknown) return -1;

    /* sync=none where many threads call. */
    for (unsigned i = 0; i < c->n && mt; i++)
        for (unsigned m = 0; m < c->e[i].nset; m++) {
            const struct smc_setting *s = &c->e[i].set[m];
            if (s->arg && s->policy && !strcmp(s->key->family, "sync") && !strcmp(s->policy->name, "none"))
                smc_error(l, s->arg->val.pos, "sync=none leaves %s thread-unsafe, and %s is called by many threads "
                          "at once", c->e[i].layer->name, c->socket ? c->socket->layer->name : "the socket");
        }

    /* Secure layers see every request only above every cache. */
    for (unsigned i = 0; i < c->n; i++) {
        if (!(c->e[i].layer->flags & SMC_F_SECURE)) continue;
        for (unsigned j = i + 1; j < c->n; j++)
            if (c->e[j].layer->flags & SMC_F_CACHE) {
                smc_error(l, c->e[i].term->pos, "%s is below the cache %s (column %u), which serves requests it "
                          "would never see: put %s above every cache, directly under the socket",
                          c->e[i].layer->name, c->e[j].layer->name, c->e[j].term->pos.col, c->e[i].layer->name);
                break;
            }
    }

    /* Capabilities: what each layer offers the one above it. A layer that offers a capability only
     * with an option on (buddy_glk's stable) gets the option from the layer above that needs it,
     * unless the line turns it off. */
    unsigned caps[SMC_MAX_TERMS];
    for (unsigned i = 0; i < c->n; i++) {
        const struct smc_layer *L = c->e[i].layer;
        unsigned below = i ? caps[i - 1] : 0;
        unsigned offers = *L->offers_when && !option_on(&c->e[i], L->offers_when) ? L->offers & ~L->when_caps : L->offers;
        caps[i] = (offers & ~L->forwards) | (below & offers & L->forwards);
        if (i == 0 && c->fragment && L->kind != SMC_OS) continue; /* its next layer is not in the fragment */
        for (unsigned k = 0; k < L->nneeds; k++) {
            const struct smc_need *nd = &L->needs[k];
            if (*nd->when && !option_on(&c->e[i], nd->when)) continue;
            if (i == 0) {
                smc_error(l, c->e[i].term->pos, "%s needs capability %s of a layer below it, and has none (%s)",
                          L->name, smc_cap_name(nd->cap), nd->why);
            } else if (!(caps[i - 1] & nd->cap) && !enable_offer(c, i - 1, nd->cap, L->name)) {
                smc_error(l, c->e[i].term->pos, "%s needs capability %s of the layer below it, and %s lacks it (%s)",
                          L->name, smc_cap_name(nd->cap), c->e[i - 1].layer->name, nd->why);
            } else if (!(caps[i - 1] & nd->cap)) {
                caps[i - 1] |= nd->cap;
                caps[i] = (offers & ~L->forwards) | (caps[i - 1] & offers & L->forwards);
            }
        }
    }

    /* A cache keeps objects by the classes of the layer below: the two must agree. */
    for (unsigned i = 1; i < c->n; i++) {
        if (!(c->e[i].layer->flags & SMC_F_CACHE)) continue;
        const struct smc_policy *mine = NULL, *theirs = NULL;
        const struct smc_setting *at = NULL;
        for (unsigned m = 0; m < c->e[i].nset; m++)
            if (c->e[i].set[m].key->type == SMC_T_POLICY && !strcmp(c->e[i].set[m].key->family, "sizeclass")) {
                mine = c->e[i].set[m].policy;
                at = &c->e[i].set[m];
            }
        for (unsigned m = 0; m < c->e[i - 1].nset; m++)
            if (c->e[i - 1].set[m].key->type == SMC_T_POLICY && !strcmp(c->e[i - 1].set[m].key->family, "sizeclass"))
                theirs = c->e[i - 1].set[m].policy;
        if (mine && theirs && mine != theirs)
            smc_error(l, at->arg ? at->arg->val.pos : c->e[i].term->pos,
                      "%s's sizeclass %s differs from that of the layer below it, %s (%s): a cache keeps the classes "
                      "of the layer it caches", c->e[i].layer->name, mine->name, c->e[i - 1].layer->name, theirs->name);
    }

    /* A range cannot reach beyond the layer's size classes (the header refuses it at compile time). */
    for (unsigned i = 0; i < c->n; i++) {
        const struct smc_elem *e = &c->e[i];
        if (!e->has_range || e->hi == SIZE_MAX) continue;
        for (unsigned m = 0; m < e->nset; m++) {
            const struct smc_policy *p = e->set[m].policy;
            if (!p || strcmp(e->set[m].key->family, "sizeclass") || !p->max_size || e->hi <= p->max_size) continue;
            const struct smc_setting *r = NULL;
            for (unsigned k = 0; k < e->nset; k++)
                if (e->set[k].key->type == SMC_T_RANGE) r = &e->set[k];
            smc_error(l, r && r->arg ? r->arg->val.pos : e->term->pos,
                      "%s's size_handle reaches %llu, above the largest class of its sizeclass %s (%llu)",
                      e->layer->name, e->hi, p->name, p->max_size);
        }
    }
    for (unsigned i = 0; i < c->n; i++) {
        default_range(&c->e[i]);
        c->e[i].serves_max = serves_max(&c->e[i]);
    }

    /* Ranges: the layer nearest the socket serves first; warn where one can never be reached. */
    for (unsigned i = 0; i < c->n; i++) {
        const struct smc_elem *e = &c->e[i];
        if (!e->has_range) continue;
        for (unsigned j = i + 1; j < c->n; j++) {
            const struct smc_elem *a = &c->e[j];
            if (!a->has_range || a->layer->kind != SMC_CORE) continue;
            if (a->lo <= e->lo && a->hi >= e->hi) {
                const struct smc_setting *s = NULL;
                for (unsigned m = 0; m < e->nset; m++)
                    if (e->set[m].key->type == SMC_T_RANGE) s = &e->set[m];
                smc_warning(l, s && s->arg ? s->arg->val.pos : e->term->pos,
                            "%s can never be reached in [%llu, %llu]: %s above it serves all of [%llu, %llu]",
                            e->layer->name, e->lo, e->hi, a->layer->name, a->lo, a->hi);
                break;
            }
        }
    }

    for (unsigned i = 0; i < c->n; i++) make_ident(c, i, name);
    return smc_errors() == errors0 ? 0 : -1;
}
