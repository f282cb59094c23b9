import Foundation
import Testing
@testable import Larder

@Suite struct KeyHashingTests {
    // Known vectors (RFC 1321, FIPS 180).
    @Test(arguments: [
        (KeyHashing.md5, "", "d41d8cd98f00b204e9800998ecf8427e"),
        (KeyHashing.md5, "abc", "900150983cd24fb0d6963f7d28e17f72"),
        (KeyHashing.md5, "message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (KeyHashing.sha1, "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (KeyHashing.sha1, "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (KeyHashing.sha256, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ])
    func hexDigestMatchesKnownVector(hashing: KeyHashing, input: String, expected: String) {
        #expect(hashing.hexDigest(input) == expected)
    }

    @Test(arguments: KeyHashing.allCases)
    func digestLengthMatchesAlgorithm(hashing: KeyHashing) {
        #expect(hashing.digest(Data("x".utf8)).count == hashing.digestLength)
        #expect(hashing.hexDigest("x").count == hashing.digestLength * 2)
    }

    @Test func eachThreadsContextGivesTheKnownDigestsWhateverTheAlgorithmBefore() async {
        // Given the known digests of "abc"
        let expected: [KeyHashing: String] = [
            .md5: "900150983cd24fb0d6963f7d28e17f72",
            .sha1: "a9993e364706816aba3e25717850c26c9cd0d89d",
            .sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ]
        // When eight threads at once each digest it 3,000 times, switching algorithm every time
        // (each thread reuses one context, set up again for each digest), with a digest of a
        // longer input in between
        let wrong = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var mismatches = 0
            for step in 0..<3_000 {
                let hashing = KeyHashing.allCases[(step + thread) % 3]
                if hashing.hexDigest("abc") != expected[hashing] { mismatches += 1 }
                _ = hashing.hexDigest(String(repeating: "x", count: 1_000 + step))
            }
            wrong.withLock { $0 += mismatches }
        }
        // Then every digest was right
        #expect(wrong.withLock { $0 } == 0)
        // And a digest written into bytes matches too, on a new thread
        let bytes = await Task.detached { KeyHashing.sha256.digest(Data("abc".utf8)) }.value
        #expect(bytes.map { String(format: "%02x", $0) }.joined() == expected[.sha256])
    }

    @Test func keysWithNulAndSlashHashToPlainHex() {
        let digest = KeyHashing.sha1.hexDigest("../a/\u{0}b")
        #expect(digest.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(digest != KeyHashing.sha1.hexDigest("../a/"))
    }
}

@Suite struct CRC32Tests {
    @Test func matchesTheStandardCheckValue() {
        #expect(CRC32.checksum(Data("123456789".utf8)) == 0xCBF4_3926)
    }

    @Test func emptyInputIsZero() {
        #expect(CRC32.checksum(Data()) == 0)
    }
}

@Suite struct GzipTests {
    static let samples: [Data] = [
        Data(),
        Data("a".utf8),
        Data(repeating: 0x41, count: 100_000),
        Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }),
    ]

    @Test(arguments: samples)
    func roundTripsAtEveryLevel(sample: Data) throws {
        for level in [-1, 0, 1, 6, 9] {
            let packed = try Gzip.compress(sample, level: level)
            #expect(packed.prefix(2) == Data([0x1F, 0x8B]))
            #expect(try Gzip.decompress(packed, maxSize: sample.count) == sample)
        }
    }

    @Test func compressesRepetitiveData() throws {
        let packed = try Gzip.compress(Data(repeating: 7, count: 1 << 20))
        #expect(packed.count < 4_096)
    }

    @Test func refusesOutputLargerThanTheBound() throws {
        // Given a small stream that inflates to 10 MiB (a gzip bomb for a 1 KiB bound)
        let bomb = try Gzip.compress(Data(repeating: 0, count: 10 << 20), level: 9)
        #expect(bomb.count < 20_000)
        // Then decompressing with a smaller bound throws instead of allocating
        #expect(throws: StorageError.self) { try Gzip.decompress(bomb, maxSize: 1_024) }
        // And the exact bound is accepted
        #expect(try Gzip.decompress(bomb, maxSize: 10 << 20).count == 10 << 20)
    }

    @Test func hugeClaimedSizeDoesNotPreallocate() throws {
        let packed = try Gzip.compress(Data("small".utf8))
        #expect(try Gzip.decompress(packed, maxSize: Int.max) == Data("small".utf8))
    }

    @Test func rejectsTruncatedAndDamagedStreams() throws {
        let sample = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 * 31) })
        let packed = try Gzip.compress(sample)
        for cut in stride(from: 0, to: packed.count, by: max(1, packed.count / 40)) {
            #expect(throws: StorageError.self) { try Gzip.decompress(packed.prefix(cut), maxSize: sample.count) }
        }
        var damaged = packed
        damaged[damaged.count - 6] ^= 0xFF // inside the CRC32 trailer
        #expect(throws: StorageError.self) { try Gzip.decompress(damaged, maxSize: sample.count) }
        #expect(throws: StorageError.self) { try Gzip.decompress(Data("not gzip".utf8), maxSize: 100) }
    }

    @Test func rejectsTrailingGarbage() throws {
        var packed = try Gzip.compress(Data("abc".utf8))
        packed.append(contentsOf: [1, 2, 3])
        #expect(throws: StorageError.self) { try Gzip.decompress(packed, maxSize: 100) }
    }

    @Test func rejectsAnInvalidLevel() {
        #expect(throws: StorageError.self) { try Gzip.compress(Data(), level: 10) }
    }
}
