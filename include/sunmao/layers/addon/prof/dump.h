/* prof/dump.h: writing a profile. Part of layers/addon/prof.h (included by it only).
 *
 * Two formats (docs/operations.md, Heap profiles and leaks):
 *   legacy (default), which jeprof, google-pprof and Go pprof all read:
 *     heap profile: <live n>: <live bytes> [<total n>: <total bytes>] @ heap_v2/<R>
 *     <n>: <b> [<n>: <b>] @ 0x<pc> 0x<pc> ...          one line per stack, innermost frame first
 *   jemalloc's own (prof_format:jemalloc; jeprof only): heap_v2/<R>, the totals as `  t*:`, then
 *     per stack `@ 0x.. 0x..` and its `  t*:` line (no per-thread lines: counts are per process).
 * Both end with a blank line, MAPPED_LIBRARIES: and /proc/self/maps copied verbatim, from which
 * the readers place each address in its file. Counts are the samples' own (not scaled): each reader
 * applies the Poisson correction for rate R itself. Stacks with no sample left after a reset are
 * left out. Written with write(2) from one static buffer under the layer's lock: no stdio, no malloc.
 * Names: <prefix>.<pid>.<seq>.<kind><kseq>.heap (kind i, u, m), <prefix>.<pid>.<seq>.f.heap at exit;
 * seq counts every dump of the process, kseq those of the kind. *
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sync/mutex.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/addon/thread_cache.h> SM_LAYER=p SM_NEXT=t SM_SYNC=mutex SM_ERR=warn
 * @check-next: fake */
#ifndef SM_PROF_PARTS
#include "../prof.h"
#else

struct SM_FN(out) { int fd; bool ok; size_t n; char buf[8192]; };
static struct SM_FN(out) SM_FN(out); /* under the lock */

SM_INLINE void SM_FN(flush)(struct SM_FN(out) *o)
{
    if (o->n && o->ok)
        o->ok = sm_plat_file_write(o->fd, o->buf, o->n);
    o->n = 0;
}
SM_INLINE void SM_FN(put)(struct SM_FN(out) *o, const char *s, size_t n)
{
    while (n) {
        if (o->n == sizeof o->buf)
            SM_FN(flush)(o);
        size_t k = sizeof o->buf - o->n < n ? sizeof o->buf - o->n : n;
        memcpy(o->buf + o->n, s, k);
        o->n += k, s += k, n -= k;
    }
}
SM_INLINE void SM_FN(puts)(struct SM_FN(out) *o, const char *s) { SM_FN(put)(o, s, strlen(s)); }
SM_INLINE void SM_FN(putu)(struct SM_FN(out) *o, uint64_t v, unsigned base)
{
    char t[24];
    int n = 0;
    do
        t[sizeof t - 1 - n++] = "0123456789abcdef"[v % base];
    while (v /= base);
    SM_FN(put)(o, t + sizeof t - n, (size_t)n);
}
SM_INLINE void SM_FN(put_pair)(struct SM_FN(out) *o, uint64_t n, uint64_t b)
{
    SM_FN(putu)(o, n, 10), SM_FN(puts)(o, ": "), SM_FN(putu)(o, b, 10);
}
SM_INLINE void SM_FN(put_cnts)(struct SM_FN(out) *o, uint64_t ln, uint64_t lb, uint64_t tn, uint64_t tb)
{
    SM_FN(put_pair)(o, ln, lb), SM_FN(puts)(o, " ["), SM_FN(put_pair)(o, tn, tb), SM_FN(puts)(o, "]");
}
SM_INLINE void SM_FN(put_pcs)(struct SM_FN(out) *o, const struct SM_FN(rec) *r)
{
    SM_FN(puts)(o, "@");
    for (unsigned i = 0; i < r->depth; i++)
        SM_FN(puts)(o, " 0x"), SM_FN(putu)(o, (uintptr_t)r->pcs[i], 16);
    SM_FN(puts)(o, "\n");
}

