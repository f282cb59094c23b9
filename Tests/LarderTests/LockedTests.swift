import Foundation
import Testing
@testable import Larder

/// `Locked`, the package's one lock (`NSLock`'s mutex, or the adaptive one that spins before it
/// sleeps): mutual exclusion under contention, and a lock that a throwing body leaves released.
///
/// Ten minutes, as every suite: a limit only catches a hang, and in a full parallel run on 2
/// cores a test counts its time from its start while the rest of the run shares the cores.
@Suite(.timeLimit(.minutes(10)))
struct LockedTests {
    /// What the critical section checks: whether another thread was inside it at the same time.
    struct Section {
        var isHeld = false
        var count = 0
        var overlaps = 0
    }

    // (Two cases, not a third for `ownsCacheLines`: each case keeps Dispatch's worker threads
    // busy for a long while in the full parallel run, and other suites' background work, such
    // as the sweep of idle read snapshots, waits for those threads.)
    @Test(arguments: [false, true])
    func threadsContendingForTheLockNeverOverlapAndLoseNoUpdate(spinsBeforeSleeping: Bool) {
        let locked = Locked(Section(), spinsBeforeSleeping: spinsBeforeSleeping)
        let threads = 4
        let rounds = 50_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<rounds {
                locked.withLock { section in
                    if section.isHeld { section.overlaps += 1 }
                    section.isHeld = true
                    // Two threads inside at once would see `isHeld` set or lose increments.
                    section.count += 1
                    section.isHeld = false
                }
            }
        }
        let section = locked.withLock { $0 }
        #expect(section.count == threads * rounds)
        #expect(section.overlaps == 0)
    }

    @Test func aLockOwningItsCacheLinesSharesNoLineWithAnother() {
        // Given locks made one after another, as a store makes its read lanes
        let locks = (0..<8).map { _ in Locked(Section(), ownsCacheLines: true) }
        // Then each mutex and each value starts on a 128-byte boundary of its own
        var starts = Set<UInt>()
        for lock in locks {
            for address in [UInt(bitPattern: lock.mutex), UInt(bitPattern: lock.storage)] {
                #expect(address % 128 == 0)
                starts.insert(address / 128)
            }
        }
        #expect(starts.count == 16)
        // And each keeps its own value, changed from threads at once
        DispatchQueue.concurrentPerform(iterations: locks.count) { index in
            for _ in 0..<1_000 { locks[index].withLock { $0.count += 1 } }
        }
        #expect(locks.map { lock in lock.withLock { $0.count } } == Array(repeating: 1_000, count: 8))
    }

    struct Refused: Error {}

    @Test(arguments: [false, true])
    func aThrowingBodyLeavesTheLockReleasedAndItsChangesInPlace(spinsBeforeSleeping: Bool) throws {
        let locked = Locked(0, spinsBeforeSleeping: spinsBeforeSleeping)
        #expect(throws: Refused.self) {
            try locked.withLock { value throws(Refused) in
                value = 7
                throw Refused()
            }
        }
        // Taken again from another thread: a lock left held would hang here (the time limit).
        let seen = DispatchQueue.global().sync { locked.withLock { $0 } }
        #expect(seen == 7)
    }
}
