public import Foundation
import Larder
import Synchronization

/// Load: threads of mixed operations on one `Storage` (memory + disk) whose limits are small
/// enough that both tiers evict all the time. A watchdog reports a deadlock; the invariants are
/// checked afterwards.
public enum LoadRun {
    public struct Result: Sendable {
        public var operations = 0
        public var threads = 0
        public var elapsed: Duration = .zero
        /// `false` when the watchdog fired (the workers did not finish: deadlock?).
        public var finished = false
        public var damagedReads = 0
        public var errors = 0
        public var limitBreaches = 0
        public var memoryEvictions = 0
        public var diskEvictions = 0
        public var diskEntries = 0
        public var findings = Findings()
    }

    /// Runs `total` operations on `threads` threads against a store in `directory`, blocking
    /// the calling thread (call it off Swift concurrency's pool). `progress` gets a line about
    /// every `progressInterval`.
    public static func run(
        directory: URL, total: Int, threads: Int = 8, keySpace: Int = 3_000, watchdog: Duration = .seconds(420),
        progressInterval: Duration = .seconds(15), progress: (String) -> Void = { _ in }
    ) throws -> Result {
        var configuration = Storage<String, Data>.Configuration(directory: directory)
        configuration.memory.countLimit = 300
        configuration.memory.costLimit = 600_000
        configuration.disk = StoreChecks.configuration {
            $0.countLimit = 800
            $0.sizeLimit = 3_000_000
            $0.inlineThreshold = 2_048
            $0.compression = .gzip(level: 1)
        }
        let storage = try Storage<String, Data>(configuration: configuration, transformer: .data)
        defer { storage.close() }
        guard let disk = storage.disk else { throw CocoaError(.featureUnsupported) }

        let damaged = Atomic<Int>(0)
        let errors = Atomic<Int>(0)
        let limitBreaches = Atomic<Int>(0)
        let completed = Atomic<Int>(0)
        let done = DispatchGroup()
        let start = ContinuousClock.now
        let perThread = total / threads
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var random = CrashPayload.Generator(seed: UInt64(thread + 1))
                for step in 0..<perThread {
                    let key = "k\(random.next() % UInt64(keySpace))"
                    let roll = random.next() % 100
                    do {
                        switch roll {
                        case 0..<50:
                            if let data = try storage.value(forKey: key), CrashPayload.verify(data)?.key != key {
                                damaged.add(1, ordering: .relaxed)
                            }
                        case 50..<85:
                            let size = Int(random.next() % (roll % 7 == 0 ? 40_000 : 3_000))
                            try storage.setValue(
                                CrashPayload.make(key: key, generation: thread * 10_000_000 + step + 1, size: size), forKey: key)
                        case 85..<95:
                            try storage.removeValue(forKey: key)
                        case 95..<98:
                            _ = try storage.containsValue(forKey: key)
                        default:
                            // Promise 5 at any moment, seen from a thread racing the writers.
                            if storage.memory.totalCount > 300 || disk.totalCount > 800 || disk.totalSize > 3_000_000 {
                                limitBreaches.add(1, ordering: .relaxed)
                            }
                        }
                    } catch {
                        errors.add(1, ordering: .relaxed)
                    }
                    completed.add(1, ordering: .relaxed)
                }
            }
        }
        var result = Result()
        result.threads = threads
        // The watchdog: a deadlock shows as workers that never finish.
        let deadline = ContinuousClock.now + watchdog
        while true {
            let step = min(progressInterval, deadline - ContinuousClock.now)
            let seconds = Double(step.components.seconds) + Double(step.components.attoseconds) / 1e18
            if done.wait(timeout: .now() + max(seconds, 0)) == .success {
                result.finished = true
                break
            }
            if ContinuousClock.now >= deadline { break }
            progress("load: \(completed.load(ordering: .relaxed))/\(perThread * threads) operations, \(KillRounds.format(ContinuousClock.now - start))")
        }
        result.elapsed = ContinuousClock.now - start
        result.operations = completed.load(ordering: .relaxed)
        guard result.finished else {
            result.findings.record(.broken, "watchdog: \(threads) threads did not finish \(perThread * threads) operations in \(watchdog) (deadlock?)")
            return result
        }
        result.damagedReads = damaged.load(ordering: .relaxed)
        result.errors = errors.load(ordering: .relaxed)
        result.limitBreaches = limitBreaches.load(ordering: .relaxed)
        result.findings.check(result.damagedReads == 0, .wrongBytes, "\(result.damagedReads) reads returned damaged or foreign bytes")
        result.findings.check(result.errors == 0, .broken, "\(result.errors) operations threw")
        result.findings.check(result.limitBreaches == 0, .totals, "totals were seen over the limits \(result.limitBreaches) times")
        // Invariants: limits, totals equal to a recount, every value intact in both tiers.
        result.findings.check(storage.memory.totalCount <= 300 && storage.memory.totalCost <= 600_000, .totals,
                              "memory holds \(storage.memory.totalCount) entries / \(storage.memory.totalCost) cost, over its limits")
        let keys = try StoreChecks.totalsExact(disk, "after load", into: &result.findings)
        result.diskEntries = keys.count
        for key in keys {
            result.findings.keysChecked += 1
            let data = try disk.value(forKey: key)
            result.findings.check(data.flatMap(CrashPayload.verify)?.key == key, .wrongBytes, "disk value of \(key) damaged or missing")
        }
        for index in 0..<keySpace {
            let key = "k\(index)"
            if let data = storage.memory.value(forKey: key) {
                result.findings.keysChecked += 1
                result.findings.check(CrashPayload.verify(data)?.key == key, .wrongBytes, "memory value of \(key) damaged")
            }
        }
        result.memoryEvictions = storage.memory.statistics.evictions
        result.diskEvictions = disk.statistics.evictions
        result.findings.check(result.memoryEvictions > 0 && result.diskEvictions > 0, .broken, "the limits never forced an eviction")
        return result
    }
}
