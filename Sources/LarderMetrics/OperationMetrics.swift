#if Metrics
public import CoreMetrics
public import Larder
import Synchronization

/// Times the operations a storage and its remote tiers report to their
/// ``Larder/OperationObserver``: each get-or-load loader run and each command sent to memcached
/// or Redis, as swift-metrics `Timer`s.
///
/// ``StorageMetrics`` samples counters and adds nothing to any operation; a duration has to be
/// taken as the operation runs, so this is an observer you give to the configurations.
///
/// ```swift
/// let timing = OperationMetrics(label: "sessions")
/// var remote = MemcachedStore.Configuration(host: "cache-1")
/// remote.observer = timing
/// var configuration = Storage<String, Data>.Configuration()
/// configuration.observer = timing          // or OperationObservers([timing, OperationTracer()])
/// let storage = try Storage(
///     configuration: configuration, additionalTiers: [try MemcachedStore(configuration: remote)], transformer: .data)
/// ```
public final class OperationMetrics: OperationObserver {
    /// The value of the `storage` dimension on every timer this observer records.
    public let label: String

    private let factory: any MetricsFactory
    /// The timers made so far, by operation and outcome (each made once, not per operation).
    private let timers = Mutex<[TimerKey: Timer]>([:])

    /// An observer that records durations.
    ///
    /// - Parameters:
    ///   - label: The `storage` dimension. Defaults to `"default"`.
    ///   - factory: The metrics backend. Defaults to the one bootstrapped in `MetricsSystem`.
    public init(label: String = "default", factory: any MetricsFactory = MetricsSystem.factory) {
        self.label = label
        self.factory = factory
    }

    nonisolated(nonsending) public func observe<Result: Sendable>(
        _ operation: ObservedOperation, outcome: @Sendable (Result) -> ObservedOperation.Outcome,
        _ body: nonisolated(nonsending) @Sendable () async throws -> Result
    ) async throws -> Result {
        let started = ContinuousClock.now
        do {
            let result = try await body()
            record(operation, outcome(result), ContinuousClock.now - started)
            return result
        } catch {
            record(operation, .error, ContinuousClock.now - started)
            throw error
        }
    }

    private func record(_ operation: ObservedOperation, _ outcome: ObservedOperation.Outcome, _ duration: Duration) {
        let key = TimerKey(operation: operation, outcome: outcome)
        let timer = timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = makeTimer(key)
            timers[key] = timer
            return timer
        }
        let (seconds, attoseconds) = duration.components
        timer.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    private func makeTimer(_ key: TimerKey) -> Timer {
        guard let system = key.system else {
            return Timer(
                label: Name.loadDuration, dimensions: [("storage", label), ("outcome", key.outcome.name)], factory: factory)
        }
        return Timer(
            label: Name.remoteDuration,
            dimensions: [
                ("storage", label), ("system", system), ("operation", key.name), ("outcome", key.outcome.name),
            ],
            factory: factory)
    }

    /// An operation as a timer tells it apart: its system and name, and how it ended (the
    /// server and batch size are not dimensions, so a timer's series stay few).
    private struct TimerKey: Hashable {
        var system: String?
        var name: String
        var outcome: ObservedOperation.Outcome

        init(operation: ObservedOperation, outcome: ObservedOperation.Outcome) {
            system = operation.system
            name = operation.name
            self.outcome = outcome
        }
    }
}

extension OperationMetrics {
    /// The names of the timers this observer records (see the "Metrics reference" article).
    public enum Name {
        /// Timer, dimensions `storage`, `outcome` (`success`, `error`): get-or-load loader runs.
        public static let loadDuration = "larder_load_duration_seconds"
        /// Timer, dimensions `storage`, `system` (`memcached`, `redis`), `operation` (`GET`,
        /// `mg`, `BATCH mg`), `outcome` (`hit`, `miss`, `success`, `error`): round trips to a
        /// remote tier's server.
        public static let remoteDuration = "larder_remote_duration_seconds"
    }
}
#endif
