/* Known-bad: a decay cache asked to grow blocks in place (SM_OPT_GROW 1) over brk_heap, which
 * cannot split or remap. The same cache without the option is a good composition (decay_over_brk). */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sync/mutex.h>
#define SM_LAYER os
#define SM_SYNC mutex
#define SM_ERR warn
#include <sunmao/os/brk_heap.h>
#define SM_LAYER large
#define SM_NEXT os
#define SM_SYNC mutex
#define SM_ERR warn
#ifndef GROW
#define GROW 1
#endif
#define SM_OPT_GROW GROW
#include <sunmao/layers/addon/decay_cache.h>
#define SM_NEXT large
#define SM_ERR warn
#define SM_PREFIX t_
#include <sunmao/sockets/custom_socket.h>
