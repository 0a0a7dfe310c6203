/* The platform layer: every service sunmao needs from the operating system, behind one set of
 * functions named sm_plat_*, so layers, policies and sockets call no OS or C library service
 * themselves. Framework platform. Selected at compile time:
 *   SM_FREESTANDING=1   platform/freestanding.h: no OS (bare metal over sheap): memory only from
 *                       an embedder's hook, a clock the embedder advances, one CPU, no threads
 *   otherwise           platform/linux.h
 *
 * The contract (both implementations keep it; none allocates, none takes a lock of sunmao's):
 *   memory   sm_plat_page_size(); sm_plat_map(size) fresh zeroed pages or NULL (ENOMEM);
 *            sm_plat_map_aligned(size, align); sm_plat_unmap(p, size) 0/-1; sm_plat_purge(p, size,
 *            lazy) drop pages, keep them mapped (not lazy: they read as zero); sm_plat_hint_huge,
 *            sm_plat_hint_nohuge;
 *            sm_plat_remap_inplace(p, old, new) 0/-1 without moving; sm_plat_remap_to(p, old, new,
 *            dest) move onto a range the caller mapped; sm_plat_move_out(p, size, dest) move part
 *            of a mapping onto a range the caller mapped, leaving p mapped and empty (0/-1: -1 where
 *            the kernel cannot); sm_plat_sbrk(incr) old break or NULL;
 *            sm_plat_protect(p, n, accessible) 0/-1 (n = 0: whether pages can be protected here);
 *            sm_plat_protect_apart(p, n) 0/-1 a range's own mapping, never merged (guard pages);
 *            built with -DSM_PLAT_FAULTS, map, remap, purge and break calls first ask the test's
 *            sm_plat_fault_due(op) and fail as the kernel would (tests/build/faults.sh)
 *   time     sm_plat_now_ms() monotonic, ms, coarse (never a system call on Linux); sm_plat_now_ns()
 *            monotonic, precise; sm_plat_cycles() the cycle counter (or ns where none);
 *            sm_plat_sleep_ms(ms); sm_plat_wait_while(word, value, timeout_ms) / sm_plat_wake(word),
 *            sm_plat_wake_some(word, n)
 *   CPU      sm_plat_cpu() the current CPU, a hint in [0, CPUs); sm_plat_yield();
 *            sm_plat_cpu_cache_bytes(cpu) its level-2 cache, 0 if unknown (slow: start-up only);
 *            sm_core_table_build(kib, n) every CPU's, or SUNMAO_CORE_CACHE's (core_table.h)
 *   threads  sm_plat_lock_t (SM_PLAT_LOCK_INIT, lock, unlock, trylock, lock_reinit): a blocking
 *            lock for slow paths; sm_plat_spin_t (SM_PLAT_SPIN_INIT, spin_lock, spin_unlock,
 *            spin_trylock, spin_reinit): the OS's own spinlock (the posix_spin policy); sm_plat_once_t (SM_PLAT_ONCE_INIT) and sm_plat_once(o, fn);
 *            sm_plat_key_t, sm_plat_key_create(key, on_exit) and sm_plat_key_set(key, value): the
 *            thread-exit hook; sm_plat_spawn(&spec) a detached helper thread (sm_plat_thread_t: fn, name), signals blocked;
 *            sm_plat_in_loader(pc) pc is the dynamic loader's code (no thread may start from there);
 *            sm_plat_pause_spawn() / sm_plat_resume_spawn() around a request from there, and
 *            sm_plat_spawn_paused() asked before a request starts a thread;
 *            sm_plat_atfork(prepare, parent, child); sm_plat_self() the calling thread as a
 *            nonzero word, the same in a fork child (a lock's owner)
 *   process  sm_plat_entropy(buf, n <= 16) bytes the OS gave at start, false if none;
 *            sm_plat_getenv(name); sm_plat_secure_getenv(name) (NULL when setuid);
 *            sm_plat_readlink(path, buf, n) a link's target; sm_plat_write_stderr(s, n); sm_plat_abort();
 *            sm_plat_at_exit(fn) at normal exit, false if it cannot
 *            sm_plat_pid(); sm_plat_reserve(size) address space only (PROT_NONE, no commit);
 *            sm_plat_file_create/open/write/read/close(...) descriptors, no stdio;
 *            sm_plat_code_module(addr, lo, hi) the shared object holding addr; sm_plat_symbol(pc,
 *            sym, off, file, base) dladdr, never on an allocation path (profiling: layers/addon/prof.h)
 *   faults   sm_plat_backtrace(pcs, n, skip) the caller's return addresses, how many (0: none
 *            known); sm_plat_fault_hook(fn) fn(addr) asked about each SIGSEGV/SIGBUS in the
 *            handler (true: reported, the fault then kills as it would have), false if none
 *   lifecycle  sm_thread_attach(layer_exit): the composition's one thread-exit hook (lifecycle.h)
 *   rseq     sm_rseq_mode(), sm_rseq_thread_setup(), SM_RSEQ_POP / SM_RSEQ_PUSH / sm_rseq_set_end:
 *            sections on the calling thread's CPU, or its virtual CPU where there is no rseq (rseq.h)
 * A call that cannot be served has a defined failure (NULL, -1, false, 0) that its callers handle:
 * the freestanding platform builds every layer, and those that need an OS answer "no memory". */
#ifndef SUNMAO_PLATFORM_PLATFORM_H
#define SUNMAO_PLATFORM_PLATFORM_H

#if defined(SM_FREESTANDING) && SM_FREESTANDING
#include "freestanding.h"
#else
#include "linux.h"
#endif
#include "../core/mctx.h"
#include "lifecycle.h"
#include "report.h" /* introspection's hosted services (sockets/introspect_api.h) */

/* The CPU of request c: the one its socket (a cmalloc-style socket passes a partition) or an earlier
 * layer recorded, else the platform's answer, recorded for the layers after. */
static inline int sm_mctx_cpu(sm_mctx_t *c)
{
    if (c->cpu < 0)
        c->cpu = sm_plat_cpu();
    return c->cpu;
}

#include "core_table.h" /* the per-CPU cache sizes, built on the functions above */
#include "rseq.h"       /* restartable sequences: per-CPU caches (layers/addon/carrcache_rseq.h) */

#endif
