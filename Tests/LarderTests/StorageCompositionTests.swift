import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// The composition rules of `Storage` over three tiers: memory, a real disk, and a second real
/// byte tier (``InMemoryByteTier``), table-driven over every combination of tiers.
@Suite(.timeLimit(.minutes(10)))
struct StorageCompositionTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))
    let bytes: InMemoryByteTier

    init() throws {
        folder = try TemporaryDirectory("composition")
        bytes = InMemoryByteTier(now: clock.closure)
    }

    static let bytesTier = StorageTier("bytes")
    static let everyTier: [StorageTier] = [.memory, .disk, bytesTier]

    /// Every non-empty set of the three tiers.
    static let tierSets: [StorageTiers] = (1..<8).map { mask in
        StorageTiers(everyTier.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element))
    }

    func makeStorage(
        _ configure: (inout Storage<String, String>.Configuration) -> Void = { _ in }
    ) throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("disk"))
        configuration.now = clock.closure
        configuration.logHandler = { _ in }
        configure(&configuration)
        return try Storage(configuration: configuration, additionalTiers: [bytes], transformer: .string)
    }

    /// Which tiers hold `key` right now, looked at directly.
    func holders(_ storage: Storage<String, String>, _ key: String) throws -> Set<StorageTier> {
        var found = Set<StorageTier>()
        if storage.memory.containsValue(forKey: key) { found.insert(.memory) }
        if try storage.disk!.containsValue(forKey: key) { found.insert(.disk) }
        if try bytes.containsValue(forKey: key) { found.insert(Self.bytesTier) }
        return found
    }

    func members(_ tiers: StorageTiers) -> Set<StorageTier> {
        Set(Self.everyTier.filter { tiers.contains($0) })
    }

    // MARK: - Every combination of tiers

    @Test(arguments: tierSets, tierSets)
    func aWriteLandsInExactlyTheNamedTiersAndAReadFindsTheFirstNamedHolder(
        writeTiers: StorageTiers, readTiers: StorageTiers
    ) throws {
        // Given a value written to `writeTiers`
        let storage = try makeStorage()
        try storage.setValue("v", forKey: "k", tiers: writeTiers)
        // Then exactly the named tiers hold it
        #expect(try holders(storage, "k") == members(writeTiers))
        // When it is read through `readTiers`
        let entry = try storage.entry(forKey: "k", tiers: readTiers)
        // Then the first tier in storage order that is named and holds it answers
        let answering = Self.everyTier.first { readTiers.contains($0) && writeTiers.contains($0) }
        #expect(entry?.value == (answering == nil ? nil : "v"))
        #expect(entry?.tier == answering)
        // And the value was copied into every faster tier the read named
        var expected = members(writeTiers)
        if let answering, let position = Self.everyTier.firstIndex(of: answering) {
            for faster in Self.everyTier[..<position] where readTiers.contains(faster) { expected.insert(faster) }
        }
        #expect(try holders(storage, "k") == expected)
    }

    @Test(arguments: tierSets, tierSets)
    func aRemovalEmptiesExactlyTheNamedTiers(writeTiers: StorageTiers, removeTiers: StorageTiers) throws {
        let storage = try makeStorage()
        try storage.setValue("v", forKey: "k", tiers: writeTiers)
        let removed = try storage.removeValue(forKey: "k", tiers: removeTiers)
        #expect(removed == !members(writeTiers).isDisjoint(with: members(removeTiers)))
        #expect(try holders(storage, "k") == members(writeTiers).subtracting(members(removeTiers)))
    }

    @Test(arguments: tierSets, tierSets)
    func anOverwriteLeavesNoOlderValueInAnyTier(firstTiers: StorageTiers, secondTiers: StorageTiers) throws {
        // Given an old value in `firstTiers`, overwritten in `secondTiers`
        let storage = try makeStorage()
        try storage.setValue("old", forKey: "k", tiers: firstTiers)
        try storage.setValue("new", forKey: "k", tiers: secondTiers)
        // Then exactly the second tiers hold a value
        #expect(try holders(storage, "k") == members(secondTiers))
        // And no tier holds the old one: every read says "new" or nothing, whatever it names
        for tiers in Self.tierSets {
            let value = try storage.value(forKey: "k", tiers: tiers)
            #expect(value == nil || value == "new", "tiers \(tiers)")
        }
    }

    @Test(arguments: tierSets)
    func removeAllAndRemoveExpiredReachExactlyTheNamedTiers(tiers: StorageTiers) throws {
        let storage = try makeStorage()
        try storage.setValue("v", forKey: "k")
        try storage.setValue("short", forKey: "s", expiry: .seconds(10))
        clock.advance(by: 20)
        // Expired entries are removed from the named tiers only
        let expired = try storage.removeExpired(tiers: tiers)
        #expect(expired == members(tiers).count)
        // And a clear empties the named tiers only, reporting what each held
        let counts = try storage.removeAll(tiers: tiers)
        #expect(Set(counts.keys) == members(tiers))
        #expect(counts.values.allSatisfy { $0 == 1 })
        #expect(try holders(storage, "k") == Set(Self.everyTier).subtracting(members(tiers)))
    }

    // MARK: - Promotion

    @Test func aHitInTheSlowestTierIsPromotedWithItsRemainingLifetime() throws {
        // Given a value only in the third tier, 40 s into a 100 s lifetime
        let storage = try makeStorage()
        try storage.setValue("v", forKey: "k", expiry: .seconds(100), tiers: [Self.bytesTier])
        let expiration = try #require(bytes.peek("k")?.expirationDate)
        clock.advance(by: 40)
        // When it is read through every tier
        let entry = try #require(try storage.entry(forKey: "k"))
        // Then it came from the third tier and both faster tiers now hold it until the same moment
        #expect(entry.tier == Self.bytesTier)
        #expect(entry.expirationDate == expiration)
        #expect(storage.memory.entry(forKey: "k")?.expirationDate == expiration)
        #expect(try storage.disk!.entry(forKey: "k")?.expirationDate == expiration)
        // And when that moment passes, no tier returns it
        clock.advance(by: 61)
        #expect(try storage.entry(forKey: "k") == nil)
        #expect(storage.statistics[.memory].promotions == 1)
        #expect(storage.statistics[.disk].promotions == 1)
    }

    @Test func bytesThatDoNotDecodeAreAMissThatRemovesThemAndTheNextTierAnswers() throws {
        // Given invalid UTF-8 on disk and a good value in the third tier
        let storage = try makeStorage()
        try storage.disk!.setValue(Data([0xFF, 0xFE]), forKey: "k", expiry: nil, metadata: nil, isCompressible: false)
        try bytes.setValue(Data("good".utf8), forKey: "k", expiry: nil, metadata: nil, isCompressible: false)
        // When it is read
        let entry = try storage.entry(forKey: "k")
        // Then the bad bytes are gone and the third tier's value was read and promoted
        #expect(entry?.value == "good")
        #expect(entry?.tier == Self.bytesTier)
        #expect(try storage.disk!.value(forKey: "k") == Data("good".utf8))
        #expect(storage.statistics.decodingFailures == 1)
    }

    // MARK: - Failures

    @Test func aWriteASlowerTierRefusesLeavesNoFasterTierHoldingTheValue() throws {
        // Given an old value everywhere, and a third tier that now refuses writes
        let storage = try makeStorage()
        try storage.setValue("old", forKey: "k")
        bytes.setFailing(writes: true)
        // When a new value is written everywhere
        #expect(throws: StorageError.self) { try storage.setValue("new", forKey: "k") }
        // Then neither faster tier holds the new value (nor the old one: they were cleared)
        #expect(storage.memory.value(forKey: "k") == nil)
        #expect(try storage.disk!.value(forKey: "k") == nil)
        #expect(try storage.value(forKey: "k", tiers: [.memory, .disk]) == nil)
        #expect(storage.statistics[Self.bytesTier].errors == 1)
    }

    @Test func aFailedRemovalInASlowerTierLeavesTheFasterTiersAsTheyWere() throws {
        let storage = try makeStorage()
        try storage.setValue("v", forKey: "k")
        bytes.setFailing(writes: false, removals: true)
        #expect(throws: StorageError.self) { try storage.removeValue(forKey: "k") }
        // The removal stopped at the slowest tier: every tier still agrees on the value
        #expect(try holders(storage, "k") == Set(Self.everyTier))
    }

    @Test func namingNoTierOfTheStorageIsAnError() throws {
        let storage = try Storage<String, String>(transformer: .string)
        let error = #expect(throws: StorageError.self) { try storage.setValue("v", forKey: "k", tiers: .disk) }
        #expect(error?.code == .invalidInput)
        // A set that names one tier the storage has acts on that tier
        try storage.setValue("v", forKey: "k", tiers: [.memory, .disk])
        #expect(try storage.value(forKey: "k") == "v")
    }

    @Test func twoTiersWithOneIdentityAreRefused() throws {
        let error = #expect(throws: StorageError.self) {
            try Storage<String, String>(
                additionalTiers: [InMemoryByteTier(), InMemoryByteTier()], transformer: .string)
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.field == "tiers")
    }

    // MARK: - One clock, one vocabulary

    @Test func theStorageClockDrivesEveryTier() throws {
        // Given a storage whose clock is set once, and tiers with clocks of their own
        let storage = try makeStorage { configuration in
            configuration.memory.now = { Date.distantPast }
            configuration.disk.now = { Date.distantPast }
        }
        try storage.setValue("v", forKey: "k", expiry: .seconds(5), tiers: [.memory, .disk])
        // When the storage clock passes the expiry
        clock.advance(by: 6)
        // Then neither tier returns the value
        #expect(storage.memory.value(forKey: "k") == nil)
        #expect(try storage.disk!.value(forKey: "k") == nil)
    }

    @Test func keysWithAPrefixComeFromEveryNamedTierOnce() throws {
        let storage = try makeStorage()
        try storage.setValue("1", forKey: "a/1", tiers: .memory)
        try storage.setValue("2", forKey: "a/2", tiers: .disk)
        try storage.setValue("3", forKey: "a/3", tiers: [Self.bytesTier])
        try storage.setValue("4", forKey: "a/4")
        try storage.setValue("x", forKey: "b/1")
        #expect(try storage.keys(withPrefix: "a/") == ["a/1", "a/2", "a/3", "a/4"])
        #expect(try storage.keys(withPrefix: "a/", tiers: .disk) == ["a/2", "a/4"])
    }

    /// A value read that can promote nothing (one local tier, memory not named) asks the tier
    /// for its bytes alone; it must answer and count exactly as the entry read does.
    @Test(arguments: [false, true])
    func aValueReadOfOneTierAnswersAndCountsAsAnEntryReadDoes(throughDisk: Bool) throws {
        // Given a storage with one local byte tier: the real disk, or the test tier (whose
        // `value(forKey:)` is the protocol's default)
        var configuration = Storage<String, String>.Configuration(
            directory: throughDisk ? folder.url.appendingPathComponent("disk") : nil)
        configuration.now = clock.closure
        configuration.logHandler = { _ in }
        configuration.defaultTiers = throughDisk ? .disk : [Self.bytesTier]
        let storage = try Storage(configuration: configuration, additionalTiers: throughDisk ? [] : [bytes], transformer: .string)
        let tier = throughDisk ? StorageTier.disk : Self.bytesTier
        let byteTier = try #require(storage.tier(tier) as? any LocalCacheTier)
        try storage.setValue("live", forKey: "live")
        try storage.setValue("brief", forKey: "brief", expiry: .seconds(10))
        try byteTier.setValue(Data([0xFF, 0xFE]), forKey: "bad", expiry: nil, metadata: nil, isCompressible: false)
        clock.advance(by: 11)

        // When each is read for its value, then again for its entry
        #expect(try storage.value(forKey: "live") == "live")
        #expect(try storage.value(forKey: "brief") == nil)
        #expect(try storage.value(forKey: "bad") == nil)
        #expect(try storage.value(forKey: "absent") == nil)
        let afterValues = storage.statistics
        #expect(try storage.entry(forKey: "live")?.value == "live")
        #expect(try storage.entry(forKey: "brief") == nil)
        #expect(try storage.entry(forKey: "absent") == nil)

        // Then the value reads counted one hit and three misses, the bad bytes are gone, and
        // the entry reads counted the same way again (the bad key is now a plain miss)
        #expect(afterValues[tier].hits == 1)
        #expect(afterValues[tier].misses == 3)
        #expect(afterValues.misses == 3)
        #expect(afterValues.decodingFailures == 1)
        #expect(try byteTier.containsValue(forKey: "bad") == false)
        let afterEntries = storage.statistics
        #expect(afterEntries[tier].hits == 2)
        #expect(afterEntries[tier].misses == 5)
        #expect(afterEntries.misses == 5)
        #expect(afterEntries[.memory].hits + afterEntries[.memory].misses == 0)
    }

    @Test func asyncValueReadsAnswerAndCountAsSynchronousOnesDo() async throws {
        // Given memory over the disk alone, a value in each, and bytes on disk that do not decode
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("disk"))
        configuration.now = clock.closure
        configuration.logHandler = { _ in }
        let storage = try Storage(configuration: configuration, transformer: .string)
        let disk = try #require(storage.disk)
        try await storage.setValue("m", forKey: "m")
        try disk.setValue(Data("d".utf8), forKey: "d", expiry: nil, metadata: nil, isCompressible: false)
        try disk.setValue(Data([0xFF, 0xFE]), forKey: "bad", expiry: nil, metadata: nil, isCompressible: false)

        // When they are read asynchronously: a memory hit, the disk alone (nothing to promote),
        // the undecodable bytes, then through memory (a miss there, promoted from the disk)
        #expect(try await storage.value(forKey: "m") == "m")
        #expect(try await storage.value(forKey: "d", tiers: .disk) == "d")
        #expect(storage.memory.entry(forKey: "d") == nil)
        #expect(try await storage.value(forKey: "bad", tiers: .disk) == nil)
        #expect(try await storage.value(forKey: "d") == "d")

        // Then the bad bytes are gone, the last read promoted, and each read counted once
        #expect(try disk.containsValue(forKey: "bad") == false)
        #expect(storage.memory.entry(forKey: "d")?.value == "d")
        let statistics = storage.statistics
        #expect(statistics[.memory].hits == 1)
        #expect(statistics[.memory].misses == 1)
        #expect(statistics[.disk].hits == 2)
        #expect(statistics[.disk].misses == 1)
        #expect(statistics.misses == 1)
        #expect(statistics.decodingFailures == 1)
    }

    @Test func statisticsCountEachReadOnceAcrossThreeTiers() throws {
        let storage = try makeStorage()
        try storage.setValue("m", forKey: "m")
        try storage.setValue("b", forKey: "b", tiers: [Self.bytesTier])
        _ = try storage.value(forKey: "m")          // memory hit
        _ = try storage.value(forKey: "b")          // memory miss, disk miss, third-tier hit
        _ = try storage.value(forKey: "b")          // memory hit after the promotion
        _ = try storage.value(forKey: "none")       // a miss everywhere
        let statistics = storage.statistics
        #expect(statistics[.memory].hits == 2)
        #expect(statistics[.memory].misses == 2)
        #expect(statistics[.disk].hits == 0)
        #expect(statistics[.disk].misses == 2)
        #expect(statistics[Self.bytesTier].hits == 1)
        #expect(statistics[Self.bytesTier].misses == 1)
        #expect(statistics.misses == 1)
        #expect(statistics.hits + statistics.misses == 4)
        #expect(statistics.writes == 2)
        #expect(statistics[.disk].totalCount == 2)
        #expect(statistics[Self.bytesTier].totalCount == 2)
    }

    // MARK: - Tiers reached only from async calls

    @Test func aTierThatIsNotLocalIsReachedOnlyFromAsyncCalls() async throws {
        // Given memory, disk, and a tier reachable only with `await`
        let remote = AsyncOnlyByteTier(now: clock.closure)
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("disk"))
        configuration.now = clock.closure
        let storage = try Storage(configuration: configuration, additionalTiers: [remote], transformer: .string)
        // When a value is written with the async API, it reaches all three
        try await storage.setValue("v", forKey: "k")
        #expect(remote.base.peek("k")?.data == Data("v".utf8))
        // And a synchronous write that names the async-only tier (here through the default
        // tiers) throws and changes no tier, while one that names the local tiers reaches only them
        let calls = remote.callCount
        #expect(throws: StorageError.self) { try Self.sync { try storage.setValue("local", forKey: "l") } }
        #expect(storage.memory.value(forKey: "l") == nil)
        try Self.sync { try storage.setValue("local", forKey: "l", tiers: [.memory, .disk]) }
        #expect(storage.memory.value(forKey: "l") == "local")
        #expect(remote.callCount == calls)
        #expect(remote.base.peek("l") == nil)
        // When the local copies are gone, an async read finds the remote value and promotes it
        try await storage.removeValue(forKey: "k", tiers: [.memory, .disk])
        let entry = try await storage.entry(forKey: "k")
        #expect(entry?.tier == .remote)
        #expect(entry?.value == "v")
        #expect(storage.memory.value(forKey: "k") == "v")
        #expect(try storage.disk!.value(forKey: "k") == Data("v".utf8))
        // And a synchronous read never reaches the remote tier: naming it throws, naming the
        // local tiers reads only them
        try await storage.removeValue(forKey: "k", tiers: [.memory, .disk])
        let callsBeforeReads = remote.callCount
        #expect(throws: StorageError.self) { try Self.sync { try storage.value(forKey: "k") } }
        #expect(try Self.sync { try storage.value(forKey: "k", tiers: [.memory, .disk]) } == nil)
        #expect(remote.callCount == callsBeforeReads)
        // And an async removal empties every tier, the remote first
        #expect(try await storage.removeValue(forKey: "k"))
        #expect(remote.base.peek("k") == nil)
    }

    // MARK: - No lock across caller code

    @Test func aTransformerWhoseDecodeReadsTheSameStorageCannotDeadlock() throws {
        // Given a transformer whose decode reads and writes other keys of the same storage
        // (with stripe locks held across decode, any colliding key would deadlock)
        let holder = Locked<Storage<String, String>?>(nil)
        let transformer = Transformer<String>(
            encode: { Data($0.utf8) },
            decode: { data in
                let text = String(decoding: data, as: UTF8.self)
                if let storage = holder.withLock({ $0 }), text.hasPrefix("outer") {
                    for index in 0..<256 {
                        _ = try storage.value(forKey: "inner-\(index)")
                        _ = try storage.containsValue(forKey: "outer-\(index)")
                    }
                    try storage.setValue("inner", forKey: "written-by-decode")
                }
                return text
            })
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("d"))
        configuration.now = clock.closure
        let storage = try Storage(configuration: configuration, transformer: transformer)
        holder.withLock { $0 = storage }
        for index in 0..<256 {
            try storage.setValue("inner-\(index)", forKey: "inner-\(index)", tiers: .disk)
            try storage.setValue("outer-\(index)", forKey: "outer-\(index)", tiers: .disk)
        }
        // When every outer key is read from disk (each decode reads 512 keys of the storage)
        for index in 0..<256 {
            #expect(try storage.value(forKey: "outer-\(index)") == "outer-\(index)")
        }
        // Then every read returned, and the decode's own write landed
        #expect(try storage.value(forKey: "written-by-decode") == "inner")
        holder.withLock { $0 = nil }
    }

    @Test func aCostClosureThatReadsTheStorageCannotDeadlock() throws {
        let holder = Locked<Storage<String, String>?>(nil)
        var configuration = Storage<String, String>.Configuration(directory: folder.url.appendingPathComponent("c"))
        // A cost closure that reads other keys of the storage (a read of the key being costed
        // would promote it and cost it again, without end, in any design).
        configuration.memory.cost = { value in
            if value.hasPrefix("k"), let storage = holder.withLock({ $0 }) {
                _ = try? storage.value(forKey: "probe")
                _ = try? storage.value(forKey: "absent")
            }
            return value.utf8.count
        }
        let storage = try Storage(configuration: configuration, transformer: .string)
        try storage.setValue("p", forKey: "probe", tiers: .disk)
        holder.withLock { $0 = storage }
        for index in 0..<64 { try storage.setValue("k\(index)", forKey: "k\(index)") }
        try storage.removeValue(forKey: "k1", tiers: .memory)
        #expect(try storage.value(forKey: "k1") == "k1")
        #expect(storage.memory.totalCost == 10 * 2 + 54 * 3 + 1)
        holder.withLock { $0 = nil }
    }

    // MARK: - Read-your-writes under constant eviction

    @Test func readYourWritesHoldsForTasksMixingSyncAndAsyncCallsUnderEviction() async throws {
        // Given three tiers that all evict constantly
        let storage = try makeStorage { configuration in
            configuration.memory.countLimit = 4
            configuration.disk.countLimit = 8
        }
        let keys = (0..<32).map { "key\($0 % 12)" }
        // When 8 tasks each write and then read their own sequence of values
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for step in 0..<150 {
                        let key = "\(keys[(task * 7 + step) % keys.count])-t\(task)"
                        let value = "\(task)-\(step)"
                        if step % 2 == 0 {
                            try Self.sync { try storage.setValue(value, forKey: key) }
                        } else {
                            try await storage.setValue(value, forKey: key)
                        }
                        // Then a read that starts after the write returned sees that value or,
                        // if every tier evicted it, nothing; never an older value
                        let read = step % 3 == 0 ? try Self.sync { try storage.value(forKey: key) } : try await storage.value(forKey: key)
                        #expect(read == nil || read == value, "task \(task) step \(step) read \(read ?? "nil")")
                        // And reads of other tasks' keys promote values concurrently
                        let other = "\(keys[(task * 3 + step) % keys.count])-t\((task + 1 + step) % 8)"
                        _ = step % 2 == 0 ? try Self.sync { try storage.value(forKey: other) } : try await storage.value(forKey: other)
                        if step % 5 == 0 { try await storage.removeValue(forKey: key) }
                        if step % 5 == 0 { #expect(try Self.sync { try storage.value(forKey: key) } == nil) }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(storage.statistics[.memory].evictions > 0)
        #expect(storage.statistics[.disk].evictions > 0)
    }

    /// Runs the synchronous API from async code (an async context would pick the async forms).
    static func sync<T>(_ body: () throws -> T) rethrows -> T {
        try body()
    }

    // MARK: - Sendable by construction

    @Test func storageIsSendableWhereItsValueIs() {
        func requireSendable<T: Sendable>(_: T.Type) -> Bool { true }
        #expect(requireSendable(Storage<String, Data>.self))
        #expect(requireSendable(Storage<String, String>.Entry.self))
    }
}
