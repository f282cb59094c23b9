import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Refreshing an entry — new expiry and metadata, the same bytes — on disk (the row updated in
/// place, the blob file untouched), through `Storage` over memory, disk and other byte tiers,
/// and reading the metadata back.
@Suite(.timeLimit(.minutes(10)))
struct StorageRefreshTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("refresh")
    }

    func makeDisk(inlineThreshold: Int) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configuration.inlineThreshold = inlineThreshold
        return try DiskStore(directory: folder.url.appendingPathComponent("disk"), configuration: configuration)
    }

    func makeStorage(additionalTiers: [any CacheTier] = []) throws -> Storage<String, String> {
        var configuration = Storage<String, String>.Configuration()
        configuration.directory = folder.url.appendingPathComponent("storage")
        configuration.disk.inlineThreshold = 0
        configuration.now = clock.closure
        configuration.logHandler = nil
        return try Storage(configuration: configuration, additionalTiers: additionalTiers, transformer: .string)
    }

    /// Every blob file under `directory/blobs` with its inode and modification date.
    func blobFiles(_ directory: String) throws -> [String: String] {
        let blobs = folder.url.appendingPathComponent(directory).appendingPathComponent("blobs").path
        var files: [String: String] = [:]
        for path in StoreChecks.blobFiles(in: folder.url.appendingPathComponent(directory)) {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            let inode = try #require(attributes[.systemFileNumber] as? Int)
            let modified = try #require(attributes[.modificationDate] as? Date)
            files[String(path.dropFirst(blobs.count + 1))] = "inode \(inode), modified \(modified.timeIntervalSince1970)"
        }
        return files
    }

    // MARK: - Disk

    @Test(arguments: [0, 1 << 20])
    func diskRefreshUpdatesExpiryAndMetadataInPlace(inlineThreshold: Int) throws {
        // Given an entry with metadata, in a blob file or inline
        let store = try makeDisk(inlineThreshold: inlineThreshold)
        let value = Data(repeating: 7, count: 50_000)
        try store.setValue(value, forKey: "a", expiry: .seconds(10), metadata: Data("old".utf8))
        let files = try blobFiles("disk")
        #expect(files.count == (inlineThreshold == 0 ? 1 : 0))

        // When it is refreshed
        clock.advance(by: 5)
        #expect(try store.refresh(forKey: "a", expiry: .seconds(60), metadata: Data("new".utf8)))

        // Then the row has the new expiry and metadata, the value and the file are as they were
        let attributes = try #require(try store.attributes(forKey: "a"))
        #expect(attributes.expirationDate == clock.peek.addingTimeInterval(60))
        #expect(attributes.metadata == Data("new".utf8))
        #expect(try blobFiles("disk") == files)
        clock.advance(by: 30)
        let entry = try #require(try store.entry(forKey: "a"))
        #expect(entry.data == value && entry.metadata == Data("new".utf8))

        // And nil clears the metadata, a missing or expired key is not revived, a past expiry
        // removes, and bad input throws without changing anything
        #expect(try store.refresh(forKey: "a", expiry: .never, metadata: nil))
        #expect(try store.attributes(forKey: "a")?.metadata == nil)
        #expect(try !store.refresh(forKey: "missing", expiry: .never, metadata: nil))
        #expect(throws: StorageError.self) { try store.refresh(forKey: "a", expiry: .seconds(.nan), metadata: nil) }
        #expect(throws: StorageError.self) {
            try store.refresh(forKey: "a", expiry: .never, metadata: Data(count: DiskStore.metadataLimit + 1))
        }
        #expect(try store.value(forKey: "a") == value)
        #expect(try store.refresh(forKey: "a", expiry: .seconds(-1), metadata: nil))
        #expect(try store.value(forKey: "a") == nil)
        try store.setValue(value, forKey: "b", expiry: .seconds(1))
        clock.advance(by: 2)
        #expect(try !store.refresh(forKey: "b", expiry: .never, metadata: nil))
        #expect(try store.value(forKey: "b") == nil)
    }

    // MARK: - Storage

    @Test(arguments: [false, true])
    func storageRefreshReachesEveryTierAndGivesMemoryTheNewCopy(async: Bool) async throws {
        // Given a value in memory, on disk (a blob file) and in a third byte tier
        let bytes = InMemoryByteTier(now: clock.closure)
        let storage = try makeStorage(additionalTiers: [bytes])
        try await storage.setValue("value", forKey: "k", expiry: .seconds(10))
        let files = try blobFiles("storage")
        #expect(files.count == 1)

        // When it is refreshed with new metadata and a new copy for memory (the synchronous
        // form called from a synchronous function, where it is not shadowed)
        func refreshSynchronously() throws -> Bool {
            try storage.refresh(forKey: "k", expiry: .seconds(100), metadata: Data("m".utf8), value: "copy")
        }
        let refreshed = async
            ? try await storage.refresh(forKey: "k", expiry: .seconds(100), metadata: Data("m".utf8), value: "copy")
            : try refreshSynchronously()
        #expect(refreshed)

        // Then memory has the copy, every byte tier the new expiry and metadata over its old
        // bytes, and the disk's blob file is untouched
        #expect(try await storage.entry(forKey: "k")?.value == "copy")
        #expect(try await storage.metadata(forKey: "k") == Data("m".utf8))
        #expect(try await storage.metadata(forKey: "k", tiers: [bytes.tierID]) == Data("m".utf8))
        #expect(bytes.peek("k")?.data == Data("value".utf8) && bytes.peek("k")?.metadata == Data("m".utf8))
        #expect(try blobFiles("storage") == files)
        clock.advance(by: 50)
        #expect(try await storage.entry(forKey: "k", tiers: .disk)?.value == "value")
        #expect(try await storage.entry(forKey: "k", tiers: [bytes.tierID])?.expirationDate == clock.peek.addingTimeInterval(50))

        // And a key no tier holds is not created, not even in memory
        #expect(try await !storage.refresh(forKey: "none", expiry: .never, metadata: nil, value: "x"))
        #expect(try await storage.value(forKey: "none") == nil)
        #expect(try await storage.metadata(forKey: "none") == nil)
    }

    @Test func storageRefreshReachesATierThatIsOnlyAsync() async throws {
        let remote = AsyncOnlyByteTier(now: clock.closure)
        let storage = try makeStorage(additionalTiers: [remote])
        try await storage.setValue("value", forKey: "k", expiry: .seconds(10))
        #expect(try await storage.refresh(forKey: "k", expiry: .seconds(100), metadata: Data("r".utf8)))
        #expect(remote.base.peek("k")?.metadata == Data("r".utf8))
        #expect(try await storage.metadata(forKey: "k", tiers: .remote) == Data("r".utf8))
        clock.advance(by: 50)
        #expect(try await storage.value(forKey: "k", tiers: .remote) == "value")
    }
}
