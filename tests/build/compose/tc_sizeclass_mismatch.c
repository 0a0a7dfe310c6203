/* Known-bad: a thread cache whose size classes are not those of the slab layer below it. */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/prime.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/spinlock.h>
#define SM_LAYER os
#define SM_ERR warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER slab
#define SM_NEXT os
#define SM_SYNC spinlock
#define SM_SIZECLASS prime
#define SM_ERR warn
#define SM_SIZE_MAX 4096
#include <sunmao/layers/core/slab_lk.h>
#define SM_LAYER cache
#define SM_NEXT slab
#define SM_SIZECLASS tc
#define SM_ERR warn
#define SM_SIZE_MAX 4096
#include <sunmao/layers/addon/thread_cache.h>
