/* What a checked line means, layer by layer (smc explain), and the catalogue itself as text or as
 * the Markdown of docs/model-language.md (smc catalogue). */
#include <stdint.h>
#include <string.h>
#include "model.h"

static const char *caps_text(unsigned caps, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (unsigned c = 1; c <= SMC_CAP_MOVE; c <<= 1)
        if (caps & c) len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", smc_cap_name(c));
    if (!len) snprintf(buf, n, "none");
    return buf;
}

/* "offers X[ among Y][ with M on][; needs Z when W]" */
static void caps_sentence(FILE *f, const struct smc_layer *L)
{
    char b[128];
    unsigned always = L->offers & ~L->when_caps;
    if (*L->offers_when && !L->forwards && always) { /* some always, some with the option */
        fprintf(f, "offers %s", caps_text(always, b, sizeof b));
        fprintf(f, ", and %s with %s on", caps_text(L->when_caps, b, sizeof b), L->offers_when);
    } else if (L->forwards && (L->offers & ~L->forwards)) { /* some always, some where the next layer has them */
        fprintf(f, "offers %s", caps_text(L->offers & ~L->forwards, b, sizeof b));
        fprintf(f, ", and its next layer's among %s", caps_text(L->forwards, b, sizeof b));
        if (*L->offers_when) fprintf(f, " with %s on", L->offers_when);
    } else {
        fprintf(f, "offers %s", L->forwards ? "its next layer's" : caps_text(L->offers, b, sizeof b));
        if (L->forwards && L->offers != SMC_CAP_ALL) fprintf(f, " among %s", caps_text(L->offers, b, sizeof b));
        if (*L->offers_when) fprintf(f, " with %s on", L->offers_when);
    }
    if (L->nneeds) {
        fprintf(f, "; needs");
        for (unsigned k = 0; k < L->nneeds; k++)
            fprintf(f, "%s %s%s%s", k ? "," : "", smc_cap_name(L->needs[k].cap), *L->needs[k].when ? " when " : "",
                    L->needs[k].when);
    }
}

static void human_size(char *buf, size_t n, unsigned long long v)
{
    if (v == SIZE_MAX)
        snprintf(buf, n, "SIZE_MAX");
    else if (v >= (1ull << 30) && !(v & ((1ull << 30) - 1)))
        snprintf(buf, n, "%lluGB", v >> 30);
    else if (v >= (1ull << 20) && !(v & ((1ull << 20) - 1)))
        snprintf(buf, n, "%lluMB", v >> 20);
    else if (v >= (1ull << 10) && !(v & ((1ull << 10) - 1)))
        snprintf(buf, n, "%lluKB", v >> 10);
    else
        snprintf(buf, n, "%llu", v);
}

static const char *value_text(const struct smc_setting *s, char *buf, size_t n)
{
    switch (s->key->type) {
    case SMC_T_POLICY:
        snprintf(buf, n, "%s", s->policy ? s->policy->name : "(empty)");
        break;
    case SMC_T_RANGE: {
        char lo[40], hi[40];
        human_size(lo, sizeof lo, s->lo);
        human_size(hi, sizeof hi, s->hi);
        snprintf(buf, n, "[%s, %s]", lo, hi);
        break;
    }
    case SMC_T_SIZE:
        human_size(buf, n, s->num);
        break;
    default:
        smc_format_size(buf, n, s->num, 0);
    }
    return buf;
}

static const struct smc_setting *find_setting(const struct smc_elem *e, const struct smc_key *k)
{
    for (unsigned m = 0; m < e->nset; m++)
        if (e->set[m].key == k) return &e->set[m];
    return NULL;
}


/* The sizes a layer serves: its range as written, else its header's default range within its size
 * classes, and within its own bound (a buddy's chunk, the classes of which a slab_wf slab holds
 * min_objects: check.c). Requests outside go to the layer below. */
static void served(const struct smc_elem *e, unsigned long long *lo, unsigned long long *hi)
{
    *lo = e->lo;
    *hi = e->serves_max && e->serves_max < e->hi ? e->serves_max : e->hi;
}

