import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// ``ReaderPool`` on its own, without a ``DiskStore``: on a real index file, which reader a
/// read gets, what a retirement and a close do, how a vanished directory is handled, and
/// lingering snapshots.
@Suite(.timeLimit(.minutes(5)))
struct ReaderPoolTests {
    let folder: TemporaryDirectory
    var indexPath: String { folder.url.appendingPathComponent("index.sqlite").path }

    init() throws {
        folder = try TemporaryDirectory("reader-pool")
        _ = try DiskIndex(path: indexPath, durability: .fast, busyTimeout: .seconds(5))
    }

    func makePool() -> ReaderPool {
        ReaderPool(
            directory: folder.url.path, indexPath: indexPath, busyTimeout: .seconds(5), countsLookups: false,
            indexIdentity: FileIdentity(path: indexPath))
    }

    /// The reader a read ran on, and the entry count it saw.
    func read(_ pool: ReaderPool, recover: (ReaderPool.Recovery) throws -> Void = { _ in Issue.record("no recovery expected") })
        throws -> (reader: ObjectIdentifier, count: Int) {
        try pool.withReader({ reader in (ObjectIdentifier(reader), try reader.totals().count) },
                            reportsContents: { _ in true }, recover: recover)
    }

    // MARK: - Borrowing

    @Test func aThreadReadsAgainOnTheReaderItParked() throws {
        let pool = makePool()
        let first = try read(pool)
        let second = try read(pool)
        #expect(first.reader == second.reader)
        #expect(pool.census.parked == 1 && pool.census.idle == 0)
    }

    @Test func aRetiredPoolOpensAFreshReaderAndAClosedOneRefusesToRead() throws {
        let pool = makePool()
        let first = try read(pool)
        pool.retire()
        #expect(pool.census.parked == 0)
        let second = try read(pool)
        #expect(first.reader != second.reader)
        pool.retire(closing: true)
        #expect(pool.census.isClosed && pool.census.parked == 0 && pool.census.idle == 0)
        #expect(throws: StorageError.self) { try read(pool) }
    }

    // MARK: - A vanished directory

    @Test func aDeletedDirectoryIsRecreatedThroughTheCallerBeforeAnyAnswer() throws {
        // Given a pool whose reader is parked on an index with one entry
        let pool = makePool()
        let index = try DiskIndex(path: indexPath, durability: .fast, busyTimeout: .seconds(5))
        try index.connection.transaction {
            try index.write(
                DiskIndex.Row(
                    key: "k", hash: "", file: nil, size: 1, originalSize: 1, encoding: .raw, crc: 0, created: 0,
                    expires: nil, inlineData: Data([1]), metadata: nil, sliding: nil),
                sequence: 1, existing: nil)
        }
        #expect(try read(pool).count == 1)
        index.connection.close()
        // When the directory is deleted
        try FileManager.default.removeItem(at: folder.url)
        // Then the next read asks its caller to recreate it, and answers from the new index
        var recoveries = 0
        let after = try read(pool) { recovery in
            guard case .directoryChanged = recovery else {
                Issue.record("unexpected \(recovery)")
                return
            }
            recoveries += 1
            try FileManager.default.createDirectory(at: folder.url, withIntermediateDirectories: true)
            _ = try DiskIndex(path: indexPath, durability: .fast, busyTimeout: .seconds(5))
            pool.indexOpened(FileIdentity(path: indexPath))
        }
        #expect(recoveries == 1)
        #expect(after.count == 0, "never the deleted index's entry")
    }

    @Test func aDirectoryDeletedAtEveryTryEndsInAnError() throws {
        let pool = makePool()
        try FileManager.default.removeItem(at: folder.url)
        var recoveries = 0
        #expect(throws: StorageError.self) { try read(pool) { _ in recoveries += 1 } }
        #expect(recoveries > 0)
        #expect(!FileManager.default.fileExists(atPath: indexPath), "a reader never creates an index")
    }

    // MARK: - Lingering

    @Test func endingAndPausingLingeringLeavesNoSnapshot() throws {
        // Given readers whose snapshots linger, with no sweep to end them
        let pool = makePool()
        pool.sweepDelay = 3_600
        for _ in 0..<3 { _ = try read(pool) }
        #expect(pool.lingeringReaderCount >= 1)
        // When lingering ends
        pool.endLingering()
        // Then no reader keeps one
        #expect(pool.lingeringReaderCount == 0)
        // And while lingering is paused, reads keep none either
        pool.withLingeringPaused {
            for _ in 0..<3 { _ = try? read(pool) }
            #expect(pool.lingeringReaderCount == 0)
        }
    }
}
