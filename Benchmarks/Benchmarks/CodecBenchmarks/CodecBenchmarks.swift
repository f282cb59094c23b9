import Benchmark
import BenchmarkSupport
import Foundation
import Larder

// Codecs of the disk tier: gzip (zlib), CRC32 (zlib) and key hashing (libcrypto).
// Run: cd Benchmarks && swift package benchmark --target CodecBenchmarks
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 3,
        maxDuration: .seconds(1),
        maxIterations: 1_000
    )

    let text100K = Workload.text(102_400)
    let random100K = Workload.randomBytes(102_400)
    let packed100K = try! Gzip.compress(text100K, level: 6)

    // MARK: - Gzip

    for level in [1, 6, 9] {
        Benchmark("Gzip.compress(100KiB text, level \(level))") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try Gzip.compress(text100K, level: level))
            }
        }
    }
    Benchmark("Gzip.compress(100KiB random, level 6)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try Gzip.compress(random100K, level: 6))
        }
    }
    Benchmark("Gzip.decompress(100KiB text)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try Gzip.decompress(packed100K, maxSize: text100K.count))
        }
    }

    // MARK: - CRC32

    for (label, size) in [("4KiB", 4096), ("100KiB", 102_400)] {
        let data = Workload.randomBytes(size)
        Benchmark("CRC32.checksum(\(label))", configuration: .init(scalingFactor: .kilo)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(CRC32.checksum(data))
            }
        }
    }

    // MARK: - Key hashing

    let key = "https://images.example.com/photos/2026/11/21/larder-benchmark-key-0001.jpg?w=640"
    let block64K = Workload.randomBytes(65_536)
    for hashing in KeyHashing.allCases {
        Benchmark("KeyHashing.hexDigest(\(hashing.rawValue), URL key)", configuration: .init(scalingFactor: .kilo)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(hashing.hexDigest(key))
            }
        }
        Benchmark("KeyHashing.digest(\(hashing.rawValue), 64KiB)") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(hashing.digest(block64K))
            }
        }
    }
}
