// CRC-32C (Castagnoli) for the disk tier's checksums: SSE4.2 `crc32` instructions with three
// independent streams per block (the instruction has a latency of 3 cycles and a throughput of 1,
// so three streams keep it busy), combined by precomputed "append n zero bytes" operators, after
// Mark Adler's public crc32c.c (https://stackoverflow.com/a/17646775). A portable slicing-by-8
// table implementation serves CPUs without SSE4.2 and non-x86 machines. On CPUs with VPCLMULQDQ
// and AVX2, long buffers run carry-less multiply folding (the technique of Intel's white paper
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction") on one part of the
// buffer while the `crc32` instruction runs on the rest, about 1.7 times the speed of `crc32`
// alone; the parts are joined by multiplying by x^(8n) mod P (the "append n zero bytes" operator).

#include "CLarderChecksum.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#include <wmmintrin.h>
#include <immintrin.h>
#endif

#define POLY 0x82f63b78u
// Block sizes of the three-way hardware loop: LONG bytes per stream for large buffers, SHORT for
// the rest. Both are powers of two (crc32c_zeros_op requires it).
#define LONG 8192
#define SHORT 256
// Where the CPU has VPCLMULQDQ: buffers from FOLD_MIN bytes on are folded by it alone (one round
// of 128 bytes at least), and from HYBRID_MIN on take the hybrid path (VPCLMULQDQ beside three
// `crc32` streams), whose fixed cost (joining four partial checksums, about 200 ns) pays only on
// long buffers. Measured (thread CPU, one buffer over and over, Benchmarks/README.md finding 17):
// folding alone ran 2.6x the `crc32` streams at 4 KiB on an Intel Xeon and 22 GB/s against the
// hybrid's 30 on an AMD EPYC (Zen 3), where the two cross near 16 KiB.
#define FOLD_MIN 128
#define HYBRID_MIN 16384

static uint32_t table[8][256];
static uint32_t long_shift[4][256];
static uint32_t short_shift[4][256];
static int has_hardware;
static int has_vector;
// Folding constants of the carry-less multiply path, as (x^e mod P) in the reflected 32-bit
// register form (bit 31 - d holds x^d): for a fold across 1024 bits (eight 16-byte lanes) and
// across 128 bits (one lane), each as {high half's constant, low half's constant} (below).
static uint64_t fold1024[2];
static uint64_t fold128[2];
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

// x^e mod P in the reflected register form: x^0 is bit 31, and multiplying by x shifts right,
// folding x^32 back in as the polynomial.
static uint32_t xpow_mod(unsigned e) {
    uint32_t r = 0x80000000u;
    while (e--) r = (r >> 1) ^ ((r & 1) ? POLY : 0);
    return r;
}

// The two constants that fold a 128-bit lane forward by `distance` bits. A lane loaded from 16
// bytes holds bit j as the coefficient of x^(127 - j); its first eight bytes (the low quadword,
// H) stand for H(x)·x^64, its last eight (L) for L(x). A carry-less product of a quadword with a
// 32-bit register-form constant K comes out as (quadword·K)·x^33 in the same 128-bit form, so
// H·x^(64+distance) needs K = x^(distance+31) and L·x^distance needs K = x^(distance-33).
static void fold_constants(uint64_t constants[2], unsigned distance) {
    constants[0] = xpow_mod(distance + 31);
    constants[1] = xpow_mod(distance - 33);
}

// a(x)·b(x) mod P, both in the reflected register form.
static uint32_t multmodp(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b >> 1) ^ ((b & 1) ? POLY : 0);
    }
    return p;
}

// x^(8·2^k) mod P for k = 0...63: the operators that append 2^k zero bytes.
static uint32_t zero_bytes_power[64];

