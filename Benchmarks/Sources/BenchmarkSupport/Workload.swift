import Foundation

/// SplitMix64: a tiny seeded generator, bit-for-bit the one in `Baselines/baseline.c` and
/// `Baselines/diskcache_runner.py`, so that every contender sees the same bytes and keys.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    @inlinable
    public init(seed: UInt64) { state = seed }

    @inlinable
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The shared disk and codec workload of `compare.sh` (see Benchmarks/README.md, "Workload").
public enum Workload {
    /// Value sizes of the disk cases, their labels and the `key=value` argument that holds their
    /// operation count.
    public static let sizes: [(bytes: Int, label: String, countKey: String)] = [
        (100, "100B", "n100"),
        (4096, "4KiB", "n4k"),
        (102_400, "100KiB", "n100k"),
        (1_048_576, "1MiB", "n1m"),
    ]

    /// Incompressible bytes: SplitMix64(seed 42), little-endian, 8 bytes at a time.
    public static func randomBytes(_ count: Int, seed: UInt64 = 42) -> Data {
        var generator = SplitMix64(seed: seed)
        var bytes = [UInt8](repeating: 0, count: count)
        var i = 0
        while i < count {
            let v = generator.next()
            for j in 0..<8 where i + j < count { bytes[i + j] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(j))) }
            i += 8
        }
        return Data(bytes)
    }

    /// Compressible text: words picked by SplitMix64(seed 7), separated by spaces, cut at `count`.
    public static func text(_ count: Int) -> Data {
        let words = ["cache", "larder", "swift", "linux", "sqlite", "blob", "index", "memory", "disk",
                     "evict", "gzip", "value", "key", "hash", "expiry", "trim"].map { Array($0.utf8) }
        var generator = SplitMix64(seed: 7)
        var bytes = [UInt8]()
        bytes.reserveCapacity(count)
        while bytes.count < count {
            let word = words[Int(generator.next() % 16)]
            for byte in word where bytes.count < count { bytes.append(byte) }
            if bytes.count < count { bytes.append(0x20) }
        }
        return Data(bytes)
    }

    /// The value written for key `i`: `base` with its first 8 bytes replaced by `i` (little-endian).
    public static func value(base: Data, index i: Int) -> Data {
        var value = base
        value.withUnsafeMutableBytes { raw in
            for j in 0..<min(8, raw.count) { raw[j] = UInt8(truncatingIfNeeded: UInt64(i) >> (8 * UInt64(j))) }
        }
        return value
    }

    /// Read order: `i * 7919 mod n` when that is a permutation, plain order otherwise.
    @inlinable
    public static func readIndex(_ i: Int, _ n: Int) -> Int {
        gcd(7919, n) == 1 ? (i * 7919) % n : i
    }

    @inlinable
    static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    /// Keys of the disk cases: `k100B-17`, and `miss100B-17` for keys that are never written.
    public static func key(_ prefix: String, _ label: String, _ i: Int) -> String { "\(prefix)\(label)-\(i)" }
}
