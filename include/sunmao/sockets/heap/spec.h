/* A heap's spec (part of sockets/heap/heap.h): the string sunmao_heap_create takes, in either of two
 * spellings of the same keys:
 *   SUNMAO_CONF's    "kind:region,chunk:256KB,limit:64MB,name:request"
 *   the model line's "region(chunk=256KB, limit=64MB, name=request)"   (docs/model-language.md)
 * NULL or "" is "tlsf" with the defaults. Keys:
 *   kind    tlsf (default) | region
 *   chunk   bytes mapped at a time (default 1 MiB; 64 KiB .. 1 GiB, rounded up to pages)
 *   limit   most bytes the heap maps at once, 0 = none (default); a request beyond it fails with
 *           ENOMEM and counts in the heap's `refused`
 *   retain  bytes of idle spans a reset keeps for reuse (default: one chunk; the spans used
 *           since the last reset are kept too: heap.h, sm_heap_spans_trim)
 *   name    up to 31 characters, shown by the statistics
 * Sizes: a decimal or 0x number, optionally followed by K, M or G (with or without B or iB;
 * powers of 1024).
 * @check: <sunmao/policies/err/warn.h> SM_HEAP_RAISE=sm_err_warn_raise */
#ifndef SM_HEAP_PARTS
#include "heap.h"
#else

typedef struct sm_heap_spec {
    unsigned kind;
    size_t chunk, limit, retain;
    bool retain_set;
    char name[32];
} sm_heap_spec_t;

#define SM_HEAP_CHUNK_MIN ((size_t)64 << 10)
#define SM_HEAP_CHUNK_MAX ((size_t)1 << 30)

static SM_UNUSED bool sm_heap_spec_size(const char *v, size_t n, size_t *out)
{
    size_t digits = 0;
    while (digits < n && ((v[digits] >= '0' && v[digits] <= '9') || v[digits] == 'x' || v[digits] == 'X' ||
                          (digits > 1 && (v[1] == 'x' || v[1] == 'X') &&
                           ((v[digits] >= 'a' && v[digits] <= 'f') || (v[digits] >= 'A' && v[digits] <= 'F')))))
        digits++;
    int64_t x;
    if (!digits || !sm_conf_int(v, digits, &x) || x < 0)
        return false;
    unsigned shift = 0;
    const char *u = v + digits;
    size_t un = n - digits;
    if (un) {
        switch (u[0]) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: return false;
        }
        if (!(un == 1 || (un == 2 && (u[1] == 'B' || u[1] == 'b')) || (un == 3 && u[1] == 'i' && (u[2] == 'B' || u[2] == 'b'))))
            return false;
    }
    if ((uint64_t)x > (SM_HEAP_MAX_REQUEST >> shift))
        return false;
    *out = (size_t)x << shift;
    return true;
}

/* One key's value into the spec; NULL, or what is wrong with it. */
static SM_UNUSED const char *sm_heap_spec_key(sm_heap_spec_t *s, const char *k, size_t kn, const char *v, size_t vn)
{
    if (sm_conf_is(k, kn, "kind")) {
        if (sm_conf_is(v, vn, "tlsf"))
            s->kind = SM_HEAP_TLSF;
        else if (sm_conf_is(v, vn, "region"))
            s->kind = SM_HEAP_REGION;
        else
            return "kind is not tlsf or region";
    } else if (sm_conf_is(k, kn, "chunk")) {
        if (!sm_heap_spec_size(v, vn, &s->chunk) || s->chunk < SM_HEAP_CHUNK_MIN || s->chunk > SM_HEAP_CHUNK_MAX)
            return "chunk is not a size from 64KB to 1GB";
    } else if (sm_conf_is(k, kn, "limit")) {
        if (!sm_heap_spec_size(v, vn, &s->limit))
            return "limit is not a size";
    } else if (sm_conf_is(k, kn, "retain")) {
        if (!sm_heap_spec_size(v, vn, &s->retain))
            return "retain is not a size";
        s->retain_set = true;
    } else if (sm_conf_is(k, kn, "name")) {
        if (vn >= sizeof s->name)
            return "name is longer than 31 characters";
        memcpy(s->name, v, vn);
        s->name[vn] = 0;
    } else {
        return "unknown key (kind, chunk, limit, retain, name)";
    }
    return NULL;
}

static inline bool sm_heap_spec_space(char c) { return c == ' ' || c == '\t'; }

/* Parses spec into s; NULL, or what is wrong, with `at` pointing at the offending text. */
static SM_UNUSED const char *sm_heap_spec_parse(const char *spec, sm_heap_spec_t *s, const char **at)
{
    memset(s, 0, sizeof *s);
    s->kind = SM_HEAP_TLSF;
    s->chunk = (size_t)1 << 20;
    *at = spec;
    if (!spec)
        return NULL;
    const char *p = spec;
    while (sm_heap_spec_space(*p))
        p++;
    char assign = ':', sep = ',', close = 0;
    /* The model line's head: a kind's name followed by "(" or the end. */
    const char *w = p;
    while ((*w >= 'a' && *w <= 'z') || *w == '_')
        w++;
    const char *after = w;
    while (sm_heap_spec_space(*after))
        after++;
    if (w > p && (*after == '(' || *after == 0)) {
        const char *err = sm_heap_spec_key(s, "kind", 4, p, (size_t)(w - p));
        if (err) {
            *at = p;
            return "unknown heap kind (tlsf or region)";
        }
        if (*after == 0)
            goto done;
        p = after + 1;
        assign = '=', close = ')';
    }
    for (;;) {
        while (sm_heap_spec_space(*p))
            p++;
        if (*p == close)
            break;
        const char *k = p;
        while (*p && *p != assign && *p != sep && *p != close && !sm_heap_spec_space(*p))
            p++;
        size_t kn = (size_t)(p - k);
        while (sm_heap_spec_space(*p))
            p++;
        if (*p != assign || !kn) {
            *at = k;
            return close ? "expected key=value" : "expected key:value";
        }
        p++;
        while (sm_heap_spec_space(*p))
            p++;
        const char *v = p;
        while (*p && *p != sep && *p != close && !sm_heap_spec_space(*p))
            p++;
        const char *err = sm_heap_spec_key(s, k, kn, v, (size_t)(p - v));
        if (err) {
            *at = k;
            return err;
        }
        while (sm_heap_spec_space(*p))
            p++;
        if (*p == sep) {
            p++;
            while (sm_heap_spec_space(*p))
                p++;
            if (*p == close) {
                *at = p;
                return "nothing after ','";
            }
            continue;
        }
        if (*p != close) {
            *at = p;
            return close ? "expected ',' or ')'" : "expected ','";
        }
        break;
    }
    if (close) {
        p++;
        while (sm_heap_spec_space(*p))
            p++;
        if (*p) {
            *at = p;
            return "text after ')'";
        }
    }
done:
    s->chunk = sm_align_up(s->chunk, sm_plat_page_size());
    if (!s->retain_set)
        s->retain = s->chunk;
    return NULL;
}
#endif
