/* size_handle policy slot (paper §2.2 (1)), included by a layer template after its parameters
 * (no include guard). Defines
 *   L_handles_size(size)  true when size lies in [SM_SIZE_MIN, SM_SIZE_MAX] (defaults: 0 and
 *                         SIZE_MAX). One unsigned compare: sizes below the minimum wrap around.
 *   L_serves(c)           true when the layer serves alloc request c rather than passing it to the
 *                         next layer: its size is handled and, with SM_SIZE_USER 0, it is a request
 *                         a layer above made for its own use (a slab, a chunk, a refill), not the
 *                         program's (SM_F_USER). SM_SIZE_USER 1 (default): any request.
 * So a page layer under a slab layer, sized to the slab, serves slabs only; a program's block of
 * the same size goes on to the layers meant for user blocks. */
#ifndef SM_LAYER
#error "size_handle.h: include it from a layer template, after SM_LAYER is defined"
#endif
#ifndef SM_SIZE_MIN
#define SM_SIZE_MIN 0
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX SIZE_MAX
#endif
#ifndef SM_SIZE_USER
#define SM_SIZE_USER 1
#endif
_Static_assert((size_t)(SM_SIZE_MAX) - (size_t)(SM_SIZE_MIN) <= (size_t)(SM_SIZE_MAX), "size_handle: SM_SIZE_MIN > SM_SIZE_MAX");

SM_HOT bool SM_FN(handles_size)(size_t size)
{
    return size - (size_t)(SM_SIZE_MIN) <= (size_t)(SM_SIZE_MAX) - (size_t)(SM_SIZE_MIN);
}

SM_HOT bool SM_FN(serves)(const sm_mctx_t *c)
{
    return SM_FN(handles_size)(c->size) && ((SM_SIZE_USER) || !(c->flags & SM_F_USER));
}
