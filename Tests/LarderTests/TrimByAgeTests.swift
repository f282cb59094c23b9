import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Trims by age (PINCache's `trimToDate`): every entry written, or last used, before a date
/// goes; the rest stays, in memory, on disk and through `Storage`.
@Suite(.timeLimit(.minutes(10)))
struct TrimByAgeTests {
    let folder: TemporaryDirectory
    let clock = TestClock()

    init() throws {
        folder = try TemporaryDirectory("trim-by-age")
    }

    /// `a` written at t0, `b` at t10, `c` at t20; `a` read at t30; `b` overwritten at t40.
    /// Returns the times.
    func writeAndReadInOrder(
        write: (String, Data) throws -> Void, read: (String) throws -> Void
    ) rethrows -> (t0: Date, t10: Date, t20: Date, t30: Date, t40: Date) {
        let t0 = clock.peek
        try write("a", Data("a".utf8))
        clock.advance(by: 10)
        try write("b", Data("b".utf8))
        clock.advance(by: 10)
        try write("c", Data("c".utf8))
        clock.advance(by: 10)
        try read("a")
        clock.advance(by: 10)
        try write("b", Data("b2".utf8))
        return (t0, t0 + 10, t0 + 20, t0 + 30, t0 + 40)
    }

    @Test(arguments: [EvictionPolicy.lru, .s3fifo])
    func memoryTrimsByLastUseAndByWrite(policy: EvictionPolicy) throws {
        let store = try MemoryStore<String, Data>(configuration: .init(now: clock.closure, policy: policy))
        let t = writeAndReadInOrder(
            write: { store.setValue($1, forKey: $0) }, read: { _ = store.value(forKey: $0) })

        #expect(store.trim(toDate: t.t0) == 0, "nothing is older than the first write")
        // Last used: a at t30 (read), b at t40 (overwritten), c at t20.
        #expect(store.trim(toDate: t.t30, by: .lastUsed) == 1)
        #expect(Set(store.keys()) == ["a", "b"])
        // Written: a at t0 (a read is not a write), b at t40.
        #expect(store.trim(toDate: t.t40, by: .written) == 1)
        #expect(store.keys() == ["b"])
        #expect(store.value(forKey: "b") == Data("b2".utf8))
        #expect(store.totalCount == 1 && store.totalCost == 2)
        #expect(store.trim(toDate: t.t40 + 1) == 1)
        #expect(store.totalCount == 0 && store.totalCost == 0)
        #expect(store.invariantViolations().isEmpty)
    }

    @Test func memoryWithTheSystemClockStampsInWallClockTime() throws {
        let store = try MemoryStore<String, Int>()
        store.setValue(1, forKey: "old")
        // The coarse clock ticks every few milliseconds: wait well past one tick.
        Thread.sleep(forTimeInterval: 0.05)
        let cutoff = Date()
        Thread.sleep(forTimeInterval: 0.05)
        store.setValue(2, forKey: "new")

        #expect(store.trim(toDate: Date().addingTimeInterval(-60)) == 0, "nothing is a minute old")
        #expect(store.trim(toDate: cutoff) == 1)
        #expect(store.keys() == ["new"])
        // A hit refreshes the last use, not the write.
        Thread.sleep(forTimeInterval: 0.05)
        let later = Date()
        Thread.sleep(forTimeInterval: 0.05)
        #expect(store.value(forKey: "new") == 2)
        #expect(store.trim(toDate: later, by: .lastUsed) == 0)
        #expect(store.trim(toDate: later, by: .written) == 1)
    }

    func makeDisk(_ name: String = "disk") throws -> DiskStore {
        try DiskStore(directory: folder.url.appendingPathComponent(name)) {
            $0.now = clock.closure
            $0.logHandler = nil
            $0.inlineThreshold = 4
        }
    }

    @Test func diskTrimsByLastUseAndByWriteAndRemovesBlobFiles() throws {
        let store = try makeDisk()
        let t = try writeAndReadInOrder(
            write: { try store.setValue($1, forKey: $0) }, read: { _ = try store.value(forKey: $0) })

        #expect(try store.trim(toDate: t.t0) == 0)
        // The read of `a` is still in the read log, not in the index: the trim ranks it first.
        #expect(try store.trim(toDate: t.t30, by: .lastUsed) == 1)
        #expect(try store.keys() == ["a", "b"])
        #expect(try store.trim(toDate: t.t40, by: .written) == 1)
        #expect(try store.keys() == ["b"])
        #expect(try store.value(forKey: "b") == Data("b2".utf8))
        #expect(store.totalCount == 1)
        #expect(try store.trim(toDate: t.t40 + 1) == 1)
        #expect(store.totalCount == 0 && store.totalSize == 0)
        let blobs = folder.url.appendingPathComponent("disk/blobs")
        #expect(try FileManager.default.subpathsOfDirectory(atPath: blobs.path).isEmpty, "no blob file is left")
        #expect(try store.verify().damagedEntries.isEmpty)
    }

    @Test func aDiskTrimSeesReadsAndWritesOfAnotherStoreOnTheDirectory() throws {
        let first = try makeDisk("shared")
        let second = try makeDisk("shared")
        let start = clock.peek
        for key in 0..<600 { try first.setValue(Data([UInt8(key % 256), 1, 2, 3, 4]), forKey: "k\(key)") }
        clock.advance(by: 60)
        // The second store reads half of them later (logged, then ranked when it writes).
        for key in stride(from: 0, to: 600, by: 2) { _ = try second.value(forKey: "k\(key)") }
        try second.setValue(Data("x".utf8), forKey: "written-later")

        let removed = try first.trim(toDate: start + 30, by: .lastUsed)
        #expect(removed == 300)
        let kept = try first.keys()
        #expect(kept.count == 301)
        #expect(kept.allSatisfy { $0 == "written-later" || Int($0.dropFirst())! % 2 == 0 })
        #expect(try second.value(forKey: "k1") == nil && second.value(forKey: "k2") != nil)
        #expect(try first.trim(toDate: start + 30, by: .written) == 300, "a read is not a write")
        #expect(try first.keys() == ["written-later"])
    }

    func makeStorage() throws -> Storage<String, String> {
        try Storage(transformer: .string) {
            $0.directory = folder.url.appendingPathComponent("storage")
            $0.now = clock.closure
            $0.disk.logHandler = nil
        }
    }

    @Test func storageSparesDiskCopiesOfValuesMemoryServedSinceTheDate() async throws {
        let storage = try makeStorage()
        let events = storage.events()
        let start = clock.peek
        try await storage.setValue("hot", forKey: "hot")
        try await storage.setValue("cold", forKey: "cold")
        clock.advance(by: 60)
        #expect(try await storage.entry(forKey: "hot")?.tier == .memory, "the read never reaches the disk")

        let counts = try await storage.trim(toDate: start + 30)
        #expect(counts == [.memory: 1, .disk: 1])
        #expect(try await storage.value(forKey: "hot", tiers: .disk) == "hot", "memory's read kept the disk copy")
        #expect(try await storage.value(forKey: "cold", tiers: .disk) == nil)
        #expect(try await storage.value(forKey: "cold", tiers: .memory) == nil)

        var seen: Set<StorageEvent> = []
        for await event in events where event.kind == .removed {
            seen.insert(event)
            if seen.count == 2 { break }
        }
        #expect(seen == [.init(kind: .removed, key: "cold", tier: .memory), .init(kind: .removed, key: "cold", tier: .disk)])
    }

    @Test func storageTrimByWriteRemovesMemoryCopiesPromotedFromDisk() throws {
        let storage = try makeStorage()
        let start = clock.peek
        try storage.setValue("v", forKey: "old")
        _ = try storage.removeAll(tiers: .memory)
        clock.advance(by: 60)
        #expect(try storage.entry(forKey: "old")?.tier == .disk)
        #expect(try storage.entry(forKey: "old")?.tier == .memory, "promoted at t60")
        try storage.setValue("w", forKey: "new")

        let counts = try storage.trim(toDate: start + 30, by: .written)
        #expect(counts == [.disk: 1, .memory: 1])
        #expect(try storage.value(forKey: "old") == nil)
        #expect(try storage.value(forKey: "new") == "w")
        #expect(throws: StorageError.self) { try storage.trim(toDate: start, tiers: StorageTiers([StorageTier("nowhere")])) }
    }
}
