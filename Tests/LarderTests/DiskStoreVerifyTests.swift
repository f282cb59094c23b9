import Foundation
import LarderTestSupport
import Testing
@testable import Larder

@Suite(.timeLimit(.minutes(10)))
struct DiskStoreVerifyTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("disk-store-verify")
    }

    func makeStore(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configure(&configuration)
        return try DiskStore(directory: folder.url, configuration: configuration)
    }

    /// The blob file of `key` in this suite's store.
    func blobFile(forKey key: String) throws -> URL {
        try LarderTests.blobFile(forKey: key, in: folder.url)
    }

    /// Runs an UPDATE on the index through a second connection, as another tool would.
    func updateIndex(_ sql: String, _ bind: (SQLiteStatement) throws -> Void = { _ in }) throws {
        let connection = try SQLiteConnection(path: folder.url.appendingPathComponent("index.sqlite").path)
        defer { connection.close() }
        let statement = try connection.statement(sql)
        try bind(statement)
        _ = try statement.step()
        statement.reset()
    }

    /// Random bytes: gzip cannot shrink them, so they stay in files whatever the compression.
    static func bytes(_ count: Int) -> Data {
        Data((0..<count).map { _ in UInt8.random(in: 0 ... .max) })
    }

    /// Writes inline, file, gzip and expiring entries; returns their keys.
    func fill(_ store: DiskStore) throws -> [String] {
        try store.setValue(Data("small".utf8), forKey: "inline")
        try store.setValue(Self.bytes(40_000), forKey: "file")
        try store.setValue(Data(repeating: 0x61, count: 30_000), forKey: "gzip-file")
        try store.setValue(Data(repeating: 0x62, count: 3_000), forKey: "gzip-inline")
        try store.setValue(Self.bytes(20_000), forKey: "expired", expiry: .seconds(10))
        try store.setValue(Data(), forKey: "empty")
        clock.advance(by: 60)
        return ["empty", "expired", "file", "gzip-file", "gzip-inline", "inline"]
    }

    // MARK: - Healthy stores

    @Test func emptyStoreIsHealthy() throws {
        let store = try makeStore()
        let report = try store.verify()
        #expect(report.checkedCount == 0)
        #expect(report.goodCount == 0)
        #expect(report.isHealthy)
    }

    @Test func reportsEveryIntactEntryAsGoodIncludingExpiredOnes() throws {
        // Given inline, file, gzip, empty and expired entries
        let store = try makeStore { $0.compression = .gzip(level: 6) }
        let keys = try fill(store)
        // When the store is verified
        let report = try store.verify()
        // Then every row was checked and found good
        #expect(report.checkedCount == keys.count)
        #expect(report.goodCount == keys.count)
        #expect(report.damagedEntries.isEmpty)
        #expect(report.removedCount == 0)
        #expect(report.isHealthy)
    }

    @Test func callsProgressOncePerEntryInOrder() throws {
        let store = try makeStore()
        let keys = try fill(store)
        var calls: [(Int, Int)] = []
        try store.verify { checked, total in calls.append((checked, total)) }
        #expect(calls.map(\.0) == Array(1...keys.count))
        #expect(calls.allSatisfy { $0.1 == keys.count })
    }

    // MARK: - Finding damage without changing anything

    @Test func findsEachKindOfDamageAndChangesNothing() throws {
        // Given a store with one entry damaged in each way
        let store = try makeStore { $0.compression = .gzip(level: 6) }
        _ = try fill(store)
        try store.setValue(Self.bytes(25_000), forKey: "missing")
        try store.setValue(Self.bytes(25_000), forKey: "truncated")
        var flipped = try Data(contentsOf: blobFile(forKey: "file"))
        flipped[1_000] ^= 0x10
        try flipped.write(to: blobFile(forKey: "file"))
        try FileManager.default.removeItem(at: blobFile(forKey: "missing"))
        try Data(try Data(contentsOf: blobFile(forKey: "truncated")).prefix(100)).write(to: blobFile(forKey: "truncated"))
        // A gzip row whose bytes are not gzip, with a CRC that matches them.
        let garbage = Data(repeating: 0x55, count: 64)
        try updateIndex("UPDATE entries SET data = ?, size = ?, crc = ? WHERE key = 'gzip-inline'") { statement in
            try statement.bind(garbage, at: 1)
            try statement.bind(Int64(garbage.count), at: 2)
            try statement.bind(Int64(DiskStore.checksum(key: "gzip-inline", stored: garbage)), at: 3)
        }
        try updateIndex("UPDATE entries SET encoding = 9 WHERE key = 'empty'")
        let countBefore = store.totalCount

        // When the store is verified without repair
        let report = try store.verify()

        // Then each damaged entry is listed with its kind, in key order
        #expect(report.damagedEntries == [
            .init(key: "empty", damage: .unknownEncoding),
            .init(key: "file", damage: .checksumMismatch),
            .init(key: "gzip-inline", damage: .undecodable),
            .init(key: "missing", damage: .missingFile),
            .init(key: "truncated", damage: .sizeMismatch),
        ])
        #expect(report.checkedCount == 8)
        #expect(report.goodCount == 3)
        #expect(report.removedCount == 0)
        #expect(report.remainingDamageCount == 5)
        #expect(!report.isHealthy)
        // And nothing was removed or counted as a read
        #expect(store.totalCount == countBefore)
        #expect(try store.attributes(forKey: "file") != nil)
        #expect(FileManager.default.fileExists(atPath: try blobFile(forKey: "truncated").path))
        let statistics = store.statistics
        #expect(statistics.corruptEntriesDropped == 0)
        #expect(statistics.hits == 0 && statistics.misses == 0)
        // And a second pass finds the same
        #expect(try store.verify() == report)
    }

    @Test func flippedByteInInlineRowIsAChecksumMismatch() throws {
        let store = try makeStore()
        try store.setValue(Data("intact".utf8), forKey: "a")
        try store.setValue(Data("damaged".utf8), forKey: "b")
        try updateIndex("UPDATE entries SET crc = crc + 1 WHERE key = 'b'")
        let report = try store.verify()
        #expect(report.damagedEntries == [.init(key: "b", damage: .checksumMismatch)])
        #expect(report.goodCount == 1)
    }

    // MARK: - Repair

    @Test func repairRemovesOnlyTheDamagedEntries() throws {
        // Given a store with a flipped blob and a deleted one
        let store = try makeStore()
        let keys = try fill(store)
        let flippedFile = try blobFile(forKey: "file")
        var flipped = try Data(contentsOf: flippedFile)
        flipped[0] ^= 0xFF
        try flipped.write(to: flippedFile)
        try FileManager.default.removeItem(at: blobFile(forKey: "gzip-file"))
        let sizeBefore = store.totalSize

        // When the store is verified with repair
        let report = try store.verify(repair: true)

        // Then both are reported and removed, with their files
        #expect(report.damagedEntries.map(\.key) == ["file", "gzip-file"])
        #expect(report.removedCount == 2)
        #expect(report.isHealthy)
        #expect(report.goodCount == keys.count - 2)
        #expect(store.totalCount == keys.count - 2)
        #expect(store.totalSize == sizeBefore - 40_000 - 30_000)
        #expect(try store.attributes(forKey: "file") == nil)
        #expect(!FileManager.default.fileExists(atPath: flippedFile.path))
        #expect(store.statistics.corruptEntriesDropped == 2)
        #expect(store.statistics.misses == 0)
        // And the good entries still read back, and a new pass is clean
        #expect(try store.value(forKey: "inline") == Data("small".utf8))
        let again = try store.verify()
        #expect(again.damagedEntries.isEmpty && again.checkedCount == keys.count - 2)
    }

    @Test func verifyOnAClosedStoreThrows() throws {
        let store = try makeStore()
        store.close()
        #expect(throws: StorageError.self) { try store.verify() }
    }
}
