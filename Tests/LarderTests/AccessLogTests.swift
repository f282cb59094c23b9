import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// ``AccessLog`` on its own, without a ``DiskStore``: what ``AccessLog/record(_:)`` counts and
/// logs, the order in which ``AccessLog/drain(into:)`` hands reads out (across threads, and
/// after a failed drain), reservations, and when the log asks to be drained.
@Suite(.timeLimit(.minutes(5)))
struct AccessLogTests {
    typealias Access = DiskIndex.Access

    struct DrainFailed: Error {}

    /// What a drain hands out, emptying the log.
    func drained(_ log: AccessLog) -> DiskIndex.PendingReads {
        log.drain { $0 }
    }

    // MARK: - Counting and logging

    @Test func hitsAndMissesAreCountedAndOnlyLoggedHitsAreDrained() {
        let log = AccessLog(ranksInBackground: false)
        #expect(log.record(.miss) == .none)
        #expect(log.record(.unloggedHit) == .none)
        #expect(log.record(.answer) == .none)
        #expect(log.record(.none) == .none)
        #expect(log.record(.hit(Access(rowID: 7, time: 1))) == .none)
        #expect(log.counts.hits == 2 && log.counts.misses == 1)
        #expect(drained(log).accesses.map(\.rowID) == [7])
        #expect(!log.hasPending)
        #expect(log.counts.hits == 2, "counts outlive a drain")
    }

    @Test func aSlidingHitLogsItsRenewalWithIt() {
        let log = AccessLog(ranksInBackground: false)
        _ = log.record(.slidingHit(Access(rowID: 3, time: 5), expires: 9_000))
        #expect(log.hasPendingRenewals)
        let due = drained(log)
        #expect(due.accesses.map(\.rowID) == [3])
        #expect(due.extensions.count == 1 && due.extensions[0].expires == 9_000)
        #expect(!log.hasPendingRenewals)
    }

    // MARK: - Order

