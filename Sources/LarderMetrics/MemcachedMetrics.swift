#if Metrics && Memcached
public import CoreMetrics
import Larder
public import LarderMemcached
import Synchronization
#if ServiceLifecycle
public import ServiceLifecycle
#endif

/// Reports a ``LarderMemcached/MemcachedStore``'s own counters through apple/swift-metrics:
/// what only the remote tier knows (timeouts, the circuit breaker, leases, rejected values),
/// beside what ``StorageMetrics`` reports for the storages that use it.
///
/// Available with the traits `Metrics` and `Memcached`. Like ``StorageMetrics`` it samples the
/// store's statistics, which the store keeps anyway, and adds nothing to any operation.
///
/// ```swift
/// let remote = try MemcachedStore(configuration: .init(servers: [.init(host: "cache-1"), .init(host: "cache-2")]))
/// let metrics = MemcachedMetrics(store: remote, label: "fleet")
/// Task { try await metrics.run() }
/// ```
public final class MemcachedMetrics: Sendable {
    /// The value of the `store` dimension on every metric this reporter makes.
    public let label: String
    /// How long ``run()`` waits between two reports.
    public let interval: Duration

    private let sample: @Sendable () -> MemcachedStore.Statistics
    private let state: Mutex<SampledCounters<MemcachedStore.Statistics>>

    /// Creates a reporter for `store`; it reports nothing until ``report()`` or ``run()``.
    ///
    /// - Parameters:
    ///   - store: The memcached tier whose counters are reported.
    ///   - label: The `store` dimension. Defaults to the store's tier identity (`"remote"`).
    ///   - interval: The time between two reports of ``run()``. Defaults to 10 seconds.
    ///   - factory: The metrics backend. Defaults to the one bootstrapped in `MetricsSystem`.
    public init(
        store: MemcachedStore, label: String? = nil, interval: Duration = .seconds(10),
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        precondition(interval > .zero, "MemcachedMetrics interval must be positive, got \(interval)")
        let label = label ?? store.tierID.name
        self.label = label
        self.interval = interval
        self.sample = { store.statistics }
        state = Mutex(SampledCounters(
            zero: MemcachedStore.Statistics(),
            counters: MemcachedStore.Statistics.sharedCounters(system: "memcached", label: label, factory: factory),
            gauges: [
                (Gauge(label: Name.pendingRecoveryDeletes, dimensions: [("store", label)], factory: factory), \.pendingRecoveryDeletes),
                (Gauge(label: Name.openBreakers, dimensions: [("store", label)], factory: factory), \.openBreakers),
            ]))
    }

    /// Reads the store's counters once and reports what each grew by since the previous report,
    /// and, as gauges, the deletes still owed to servers that were unreachable and the servers
    /// whose breaker is open.
    ///
    /// Safe to call from any thread; reports are serialized, so every increment is reported once.
    public func report() {
        state.withLock { $0.report(sample()) }
    }

    /// Reports every ``interval`` until the task is cancelled (or its service group shuts down
    /// gracefully), then reports once more and returns.
    ///
    /// - Throws: Nothing today; `throws` leaves room for a backend that can fail.
    public func run() async throws {
        await reportUntilCancelled(every: interval) { self.report() }
    }
}

#if ServiceLifecycle
/// With the trait `ServiceLifecycle`, a reporter runs in a `ServiceGroup` as it is.
extension MemcachedMetrics: Service {}
#endif

extension MemcachedStore.Statistics: SharedTierCounts {}

extension MemcachedMetrics {
    /// The names of the metrics this reporter makes (see the "Metrics reference" article).
    /// Every one has the dimension `store`.
    public enum Name {
        /// Counter: failed operations (connection, timeout, open breaker, server error).
        public static let errors = "larder_memcached_errors_total"
        /// Counter: operations whose deadline passed.
        public static let timeouts = "larder_memcached_timeouts_total"
        /// Counter: values refused as foreign, truncated, damaged or another key's.
        public static let rejectedValues = "larder_memcached_rejected_values_total"
        /// Counter: writes not sent because the value exceeds the item size.
        public static let oversizedValues = "larder_memcached_oversized_values_total"
        /// Counter, dimension `outcome`: leases this process won (`"won"`), reads that waited
        /// for another caller's lease (`"waited"`), lease fills the server refused (`"refused"`).
        public static let leases = "larder_memcached_leases_total"
        /// Counter: stale values served while someone refreshed them.
        public static let staleServed = "larder_memcached_stale_served_total"
        /// Counter: times the circuit breaker opened.
        public static let breakerOpens = "larder_memcached_breaker_opens_total"
        /// Counter: calls refused at once by an open breaker.
        public static let breakerRejections = "larder_memcached_breaker_rejections_total"
        /// Gauge: deletes owed to servers that missed a write or removal.
        public static let pendingRecoveryDeletes = "larder_memcached_pending_recovery_deletes"
        /// Gauge: servers whose circuit breaker is open now.
        public static let openBreakers = "larder_memcached_open_breakers"
    }
}

#endif
