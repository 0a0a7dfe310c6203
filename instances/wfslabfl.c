/* wfslabfl — wfslab with the paper's `fake` layer above every non-OS layer (§4.1, §4.4 question 1):
 * composing must cost nothing, so its exported functions must compile to wfslab's instructions
 * (tests/build/zero_cost.sh) and run as fast (make bench; docs/instances.md).
 *
 *   mmap_heap(...) :: fake :: segfit_lf(...) :: fake :: slab_wf(...) :: fake :: malloc_socket
 *
 * The layers' parameters are wfslab's (instances/wfslab.c says where they differ from the paper).
 */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sizeclass/log2b.h>
#include <sunmao/policies/sizeclass/prime.h>

#define SM_LAYER wfslabfl_os
#define SM_ERR   warn
#define SM_OPT_THREAD_HEAP_SIZE (256ul << 20)
#define SM_OPT_THREAD_HEAP_MAX_BLOCK (64ul << 20)
#define SM_OPT_FAA_GROWTH 1
#define SM_OPT_FAA_ARENA_REGIONS 4 /* 1 GiB arenas: see docs/instances.md */
#define SM_OPT_HUGE_PAGES 0       /* paper: 1; see docs/instances.md */
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER wfslabfl_fake_os
#define SM_NEXT  wfslabfl_os
#include <sunmao/layers/addon/fake.h>

#define SM_LAYER     wfslabfl_large
#define SM_NEXT      wfslabfl_fake_os
#define SM_SIZECLASS log2b
#define SM_ERR       warn
#include <sunmao/layers/core/segfit_lf.h>

#define SM_LAYER wfslabfl_fake_large
#define SM_NEXT  wfslabfl_large
#include <sunmao/layers/addon/fake.h>

#define SM_LAYER     wfslabfl_small
#define SM_NEXT      wfslabfl_fake_large
#define SM_SIZECLASS prime
#define SM_ERR       warn
#define SM_SIZE_MAX  (64ul << 10)
#define SM_OPT_SLAB_SIZE (64ul << 10)
#define SM_OPT_TLLABS 40
#include <sunmao/layers/core/slab_wf.h>

#define SM_LAYER wfslabfl_fake_small
#define SM_NEXT  wfslabfl_small
#include <sunmao/layers/addon/fake.h>

#define SM_NEXT wfslabfl_fake_small
#define SM_ERR  warn
#include <sunmao/sockets/select.h>
