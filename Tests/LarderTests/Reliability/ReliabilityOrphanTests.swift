import Foundation
import LarderTestSupport
import Synchronization
import Testing
@testable import Larder

/// No child outlives its test: whatever ends the test — cancellation (which is also what a
/// Swift Testing time limit does), a thrown error, the death of its parent — the helper is
/// killed and reaped, its pipes are closed, and it never held the test runner's output (which
/// would keep `swift test` from returning).
///
/// The waits for a helper to start are long (5 minutes) because in a full `swift test` run the
/// synchronous suites can hold both cooperative threads of a 2-core machine for a minute or
/// more; each wait polls a real condition and returns as soon as it holds.
@Suite(.timeLimit(.minutes(10)))
struct ReliabilityOrphanTests {
    struct Stop: Error {}

    /// How long a helper may take to start writing.
    static let startWait: Duration = .seconds(300)

    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-orphan")
    }

    /// Lines a run printed, collected from another task.
    final class Lines: Sendable {
        private let lines = Locked<[String]>([])
        func append(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    @Test func cancellingAKillTestKillsItsHelperAndReturnsWithTheKillsSurvived() async throws {
        // Given a long kill run (1,000 rounds) whose helper is writing
        let workspace = folder.url
        let lines = Lines()
        let run = Task {
            try await KillRounds.run(.durable(rounds: 1_000), in: workspace, progressEvery: 1, progress: { lines.append($0) })
        }
        let log = workspace.appendingPathComponent("log-durable-1000")
        var helper: Int32?
        let started = await ProcessTable.poll(timeout: Self.startWait) {
            // A helper of this run (its arguments name the workspace) with writes done
            helper = ProcessTable.children(containing: workspace.path).first
            return helper != nil && ProcessTable.logHasCompleted(log, atLeast: 1)
        }
        try #require(started, "no helper of the run started writing")
        let pid = try #require(helper)

        // When the task running it is cancelled (as a time limit does)
        let roundsBeforeCancel = Self.roundLines(lines.all)
        let cancelled = ContinuousClock.now
        run.cancel()
        let outcome = await run.result

        // Then the call returns, by throwing the cancellation, without starting another round:
        // only the round under way when the cancellation came may still finish. (How long the
        // return takes in seconds depends on when the cooperative pool, which the synchronous
        // suites may hold for a minute or more, next runs the task; the bound only catches a
        // run that goes on through its 1,000 rounds.)
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(Self.roundLines(lines.all) <= roundsBeforeCancel + 1, "\(lines.all)")
        #expect(ContinuousClock.now - cancelled < Self.startWait, "the cancelled run took \(ContinuousClock.now - cancelled) to return")
        // …its helper is already killed and reaped, not left writing…
        #expect(ProcessTable.isReaped(pid), "helper \(pid) outlived the cancelled run")
        #expect(ProcessTable.children(containing: workspace.path).isEmpty)
        // …and it said how many kills had been survived.
        #expect(lines.all.contains { $0.contains("stopped after") && $0.contains("kills survived") }, "\(lines.all)")
    }

    /// The progress lines a kill run prints once per finished round (with `progressEvery: 1`).
    static func roundLines(_ lines: [String]) -> Int {
        lines.filter { $0.contains("kills survived,") }.count
    }

    @Test func aCancelledWaitForAHelperReturnsAndTheHelperIsGone() async throws {
        // Given a test blocked waiting for a helper that never ends on its own
        let directory = folder.url.appendingPathComponent("store")
        let log = folder.url.appendingPathComponent("log")
        let pid = Locked<Int32?>(nil)
        let wait = Task {
            try await withChildProcesses { scope in
                let helper = try CrashHelper.startWriter(in: scope, directory: directory, log: log)
                pid.withLock { $0 = helper.processIdentifier }
                await helper.waitForExit()
                return helper
            }
        }
        try #require(await ProcessTable.poll(timeout: Self.startWait) { ProcessTable.logHasCompleted(log, atLeast: 1) })
        // When its task is cancelled
        wait.cancel()
        let helper = try await wait.value
        // Then the wait returned because the helper was killed, and the helper is reaped
        #expect(helper.wasKilledBySignal)
        let id = try #require(pid.withLock { $0 })
        #expect(ProcessTable.isReaped(id), "helper \(id) outlived its cancelled test")
    }

    @Test func aThrownErrorKillsTheHelperAndClosesItsPipes() async throws {
        // Given a helper writing in a scope whose body then throws
        let directory = folder.url.appendingPathComponent("store")
        let log = folder.url.appendingPathComponent("log")
        let started = Locked<ChildProcess?>(nil)
        let runnerOutput = [1, 2].compactMap { ProcessTable.descriptor(Int32($0), of: getpid()) }
        var childPipes: [String] = []
        await #expect(throws: Stop.self) {
            try await withChildProcesses { scope in
                let helper = try CrashHelper.startWriter(in: scope, directory: directory, log: log)
                started.withLock { $0 = helper }
                try #require(await ProcessTable.poll(timeout: Self.startWait) { ProcessTable.logHasCompleted(log, atLeast: 1) })
                // The child's standard streams are /dev/null and pipes of its own, never the
                // runner's output
                let descriptors = (0...2).map { ProcessTable.descriptor(Int32($0), of: helper.processIdentifier) ?? "?" }
                #expect(descriptors[0] == "/dev/null")
                for (index, target) in descriptors.enumerated().dropFirst() {
                    #expect(target.hasPrefix("pipe:"), "fd \(index) is \(target)")
                    #expect(!runnerOutput.contains(target) || !target.hasPrefix("pipe:"), "fd \(index) is the runner's \(target)")
                }
                childPipes = Array(descriptors.dropFirst())
                throw Stop()
            }
        }
        // Then the helper was killed and reaped before the error reached the test…
        let helper = try #require(started.withLock { $0 })
        #expect(helper.wasKilledBySignal)
        #expect(ProcessTable.isReaped(helper.processIdentifier))
        // …and this process closes its ends of the helper's pipes
        let closed = await ProcessTable.poll(timeout: .seconds(10)) { ProcessTable.ownDescriptors().isDisjoint(with: childPipes) }
        #expect(closed, "still open: \(ProcessTable.ownDescriptors().intersection(childPipes))")
        #expect(!childPipes.isEmpty)
    }

    @Test func aHelperWhoseParentIsKilledExitsByItself() async throws {
        // Given a helper writing under an intermediate parent process (as under a test runner)
        let directory = folder.url.appendingPathComponent("store")
        let log = folder.url.appendingPathComponent("log")
        try await withChildProcesses { scope in
            let parent = try CrashHelper.start(in: scope, ["spawn", "write", directory.path, log.path, "durability=durable"])
            let line = try #require(await parent.waitForOutputLine(prefix: "child ", timeout: Self.startWait), "\(parent.standardError)")
            let grandchild = try #require(Int32(line))
            try #require(await ProcessTable.poll(timeout: Self.startWait) { ProcessTable.logHasCompleted(log, atLeast: 1) })
            #expect(ChildProcess.isAlive(grandchild))
            // When that parent is SIGKILLed (nobody can clean up after it)
            parent.kill()
            await parent.waitForExit()
            #expect(parent.wasKilledBySignal)
            // Then the orphaned helper notices within its 100 ms poll and exits on its own
            let gone = await ProcessTable.poll(timeout: .seconds(5)) { !ChildProcess.isAlive(grandchild) }
            #expect(gone, "the orphaned helper \(grandchild) kept running")
            if !gone { kill(grandchild, SIGKILL) } // the failing test still leaves no orphan
            // And writes no more: the log stops growing
            let size = try FileManager.default.attributesOfItem(atPath: log.path)[.size] as? Int
            #expect(try FileManager.default.attributesOfItem(atPath: log.path)[.size] as? Int == size)
        }
    }

    @Test func aScopeThatEndsNormallyLeavesNoLiveChild() async throws {
        // Given a scope whose helper is still writing when the body returns
        let directory = folder.url.appendingPathComponent("store")
        let log = folder.url.appendingPathComponent("log")
        let helper = try await withChildProcesses { scope in
            let helper = try CrashHelper.startWriter(in: scope, directory: directory, log: log)
            try #require(await ProcessTable.poll(timeout: Self.startWait) { ProcessTable.logHasCompleted(log, atLeast: 1) })
            return helper
        }
        // Then it was killed and reaped on the way out
        #expect(helper.wasKilledBySignal && !helper.isRunning)
        #expect(ProcessTable.isReaped(helper.processIdentifier))
        // And a scope refuses to start children once it has ended
        let late = Locked<ChildProcessScope?>(nil)
        try await withChildProcesses { scope in late.withLock { $0 = scope } }
        #expect(throws: CancellationError.self) {
            try late.withLock { scope in try CrashHelper.startWriter(in: scope!, directory: directory, log: log) }
        }
    }
}
