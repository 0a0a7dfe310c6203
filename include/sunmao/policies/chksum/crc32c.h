/* chksum policy `crc32c`: CRC-32C (Castagnoli) of the block's address and size, seeded with the
 * per-process secret (core/secret.h), two 32-bit CRCs widened to 64 bits. Like `xor` it catches a
 * tail or header copied from another block and a rewritten size; a CRC besides never misses a
 * change confined to 32 consecutive bits of its input, and each half sees the input in another
 * order, so a change the one maps to zero the other still shows.
 * Paths: x86-64 CPUs with SSE4.2 (every one since 2008) have a crc32 instruction, 3 cycles a word;
 * which path runs is decided once per process, at the first check (cpuid; no C library, so it
 * works freestanding), so a library built without -msse4.2 uses it and still runs on older CPUs.
 * Built with -msse4.2 the test compiles away. Elsewhere (aarch64 too, for now) a table-driven CRC,
 * eight lookups a word. The paths agree bit for bit (tests/unit/policies.c).
 * A keyed CRC is not a MAC: it is linear, so who can read one check value and knows CRC can
 * compute another; the secret keeps a blind or replayed overwrite from matching.
 * Beyond the policy interface (tests, other users of a CRC):
 *   uint32_t sm_chksum_crc32c_bytes(uint32_t crc, const void *buf, size_t n)   the standard CRC-32C
 *            of n bytes, continuing crc (0 to start; "123456789" gives 0xe3069283)
 *   sm_chksum_crc32c_bytes_sw/_hw, sm_chksum_crc32c_compute_sw/_hw   one path each (_hw only
 *            where bool sm_chksum_crc32c_hw_ok() says the CPU has the instruction)
 * @model: name=crc32c kind=policy family=chksum */
#ifndef SUNMAO_POLICY_CHKSUM_CRC32C_H
#define SUNMAO_POLICY_CHKSUM_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "../../core/compiler.h"
#include "../../core/secret.h"

typedef uint64_t sm_chksum_crc32c_t;
/* The size is CRC input (both halves): another size is another word but for a 2^-64 chance. */
enum { sm_chksum_crc32c_covers_size = 1 };

/* The reflected CRC-32C register update, no pre- or post-inversion (what the instruction does). */
SM_INLINE uint32_t sm_chksum_crc32c_u8_sw(uint32_t crc, uint8_t b)
{
    /* Entry i: the register's change when byte i leaves it (polynomial 0x82f63b78, reflected). */
    static const uint32_t table[256] = {
        0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c,
        0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b,
        0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
        0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
        0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc,
        0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
        0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512,
        0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
        0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
        0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a,
        0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595, 0x417b1dbc, 0xb3109ebf,
        0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
        0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f,
        0xed03a29b, 0x1f682198, 0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927,
        0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
        0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
        0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e,
        0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
        0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e,
        0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
        0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
        0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c,
        0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93, 0x082f63b7, 0xfa44e0b4,
        0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
        0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b,
        0xb4091bff, 0x466298fc, 0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c,
        0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
        0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
        0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975,
        0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
        0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905,
        0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
        0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
        0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff,
        0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8,
        0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
        0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78,
        0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee,
        0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
        0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
        0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69,
        0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
        0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
    };
    return table[(crc ^ b) & 0xff] ^ (crc >> 8);
}

/* A word, least significant byte first, as the instruction reads it. */
SM_INLINE uint32_t sm_chksum_crc32c_u64_sw(uint32_t crc, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        crc = sm_chksum_crc32c_u8_sw(crc, (uint8_t)(v >> (8 * i)));
    return crc;
}

/* The two halves: the low one reads address then size, the high one size then address. */
#define SM_CHKSUM_CRC32C_MIX(u64, a, z, s)                                                             \
    ((uint64_t)u64(u64((uint32_t)((s) >> 32), (z) ^ (s)), (a)) << 32 | u64(u64((uint32_t)(s), (a)), (z)))

SM_INLINE sm_chksum_crc32c_t sm_chksum_crc32c_compute_sw(const void *block, size_t size)
{
    uint64_t s = sm_secret();
    return SM_CHKSUM_CRC32C_MIX(sm_chksum_crc32c_u64_sw, (uint64_t)(uintptr_t)block, (uint64_t)size, s);
}

SM_INLINE uint32_t sm_chksum_crc32c_bytes_sw(uint32_t crc, const void *buf, size_t n)
{
    const unsigned char *p = (const unsigned char *)buf;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = sm_chksum_crc32c_u8_sw(crc, p[i]);
    return ~crc;
}