/* Under the lock: the whole profile into fd; 0 or an errno. */
SM_INLINE int SM_FN(write_profile)(int fd)
{
    struct SM_FN(out) *o = &SM_FN(out);
    o->fd = fd, o->ok = true, o->n = 0;
    uint64_t ln = 0, lb = 0, tn = 0, tb = 0, rate = (uint64_t)1 << SM_FN(obj).lg_sample;
    for (struct SM_FN(rec) *r = SM_FN(obj).all; r; r = r->next_all)
        ln += r->live_n, lb += r->live_b, tn += r->total_n, tb += r->total_b;
    bool je = SM_FN(obj).format == SM_CONF_PROF_FORMAT_JEMALLOC;
    if (je) {
        SM_FN(puts)(o, "heap_v2/"), SM_FN(putu)(o, rate, 10), SM_FN(puts)(o, "\n  t*: ");
        SM_FN(put_cnts)(o, ln, lb, tn, tb), SM_FN(puts)(o, "\n");
    } else {
        SM_FN(puts)(o, "heap profile: "), SM_FN(put_cnts)(o, ln, lb, tn, tb);
        SM_FN(puts)(o, " @ heap_v2/"), SM_FN(putu)(o, rate, 10), SM_FN(puts)(o, "\n");
    }
    for (struct SM_FN(rec) *r = SM_FN(obj).all; r; r = r->next_all) {
        if (!r->total_n && !r->live_n)
            continue;
        if (je) {
            SM_FN(put_pcs)(o, r), SM_FN(puts)(o, "  t*: ");
            SM_FN(put_cnts)(o, r->live_n, r->live_b, r->total_n, r->total_b), SM_FN(puts)(o, "\n");
        } else {
            SM_FN(put_cnts)(o, r->live_n, r->live_b, r->total_n, r->total_b), SM_FN(puts)(o, " ");
            SM_FN(put_pcs)(o, r);
        }
    }
    SM_FN(puts)(o, "\nMAPPED_LIBRARIES:\n");
    SM_FN(flush)(o);
    int maps = sm_plat_file_open("/proc/self/maps");
    if (maps >= 0) {
        long k;
        while (o->ok && (k = sm_plat_file_read(maps, o->buf, sizeof o->buf)) > 0)
            o->ok = sm_plat_file_write(fd, o->buf, (size_t)k);
        sm_plat_file_close(maps);
    }
    return o->ok ? 0 : EIO;
}

/* Under the lock: the automatic name of the next dump of `kind` ('i', 'u', 'm', 'f') into name
 * (<prefix>.<pid>.<seq>.<kind><kseq>.heap; 'f' has no kseq); false when the prefix is empty. */
SM_INLINE bool SM_FN(dump_name)(char *name, size_t cap, char kind)
{
    if (!SM_FN(obj).prefix[0])
        return false;
    struct SM_FN(out) o; /* formats into name through the same helpers; never flushed */
    o.n = 0, o.ok = false;
    SM_FN(puts)(&o, SM_FN(obj).prefix), SM_FN(puts)(&o, ".");
    SM_FN(putu)(&o, sm_plat_pid(), 10), SM_FN(puts)(&o, ".");
    SM_FN(putu)(&o, SM_FN(obj).seq++, 10), SM_FN(put)(&o, ".", 1), SM_FN(put)(&o, &kind, 1);
    if (kind != 'f') {
        unsigned k = kind == 'i' ? 0 : kind == 'u' ? 1 : 2;
        SM_FN(putu)(&o, SM_FN(obj).kseq[k]++, 10);
    }
    SM_FN(puts)(&o, ".heap");
    if (o.n >= cap)
        return false;
    memcpy(name, o.buf, o.n);
    name[o.n] = '\0';
    return true;
}

/* Under the lock: a profile into path (NULL: the automatic name of `kind`); 0 or an errno. The
 * name used is left in SM_FN(obj).last_dump (the leak report names it). */
SM_INLINE int SM_FN(dump_locked)(const char *path, char kind)
{
    char *name = SM_FN(obj).last_dump;
    if (!path) {
        if (!SM_FN(dump_name)(name, sizeof SM_FN(obj).last_dump, kind))
            return EINVAL;
    } else {
        size_t n = strlen(path);
        if (n >= sizeof SM_FN(obj).last_dump)
            return ENAMETOOLONG;
        memcpy(name, path, n + 1);
    }
    int fd = sm_plat_file_create(name);
    if (fd < 0)
        return errno ? errno : EIO;
    int rc = SM_FN(write_profile)(fd);
    sm_plat_file_close(fd);
    return rc;
}

#endif /* SM_PROF_PARTS */
