import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// The read side's two pieces of machinery on their own, without a ``DiskStore``: the log of
/// reads (what is counted, what is logged, when it is due, in what order it comes out) and the
/// pool of read connections (which reader a thread gets back, which ones it keeps, and what a
/// reader that keeps a snapshot asks for). Real SQLite connections on a real index file.
@Suite(.timeLimit(.minutes(10)))
struct ReadSideTests {
    typealias Access = DiskIndex.Access

    // MARK: - The read log

    @Test func aMissAndAnUnloggedHitAreCountedButNotLogged() {
        var log = ReadLog()
        #expect(log.record(.miss, inBackground: true) == .none)
        #expect(log.record(.unloggedHit, inBackground: true) == .none)
        #expect(log.record(.none, inBackground: true) == .none)
        #expect(log.record(.answer, inBackground: true) == .none)
        #expect(log.hits == 1 && log.misses == 1)
        #expect(log.pending.isEmpty && log.oldestPending == nil)
    }

    @Test func hitsAreLoggedInOrderAndComeOutInThatOrderWithTheirReservations() {
        // Given hits of rows 3, 1, 2, and a sliding hit of row 1 that renewed its lifetime
        var log = ReadLog()
        for (rowID, time) in [(3, 10), (1, 11), (2, 12)] {
            _ = log.record(.hit(Access(rowID: Int64(rowID), time: Int64(time))), inBackground: true)
        }
        _ = log.record(.slidingHit(Access(rowID: 1, time: 13), expires: 5_000), inBackground: true)
        log.reservedSequences = [100, 101]
        #expect(log.hits == 4 && log.oldestPending == 10)
        // When the log is taken
        let taken = log.takePending()
        // Then the reads come out in the order they happened, with the numbers reserved for
        // the first ones and the renewal, and the log is empty
        #expect(taken.accesses.map(\.rowID) == [3, 1, 2, 1])
        #expect(taken.sequences == [100, 101])
        #expect(taken.extensions.count == 1 && taken.extensions[0].expires == 5_000)
        #expect(log.pending.isEmpty && log.reservedSequences.isEmpty && log.extensions.isEmpty)
        #expect(log.oldestPending == nil && !log.pendingRows.mayContain(3))
        #expect(log.hits == 4, "counts stay")
    }

    @Test func theLogIsDueAtABatchOfReadsOfOneRow() {
        var log = ReadLog()
        var steps: [AccessLog.Step] = []
        for _ in 0..<(AccessLog.flushReads - 1) {
            steps.append(log.record(.hit(Access(rowID: 1, time: 0)), inBackground: true))
        }
        #expect(steps.allSatisfy { $0 == .none })
        // The batch's last read queues a ranking in the background, once
        #expect(log.record(.hit(Access(rowID: 1, time: 0)), inBackground: true) == .rankInBackground)
        #expect(log.isRankingInBackground)
        #expect(log.record(.hit(Access(rowID: 1, time: 0)), inBackground: true) == .none)
        // Ranked on the reading thread when rankings do not run in the background
        #expect(log.record(.hit(Access(rowID: 1, time: 0)), inBackground: false) == .rankHere)
    }

    @Test func theLogIsDueAtABatchOfDistinctRows() {
        var log = ReadLog()
        var steps: [AccessLog.Step] = []
        for rowID in 1..<Int64(AccessLog.flushCount) {
            steps.append(log.record(.hit(Access(rowID: rowID, time: 0)), inBackground: false))
        }
        #expect(steps.allSatisfy { $0 == .none })
        #expect(!log.isFull)
        #expect(log.record(.hit(Access(rowID: Int64(AccessLog.flushCount), time: 0)), inBackground: false) == .rankHere)
        #expect(log.isFull)
    }

    @Test func theLogIsDueWhenItsOldestReadIsOldEnough() {
        var log = ReadLog()
        #expect(log.record(.hit(Access(rowID: 1, time: 1_000)), inBackground: false) == .none)
        #expect(!log.isDue(at: 1_000 + AccessLog.flushDelay - 1))
        #expect(log.isDue(at: 1_000 + AccessLog.flushDelay))
        #expect(log.record(.hit(Access(rowID: 2, time: 1_000 + AccessLog.flushDelay)), inBackground: false) == .rankHere)
    }

    @Test func aReaderRanksItselfWhenReadsPileUpBehindABackgroundRanking() {
        var log = ReadLog()
        log.isRankingInBackground = true
        for _ in 0..<(AccessLog.inlineBacklog - 1) { _ = log.logHit(Access(rowID: 1, time: 0)) }
        #expect(log.step(due: true, inBackground: true) == .none, "the ranking under way takes them")
        _ = log.logHit(Access(rowID: 1, time: 0))
        #expect(log.step(due: true, inBackground: true) == .rankHere)
        #expect(log.step(due: true, inBackground: true, mayRankHere: false) == .none, "a memory hit never ranks")
    }

