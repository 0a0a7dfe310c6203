/* Good: a pass-through layer between a thread cache and its slabs forwards their capabilities. */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#define SM_LAYER os
#define SM_ERR warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER slab
#define SM_NEXT os
#define SM_SYNC spinlock
#define SM_SIZECLASS tc
#define SM_ERR warn
#define SM_SIZE_MAX 8192
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER fake
#define SM_NEXT slab
#include <sunmao/layers/addon/passthrough.h>
_Static_assert((int)fake_caps == (int)slab_caps, "passthrough offers its next layer's capabilities");
#define SM_LAYER cache
#define SM_NEXT fake
#define SM_SIZECLASS tc
#define SM_ERR warn
#define SM_SIZE_MAX 8192
#include <sunmao/layers/addon/thread_cache.h>
_Static_assert((int)cache_caps == (SM_CAP_HIT | SM_CAP_MOVE), "thread_cache offers hit paths, and forwards moves");
#define SM_NEXT cache
#define SM_ERR warn
#define SM_PREFIX t_
#include <sunmao/sockets/custom_socket.h>
