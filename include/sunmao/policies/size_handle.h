/* size_handle policy slot (paper §2.2 (1)), included by a layer template after its parameters
 * (no include guard). Defines L_handles_size(size): true when the request size lies in
 * [SM_SIZE_MIN, SM_SIZE_MAX] (defaults: 0 and SIZE_MAX), so the layer serves it rather than
 * passing it to the next layer. One unsigned compare: sizes below the minimum wrap around. */
#ifndef SM_LAYER
#error "size_handle.h: include it from a layer template, after SM_LAYER is defined"
#endif
#ifndef SM_SIZE_MIN
#define SM_SIZE_MIN 0
#endif
#ifndef SM_SIZE_MAX
#define SM_SIZE_MAX SIZE_MAX
#endif
_Static_assert((size_t)(SM_SIZE_MAX) - (size_t)(SM_SIZE_MIN) <= (size_t)(SM_SIZE_MAX), "size_handle: SM_SIZE_MIN > SM_SIZE_MAX");

SM_HOT bool SM_FN(handles_size)(size_t size)
{
    return size - (size_t)(SM_SIZE_MIN) <= (size_t)(SM_SIZE_MAX) - (size_t)(SM_SIZE_MIN);
}
