import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Promises 1 and 2 across SIGKILL and simulated power loss: a helper process writes,
/// overwrites and removes keys in a loop and is killed at random moments; after each kill the
/// directory is reopened and every key is checked against the helper's fsync'd log.
///
/// `LARDER_CRASH_KILLS` sets the kills per durability (default 25, so 50 in CI);
/// `LARDER_POWER_LOSS_ROUNDS` the power-loss rounds (default 10).
@Suite(.serialized, .timeLimit(.minutes(10)))
struct ReliabilityCrashTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-crash")
    }

    /// What the check of one reopened directory may accept.
    struct Allowance {
        /// Evictions run (a count limit is set): any key may be missing.
        var evictions = false
        /// Power loss in `fast` mode may roll back completed writes: any generation ever begun
        /// for the key, or a miss, is allowed — but never damaged or foreign bytes.
        var rollback = false
    }

    /// Checks every key of the log against the reopened store. Returns the number of keys read.
    @discardableResult
    static func verify(_ store: DiskStore, against log: CrashHelper.LogState, _ allowance: Allowance, context: String) throws -> Int {
        let keys = Set(log.completed.keys).union(log.inFlight.keys)
        for key in keys {
            let data = try store.value(forKey: key)
            var allowed = Set([log.completed[key], log.inFlight[key]].compactMap { $0 })
            if allowance.rollback { allowed.formUnion(log.everBegun[key] ?? []) }
            let missAllowed = log.completed[key] == nil || allowed.contains(0) || allowance.evictions || allowance.rollback
            guard let data else {
                // Without evictions or rollback this is promise 2: a completed write survives.
                #expect(missAllowed, "\(context): \(key) lost its completed write \(log.completed[key] ?? -1)")
                continue
            }
            let decoded = CrashPayload.verify(data)
            #expect(decoded?.key == key, "\(context): \(key) returned damaged or foreign bytes (\(data.count) bytes)")
            #expect(allowed.contains(decoded?.generation ?? -1),
                    "\(context): \(key) returned generation \(decoded?.generation ?? -1), allowed \(allowed.sorted())")
        }
        // Nothing appears that the helper never wrote.
        for key in try store.keys() where !key.hasPrefix("probe") {
            #expect(keys.contains(key), "\(context): unexpected key \(key)")
        }
        return keys.count
    }

    func killRounds(
        durability: String, rounds: Int, options: [String: String], allowance: Allowance,
        afterKill: (URL) throws -> Void = { _ in }
    ) async throws -> (kills: Int, completedWrites: Int, keysChecked: Int) {
        let log = folder.url.appendingPathComponent("log-\(durability)-\(rounds)")
        let directory = folder.url.appendingPathComponent("store-\(durability)-\(rounds)")
        var kills = 0
        var keysChecked = 0
        var state = CrashHelper.LogState()
        for round in 0..<rounds {
            // Given a helper writing, overwriting and removing keys in a loop
            let seed = UInt64(round + 1) &* 7_919 &+ UInt64(durability.count)
            var arguments = options
            arguments["seed"] = "\(seed)"
            arguments["durability"] = durability
            let process = try CrashHelper.startWriter(directory: directory, log: log, arguments)
            // When it is killed at a random moment (the only sleep: the kill delay)
            try await Task.sleep(for: .milliseconds(Int.random(in: 100...600)))
            kill(process.processIdentifier, SIGKILL)
            await process.waitForExit()
            #expect(process.terminationReason == .uncaughtSignal,
                    "seed \(seed): the helper exited with \(process.terminationStatus) before the kill")
            if process.terminationReason == .uncaughtSignal { kills += 1 }
            try afterKill(directory)
            // Then a reopened store returns, for every key, the last completed write, the
            // write in flight, or (where allowed) a miss — never other bytes
            state = try CrashHelper.readLog(log)
            let store = try DiskStore(directory: directory, configuration: Reliability.configuration())
            keysChecked += try Self.verify(store, against: state, allowance, context: "\(durability) seed \(seed)")
            // And the totals match a recount, and the store keeps working
            try Reliability.expectTotalsExact(store, "\(durability) seed \(seed)")
            Reliability.expectStillWorks(store, "\(durability) seed \(seed)")
            store.close()
        }
        return (kills, state.completedWrites, keysChecked)
    }

    @Test func killedFastWriterNeverLeavesDamagedOrForeignBytes() async throws {
        let rounds = Reliability.environment("LARDER_CRASH_KILLS", default: 25)
        // Removes and a count limit below the key count keep deletes and evictions in the mix.
        let result = try await killRounds(
            durability: "fast", rounds: rounds, options: ["removeEvery": "7", "countLimit": "30", "keys": "40"],
            allowance: Allowance(evictions: true))
        #expect(result.kills == rounds)
        #expect(result.completedWrites > rounds, "the helper completed only \(result.completedWrites) operations")
        print("reliability.crash fast: \(result.kills) kills survived, \(result.completedWrites) completed operations, \(result.keysChecked) key checks")
    }

    @Test func killedDurableWriterKeepsEveryCompletedWrite() async throws {
        let rounds = Reliability.environment("LARDER_CRASH_KILLS", default: 25)
        // No count limit, so promise 2 is strict: every "done" write must read back exactly.
        let result = try await killRounds(
            durability: "durable", rounds: rounds, options: ["removeEvery": "9", "keys": "40"],
            allowance: Allowance())
        #expect(result.kills == rounds)
        #expect(result.completedWrites > rounds, "the helper completed only \(result.completedWrites) operations")
        print("reliability.crash durable: \(result.kills) kills survived, \(result.completedWrites) completed operations, \(result.keysChecked) key checks")
    }

    /// A power loss drops what was not synced: in `fast` mode the WAL's unsynced tail (frames
    /// past the last checkpoint's backfill) and the contents of recently written blob files.
    /// After the kill, the test throws those away, deletes the shared-memory index, and checks
    /// that reads return intact bytes of some write of that key, or a miss.
    @Test func simulatedPowerLossNeverReturnsDamagedBytes() async throws {
        let rounds = Reliability.environment("LARDER_POWER_LOSS_ROUNDS", default: 10)
        var generator = CrashPayload.Generator(seed: 42)
        var damagedBlobs = 0
        var truncatedWALs = 0
        let result = try await killRounds(
            durability: "fast", rounds: rounds, options: ["keys": "40", "maxSize": "30000"],
            allowance: Allowance(rollback: true)
        ) { directory in
            let wal = directory.appendingPathComponent("index.sqlite-wal").path
            let shm = directory.appendingPathComponent("index.sqlite-shm").path
            if let cut = Self.unsyncedWALCut(wal: wal, shm: shm, random: &generator) {
                truncate(wal, off_t(cut))
                truncatedWALs += 1
            }
            unlink(shm)
            // Blob files written in the last second may hold nothing of what was written.
            let recent = Date().addingTimeInterval(-1)
            for entry in Reliability.tree(directory.appendingPathComponent("blobs")) where !entry.isDirectory {
                let modified = (try? FileManager.default.attributesOfItem(atPath: entry.path)[.modificationDate] as? Date) ?? .distantPast
                guard modified > recent, generator.next() % 2 == 0 else { continue }
                let size = (try? FileManager.default.attributesOfItem(atPath: entry.path)[.size] as? Int) ?? 0
                if generator.next() % 2 == 0 {
                    truncate(entry.path, off_t(Int(generator.next() % UInt64(size + 1))))
                } else {
                    try Data(count: size).write(to: URL(fileURLWithPath: entry.path))
                }
                damagedBlobs += 1
            }
        }
        #expect(result.kills == rounds)
        #expect(damagedBlobs > 0, "the simulation damaged no blob")
        print("reliability.power-loss: \(result.kills) rounds, \(truncatedWALs) WAL tails cut, \(damagedBlobs) blobs damaged, \(result.keysChecked) key checks")
    }

    /// A length at which to cut the WAL so that only frames a power loss could lose go: never
    /// below the frames the last checkpoint already copied (SQLite syncs the WAL before it
    /// checkpoints). `nil` when there is no WAL.
    static func unsyncedWALCut(wal: String, shm: String, random: inout CrashPayload.Generator) -> Int? {
        guard let header = FileManager.default.contents(atPath: wal), header.count > 32 else { return nil }
        let pageSize = header[8..<12].reduce(0) { $0 << 8 | Int($1) }
        let frameSize = 24 + (pageSize == 1 ? 65_536 : pageSize)
        // WalCkptInfo.nBackfill follows the two 48-byte copies of the WAL-index header.
        var backfilled = 0
        if let index = FileManager.default.contents(atPath: shm), index.count >= 100 {
            backfilled = index[96..<100].reversed().reduce(0) { $0 << 8 | Int($1) }
        }
        let keep = 32 + backfilled * frameSize
        guard header.count > keep else { return nil }
        return keep + Int(random.next() % UInt64(header.count - keep + 1))
    }
}