void smc_explain(FILE *f, const struct smc_comp *c, const unsigned long long *sizes, unsigned nsizes)
{
    fprintf(f, "%u layers, from the OS layer up%s:\n", c->n, c->socket ? " to the socket" : " (no socket)");
    for (unsigned i = 0; i < c->n; i++) {
        const struct smc_elem *e = &c->e[i];
        const struct smc_layer *L = e->layer;
        char b1[128], b2[128];
        fprintf(f, "\n%u. %s", i + 1, L->name);
        if (strcmp(e->term->name, L->name)) fprintf(f, " (written %s)", e->term->name);
        fprintf(f, " — %s, <%s>, C name %s\n", smc_kind_name(L->kind), L->header, e->ident);
        if (*L->summary) fprintf(f, "   %s\n", L->summary);
        if (L->kind == SMC_CORE || L->kind == SMC_OS || (L->flags & SMC_F_CACHE)) {
            unsigned long long lo, hi;
            served(e, &lo, &hi);
            human_size(b1, sizeof b1, lo);
            human_size(b2, sizeof b2, hi);
            fprintf(f, "   sizes: [%s, %s]%s\n", b1, b2,
                    hi < e->hi ? " (its own bound)" : e->has_range ? " (size_handle)"
                    : hi != SIZE_MAX ? " (its default range)" : " (all it is asked)");
        }
        fprintf(f, "   capabilities: ");
        caps_sentence(f, L);
        fprintf(f, "\n");
        if (L->flags & (SMC_F_SECURE | SMC_F_CACHE | SMC_F_MT))
            fprintf(f, "   properties:%s%s%s\n", L->flags & SMC_F_SECURE ? " secure (checks every request it sees)" : "",
                    L->flags & SMC_F_CACHE ? " cache (serves from per-thread or per-CPU state)" : "",
                    L->flags & SMC_F_MT ? " multi-threaded callers" : "");
        for (unsigned k = 0; k < L->nkeys; k++) {
            const struct smc_key *key = &L->keys[k];
            const struct smc_setting *s = find_setting(e, key);
            char v[96];
            if (s && s->set)
                value_text(s, v, sizeof v);
            else if (*key->deflt)
                snprintf(v, sizeof v, "%s", key->deflt);
            else
                snprintf(v, sizeof v, "(unset)");
            fprintf(f, "   %-22s = %-16s %s%s%s", key->name, v,
                    s && s->arg ? (s->origin && strcmp(s->origin, "line") ? s->origin : "from the line")
                    : s && s->set ? s->origin
                    : *key->deflt ? "default" : key->type == SMC_T_POLICY ? "empty (optional)" : "default",
                    s && s->from ? " " : "", s && s->from ? s->from : "");
            if (*key->paper) fprintf(f, "; paper: %s", key->paper);
            fprintf(f, "\n");
            if (*key->meaning) fprintf(f, "   %-22s   %s (%s)\n", "", key->meaning, key->macro);
        }
    }
    if (!nsizes) return;
    fprintf(f, "\nWho serves each size (the layer nearest the socket first):\n");
    for (unsigned z = 0; z < nsizes; z++) {
        char b[40];
        human_size(b, sizeof b, sizes[z]);
        fprintf(f, "  %-10s", b);
        int first = 1;
        for (unsigned i = c->n; i-- > 0;) {
            const struct smc_elem *e = &c->e[i];
            const struct smc_layer *L = e->layer;
            unsigned long long lo, hi;
            served(e, &lo, &hi);
            if (L->kind == SMC_SOCKET) continue;
            if (L->flags & SMC_F_CACHE) {
                if (sizes[z] >= lo && sizes[z] <= hi) {
                    fprintf(f, "%s%s's cache, on a miss", first ? "" : ", ", L->name);
                    first = 0;
                }
                continue;
            }
            if (L->kind == SMC_ADDON) continue;
            if ((sizes[z] >= lo && sizes[z] <= hi) || L->kind == SMC_OS) {
                fprintf(f, "%s%s\n", first ? "" : " ", L->name);
                first = -1;
                break;
            }
        }
        if (first != -1) fprintf(f, "%snone of the layers: the request fails\n", first ? "" : " ");
    }
}