    @Test func readsOfSeveralThreadsComeOutInTheOrderTheyWereRecorded() async {
        // Given threads that take turns: each records a hit only after the previous one's
        // record returned
        let log = AccessLog(ranksInBackground: false)
        let rounds = 40
        let threads = 4
        await withTaskGroup(of: Void.self) { group in
            let turn = Locked(0)
            for thread in 0..<threads {
                group.addTask {
                    // A thread of its own, so the hits land in different lanes.
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        Thread.detachNewThread {
                            for round in 0..<rounds {
                                let mine = round * threads + thread
                                while turn.withLock({ $0 }) != mine { sched_yield() }
                                _ = log.record(.hit(Access(rowID: Int64(mine), time: 0)))
                                turn.withLock { $0 += 1 }
                            }
                            done.resume()
                        }
                    }
                }
            }
        }
        // Then the drain hands them out in that order
        #expect(drained(log).accesses.map(\.rowID) == (0..<Int64(rounds * threads)).map { $0 })
    }

    @Test func aFailedDrainPutsItsReadsBackInFront() {
        // Given reads 1 and 2, and a drain that fails
        let log = AccessLog(ranksInBackground: false)
        _ = log.record(.hit(Access(rowID: 1, time: 0)))
        _ = log.record(.hit(Access(rowID: 2, time: 0)))
        #expect(throws: DrainFailed.self) { try log.drain { (_: DiskIndex.PendingReads) throws -> Void in throw DrainFailed() } }
        // When read 3 follows
        _ = log.record(.hit(Access(rowID: 3, time: 0)))
        // Then the next drain has all three, in order
        #expect(drained(log).accesses.map(\.rowID) == [1, 2, 3])
    }

    // MARK: - Reservations

    @Test func aReservationNumbersThePendingReadsAndComesOutWithThem() throws {
        let log = AccessLog(ranksInBackground: false)
        _ = log.record(.hit(Access(rowID: 1, time: 0)))
        _ = log.record(.hit(Access(rowID: 2, time: 0)))
        #expect(log.numberPendingReads(after: 10) == 2)
        log.endWrite(committed: true)
        // A read after the reservation has no number
        _ = log.record(.hit(Access(rowID: 3, time: 0)))
        let due = drained(log)
        #expect(due.accesses.map(\.rowID) == [1, 2, 3])
        #expect(due.sequences == [11, 12])
    }

    @Test func aWriteThatDoesNotCommitTakesItsNumbersBack() throws {
        // Given a committed write that numbered read 1
        let log = AccessLog(ranksInBackground: false)
        _ = log.record(.hit(Access(rowID: 1, time: 0)))
        #expect(log.numberPendingReads(after: 0) == 1)
        log.endWrite(committed: true)
        // When a second write numbers read 2 (twice, as a transaction may) and rolls back
        _ = log.record(.hit(Access(rowID: 2, time: 0)))
        #expect(log.numberPendingReads(after: 5) == 1)
        _ = log.record(.hit(Access(rowID: 3, time: 0)))
        #expect(log.numberPendingReads(after: 7) == 1)
        log.endWrite(committed: false)
        // Then only the first write's number stays
        #expect(drained(log).sequences == [1])
    }

    @Test func noReservationWhileRenewalsWait() {
        let log = AccessLog(ranksInBackground: false)
        _ = log.record(.slidingHit(Access(rowID: 1, time: 0), expires: 100))
        #expect(log.numberPendingReads(after: 0) == nil)
        #expect(drained(log).sequences.isEmpty)
    }

    @Test func forgettingARowDropsItsReadsWithTheirNumbers() throws {
        let log = AccessLog(ranksInBackground: false)
        for rowID: Int64 in [1, 2, 1, 3] { _ = log.record(.hit(Access(rowID: rowID, time: 0))) }
        _ = try #require(log.numberPendingReads(after: 100))
        log.endWrite(committed: true)
        log.discard(row: 1)
        let due = drained(log)
        #expect(due.accesses.map(\.rowID) == [2, 3])
        #expect(due.sequences == [102, 104])
    }

    @Test func discardAllForgetsEverythingButTheCounts() {
        let log = AccessLog(ranksInBackground: false)
        _ = log.record(.hit(Access(rowID: 1, time: 0)))
        _ = log.record(.slidingHit(Access(rowID: 2, time: 0), expires: 10))
        log.discardAll()
        #expect(!log.hasPending)
        #expect(drained(log).isEmpty)
        #expect(log.counts.hits == 2)
    }

    // MARK: - When to drain

    @Test func aLogWhoseOldestReadIsOldEnoughAsksToBeDrained() {
        let log = AccessLog(ranksInBackground: false)
        #expect(log.record(.hit(Access(rowID: 1, time: 1_000))) == .none)
        #expect(log.record(.hit(Access(rowID: 2, time: 1_000 + AccessLog.flushDelay - 1))) == .none)
        #expect(log.record(.hit(Access(rowID: 3, time: 1_000 + AccessLog.flushDelay))) == .rankHere)
    }

    @Test func aBackgroundDrainIsQueuedOnceUntilItEnds() {
        let log = AccessLog(ranksInBackground: true)
        _ = log.record(.hit(Access(rowID: 1, time: 0)))
        #expect(log.record(.hit(Access(rowID: 2, time: AccessLog.flushDelay))) == .rankInBackground)
        #expect(log.record(.hit(Access(rowID: 3, time: AccessLog.flushDelay + 1))) == .none, "one is queued")
        // When the queued drain ends having written what it took
        _ = drained(log)
        #expect(!log.backgroundRankingEnded(ranked: true), "less than a batch waits")
        // Then the next due read queues one again
        _ = log.record(.hit(Access(rowID: 4, time: 0)))
        #expect(log.record(.hit(Access(rowID: 5, time: AccessLog.flushDelay))) == .rankInBackground)
    }

    @Test func aRenewalByAFasterTierIsDrainedInTheBackgroundOnly() {
        let log = AccessLog(ranksInBackground: false)
        #expect(log.renew(key: "k", until: 50, now: 0) == .none)
        #expect(log.hasPendingRenewals)
        #expect(log.renew(key: "k", until: 60, now: AccessLog.flushDelay) == .rankInBackground)
    }
}
