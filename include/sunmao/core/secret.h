/* A per-process secret for checksums and pointer encoding, so an attacker who can write the heap
 * cannot forge metadata without first leaking it. Sockets seed it at start-up (from the kernel's
 * AT_RANDOM bytes on Linux); until then, and on bare metal, it is a fixed odd constant.
 * Framework core; one copy per translation unit, which is one per composed allocator. */
#ifndef SUNMAO_CORE_SECRET_H
#define SUNMAO_CORE_SECRET_H

#include <stdint.h>

static uint64_t sm_secret_value = 0x9e3779b97f4a7c15ull;

static inline uint64_t sm_secret(void) { return sm_secret_value; }
static inline void sm_secret_seed(uint64_t seed) { sm_secret_value = seed | 1; }

#endif
