public import Foundation
import Larder

/// Two helper processes and this one on one directory at the same time: disjoint keys, the
/// same keys, removes and cross-process eviction. Every read during the run returns intact
/// bytes of its own key; afterwards every key holds the last write of some process.
public enum TwoProcess {
    public struct Result: Sendable {
        /// Operations the helpers completed.
        public var helperOperations = 0
        /// Reads this process made and checked while the helpers ran.
        public var concurrentReads = 0
        public var findings = Findings()
    }

    /// The four scenarios, by name.
    public static let scenarios = ["disjoint", "shared", "evicting", "evicting-s3fifo", "fresh"]

    /// Runs one scenario in a fresh subdirectory of `workspace`; `seedOffset` varies the
    /// helpers' seeds between repetitions (0 is the CI suite's).
    public static func run(_ scenario: String, in workspace: URL, seedOffset: Int = 0) async throws -> Result {
        switch scenario {
        case "disjoint": try await disjoint(in: workspace, seedOffset: seedOffset)
        case "shared": try await shared(in: workspace, seedOffset: seedOffset)
        case "evicting": try await evicting(in: workspace, seedOffset: seedOffset)
        case "evicting-s3fifo": try await evicting(in: workspace, seedOffset: seedOffset, policy: "s3fifo")
        case "fresh": try await fresh(in: workspace, seedOffset: seedOffset)
        default: preconditionFailure("unknown scenario \(scenario)")
        }
    }

    /// Reads and writes from this process until the helpers exit; checks every read.
    /// `evicting`: a count limit is shared with the helpers, so this process's own key may be
    /// evicted by their writes (a miss), but never read back as other bytes.
    static func interleave(
        _ store: DiskStore, with helpers: [ChildProcess], keys: [String], evicting: Bool = false, into result: inout Result
    ) async throws {
        var step = 0
        while helpers.contains(where: \.isRunning) {
            try store.setValue(CrashPayload.make(key: "local", generation: step + 1, size: step % 5_000), forKey: "local")
            let key = keys[step % keys.count]
            if let data = try store.value(forKey: key) {
                result.findings.check(CrashPayload.verify(data)?.key == key, .wrongBytes,
                                      "a concurrent read of \(key) returned damaged or foreign bytes")
                result.concurrentReads += 1
            }
            step += 1
            // Let other tasks have the thread now and then, and a cancellation (a time limit)
            // end the loop; the scope then kills the helpers.
            if step % 64 == 0 {
                await Task.yield()
                try Task.checkCancellation()
            }
        }
        for helper in helpers {
            await helper.waitForExit()
            result.findings.check(helper.exitedCleanly, .helper, "a helper failed: \(helper.termination.map { "\($0)" } ?? "running") \(helper.standardError)")
        }
        result.findings.keysChecked += 1
        let local = try store.value(forKey: "local")
        result.findings.check(
            local == CrashPayload.make(key: "local", generation: step, size: (step - 1) % 5_000) || (evicting && local == nil),
            local == nil ? .lostWrite : .wrongBytes, "this process's last write of local did not read back")
    }

    static func disjoint(in workspace: URL, seedOffset: Int) async throws -> Result {
        // Given two helpers writing disjoint keys, and this process reading theirs
        let directory = workspace.appendingPathComponent("disjoint")
        let logs = ["a", "b"].map { workspace.appendingPathComponent("log-\($0)") }
        var result = Result()
        let store = try DiskStore(directory: directory, configuration: StoreChecks.configuration())
        defer { store.close() }
        try await withChildProcesses { scope in
            let helpers = try zip(["a", "b"], logs).enumerated().map { index, pair in
                try CrashHelper.startWriter(in: scope, directory: directory, log: pair.1,
                                            ["seed": "\(index + 11 + seedOffset)", "prefix": pair.0, "keys": "30", "iterations": "400"])
            }
            try await interleave(store, with: helpers, keys: (0..<30).flatMap { ["a\($0)", "b\($0)"] }, into: &result)
        }
        // Then every key holds exactly the last write of the process that owns it
        for log in logs {
            let state = try CrashHelper.readLog(log)
            result.helperOperations += state.completedWrites
            result.findings.check(state.completedWrites == 400 && state.inFlight.isEmpty, .helper,
                                  "a helper completed \(state.completedWrites) of 400 writes")
            for (key, generation) in state.completed {
                result.findings.keysChecked += 1
                let decoded = try store.value(forKey: key).flatMap(CrashPayload.verify)
                result.findings.check(decoded?.key == key && decoded?.generation == generation, .wrongBytes,
                                      "\(key) holds \(decoded.map { "\($0)" } ?? "nothing"), expected generation \(generation)")
            }
        }
        try StoreChecks.totalsExact(store, "disjoint", into: &result.findings)
        return result
    }

