import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Exact least-recently-used order through `Storage` when every read falls in one millisecond:
/// the order of reads, not their timestamps, decides what the disk and memory tiers evict.
@Suite(.timeLimit(.minutes(10)))
struct StorageLRUOrderTests {
    let folder: TemporaryDirectory
    /// A clock that never moves: every read and write shares one millisecond.
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("lru-order")
    }

    @Test(arguments: 0..<8)
    func readsWithinOneMillisecondDecideWhatTheDiskEvicts(round: Int) throws {
        // Given four entries on disk, read through the storage in a shuffled order
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("r\(round)"))
        configuration.now = clock.closure
        configuration.disk.countLimit = 4
        configuration.disk.overflowTrimRatio = 0.5
        let storage = try Storage(configuration: configuration, transformer: .string)
        let keys = ["k0", "k1", "k2", "k3"]
        for key in keys { try storage.setValue(key, forKey: key, tiers: .disk) }
        var generator = SplitMix64(seed: UInt64(round) &+ 17)
        let order = keys.shuffled(using: &generator)
        for key in order { #expect(try storage.value(forKey: key, tiers: .disk) == key) }
        // When a fifth write overflows the limit and trims to 2
        try storage.setValue("k4", forKey: "k4", tiers: .disk)
        // Then the new entry and the one read last survive, every time
        #expect(try storage.keys(withPrefix: "k", tiers: .disk) == [order[3], "k4"].sorted())
    }

    @Test(arguments: 0..<8)
    func readsDecideWhatMemoryEvicts(round: Int) throws {
        var configuration = Storage<String, String>.Configuration()
        configuration.now = clock.closure
        configuration.memory.countLimit = 4
        let storage = try Storage(configuration: configuration, transformer: .string)
        let keys = ["k0", "k1", "k2", "k3"]
        for key in keys { try storage.setValue(key, forKey: key) }
        var generator = SplitMix64(seed: UInt64(round) &+ 91)
        let order = keys.shuffled(using: &generator)
        for key in order { #expect(try storage.value(forKey: key) == key) }
        try storage.setValue("k4", forKey: "k4")
        // The least recently read entry is the one evicted
        #expect(try storage.value(forKey: order[0]) == nil)
        for key in order.dropFirst() { #expect(try storage.value(forKey: key) == key) }
    }
}
