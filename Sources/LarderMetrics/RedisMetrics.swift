#if Metrics && Redis
public import CoreMetrics
import Larder
public import LarderRedis
import Synchronization
#if ServiceLifecycle
public import ServiceLifecycle
#endif

/// Reports a ``LarderRedis/RedisStore``'s own counters through apple/swift-metrics: what only
/// the Redis tier knows (timeouts, the circuit breaker, locks, invalidations pushed by the
/// server), beside what ``StorageMetrics`` reports for the storages that use it.
///
/// Available with the traits `Metrics` and `Redis`. Like ``StorageMetrics`` it samples the
/// store's statistics, which the store keeps anyway, and adds nothing to any operation.
///
/// ```swift
/// let remote = try await RedisStore.connect(configuration: .init(host: "10.0.0.5"))
/// let metrics = RedisMetrics(store: remote, label: "sessions")
/// Task { try await metrics.run() }
/// ```
public final class RedisMetrics: Sendable {
    /// The value of the `store` dimension on every metric this reporter makes.
    public let label: String
    /// How long ``run()`` waits between two reports.
    public let interval: Duration

    private let sample: @Sendable () -> RedisStore.Statistics
    private let state: Mutex<SampledCounters<RedisStore.Statistics>>

    /// Creates a reporter for `store`; it reports nothing until ``report()`` or ``run()``.
    ///
    /// - Parameters:
    ///   - store: The Redis tier whose counters are reported.
    ///   - label: The `store` dimension. Defaults to the store's tier identity (`"remote"`).
    ///   - interval: The time between two reports of ``run()``. Defaults to 10 seconds.
    ///   - factory: The metrics backend. Defaults to the one bootstrapped in `MetricsSystem`.
    public init(
        store: RedisStore, label: String? = nil, interval: Duration = .seconds(10),
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        precondition(interval > .zero, "RedisMetrics interval must be positive, got \(interval)")
        let label = label ?? store.tierID.name
        self.label = label
        self.interval = interval
        self.sample = { store.statistics }
        func counter(_ name: String, _ extra: [(String, String)] = []) -> Counter {
            Counter(label: name, dimensions: [("store", label)] + extra, factory: factory)
        }
        func gauge(_ name: String) -> Gauge {
            Gauge(label: name, dimensions: [("store", label)], factory: factory)
        }
        state = Mutex(SampledCounters(
            zero: RedisStore.Statistics(),
            counters: RedisStore.Statistics.sharedCounters(system: "redis", label: label, factory: factory) + [
                (counter(Name.invalidationsReceived), \.invalidationsReceived),
                (counter(Name.localCopyResets), \.localCopyResets),
                (counter(Name.trackingSubscriptions), \.trackingSubscriptions),
            ],
            gauges: [(gauge(Name.trackedKeys), \.trackedKeys), (gauge(Name.openBreakers), \.openBreakers)]))
    }

    /// Reads the store's counters once and reports what each grew by since the previous report,
    /// and, as gauges, the keys whose local copies the store follows now and the open breakers.
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
extension RedisMetrics: Service {}
#endif

extension RedisStore.Statistics: SharedTierCounts {}

extension RedisMetrics {
    /// The names of the metrics this reporter makes (see the "Metrics reference" article).
    /// Every one has the dimension `store`.
    public enum Name {
        /// Counter: failed operations (connection, timeout, open breaker, server error).
        public static let errors = "larder_redis_errors_total"
        /// Counter: operations whose deadline passed.
        public static let timeouts = "larder_redis_timeouts_total"
        /// Counter: values refused as foreign, truncated, damaged or another key's.
        public static let rejectedValues = "larder_redis_rejected_values_total"
        /// Counter: writes not sent because the value exceeds the item size.
        public static let oversizedValues = "larder_redis_oversized_values_total"
        /// Counter, dimension `outcome`: locks this process won (`"won"`), reads that found
        /// another caller's lock and no stale value (`"waited"`), fills refused (`"refused"`).
        public static let leases = "larder_redis_leases_total"
        /// Counter: stale values served while someone refreshed them.
        public static let staleServed = "larder_redis_stale_served_total"
        /// Counter: times the circuit breaker opened.
        public static let breakerOpens = "larder_redis_breaker_opens_total"
        /// Counter: calls refused at once by an open breaker.
        public static let breakerRejections = "larder_redis_breaker_rejections_total"
        /// Counter: invalidations the server pushed (`CLIENT TRACKING`).
        public static let invalidationsReceived = "larder_redis_invalidations_received_total"
        /// Counter: times every local copy was dropped (a gap in the tracking stream, a flush).
        public static let localCopyResets = "larder_redis_local_copy_resets_total"
        /// Counter: times the tracking subscription was established.
        public static let trackingSubscriptions = "larder_redis_tracking_subscriptions_total"
        /// Gauge: keys whose local copies the store follows now.
        public static let trackedKeys = "larder_redis_tracked_keys"
        /// Gauge: servers (cluster nodes) whose circuit breaker is open now.
        public static let openBreakers = "larder_redis_open_breakers"
    }
}
#endif
