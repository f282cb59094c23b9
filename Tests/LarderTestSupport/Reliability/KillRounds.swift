public import Foundation
public import Larder

/// Promises 1 and 2 across SIGKILL: a helper process writes, overwrites and removes keys in a
/// loop and is killed at a random moment; after each kill the directory is reopened and every
/// key is checked against the helper's fsync'd log. Used by `ReliabilityCrashTests` (CI scale)
/// and `larder-torture` (1,000 kills per durability).
public enum KillRounds {
    /// What the check of one reopened directory may accept.
    public struct Allowance: Sendable {
        /// Evictions run (a count limit is set): any key may be missing.
        public var evictions = false
        /// Power loss in `fast` mode may roll back completed writes: any generation ever begun
        /// for the key, or a miss, is allowed — but never damaged or foreign bytes.
        public var rollback = false

        public init(evictions: Bool = false, rollback: Bool = false) {
            self.evictions = evictions
            self.rollback = rollback
        }
    }

    /// One kind of kill run.
    public struct Plan: Sendable {
        public var name: String
        public var durability: String
        public var rounds: Int
        /// The helper's `name=value` options besides seed and durability.
        public var options: [String: String]
        public var allowance: Allowance

        /// The CI suite's fast writer: removes and a count limit below the key count keep
        /// deletes and evictions in the mix.
        public static func fast(rounds: Int) -> Plan {
            Plan(name: "fast", durability: "fast", rounds: rounds,
                 options: ["removeEvery": "7", "countLimit": "30", "keys": "40"], allowance: Allowance(evictions: true))
        }

        /// The durable writer: no count limit, so promise 2 is strict — every "done" write must
        /// read back exactly.
        public static func durable(rounds: Int) -> Plan {
            Plan(name: "durable", durability: "durable", rounds: rounds,
                 options: ["removeEvery": "9", "keys": "40"], allowance: Allowance())
        }

        /// The same plan with the store (the helper's and the reopened one) under S3-FIFO.
        public func underS3FIFO() -> Plan {
            var plan = self
            plan.name += "-s3fifo"
            plan.options["policy"] = "s3fifo"
            return plan
        }

        /// Power loss: larger blobs, and completed `fast` writes may roll back.
        public static func powerLoss(rounds: Int) -> Plan {
            Plan(name: "power-loss", durability: "fast", rounds: rounds,
                 options: ["keys": "40", "maxSize": "30000"], allowance: Allowance(rollback: true))
        }
    }

    public struct Result: Sendable {
        /// Rounds whose helper was killed by the SIGKILL (not exited before it).
        public var kills = 0
        public var rounds = 0
        /// Operations the helpers logged as done, over all rounds.
        public var completedOperations = 0
        public var findings = Findings()
        public var elapsed: Duration = .zero
    }

    /// Checks every key of the log against the reopened store, into `findings`.
    public static func verify(_ store: DiskStore, against log: CrashHelper.LogState, _ allowance: Allowance,
                              context: String, into findings: inout Findings) throws {
        let keys = Set(log.completed.keys).union(log.inFlight.keys)
        for key in keys {
            let data = try store.value(forKey: key)
            findings.keysChecked += 1
            var allowed = log.allowed(key)
            if allowance.rollback { allowed.formUnion(log.everBegun[key] ?? []) }
            let missAllowed = log.completed[key] == nil || allowed.contains(0) || allowance.evictions || allowance.rollback
            guard let data else {
                // Without evictions or rollback this is promise 2: a completed write survives.
                findings.check(missAllowed, .lostWrite, "\(context): \(key) lost its completed write \(log.completed[key] ?? -1)")
                continue
            }
            guard let decoded = CrashPayload.verify(data), decoded.key == key else {
                findings.record(.wrongBytes, "\(context): \(key) returned damaged or foreign bytes (\(data.count) bytes)")
                continue
            }
            if !allowed.contains(decoded.generation) {
                // Intact bytes of an older write of this key: a completed write was lost.
                let isOlder = log.everBegun[key]?.contains(decoded.generation) ?? false
                findings.record(isOlder ? .lostWrite : .wrongBytes,
                                "\(context): \(key) returned generation \(decoded.generation), allowed \(allowed.sorted())")
            }
        }
        // Nothing appears that the helper never wrote.
        for key in try store.keys() where !key.hasPrefix("probe") {
            findings.check(keys.contains(key), .unexpectedKey, "\(context): unexpected key \(key)")
        }
    }

