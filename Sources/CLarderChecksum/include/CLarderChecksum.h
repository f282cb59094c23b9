#ifndef CLARDER_CHECKSUM_H
#define CLARDER_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `length` bytes at `bytes`,
/// continuing from `crc` (0 to start). Uses the SSE4.2 `crc32` instruction (three interleaved
/// streams for long buffers) when the CPU has it, carry-less multiply folding (VPCLMULQDQ) from
/// 128 bytes on where the CPU has that too, else the portable table-driven code.
uint32_t larder_crc32c(uint32_t crc, const void *bytes, size_t length);

/// The portable table-driven (slicing-by-8) CRC-32C, whatever the CPU.
uint32_t larder_crc32c_portable(uint32_t crc, const void *bytes, size_t length);

/// The hardware CRC-32C; falls back to the portable code when the CPU lacks SSE4.2.
uint32_t larder_crc32c_hardware(uint32_t crc, const void *bytes, size_t length);

/// 1 when this CPU runs the hardware CRC-32C, else 0.
int larder_crc32c_is_hardware_accelerated(void);

/// 1 when buffers of `larder_crc32c_vector_threshold()` bytes and more use the carry-less multiply
/// instructions (VPCLMULQDQ, AVX2), else 0.
int larder_crc32c_is_vector_accelerated(void);

/// The length from which buffers are folded with VPCLMULQDQ (where the CPU has it).
size_t larder_crc32c_vector_threshold(void);

/// The length from which the folding runs beside three `crc32` streams (the hybrid path).
size_t larder_crc32c_hybrid_threshold(void);

#endif