// The operator that appends `length` zero bytes to a raw register: x^(8·length) mod P.
static uint32_t zero_bytes_operator(size_t length) {
    uint32_t op = 0x80000000u;  // x^0
    for (int k = 0; length; k++, length >>= 1) {
        if (length & 1) op = multmodp(zero_bytes_power[k], op);
    }
    return op;
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
    has_vector = has_hardware && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx2") &&
                 __builtin_cpu_supports("vpclmulqdq") ? 1 : 0;
    fold_constants(fold1024, 1024);
    zero_bytes_power[0] = xpow_mod(8);
    for (int k = 1; k < 64; k++) zero_bytes_power[k] = multmodp(zero_bytes_power[k - 1], zero_bytes_power[k - 1]);
    fold_constants(fold128, 128);
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

// Folds `lane` forward (constants {K for its low quadword, K for its high one}) and adds `data`.
__attribute__((target("sse4.2,pclmul")))
static inline __m128i fold(__m128i lane, __m128i constants, __m128i data) {
    __m128i low = _mm_clmulepi64_si128(lane, constants, 0x00);
    __m128i high = _mm_clmulepi64_si128(lane, constants, 0x11);
    return _mm_xor_si128(_mm_xor_si128(low, high), data);
}

__attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))
static inline __m256i fold256(__m256i lane, __m256i constants, __m256i data) {
    __m256i low = _mm256_clmulepi64_epi128(lane, constants, 0x00);
    __m256i high = _mm256_clmulepi64_epi128(lane, constants, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(low, high), data);
}

// The raw register of the 128 bytes that four 32-byte accumulators stand for: folded into one
// 128-bit lane, which two `crc32` words reduce.
__attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))
static inline uint32_t reduce_lanes(__m256i y0, __m256i y1, __m256i y2, __m256i y3) {
    const __m128i near = _mm_set_epi64x((long long)fold128[1], (long long)fold128[0]);
    __m128i lane = fold(_mm256_castsi256_si128(y0), near, _mm256_extracti128_si256(y0, 1));
    lane = fold(lane, near, _mm256_castsi256_si128(y1));
    lane = fold(lane, near, _mm256_extracti128_si256(y1, 1));
    lane = fold(lane, near, _mm256_castsi256_si128(y2));
    lane = fold(lane, near, _mm256_extracti128_si256(y2, 1));
    lane = fold(lane, near, _mm256_castsi256_si128(y3));
    lane = fold(lane, near, _mm256_extracti128_si256(y3, 1));
    uint64_t crc = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)_mm_crc32_u64(crc, (uint64_t)_mm_extract_epi64(lane, 1));
}

// Continues the raw register `crc` over a tail of `length` bytes with `crc32`.
__attribute__((target("sse4.2")))
static inline uint32_t crc32c_finish(uint32_t crc, const unsigned char *next, size_t length) {
    uint64_t joined = crc;
    while (length >= 8) {
        joined = _mm_crc32_u64(joined, load64(next));
        next += 8;
        length -= 8;
    }
    while (length) {
        joined = _mm_crc32_u8((uint32_t)joined, *next++);
        length--;
    }
    return (uint32_t)joined;
}

// `crc32` words per stream per round of the hybrid loop: 5 (120 bytes of the three streams beside
// each 128 folded bytes) balanced the two units best on an AMD EPYC (Zen 3).
#define HYBRID_STEPS 5

