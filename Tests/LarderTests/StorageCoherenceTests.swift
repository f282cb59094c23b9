import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Memory that follows its directory: two storages on one directory (each with its own disk
/// store, writer id and change watch, exactly as two processes have) see each other's writes,
/// removals, evictions, expiry passes, earlier expiries and clears at their next read, while a
/// storage's own writes keep its memory copies. The multi-process runs are in
/// `StorageCoherenceProcessTests`.
@Suite(.timeLimit(.minutes(10)))
struct StorageCoherenceTests {
    let directory: TemporaryDirectory
    let clock = TestClock()

    init() throws {
        directory = try TemporaryDirectory("coherence")
    }

    func makeStorage(
        followsDirectory: Bool = true, in url: URL? = nil,
        _ configure: (inout Storage<String, String>.Configuration) -> Void = { _ in }
    ) throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration(directory: url ?? directory.url)
        configuration.followsDirectory = followsDirectory
        configuration.now = clock.closure
        configure(&configuration)
        return try Storage(configuration: configuration, transformer: .string)
    }

    // MARK: - Writes and removals elsewhere

    @Test func anOverwriteByAnotherStorageIsSeenAtTheNextRead() throws {
        // Given A holds "k" in memory
        let a = try makeStorage(), b = try makeStorage()
        try a.setValue("one", forKey: "k")
        #expect(try a.entry(forKey: "k")?.tier == .memory)
        // When B overwrites it, Then A's next read returns B's value (from disk, then memory)
        try b.setValue("two", forKey: "k")
        #expect(try a.value(forKey: "k") == "two")
        #expect(try a.entry(forKey: "k")?.value == "two")
        #expect(try a.entry(forKey: "k")?.tier == .memory)
    }

    @Test func aRemovalByAnotherStorageIsSeenAtTheNextRead() throws {
        let a = try makeStorage(), b = try makeStorage()
        try a.setValue("session", forKey: "k")
        #expect(try a.value(forKey: "k") == "session")
        #expect(try b.removeValue(forKey: "k"))
        #expect(try a.value(forKey: "k") == nil)
        #expect(try a.containsValue(forKey: "k") == false)
        #expect(try a.keys(withPrefix: "").isEmpty)
    }

    @Test func ownWritesKeepTheirMemoryCopies() throws {
        // Given B writes other keys (so A catches up), A's own writes stay memory hits.
        let a = try makeStorage(), b = try makeStorage()
        for index in 0..<50 { try a.setValue("a\(index)", forKey: "a\(index)") }
        try b.setValue("b", forKey: "b")
        for index in 0..<50 { #expect(try a.entry(forKey: "a\(index)")?.tier == .memory) }
        #expect(try a.value(forKey: "b") == "b")
    }

    @Test func anInsertIsDecidedByTheDirectoryNotByAStaleCopy() throws {
        // Given A holds "k" in memory and B removed it
        let a = try makeStorage(), b = try makeStorage()
        #expect(try a.insertValue("a1", forKey: "k"))
        #expect(try a.value(forKey: "k") == "a1")
        #expect(try b.removeValue(forKey: "k"))
        // When A and then B insert, Then A wins and B sees a duplicate
        #expect(try a.insertValue("a2", forKey: "k"))
        #expect(try b.insertValue("b", forKey: "k") == false)
        #expect(try b.value(forKey: "k") == "a2")
        #expect(try a.value(forKey: "k") == "a2")
    }

    // MARK: - Trims, expiry and clears elsewhere

    @Test func entriesAnotherStorageEvictsLeaveMemory() throws {
        let a = try makeStorage()
        let b = try makeStorage { $0.disk.countLimit = 10; $0.disk.overflowTrimRatio = 0 }
        for index in 0..<10 { try a.setValue("v\(index)", forKey: "k\(index)") }
        // When B's writes evict A's entries from the shared index
        for index in 0..<10 { try b.setValue("w", forKey: "b\(index)") }
        // Then A's memory no longer serves them
        for index in 0..<10 { #expect(try a.value(forKey: "k\(index)") == nil) }
    }

    @Test func aTrimByAnotherStorageIsSeen() throws {
        let a = try makeStorage(), b = try makeStorage()
        for index in 0..<10 { try a.setValue("v\(index)", forKey: "k\(index)") }
        try b.disk?.trim(toCount: 0)
        for index in 0..<10 { #expect(try a.value(forKey: "k\(index)") == nil) }
    }

    @Test func anEarlierExpiryAndAnExpiryPassElsewhereAreSeen() throws {
        let a = try makeStorage(), b = try makeStorage()
        try a.setValue("long", forKey: "long", expiry: .seconds(1_000))
        #expect(try a.entry(forKey: "long")?.tier == .memory)
        // When B makes it expire in 5 s, Then A's next read takes the new expiry from disk
        #expect(try b.setExpiry(.seconds(5), forKey: "long", tiers: .disk))
        let entry = try a.entry(forKey: "long")
        #expect(entry?.value == "long")
        let expiration = try #require(entry?.expirationDate)
        #expect(abs(expiration.timeIntervalSince(clock.peek.addingTimeInterval(5))) < 0.01)
        // And once B's expiry pass removed it, A's memory does not serve it
        clock.advance(by: 6)
        #expect(try b.removeExpired(tiers: .disk) == 1)
        #expect(try a.value(forKey: "long") == nil)
    }

    @Test func aClearElsewhereDropsEveryMemoryCopy() throws {
        let a = try makeStorage(), b = try makeStorage()
        for index in 0..<100 { try a.setValue("v\(index)", forKey: "k\(index)") }
        try b.removeAll()
        #expect(a.memory.totalCount == 100)
        #expect(try a.value(forKey: "k0") == nil)
        #expect(a.memory.totalCount == 0)
        // And writes after the clear are followed one by one again
        try a.setValue("again", forKey: "k1")
        try b.setValue("b", forKey: "k1")
        #expect(try a.value(forKey: "k1") == "b")
    }

    @Test func aWatchFarBehindThePrunedChangeRowsDropsEveryMemoryCopy() throws {
        let a = try makeStorage()
        let b = try makeStorage { $0.disk.sizeLimit = 1 << 20 }
        try a.setValue("a", forKey: "kept-by-a")
        #expect(try a.entry(forKey: "kept-by-a")?.tier == .memory)
        // When B makes more changes than the index keeps (each overwrite with new bytes adds one)
        let writes = Int(DiskIndex.retainedChanges(forSizeLimit: 1 << 20)) + 2 * DiskIndex.pruneInterval
        for index in 0..<writes { try b.setValue("b\(index)", forKey: "b\(index % 64)", tiers: .disk) }
        // Then A no longer knows which keys changed and drops every copy (the disk still has it)
        #expect(try a.entry(forKey: "kept-by-a")?.tier == .disk)
        #expect(try a.value(forKey: "kept-by-a") == "a")
    }

    @Test func anIndexOpenedAgainIsFollowedOnceTheStoreReopensIt() throws {
        // Given A holds "k" in memory
        let shared = directory.url.appendingPathComponent("shared")
        let a = try makeStorage(in: shared), b = try makeStorage(in: shared)
        try a.setValue("old", forKey: "k")
        #expect(try a.entry(forKey: "k")?.tier == .memory)
        // When the directory is deleted, B creates it again with a new "k", and A's disk tier
        // opens the new index (at its next write)
        try Self.removeTree(shared)
        try b.setValue("new", forKey: "k")
        try a.setValue("a", forKey: "other")
        // Then A's memory follows the new index
        #expect(try a.value(forKey: "k") == "new")
        try b.setValue("newer", forKey: "k")
        #expect(try a.value(forKey: "k") == "newer")
    }

    /// Removes `directory` and everything in it. The two stores' background work (checkpoints,
    /// sweeps) can add or remove a file while the tree is walked, which fails that walk: it is
    /// walked again, up to 20 times.
    static func removeTree(_ directory: URL) throws {
        for attempt in 1... {
            do {
                try FileManager.default.removeItem(at: directory)
                return
            } catch where attempt < 20 && FileManager.default.fileExists(atPath: directory.path) {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
    }

    // MARK: - Switched off

    @Test func aStorageThatDoesNotFollowItsDirectoryKeepsItsCopies() throws {
        // A directory one process owns: memory is not checked against the index.
        let a = try makeStorage(followsDirectory: false), b = try makeStorage()
        try a.setValue("one", forKey: "k")
        try b.setValue("two", forKey: "k")
        #expect(try a.value(forKey: "k") == "one")
        #expect(try a.value(forKey: "k", tiers: .disk) == "two")
    }

    // MARK: - Async and concurrent

    @Test func asyncReadsFollowTheDirectoryToo() async throws {
        let a = try makeStorage(), b = try makeStorage()
        try await a.setValue("one", forKey: "k")
        #expect(try await a.value(forKey: "k") == "one")
        try await b.setValue("two", forKey: "k")
        #expect(try await a.value(forKey: "k") == "two")
        #expect(try await b.removeValue(forKey: "k"))
        #expect(try await a.entry(forKey: "k") == nil)
    }

    @Test func readersOnManyThreadsNeverReturnAValueOlderThanTheLastCompletedWrite() async throws {
        // B writes increasing versions of a few keys; A's readers check that each read returns
        // at least the version B had completed when the read started.
        let a = try makeStorage(), b = try makeStorage()
        let keys = (0..<8).map { "k\($0)" }
        let completed = Locked([Int](repeating: -1, count: keys.count))
        let rounds = 300
        let stale = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                for round in 0..<rounds {
                    for (slot, key) in keys.enumerated() {
                        try b.setValue(String(round), forKey: key)
                        completed.withLock { $0[slot] = round }
                    }
                }
                return 0
            }
            for reader in 0..<3 {
                group.addTask {
                    var stale = 0
                    var done = false
                    var step = reader
                    while !done {
                        let slot = step % keys.count
                        step += 1
                        let floor = completed.withLock { $0[slot] }
                        done = completed.withLock { $0.allSatisfy { $0 == rounds - 1 } }
                        guard let read = try a.value(forKey: keys[slot]) else {
                            if floor >= 0 { stale += 1 }
                            continue
                        }
                        if Int(read)! < floor { stale += 1 }
                    }
                    return stale
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(stale == 0)
    }
}
