/* Known-bad: a thread cache over a layer without batches or owner lookup (TLSF). */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/tc.h>
#include <sunmao/policies/sync/mutex.h>
#define SM_LAYER os
#define SM_ERR warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER heap
#define SM_NEXT os
#define SM_SYNC mutex
#define SM_ERR warn
#include <sunmao/layers/core/tlsf_glk.h>
#define SM_LAYER cache
#define SM_NEXT heap
#define SM_SIZECLASS tc
#define SM_ERR warn
#include <sunmao/layers/addon/thread_cache.h>
