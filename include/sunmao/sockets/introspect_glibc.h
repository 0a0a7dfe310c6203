/* glibc's introspection extensions, answered from the layers' figures (core/stats.h) instead of
 * glibc's arenas, which a preloaded sunmao never uses. A part of sockets/introspect_api.h.
 *
 * mallinfo2 (and mallinfo, its int fields saturated at INT_MAX):
 *   arena     mapped: bytes obtained from the OS and still mapped
 *   ordblks   blocks held from below by the layers (slabs, spans, chunks, cached blocks)
 *   smblks    objects on the thread caches' lists
 *   hblks     0: large blocks are layers' blocks like any other here
 *   hblkhd    bytes the OS layer hands out directly (its in_use)
 *   usmblks   0 (glibc: unused)
 *   fsmblks   bytes on the thread caches' lists
 *   uordblks  allocated: the program's live blocks at their usable sizes
 *   fordblks  mapped - allocated: everything else mapped (free, cached, metadata, slack)
 *   keepcost  dirty bytes the layers hold free (what malloc_trim would give back, at most)
 * Included alone (tools/check-headers.sh), it instantiates the whole socket (libc_api.h).
 * @check: <sunmao/policies/err/warn.h> SM_ERR=warn SM_API(n)=t_##n
 * @check-next: fake */
#ifndef SM_INTROSPECT_PARTS
#include "libc_api.h"
#else
#include <limits.h>

SM_SLOWPATH void sm_intro_mallinfo(struct mallinfo2 *m)
{
    static sm_stats_t s; /* guarded by sm_intro_lock */
    memset(m, 0, sizeof *m);
    sm_plat_lock(&sm_intro_lock);
    sm_intro_read(&s);
    size_t dirty = 0, blocks = 0;
    for (unsigned i = 0; i < s.nlayers; i++) {
        dirty += s.layer[i].dirty;
        blocks += s.layer[i].blocks;
    }
    m->arena = s.mapped;
    m->ordblks = blocks;
    m->smblks = s.tcache_objects;
    m->hblkhd = s.nlayers ? s.layer[s.nlayers - 1].in_use : 0;
    m->fsmblks = s.tcache_bytes;
    m->uordblks = s.allocated;
    m->fordblks = s.mapped > s.allocated ? s.mapped - s.allocated : 0;
    m->keepcost = dirty;
    sm_plat_unlock(&sm_intro_lock);
}

SM_EXPORT struct mallinfo2 SM_API(mallinfo2)(void)
{
    struct mallinfo2 m;
    sm_intro_mallinfo(&m);
    return m;
}

static int sm_intro_sat(size_t v) { return v > (size_t)INT_MAX ? INT_MAX : (int)v; }

SM_EXPORT struct mallinfo SM_API(mallinfo)(void)
{
    struct mallinfo2 m2;
    sm_intro_mallinfo(&m2);
    struct mallinfo m = { sm_intro_sat(m2.arena), sm_intro_sat(m2.ordblks), sm_intro_sat(m2.smblks),
                          sm_intro_sat(m2.hblks), sm_intro_sat(m2.hblkhd), sm_intro_sat(m2.usmblks),
                          sm_intro_sat(m2.fsmblks), sm_intro_sat(m2.uordblks), sm_intro_sat(m2.fordblks),
                          sm_intro_sat(m2.keepcost) };
    return m;
}

/* glibc's shape: one arena, then the totals; "max mmap" lines report our OS layer's blocks. */
SM_EXPORT void SM_API(malloc_stats)(void)
{
    struct mallinfo2 m;
    sm_intro_mallinfo(&m);
    sm_intro_out_t o = { sm_intro_stderr, NULL };
    sm_intro_printf(&o, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", m.arena, m.uordblks);
    sm_intro_printf(&o, "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", m.arena,
                    m.uordblks);
    sm_intro_printf(&o, "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n", m.hblks, m.hblkhd);
}

static void sm_intro_file(void *fp, const char *s) { sm_plat_fputs(fp, s); }

/* XML as glibc's, with one heap: our totals and the size classes. fputs may allocate its stream's
 * buffer: a caller that passes a FILE has a working malloc, ours. */
SM_EXPORT int SM_API(malloc_info)(int options, FILE *fp)
{
    if (options != 0) {
        errno = EINVAL;
        return -1;
    }
    static sm_stats_t s; /* guarded by sm_intro_lock */
    sm_intro_out_t o = { sm_intro_file, fp };
    sm_plat_lock(&sm_intro_lock);
    sm_intro_read(&s);
    sm_intro_printf(&o, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
    for (unsigned i = 0; i < s.nclasses; i++)
        sm_intro_printf(&o, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", s.cls[i].size,
                        s.cls[i].size, s.cls[i].size * s.cls[i].cached, s.cls[i].cached);
    sm_intro_printf(&o, "</sizes>\n<total type=\"fast\" count=\"%zu\" size=\"%zu\"/>\n", s.tcache_objects,
                    s.tcache_bytes);
    sm_intro_printf(&o, "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n", s.mapped,
                    s.mapped);
    sm_intro_printf(&o, "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n</heap>\n",
                    s.mapped, s.mapped);
    sm_intro_printf(&o, "<total type=\"fast\" count=\"%zu\" size=\"%zu\"/>\n", s.tcache_objects, s.tcache_bytes);
    sm_intro_printf(&o, "<total type=\"rest\" count=\"%u\" size=\"%zu\"/>\n", s.nlayers, s.allocated);
    sm_intro_printf(&o, "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n", s.mapped,
                    s.mapped);
    sm_intro_printf(&o, "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n</malloc>\n",
                    s.mapped, s.mapped);
    sm_plat_unlock(&sm_intro_lock);
    return 0;
}

#endif /* SM_INTROSPECT_PARTS */
