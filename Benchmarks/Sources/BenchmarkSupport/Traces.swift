import Foundation

/// Zipf-distributed ranks over `0..<count`: rank `r` (0-based) is drawn with probability
/// proportional to `1 / (r + 1)^alpha`, by binary search in a precomputed CDF.
public struct ZipfGenerator: Sendable {
    public let count: Int
    public let alpha: Double
    private let cdf: [Double]
    private var random: SplitMix64

    public init(count: Int, alpha: Double, seed: UInt64) {
        precondition(count > 0)
        self.count = count
        self.alpha = alpha
        var cdf = [Double](repeating: 0, count: count)
        var sum = 0.0
        for rank in 0..<count {
            sum += 1 / pow(Double(rank + 1), alpha)
            cdf[rank] = sum
        }
        for rank in 0..<count { cdf[rank] /= sum }
        cdf[count - 1] = 1
        self.cdf = cdf
        random = SplitMix64(seed: seed)
    }

    public mutating func next() -> Int {
        // 53 random bits -> uniform in [0, 1).
        let u = Double(random.next() >> 11) * 0x1p-53
        var low = 0
        var high = count - 1
        while low < high {
            let mid = (low + high) / 2
            if cdf[mid] <= u { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

/// A named request trace: a sequence of key ids in `0..<keySpace`.
public struct Trace: Sendable {
    public let name: String
    public let keySpace: Int
    public let requests: [Int]

    public init(name: String, keySpace: Int, requests: [Int]) {
        self.name = name
        self.keySpace = keySpace
        self.requests = requests
    }

    /// Zipf(alpha) over `keySpace` keys. Ranks are scattered over the key ids by a fixed
    /// multiplicative permutation, so popular keys are not neighbours.
    public static func zipf(alpha: Double, keySpace: Int, length: Int, seed: UInt64) -> Trace {
        var zipf = ZipfGenerator(count: keySpace, alpha: alpha, seed: seed)
        let requests = (0..<length).map { _ in scatter(zipf.next(), keySpace) }
        return Trace(name: "zipf-\(alpha)", keySpace: keySpace, requests: requests)
    }

    /// Zipf(alpha) with a one-pass scan every `period` requests: `scanLength` consecutive key ids,
    /// each requested once, continuing where the previous scan stopped (a backup or a crawler).
    public static func zipfWithScans(
        alpha: Double, keySpace: Int, length: Int, period: Int, scanLength: Int, seed: UInt64
    ) -> Trace {
        var zipf = ZipfGenerator(count: keySpace, alpha: alpha, seed: seed)
        var requests: [Int] = []
        requests.reserveCapacity(length)
        var scanPosition = 0
        while requests.count < length {
            for _ in 0..<period where requests.count < length { requests.append(scatter(zipf.next(), keySpace)) }
            for _ in 0..<scanLength where requests.count < length {
                requests.append(scanPosition % keySpace)
                scanPosition += 1
            }
        }
        return Trace(name: "zipf-\(alpha)-scans", keySpace: keySpace, requests: requests)
    }

    /// Zipf(alpha) whose popular set moves: after each `phaseLength` requests the rank-to-key
    /// mapping shifts by `keySpace / phases`, so yesterday's hot keys turn cold at once.
    public static func workingSetShift(
        alpha: Double, keySpace: Int, length: Int, phases: Int, seed: UInt64
    ) -> Trace {
        var zipf = ZipfGenerator(count: keySpace, alpha: alpha, seed: seed)
        let phaseLength = max(1, length / phases)
        let shift = keySpace / phases
        let requests = (0..<length).map { i in
            scatter((zipf.next() + (i / phaseLength) * shift) % keySpace, keySpace)
        }
        return Trace(name: "zipf-\(alpha)-shift", keySpace: keySpace, requests: requests)
    }

    /// A fixed permutation of `0..<n`: multiply by a large prime coprime to `n`.
    static func scatter(_ rank: Int, _ n: Int) -> Int {
        let prime = 1_000_003
        return prime % n == 0 ? rank : (rank * prime) % n
    }
}