// Both units at once for long buffers: the first part folded by VPCLMULQDQ (four 32-byte
// accumulators, 128 bytes a round), the next three parts by the `crc32` instruction (three
// streams, HYBRID_STEPS words each a round), in one loop, so the vector and the scalar pipes
// work side by side; the four results are joined by appending zero bytes (multiplication by
// x^(8n) mod P), then the tail goes through `crc32`. Raw register in and out; `length` is at
// least one round.
__attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))
static uint32_t crc32c_hybrid(uint32_t crc, const unsigned char *next, size_t length) {
    const size_t round = 128 + 3 * 8 * HYBRID_STEPS;
    const size_t rounds = length / round;
    const size_t stream = 8 * HYBRID_STEPS * rounds;
    const unsigned char *b0 = next + 128 * rounds, *b1 = b0 + stream, *b2 = b1 + stream;
    const __m256i far = _mm256_set_epi64x((long long)fold1024[1], (long long)fold1024[0], (long long)fold1024[1],
                                          (long long)fold1024[0]);
#define LOAD(i) _mm256_loadu_si256((const __m256i *)(next + 32 * (i)))
    __m256i y0 = _mm256_xor_si256(LOAD(0), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
    __m256i y1 = LOAD(1), y2 = LOAD(2), y3 = LOAD(3);
    uint64_t s0 = 0, s1 = 0, s2 = 0;
    for (size_t r = 0; r < rounds; r++) {
        if (r > 0) {  // the first round's 128 bytes were loaded above
            y0 = fold256(y0, far, LOAD(4 * r + 0));
            y1 = fold256(y1, far, LOAD(4 * r + 1));
            y2 = fold256(y2, far, LOAD(4 * r + 2));
            y3 = fold256(y3, far, LOAD(4 * r + 3));
        }
        for (int step = 0; step < HYBRID_STEPS; step++) {
            s0 = _mm_crc32_u64(s0, load64(b0));
            s1 = _mm_crc32_u64(s1, load64(b1));
            s2 = _mm_crc32_u64(s2, load64(b2));
            b0 += 8;
            b1 += 8;
            b2 += 8;
        }
    }
#undef LOAD
    uint32_t joined = reduce_lanes(y0, y1, y2, y3);
    const uint32_t shift = zero_bytes_operator(stream);
    joined = multmodp(shift, joined) ^ (uint32_t)s0;
    joined = multmodp(shift, joined) ^ (uint32_t)s1;
    joined = multmodp(shift, joined) ^ (uint32_t)s2;
    return crc32c_finish(joined, b2, length - round * rounds);
}

// VPCLMULQDQ alone for medium buffers: the hybrid's four accumulators of 32 bytes (128 bytes a
// round) folded over the whole buffer, reduced to one 128-bit lane, which two `crc32` words turn
// into the register; the tail (under 128 bytes) goes through `crc32`. No partial checksums to
// join. Raw register in and out; `length` is at least one round.
__attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))
static uint32_t crc32c_fold(uint32_t crc, const unsigned char *next, size_t length) {
    const size_t rounds = length / 128;
    const __m256i far = _mm256_set_epi64x((long long)fold1024[1], (long long)fold1024[0], (long long)fold1024[1],
                                          (long long)fold1024[0]);
#define LOAD(i) _mm256_loadu_si256((const __m256i *)(next + 32 * (i)))
    __m256i y0 = _mm256_xor_si256(LOAD(0), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)crc)));
    __m256i y1 = LOAD(1), y2 = LOAD(2), y3 = LOAD(3);
    for (size_t r = 1; r < rounds; r++) {
        y0 = fold256(y0, far, LOAD(4 * r + 0));
        y1 = fold256(y1, far, LOAD(4 * r + 1));
        y2 = fold256(y2, far, LOAD(4 * r + 2));
        y3 = fold256(y3, far, LOAD(4 * r + 3));
    }
#undef LOAD
    return crc32c_finish(reduce_lanes(y0, y1, y2, y3), next + 128 * rounds, length - 128 * rounds);
}
#endif

uint32_t larder_crc32c_hardware(uint32_t crc, const void *bytes, size_t length) {
    pthread_once(&once, initialize);
#if defined(__x86_64__)
    if (has_vector && length >= HYBRID_MIN) {
        return crc32c_hybrid(crc ^ 0xffffffffu, bytes, length) ^ 0xffffffffu;
    }
    if (has_vector && length >= FOLD_MIN) {
        return crc32c_fold(crc ^ 0xffffffffu, bytes, length) ^ 0xffffffffu;
    }
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

int larder_crc32c_is_vector_accelerated(void) {
    pthread_once(&once, initialize);
    return has_vector;
}

size_t larder_crc32c_vector_threshold(void) {
    return FOLD_MIN;
}

size_t larder_crc32c_hybrid_threshold(void) {
    return HYBRID_MIN;
}
