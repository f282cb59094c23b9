#if Memcached || Redis
package import Foundation
import Larder
package import NIOCore

/// The bytes Larder stores in a remote cache (memcached, Redis) for one value: a header that proves whose value it is
/// and that it arrived whole, then the caller's metadata and the payload.
///
/// Layout (big-endian): magic `"LRDR"` (4), version (1), encoding (1: 0 raw, 1 gzip), key
/// digest (16: the first 16 bytes of the SHA-256 of the original key), expiration in
/// milliseconds since 1970 (8, 0 = never), original payload length (4), metadata length (4),
/// CRC-32C (4) of every other byte of the envelope; then metadata, then the stored payload.
/// The digest is repeated in the envelope although the memcached key is derived from it, so a
/// value copied or written under another key is a miss, never another key's value.
package struct RemoteEnvelope: Equatable {
    package static let magic: [UInt8] = Array("LRDR".utf8)
    /// `magic` as a big-endian word.
    package static let magicWord: UInt32 = 0x4C52_4452
    package static let version: UInt8 = 1
    package static let headerLength = 4 + 1 + 1 + 16 + 8 + 4 + 4 + 4
    package static let crcOffset = headerLength - 4

    package var keyDigest: KeyDigest
    package var expirationDate: Date?
    package var metadata: Data?
    package var payload: Data

    /// The first 16 bytes of SHA-256 over the key's UTF-8.
    package static func digest(of key: String) -> KeyDigest {
        RemoteKey.withSHA256(of: key) { KeyDigest($0) }
    }

    /// Encodes `payload`, gzipped when that helps and `compress` allows.
    package static func encode(
        key: String, payload: Data, expirationDate: Date?, metadata: Data?, compress: Bool
    ) throws -> Data {
        var buffer = ByteBuffer()
        try encode(digest: digest(of: key), payload: payload, expirationDate: expirationDate,
                   metadata: metadata, compress: compress, into: &buffer)
        return Data(buffer.readableBytesView)
    }

    /// Appends the envelope of `payload` to `buffer` (the bytes memcached stores), for the key
    /// whose 16-byte digest is `digest`; returns the envelope's length.
    @discardableResult
    package static func encode(
        digest: KeyDigest, payload: Data, expirationDate: Date?, metadata: Data?, compress: Bool,
        into buffer: inout ByteBuffer
    ) throws -> Int {
        var encoding: UInt8 = 0
        var stored = payload
        if compress, payload.count >= 512, let zipped = try? Gzip.compress(payload), zipped.count < payload.count * 9 / 10 {
            encoding = 1
            stored = zipped
        }
        guard payload.count <= Int(UInt32.max), (metadata?.count ?? 0) <= Int(UInt32.max) else {
            throw StorageError.encoding("value too large for a remote envelope")
        }
        let start = buffer.writerIndex
        buffer.reserveCapacity(minimumWritableBytes: headerLength + (metadata?.count ?? 0) + stored.count)
        buffer.writeBytes(magic)
        buffer.writeInteger(version)
        buffer.writeInteger(encoding)
        buffer.writeInteger(digest.first, endianness: .little)
        buffer.writeInteger(digest.second, endianness: .little)
        let millis = expirationDate.map { max(1, Int64(($0.timeIntervalSince1970 * 1000).rounded(.up))) } ?? 0
        buffer.writeInteger(UInt64(bitPattern: millis), endianness: .big)
        buffer.writeInteger(UInt32(payload.count), endianness: .big)
        buffer.writeInteger(UInt32(metadata?.count ?? 0), endianness: .big)
        buffer.writeInteger(UInt32(0))
        if let metadata { buffer.writeBytes(metadata) }
        buffer.writeBytes(stored)
        let length = buffer.writerIndex - start
        let crc = buffer.withUnsafeReadableBytes { raw in
            checksum(of: UnsafeRawBufferPointer(rebasing: raw[(start - buffer.readerIndex)...]))
        }
        buffer.setInteger(crc, at: start + crcOffset, endianness: .big)
        return length
    }

    /// Why bytes were refused.
    package enum Rejection: Error, Equatable {
        case foreign, truncated, checksum, otherKey, badPayload
    }

    /// Decodes and checks bytes read for `key`.
    package static func decode(_ bytes: Data, key: String, maxPayloadLength: Int) -> Result<RemoteEnvelope, Rejection> {
        let digest = digest(of: key)
        return bytes.withUnsafeBytes { decode($0, digest: digest, maxPayloadLength: maxPayloadLength) }
    }

    /// Decodes and checks the bytes read for the key whose 16-byte digest is `digest`, copying
    /// the payload out once.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, digest: KeyDigest, maxPayloadLength: Int
    ) -> Result<RemoteEnvelope, Rejection> {
        guard bytes.count >= headerLength else {
            return .failure(!bytes.isEmpty && bytes.elementsEqual(magic.prefix(min(bytes.count, 4))) ? .truncated : .foreign)
        }
        func load<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
            T(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
        }
        // Whole-word compares: these checks run for every remote hit.
        guard load(UInt32.self, at: 0) == magicWord, bytes[4] == version, bytes[5] <= 1 else { return .failure(.foreign) }
        guard checksum(of: bytes) == load(UInt32.self, at: crcOffset) else { return .failure(.checksum) }
        guard KeyDigest(UnsafeRawBufferPointer(rebasing: bytes[6..<22])) == digest else { return .failure(.otherKey) }
        let millis = Int64(bitPattern: load(UInt64.self, at: 22))
        let originalLength = Int(load(UInt32.self, at: 30))
        let metadataLength = Int(load(UInt32.self, at: 34))
        guard metadataLength <= bytes.count - headerLength, originalLength <= maxPayloadLength else {
            return .failure(.badPayload)
        }
        let metadata = metadataLength > 0
            ? Data(UnsafeRawBufferPointer(rebasing: bytes[headerLength..<(headerLength + metadataLength)])) : nil
        var payload = Data(UnsafeRawBufferPointer(rebasing: bytes[(headerLength + metadataLength)...]))
        if bytes[5] == 1 {
            guard let inflated = try? Gzip.decompress(payload, maxSize: originalLength) else { return .failure(.badPayload) }
            payload = inflated
        }
        guard payload.count == originalLength else { return .failure(.badPayload) }
        let expiration = millis == 0 ? nil : Date(timeIntervalSince1970: Double(millis) / 1000)
        return .success(RemoteEnvelope(keyDigest: digest, expirationDate: expiration, metadata: metadata, payload: payload))
    }

    /// CRC-32C of the envelope with its checksum field skipped.
    private static func checksum(of raw: UnsafeRawBufferPointer) -> UInt32 {
        let head = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<crcOffset]))
        return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[headerLength...]), continuing: head)
    }
}

