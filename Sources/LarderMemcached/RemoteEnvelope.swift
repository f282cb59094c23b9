#if Memcached
import Foundation
import Larder

/// The bytes Larder stores in memcached for one value: a header that proves whose value it is
/// and that it arrived whole, then the caller's metadata and the payload.
///
/// Layout (big-endian): magic `"LRDR"` (4), version (1), encoding (1: 0 raw, 1 gzip), key
/// digest (16: the first 16 bytes of the SHA-256 of the original key), expiration in
/// milliseconds since 1970 (8, 0 = never), original payload length (4), metadata length (4),
/// CRC-32C (4) of every other byte of the envelope; then metadata, then the stored payload.
/// The digest is repeated in the envelope although the memcached key is derived from it, so a
/// value copied or written under another key is a miss, never another key's value.
struct RemoteEnvelope: Equatable {
    static let magic: [UInt8] = Array("LRDR".utf8)
    static let version: UInt8 = 1
    static let headerLength = 4 + 1 + 1 + 16 + 8 + 4 + 4 + 4
    static let crcOffset = headerLength - 4

    var keyDigest: [UInt8]
    var expirationDate: Date?
    var metadata: Data?
    var payload: Data

    /// The first 16 bytes of SHA-256 over the key's UTF-8.
    static func digest(of key: String) -> [UInt8] {
        Array(KeyHashing.sha256.digest(Data(key.utf8)).prefix(16))
    }

    /// Encodes `payload`, gzipped when that helps and `compress` allows.
    static func encode(
        key: String, payload: Data, expirationDate: Date?, metadata: Data?, compress: Bool
    ) throws -> Data {
        var encoding: UInt8 = 0
        var stored = payload
        if compress, payload.count >= 512, let zipped = try? Gzip.compress(payload), zipped.count < payload.count * 9 / 10 {
            encoding = 1
            stored = zipped
        }
        guard payload.count <= Int(UInt32.max), (metadata?.count ?? 0) <= Int(UInt32.max) else {
            throw StorageError.encoding("value too large for a remote envelope")
        }
        var bytes = Data(capacity: headerLength + (metadata?.count ?? 0) + stored.count)
        bytes.append(contentsOf: magic)
        bytes.append(version)
        bytes.append(encoding)
        bytes.append(contentsOf: digest(of: key))
        let millis = expirationDate.map { max(1, Int64(($0.timeIntervalSince1970 * 1000).rounded(.up))) } ?? 0
        bytes.appendBigEndian(UInt64(bitPattern: millis))
        bytes.appendBigEndian(UInt32(payload.count))
        bytes.appendBigEndian(UInt32(metadata?.count ?? 0))
        bytes.append(contentsOf: [0, 0, 0, 0])
        if let metadata { bytes.append(metadata) }
        bytes.append(stored)
        let crc = checksum(of: bytes)
        bytes.replaceSubrange(crcOffset..<(crcOffset + 4), with: crc.bigEndianBytes)
        return bytes
    }

    /// Why bytes were refused.
    enum Rejection: Error, Equatable {
        case foreign, truncated, checksum, otherKey, badPayload
    }

    /// Decodes and checks bytes read for `key`.
    static func decode(_ bytes: Data, key: String, maxPayloadLength: Int) -> Result<RemoteEnvelope, Rejection> {
        let bytes = Data(bytes) // index from 0
        guard bytes.count >= headerLength else {
            return .failure(bytes.starts(with: magic.prefix(min(bytes.count, 4))) && !bytes.isEmpty ? .truncated : .foreign)
        }
        guard bytes.starts(with: magic), bytes[4] == version, bytes[5] <= 1 else { return .failure(.foreign) }
        let stored = bytes.readBigEndian(UInt32.self, at: crcOffset)
        guard checksum(of: bytes) == stored else { return .failure(.checksum) }
        guard Array(bytes[6..<22]) == digest(of: key) else { return .failure(.otherKey) }
        let millis = Int64(bitPattern: bytes.readBigEndian(UInt64.self, at: 22))
        let originalLength = Int(bytes.readBigEndian(UInt32.self, at: 30))
        let metadataLength = Int(bytes.readBigEndian(UInt32.self, at: 34))
        guard metadataLength <= bytes.count - headerLength, originalLength <= maxPayloadLength else {
            return .failure(.badPayload)
        }
        let metadata = metadataLength > 0 ? bytes.subdata(in: headerLength..<(headerLength + metadataLength)) : nil
        var payload = bytes.subdata(in: (headerLength + metadataLength)..<bytes.count)
        if bytes[5] == 1 {
            guard let inflated = try? Gzip.decompress(payload, maxSize: originalLength) else { return .failure(.badPayload) }
            payload = inflated
        }
        guard payload.count == originalLength else { return .failure(.badPayload) }
        let expiration = millis == 0 ? nil : Date(timeIntervalSince1970: Double(millis) / 1000)
        return .success(RemoteEnvelope(keyDigest: Array(bytes[6..<22]), expirationDate: expiration, metadata: metadata, payload: payload))
    }

    /// CRC-32C of the envelope with its checksum field skipped.
    private static func checksum(of bytes: Data) -> UInt32 {
        bytes.withUnsafeBytes { raw in
            let head = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<crcOffset]))
            return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[headerLength...]), continuing: head)
        }
    }
}

/// The memcached key for a cache key: `namespace` + the lowercase hex SHA-256 of the key's
/// UTF-8 (64 characters), so any key (10 KB, spaces, newlines, NUL, emoji) becomes a valid
/// memcached key of fixed length.
struct RemoteKey {
    let namespace: String

    /// Checks a namespace once: printable ASCII without spaces, at most 150 bytes.
    init(namespace: String) throws {
        guard namespace.utf8.count <= 150, namespace.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw StorageError.invalidConfiguration(
                field: "namespace", value: namespace, reason: "must be at most 150 printable ASCII bytes without spaces")
        }
        self.namespace = namespace
    }

    func key(for cacheKey: String) -> [UInt8] {
        Array(namespace.utf8) + Array(KeyHashing.sha256.hexDigest(cacheKey).utf8)
    }
}

/// How an ``Expiry`` becomes memcached's TTL token.
enum RemoteTTL: Equatable {
    /// Already expired: nothing to store.
    case expired
    /// The `T` token: 0 = never; 1…2,592,000 = seconds; above = absolute unix time.
    case token(Int64)

    /// memcached reads a TTL above 30 days as a unix time.
    static let relativeLimit: Int64 = 60 * 60 * 24 * 30

    /// Maps an expiration date seen at `now`: seconds rounded up, never 0 for a finite date
    /// (0 means "never" to memcached), absolute unix time beyond 30 days.
    static func make(expirationDate: Date?, now: Date) -> RemoteTTL {
        guard let expirationDate else { return .token(0) }
        let remaining = expirationDate.timeIntervalSince(now)
        guard remaining > 0 else { return .expired }
        let seconds = Int64(min(remaining.rounded(.up), 9e15))
        if seconds <= relativeLimit { return .token(max(1, seconds)) }
        return .token(Int64(min(expirationDate.timeIntervalSince1970.rounded(.up), 9e15)))
    }
}

extension Data {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        append(contentsOf: value.bigEndianBytes)
    }

    func readBigEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        var value: T = 0
        for byte in self[offset..<(offset + MemoryLayout<T>.size)] { value = value << 8 | T(byte) }
        return value
    }
}

extension FixedWidthInteger {
    var bigEndianBytes: [UInt8] {
        (0..<MemoryLayout<Self>.size).reversed().map { UInt8(truncatingIfNeeded: self >> ($0 * 8)) }
    }
}
#endif
