public import Foundation
import CLarderChecksum

/// The CRC-32C (Castagnoli) checksum the disk tier stores for every value written by schema 2.
///
/// Runs on the CPU's SSE4.2 `crc32` instruction where there is one (three interleaved streams
/// for long buffers, tens of GB/s). Where the CPU also has carry-less multiply (VPCLMULQDQ),
/// buffers of 128 bytes and more are folded with it, and from 16 KiB on folded beside the `crc32`
/// streams. Elsewhere a portable table-driven implementation runs; all give the same result.
///
/// ```swift
/// CRC32C.checksum(Data("123456789".utf8)) // 0xE3069283
/// ```
public enum CRC32C {
    /// The CRC-32C of `bytes`, continuing from `crc` (the checksum of the bytes before them).
    ///
    /// - Complexity: O(*n*) in the number of bytes.
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return larder_crc32c(crc, base, bytes.count)
    }

    /// The CRC-32C of `data`, continuing from `crc`.
    public static func checksum(_ data: Data, continuing crc: UInt32 = 0) -> UInt32 {
        data.withUnsafeBytes { checksum($0, continuing: crc) }
    }

    /// Whether this CPU computes the checksum in hardware.
    public static var isHardwareAccelerated: Bool {
        larder_crc32c_is_hardware_accelerated() != 0
    }

    /// Whether buffers of ``vectorThreshold`` bytes and more use the carry-less multiply
    /// instructions (VPCLMULQDQ with AVX2), and from ``hybridThreshold`` on beside `crc32`.
    static var isVectorAccelerated: Bool {
        larder_crc32c_is_vector_accelerated() != 0
    }

    /// The length from which buffers are folded with VPCLMULQDQ where the CPU has it.
    static var vectorThreshold: Int { larder_crc32c_vector_threshold() }

    /// The length from which the folding runs beside three `crc32` streams.
    static var hybridThreshold: Int { larder_crc32c_hybrid_threshold() }

    /// The portable table-driven implementation, whatever the CPU (for tests).
    static func portableChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return larder_crc32c_portable(crc, base, bytes.count)
    }

    /// The hardware implementation (the portable one on a CPU without SSE4.2), for tests.
    static func hardwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return larder_crc32c_hardware(crc, base, bytes.count)
    }
}
