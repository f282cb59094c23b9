import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Tags through memory and a real disk tier: values written with tags, removed together by
/// `removeValues(taggedWith:)` in one disk transaction, counted and reported as events; an
/// untagged overwrite drops a key's tags; invalid tags are refused before any tier changes.
@Suite(.timeLimit(.minutes(10)))
struct StorageTagTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("tags")
    }

    var directory: URL { folder.url.appendingPathComponent("cache") }

    func makeStorage(disk: Bool = true) throws -> Storage<String, String> {
        let configuration = Storage<String, String>.Configuration(directory: disk ? directory : nil)
        return try Storage(configuration: configuration, transformer: .string)
    }

    /// Runs `body` in a synchronous context, so that it calls the synchronous API.
    func sync<T>(_ body: () throws -> T) rethrows -> T { try body() }

    // MARK: - Removing by tag

    @Test(arguments: [false, true])
    func removingATagRemovesEveryValueCarryingItFromEveryTierAndNothingElse(disk: Bool) throws {
        // Given values tagged for two users, one shared by both, and an untagged one
        let storage = try makeStorage(disk: disk)
        try storage.setValue("profile 1", forKey: "/users/1", tags: ["user:1"])
        try storage.setValue("feed 1", forKey: "/feed/1", tags: ["user:1", "feed"])
        try storage.setValue("profile 2", forKey: "/users/2", tags: ["user:2"])
        try storage.setValue("home", forKey: "/")
        // When user 1's tag is removed
        let counts = try storage.removeValues(taggedWith: "user:1")
        // Then both of user 1's values are gone from every tier, the others stay
        #expect(counts[.memory] == 2)
        if disk { #expect(counts[.disk] == 2) }
        for key in ["/users/1", "/feed/1"] {
            #expect(try storage.value(forKey: key) == nil)
            #expect(try storage.value(forKey: key, tiers: .memory) == nil)
            if disk { #expect(try storage.disk?.value(forKey: key) == nil) }
        }
        #expect(try storage.value(forKey: "/users/2") == "profile 2")
        #expect(try storage.value(forKey: "/") == "home")
        // And a tag nothing carries any more removes nothing
        #expect(try storage.removeValues(taggedWith: "user:1").values.allSatisfy { $0 == 0 })
        #expect(try storage.removeValues(taggedWith: "feed").values.allSatisfy { $0 == 0 })
        #expect(storage.statistics.tagRemovals == 3)
        #expect(storage.statistics.removedByTag == (disk ? 4 : 2))
        if disk { #expect(storage.disk?.statistics.removedByTag == 2) }
    }

    @Test func anUntaggedOverwriteDropsTheKeysTagsInEveryTier() throws {
        // Given a tagged value, overwritten without tags (and another overwritten with other tags)
        let storage = try makeStorage()
        try storage.setValue("old", forKey: "a", tags: ["t"])
        try storage.setValue("new", forKey: "a")
        try storage.setValue("old", forKey: "b", tags: ["t"])
        try storage.setValue("new", forKey: "b", tags: ["u"])
        #expect(try storage.disk?.tags(forKey: "a") == [])
        #expect(try storage.disk?.tags(forKey: "b") == ["u"])
        // When the old tag is removed
        let counts = try storage.removeValues(taggedWith: "t")
        // Then the newer values stay
        #expect(counts[.memory] == 0 && counts[.disk] == 0)
        #expect(try storage.value(forKey: "a") == "new")
        #expect(try storage.value(forKey: "b") == "new")
        // And the new tag removes b
        #expect(try storage.removeValues(taggedWith: "u")[.disk] == 1)
        #expect(try storage.value(forKey: "b") == nil)
    }

    @Test func aMemoryCopyPromotedFromDiskGoesWithTheDisksTaggedValue() throws {
        // Given a tagged value on disk, read by a new storage (memory empty) into its memory
        let writer = try makeStorage()
        try writer.setValue("v", forKey: "k", tags: ["t"])
        writer.close()
        let storage = try makeStorage()
        #expect(try storage.value(forKey: "k") == "v")
        #expect(try storage.value(forKey: "k", tiers: .memory) == "v")
        // When the tag is removed
        let counts = try storage.removeValues(taggedWith: "t")
        // Then the promoted memory copy went too
        #expect(counts[.disk] == 1 && counts[.memory] == 1)
        #expect(try storage.value(forKey: "k", tiers: .memory) == nil)
        #expect(try storage.value(forKey: "k") == nil)
    }

    @Test func tagsSurviveReopeningTheDiskTier() throws {
        // Given tagged values written by a storage that is then closed
        let first = try makeStorage()
        for index in 0..<5 { try first.setValue("v\(index)", forKey: "k\(index)", tags: index.isMultiple(of: 2) ? ["even"] : ["odd"]) }
        first.close()
        // When a new storage on the directory removes a tag
        let second = try makeStorage()
        #expect(try second.removeValues(taggedWith: "even")[.disk] == 3)
        // Then exactly those values are gone
        for index in 0..<5 {
            #expect(try second.value(forKey: "k\(index)") == (index.isMultiple(of: 2) ? nil : "v\(index)"))
        }
    }

    @Test func theRemovalIsReportedAsEventsOfEachTier() async throws {
        // Given an observer and two tagged values
        let storage = try makeStorage()
        let events = storage.events(bufferSize: 64)
        try await storage.setValue("1", forKey: "a", tags: ["t"])
        try await storage.setValue("2", forKey: "b", tags: ["t"])
        // When the tag is removed (through the async form)
        let counts = try await storage.removeValues(taggedWith: "t")
        #expect(counts[.memory] == 2 && counts[.disk] == 2)
        // Then each value's removal from each tier is an event
        var seen = Set<String>()
        for await event in events where event.kind == .removedByTag {
            seen.insert("\(event.key)@\(event.tier)")
            if seen.count == 4 { break }
        }
        #expect(seen == ["a@memory", "a@disk", "b@memory", "b@disk"])
    }

    @Test func aTaggedValueStoredInOneTierIsRemovedFromThatTier() throws {
        // Given tagged values stored in one tier each
        let storage = try makeStorage()
        try storage.setValue("m", forKey: "m", tags: ["t"], tiers: .memory)
        try storage.setValue("d", forKey: "d", tags: ["t"], tiers: .disk)
        // When the tag is removed from the disk tier only
        #expect(try storage.removeValues(taggedWith: "t", tiers: .disk)[.disk] == 1)
        // Then memory keeps its value, until memory is named too
        #expect(try storage.value(forKey: "m") == "m")
        #expect(try storage.value(forKey: "d") == nil)
        #expect(try storage.removeValues(taggedWith: "t")[.memory] == 1)
        #expect(try storage.value(forKey: "m") == nil)
    }

    // MARK: - Bad input

    @Test func badTagsAreRefusedAndChangeNothing() throws {
        // Given a stored value
        let storage = try makeStorage()
        try storage.setValue("kept", forKey: "k", tags: ["t"])
        // Then an empty tag, an overlong tag or too many tags are refused, naming the problem
        for tags: Set<String> in [[""], [String(repeating: "x", count: 257)], Set((0..<65).map { "t\($0)" })] {
            let error = try #require(throws: StorageError.self) { try storage.setValue("new", forKey: "k", tags: tags) }
            #expect(error.code == .invalidInput)
            #expect(error.message.contains("tag"))
        }
        #expect(throws: StorageError.self) { try storage.removeValues(taggedWith: "") }
        // And the value and its tag are as they were
        #expect(try storage.value(forKey: "k") == "kept")
        #expect(try storage.disk?.tags(forKey: "k") == ["t"])
    }

    @Test func aTaggedWriteToALocalTierThatKeepsNoTagsIsRefused() throws {
        // Given a storage whose only byte tier keeps no tags
        let tier = InMemoryByteTier(StorageTier("plain"))
        let storage = try Storage<String, String>(additionalTiers: [tier], transformer: .string)
        // Then a tagged write naming it throws and stores nothing
        let error = try #require(throws: StorageError.self) { try sync { try storage.setValue("v", forKey: "k", tags: ["t"]) } }
        #expect(error.code == .invalidInput && error.message.contains("plain"))
        #expect(try sync { try storage.value(forKey: "k") } == nil)
        // And a tagged write to memory alone works
        try sync { try storage.setValue("v", forKey: "k", tags: ["t"], tiers: .memory) }
        #expect(try sync { try storage.removeValues(taggedWith: "t") }[.memory] == 1)
    }

    // MARK: - Memory's index of tags

    @Test func memoryForgetsTheTagsOfKeysItEvicted() throws {
        // Given a memory tier of 10 entries and 3,000 tagged writes of distinct keys
        var configuration = Storage<String, String>.Configuration()
        configuration.memory.countLimit = 10
        let storage = try Storage(configuration: configuration, transformer: .string)
        for index in 0..<3_000 { try storage.setValue("v", forKey: "k\(index)", tags: ["t"]) }
        // Then the index holds no more than the pruning bound, and the tag removes what memory holds
        #expect(storage.memoryTags.count <= 1_024)
        #expect(try storage.removeValues(taggedWith: "t")[.memory] == 10)
        #expect(storage.memory.totalCount == 0)
    }

    // MARK: - The disk index

    @Test func anIndexOfTheLastSchemaIsUpgradedWithItsValuesKept() throws {
        // Given a disk index of schema 5 (as the previous version wrote it) holding a value
        let store = try DiskStore(directory: directory)
        try store.setValue(Data("old".utf8), forKey: "k")
        store.close()
        let connection = try SQLiteConnection(path: directory.appendingPathComponent("index.sqlite").path)
        try connection.execute("""
            DROP TRIGGER entries_forget_tags; DROP TRIGGER entries_replace_tags; DROP INDEX tags_by_entry;
            DROP TABLE tags; PRAGMA user_version = 5;
            """)
        connection.close()
        // When this version opens it
        let storage = try makeStorage()
        // Then the value is there and tags work
        #expect(try storage.value(forKey: "k") == "old")
        try storage.setValue("new", forKey: "k", tags: ["t"])
        #expect(try storage.removeValues(taggedWith: "t")[.disk] == 1)
        #expect(try storage.value(forKey: "k") == nil)
    }
}
