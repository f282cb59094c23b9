public import Foundation

/// Self-describing values for the fault tests: the parent can tell whose bytes a read returned
/// and whether they are intact. Shared by the crash helper executable and the test target.
public enum CrashPayload {
    /// The seeded generator the payloads are made with.
    public typealias Generator = SplitMix64

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
