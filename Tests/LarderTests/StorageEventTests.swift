import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Change events: every observer sees each write and removal with its key and tier, and a slow
/// observer loses its oldest events instead of slowing the storage.
@Suite(.timeLimit(.minutes(10)))
struct StorageEventTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("events")
    }

    func makeStorage() throws -> Storage<String, String> {
        try Storage(configuration: .init(directory: folder.url.appendingPathComponent("c")), transformer: .string)
    }

    @Test func everyObserverSeesWritesAndRemovalsWithKeyAndTier() async throws {
        let storage = try makeStorage()
        let first = storage.events()
        let second = storage.events()
        try await storage.setValue("v", forKey: "a")
        try await storage.setValue("w", forKey: "a", tiers: .memory)   // clears the disk's older value
        try await storage.removeValue(forKey: "a")
        let expected: [StorageEvent] = [
            .init(kind: .written, key: "a", tier: .disk), .init(kind: .written, key: "a", tier: .memory),
            .init(kind: .removed, key: "a", tier: .disk), .init(kind: .written, key: "a", tier: .memory),
            .init(kind: .removed, key: "a", tier: .memory),
        ]
        for events in [first, second] {
            var seen: [StorageEvent] = []
            for await event in events {
                seen.append(event)
                if seen.count == expected.count { break }
            }
            #expect(seen == expected)
        }
    }

    @Test func aSlowObserverLosesItsOldestEventsAndNeverBlocksTheStorage() async throws {
        let storage = try Storage<String, String>(transformer: .string)
        let slow = storage.events(bufferSize: 4)
        // 100 writes complete although nobody reads the events
        for index in 0..<100 { try await storage.setValue("v", forKey: "k\(index)") }
        #expect(slow.droppedCount == 96)
        var seen: [String] = []
        for await event in slow {
            seen.append(event.key)
            if seen.count == 4 { break }
        }
        #expect(seen == ["k96", "k97", "k98", "k99"])
    }

    @Test func anObserverThatStopsIsForgotten() async throws {
        let storage = try Storage<String, String>(transformer: .string)
        do {
            let events = storage.events()
            try await storage.setValue("v", forKey: "k")
            for await _ in events { break }
        }
        // The broadcaster drops a finished observer: no events are kept for it
        for _ in 0..<50 where storage.broadcaster.hasObservers { await Task.yield() }
        #expect(!storage.broadcaster.hasObservers)
    }

    /// The first `count` events of `events` whose kind is not `.written`, or those that came
    /// within 5 seconds (a timeout ends the sequence: cancelling its iteration finishes it).
    static func removals(_ events: StorageEvents, count: Int) async -> [StorageEvent] {
        let box = UncheckedSendableBox(events)
        return await withTaskGroup(of: [StorageEvent]?.self) { group in
            group.addTask {
                var seen: [StorageEvent] = []
                for await event in box.value where event.kind != .written {
                    seen.append(event)
                    if seen.count == count { break }
                }
                return seen
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next()!
            group.cancelAll()
            if let first { return first }
            return await group.next()!!
        }
    }

    @Test func evictionsAndExpirationsOfBothTiersAreReported() async throws {
        // Given a storage whose memory holds 2 entries and whose disk holds 3, on a test clock
        let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("e"))
        configuration.now = clock.closure
        configuration.memory.countLimit = 2
        configuration.memory.overflowTrimRatio = 0
        configuration.disk.countLimit = 3
        configuration.disk.overflowTrimRatio = 0
        configuration.logHandler = nil
        let storage = try Storage(configuration: configuration, transformer: .string)
        let events = storage.events()

        // When a fourth key is written, memory and disk evict their least recently used
        for key in ["a", "b", "c", "d"] { try await storage.setValue(key, forKey: key) }
        #expect(await Self.removals(events, count: 3) == [
            .init(kind: .evicted, key: "a", tier: .memory), .init(kind: .evicted, key: "a", tier: .disk),
            .init(kind: .evicted, key: "b", tier: .memory),
        ])

        // And entries expire: found by a read in memory, and by removeExpired on disk
        try await storage.setValue("e", forKey: "e", expiry: .seconds(10))
        _ = await Self.removals(events, count: 2)  // the writes of "e" evict "c" from memory and "b" from disk
        clock.advance(by: 11)
        #expect(try await storage.value(forKey: "e", tiers: .memory) == nil)
        #expect(try await storage.removeExpired(tiers: .disk) == 1)
        #expect(await Self.removals(events, count: 2) == [
            .init(kind: .expired, key: "e", tier: .memory), .init(kind: .expired, key: "e", tier: .disk),
        ])
        // A disk read that finds an entry expired reports it too
        try await storage.setValue("f", forKey: "f", expiry: .seconds(5), tiers: .disk)
        clock.advance(by: 6)
        #expect(try await storage.value(forKey: "f") == nil)
        #expect(await Self.removals(events, count: 1) == [.init(kind: .expired, key: "f", tier: .disk)])
    }

    @Test func withoutObserversNoKeysAreKept() throws {
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("n"))
        configuration.memory.countLimit = 1
        configuration.disk.countLimit = 1
        let storage = try Storage(configuration: configuration, transformer: .string)
        for index in 0..<50 { try storage.setValue("v", forKey: "k\(index)") }
        let disk = try #require(storage.disk)
        #expect(disk.state.withLock { $0.removalEvents.isEmpty })
        #expect(storage.memory.statistics.countEvictions == 49)
        #expect(disk.statistics.evictions == 49)
    }
}
