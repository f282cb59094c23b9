public import Foundation
import CZlib

/// gzip compression through zlib, with a decompressor that refuses to grow past a bound.
///
/// ```swift
/// let packed = try Gzip.compress(Data(repeating: 65, count: 10_000), level: 6)
/// let unpacked = try Gzip.decompress(packed, maxSize: 10_000)
/// ```
public enum Gzip {
    /// Compresses `data` into one gzip member.
    ///
    /// - Parameters:
    ///   - data: The bytes to compress.
    ///   - level: 0 (store) through 9 (best), or -1 for zlib's default (6).
    /// - Returns: The gzip stream.
    /// - Throws: ``StorageError/compression(code:message:)`` when zlib fails, or
    ///   ``StorageError/invalidInput(_:)`` for a level outside -1...9.
    public static func compress(_ data: Data, level: Int = 6) throws -> Data {
        guard (-1...9).contains(level) else {
            throw StorageError.invalidInput("gzip level \(level) is outside -1...9")
        }
        var stream = z_stream()
        var status = czlib_deflate_init_gzip(&stream, Int32(level))
        guard status == Z_OK else { throw zlibError(status, stream) }
        defer { deflateEnd(&stream) }

        let bound = Int(deflateBound(&stream, uLong(data.count)))
        var output = Data(count: bound)
        let produced: Int = try data.withUnsafeBytes { input in
            try output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(
                    mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
                stream.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self)
                var remainingIn = input.count
                var remainingOut = out.count
                // avail_in/avail_out are 32-bit: feed the input in chunks.
                repeat {
                    let chunkIn = min(remainingIn, Int(UInt32.max))
                    let chunkOut = min(remainingOut, Int(UInt32.max))
                    stream.avail_in = uInt(chunkIn)
                    stream.avail_out = uInt(chunkOut)
                    let flush = remainingIn == chunkIn ? Z_FINISH : Z_NO_FLUSH
                    status = deflate(&stream, flush)
                    remainingIn -= chunkIn - Int(stream.avail_in)
                    remainingOut -= chunkOut - Int(stream.avail_out)
                    if status == Z_STREAM_END { break }
                    guard status == Z_OK || status == Z_BUF_ERROR, remainingOut > 0 else {
                        throw zlibError(status, stream)
                    }
                } while true
                return out.count - remainingOut
            }
        }
        output.count = produced
        return output
    }

    /// Decompresses one gzip member, refusing output larger than `maxSize` bytes.
    ///
    /// - Parameters:
    ///   - data: A complete gzip stream.
    ///   - maxSize: The largest output accepted; a stream that inflates past it throws (no
    ///     gzip bombs).
    /// - Returns: The original bytes.
    /// - Throws: ``StorageError/compression(code:message:)`` for a damaged, truncated or
    ///   oversized stream.
    public static func decompress(_ data: Data, maxSize: Int) throws -> Data {
        guard maxSize >= 0 else {
            throw StorageError.invalidInput("gzip maxSize \(maxSize) is negative")
        }
        var stream = z_stream()
        var status = czlib_inflate_init_gzip(&stream)
        guard status == Z_OK else { throw zlibError(status, stream) }
        defer { inflateEnd(&stream) }

        // One spare byte tells "exactly maxSize" from "more than maxSize". The buffer grows
        // geometrically up to that bound, so a small stream claiming a huge size costs nothing.
        let capacity = maxSize == Int.max ? maxSize : maxSize + 1
        var output = Data(count: min(capacity, max(4096, data.count.multipliedReportingOverflow(by: 4).partialValue)))
        var produced = 0
        try data.withUnsafeBytes { input in
            stream.next_in = UnsafeMutablePointer(
                mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
            var remainingIn = input.count
            while true {
                if produced == output.count {
                    guard output.count < capacity else {
                        throw StorageError.compression(
                            code: Z_BUF_ERROR,
                            message: "gzip stream inflates past the limit of \(maxSize) bytes")
                    }
                    let doubled = output.count.multipliedReportingOverflow(by: 2)
                    output.count = doubled.overflow ? capacity : min(capacity, doubled.partialValue)
                }
                let chunkIn = min(remainingIn, Int(UInt32.max))
                let chunkOut = min(output.count - produced, Int(UInt32.max))
                stream.avail_in = uInt(chunkIn)
                stream.avail_out = uInt(chunkOut)
                status = output.withUnsafeMutableBytes { out in
                    stream.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self).advanced(by: produced)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let consumed = chunkIn - Int(stream.avail_in)
                let written = chunkOut - Int(stream.avail_out)
                remainingIn -= consumed
                produced += written
                if status == Z_STREAM_END { break }
                if status == Z_BUF_ERROR && consumed == 0 && written == 0 && produced < output.count {
                    throw StorageError.compression(code: Z_BUF_ERROR, message: "gzip stream is truncated")
                }
                guard status == Z_OK || status == Z_BUF_ERROR else { throw zlibError(status, stream) }
            }
            if remainingIn != 0 {
                throw StorageError.compression(code: Z_DATA_ERROR, message: "trailing bytes after the gzip stream")
            }
        }
        if produced > maxSize {
            throw StorageError.compression(
                code: Z_BUF_ERROR, message: "gzip stream inflates past the limit of \(maxSize) bytes")
        }
        output.count = produced
        return output
    }

    private static func zlibError(_ status: Int32, _ stream: z_stream) -> StorageError {
        let message = stream.msg.map { String(cString: $0) } ?? String(cString: zError(status))
        return .compression(code: status, message: message)
    }
}