    @Test func lanesAreMergedInTheOrderOfTheirTickets() {
        // Given two lanes' reads, each in ticket order
        var log = ReadLog()
        let first: [Access] = [Access(rowID: 1, time: 0), Access(rowID: 3, time: 0), Access(rowID: 5, time: 0)]
        let second: [Access] = [Access(rowID: 2, time: 0), Access(rowID: 4, time: 0)]
        // When they are merged
        log.append(merging: [(first[...], [0, 2, 4][...]), (second[...], [1, 3][...])])
        // Then the log holds them in ticket order
        #expect(log.pending.map(\.rowID) == [1, 2, 3, 4, 5])
    }

    // MARK: - The pool of readers

    /// A real index in a temporary directory, and readers on it.
    final class Index {
        let folder: TemporaryDirectory
        let index: DiskIndex
        var path: String { folder.url.appendingPathComponent("index.sqlite").path }

        init() throws {
            folder = try TemporaryDirectory("read-side")
            index = try DiskIndex(
                path: folder.url.appendingPathComponent("index.sqlite").path, durability: .fast, busyTimeout: .seconds(5))
        }

        func reader(generation: Int = 0, thread: UInt = 1) throws -> PooledReader {
            let descriptor = open(folder.url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try #require(descriptor >= 0)
            return PooledReader(
                reader: try DiskIndexReader(path: path, busyTimeout: .seconds(5)), generation: generation,
                thread: thread, directoryDescriptor: descriptor)
        }
    }

    @Test func aThreadGetsBackTheReaderItUsedLastElseTheOneReturnedLast() throws {
        let index = try Index()
        var pool = ReaderPool.State()
        let (a, b, c) = (try index.reader(thread: 1), try index.reader(thread: 2), try index.reader(thread: 3))
        for reader in [a, b, c] { #expect(pool.checkIn(reader) == .none) }
        #expect(pool.takeIdle(for: 1) === a)
        #expect(pool.takeIdle(for: 9) === c, "no reader of its own: the one returned last")
        #expect(c.lastThread == 9)
        #expect(pool.takeIdle(for: 9) === b)
        #expect(pool.takeIdle(for: 9) == nil)
    }

    @Test func thePoolKeepsNoReaderOfAnOlderGenerationOrAClosedPoolOrBeyondItsLimit() throws {
        let index = try Index()
        var pool = ReaderPool.State()
        pool.generation = 2
        _ = pool.checkIn(try index.reader(generation: 1))
        #expect(pool.idle.isEmpty, "an older generation's reader closes")
        for _ in 0..<(ReaderPool.idleLimit + 1) { _ = pool.checkIn(try index.reader(generation: 2)) }
        #expect(pool.idle.count == ReaderPool.idleLimit)
        _ = pool.takeIdle(for: 1)
        pool.isClosed = true
        _ = pool.checkIn(try index.reader(generation: 2))
        #expect(pool.idle.count == ReaderPool.idleLimit - 1, "a closed pool keeps none")
    }

    @Test func aReaderThatKeepsItsSnapshotAsksForASweepOrToEndItFirst() throws {
        // Given a reader that keeps its read transaction after a read
        let index = try Index()
        let pooled = try index.reader()
        _ = try pooled.reader.totals()  // maps the wal-index
        pooled.reader.startRead(lingering: true, now: 0)
        _ = try pooled.reader.totals()
        #expect(pooled.reader.isLingering)
        // When it goes back into the pool: the pool asks for a sweep after its delay
        var pool = ReaderPool.State()
        pool.sweepDelay = 0.5
        #expect(pool.checkIn(pooled) == .sweep(after: 0.5))
        // And the sweep ends the snapshot
        pool.endIdleLingering()
        #expect(!pooled.reader.isLingering)
        // While a checkpoint pauses lingering, a returning reader must end its snapshot first
        let taken = pool.takeIdle(for: 1)
        let again = try #require(taken)
        again.reader.startRead(lingering: true, now: 1)
        _ = try again.reader.totals()
        pool.lingerPauses = 1
        #expect(pool.checkIn(again) == .endThenReturn)
        #expect(pool.idle.isEmpty)
    }

    @Test func aReaderNoticesItsDirectoryDeleted() throws {
        let index = try Index()
        let pooled = try index.reader()
        #expect(!pooled.isDirectoryGone)
        try FileManager.default.removeItem(at: index.folder.url)
        #expect(pooled.isDirectoryGone)
        // while its connection still answers from the unlinked index
        #expect(try pooled.reader.totals().count == 0)
    }
}
