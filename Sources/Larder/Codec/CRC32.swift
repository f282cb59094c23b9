public import Foundation
import CZlib

/// The CRC-32 checksum (zlib's `crc32`) that the disk tier stores for every value.
///
/// ```swift
/// CRC32.checksum(Data("123456789".utf8)) // 0xCBF43926
/// ```
public enum CRC32 {
    /// The CRC-32 of `bytes`.
    ///
    /// - Complexity: O(*n*) in the number of bytes.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        let crc = crc32_z(0, base.assumingMemoryBound(to: Bytef.self), z_size_t(bytes.count))
        return UInt32(truncatingIfNeeded: crc)
    }

    /// The CRC-32 of `data`.
    public static func checksum(_ data: Data) -> UInt32 {
        data.withUnsafeBytes { checksum($0) }
    }
}
