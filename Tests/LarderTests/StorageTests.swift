import Foundation
import LarderTestSupport
import Testing
@testable import Larder

@Suite(.timeLimit(.minutes(10)))
struct StorageTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("storage")
    }

    func makeStorage<Value>(
        _ transformer: Transformer<Value>, directory: Bool = true,
        _ configure: (inout Storage<String, Value>.Configuration) -> Void = { _ in }
    ) throws -> Storage<String, Value> {
        var configuration = Storage<String, Value>.Configuration()
        configuration.directory = directory ? folder.url.appendingPathComponent("cache") : nil
        configuration.memory.now = clock.closure
        configuration.disk.now = clock.closure
        configuration.disk.logHandler = nil
        configure(&configuration)
        return try Storage(configuration: configuration, transformer: transformer)
    }

    // MARK: - Every tier option on every operation

    static let tierOptions: [StorageTiers] = [.memory, .disk, .all]

    @Test(arguments: tierOptions, tierOptions)
    func writeThenReadAndContainsFollowTheTiers(writeTiers: StorageTiers, readTiers: StorageTiers) throws {
        // Given a value written to `writeTiers`
        let storage = try makeStorage(.string)
        try storage.setValue("v", forKey: "k", tiers: writeTiers)
        // Then each tier holds it exactly when it was named
        #expect(storage.memory.containsValue(forKey: "k") == writeTiers.contains(.memory))
        #expect(try storage.disk?.containsValue(forKey: "k") == writeTiers.contains(.disk))
        // And a read through `readTiers` finds it exactly when the sets overlap
        let visible = overlaps(writeTiers, readTiers)
        #expect(try storage.containsValue(forKey: "k", tiers: readTiers) == visible)
        let entry = try storage.entry(forKey: "k", tiers: readTiers)
        #expect(entry?.value == (visible ? "v" : nil))
        if let entry {
            let expected: StorageTier = readTiers.contains(.memory) && writeTiers.contains(.memory) ? .memory : .disk
            #expect(entry.tier == expected)
        }
    }

    @Test(arguments: tierOptions, tierOptions)
    func removeReachesEveryNamedTier(writeTiers: StorageTiers, removeTiers: StorageTiers) throws {
        let storage = try makeStorage(.string)
        try storage.setValue("v", forKey: "k", tiers: writeTiers)
        let removed = try storage.removeValue(forKey: "k", tiers: removeTiers)
        #expect(removed == overlaps(writeTiers, removeTiers))
        #expect(storage.memory.containsValue(forKey: "k") == (writeTiers.contains(.memory) && !removeTiers.contains(.memory)))
        #expect(try storage.disk?.containsValue(forKey: "k") == (writeTiers.contains(.disk) && !removeTiers.contains(.disk)))
    }

    @Test(arguments: tierOptions)
    func removeAllReachesEveryNamedTier(tiers: StorageTiers) throws {
        let storage = try makeStorage(.string)
        for index in 0..<5 { try storage.setValue("v\(index)", forKey: "k\(index)") }
        try storage.removeAll(tiers: tiers)
        #expect(storage.memory.totalCount == (tiers.contains(.memory) ? 0 : 5))
        #expect(storage.disk?.totalCount == (tiers.contains(.disk) ? 0 : 5))
    }

    @Test func memoryOnlyWriteHidesAnOlderDiskValue() throws {
        // Given v1 in both tiers, then v2 written to memory only
        let storage = try makeStorage(.string)
        try storage.setValue("v1", forKey: "k")
        try storage.setValue("v2", forKey: "k", tiers: .memory)
        // When memory forgets it
        storage.memory.removeAll()
        // Then v1 does not resurface from disk
        #expect(try storage.value(forKey: "k") == nil)
    }

    @Test func diskOnlyWriteReplacesTheMemoryValue() throws {
        let storage = try makeStorage(.string)
        try storage.setValue("v1", forKey: "k")
        try storage.setValue("v2", forKey: "k", tiers: .disk)
        #expect(try storage.value(forKey: "k") == "v2")
    }

    @Test func defaultTiersApplyWhenACallNamesNone() throws {
        let storage = try makeStorage(.string) { $0.defaultTiers = .memory }
        try storage.setValue("v", forKey: "k")
        #expect(storage.memory.containsValue(forKey: "k"))
        #expect(try storage.disk?.containsValue(forKey: "k") == false)
    }

    @Test func namingOnlyAMissingTierIsAnError() throws {
        let storage = try makeStorage(.string, directory: false)
        #expect(throws: StorageError.self) { try storage.setValue("v", forKey: "k", tiers: .disk) }
        #expect(throws: StorageError.self) { try storage.value(forKey: "k", tiers: .disk) }
        // `.all` means every tier the storage has.
        try storage.setValue("v", forKey: "k", tiers: .all)
        #expect(try storage.value(forKey: "k") == "v")
    }

    @Test func memoryOnlyStorageNeverTouchesTheFileSystem() throws {
        let storage = try makeStorage(.string, directory: false)
        for index in 0..<100 { try storage.setValue("v\(index)", forKey: "k\(index)") }
        #expect(storage.disk == nil)
        #expect(try storage.value(forKey: "k7") == "v7")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path).isEmpty)
    }

    // MARK: - Promotion and TTL

    @Test func diskHitIsDecodedOnceAndPromotedWithItsRemainingLifetime() throws {
        // Given a value written with a 100 s TTL and then dropped from memory
        let storage = try makeStorage(.string)
        try storage.setValue("v", forKey: "k", expiry: .seconds(100))
        storage.memory.removeAll()
        clock.advance(by: 40)
        // When it is read
        let entry = try #require(try storage.entry(forKey: "k"))
        // Then it came from disk and is now in memory, expiring when the disk entry does
        #expect(entry.tier == .disk)
        let promoted = try #require(storage.memory.entry(forKey: "k"))
        let expected = Date(timeIntervalSince1970: 1_700_000_100)
        #expect(abs(try #require(promoted.expirationDate).timeIntervalSince(expected)) < 0.01)
        #expect(try storage.entry(forKey: "k")?.tier == .memory)
        clock.advance(by: 61)
        #expect(try storage.value(forKey: "k") == nil)
        let statistics = storage.statistics
        #expect(statistics[.memory].promotions == 1)
        #expect(statistics[.disk].hits == 1 && statistics[.memory].hits == 1)
    }

    @Test func expiryHoldsInBothTiers() throws {
        let storage = try makeStorage(.string)
        try storage.setValue("v", forKey: "k", expiry: .seconds(10))
        clock.advance(by: 11)
        #expect(try storage.value(forKey: "k") == nil)
        #expect(try storage.value(forKey: "k", tiers: .disk) == nil)
        #expect(try !storage.containsValue(forKey: "k"))
    }

    @Test func removeExpiredSweepsBothTiers() throws {
        let storage = try makeStorage(.string)
        try storage.setValue("a", forKey: "a", expiry: .seconds(1))
        try storage.setValue("b", forKey: "b")
        clock.advance(by: 2)
        #expect(try storage.removeExpired() == 2)
        #expect(storage.memory.totalCount == 1 && storage.disk?.totalCount == 1)
    }

    // MARK: - Transformers

    struct Profile: Codable, Equatable, Sendable {
        struct Address: Codable, Equatable, Sendable { var city: String; var zip: Int? }
        enum Role: String, Codable, Sendable { case admin, reader }
        var name: String
        var roles: [Role]
        var address: Address
        var scores: [String: Double]
    }

    @Test func codableValuesRoundTripThroughDisk() throws {
        let profile = Profile(name: "Ada", roles: [.admin, .reader], address: .init(city: "London", zip: nil),
                              scores: ["x": 1.5])
        do {
            let storage = try makeStorage(Transformer<Profile>.json())
            try storage.setValue(profile, forKey: "ada")
        }
        let reopened = try makeStorage(Transformer<Profile>.json())
        #expect(try reopened.value(forKey: "ada") == profile)
    }

    @Test func corruptPayloadIsAMissThatRemovesTheEntry() throws {
        // Given bytes on disk that are not a Profile
        let storage = try makeStorage(Transformer<Profile>.json())
        try storage.disk?.setValue(Data("{\"name\": 3}".utf8), forKey: "bad")
        // When read
        #expect(try storage.value(forKey: "bad") == nil)
        // Then the entry is gone and counted
        #expect(try storage.disk?.containsValue(forKey: "bad") == false)
        #expect(storage.statistics.decodingFailures == 1)
    }

    @Test func aReadOfOneTierDropsBytesThatDoNotDecodeUnlessTheKeyWasWrittenMeanwhile() throws {
        // A read naming the disk alone has nothing to promote, so it takes no token before
        // reading: the drop checks the bytes again instead.
        struct Refusal: Error {}
        let written = Locked<Storage<String, String>?>(nil)
        let transformer = Transformer<String>(
            encode: { Data($0.utf8) },
            decode: { data in
                let text = String(decoding: data, as: UTF8.self)
                if text == "rewrite me" {
                    // A write of the key lands while this read decodes.
                    try written.withLock { $0 }?.setValue("fresh", forKey: "rewritten", tiers: .disk)
                }
                if text == "bad" || text == "rewrite me" { throw Refusal() }
                return text
            })
        let storage = try makeStorage(transformer)
        written.withLock { $0 = storage }
        try storage.disk?.setValue(Data("bad".utf8), forKey: "bad")
        try storage.disk?.setValue(Data("rewrite me".utf8), forKey: "rewritten")

        // Given undecodable bytes, When read from the disk alone, Then a miss that removes them.
        #expect(try storage.value(forKey: "bad", tiers: .disk) == nil)
        #expect(try storage.disk?.containsValue(forKey: "bad") == false)
        // Given a write while the read decodes, Then the read is a miss and the new value stays.
        #expect(try storage.value(forKey: "rewritten", tiers: .disk) == nil)
        #expect(try storage.disk?.value(forKey: "rewritten") == Data("fresh".utf8))
        #expect(try storage.value(forKey: "rewritten", tiers: .disk) == "fresh")
        #expect(storage.statistics.decodingFailures == 2)
        written.withLock { $0 = nil }
    }

    @Test func stringTransformerRejectsInvalidUTF8() throws {
        let storage = try makeStorage(.string)
        try storage.disk?.setValue(Data([0xFF, 0xFE, 0x00]), forKey: "bad")
        #expect(try storage.value(forKey: "bad") == nil)
        #expect(storage.statistics.decodingFailures == 1)
    }

    @Test func encodingFailureChangesNothing() throws {
        struct Refusal: Error {}
        let transformer = Transformer<String>(
            encode: { value in if value == "refuse" { throw Refusal() }; return Data(value.utf8) },
            decode: { String(decoding: $0, as: UTF8.self) })
        let storage = try makeStorage(transformer)
        try storage.setValue("old", forKey: "k")
        #expect(throws: StorageError.self) { try storage.setValue("refuse", forKey: "k") }
        #expect(try storage.value(forKey: "k") == "old")
    }

    @Test func dataTransformerKeepsBytesAndMemoryHoldsDecodedValues() throws {
        let storage = try makeStorage(.data) { $0.disk.compression = .gzip(level: 6) }
        let bytes = Data(repeating: 9, count: 10_000)
        try storage.setValue(bytes, forKey: "k")
        #expect(storage.memory.value(forKey: "k") == bytes) // not gzip bytes
        #expect(try storage.disk?.attributes(forKey: "k")?.encoding == .gzip)
        #expect(try storage.value(forKey: "k", tiers: .disk) == bytes)
    }

    // MARK: - Keys

    @Test func keyTypesHaveStableIdentities() throws {
        let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        #expect(uuid.cacheKey == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        #expect(URL(string: "https://example.com/a?b=1")!.cacheKey == "https://example.com/a?b=1")
        #expect(42.cacheKey == "42" && UInt8(7).cacheKey == "7" && Int64(-3).cacheKey == "-3")

        var configuration = Storage<UUID, String>.Configuration(directory: folder.url.appendingPathComponent("uuid"))
        configuration.disk.logHandler = nil
        let storage = try Storage<UUID, String>(configuration: configuration, transformer: .string)
        try storage.setValue("x", forKey: uuid)
        #expect(try storage.disk?.value(forKey: uuid.uuidString) == Data("x".utf8))
    }

    // MARK: - Persistence, concurrency, statistics

    @Test func reopeningReturnsWhatWasWrittenBefore() throws {
        do {
            let storage = try makeStorage(.string)
            for index in 0..<20 { try storage.setValue("value \(index)", forKey: "k\(index)") }
        }
        let reopened = try makeStorage(.string)
        for index in 0..<20 { #expect(try reopened.value(forKey: "k\(index)") == "value \(index)") }
        #expect(reopened.statistics[.disk].hits == 20)
    }

    @Test func readYourWritesFromManyConcurrentTasks() async throws {
        // Tight memory limits force constant eviction and promotion.
        let storage = try makeStorage(.string) { $0.memory.countLimit = 8 }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for step in 0..<120 {
                        let key = "w\(worker)-\(step % 10)"
                        let value = "\(worker)/\(step)"
                        if step % 2 == 0 {
                            try await storage.setValue(value, forKey: key)
                            // A read that starts after the write returned sees it, in both APIs.
                            let asyncRead = try await storage.value(forKey: key)
                            #expect(asyncRead == value)
                            #expect(try Self.readSynchronously(storage, key) == value)
                        } else {
                            try Self.writeSynchronously(storage, value, key)
                            #expect(try Self.readSynchronously(storage, key) == value)
                            try await storage.removeValue(forKey: key)
                            let afterRemove = try await storage.value(forKey: key)
                            #expect(afterRemove == nil)
                        }
                    }
                }
            }
            // Readers of the same keys race the writers and must only see whole values.
            group.addTask {
                for step in 0..<500 {
                    if let value = try await storage.value(forKey: "w\(step % 8)-\(step % 10)") {
                        #expect(value.split(separator: "/").count == 2)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(storage.memory.totalCount <= 8)
    }

    /// The synchronous API, called from a task (inside async code the async overload wins).
    static func readSynchronously(_ storage: Storage<String, String>, _ key: String) throws -> String? {
        try storage.value(forKey: key)
    }

    static func writeSynchronously(_ storage: Storage<String, String>, _ value: String, _ key: String) throws {
        try storage.setValue(value, forKey: key)
    }

    @Test func statisticsAddUp() throws {
        let storage = try makeStorage(.string)
        try storage.setValue("a", forKey: "a")
        try storage.setValue("b", forKey: "b", tiers: .disk)
        _ = try storage.value(forKey: "a")      // memory hit
        _ = try storage.value(forKey: "b")      // disk hit + promotion
        _ = try storage.value(forKey: "b")      // memory hit
        _ = try storage.value(forKey: "none")   // miss in both
        let statistics = storage.statistics
        #expect(statistics.writes == 2)
        #expect(statistics[.memory].hits == 2)
        #expect(statistics[.disk].hits == 1)
        #expect(statistics.misses == 1)
        #expect(statistics[.memory].misses == 2)
        #expect(statistics[.disk].misses == 1)
        #expect(statistics[.memory].promotions == 1)
        #expect(statistics[.memory].hits + statistics[.disk].hits + statistics.misses == 4)
        #expect(statistics[.memory].totalCount == 2 && statistics[.disk].totalCount == 2)
        #expect(statistics[.disk].totalSize == 2)
    }

    /// Reads with the default tiers take the tiers they name from a table made at creation;
    /// reads that name tiers themselves (an equal set built anew, or another set) compare
    /// names. Both must read exactly the tiers named.
    @Test func readsReachExactlyTheTiersTheDefaultOrTheCallNames() throws {
        let memoryOnly = try makeStorage(.string) { $0.defaultTiers = .memory }
        try memoryOnly.setValue("on disk", forKey: "k", tiers: .disk)
        #expect(try memoryOnly.value(forKey: "k") == nil)                          // default: memory alone
        #expect(try memoryOnly.value(forKey: "k", tiers: StorageTiers([.disk])) == "on disk")
        #expect(try memoryOnly.entry(forKey: "k", tiers: .all)?.tier == .disk)
        memoryOnly.close()

        let diskOnly = try makeStorage(.string) { $0.defaultTiers = .disk }
        try diskOnly.setValue("in memory", forKey: "m", tiers: .memory)
        try diskOnly.setValue("on disk", forKey: "d", tiers: .disk)
        #expect(try diskOnly.value(forKey: "m") == nil)                            // default: disk alone
        #expect(try diskOnly.value(forKey: "d") == "on disk")
        #expect(try diskOnly.value(forKey: "d", tiers: StorageTiers([.disk])) == "on disk")
        #expect(try diskOnly.value(forKey: "d", tiers: .memory) == nil)            // not promoted
        #expect(try diskOnly.entry(forKey: "m", tiers: [.memory, .disk])?.tier == .memory)
        #expect(throws: StorageError.self) { try diskOnly.value(forKey: "d", tiers: [StorageTier("elsewhere")]) }
        diskOnly.close()
    }

    /// A storage without byte tiers counts its memory reads and its writes under the memory
    /// store's lock: every call through the storage counts once, and reads made through
    /// `storage.memory` directly do not count as the storage's.
    @Test func memoryOnlyStatisticsCountEachStorageCallOnce() async throws {
        let storage = try makeStorage(.string, directory: false)
        try await storage.setValue("b", forKey: "b")
        _ = try await storage.value(forKey: "b")                 // hit
        // The synchronous forms (inside async code the async overloads win, so from a closure).
        try {
            try storage.setValue("a", forKey: "a")
            #expect(try storage.insertValue("c", forKey: "c"))
            #expect(try !storage.insertValue("again", forKey: "c"))
            _ = try storage.value(forKey: "a")                   // hit
            _ = try storage.entry(forKey: "c")                   // hit
            _ = try storage.value(forKey: "none")                // miss
            #expect(throws: StorageError.self) { try storage.value(forKey: "a", tiers: .disk) }  // names no tier
        }()
        _ = storage.memory.value(forKey: "a")                    // the store's own reads
        _ = storage.memory.value(forKey: "none")
        let statistics = storage.statistics
        #expect(statistics.writes == 3)
        #expect(statistics[.memory].hits == 3)
        #expect(statistics[.memory].misses == 1)
        #expect(statistics.misses == 1)
        #expect(storage.memory.statistics.hits == 4 && storage.memory.statistics.misses == 2)
    }

    @Test func asyncFormsWorkForMemoryOnlyStorages() async throws {
        let storage = try makeStorage(.string, directory: false)
        try await storage.setValue("v", forKey: "k")
        let value = try await storage.value(forKey: "k")
        #expect(value == "v")
        let contained = try await storage.containsValue(forKey: "k")
        #expect(contained)
        try await storage.removeAll()
        let after = try await storage.value(forKey: "k")
        #expect(after == nil)
    }

    // MARK: - Per-value compressibility and memory keys (used by LarderImage)

    @Test func perValueCompressibilityDecidesWhichValuesAreGzipped() throws {
        // Given a gzip disk tier and a transformer that calls values starting with "raw" incompressible
        var transformer = Transformer<String>.string
        transformer.isValueCompressible = { !$0.hasPrefix("raw") }
        let storage = try makeStorage(transformer) { $0.disk.compression = .gzip(level: 6) }
        let repetitive = String(repeating: "a", count: 4_096)
        // When both kinds are written
        try storage.setValue("zip" + repetitive, forKey: "zip")
        try storage.setValue("raw" + repetitive, forKey: "raw")
        // Then only the compressible one is stored gzipped, and both read back intact
        let disk = try #require(storage.disk)
        #expect(try disk.attributes(forKey: "zip")?.encoding == .gzip)
        #expect(try disk.attributes(forKey: "raw")?.encoding == .raw)
        #expect(try storage.value(forKey: "raw", tiers: .disk) == "raw" + repetitive)
    }

    @Test func memoryKeysListLiveEntriesMostRecentFirstWithoutTouchingThem() throws {
        // Given three memory entries, one of which expires, and "a" read last
        let storage = try makeStorage(.string, directory: false)
        try storage.setValue("1", forKey: "a")
        try storage.setValue("2", forKey: "b")
        try storage.setValue("3", forKey: "c", expiry: .seconds(10))
        _ = try storage.value(forKey: "a")
        clock.advance(by: 11)
        // When the keys are listed twice
        let keys = storage.memory.keys()
        let again = storage.memory.keys()
        // Then the expired key is left out, the order is by recency, and listing changed no order
        #expect(keys == ["a", "b"])
        #expect(again == keys)
        #expect(storage.memory.statistics.hits == 1)
    }
}

/// Whether two tier sets of a memory + disk storage share a tier.
private func overlaps(_ a: StorageTiers, _ b: StorageTiers) -> Bool {
    [StorageTier.memory, .disk].contains { a.contains($0) && b.contains($0) }
}