static const char *key_type(const struct smc_key *k, char *buf, size_t n)
{
    if (k->type == SMC_T_POLICY)
        snprintf(buf, n, "%s policy%s", k->family, k->required ? " (required)" : "");
    else
        snprintf(buf, n, "%s", k->type == SMC_T_INT ? "integer" : k->type == SMC_T_SIZE ? "size" : k->type == SMC_T_BOOL ? "0/1" : "range");
    return buf;
}

/* Markdown table cells: '|' escaped, backticks kept. */
static void cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
}

void smc_print_catalogue(FILE *f, int markdown)
{
    static const enum smc_kind order[] = {SMC_OS, SMC_CORE, SMC_ADDON, SMC_SOCKET};
    static const char *titles[] = {"OS layers", "Core layers", "Add-on layers", "Sockets"};
    char b[160];
    for (unsigned o = 0; o < 4; o++) {
        if (markdown)
            fprintf(f, "### %s\n\n", titles[o]);
        else
            fprintf(f, "%s:\n", titles[o]);
        for (unsigned i = 0; i < smc_nlayers; i++) {
            const struct smc_layer *L = &smc_layers[i];
            if (L->kind != order[o]) continue;
            if (!markdown) {
                fprintf(f, "  %-16s %s%s%s%s\n", L->name, L->summary, *L->aliases ? " (also: " : "", L->aliases,
                        *L->aliases ? ")" : "");
                for (unsigned k = 0; k < L->nkeys; k++)
                    fprintf(f, "      %-22s %-24s default %s\n", L->keys[k].name, key_type(&L->keys[k], b, sizeof b),
                            *L->keys[k].deflt ? L->keys[k].deflt : "-");
                continue;
            }
            fprintf(f, "#### `%s`", L->name);
            if (*L->aliases) fprintf(f, " (also `%s`)", L->aliases);
            fprintf(f, "\n\n`<%s>`. ", L->header);
            if (L->summary[0] >= 'a' && L->summary[0] <= 'z') {
                fputc(L->summary[0] - 'a' + 'A', f);
                cell(f, L->summary + 1);
            } else {
                cell(f, L->summary);
            }
            fprintf(f, "\n\nCapabilities: ");
            caps_sentence(f, L);
            fprintf(f, ".");
            if (L->flags & SMC_F_SECURE) fprintf(f, " Secure: must see every request (above every cache).");
            if (L->flags & SMC_F_CACHE) fprintf(f, " A cache: fewer requests reach the layers below it.");
            if (L->flags & SMC_F_MT) fprintf(f, " Called by many threads at once.");
            fprintf(f, "\n\n");
            if (!L->nkeys) {
                fprintf(f, "No keys.\n\n");
                continue;
            }
            fprintf(f, "| Key | Paper spelling | Type | Default | Meaning |\n|---|---|---|---|---|\n");
            for (unsigned k = 0; k < L->nkeys; k++) {
                const struct smc_key *key = &L->keys[k];
                fprintf(f, "| `%s` | %s%s%s | %s | ", key->name, *key->paper ? "`" : "", *key->paper ? key->paper : "—",
                        *key->paper ? "`" : "", key_type(key, b, sizeof b));
                if (*key->deflt) {
                    fputc('`', f);
                    cell(f, key->deflt);
                    fputc('`', f);
                } else {
                    fputs("—", f);
                }
                fputs(" | ", f);
                if (key->type == SMC_T_POLICY && !*key->meaning)
                    fprintf(f, "the %s policy slot", key->family);
                else
                    cell(f, *key->meaning ? key->meaning : key->type == SMC_T_RANGE ? "the sizes it serves, inclusive; others go to the next layer" : "");
                fprintf(f, " (`%s`) |\n", key->macro);
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, markdown ? "### Policies\n\n| Policy | Also | Slot | Header | Summary |\n|---|---|---|---|---|\n" : "Policies:\n");
    for (unsigned i = 0; i < smc_npolicies; i++) {
        const struct smc_policy *p = &smc_policies[i];
        if (markdown) {
            fprintf(f, "| `%s` | %s | `%s` | `<%s>` | ", p->name, *p->aliases ? p->aliases : "—", p->family, p->header);
            cell(f, p->summary);
            fprintf(f, " |\n");
        } else {
            fprintf(f, "  %-10s %-14s %s\n", p->family, p->name, p->summary);
        }
    }
}
