/* Known-bad, as a new user wrote it (no policy header included: the layers include spinlock.h themselves):
 * mmap_heap :: tlsf_glk(sync=spinlock) :: thread_cache :: malloc_socket. It built with buried
 * implicit-declaration warnings into a library that crashed every program it was preloaded into;
 * it must fail with a message naming what is wrong, whatever the build's flags: the empty
 * sizeclass slot, and with it given (-DWITH_SIZECLASS=1), the capability the thread cache lacks. */
#define SM_LAYER os
#define SM_ERR   warn
#include <sunmao/os/mmap_heap.h>
#define SM_LAYER heap
#define SM_NEXT  os
#define SM_SYNC  spinlock
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>
#define SM_LAYER cache
#define SM_NEXT  heap
#define SM_ERR   warn
#if WITH_SIZECLASS
#define SM_SIZECLASS tc
#endif
#include <sunmao/layers/addon/thread_cache.h>
#define SM_NEXT cache
#define SM_ERR  warn
#include <sunmao/sockets/malloc_socket.h>