    /// Runs `plan.rounds` kill rounds in `workspace`. `afterKill` may damage the directory
    /// between the kill and the reopen (power loss). `progress` gets a line every
    /// `progressEvery` rounds, and one saying how many kills had been survived if the run is
    /// cancelled or throws. Every helper is killed and reaped before this returns or throws.
    public static func run(
        _ plan: Plan, in workspace: URL, progressEvery: Int = 50,
        progress: (String) -> Void = { _ in },
        afterKill: (URL) throws -> Void = { _ in }
    ) async throws -> Result {
        let log = workspace.appendingPathComponent("log-\(plan.name)-\(plan.rounds)")
        let directory = workspace.appendingPathComponent("store-\(plan.name)-\(plan.rounds)")
        var reader = CrashHelper.LogReader(log)
        var result = Result()
        let start = ContinuousClock.now
        var finished = false
        defer {
            if !finished {
                progress("\(plan.name): stopped after \(result.kills) kills survived of \(plan.rounds) (\(result.rounds) rounds run, \(result.completedOperations) completed operations, \(result.findings.keysChecked) key checks, \(result.findings.violations.count) violations)")
            }
        }
        for round in 0..<plan.rounds {
            // Given a helper writing, overwriting and removing keys in a loop
            let seed = UInt64(round + 1) &* 7_919 &+ UInt64(plan.durability.count)
            let context = "\(plan.name) seed \(seed)"
            var options = plan.options
            options["seed"] = "\(seed)"
            options["durability"] = plan.durability
            let helper = try await withChildProcesses { scope in
                let helper = try CrashHelper.startWriter(in: scope, directory: directory, log: log, options)
                // When it is killed at a random moment (the only sleep: the kill delay)
                try await Task.sleep(for: .milliseconds(Int.random(in: 100...600)))
                helper.kill()
                await helper.waitForExit()
                return helper
            }
            result.rounds += 1
            if helper.wasKilledBySignal {
                result.kills += 1
            } else {
                result.findings.record(.helper, "\(context): the helper exited with \(helper.termination?.status ?? -1) before the kill: \(helper.standardError)")
            }
            try afterKill(directory)
            // Then a reopened store returns, for every key, the last completed write, the
            // write in flight, or (where allowed) a miss — never other bytes
            let state = try reader.read()
            result.completedOperations = state.completedWrites
            do {
                let store = try DiskStore(directory: directory, configuration: StoreChecks.configuration {
                    if plan.options["policy"] == "s3fifo" { $0.policy = .s3fifo }
                })
                defer { store.close() }
                try verify(store, against: state, plan.allowance, context: context, into: &result.findings)
                // And the totals match a recount, and the store keeps working
                try StoreChecks.totalsExact(store, context, into: &result.findings)
                StoreChecks.stillWorks(store, context, into: &result.findings)
            } catch {
                result.findings.record(.broken, "\(context): the reopened store failed: \(error)")
            }
            if (round + 1) % progressEvery == 0 && round + 1 < plan.rounds {
                progress("\(plan.name): \(result.kills)/\(plan.rounds) kills survived, \(result.completedOperations) completed operations, \(result.findings.keysChecked) key checks, \(result.findings.violations.count) violations, \(Self.format(ContinuousClock.now - start))")
            }
        }
        result.elapsed = ContinuousClock.now - start
        finished = true
        return result
    }

    static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return String(format: "%.0f s", seconds)
    }
}

/// A simulated power loss on a directory a killed `fast` writer left: what was not synced is
/// dropped.
public enum PowerLoss {
    public struct Damage: Sendable {
        public var truncatedWALs = 0
        public var damagedBlobs = 0
        public init() {}
    }

    /// Drops the WAL's unsynced tail (frames past the last checkpoint's backfill), deletes the
    /// shared-memory index, and zeroes or truncates some blob files written in the last second.
    public static func simulate(on directory: URL, random: inout CrashPayload.Generator, into damage: inout Damage) throws {
        let wal = directory.appendingPathComponent("index.sqlite-wal").path
        let shm = directory.appendingPathComponent("index.sqlite-shm").path
        if let cut = unsyncedWALCut(wal: wal, shm: shm, random: &random) {
            truncate(wal, off_t(cut))
            damage.truncatedWALs += 1
        }
        unlink(shm)
        // Blob files written in the last second may hold nothing of what was written.
        let recent = Date().addingTimeInterval(-1)
        for entry in StoreChecks.tree(directory.appendingPathComponent("blobs")) where !entry.isDirectory {
            let modified = (try? FileManager.default.attributesOfItem(atPath: entry.path)[.modificationDate] as? Date) ?? .distantPast
            guard modified > recent, random.next() % 2 == 0 else { continue }
            let size = (try? FileManager.default.attributesOfItem(atPath: entry.path)[.size] as? Int) ?? 0
            if random.next() % 2 == 0 {
                truncate(entry.path, off_t(Int(random.next() % UInt64(size + 1))))
            } else {
                try Data(count: size).write(to: URL(fileURLWithPath: entry.path))
            }
            damage.damagedBlobs += 1
        }
    }

    /// A length at which to cut the WAL so that only frames a power loss could lose go: never
    /// below the frames the last checkpoint already copied (SQLite syncs the WAL before it
    /// checkpoints). `nil` when there is no WAL.
    public static func unsyncedWALCut(wal: String, shm: String, random: inout CrashPayload.Generator) -> Int? {
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
