import BenchmarkSupport
import Foundation
import Larder

/// Larder's codecs on the inputs baseline.c gives raw zlib and OpenSSL: gzip level 6 of 100 KiB of
/// text (`ncodec` compressions, 10× as many decompressions), CRC32 of 100 KiB (50×), and the three
/// digests of 64 B (`ndigest`) and 64 KiB (`ndigest / 200`).
func runCodecCases(_ arguments: Arguments) throws {
    let ncodec = arguments.int("ncodec", default: 300)
    let ndigest = arguments.int("ndigest", default: 500_000)

    let text = Workload.text(102_400)
    var packed = Data()
    let compressSeconds = try measure {
        for i in 0..<ncodec {
            let output = try Gzip.compress(text, level: 6)
            if i == 0 { packed = output }
        }
    }
    report("gzip.compress(100KiB text)", "larder", ops: ncodec, seconds: compressSeconds)

    let inflateOps = ncodec * 10
    let decompressSeconds = try measure {
        for _ in 0..<inflateOps {
            let output = try Gzip.decompress(packed, maxSize: text.count)
            guard output.count == text.count else { fail("gzip round trip") }
        }
    }
    report("gzip.decompress(100KiB text)", "larder", ops: inflateOps, seconds: decompressSeconds)
    guard try Gzip.decompress(packed, maxSize: text.count) == text else { fail("gzip round trip") }

    let crcOps = ncodec * 50
    var sink: UInt32 = 0
    let crcSeconds = measure {
        for _ in 0..<crcOps { sink &+= CRC32.checksum(text) }
    }
    consume(sink)
    report("crc32(100KiB)", "larder", ops: crcOps, seconds: crcSeconds)

    // CRC-32C, the disk tier's checksum since schema 2 (SSE4.2 where the CPU has it): 100 KiB
    // and 1 MiB, reported as ops/s and as GB/s.
    for (bytes, label) in [(text.count, "100KiB"), (1 << 20, "1MiB")] {
        let data = bytes == text.count ? text : Workload.randomBytes(bytes)
        let ops = crcOps * text.count / bytes * 4
        var sum: UInt32 = 0
        let seconds = measure {
            for _ in 0..<ops { sum &+= CRC32C.checksum(data) }
        }
        consume(sum)
        report("crc32c(\(label))", "larder", ops: ops, seconds: seconds)
        report("crc32c(\(label)) GB/s", "larder", value: Double(ops * bytes) / seconds / 1e9, unit: "GB/s")
    }

    for hashing in KeyHashing.allCases {
        for (bytes, label, ops) in [(64, "64B", ndigest), (65_536, "64KiB", max(1, ndigest / 200))] {
            let data = Workload.randomBytes(bytes)
            var last: [UInt8] = []
            let seconds = measure {
                for _ in 0..<ops { last = hashing.digest(data) }
            }
            consume(last)
            report("\(hashing.rawValue)(\(label))", "larder", ops: ops, seconds: seconds)
        }
    }
}
