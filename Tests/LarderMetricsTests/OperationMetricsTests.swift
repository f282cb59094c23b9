#if Metrics
import Foundation
import Larder
import LarderMetrics
import MetricsTestKit
import Testing
#if Memcached
import LarderMemcached
#endif

/// Durations of loads (and remote commands) recorded as swift-metrics timers, read back from
/// swift-metrics' test backend.
@Suite(.timeLimit(.minutes(10)))
struct OperationMetricsTests {
    struct LoaderFailure: Error {}

    @Test func recordsEachLoadsDurationUnderItsOutcome() async throws {
        // Given a storage timed by an observer on the test backend
        let metrics = TestMetrics()
        let storage = try Storage<String, Data>(transformer: .data) {
            $0.observer = OperationMetrics(label: "s", factory: metrics)
        }

        // When two keys load (one slowly) and a third loader throws
        _ = try await storage.value(forKey: "a") { _ in Data("a".utf8) }
        _ = try await storage.value(forKey: "b") { _ in
            try await Task.sleep(for: .milliseconds(20))
            return Data("b".utf8)
        }
        await #expect(throws: LoaderFailure.self) {
            try await storage.value(forKey: "c") { _ in throw LoaderFailure() }
        }
        _ = try await storage.value(forKey: "a") { _ in Data("again".utf8) }  // a memory hit: no load

        // Then the timer of successful loads has two durations, one at least the sleep, and
        // the timer of failed loads one
        let succeeded = try metrics.expectTimer(OperationMetrics.Name.loadDuration, [("storage", "s"), ("outcome", "success")])
        #expect(succeeded.values.count == 2)
        #expect(succeeded.values.contains { $0 >= 20_000_000 })
        let failed = try metrics.expectTimer(OperationMetrics.Name.loadDuration, [("storage", "s"), ("outcome", "error")])
        #expect(failed.values.count == 1)
        #expect(storage.statistics.loads == 2 && storage.statistics.loadFailures == 1)
    }

    @Test func observersInAGroupEachSeeTheOperationWhichRunsOnce() async throws {
        // Given two timing observers grouped on one storage
        let first = TestMetrics()
        let second = TestMetrics()
        let storage = try Storage<String, Data>(transformer: .data) {
            $0.observer = OperationObservers([
                OperationMetrics(label: "one", factory: first), OperationMetrics(label: "two", factory: second),
            ])
        }
        let runs = RunCount()

        // When a key loads
        _ = try await storage.value(forKey: "k") { _ in
            runs.increment()
            return Data("v".utf8)
        }

        // Then the loader ran once and both observers timed it
        #expect(runs.value == 1)
        #expect(try first.expectTimer(OperationMetrics.Name.loadDuration, [("storage", "one"), ("outcome", "success")]).values.count == 1)
        #expect(try second.expectTimer(OperationMetrics.Name.loadDuration, [("storage", "two"), ("outcome", "success")]).values.count == 1)
    }

    #if Memcached
    @Test func recordsARemoteCommandThatFailedWithItsSystemAndOperation() async throws {
        // Given a timed memcached tier whose only server refuses connections (port 1)
        let metrics = TestMetrics()
        var configuration = MemcachedStore.Configuration(port: 1, deadline: .seconds(300))
        configuration.observer = OperationMetrics(label: "s", factory: metrics)
        let remote = try MemcachedStore(configuration: configuration)

        // When a read fails
        await #expect(throws: StorageError.self) { try await remote.entry(forKey: "k") }

        // Then its duration is recorded under the command and the outcome `error`
        let timer = try metrics.expectTimer(
            OperationMetrics.Name.remoteDuration,
            [("storage", "s"), ("system", "memcached"), ("operation", "mg"), ("outcome", "error")])
        #expect(timer.values.count == 1)
        await remote.close()
    }
    #endif
}

/// A thread-safe count of loader runs.
final class RunCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
#endif
