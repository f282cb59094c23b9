import Foundation
import Larder

/// The demo's clock: it starts at the real time and moves only when the demo advances it, so
/// TTL expiry shows without sleeping.
final class DemoClock: Sendable {
    private let current: Locked<Date>
    let start: Date

    init(start: Date = Date()) {
        self.start = start
        current = Locked(start)
    }

    var now: Date { current.withLock { $0 } }

    /// Seconds since the demo started, for the report.
    var elapsed: TimeInterval { now.timeIntervalSince(start) }

    func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// The closure the stores' configurations take.
    var function: @Sendable () -> Date { { self.now } }
}

/// Deterministic bytes for the demo (SplitMix64): random-looking data gzip cannot shrink.
struct DemoBytes {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` incompressible bytes.
    mutating func random(_ count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < count {
                var word = next()
                let chunk = min(8, count - offset)
                withUnsafeBytes(of: &word) { buffer.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: chunk) }
                offset += chunk
            }
        }
        return data
    }

    /// About `count` bytes of English-like text, which gzip shrinks well.
    static func text(_ count: Int) -> Data {
        let sentence = "Larder keeps hot values in memory and the rest on disk, with TTLs, gzip and LRU eviction. "
        var text = ""
        var line = 0
        while text.utf8.count < count {
            line += 1
            text += "\(line). " + sentence
        }
        return Data(text.utf8.prefix(count))
    }
}
