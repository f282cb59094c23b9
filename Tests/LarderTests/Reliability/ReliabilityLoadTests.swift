import Foundation
import LarderTestSupport
import Synchronization
import Testing
@testable import Larder

/// Load: 8 threads of mixed operations on one `Storage` (memory + disk) whose limits are small
/// enough that both tiers evict all the time. A watchdog fails the test on a deadlock; the
/// invariants are checked afterwards.
///
/// `LARDER_LOAD_OPERATIONS` sets the total operations (default 100,000; 800,000 is the full
/// 8 × 100,000 run).
@Suite(.timeLimit(.minutes(10)))
struct ReliabilityLoadTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("reliability-load")
    }

    @Test func eightThreadsOfMixedOperationsKeepEveryInvariant() async throws {
        let total = Reliability.environment("LARDER_LOAD_OPERATIONS", default: 100_000)
        let threads = 8
        let keySpace = 3_000
        var configuration = Storage<String, Data>.Configuration(directory: folder.url.appendingPathComponent("store"))
        configuration.memory.countLimit = 300
        configuration.memory.costLimit = 600_000
        configuration.disk = Reliability.configuration {
            $0.countLimit = 800
            $0.sizeLimit = 3_000_000
            $0.inlineThreshold = 2_048
            $0.compression = .gzip(level: 1)
        }
        let storage = try Storage<String, Data>(configuration: configuration, transformer: .data)
        let disk = try #require(storage.disk)

        let damaged = Atomic<Int>(0)
        let errors = Atomic<Int>(0)
        let limitBreaches = Atomic<Int>(0)
        let done = DispatchGroup()
        let start = ContinuousClock.now
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                var random = CrashPayload.Generator(seed: UInt64(thread + 1))
                for step in 0..<(total / threads) {
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
                }
            }
        }
        // The watchdog: a deadlock shows as workers that never finish.
        let deadline = Double(Reliability.environment("LARDER_LOAD_WATCHDOG_SECONDS", default: 420))
        let finished = UncheckedBox(done)
        let outcome = try await OffPool.run { finished.value.wait(timeout: .now() + deadline) }
        guard outcome == .success else {
            Issue.record("watchdog: \(threads) threads did not finish \(total) operations in \(deadline) s (deadlock?)")
            return
        }
        let elapsed = ContinuousClock.now - start

        #expect(damaged.load(ordering: .relaxed) == 0, "reads returned damaged or foreign bytes")
        #expect(errors.load(ordering: .relaxed) == 0, "operations threw")
        #expect(limitBreaches.load(ordering: .relaxed) == 0, "totals were seen over the limits")
        // Invariants: limits, totals equal to a recount, every value intact in both tiers.
        #expect(storage.memory.totalCount <= 300 && storage.memory.totalCost <= 600_000)
        let keys = try Reliability.expectTotalsExact(disk, "after load")
        for key in keys {
            let data = try #require(try disk.value(forKey: key))
            #expect(CrashPayload.verify(data)?.key == key, "disk value of \(key) damaged")
        }
        for index in 0..<keySpace {
            let key = "k\(index)"
            if let data = storage.memory.value(forKey: key) {
                #expect(CrashPayload.verify(data)?.key == key, "memory value of \(key) damaged")
            }
        }
        let statistics = storage.statistics
        #expect(statistics[.memory].evictions > 0 && statistics[.disk].evictions > 0, "the limits never forced an eviction")
        print("reliability.load: \(total) operations on \(threads) threads in \(elapsed); memory evictions \(statistics[.memory].evictions), disk evictions \(statistics[.disk].evictions), disk \(keys.count) entries")
    }
}
