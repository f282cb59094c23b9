import CSQLite
import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Promises 3 and 4 against hostile keys, values and index rows: nothing is written (or read,
/// or deleted) outside the store's directory, every file is owner-only, keys never become SQL
/// or paths, and rows that lie about their sizes are misses rather than allocations or crashes.
@Suite(.timeLimit(.minutes(10)))
struct ReliabilityHostileInputTests {
    let parent: TemporaryDirectory
    var directory: URL { parent.url.appendingPathComponent("store") }
    let victim: URL

    init() throws {
        parent = try TemporaryDirectory("reliability-hostile")
        // A file next to the store that no key, value or row may ever reach.
        victim = parent.url.appendingPathComponent("victim")
        try Data("keep me".utf8).write(to: victim)
    }

    func makeStore(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        try DiskStore(directory: directory, configuration: Reliability.configuration(configure))
    }

    /// The parent folder holds exactly the store and the untouched victim; the store holds only
    /// its own layout, owner-only, with blob names of the store's own shape.
    func expectConfined(_ context: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let siblings = try FileManager.default.contentsOfDirectory(atPath: parent.url.path).sorted()
        #expect(siblings == ["store", "victim"], "\(context): the parent folder now holds \(siblings)", sourceLocation: sourceLocation)
        #expect(try Data(contentsOf: victim) == Data("keep me".utf8), "\(context): the victim changed", sourceLocation: sourceLocation)
        let top = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        #expect(top.isSubset(of: ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "blobs", "tmp"]),
                "\(context): unexpected top-level files \(top.sorted())", sourceLocation: sourceLocation)
        Reliability.expectOwnerOnly(directory, context, sourceLocation: sourceLocation)
        let blobs = directory.appendingPathComponent("blobs").path + "/"
        for entry in Reliability.tree(directory.appendingPathComponent("blobs")) where !entry.isDirectory {
            let name = String(entry.path.dropFirst(blobs.count))
            #expect(BlobFiles.isValidName(name), "\(context): blob named \(name)", sourceLocation: sourceLocation)
        }
    }

    static let hostileKeys: [String] = [
        "", "/", "..", ".", "../victim", "../../victim", "/etc/passwd", "blobs/../../victim", "tmp/../../victim",
        "a\u{0}b", "\u{0}", "\n\r\t", String(decoding: [0xD800, 0x41, 0xDFFF] as [UInt16], as: UTF16.self),
        "'; DROP TABLE entries; --", "x' OR '1'='1", "%", "_", "%_%", "\"; PRAGMA writable_schema=1; --",
        String(repeating: "k", count: 64 * 1024), String(repeating: "🙂", count: 16 * 1024),
    ]

    @Test(arguments: hostileKeys.indices)
    func hostileKeyRoundTripsAndStaysInsideTheDirectory(index: Int) throws {
        let key = Self.hostileKeys[index]
        let context = "key #\(index) (\(key.utf8.count) bytes)"
        for inlineThreshold in [0, 16 * 1024] {
            let store = try makeStore { $0.inlineThreshold = inlineThreshold; $0.compression = .gzip(level: 1) }
            // Given a hostile key, with values of 0 bytes and of some kilobytes
            let value = CrashPayload.make(key: "v", generation: index + 1, size: 5_000)
            try store.setValue(value, forKey: key)
            try store.setValue(Data("neighbour".utf8), forKey: key + "x")
            // Then it reads back exactly, is listed, and its neighbours are untouched
            #expect(try store.value(forKey: key) == value, "\(context)")
            #expect(try store.keys().contains(key), "\(context)")
            #expect(try store.keys(withPrefix: key).contains(key + "x"), "\(context)")
            try store.setValue(Data(), forKey: key)
            #expect(try store.value(forKey: key) == Data(), "\(context): an empty value must be a hit, not a miss")
            #expect(try store.removeValue(forKey: key), "\(context)")
            #expect(try store.value(forKey: key) == nil, "\(context)")
            #expect(try store.value(forKey: key + "x") == Data("neighbour".utf8), "\(context)")
            try Reliability.expectTotalsExact(store, context)
            try expectConfined(context)
            try store.removeAll()
            store.close()
        }
    }

    /// Only names of the store's own shapes (`<hex>-<hex>`, and `xx/xx<hex>-<hex>` from earlier
    /// versions) are ever opened or deleted.
    @Test func blobNamesOfAnyOtherShapeAreRefused() {
        let digest = String(repeating: "0123456789abcdef", count: 2) + "01234567"
        let accepted = [
            "ab/ab-f", "ab/ab12-ff", "0f/0f\(digest)-1a2b3c4d5e6f7788", "a-f", "ab12-ff", "\(digest)-1a2b3c4d5e6f7788",
            BlobFiles.makeName(hash: digest),
        ]
        for name in accepted {
            #expect(BlobFiles.isValidName(name), "\(name)")
        }
        #expect(!BlobFiles.makeName(hash: digest).contains("/"), "new blobs sit directly in blobs/")
        let refused = [
            "", "ab/ab", "ab/ab12", "ab/ab12-", "ab/ab-12-3", "ab/ab12--3", "ab/ab1-2-", "ab/cd12-ff", "ab/ab12-f/",
            "AB/AB12-ff", "ab/ab12-FF", "ab\\ab12-ff", "../../victim", "ab/../../victim-1", "ab/ab12-f\u{0}",
            "ab/abé-1", "ab/ab12 -1", "/b/ab12-1", "ab/ab" + String(repeating: "0", count: 196) + "-1",
            "-", "-1", "ab12-", "ab12", "ab-12-3", "ab12--3", "ab12-ff/", "ab12-ff/x", "AB12-ff", "ab12-FF", "../ab-1",
            "./ab-1", "ab12-f\u{0}", "abé-1", "ab12 -1", "/ab12-1", String(repeating: "0", count: 199) + "-1",
        ]
        for name in refused {
            #expect(!BlobFiles.isValidName(name), "\(name)")
        }
    }

    @Test func prefixScanTreatsLikeWildcardsLiterally() throws {
        let store = try makeStore()
        for key in ["%a", "%b", "_c", "abc", "a%c", "a_c"] { try store.setValue(Data(key.utf8), forKey: key) }
        #expect(try store.keys(withPrefix: "%") == ["%a", "%b"])
        #expect(try store.keys(withPrefix: "_") == ["_c"])
        #expect(try store.keys(withPrefix: "a%") == ["a%c"])
        #expect(try store.keys(withPrefix: "a_") == ["a_c"])
    }

    @Test func valueOverTheSizeLimitLeavesNothingBehind() throws {
        // A 256 MiB value against a 64 MiB limit: refused before any file is written.
        let store = try makeStore { $0.sizeLimit = 64 << 20; $0.inlineThreshold = 0 }
        try store.setValue(Data("old".utf8), forKey: "big")
        #expect(throws: StorageError.self) { try store.setValue(Data(count: 256 << 20), forKey: "big", isCompressible: false) }
        #expect(try store.value(forKey: "big") == Data("old".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path).isEmpty)
        try Reliability.expectTotalsExact(store, "oversized")
        try expectConfined("oversized")
    }

    // MARK: - Rows that lie (crafted through SQLite, as a damaged or hostile index would)

    func withIndex(_ body: (SQLiteConnection) throws -> Void) throws {
        let connection = try SQLiteConnection(path: directory.appendingPathComponent("index.sqlite").path)
        defer { connection.close() }
        try body(connection)
    }

    @Test func gzipRowClaimingAHugeOriginalSizeIsAMiss() throws {
        // Given a small gzip blob whose row claims 1 TiB once inflated
        let store = try makeStore { $0.compression = .gzip(level: 9); $0.inlineThreshold = 0 }
        try store.setValue(Data(repeating: 0x41, count: 100_000), forKey: "bomb")
        try store.setValue(Data("fine".utf8), forKey: "fine")
        #expect(try store.attributes(forKey: "bomb")?.encoding == .gzip)
        try withIndex { try $0.execute("UPDATE entries SET original_size = 1099511627776 WHERE key = 'bomb'") }
        // Then reading it is a miss that drops the entry, and the store keeps working
        #expect(try store.value(forKey: "bomb") == nil)
        #expect(try store.attributes(forKey: "bomb") == nil)
        #expect(store.statistics.corruptEntriesDropped == 1)
        #expect(try store.value(forKey: "fine") == Data("fine".utf8))
        try Reliability.expectTotalsExact(store, "bomb")
    }

    @Test func gzipStreamInflatingPastItsRecordedSizeIsAMiss() throws {
        // Given a row whose stream really inflates to 64 MiB but that records 1 MiB
        let store = try makeStore { $0.compression = .gzip(level: 9); $0.inlineThreshold = 0 }
        try store.setValue(Data(count: 64 << 20), forKey: "bomb")
        try withIndex { try $0.execute("UPDATE entries SET original_size = 1048576 WHERE key = 'bomb'") }
        // Then the decompressor stops at the recorded size: a miss
        #expect(try store.value(forKey: "bomb") == nil)
        #expect(throws: StorageError.self) { try Gzip.decompress(Gzip.compress(Data(count: 64 << 20), level: 9), maxSize: 1 << 20) }
    }

    @Test(arguments: [
        "UPDATE entries SET size = -1", "UPDATE entries SET original_size = -5", "UPDATE entries SET encoding = 99",
        "UPDATE entries SET size = 9223372036854775807", "UPDATE entries SET crc = crc + 1",
        "UPDATE entries SET file = '../../victim'", "UPDATE entries SET file = '/etc/passwd'",
        "UPDATE entries SET file = 'ab/../../../victim'", "UPDATE entries SET hash = 'not-a-digest'",
        "UPDATE entries SET key = key || '-moved'", "UPDATE entries SET data = zeroblob(10)",
        "UPDATE entries SET file = NULL", "DELETE FROM totals", "UPDATE entries SET file = CAST(x'ff2e2e' AS TEXT)",
    ])
    func lyingRowIsAMissAndTouchesNothingOutside(sql: String) throws {
        // Given entries in files and inline, then a row rewritten to lie
        let store = try makeStore { $0.inlineThreshold = 1_000 }
        try store.setValue(CrashPayload.make(key: "file", generation: 1, size: 4_000), forKey: "file")
        try store.setValue(CrashPayload.make(key: "inline", generation: 1, size: 100), forKey: "inline")
        try withIndex { try $0.execute(sql) }
        // Then every read is the exact value or a miss — for the moved key, never the bytes of
        // the key it was written for — and nothing outside the directory is read or removed
        for key in ["file", "inline", "file-moved", "inline-moved"] {
            if let data = try store.value(forKey: key) {
                #expect(CrashPayload.verify(data)?.key == key, "\(sql): \(key) returned bytes that are not its own")
            }
        }
        try store.removeAll()
        Reliability.expectStillWorks(store, sql)
        try Reliability.expectTotalsExact(store, sql)
        try expectConfined(sql)
    }
}
