import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Promises 1 and 2 across SIGKILL and simulated power loss: a helper process writes,
/// overwrites and removes keys in a loop and is killed at random moments; after each kill the
/// directory is reopened and every key is checked against the helper's fsync'd log
/// (`KillRounds` in LarderTestSupport, which `larder-torture` runs 1,000 times per durability).
///
/// `LARDER_CRASH_KILLS` sets the kills per durability (default 25, so 50 in CI);
/// `LARDER_POWER_LOSS_ROUNDS` the power-loss rounds (default 10). The time limit follows them
/// (about 3 s a round in a debug build on a busy 2-core machine); a progress line is printed
/// every 50 rounds, and one with the kills survived if a test is cancelled or fails.
@Suite(.serialized, .timeLimit(ReliabilitySize.crashTimeLimit))
struct ReliabilityCrashTests {
    static let kills = ReliabilitySize.kills
    static let powerLossRounds = ReliabilitySize.powerLossRounds

    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-crash")
    }

    func run(_ plan: KillRounds.Plan, afterKill: (URL) throws -> Void = { _ in }) async throws -> KillRounds.Result {
        let result = try await KillRounds.run(plan, in: folder.url, progress: { print("reliability.crash \($0)") }, afterKill: afterKill)
        result.findings.expectNone()
        #expect(result.kills == plan.rounds, "\(plan.rounds - result.kills) helpers exited before their kill")
        return result
    }

    @Test func killedFastWriterNeverLeavesDamagedOrForeignBytes() async throws {
        let result = try await run(.fast(rounds: Self.kills))
        #expect(result.completedOperations > Self.kills, "the helper completed only \(result.completedOperations) operations")
        print("reliability.crash fast: \(result.kills) kills survived, \(result.completedOperations) completed operations, \(result.findings.keysChecked) key checks")
    }

    /// The fast writer's plan with every store under S3-FIFO: the queues, counters and ghost
    /// change in the same transactions as the rows, so a kill leaves them consistent too.
    @Test func killedFastWriterUnderS3FIFONeverLeavesDamagedOrForeignBytes() async throws {
        let result = try await run(.fast(rounds: Self.kills).underS3FIFO())
        #expect(result.completedOperations > Self.kills, "the helper completed only \(result.completedOperations) operations")
        print("reliability.crash fast-s3fifo: \(result.kills) kills survived, \(result.completedOperations) completed operations, \(result.findings.keysChecked) key checks")
    }

    @Test func killedDurableWriterKeepsEveryCompletedWrite() async throws {
        let result = try await run(.durable(rounds: Self.kills))
        #expect(result.completedOperations > Self.kills, "the helper completed only \(result.completedOperations) operations")
        print("reliability.crash durable: \(result.kills) kills survived, \(result.completedOperations) completed operations, \(result.findings.keysChecked) key checks")
    }

    /// A power loss drops what was not synced: in `fast` mode the WAL's unsynced tail (frames
    /// past the last checkpoint's backfill) and the contents of recently written blob files.
    /// After the kill, the test throws those away, deletes the shared-memory index, and checks
    /// that reads return intact bytes of some write of that key, or a miss.
    @Test func simulatedPowerLossNeverReturnsDamagedBytes() async throws {
        var generator = CrashPayload.Generator(seed: 42)
        var damage = PowerLoss.Damage()
        let result = try await run(.powerLoss(rounds: Self.powerLossRounds)) { directory in
            try PowerLoss.simulate(on: directory, random: &generator, into: &damage)
        }
        #expect(damage.damagedBlobs > 0, "the simulation damaged no blob")
        print("reliability.power-loss: \(result.kills) rounds, \(damage.truncatedWALs) WAL tails cut, \(damage.damagedBlobs) blobs damaged, \(result.findings.keysChecked) key checks")
    }

    /// The check itself must be able to fail: a store holding another key's bytes, an older
    /// generation of a durable write, and a key nobody wrote are each reported.
    @Test func theLogCheckReportsWrongBytesLostWritesAndForeignKeys() throws {
        // Given a log with completed writes of a and b, and a store that disagrees with it
        let store = try DiskStore(directory: folder.url.appendingPathComponent("check"), configuration: Reliability.configuration())
        var log = CrashHelper.LogState()
        log.completed = ["a": 2, "b": 5, "c": 1]
        log.everBegun = ["a": [1, 2], "b": [4, 5], "c": [1]]
        try store.setValue(CrashPayload.make(key: "b", generation: 5, size: 100), forKey: "a")  // b's bytes under a
        try store.setValue(CrashPayload.make(key: "b", generation: 4, size: 100), forKey: "b")  // an older write
        try store.setValue(CrashPayload.make(key: "z", generation: 1, size: 100), forKey: "z")  // never written
        // When the durable check runs (c is missing)
        var findings = Findings()
        try KillRounds.verify(store, against: log, KillRounds.Allowance(), context: "check", into: &findings)
        // Then each disagreement is reported, as its kind
        #expect(findings.count(.wrongBytes) == 1)
        #expect(findings.count(.lostWrite) == 2)
        #expect(findings.count(.unexpectedKey) == 1)
        #expect(findings.keysChecked == 3)
        store.close()
    }

    /// A write in flight when one helper was killed may have landed; a later helper may begin
    /// another write of that key and be killed before it lands. Both stay allowed until a
    /// write of the key completes (the check once kept only the latest and failed such runs).
    @Test func everyWriteBegunSinceTheLastCompletedOneStaysAllowed() {
        var log = CrashHelper.LogState()
        log.apply("begin k 1\ndone k 1\nbegin k 2\n")       // helper 1 killed during write 2
        log.apply("begin j 7\ndone j 7\nbegin k 3\n")       // helper 2 killed during write 3
        #expect(log.allowed("k") == [1, 2, 3])
        log.apply("begin k 4\ndone k 4\n")
        #expect(log.allowed("k") == [4])
        #expect(log.everBegun["k"] == [1, 2, 3, 4])
    }
}
