import Foundation
import LarderTestSupport
import Synchronization
import Testing
@testable import Larder

/// The writer keeps the recency high-water mark (`totals.seq`) between its own commits instead
/// of reading it in every write: what it knows must be dropped whenever another connection
/// committed, or its own transaction rolled back; and new indexes use 2 KiB pages.
@Suite(.timeLimit(.minutes(10)))
struct DiskIndexSequenceTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("disk-index-sequence")
    }

    var indexPath: String { folder.url.appendingPathComponent("index.sqlite").path }

    func makeIndex() throws -> DiskIndex {
        try DiskIndex(path: indexPath, durability: .fast, busyTimeout: .seconds(10))
    }

    func storedSequence() throws -> Int64 {
        let connection = try SQLiteConnection(path: indexPath)
        defer { connection.close() }
        return try #require(try connection.scalarInt64("SELECT seq FROM totals WHERE id = 0"))
    }

    // MARK: - Another connection's commit

    @Test func aNumberAnotherConnectionWroteIsSeenByTheNextTransaction() throws {
        // Given an index whose writer reserved numbers in its last commit
        let index = try makeIndex()
        let reserved = try index.connection.transaction { try index.recordAccesses([], reserving: 5) }
        #expect(reserved == 5)
        #expect(try index.connection.transaction { try index.maxSequence() } == 5)

        // (the stored mark is ahead of it: numbers up to it are reserved)
        let reservation = DiskIndex.sequenceReservation
        #expect(try storedSequence() == 5 + reservation)

        // When another connection moves the high-water mark on
        let other = try SQLiteConnection(path: indexPath)
        try other.transaction { try other.execute("UPDATE totals SET seq = seq + 100 WHERE id = 0") }
        other.close()

        // Then the writer's next transaction continues above it, not from what it knew
        let next = try index.connection.transaction { try index.recordAccesses([], reserving: 1) }
        #expect(next == 5 + reservation + 100 + 1)
        #expect(try storedSequence() == next + reservation)
    }

    // MARK: - Rollback

    @Test func aNumberReservedInARolledBackTransactionIsForgotten() throws {
        struct Abort: Error {}
        // Given a high-water mark of 3
        let index = try makeIndex()
        try index.connection.transaction { _ = try index.recordAccesses([], reserving: 3) }

        // When a transaction reserves more numbers and then rolls back
        #expect(throws: Abort.self) {
            try index.connection.transaction {
                #expect(try index.recordAccesses([], reserving: 40) == 43)
                throw Abort()
            }
        }

        // Then the next transaction continues above the committed mark (3 plus the numbers
        // reserved with it), not from the rolled-back numbers
        let mark = 3 + DiskIndex.sequenceReservation
        #expect(try storedSequence() == mark)
        #expect(try index.connection.transaction { try index.maxSequence() } == mark)
        #expect(try index.connection.transaction { try index.recordAccesses([], reserving: 1) } == mark + 1)
    }

    // MARK: - The mark is stored ahead

    @Test func aRunOfWritesStoresTheMarkOncePerReservationAndAReopenContinuesAboveIt() throws {
        // Given an index whose writer hands out numbers one transaction at a time
        let index = try makeIndex()
        var handedOut: [Int64] = []
        for _ in 0..<10 {
            handedOut.append(try index.connection.transaction { try index.recordAccesses([], reserving: 1) })
        }
        // Then the numbers grow by one, and the stored mark stays the first one's reservation
        #expect(handedOut == Array(1...10))
        #expect(try storedSequence() == 1 + DiskIndex.sequenceReservation)

        // When the index is opened again
        index.connection.close()
        let reopened = try makeIndex()

        // Then new numbers continue above every number handed out
        let next = try reopened.connection.transaction { try reopened.recordAccesses([], reserving: 1) }
        #expect(next > handedOut.last!)
        #expect(next == 1 + DiskIndex.sequenceReservation + 1)
    }

    // MARK: - Two stores writing in turns

    @Test func twoStoresWritingInTurnsRankEveryWriteAfterTheOneBefore() throws {
        // Given two stores on one directory
        var configuration = DiskStore.Configuration()
        configuration.logHandler = nil
        configuration.overflowTrimRatio = 0
        let first = try DiskStore(directory: folder.url, configuration: configuration)
        let second = try DiskStore(directory: folder.url, configuration: configuration)

        // When they write in turns (each write commits between the other's)
        for index in 0..<40 {
            let store = index.isMultiple(of: 3) ? first : second
            try store.setValue(Data("value \(index)".utf8), forKey: "key-\(index)")
        }

        // Then the recency numbers follow the order of the writes, with no number used twice
        let connection = try SQLiteConnection(path: indexPath)
        defer { connection.close() }
        let order = try connection.statement(
            "SELECT e.key FROM access AS a JOIN entries AS e ON e.rowid = a.entry ORDER BY a.seq"
        ).withReset { statement in
            var keys: [String] = []
            while try statement.step() { keys.append(statement.string(0)) }
            return keys
        }
        #expect(order == (0..<40).map { "key-\($0)" })
        let distinct = try connection.scalarInt64("SELECT count(DISTINCT seq) FROM access")
        #expect(distinct == 40)

        // And a trim keeps exactly the last ten written, whichever store trims
        try first.trim(toCount: 10)
        #expect(try first.keys().sorted() == (30..<40).map { "key-\($0)" }.sorted())
    }

    // MARK: - Page size

    @Test func aNewIndexUses2KiBPagesAndAnExistingOneKeepsItsOwn() throws {
        // Given a new index, and an existing database made with 4 KiB pages
        let index = try makeIndex()
        #expect(try index.connection.scalarInt64("PRAGMA page_size") == Int64(DiskIndex.newPageSize))
        index.connection.close()

        let oldFolder = try TemporaryDirectory("disk-index-page-size")
        let oldPath = oldFolder.url.appendingPathComponent("index.sqlite").path
        let old = try SQLiteConnection(path: oldPath)
        try old.execute("PRAGMA page_size = 4096")
        try old.execute("CREATE TABLE placeholder (x)")
        try old.execute("DROP TABLE placeholder")
        old.close()

        // When the store opens it
        let reopened = try DiskIndex(path: oldPath, durability: .fast, busyTimeout: .seconds(10))

        // Then it keeps 4 KiB pages, and the checkpoint threshold is the same number of bytes
        #expect(try reopened.connection.scalarInt64("PRAGMA page_size") == 4_096)
        let pages = try #require(reopened.connection.logMonitor).threshold.load(ordering: .relaxed)
        #expect(pages == max(16, (4 << 20) / 4_096))
        let newPages = try #require(try makeIndex().connection.logMonitor).threshold.load(ordering: .relaxed)
        #expect(newPages == max(16, (4 << 20) / DiskIndex.newPageSize))
        // (SQLite's own checkpoint on commit is off: the monitor replaced it)
        #expect(try reopened.connection.scalarInt64("PRAGMA wal_autocheckpoint") == 0)
    }
}
