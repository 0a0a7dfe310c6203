/* Capabilities: the interfaces a layer offers beyond the base contract (core/layer.h). Framework
 * core.
 *
 * Every layer instance has the property L_caps, a mask of the capabilities below, and defines the
 * functions of every capability, offered or not: core/caps_default.h (included by layer_end.h)
 * gives the ones a layer does not offer a default that always misses and compiles away. So a layer
 * may call any of them on its next layer (a pass-through layer forwards them all and offers what
 * its next layer offers), and a consumer that needs one states it with SM_REQUIRE_CAP: a wrong
 * composition is a compile error that names the layer, its next layer and the missing capability.
 *
 *   SM_CAP_HIT      hit paths: the request served from what the layer holds for the calling
 *                   thread, touching nothing below, or a miss.
 *     void *L_alloc_hit(size_t size)                   an object of >= size bytes aligned to
 *                                                      SM_MIN_ALIGN, or NULL (miss)
 *     bool  L_free_hit(void *p, size_t size, unsigned flags, uintptr_t *owner_word)  true if it
 *                                                      took p (SM_F_SIZED: size is the user's); on a
 *                                                      miss, the owner word it read, if it read one,
 *                                                      is in *owner_word (else left unchanged)
 *     void *L_aligned_hit(size_t size, size_t align)  an object of >= size bytes aligned to align
 *                                                      (a power of two above SM_MIN_ALIGN), or NULL;
 *                                                      optional (core/caps_default.h: the default
 *                                                      misses, for a layer that does not define
 *                                                      SM_LAYER_ALIGNED_HIT)
 *     size_t L_usable_hit(const void *p)               the usable size of the live block p, read
 *                                                      from what a hit path reads (its owner
 *                                                      word), or 0: ask getmeta; optional (the
 *                                                      default answers 0, for a layer that does
 *                                                      not define SM_LAYER_USABLE_HIT)
 *     void *L_alloc_miss(sm_mctx_t *c)                the rest of L_alloc, after the hit missed
 *     void  L_free_miss(sm_mctx_t *c)                  the rest of L_free, after the hit missed
 *     Soundness: a hit path misses on a thread the layer has not set up (a fresh thread, before
 *     L_create), so a socket may call it before anything is created; then it calls the miss with
 *     the request's one context (with SM_F_OWNER, the word free_hit read), never the hit again.
 *     Defaults: the misses are L_alloc, L_free.
 *   SM_CAP_BATCH    objects by size class, many per call, with the class geometry exported:
 *     unsigned L_alloc_batch(sm_mctx_t *c, void **out, unsigned n)  up to n objects of
 *                                                      c->size's class; how many (0: no memory)
 *     void  L_free_batch(void **blocks, unsigned n)    frees them, passing down what is not its own
 *     enum  L_batch_classes, L_batch_max_size          its size-class policy's count and largest size
 *   SM_CAP_OWNER    which class an object belongs to, from one lookup of its owner word:
 *     uintptr_t L_block_owner(const void *p)           the lookup: p's owner word, opaque (never
 *                                                      SM_OWNER_UNKNOWN)
 *     unsigned L_owner_slot(const void *p, uintptr_t w)  16 x the class of the object starting at
 *                                                      p (w: its word); 16 x L_batch_classes: not
 *                                                      such an object
 *     bool  L_owner_local(const void *p, uintptr_t w, sm_mctx_t *c)  false if a cache above should
 *                                                      not keep p (it belongs to a partition other
 *                                                      than that of c's CPU, sm_mctx_cpu)
 *     uintptr_t L_owner_foreign(sm_mctx_t *c)          the bits of an owner word that name a
 *                                                      partition other than c's CPU's (w & them:
 *                                                      owner_local's answer without its load, as of
 *                                                      the slab's last move); 0: words name none
 *     One lookup per free: a consumer (a thread cache) keeps the word it read in c->owner_word,
 *     sets SM_F_OWNER and passes the free down with it; the layer whose word it is (the first
 *     below the consumer that offers OWNER itself; pass-through layers forward OWNER and the free
 *     unchanged) reads it instead of its own lookup and clears SM_F_OWNER before passing the free
 *     further down.
 *   SM_CAP_MAPPING  mapping control over live direct blocks, without copying:
 *     void *L_split(sm_mctx_t *c, size_t n)            cut c->ptr after n bytes (page-rounded);
 *                                                      the tail, now a block of its own, or NULL
 *     bool  L_remap(sm_mctx_t *c, size_t n)            make c->ptr n bytes long, moving it if
 *                                                      needed (c->ptr updated); false: unchanged
 *     bool  L_join(sm_mctx_t *c, void *next)           make c->ptr and the block `next`, which
 *                                                      starts where c->ptr ends, one block at
 *                                                      c->ptr (the caller owns both); false: unchanged
 *   SM_CAP_MOVE     a live block of the program moved without copying, for the socket's realloc:
 *     bool  L_move(sm_mctx_t *c, size_t n)             give c->ptr, a block the program holds, >= n
 *                                                      usable bytes at another address by moving its
 *                                                      pages (its contents come along; c->ptr
 *                                                      updated); false: unchanged, the caller copies
 *     A layer that keeps state by a live block's address (a profile's sample, a guard page) does
 *     not offer it for its own blocks, or writes that state again at the new address (a checksum
 *     past the end); a layer that passes other blocks on forwards the call for them. Only a layer
 *     that owns the block's mapping moves it.
 *   SM_CAP_STABLE   type-stable memory, no functions: a block of at most L_stable_max bytes that
 *                   the layer served stays mapped and readable after it is freed, for the life of
 *                   the process (reused or purged, never unmapped). What a lock-free structure
 *                   above needs to read a node another thread may have freed (core/tagged_stack.h).
 *     enum  L_stable_max                               0 where the layer does not offer it
 */
#ifndef SUNMAO_CORE_CAPABILITY_H
#define SUNMAO_CORE_CAPABILITY_H

#include "compiler.h"

/* Plain numbers, not enumerators: layer templates test them with #if (core/caps_default.h). */
#define SM_CAP_HIT     1
#define SM_CAP_BATCH   2
#define SM_CAP_OWNER   4
#define SM_CAP_MAPPING 8
#define SM_CAP_STABLE  16
#define SM_CAP_MOVE    32
#define SM_CAP_ALL     63

/* The capabilities a composed layer instance offers, and whether it offers cap. */
#define SM_CAPS(layer)         SM_CAT3(layer, _, caps)
#define SM_HAS_CAP(layer, cap) ((SM_CAPS(layer) & (cap)) != 0)

/* In a layer template: the next layer must offer SM_CAP_<name> (when `cond`, a constant, holds);
 * `why` says what for. */
#define SM_REQUIRE_CAP(name, why) SM_REQUIRE_CAP_WHEN(1, name, why)
#define SM_REQUIRE_CAP_WHEN(cond, name, why)                                                       \
    _Static_assert(!(cond) || SM_HAS_CAP(SM_NEXT, SM_CAP_##name),                                  \
                   SM_STR(SM_LAYER) ": its next layer " SM_STR(SM_NEXT) " lacks capability " #name \
                                    " (" why ")")

#endif
