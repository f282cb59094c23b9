import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Change events: every observer sees each write and removal with its key and tier, and a slow
/// observer loses its oldest events instead of slowing the storage.
@Suite(.timeLimit(.minutes(5)))
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
}
