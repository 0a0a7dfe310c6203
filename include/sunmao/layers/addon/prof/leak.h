/* prof/leak.h: the report at exit. Part of layers/addon/prof.h (included by it only).
 *
 * Whatever is still live at exit was never freed: the summary scales each stack's live samples by
 * 1/(1 - exp(-avg/R)) (avg: its bytes per object; the same correction the readers apply), sums
 * them, and lists the stacks that hold the most, each with its first frames named through the
 * loader (dladdr: safe at exit, where no allocation holds the loader's lock; only the dynamic
 * symbols, so a frame in a program built without -rdynamic shows as file+offset). The final
 * profile, of those same live samples, is what to give jeprof for the detail. *
 * @check: <sunmao/policies/sync/spinlock.h> <sunmao/policies/sync/mutex.h> <sunmao/policies/sizeclass/tc.h> <sunmao/policies/err/warn.h> SM_LAYER=s SM_NEXT=fake_next SM_SYNC=spinlock SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/core/slab_lk.h> SM_LAYER=t SM_NEXT=s SM_SIZECLASS=tc SM_ERR=warn <sunmao/layers/addon/thread_cache.h> SM_LAYER=p SM_NEXT=t SM_SYNC=mutex SM_ERR=warn
 * @check-next: fake */
#ifndef SM_PROF_PARTS
#include "../prof.h"
#else

#define SM_PROF_LEAK_TOP    8 /* call sites listed */
#define SM_PROF_LEAK_FRAMES 4 /* frames named per call site */

SM_INLINE double SM_FN(scale)(uint64_t n, uint64_t b)
{
    if (!n)
        return 0;
    double d = SM_FN(one_minus_exp_neg)((double)b / (double)n / (double)((uint64_t)1 << SM_FN(obj).lg_sample));
    return d > 0 ? 1 / d : 1;
}

SM_INLINE void SM_FN(put_frame)(struct SM_FN(out) *o, void *pc)
{
    const char *sym, *file;
    uintptr_t off, base;
    if (sm_plat_symbol(pc, &sym, &off, &file, &base) && (sym || file)) {
        if (sym)
            SM_FN(puts)(o, sym), SM_FN(puts)(o, "+0x"), SM_FN(putu)(o, off, 16), SM_FN(puts)(o, " ");
        const char *slash = file ? strrchr(file, '/') : NULL;
        SM_FN(puts)(o, "("), SM_FN(puts)(o, slash ? slash + 1 : file ? file : "?");
        if (!sym)
            SM_FN(puts)(o, "+0x"), SM_FN(putu)(o, (uintptr_t)pc - base, 16);
        SM_FN(puts)(o, ")");
    } else {
        SM_FN(puts)(o, "0x"), SM_FN(putu)(o, (uintptr_t)pc, 16);
    }
}

/* Under the lock, at exit: the summary and the top call sites on stderr; `file`, the final
 * profile's name, or NULL when none was written. Nothing when no sample is live. */
SM_INLINE void SM_FN(leak_report)(const char *file)
{
    double bytes = 0, objs = 0;
    uint64_t contexts = 0;
    for (struct SM_FN(rec) *r = SM_FN(obj).all; r; r = r->next_all)
        if (r->live_n) {
            double s = SM_FN(scale)(r->live_n, r->live_b);
            bytes += s * (double)r->live_b, objs += s * (double)r->live_n, contexts++;
        }
    if (!contexts)
        return;
    struct SM_FN(out) *o = &SM_FN(out);
    o->fd = 2, o->ok = true, o->n = 0;
    uint64_t b = (uint64_t)(bytes + 0.5), n = (uint64_t)(objs + 0.5);
    SM_FN(puts)(o, "<sunmao>: Leak approximation summary: ~"), SM_FN(putu)(o, b, 10);
    SM_FN(puts)(o, b == 1 ? " byte, ~" : " bytes, ~"), SM_FN(putu)(o, n, 10);
    SM_FN(puts)(o, n == 1 ? " object, >= " : " objects, >= "), SM_FN(putu)(o, contexts, 10);
    SM_FN(puts)(o, contexts == 1 ? " context\n" : " contexts\n");
    /* The top call sites by live bytes: repeated scans below the last one printed (a handful). */
    const struct SM_FN(rec) *last = NULL;
    for (unsigned k = 0; k < SM_PROF_LEAK_TOP; k++) {
        const struct SM_FN(rec) *best = NULL;
        for (const struct SM_FN(rec) *r = SM_FN(obj).all; r; r = r->next_all) {
            if (!r->live_n)
                continue;
            bool below = !last || r->live_b < last->live_b || (r->live_b == last->live_b && r < last);
            if (below && (!best || r->live_b > best->live_b || (r->live_b == best->live_b && r < best)))
                best = r;
        }
        if (!best)
            break;
        double s = SM_FN(scale)(best->live_n, best->live_b);
        SM_FN(puts)(o, "<sunmao>:   ~"), SM_FN(putu)(o, (uint64_t)(s * (double)best->live_b + 0.5), 10);
        SM_FN(puts)(o, " bytes in ~"), SM_FN(putu)(o, (uint64_t)(s * (double)best->live_n + 0.5), 10);
        SM_FN(puts)(o, " objects at ");
        for (unsigned i = 0; i < best->depth && i < SM_PROF_LEAK_FRAMES; i++) {
            if (i)
                SM_FN(puts)(o, " <- ");
            SM_FN(put_frame)(o, best->pcs[i]);
        }
        SM_FN(puts)(o, "\n");
        last = best;
    }
    if (file)
        SM_FN(puts)(o, "<sunmao>: Run jeprof or google-pprof on "), SM_FN(puts)(o, file), SM_FN(puts)(o, " for leak detail\n");
    SM_FN(flush)(o);
}

#endif /* SM_PROF_PARTS */
