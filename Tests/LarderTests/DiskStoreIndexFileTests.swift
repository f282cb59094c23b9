import Foundation
import LarderTestSupport
import Synchronization
import Testing
@testable import Larder

/// The index and its log on disk.
///
/// - The write-ahead log is copied into the database in the background, on a connection of its
///   own, while writes go on; the writing thread checkpoints only when the log reaches its
///   bound (``SQLiteLogMonitor``).
/// - A trim that removes rows stored inline gives their pages back to the file system, as one
///   that removes blob rows does (it used to keep them: only removed blob files triggered the
///   release), and another store on the same directory, whose read connections knew the larger
///   file, goes on returning exact bytes or misses.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreIndexFileTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("disk-index-file")
    }

    var indexPath: String { folder.url.appendingPathComponent(DiskStore.indexFileName).path }

    func size(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    func monitor(of store: DiskStore) throws -> SQLiteLogMonitor {
        try #require(store.state.withLock { $0.index?.connection.logMonitor })
    }

    /// Polls `condition` until it holds; the suite's time limit bounds the wait. (A background
    /// pass runs on Larder's I/O queue, which a loaded full run can keep busy for a minute and
    /// more with other stores' work: a deadline of our own only made the test flaky.)
    func waitUntil(_ condition: () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test func writesBelowTheBoundAreCopiedIntoTheDatabaseInTheBackground() async throws {
        // Given a store whose log bound (4 MiB, 2,048 frames) is far above what 150 writes add
        let store = try DiskStore(directory: folder.url)
        let monitor = try monitor(of: store)
        #expect(monitor.threshold.load(ordering: .relaxed) == 2_048)
        let databaseBefore = size(indexPath)

        // When 150 values are written (about 700 frames: more than two background steps of 256)
        for index in 0..<150 { try store.setValue(Data(repeating: UInt8(index), count: 100), forKey: "k\(index)") }

        // Then a background checkpoint copied frames into the database file while the log
        // was still below the bound where the writing thread would have copied it. The file's
        // growth shows it; `copied` cannot: it counts what is copied of the log as it is now,
        // and goes back to 0 when a pass copied all of it and the next commit started it over
        // (on a loaded machine, in the middle of the writes: a CI run failed with `copied` 0).
        // (A pass that meets a busy database, or a connection that fails to open on a loaded
        // machine, is retried only at a later commit: while none is queued, one more small write
        // gives it that commit. At most 100 of them, about 400 frames: still far below the bound.
        // No deadline while a pass waits in the queue: the suite's time limit bounds that.)
        var nudges = 0
        while size(indexPath) <= databaseBefore || monitor.isPending.load(ordering: .relaxed) {
            if !monitor.isPending.load(ordering: .relaxed) {
                guard nudges < 100 else { break }
                try store.setValue(Data([UInt8(nudges % 256)]), forKey: "nudge")
                nudges += 1
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(size(indexPath) > databaseBefore, """
            nothing reached the database file after \(nudges) extra writes \
            (\(monitor.backgroundPasses.load(ordering: .relaxed)) passes, \(monitor.frames.load(ordering: .relaxed)) frames)
            """)
        #expect(monitor.backgroundPasses.load(ordering: .relaxed) >= 1)
        #expect(monitor.frames.load(ordering: .relaxed) < 2_048, "the log reached its bound: the writer checkpointed")
        // And every value reads back exact, from a new store on the directory too
        let other = try DiskStore(directory: folder.url)
        for index in 0..<150 { #expect(try other.value(forKey: "k\(index)") == Data(repeating: UInt8(index), count: 100)) }
    }

    @Test func theLogStaysWithinItsBoundUnderASteadyRunOfWrites() throws {
        // Given a store with the smallest log bound (64 KiB: 32 frames of 2 KiB)
        var configuration = DiskStore.Configuration()
        configuration.sizeLimit = 1 << 20
        // A new store sweeps in the background on first open, and the sweep's read keeps the
        // log from starting over while it lasts (long on a loaded machine): sweep it first.
        let first = try DiskStore(directory: folder.url, configuration: configuration)
        _ = try first.removeOrphanedFiles()
        first.close()
        let store = try DiskStore(directory: folder.url, configuration: configuration)
        #expect(try monitor(of: store).threshold.load(ordering: .relaxed) == 32)

        // When far more than the bound is written, with no pause for the background to catch up
        var largest = 0
        for index in 0..<2_000 {
            try store.setValue(Data(repeating: UInt8(truncatingIfNeeded: index), count: 100), forKey: "k\(index % 300)")
            largest = max(largest, size(indexPath + "-wal"))
        }

        // Then the log file never held much more than its bound: the writing thread copies it
        // itself at the bound (waiting for a background pass under way once a quarter past
        // it), and the next write starts it over; one transaction's frames of slack
        #expect(largest <= (64 << 10) * 5 / 4 + 16 * (2_048 + 24), "the log reached \(largest) bytes")
        for index in 1_700..<2_000 {
            #expect(try store.value(forKey: "k\(index % 300)") == Data(repeating: UInt8(truncatingIfNeeded: index), count: 100))
        }
    }

    @Test func aLogThatAReaderHoldsPastItsBoundIsBroughtBackWhenTheReaderLetsGo() throws {
        // Given a store with the smallest log bound, and another connection in a read
        // transaction that keeps the log's current frames alive
        var configuration = DiskStore.Configuration()
        configuration.sizeLimit = 1 << 20
        let store = try DiskStore(directory: folder.url, configuration: configuration)
        try store.setValue(Data([1]), forKey: "first")
        let reader = try SQLiteConnection(path: indexPath)
        defer { reader.close() }
        try reader.execute("BEGIN")
        #expect(try reader.scalarInt64("SELECT count(*) FROM entries") == 1)

        // When writes go far past the bound
        for index in 0..<300 { try store.setValue(Data(repeating: 7, count: 100), forKey: "k\(index)") }

        // Then the log grew (no checkpoint may start it over under the reader) and says so
        let monitor = try monitor(of: store)
        #expect(monitor.isOverBound)
        #expect(size(indexPath + "-wal") > 4 * (64 << 10))

        // And once the reader lets go, the next writes bring it back within its bound
        try reader.execute("COMMIT")
        for index in 0..<1_000 { try store.setValue(Data(repeating: 8, count: 100), forKey: "k\(index % 300)") }
        #expect(!monitor.isOverBound)
        try store.setValue(Data(repeating: 9, count: 100), forKey: "last")
        #expect(size(indexPath + "-wal") <= (64 << 10) * 5 / 4 + 16 * (2_048 + 24))
        #expect(try store.value(forKey: "k299") == Data(repeating: 8, count: 100))
    }

    // MARK: - Giving pages back

    func value(_ index: Int, _ generation: UInt8) -> Data {
        Data((0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7) ^ generation })
    }

    @Test func trimmingInlineRowsShrinksTheIndexAndAnotherStoreKeepsReadingExactBytes() throws {
        // Given a store that wrote and read back 2,000 inline 4 KiB values
        let count = 2_000
        let reader = try DiskStore(directory: folder.url)
        for index in 0..<count { try reader.setValue(value(index, 1), forKey: "k\(index)") }
        for index in 0..<count { #expect(try reader.value(forKey: "k\(index)") == value(index, 1)) }
        let sizeBefore = size(indexPath)

        // When another store on the directory trims every entry and the log is checkpointed
        let other = try DiskStore(directory: folder.url)
        try other.trim(toCount: 0)
        let checkpointer = try SQLiteConnection(path: indexPath)
        // (busy while a background pass of either store runs: SQLite does not wait for one)
        var busy = true
        for _ in 0..<200 where busy {
            busy = try checkpointer.scalarInt64("PRAGMA wal_checkpoint(TRUNCATE)") != 0
            if busy { usleep(10_000) }
        }
        checkpointer.close()
        #expect(!busy)

        // Then the file shrank, the first store sees the removals, and both read each other's new values
        let sizeAfter = size(indexPath)
        #expect(sizeAfter < sizeBefore / 4, "the index did not shrink (\(sizeBefore) → \(sizeAfter) bytes)")
        for index in stride(from: 0, to: count, by: 7) { #expect(try reader.value(forKey: "k\(index)") == nil) }
        for index in 0..<200 { try other.setValue(value(index, 2), forKey: "n\(index)") }
        for index in 0..<200 { #expect(try reader.value(forKey: "n\(index)") == value(index, 2)) }
        for index in 0..<200 { try reader.setValue(value(index, 3), forKey: "k\(index)") }
        for index in 0..<200 { #expect(try other.value(forKey: "k\(index)") == value(index, 3)) }
        #expect(try reader.value(forKey: "k\(count - 1)") == nil)
    }
}
