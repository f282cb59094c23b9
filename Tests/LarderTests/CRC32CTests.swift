import Foundation
import Testing
@testable import Larder

@Suite struct CRC32CTests {
    enum Path: String, CaseIterable, Sendable {
        case dispatched, hardware, portable

        func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
            bytes.withUnsafeBytes { buffer in
                switch self {
                case .dispatched: CRC32C.checksum(buffer, continuing: crc)
                case .hardware: CRC32C.hardwareChecksum(buffer, continuing: crc)
                case .portable: CRC32C.portableChecksum(buffer, continuing: crc)
                }
            }
        }
    }

    /// Known answers: the check value of the CRC catalogue and the iSCSI vectors of RFC 3720
    /// (B.4), which the RFC lists byte-reversed (0x8A9136AA there is stored little-endian).
    static let vectors: [(name: String, bytes: [UInt8], crc: UInt32)] = [
        ("empty", [], 0),
        ("123456789", Array("123456789".utf8), 0xE306_9283),
        ("32 zeros", [UInt8](repeating: 0, count: 32), 0x8A91_36AA),
        ("32 0xFF", [UInt8](repeating: 0xFF, count: 32), 0x62A8_AB43),
        ("32 ascending", (0..<32).map { UInt8($0) }, 0x46DD_794E),
        ("32 descending", (0..<32).map { UInt8(31 - $0) }, 0x113F_DB5C),
        ("iSCSI read", [
            0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
            0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ], 0xD996_3A56),
    ]

    @Test(arguments: Path.allCases)
    func knownVectors(path: Path) {
        for vector in Self.vectors {
            #expect(path.checksum(vector.bytes) == vector.crc, "\(vector.name) via \(path)")
        }
    }

    @Test func hardwareAndPortableAgreeAtEveryLengthAndOffset() {
        // Given pseudo-random bytes, every length 0...1,100 at offsets 0...7 (unaligned starts):
        // the `crc32` path below 128 bytes, then folding rounds 1 to 8 with every tail length
        var generator = SystemRandomNumberGenerator()
        let pool = (0..<1_200).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for offset in 0..<8 {
            for length in 0...1_100 {
                let bytes = Array(pool[offset..<offset + length])
                let portable = Path.portable.checksum(bytes)
                #expect(Path.hardware.checksum(bytes) == portable, "length \(length) offset \(offset)")
                #expect(Path.dispatched.checksum(bytes) == portable)
            }
        }
    }

    @Test(arguments: [767, 768, 769, 24_575, 24_576, 24_577, 100_000, 1 << 20])
    func hardwareAndPortableAgreeAcrossTheInterleavedBlockSizes(length: Int) {
        // Lengths around 3 × 256 and 3 × 8192, where the three-stream loops start and stop
        var state: UInt64 = UInt64(length)
        let bytes = (0..<length).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        #expect(Path.hardware.checksum(bytes) == Path.portable.checksum(bytes))
    }

    @Test(arguments: [
        127, 128, 129, 255, 256, 4_096, 4_156, 8_192, 16_383, 16_384, 16_385, 16_616, 16_617, 65_536 - 1, 100 * 1_024,
        (1 << 20) + 13, 3 << 20,
    ])
    func theVectorPathsAgreeWithThePortableOneAtTheirEdgesOffsetsAndContinuations(length: Int) {
        // Given pseudo-random bytes around the folding's threshold (128 bytes), the hybrid's
        // (16 KiB), the hybrid's round of 248 bytes (16,616 = 67 rounds) and long buffers, at
        // unaligned starts and continuing from a non-zero checksum (which both paths fold into
        // their first lane)
        var state: UInt64 = UInt64(length) &* 2_862_933_555_777_941_757
        let bytes = (0..<length + 7).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        for offset in [0, 1, 7] {
            let slice = Array(bytes[offset..<offset + length])
            for start: UInt32 in [0, 0xDEAD_BEEF] {
                #expect(Path.hardware.checksum(slice, continuing: start) == Path.portable.checksum(slice, continuing: start),
                        "length \(length) offset \(offset) start \(start)")
            }
        }
        // And a damaged byte anywhere in the folded part or the three streams changes the sum
        var damaged = Array(bytes[0..<length])
        let sum = Path.hardware.checksum(damaged)
        for position in [0, length / 5, length / 2, length - 1] {
            damaged[position] ^= 0x10
            #expect(Path.hardware.checksum(damaged) != sum, "flip at \(position)")
            damaged[position] ^= 0x10
        }
    }

    @Test func theVectorPathIsUsedWhereTheCPUHasCarrylessMultiply() throws {
        #expect(CRC32C.vectorThreshold == 128)
        #expect(CRC32C.hybridThreshold == 16_384)
        #if arch(x86_64)
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let words = Set(flags.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init))
        let expected = ["sse4_2", "pclmulqdq", "avx2", "vpclmulqdq"].allSatisfy(words.contains)
        #expect(CRC32C.isVectorAccelerated == expected)
        #else
        #expect(!CRC32C.isVectorAccelerated)
        #endif
    }

    @Test(arguments: Path.allCases)
    func continuingEqualsOnePass(path: Path) {
        // The checksum of a + b equals the checksum of b continued from that of a
        let bytes = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        for split in [0, 1, 7, 8, 255, 768, 4_999, 5_000] {
            let first = path.checksum(Array(bytes[..<split]))
            #expect(path.checksum(Array(bytes[split...]), continuing: first) == path.checksum(bytes), "split \(split)")
        }
    }

    @Test func hardwareIsUsedOnX86WithSSE42() throws {
        #if arch(x86_64)
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        if flags.contains(" sse4_2") { #expect(CRC32C.isHardwareAccelerated) }
        #endif
    }

    @Test func dataOverloadMatchesTheBufferOne() {
        #expect(CRC32C.checksum(Data("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum(Data()) == 0)
        #expect(CRC32C.checksum(Data("6789".utf8), continuing: CRC32C.checksum(Data("12345".utf8))) == 0xE306_9283)
    }
}
