import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// The cache directory deleted while a store is open (a user clearing caches, a tmp cleaner),
/// or parts of it: the next operation notices, creates it again where a new store on the path
/// sees it, and reports nothing cached. And a cache emptied by removals leaves its directory as
/// it started.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreDirectoryTests {
    let folder: TemporaryDirectory
    var directory: URL { folder.url.appendingPathComponent("cache") }

    init() throws {
        folder = try TemporaryDirectory("disk-directory")
    }

    func makeStore(_ directory: URL? = nil) throws -> DiskStore {
        try DiskStore(directory: directory ?? self.directory) { $0.logHandler = nil; $0.inlineThreshold = 1_024 }
    }

    /// A store holding an inline value, a value in a file, and an expiring one.
    func populatedStore(_ directory: URL? = nil) throws -> DiskStore {
        // (A store opened on a new directory starts no background sweep, which would race the
        // deletions below: see the test after this one.)
        let store = try makeStore(directory)
        try store.setValue(Data("small".utf8), forKey: "inline")
        try store.setValue(Data(repeating: 7, count: 10_000), forKey: "file")
        try store.setValue(Data("soon".utf8), forKey: "expiring", expiry: .seconds(3_600))
        return store
    }

    @Test func aStoreOnANewDirectoryRecordsTheSweepAsDone() throws {
        // Given a clock stopped at one instant
        let clock = TestClock()
        // When a store opens a directory that does not exist yet (nothing in it can be an
        // orphan of a crashed write)
        let store = try DiskStore(directory: directory) { $0.now = clock.closure; $0.logHandler = nil }
        defer { store.close() }
        let opened = clock.peek
        clock.advance(by: 60)
        // Then its open records the orphan sweep as done at that instant (a sweep in the
        // background would record a later one), so it starts none
        let index = try SQLiteConnection(path: directory.appendingPathComponent("index.sqlite").path)
        defer { index.close() }
        #expect(try index.scalarInt64("SELECT value FROM meta WHERE name = 'last_sweep'") == opened.milliseconds)
    }

    /// Deletes the whole directory, then waits out the interval at which reads look at it
    /// (unless `waits` is false: the operation then follows the deletion at once).
    func deleteDirectory(_ path: String = "", of directory: URL? = nil, waits: Bool = true) throws {
        let directory = directory ?? self.directory
        try FileManager.default.removeItem(at: path.isEmpty ? directory : directory.appendingPathComponent(path))
        if waits { Thread.sleep(forTimeInterval: Double(ReaderPool.directoryCheckInterval) / 1e9 + 0.02) }
    }

    /// Every file and directory under `blobs/`.
    func blobEntries(_ directory: URL? = nil) -> [(path: String, isDirectory: Bool, mode: Int)] {
        StoreChecks.tree((directory ?? self.directory).appendingPathComponent("blobs"))
    }

    enum Operation: String, CaseIterable, CustomTestStringConvertible {
        case value, entry, openValue, contains, attributes, keys, keysWithPrefix, totals, statistics, verify
        case setInline, setFile, insert, remove, take, setExpiry, removeAll, removeExpired, trim
        case trimToDate, refresh, footprint
        var testDescription: String { rawValue }
        var writes: Bool { [.setInline, .setFile, .insert].contains(self) }
    }

    @Test(arguments: Operation.allCases)
    func everyOperationNoticesTheDeletedDirectory(_ operation: Operation) throws {
        try checkDeletedDirectory(operation, in: directory)
    }

    /// How a deletion is made in ``checkDeletedDirectory(_:in:waits:readsFirst:)``.
    struct Deletion {
        /// Whether the interval at which reads look at the directory passes before the operation.
        var waits = true
        /// Where the store reads every value before the deletion, if it does: readers (parked
        /// in the thread's lane, idle in the pool, keeping a snapshot) then hold the index that
        /// is deleted. Read on another thread, they are parked in that thread's lane, and the
        /// operation opens a new reader.
        var readsFirst = ReadsFirst.no

        enum ReadsFirst: CaseIterable { case no, here, onAnotherThread }
    }

    /// One row of the deletion matrix, in `directory`: a store with values, whose directory is
    /// then deleted; one operation; then the store and a new one on the path agree on what is
    /// there.
    func checkDeletedDirectory(_ operation: Operation, in directory: URL, deletion: Deletion = Deletion()) throws {
        // Given a store with values, whose directory is then deleted
        let store = try populatedStore(directory)
        switch deletion.readsFirst {
        case .no: break
        case .here: try Self.readEverything(store)
        case .onAnotherThread:
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                do { try Self.readEverything(store) } catch { Issue.record(error) }
                done.signal()
            }
            thread.start()
            done.wait()
        }
        try deleteDirectory(of: directory, waits: deletion.waits)

        // When one operation runs
        switch operation {
        case .value:
            #expect(try store.value(forKey: "inline") == nil)
            #expect(try store.value(forKey: "file") == nil)
        case .entry: #expect(try store.entry(forKey: "inline") == nil)
        case .openValue: #expect(try store.openValue(forKey: "inline") == nil)
        case .contains:
            #expect(try !store.containsValue(forKey: "inline"))
            #expect(try !store.containsValue(forKey: "file"))
        case .attributes: #expect(try store.attributes(forKey: "inline") == nil)
        case .keys: #expect(try store.keys().isEmpty)
        case .keysWithPrefix: #expect(try store.keys(withPrefix: "").isEmpty)
        case .totals: #expect(store.totalCount == 0 && store.totalSize == 0)
        case .statistics: #expect(store.statistics.totalCount == 0)
        case .verify: #expect(try store.verify().checkedCount == 0)
        case .setInline: try store.setValue(Data("new".utf8), forKey: "new")
        case .setFile: try store.setValue(Data(repeating: 3, count: 50_000), forKey: "new")
        case .insert: #expect(try store.insertValue(Data("new".utf8), forKey: "inline"), "nothing is cached any more")
        case .remove: #expect(try !store.removeValue(forKey: "inline"))
        case .take: #expect(try store.takeValue(forKey: "file") == nil)
        case .setExpiry: #expect(try !store.setExpiry(.never, forKey: "expiring"))
        case .removeAll: try store.removeAll()
        case .removeExpired: #expect(try store.removeExpired() == 0)
        case .trim: try store.trim(toCount: 0)
        case .trimToDate: #expect(try store.trim(toDate: .distantFuture) == 0)
        case .refresh: #expect(try !store.refresh(forKey: "inline", expiry: .never, metadata: nil))
        case .footprint: #expect(try store.footprint < DiskStore.footprintSlack)
        }

        // Then the directory exists again with an index, the store reports nothing of the old
        // values, and a new store on the path sees what was written since
        #expect(DiskStore.isStore(at: directory))
        #expect(store.statistics.directoryRecreations == 1)
        #expect(try store.value(forKey: "inline") == (operation == .insert ? Data("new".utf8) : nil))
        #expect(try store.value(forKey: "file") == nil)
        let other = try makeStore(directory)
        if operation.writes {
            let key = operation == .insert ? "inline" : "new"
            #expect(try other.value(forKey: key) == store.value(forKey: key))
            #expect(other.totalCount == 1)
        } else {
            #expect(other.totalCount == 0)
        }
        // And both go on working on the one directory
        try store.setValue(Data(repeating: 1, count: 5_000), forKey: "after")
        #expect(try other.value(forKey: "after") == Data(repeating: 1, count: 5_000))
    }

    /// Reads every value of a ``populatedStore(_:)`` and its totals.
    static func readEverything(_ store: DiskStore) throws {
        #expect(try store.value(forKey: "inline") == Data("small".utf8))
        #expect(try store.value(forKey: "file") == Data(repeating: 7, count: 10_000))
        #expect(try store.containsValue(forKey: "expiring"))
        #expect(store.totalCount == 3)
    }

    @Test(arguments: ["blobs", "tmp"])
    func aRemovedSubdirectoryIsCreatedAgain(_ name: String) throws {
        let store = try populatedStore()
        try deleteDirectory(name)
        try store.setValue(Data(repeating: 9, count: 20_000), forKey: "big")
        #expect(try store.value(forKey: "big") == Data(repeating: 9, count: 20_000))
        // A value whose file went with `blobs/` is a miss that removes its row; inline ones stay.
        #expect(try store.value(forKey: "file") == (name == "blobs" ? nil : Data(repeating: 7, count: 10_000)))
        #expect(try store.value(forKey: "inline") == Data("small".utf8))
        #expect(store.statistics.directoryRecreations == 0, "the index itself was not touched")
        #expect(try makeStore().value(forKey: "big") == Data(repeating: 9, count: 20_000))
    }

    @Test func aDirectoryReplacedByAnotherStoreIsJoined() throws {
        // Given store A, whose directory is deleted and created again by store B
        let first = try populatedStore()
        try deleteDirectory()
        let second = try makeStore()
        try second.setValue(Data("from B".utf8), forKey: "shared")
        // Then A notices at its next write and joins B's index
        try first.setValue(Data("from A".utf8), forKey: "a")
        #expect(try first.value(forKey: "shared") == Data("from B".utf8))
        #expect(try second.value(forKey: "a") == Data("from A".utf8))
        #expect(first.totalCount == 2)
    }

    @Test func aCacheEmptiedByRemovalsLeavesAnEmptyBlobsDirectory() throws {
        let store = try makeStore()
        for index in 0..<200 { try store.setValue(Data(repeating: UInt8(index % 256), count: 2_000), forKey: "k\(index)") }
        #expect(blobEntries().count == 200 && blobEntries().allSatisfy { !$0.isDirectory }, "200 files, no directories")
        for index in 0..<100 { try store.removeValue(forKey: "k\(index)") }
        _ = try store.takeValue(forKey: "k100")
        try store.setValue(Data("inline".utf8), forKey: "k101")  // replaces a file by an inline row
        try store.removeAll()
        #expect(blobEntries().isEmpty)
        // Eviction too
        let limited = try DiskStore(directory: folder.url.appendingPathComponent("limited")) {
            $0.countLimit = 10; $0.inlineThreshold = 0; $0.logHandler = nil
        }
        for index in 0..<300 { try limited.setValue(Data(repeating: 1, count: 100), forKey: "k\(index)") }
        let kept = blobEntries(folder.url.appendingPathComponent("limited"))
        #expect(kept.count <= 10 && kept.count == limited.totalCount && kept.allSatisfy { !$0.isDirectory },
                "only the files of the entries kept remain: \(kept.count)")
    }
}
