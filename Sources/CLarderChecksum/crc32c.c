// CRC-32C (Castagnoli) for the disk tier's checksums: SSE4.2 `crc32` instructions with three
// independent streams per block (the instruction has a latency of 3 cycles and a throughput of 1,
// so three streams keep it busy), combined by precomputed "append n zero bytes" operators, after
// Mark Adler's public crc32c.c (https://stackoverflow.com/a/17646775). A portable slicing-by-8
// table implementation serves CPUs without SSE4.2 and non-x86 machines.

#include "CLarderChecksum.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define POLY 0x82f63b78u
// Block sizes of the three-way hardware loop: LONG bytes per stream for large buffers, SHORT for
// the rest. Both are powers of two (crc32c_zeros_op requires it).
#define LONG 8192
#define SHORT 256

static uint32_t table[8][256];
static uint32_t long_shift[4][256];
static uint32_t short_shift[4][256];
static int has_hardware;
static pthread_once_t once = PTHREAD_ONCE_INIT;

// MARK: - Operators over GF(2) for shifting a CRC past zero bytes

static uint32_t gf2_matrix_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_matrix_square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(mat, mat[n]);
}

// The operator that appends `length` zero bytes (a power of two) to a CRC, into `even`.
static void crc32c_zeros_op(uint32_t *even, size_t length) {
    uint32_t odd[32];
    odd[0] = POLY;  // one zero bit
    uint32_t row = 1;
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_matrix_square(even, odd);  // two zero bits
    gf2_matrix_square(odd, even);  // four zero bits
    // The first square gives one zero byte in `even`, the next two in `odd`, and so on.
    do {
        gf2_matrix_square(even, odd);
        length >>= 1;
        if (length == 0) return;
        gf2_matrix_square(odd, even);
        length >>= 1;
    } while (length);
    for (int n = 0; n < 32; n++) even[n] = odd[n];
}

static void crc32c_zeros(uint32_t zeros[][256], size_t length) {
    uint32_t op[32];
    crc32c_zeros_op(op, length);
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_matrix_times(op, n);
        zeros[1][n] = gf2_matrix_times(op, n << 8);
        zeros[2][n] = gf2_matrix_times(op, n << 16);
        zeros[3][n] = gf2_matrix_times(op, n << 24);
    }
}

static inline uint32_t crc32c_shift(uint32_t zeros[][256], uint32_t crc) {
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

static void initialize(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ POLY : crc >> 1;
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = table[0][crc & 0xff] ^ (crc >> 8);
            table[k][n] = crc;
        }
    }
    crc32c_zeros(long_shift, LONG);
    crc32c_zeros(short_shift, SHORT);
#if defined(__x86_64__)
    __builtin_cpu_init();
    has_hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    has_hardware = 0;
#endif
}

// MARK: - Portable

uint32_t larder_crc32c_portable(uint32_t crc_in, const void *bytes, size_t length) {
    pthread_once(&once, initialize);
    const unsigned char *next = bytes;
    uint64_t crc = crc_in ^ 0xffffffffu;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (length && ((uintptr_t)next & 7) != 0) {
        crc = table[0][(crc ^ *next++) & 0xff] ^ (crc >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
        crc ^= word;
        crc = table[7][crc & 0xff] ^ table[6][(crc >> 8) & 0xff] ^ table[5][(crc >> 16) & 0xff] ^
              table[4][(crc >> 24) & 0xff] ^ table[3][(crc >> 32) & 0xff] ^ table[2][(crc >> 40) & 0xff] ^
              table[1][(crc >> 48) & 0xff] ^ table[0][crc >> 56];
        next += 8;
        length -= 8;
    }
#endif
    while (length) {
        crc = table[0][(crc ^ *next++) & 0xff] ^ (crc >> 8);
        length--;
    }
    return (uint32_t)crc ^ 0xffffffffu;
}

// MARK: - SSE4.2

#if defined(__x86_64__)
static inline uint64_t load64(const unsigned char *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc_in, const void *bytes, size_t length) {
    const unsigned char *next = bytes;
    uint64_t crc0 = crc_in ^ 0xffffffffu;
    while (length && ((uintptr_t)next & 7) != 0) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        length--;
    }
    while (length >= LONG * 3) {
        uint64_t crc1 = 0, crc2 = 0;
        const unsigned char *end = next + LONG;
        do {
            crc0 = _mm_crc32_u64(crc0, load64(next));
            crc1 = _mm_crc32_u64(crc1, load64(next + LONG));
            crc2 = _mm_crc32_u64(crc2, load64(next + LONG + LONG));
            next += 8;
        } while (next < end);
        crc0 = crc32c_shift(long_shift, (uint32_t)crc0) ^ crc1;
        crc0 = crc32c_shift(long_shift, (uint32_t)crc0) ^ crc2;
        next += LONG * 2;
        length -= LONG * 3;
    }
    while (length >= SHORT * 3) {
        uint64_t crc1 = 0, crc2 = 0;
        const unsigned char *end = next + SHORT;
        do {
            crc0 = _mm_crc32_u64(crc0, load64(next));
            crc1 = _mm_crc32_u64(crc1, load64(next + SHORT));
            crc2 = _mm_crc32_u64(crc2, load64(next + SHORT + SHORT));
            next += 8;
        } while (next < end);
        crc0 = crc32c_shift(short_shift, (uint32_t)crc0) ^ crc1;
        crc0 = crc32c_shift(short_shift, (uint32_t)crc0) ^ crc2;
        next += SHORT * 2;
        length -= SHORT * 3;
    }
    const unsigned char *end = next + (length - (length & 7));
    while (next < end) {
        crc0 = _mm_crc32_u64(crc0, load64(next));
        next += 8;
    }
    length &= 7;
    while (length) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        length--;
    }
    return (uint32_t)crc0 ^ 0xffffffffu;
}
#endif

uint32_t larder_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    pthread_once(&once, initialize);
#if defined(__x86_64__)
    if (has_hardware) return crc32c_sse42(crc, bytes, length);
#endif
    return larder_crc32c_portable(crc, bytes, length);
}

uint32_t larder_crc32c(uint32_t crc, const void *bytes, size_t length) {
    return larder_crc32c_hardware(crc, bytes, length);
}

int larder_crc32c_is_hardware_accelerated(void) {
    pthread_once(&once, initialize);
    return has_hardware;
}
