import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Schema 1 → 2: a store written by the previous format (CRC-32 of the bytes plus the key
/// digest; recency in the entry row) opens, reads byte-exact, keeps verifying its old rows —
/// and finds damage in them — while new writes use CRC-32C and the `access` table.
///
/// The fixture (`Fixtures/schema1-store`, see `Fixtures/README.md`) was written at commit
/// 54e8cf0 with the clock at 2026-01-01.
@Suite(.timeLimit(.minutes(10)))
struct DiskFormatUpgradeTests {
    let folder: TemporaryDirectory
    /// After the fixture's "expired" entry expired (2026-01-02), long before 2100.
    let clock = TestClock(Date(timeIntervalSince1970: 1_780_000_000))

    init() throws {
        folder = try TemporaryDirectory("disk-upgrade")
        let fixture = try #require(Bundle.module.url(forResource: "schema1-store", withExtension: nil, subdirectory: "Fixtures"))
        try FileManager.default.removeItem(at: folder.url)
        try FileManager.default.copyItem(at: fixture, to: folder.url)
    }

    func makeStore(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configure(&configuration)
        return try DiskStore(directory: folder.url, configuration: configuration)
    }

    func indexConnection() throws -> SQLiteConnection {
        try SQLiteConnection(path: folder.url.appendingPathComponent("index.sqlite").path)
    }

    // The generator of the fixture's values (copied from the program that wrote it).
    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var state = seed
        var out = Data(capacity: count)
        for _ in 0..<count {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            out.append(UInt8(truncatingIfNeeded: state >> 33))
        }
        return out
    }

    static func text(_ count: Int) -> Data {
        Data((0..<count).map { UInt8(ascii: "a") + UInt8($0 % 7) })
    }

    /// Every live value of the fixture.
    static let expected: [String: Data] = [
        "inline-raw": bytes(100, seed: 1),
        "inline-gzip": text(2_000),
        "file-raw": bytes(40_000, seed: 2),
        "file-gzip": Data(bytes(80_000, seed: 7).map { $0 & 0x0F }),
        "with-expiry": bytes(300, seed: 3),
        "file-with-expiry": bytes(30_000, seed: 4),
        "with-metadata": bytes(64, seed: 6),
        "empty": Data(),
    ]

    // MARK: - Upgrade

    @Test func schema1StoreOpensAsSchema2AndReadsByteExact() throws {
        // Given the schema-1 fixture, opened by this version
        let store = try makeStore()
        let connection = try indexConnection()
        defer { connection.close() }
        #expect(try connection.scalarInt64("PRAGMA user_version") == DiskIndex.schemaVersion)
        #expect(try connection.scalarInt64("SELECT count(*) FROM entries WHERE crc_kind = 0") == 9)
        // And verification checks the old rows (the expired one included) with their own
        // checksum and the key digest, and finds them intact
        let report = try store.verify()
        #expect(report.checkedCount == 9 && report.goodCount == 9 && report.isHealthy)
        // Then every live value reads back byte-exact, the expired one never
        for (key, value) in Self.expected {
            #expect(try store.value(forKey: key) == value, "\(key)")
        }
        #expect(try store.value(forKey: "expired") == nil)
        #expect(store.statistics.corruptEntriesDropped == 0)
        // And the rest of each entry survives: expiry, metadata, encoding, placement
        let withExpiry = try #require(try store.entry(forKey: "file-with-expiry"))
        #expect(withExpiry.expirationDate == Date(timeIntervalSince1970: 4_102_444_800))
        #expect(try store.entry(forKey: "with-metadata")?.metadata == Data("meta".utf8))
        #expect(try store.attributes(forKey: "file-gzip")?.encoding == .gzip)
        #expect(try store.attributes(forKey: "file-gzip")?.isInline == false)
        #expect(try store.attributes(forKey: "inline-gzip")?.encoding == .gzip)
        #expect(try store.attributes(forKey: "inline-gzip")?.isInline == true)
        #expect(try store.keys() == Self.expected.keys.sorted())
    }

    @Test func upgradedStoreKeepsTheOldRecencyOrderAndTakesNewWrites() throws {
        // Given the fixture, whose last access was a read of inline-raw after writing `empty`
        let store = try makeStore()
        // When a new value is written and the store trimmed to three entries
        try store.setValue(Data("new".utf8), forKey: "new")
        try store.trim(toCount: 3)
        // Then the expired entry went first, then the least recent: empty, inline-raw and the
        // new entry remain, in the order schema 1 recorded
        #expect(try store.keys() == ["empty", "inline-raw", "new"])
        #expect(try store.value(forKey: "inline-raw") == Self.expected["inline-raw"])
        // And the new row is written with CRC-32C
        let connection = try indexConnection()
        defer { connection.close() }
        #expect(try connection.scalarInt64("SELECT crc_kind FROM entries WHERE key = 'new'") == 1)
        #expect(try connection.scalarInt64("SELECT crc = \(DiskStore.checksum(key: "new", stored: Data("new".utf8))) FROM entries WHERE key = 'new'") == 1)
        store.close()
        // And reopening the upgraded store changes nothing
        let reopened = try makeStore()
        #expect(try reopened.keys() == ["empty", "inline-raw", "new"])
        #expect(try reopened.value(forKey: "new") == Data("new".utf8))
    }

    // MARK: - Damage in old rows is still found

    @Test func flippedByteInAnOldInlineRowIsAMiss() throws {
        let connection = try indexConnection()
        try connection.execute("UPDATE entries SET data = substr(data, 1, 10) || x'00' || substr(data, 12) WHERE key = 'inline-raw'")
        connection.close()
        let store = try makeStore()
        #expect(try store.value(forKey: "inline-raw") == nil)
        #expect(store.statistics.corruptEntriesDropped == 1)
        #expect(try store.value(forKey: "with-expiry") == Self.expected["with-expiry"])
    }

    @Test func flippedByteInAnOldBlobIsAMissAndVerifyReportsIt() throws {
        // Given the fixture's raw blob with one byte flipped
        let blobs = folder.url.appendingPathComponent("blobs/9f")
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: blobs.path).first)
        let url = blobs.appendingPathComponent(name)
        var bytes = try Data(contentsOf: url)
        bytes[20_000] ^= 0x01
        try bytes.write(to: url)
        let store = try makeStore()
        // Then verify names it as a checksum mismatch, and a read is a miss that drops it
        let report = try store.verify()
        #expect(report.damagedEntries == [DiskStore.DamagedEntry(key: "file-raw", damage: .checksumMismatch)])
        #expect(try store.value(forKey: "file-raw") == nil)
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test func blobsOfTheOldShardLayoutAreReadRemovedAndSwept() throws {
        // Given the fixture, whose blobs sit in shard directories (`blobs/ab/<digest>-<n>`)
        let blobs = folder.url.appendingPathComponent("blobs")
        let oldFiles = StoreChecks.blobFiles(in: folder.url)
        #expect(oldFiles.count >= 3 && oldFiles.allSatisfy { $0.dropFirst(blobs.path.count + 1).contains("/") })
        let store = try makeStore { $0.inlineThreshold = 1_024 }
        #expect(try store.value(forKey: "file-raw") == Self.expected["file-raw"])
        // When one is overwritten and another removed
        try store.setValue(Self.bytes(50_000, seed: 9), forKey: "file-raw")
        #expect(try store.removeValue(forKey: "file-gzip"))
        // Then the new blob sits directly in blobs/, the old files are gone, and so are the
        // shard directories they left empty
        func files(of key: String, in paths: [String]) -> [String] {
            let digest = KeyHashing.sha1.hexDigest(key)
            return paths.filter { URL(fileURLWithPath: $0).lastPathComponent.hasPrefix(digest + "-") }
        }
        let remaining = StoreChecks.blobFiles(in: folder.url)
        let replaced = files(of: "file-raw", in: oldFiles) + files(of: "file-gzip", in: oldFiles)
        #expect(replaced.count == 2 && replaced.allSatisfy { !remaining.contains($0) }, "\(replaced)")
        let newRaw = files(of: "file-raw", in: remaining)
        #expect(newRaw.count == 1 && newRaw.allSatisfy { URL(fileURLWithPath: $0).deletingLastPathComponent().path == blobs.path })
        #expect(files(of: "file-with-expiry", in: oldFiles).allSatisfy { remaining.contains($0) })
        for gone in replaced {
            let shard = URL(fileURLWithPath: gone).deletingLastPathComponent().path
            let stillHoldsBlobs = remaining.contains { $0.hasPrefix(shard + "/") }
            #expect(FileManager.default.fileExists(atPath: shard) == stillHoldsBlobs, "\(shard)")
        }
        #expect(try store.value(forKey: "file-raw") == Self.bytes(50_000, seed: 9))
        #expect(try store.value(forKey: "file-with-expiry") == Self.expected["file-with-expiry"])
        // And the sweep removes orphans in both layouts, and nothing a row names
        let oldOrphan = blobs.appendingPathComponent("ab/ab12-34")
        try FileManager.default.createDirectory(at: oldOrphan.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: oldOrphan)
        let newOrphan = blobs.appendingPathComponent("cd34-56")
        try Data("y".utf8).write(to: newOrphan)
        #expect(try store.removeOrphanedFiles(olderThan: -1) == 2)
        #expect(!FileManager.default.fileExists(atPath: oldOrphan.path))
        #expect(!FileManager.default.fileExists(atPath: newOrphan.path))
        #expect(try store.value(forKey: "file-raw") == Self.bytes(50_000, seed: 9))
        #expect(try store.value(forKey: "file-with-expiry") == Self.expected["file-with-expiry"])
        #expect(try store.verify().isHealthy)
    }

    @Test func oldRowMovedToAnotherKeyIsAMiss() throws {
        // Given an old row whose key column was changed: its CRC-32 covers only the value, so
        // the key digest in `hash` is what tells it apart
        let connection = try indexConnection()
        try connection.execute("UPDATE entries SET key = 'moved' WHERE key = 'with-metadata'")
        connection.close()
        let store = try makeStore()
        #expect(try store.value(forKey: "moved") == nil)
        #expect(try store.value(forKey: "with-metadata") == nil)
        #expect(try store.value(forKey: "inline-raw") == Self.expected["inline-raw"])
    }
}
