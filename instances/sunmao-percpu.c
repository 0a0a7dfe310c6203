/* sunmao-percpu — the default allocator with per-CPU caches (libsunmao-percpu.so): for programs
 * with more threads than cores, whose per-thread caches would hold memory per thread.
 *
 *   sunmao's line, with carrcache_rseq(sizeclass=tc5, size_handle=[0, 8 KiB]) in place of its
 *   thread_cache: per CPU, 1.5 MiB of stacks whose hit paths are restartable sequences, on glibc's
 *   rseq registration (or the process's own, or per-thread stacks where the kernel has none)
 *   :: prof(sync=mutex)
 *   :: malloc_socket
 *
 * Design, modes and measurements against libsunmao: docs/percpu.md.
 */
#define SM_INSTANCE_PERCPU 1
#include "sunmao.c"