#if defined(__x86_64__)
/* Compiled for SSE4.2 whatever the build's flags: such a function cannot be inlined into code
 * built for plain x86-64, so it stays a call (one per check value). */
#ifdef __SSE4_2__
#define SM_CHKSUM_CRC32C_HW_FN SM_INLINE
#else
#define SM_CHKSUM_CRC32C_HW_FN static inline __attribute__((target("sse4.2")))
#endif

SM_CHKSUM_CRC32C_HW_FN uint32_t sm_chksum_crc32c_u64_hw(uint32_t crc, uint64_t v)
{
    return (uint32_t)__builtin_ia32_crc32di(crc, v);
}

/* Takes the address as a number: a pointer argument to a function that is not inlined reads, to
 * gcc, as a read of the block, and the block is often fresh memory. */
SM_CHKSUM_CRC32C_HW_FN sm_chksum_crc32c_t sm_chksum_crc32c_mix_hw(uint64_t a, uint64_t z)
{
    uint64_t s = sm_secret();
    return SM_CHKSUM_CRC32C_MIX(sm_chksum_crc32c_u64_hw, a, z, s);
}

SM_INLINE sm_chksum_crc32c_t sm_chksum_crc32c_compute_hw(const void *block, size_t size)
{
    return sm_chksum_crc32c_mix_hw((uint64_t)(uintptr_t)block, (uint64_t)size);
}

SM_CHKSUM_CRC32C_HW_FN uint32_t sm_chksum_crc32c_bytes_hw(uint32_t crc, const void *buf, size_t n)
{
    const unsigned char *p = (const unsigned char *)buf;
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        crc = (uint32_t)__builtin_ia32_crc32di(crc, w);
    }
    for (; n; n--, p++)
        crc = __builtin_ia32_crc32qi(crc, *p);
    return ~crc;
}

/* 0 not asked yet, 1 no instruction, 2 the instruction. Per translation unit, like the secret;
 * threads racing on the first check store the same answer. */
static int sm_chksum_crc32c_cpu;

SM_SLOWPATH SM_UNUSED int sm_chksum_crc32c_probe(void)
{
    uint32_t a = 1, b, c = 0, d;
    __asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d)); /* leaf 1: ECX bit 20 = SSE4.2 */
    (void)b, (void)d;
    int answer = (c >> 20) & 1 ? 2 : 1;
    __atomic_store_n(&sm_chksum_crc32c_cpu, answer, __ATOMIC_RELAXED);
    return answer;
}

SM_INLINE bool sm_chksum_crc32c_hw_ok(void)
{
#ifdef __SSE4_2__
    return true;
#else
    int cpu = __atomic_load_n(&sm_chksum_crc32c_cpu, __ATOMIC_RELAXED);
    return (sm_likely(cpu) ? cpu : sm_chksum_crc32c_probe()) == 2;
#endif
}

SM_INLINE sm_chksum_crc32c_t sm_chksum_crc32c_compute(const void *block, size_t size)
{
    return sm_chksum_crc32c_hw_ok() ? sm_chksum_crc32c_compute_hw(block, size)
                                    : sm_chksum_crc32c_compute_sw(block, size);
}

SM_INLINE uint32_t sm_chksum_crc32c_bytes(uint32_t crc, const void *buf, size_t n)
{
    return sm_chksum_crc32c_hw_ok() ? sm_chksum_crc32c_bytes_hw(crc, buf, n)
                                    : sm_chksum_crc32c_bytes_sw(crc, buf, n);
}

#else /* no instruction this header knows: the table everywhere */
SM_INLINE bool sm_chksum_crc32c_hw_ok(void) { return false; }
SM_INLINE sm_chksum_crc32c_t sm_chksum_crc32c_compute_hw(const void *block, size_t size)
{
    return sm_chksum_crc32c_compute_sw(block, size);
}
SM_INLINE uint32_t sm_chksum_crc32c_bytes_hw(uint32_t crc, const void *buf, size_t n)
{
    return sm_chksum_crc32c_bytes_sw(crc, buf, n);
}
SM_INLINE sm_chksum_crc32c_t sm_chksum_crc32c_compute(const void *block, size_t size)
{
    return sm_chksum_crc32c_compute_sw(block, size);
}
SM_INLINE uint32_t sm_chksum_crc32c_bytes(uint32_t crc, const void *buf, size_t n)
{
    return sm_chksum_crc32c_bytes_sw(crc, buf, n);
}
#endif

#endif
