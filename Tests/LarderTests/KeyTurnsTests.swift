import Foundation
import Testing
@testable import Larder

/// Per-key ordering: turns held across `await`, handed over in arrival order, and tokens that
/// tell a reader whether a write happened.
@Suite(.timeLimit(.minutes(10)))
struct KeyTurnsTests {
    @Test func aTurnHeldAcrossAnAwaitMakesTheNextTaskWait() async throws {
        // Given one task holding the key's turn across suspensions
        let turns = KeyTurns<String>()
        let log = Locked<[String]>([])
        await turns.acquire("k")
        let waiter = Task {
            await turns.withTurn("k") { () async in log.withLock { $0.append("second") } }
        }
        for _ in 0..<50 { await Task.yield() }
        try await Task.sleep(for: .milliseconds(20))
        // Then the second task has not run while the first holds the turn
        #expect(log.withLock { $0 }.isEmpty)
        log.withLock { $0.append("first") }
        turns.release("k")
        await waiter.value
        #expect(log.withLock { $0 } == ["first", "second"])
    }

    @Test func waitersAreServedInArrivalOrderAndOtherKeysNeverWait() async throws {
        let turns = KeyTurns<String>()
        let log = Locked<[Int]>([])
        await turns.acquire("k")
        var waiters: [Task<Void, Never>] = []
        for index in 0..<8 {
            waiters.append(Task { await turns.withTurn("k") { () async in log.withLock { $0.append(index) } } })
            // Each waiter is queued before the next starts.
            while turns.waiterCount("k") < index + 1 { await Task.yield() }
        }
        // Another key's turn is free meanwhile
        await turns.withTurn("other") { () async in log.withLock { $0.append(-1) } }
        turns.release("k")
        for waiter in waiters { await waiter.value }
        #expect(log.withLock { $0 } == [-1] + Array(0..<8))
    }

    @Test func aThreadWaitsForATaskThatHoldsTheTurn() async throws {
        let turns = KeyTurns<String>()
        let log = Locked<[String]>([])
        await turns.acquire("k")
        let thread = Thread {
            turns.withTurn("k") { log.withLock { $0.append("thread") } }
        }
        thread.start()
        while turns.waiterCount("k") < 1 { await Task.yield() }
        log.withLock { $0.append("task") }
        turns.release("k")
        while log.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(1)) }
        #expect(log.withLock { $0 } == ["task", "thread"])
    }

    @Test func aTokenSeesEveryCompletedWriteAndEveryEpoch() {
        let turns = KeyTurns<String>()
        // A promotion runs when nothing happened since the token
        let token = turns.token(for: "k")
        #expect(turns.withTurnIfUnchanged("k", since: token) { 1 } == 1)
        // Not after a write of the key completed
        turns.withTurn("k") {}
        #expect(turns.withTurnIfUnchanged("k", since: token) { 1 } == nil)
        // Not while a writer holds the key
        let fresh = turns.token(for: "k")
        turns.acquire("k")
        #expect(turns.withTurnIfUnchanged("k", since: fresh) { 1 } == nil)
        turns.release("k")
        // Not after the epoch moved (a clear)
        let beforeClear = turns.token(for: "k")
        turns.advanceEpoch()
        #expect(turns.withTurnIfUnchanged("k", since: beforeClear) { 1 } == nil)
        #expect(turns.withTurnIfUnchanged("k", since: turns.token(for: "k")) { 1 } == 1)
    }
}