/// The memcached key for a cache key: `namespace` + the lowercase hex SHA-256 of the key's
/// UTF-8 (64 characters), so any key (10 KB, spaces, newlines, NUL, emoji) becomes a valid
/// memcached key of fixed length.
package struct RemoteKey {
    /// The namespace's bytes, copied into every key.
    private let prefix: [UInt8]

    /// Checks a namespace once: printable ASCII without spaces, at most 150 bytes.
    package init(namespace: String) throws {
        guard namespace.utf8.count <= 150, namespace.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw StorageError.invalidConfiguration(
                field: "namespace", value: namespace, reason: "must be at most 150 printable ASCII bytes without spaces")
        }
        prefix = Array(namespace.utf8)
    }

    package func key(for cacheKey: String) -> [UInt8] {
        resolve(cacheKey).key
    }

    /// The memcached key of `cacheKey` and the 16-byte digest its envelope carries, from one
    /// SHA-256 of the key (hashed into a stack buffer: the key's bytes are the one allocation).
    package func resolve(_ cacheKey: String) -> (key: [UInt8], digest: KeyDigest) {
        let prefix = prefix
        return Self.withSHA256(of: cacheKey) { sha in
            // Written in place (no per-byte append and its capacity checks): the namespace,
            // then two hex digits per digest byte.
            let key = [UInt8](unsafeUninitializedCapacity: prefix.count + 2 * sha.count) { buffer, count in
                var index = prefix.count
                _ = UnsafeMutableBufferPointer(rebasing: buffer[..<index]).initialize(from: prefix)
                let hexDigits: StaticString = "0123456789abcdef"
                hexDigits.withUTF8Buffer { digits in
                    for byte in sha {
                        buffer[index] = digits[Int(byte >> 4)]
                        buffer[index + 1] = digits[Int(byte & 0x0F)]
                        index += 2
                    }
                }
                count = index
            }
            return (key, KeyDigest(UnsafeRawBufferPointer(sha)))
        }
    }

    /// Hands SHA-256 of the key's UTF-8 to `body`.
    package static func withSHA256<Result>(of cacheKey: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        var cacheKey = cacheKey
        return cacheKey.withUTF8 { KeyHashing.sha256.withDigest(of: UnsafeRawBufferPointer($0), body) }
    }
}

/// The first 16 bytes of SHA-256 over a cache key's UTF-8, which every envelope carries to
/// prove whose value it is: two words, so that a resolved key carries it without an
/// allocation and a read compares it in two instructions. `first` and `second` are the bytes
/// read as little-endian words, the order they are written in.
package struct KeyDigest: Equatable, Sendable {
    package var first: UInt64
    package var second: UInt64

    /// The digest in the first 16 bytes of `bytes` (which holds at least 16).
    package init(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= 16, "KeyDigest: a key digest is 16 bytes")
        first = UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self))
        second = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.init(UnsafeRawBufferPointer(bytes))
    }
}

/// How an ``Expiry`` becomes memcached's TTL token.
package enum RemoteTTL: Equatable {
    /// Already expired: nothing to store.
    case expired
    /// The `T` token: 0 = never; 1…2,592,000 = seconds; above = absolute unix time.
    case token(Int64)

    /// memcached reads a TTL above 30 days as a unix time.
    package static let relativeLimit: Int64 = 60 * 60 * 24 * 30

    /// Maps an expiration date seen at `now`: seconds rounded up, never 0 for a finite date
    /// (0 means "never" to memcached), absolute unix time beyond 30 days.
    package static func make(expirationDate: Date?, now: Date) -> RemoteTTL {
        guard let expirationDate else { return .token(0) }
        let remaining = expirationDate.timeIntervalSince(now)
        guard remaining > 0 else { return .expired }
        let seconds = Int64(min(remaining.rounded(.up), 9e15))
        if seconds <= relativeLimit { return .token(max(1, seconds)) }
        return .token(Int64(min(expirationDate.timeIntervalSince1970.rounded(.up), 9e15)))
    }
}

#endif
