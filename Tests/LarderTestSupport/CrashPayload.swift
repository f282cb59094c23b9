public import Foundation

/// Self-describing values for the fault tests: the parent can tell whose bytes a read returned
/// and whether they are intact. Shared by the crash helper executable and the test target.
public enum CrashPayload {
    /// SplitMix64: a small seeded generator, identical in every process.
    public struct Generator: Sendable {
        public var state: UInt64
        public init(seed: UInt64) { state = seed }
        public mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// "<key> <generation>\n" followed by `size` bytes derived from both.
    public static func make(key: String, generation: Int, size: Int) -> Data {
        var data = Data("\(key) \(generation)\n".utf8)
        var generator = Generator(seed: UInt64(truncatingIfNeeded: generation) &* 31 &+ UInt64(key.utf8.count))
        // Half the payload repeats so gzip has something to do; half is noise.
        for index in 0..<size {
            data.append(index % 2 == 0 ? UInt8(truncatingIfNeeded: index / 64) : UInt8(truncatingIfNeeded: generator.next()))
        }
        return data
    }
}

extension CrashPayload {
    /// The key and generation a payload claims, if its bytes are exactly what `make` produces
    /// for them; `nil` for anything damaged, truncated or foreign.
    public static func verify(_ data: Data) -> (key: String, generation: Int)? {
        guard let newline = data.firstIndex(of: 0x0A) else { return nil }
        let header = String(decoding: data[data.startIndex..<newline], as: UTF8.self)
        let parts = header.split(separator: " ")
        guard parts.count == 2, let generation = Int(parts[1]) else { return nil }
        let key = String(parts[0])
        let bodySize = data.count - (newline - data.startIndex) - 1
        guard make(key: key, generation: generation, size: bodySize) == data else { return nil }
        return (key, generation)
    }
}
