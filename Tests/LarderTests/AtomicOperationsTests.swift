import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Insert-if-absent, remove-and-return and expiry-only updates: in memory, on disk (across
/// threads and across real processes) and through `Storage`.
@Suite(.timeLimit(.minutes(10)))
struct AtomicOperationsTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("atomic")
    }

    func makeDisk(_ name: String = "disk", inlineThreshold: Int = 2_048) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configuration.inlineThreshold = inlineThreshold
        return try DiskStore(directory: folder.url.appendingPathComponent(name), configuration: configuration)
    }

    func makeStorage(directory: Bool = true, additionalTiers: [any CacheTier] = []) throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration()
        configuration.directory = directory ? folder.url.appendingPathComponent("storage") : nil
        configuration.now = clock.closure
        configuration.logHandler = nil
        return try Storage(configuration: configuration, additionalTiers: additionalTiers, transformer: .string)
    }

    /// The paths of the files under `directory/blobs`, recursively.
    func blobFiles(_ directory: String) -> [String] {
        StoreChecks.blobFiles(in: folder.url.appendingPathComponent(directory))
    }

    /// Runs `body(i)` on `count` threads released together; returns the results in order.
    static func race<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) throws -> [T] {
        let results = Locked([Int: Result<T, any Error>]())
        let start = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread.detachNewThread {
                start.wait()
                let result = Result { try body(index) }
                results.withLock { $0[index] = result }
                group.leave()
            }
        }
        for _ in 0..<count { start.signal() }
        group.wait()
        return try (0..<count).map { index in try results.withLock { $0[index]! }.get() }
    }

    // MARK: - Memory

    @Test func memoryInsertStoresOnlyWhenAbsentOrExpired() throws {
        let store = try MemoryStore<String, Int> { $0.now = clock.closure }
        #expect(store.insertValue(1, forKey: "a", expiry: .seconds(10)))
        #expect(!store.insertValue(2, forKey: "a"))
        #expect(store.value(forKey: "a") == 1)
        clock.advance(by: 11)
        #expect(store.insertValue(3, forKey: "a"))
        #expect(store.value(forKey: "a") == 3)
    }

    @Test func memoryInsertRacingOnOneKeyHasOneWinner() throws {
        let store = try MemoryStore<String, Int>()
        for round in 0..<20 {
            let key = "key-\(round)"
            let won = try Self.race(8) { store.insertValue($0, forKey: key) }
            #expect(won.filter { $0 }.count == 1)
            #expect(store.value(forKey: key) == won.firstIndex(of: true))
        }
    }

    @Test func memoryTakeReturnsTheValueOnceAndNeverAnExpiredOne() throws {
        let store = try MemoryStore<String, Int> { $0.now = clock.closure }
        store.setValue(7, forKey: "a")
        let taken = try Self.race(8) { _ in store.takeValue(forKey: "a") }
        #expect(taken.compactMap { $0 } == [7])
        #expect(store.value(forKey: "a") == nil)
        store.setValue(8, forKey: "b", expiry: .seconds(5))
        clock.advance(by: 6)
        #expect(store.takeValue(forKey: "b") == nil)
        #expect(store.totalCount == 0)
    }

    @Test func memorySetExpiryMovesTheDeadlineOnly() throws {
        let store = try MemoryStore<String, Int> { $0.now = clock.closure }
        store.setValue(1, forKey: "a", expiry: .seconds(10))
        store.setValue(2, forKey: "b")
        #expect(store.setExpiry(.seconds(100), forKey: "a"))
        #expect(store.setExpiry(.seconds(20), forKey: "b"))
        #expect(!store.setExpiry(.seconds(20), forKey: "missing"))
        clock.advance(by: 50)
        #expect(store.value(forKey: "a") == 1, "the longer expiry holds")
        #expect(store.value(forKey: "b") == nil, "a never-expiring entry can be given a deadline")
        #expect(store.setExpiry(.never, forKey: "a"))
        clock.advance(by: 1_000)
        #expect(store.value(forKey: "a") == 1)
        #expect(store.setExpiry(.date(clock.peek.addingTimeInterval(-1)), forKey: "a"), "a past deadline removes")
        #expect(store.value(forKey: "a") == nil)
        // The expiry order is kept: the earliest entry is still the one that expires first.
        store.setValue(3, forKey: "c", expiry: .seconds(30))
        store.setValue(4, forKey: "d", expiry: .seconds(60))
        #expect(store.setExpiry(.seconds(10), forKey: "d"))
        clock.advance(by: 15)
        #expect(store.removeExpired() == 1)
        #expect(store.value(forKey: "c") == 3)
    }

    // MARK: - Disk

    @Test(arguments: [2_048, 0]) func diskInsertStoresOnlyWhenAbsentOrExpired(inlineThreshold: Int) throws {
        let store = try makeDisk(inlineThreshold: inlineThreshold)
        let first = Data(repeating: 1, count: 100)
        #expect(try store.insertValue(first, forKey: "a", expiry: .seconds(10)))
        #expect(try !store.insertValue(Data(repeating: 2, count: 100), forKey: "a"))
        #expect(try store.value(forKey: "a") == first)
        // The losing insert left no blob file behind.
        #expect(blobFiles("disk").count == (inlineThreshold == 0 ? 1 : 0))
        clock.advance(by: 11)
        #expect(try store.insertValue(Data(repeating: 3, count: 100), forKey: "a"))
        #expect(try store.value(forKey: "a") == Data(repeating: 3, count: 100))
        #expect(store.totalCount == 1)
        #expect(blobFiles("disk").count == (inlineThreshold == 0 ? 1 : 0))
    }

    @Test func diskInsertRacingOnOneKeyHasOneWinner() throws {
        let store = try makeDisk(inlineThreshold: 0)
        for round in 0..<10 {
            let key = "key-\(round)"
            let won = try Self.race(6) { try store.insertValue(Data("writer \($0)".utf8), forKey: key) }
            #expect(won.filter { $0 }.count == 1)
            let winner = try #require(won.firstIndex(of: true))
            #expect(try store.value(forKey: key) == Data("writer \(winner)".utf8))
        }
        #expect(blobFiles("disk").count == 10, "only the winners' files remain")
    }

    @Test(arguments: [2_048, 0]) func diskTakeReturnsTheValueOnceAndRemovesItsFile(inlineThreshold: Int) throws {
        let store = try makeDisk(inlineThreshold: inlineThreshold)
        let value = Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0) })
        try store.setValue(value, forKey: "a", expiry: .seconds(60), metadata: Data("meta".utf8))
        let taken = try Self.race(6) { _ in try store.takeEntry(forKey: "a") }
        let winners = taken.compactMap { $0 }
        #expect(winners.count == 1)
        #expect(winners.first?.data == value)
        #expect(winners.first?.metadata == Data("meta".utf8))
        #expect(winners.first?.expirationDate == clock.peek.addingTimeInterval(60))
        #expect(try store.value(forKey: "a") == nil)
        #expect(store.totalCount == 0 && store.totalSize == 0)
        #expect(blobFiles("disk").isEmpty)
    }

    @Test func diskTakeOfAnExpiredOrDamagedEntryIsNilAndRemovesIt() throws {
        let store = try makeDisk(inlineThreshold: 0)
        try store.setValue(Data("old".utf8), forKey: "expired", expiry: .seconds(5))
        clock.advance(by: 6)
        #expect(try store.takeValue(forKey: "expired") == nil)
        #expect(store.totalCount == 0)

        try store.setValue(Data(repeating: 9, count: 3_000), forKey: "damaged")
        let path = try #require(blobFiles("disk").first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[100] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(try store.takeValue(forKey: "damaged") == nil, "damaged bytes are never returned")
        #expect(store.totalCount == 0)
        #expect(store.statistics.corruptEntriesDropped == 1)
        #expect(blobFiles("disk").isEmpty)
    }

    @Test func diskSetExpiryChangesTheDeadlineWithoutRewritingTheValue() throws {
        let store = try makeDisk(inlineThreshold: 0)
        try store.setValue(Data("value".utf8), forKey: "a", expiry: .seconds(10))
        let before = try #require(try store.attributes(forKey: "a"))
        let filesBefore = blobFiles("disk")
        clock.advance(by: 5)
        #expect(try store.setExpiry(.seconds(60), forKey: "a"))
        #expect(try !store.setExpiry(.seconds(60), forKey: "missing"))
        let after = try #require(try store.attributes(forKey: "a"))
        #expect(after.expirationDate == clock.peek.addingTimeInterval(60))
        #expect(after.creationDate == before.creationDate)
        #expect(blobFiles("disk") == filesBefore, "the blob was not rewritten")
        clock.advance(by: 30)
        #expect(try store.value(forKey: "a") == Data("value".utf8))
        #expect(try store.setExpiry(.never, forKey: "a"))
        clock.advance(by: 1_000_000)
        #expect(try store.value(forKey: "a") == Data("value".utf8))
        #expect(try store.setExpiry(.seconds(-1), forKey: "a"), "a past deadline removes")
        #expect(try store.value(forKey: "a") == nil)
        #expect(throws: StorageError.self) { try store.setExpiry(.seconds(.nan), forKey: "a") }
        // An expired entry cannot be revived.
        try store.setValue(Data("b".utf8), forKey: "b", expiry: .seconds(1))
        clock.advance(by: 2)
        #expect(try !store.setExpiry(.never, forKey: "b"))
        #expect(try store.value(forKey: "b") == nil)
    }

    @Test func processesRacingInsertAndTakeOnOneDirectoryEachWinOnce() async throws {
        // Given three processes on one directory, released together
        let directory = folder.url.appendingPathComponent("shared")
        _ = try DiskStore(directory: directory)
        let keys = 150
        func race(_ operation: String) async throws -> [String: [String]] {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent("go"))
            return try await withChildProcesses { scope in
                let children = try (0..<3).map { index in
                    try CrashHelper.start(in: scope, ["atomic", directory.path, operation, "p\(index)", "\(keys)"])
                }
                try await Task.sleep(for: .milliseconds(200))
                #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("go").path, contents: nil))
                var output: [String: [String]] = [:]
                for (index, child) in children.enumerated() {
                    await child.waitForOutput()
                    #expect(child.exitedCleanly, "\(child.standardError)")
                    let lines = child.standardOutput.split(separator: "\n").map(String.init)
                    #expect(lines.last == "done")
                    output["p\(index)"] = lines.dropLast()
                }
                return output
            }
        }
        // When they all insert every key, then all take every key
        let inserted = try await race("insert")
        let taken = try await race("take")

        // Then each key was inserted by exactly one process, and taken exactly once, with the
        // value its inserter wrote
        var winner: [String: String] = [:]
        for (process, lines) in inserted {
            for line in lines {
                let key = String(line.dropFirst("won ".count))
                #expect(winner[key] == nil, "\(key) inserted twice")
                winner[key] = process
            }
        }
        #expect(winner.count == keys)
        var takenBy: [String: String] = [:]
        for (_, lines) in taken {
            for line in lines {
                let parts = line.split(separator: " ")
                let key = String(parts[1])
                #expect(takenBy[key] == nil, "\(key) taken twice")
                takenBy[key] = String(parts[2])
            }
        }
        #expect(takenBy == winner)
        let store = try DiskStore(directory: directory)
        #expect(store.totalCount == 0)
    }

    // MARK: - Storage

    @Test func storageInsertConsultsEveryNamedTierAndWritesThemAll() throws {
        let storage = try makeStorage()
        #expect(try storage.insertValue("one", forKey: "a"))
        #expect(try !storage.insertValue("two", forKey: "a"))
        #expect(try storage.value(forKey: "a", tiers: .memory) == "one")
        #expect(try storage.value(forKey: "a", tiers: .disk) == "one")
        // Present in memory only: still present.
        try storage.setValue("memory", forKey: "b", tiers: .memory)
        #expect(try !storage.insertValue("two", forKey: "b"))
        // Present on disk only: the disk decides.
        try storage.setValue("disk", forKey: "c", tiers: .disk)
        #expect(try !storage.insertValue("two", forKey: "c"))
        #expect(try storage.value(forKey: "c") == "disk")
        // A disk-only insert leaves memory without the key.
        #expect(try storage.insertValue("d", forKey: "d", tiers: .disk))
        #expect(try storage.value(forKey: "d", tiers: .memory) == nil)
        #expect(storage.statistics.writes == 4)
    }

    @Test func storageInsertRacingTasksHaveOneWinner() async throws {
        let storage = try makeStorage()
        for round in 0..<10 {
            let key = "key-\(round)"
            let won = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
                for index in 0..<8 {
                    group.addTask { (index, try await storage.insertValue("task \(index)", forKey: key)) }
                }
                return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
            }
            let winners = won.filter(\.value).map(\.key)
            #expect(winners.count == 1)
            #expect(try await storage.value(forKey: key, tiers: .disk) == "task \(winners[0])")
            #expect(try await storage.value(forKey: key, tiers: .memory) == "task \(winners[0])")
        }
    }

    @Test func storageTakeRemovesFromEveryTierAndReturnsTheSlowestTiersValue() async throws {
        let storage = try makeStorage()
        try await storage.setValue("both", forKey: "a")
        let events = storage.events()
        #expect(try await storage.takeValue(forKey: "a") == "both")
        #expect(try await storage.containsValue(forKey: "a") == false)
        #expect(try await storage.takeValue(forKey: "a") == nil)
        // Memory and disk disagreeing: the disk's value is the one returned.
        try await storage.setValue("disk", forKey: "b", tiers: .disk)
        storage.memory.setValue("memory", forKey: "b")
        #expect(try await storage.takeValue(forKey: "b") == "disk")
        #expect(try await storage.containsValue(forKey: "b") == false)
        // Memory only: memory's value.
        try await storage.setValue("memory", forKey: "c", tiers: .memory)
        #expect(try await storage.takeValue(forKey: "c") == "memory")
        var removed: [String] = []
        for await event in events where event.kind == .removed {
            removed.append("\(event.key)@\(event.tier)")
            if removed.count == 5 { break }
        }
        #expect(removed == ["a@disk", "a@memory", "b@disk", "b@memory", "c@memory"])
    }

    @Test func storageSetExpiryReachesEveryTier() async throws {
        let storage = try makeStorage()
        try await storage.setValue("v", forKey: "a", expiry: .seconds(10))
        #expect(try await storage.setExpiry(.seconds(100), forKey: "a"))
        #expect(try await !storage.setExpiry(.seconds(100), forKey: "missing"))
        clock.advance(by: 50)
        #expect(try await storage.value(forKey: "a", tiers: .memory) == "v")
        #expect(try await storage.value(forKey: "a", tiers: .disk) == "v")
        #expect(try await storage.entry(forKey: "a")?.expirationDate == clock.peek.addingTimeInterval(50))
        await #expect(throws: StorageError.self) { try await storage.setExpiry(.seconds(.infinity), forKey: "a") }
    }

    @Test func memoryOnlyStorageAndTiersWithoutSingleStepFormsGetTheSameAnswers() async throws {
        // A memory-only storage
        let memoryOnly = try makeStorage(directory: false)
        #expect(try await memoryOnly.insertValue("one", forKey: "a"))
        #expect(try await !memoryOnly.insertValue("two", forKey: "a"))
        #expect(try await memoryOnly.setExpiry(.seconds(5), forKey: "a"))
        #expect(try await memoryOnly.takeValue(forKey: "a") == "one")
        #expect(try await memoryOnly.takeValue(forKey: "a") == nil)

        // A storage whose slowest tier uses the protocol's default forms, and one that is not local
        let local = InMemoryByteTier(now: clock.closure)
        let remote = AsyncOnlyByteTier(now: clock.closure)
        for storage in [try makeStorage(directory: false, additionalTiers: [local]),
                        try makeStorage(directory: false, additionalTiers: [remote])] {
            #expect(try await storage.insertValue("one", forKey: "a"))
            #expect(try await !storage.insertValue("two", forKey: "a"))
            #expect(try await storage.value(forKey: "a", tiers: .init([storage.tierIDs[1]])) == "one")
            #expect(try await storage.setExpiry(.seconds(5), forKey: "a"))
            clock.advance(by: 6)
            #expect(try await storage.takeValue(forKey: "a") == nil, "expired in every tier")
            #expect(try await storage.insertValue("three", forKey: "a"))
            #expect(try await storage.takeValue(forKey: "a") == "three")
            #expect(try await storage.containsValue(forKey: "a") == false)
        }
    }
}