    static func shared(in workspace: URL, seedOffset: Int) async throws -> Result {
        // Given two helpers writing and removing the same keys
        let directory = workspace.appendingPathComponent("shared")
        let logs = ["a", "b"].map { workspace.appendingPathComponent("shared-log-\($0)") }
        var result = Result()
        let store = try DiskStore(directory: directory, configuration: StoreChecks.configuration())
        defer { store.close() }
        try await withChildProcesses { scope in
            let helpers = try logs.enumerated().map { index, log in
                try CrashHelper.startWriter(in: scope, directory: directory, log: log,
                                            ["seed": "\(index + 21 + seedOffset)", "prefix": "s", "keys": "20", "iterations": "400", "removeEvery": "6"])
            }
            try await interleave(store, with: helpers, keys: (0..<20).map { "s\($0)" }, into: &result)
        }
        // Then each key holds the last completed operation of one of the two processes
        let states = try logs.map(CrashHelper.readLog)
        result.helperOperations = states.reduce(0) { $0 + $1.completedWrites }
        for index in 0..<20 {
            let key = "s\(index)"
            let allowed = Set(states.compactMap { $0.completed[key] })
            let data = try store.value(forKey: key)
            result.findings.keysChecked += 1
            let generation = data.map { CrashPayload.verify($0)?.key == key ? CrashPayload.verify($0)?.generation ?? -1 : -1 } ?? 0
            result.findings.check(allowed.contains(generation), generation == -1 ? .wrongBytes : .lostWrite,
                                  "\(key) holds \(generation), allowed \(allowed.sorted())")
        }
        try StoreChecks.totalsExact(store, "shared", into: &result.findings)
        return result
    }

    /// `policy`: the eviction policy of every store on the directory (`lru` or `s3fifo`).
    static func evicting(in workspace: URL, seedOffset: Int, policy: String = "lru") async throws -> Result {
        // Given two helpers whose writes overflow a shared count limit
        let directory = workspace.appendingPathComponent("evicting-\(policy)")
        var result = Result()
        let store = try DiskStore(directory: directory, configuration: StoreChecks.configuration {
            $0.countLimit = 25
            $0.policy = policy == "s3fifo" ? .s3fifo : .lru
        })
        defer { store.close() }
        try await withChildProcesses { scope in
            let helpers = try (0..<2).map { index in
                try CrashHelper.startWriter(in: scope, directory: directory, log: workspace.appendingPathComponent("evict-log-\(index)"),
                                            ["seed": "\(index + 31 + seedOffset)", "prefix": "e\(index)-", "keys": "40", "iterations": "300",
                                             "countLimit": "25", "policy": policy])
            }
            try await interleave(store, with: helpers, keys: (0..<40).flatMap { ["e0-\($0)", "e1-\($0)"] }, evicting: true, into: &result)
        }
        result.helperOperations = 600
        // Then the totals are exact and within the limit, and every survivor is intact
        let keys = try StoreChecks.totalsExact(store, "evicting", into: &result.findings)
        result.findings.check(keys.count <= 25, .totals, "\(keys.count) entries over the count limit 25")
        for key in keys {
            result.findings.keysChecked += 1
            let decoded = try store.value(forKey: key).flatMap(CrashPayload.verify)
            result.findings.check(decoded?.key == key, .wrongBytes, "the survivor \(key) is damaged or missing")
        }
        return result
    }

    static func fresh(in workspace: URL, seedOffset: Int) async throws -> Result {
        var result = Result()
        // Given two helpers creating the same new directory at the same moment (five times)
        for round in 0..<5 {
            let directory = workspace.appendingPathComponent("fresh-\(round)")
            try await withChildProcesses { scope in
                let helpers = try (0..<2).map { index in
                    try CrashHelper.startWriter(in: scope, directory: directory, log: workspace.appendingPathComponent("fresh-\(round)-\(index)"),
                                                ["seed": "\(index + 1 + seedOffset)", "prefix": "f\(index)-", "keys": "5", "iterations": "20"])
                }
                for helper in helpers {
                    await helper.waitForExit()
                    // Both could open the new store (switching it to WAL raced: SQLITE_BUSY)
                    result.findings.check(helper.exitedCleanly, .helper,
                                          "round \(round): a helper could not open the new store: \(helper.standardError)")
                }
            }
            result.helperOperations += 40
            // Then neither took the other's new index for a foreign one and moved it aside:
            // both processes' writes are in the one index
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            result.findings.check(!names.contains { $0.contains(".corrupt-") }, .broken, "round \(round): an index was moved aside: \(names.sorted())")
            let store = try DiskStore(directory: directory, configuration: StoreChecks.configuration())
            defer { store.close() }
            let keys = try store.keys()
            result.findings.keysChecked += keys.count
            result.findings.check(keys.contains { $0.hasPrefix("f0-") } && keys.contains { $0.hasPrefix("f1-") }, .lostWrite,
                                  "round \(round): one process's writes are missing: \(keys)")
        }
        return result
    }
}
