/* The user-defined request parameter (the paper's socket type A: "malloc(3) with user-defined input
 * parameters"): a 16-bit value a socket puts in the request context, for the layer that uses it (an
 * arena id, a tag, a colour) to read. Framework core: layers read it (sm_mctx_param), sockets set it
 * (sockets/custom_param.h does, for P_malloc_tagged and its siblings).
 *
 * Where it lives, for now: in the upper half of mctx.flags. Bit 15 (SM_F_PARAM) says a parameter is
 * present; bits 16..31 hold it. sm_mctx_t has no field for it yet, and this header is the one place
 * that knows the layout, so moving it into a field of its own changes nothing for layers or sockets.
 * Flags travel with the context: every layer that passes a request on passes the parameter, and the
 * requests a layer makes for itself (slabs, chunks, refills, metadata) build new contexts without
 * it, which is right: those blocks are not the program's. Layers that rewrite flags keep the bits
 * they do not own (tail_chksum, delayed_free, decay_cache clear only their own). The request flags
 * of core/mctx.h must stay below bit 15.
 * A layer above the one that reads it must pass the context on unchanged: a thread cache on top
 * serves from its lists without asking (sockets/custom_param.h sends tagged requests past its hit
 * path, but its miss path may still refill from below under the first request's parameter). */
#ifndef SUNMAO_CORE_MCTX_PARAM_H
#define SUNMAO_CORE_MCTX_PARAM_H

#include <stdbool.h>
#include <stdint.h>
#include "mctx.h"

enum {
    SM_F_PARAM = 1u << 15, /* a user parameter is present in the bits above */
    SM_PARAM_SHIFT = 16,
};
_Static_assert((unsigned)SM_F_PROBE < (unsigned)SM_F_PARAM, "core/mctx_param.h: a request flag of core/mctx.h reaches the parameter's bits");
_Static_assert(sizeof(unsigned) >= 4, "core/mctx_param.h: the parameter needs 32-bit flags");

/* The flags that carry parameter v, to OR into a request's flags. */
static inline unsigned sm_param_flags(uint16_t v) { return SM_F_PARAM | (unsigned)v << SM_PARAM_SHIFT; }

/* Request c's parameter into *v; false (and *v untouched) when it carries none. */
static inline bool sm_mctx_param(const sm_mctx_t *c, uint16_t *v)
{
    if (!(c->flags & SM_F_PARAM))
        return false;
    *v = (uint16_t)(c->flags >> SM_PARAM_SHIFT);
    return true;
}

/* Set (or replace) request c's parameter, keeping its other flags. */
static inline void sm_mctx_set_param(sm_mctx_t *c, uint16_t v)
{
    c->flags = (c->flags & (SM_F_PARAM - 1u)) | sm_param_flags(v);
}

#endif
