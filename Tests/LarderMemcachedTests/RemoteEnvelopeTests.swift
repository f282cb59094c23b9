#if Memcached
import LarderRemoteCore
import Foundation
import Larder
@testable import LarderMemcached
import Testing

@Suite(.timeLimit(.minutes(10)))
struct RemoteEnvelopeTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    // MARK: - Envelope

    @Test(arguments: [0, 1, 100, 600, 70_000])
    func roundTripsPayloadsWithExpiryAndMetadata(size: Int) throws {
        let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 % 7) })
        let bytes = try RemoteEnvelope.encode(
            key: "k", payload: payload, expirationDate: now.addingTimeInterval(10), metadata: Data([1, 2]), compress: true)
        let decoded = try RemoteEnvelope.decode(bytes, key: "k", maxPayloadLength: 1 << 20).get()
        #expect(decoded.payload == payload)
        #expect(decoded.metadata == Data([1, 2]))
        #expect(decoded.expirationDate == now.addingTimeInterval(10))
        if size >= 600 { #expect(bytes.count < size, "compressible payloads are gzipped") }
    }

    @Test func anotherKeysEnvelopeIsRefused() throws {
        let bytes = try RemoteEnvelope.encode(key: "a", payload: Data("x".utf8), expirationDate: nil, metadata: nil, compress: false)
        #expect(throws: RemoteEnvelope.Rejection.otherKey) { try RemoteEnvelope.decode(bytes, key: "b", maxPayloadLength: 100).get() }
    }

    @Test func everyBitFlipAndEveryTruncationIsRefused() throws {
        let bytes = try RemoteEnvelope.encode(
            key: "k", payload: Data("hello, remote".utf8), expirationDate: now, metadata: Data([9]), compress: false)
        for index in bytes.indices {
            for bit in 0..<8 {
                var flipped = bytes
                flipped[index] ^= 1 << bit
                guard case .failure = RemoteEnvelope.decode(flipped, key: "k", maxPayloadLength: 100) else {
                    Issue.record("a flip of bit \(bit) at byte \(index) was accepted")
                    return
                }
            }
        }
        for length in 0..<bytes.count {
            guard case .failure = RemoteEnvelope.decode(bytes.prefix(length), key: "k", maxPayloadLength: 100) else {
                Issue.record("a truncation to \(length) bytes was accepted")
                return
            }
        }
    }

    @Test(arguments: ["", "plain text another client wrote", "LRDR", "\u{0}\u{1}\u{2}"])
    func foreignBytesAreRefused(text: String) {
        #expect(throws: RemoteEnvelope.Rejection.self) { try RemoteEnvelope.decode(Data(text.utf8), key: "k", maxPayloadLength: 100).get() }
    }

    // MARK: - Keys

    @Test(arguments: ["", "a", String(repeating: "é", count: 5_000), "with space", "new\nline", "nul\u{0}", "😀🍕", "\r\n"])
    func everyKeyBecomesAValidFixedLengthMemcachedKey(key: String) throws {
        let remote = try RemoteKey(namespace: "app:")
        let made = remote.key(for: key)
        #expect(MetaCommand.isValidKey(made))
        #expect(made.count == 4 + 64)
    }

    @Test(arguments: ["with space", String(repeating: "n", count: 151), "tab\t"])
    func badNamespacesAreRefused(namespace: String) {
        #expect(throws: StorageError.self) { try RemoteKey(namespace: namespace) }
    }

    // MARK: - TTL

    @Test func mapsExpiriesToMemcachedTTLs() {
        func ttl(_ seconds: Double?) -> RemoteTTL {
            RemoteTTL.make(expirationDate: seconds.map { now.addingTimeInterval($0) }, now: now)
        }
        #expect(ttl(nil) == .token(0))                       // never
        #expect(ttl(0.4) == .token(1))                       // rounded up, never 0
        #expect(ttl(0.000_001) == .token(1))
        #expect(ttl(1) == .token(1))
        #expect(ttl(59) == .token(59))
        #expect(ttl(59.2) == .token(60))
        #expect(ttl(2_592_000) == .token(2_592_000))         // 30 days: still relative
        #expect(ttl(2_592_001) == .token(1_800_000_000 + 2_592_001)) // beyond: absolute
        #expect(ttl(0) == .expired)
        #expect(ttl(-5) == .expired)
    }
}
#endif
