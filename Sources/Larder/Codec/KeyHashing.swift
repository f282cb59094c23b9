public import Foundation
import CCrypto

/// The digest that turns a key into a blob file name.
///
/// The disk tier never uses a key as a path: each blob is named after the hex digest of its
/// key, sharded by the digest's first byte. Digests come from OpenSSL's libcrypto; the message
/// digest objects are fetched once per process and reused.
///
/// ```swift
/// KeyHashing.sha1.hexDigest("hello") // "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"
/// ```
public enum KeyHashing: String, Sendable, Hashable, CaseIterable {
    /// MD5: 128-bit digest, 32 hex characters. Fast; collisions are not a concern for cache keys.
    case md5
    /// SHA-1: 160-bit digest, 40 hex characters.
    case sha1
    /// SHA-256: 256-bit digest, 64 hex characters.
    case sha256

    /// The digest length in bytes.
    public var digestLength: Int {
        switch self {
        case .md5: return 16
        case .sha1: return 20
        case .sha256: return 32
        }
    }

    /// The digest of `bytes`.
    ///
    /// - Complexity: O(*n*) in the number of bytes.
    public func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        withDigest(of: bytes) { Array($0) }
    }

    /// The digest of `data`.
    public func digest(_ data: Data) -> [UInt8] {
        data.withUnsafeBytes { digest($0) }
    }

    /// The lowercase hex digest of the UTF-8 bytes of `key`.
    public func hexDigest(_ key: String) -> String {
        var key = key
        return key.withUTF8 { utf8 in
            withDigest(of: UnsafeRawBufferPointer(utf8)) { Self.hex($0) }
        }
    }

    /// Hands the digest to `body` in a stack buffer: no allocation per call.
    package func withDigest<Result>(
        of bytes: UnsafeRawBufferPointer, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer in
            var length: UInt32 = 0
            // The calling thread's context, set up again for this digest: `EVP_Digest` would
            // allocate and free one per call, which costs a 64-byte key a third of its time.
            let context = DigestContexts.current()
            let status = EVP_DigestInit_ex2(context, MessageDigests.shared.type(for: self), nil) == 1
                && EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1
                && EVP_DigestFinal_ex(context, buffer.baseAddress, &length) == 1
            // These only fail on allocation failure or an unknown digest: our own bug.
            precondition(status && Int(length) == digestLength, "digest failed for \(self)")
            return body(UnsafeBufferPointer(rebasing: buffer[0..<digestLength]))
        }
    }

    static func hex(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
            digits.withUTF8Buffer { table in
                for (index, byte) in bytes.enumerated() {
                    buffer[index * 2] = table[Int(byte >> 4)]
                    buffer[index * 2 + 1] = table[Int(byte & 0x0F)]
                }
            }
            return bytes.count * 2
        }
    }
}

/// The libcrypto message digest objects, fetched once (an implicit fetch per call is slow in
/// OpenSSL 3). They are immutable after fetching and libcrypto documents them as thread-safe.
private final class MessageDigests: @unchecked Sendable {
    static let shared = MessageDigests()

    private let md5: OpaquePointer
    private let sha1: OpaquePointer
    private let sha256: OpaquePointer

    private init() {
        func fetch(_ name: String) -> OpaquePointer {
            guard let type = EVP_MD_fetch(nil, name, nil) else {
                fatalError("libcrypto does not provide the \(name) digest")
            }
            return type
        }
        md5 = fetch("MD5")
        sha1 = fetch("SHA1")
        sha256 = fetch("SHA256")
    }

    func type(for hashing: KeyHashing) -> OpaquePointer {
        switch hashing {
        case .md5: return md5
        case .sha1: return sha1
        case .sha256: return sha256
        }
    }
}

/// One digest context per thread, created on the thread's first digest and freed when the
/// thread exits. A context is used by one call at a time (its thread's), from set-up to result.
private enum DigestContexts {
    /// The thread-specific slot; its destructor frees a thread's context at the thread's exit.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { context in
            EVP_MD_CTX_free(OpaquePointer(context))
        }
        precondition(status == 0, "pthread_key_create failed (\(status))")
        return key
    }()

    /// The calling thread's context.
    static func current() -> OpaquePointer {
        if let context = pthread_getspecific(key) { return OpaquePointer(context) }
        guard let context = EVP_MD_CTX_new() else { fatalError("libcrypto could not allocate a digest context") }
        precondition(pthread_setspecific(key, UnsafeRawPointer(context)) == 0, "pthread_setspecific failed")
        return context
    }
}
