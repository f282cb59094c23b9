#if Metrics
public import CoreMetrics
public import Larder
import Synchronization
#if ServiceLifecycle
public import ServiceLifecycle
#endif

/// Reports a ``Larder/Storage``'s statistics through apple/swift-metrics, by sampling: nothing
/// is added to the storage's read or write paths.
///
/// The storage already counts every hit, miss, write and eviction in relaxed atomics (its
/// ``Larder/Storage/statistics``). Each ``report()`` reads those statistics once, adds what
/// each counter grew by since the previous report to a swift-metrics `Counter`, and sets the
/// current entry count and stored bytes of each tier on a `Gauge`. Metric names and
/// dimensions are listed in the module's "Metrics reference" article and are stable.
///
/// ```swift
/// MetricsSystem.bootstrap(PrometheusMetricsFactory())
/// let storage = try Storage<String, Data>(transformer: .data) { $0.directory = cacheURL }
/// let metrics = StorageMetrics(storage: storage, label: "sessions")
/// Task { try await metrics.run() }      // reports every 10 seconds until cancelled
/// ```
///
/// - Important: a report is only as fresh as its interval: a dashboard sees a counter's growth
///   up to one interval late. Call ``report()`` yourself before a scrape for exact figures.
public final class StorageMetrics: Sendable {
    /// The value of the `storage` dimension on every metric this reporter makes.
    public let label: String
    /// How long ``run()`` waits between two reports.
    public let interval: Duration

    private let sample: @Sendable () -> StorageStatistics
    private let factory: any MetricsFactory
    private let state = Mutex(ReportState())

    /// Creates a reporter for `storage`; it reports nothing until ``report()`` or ``run()``.
    ///
    /// - Parameters:
    ///   - storage: The storage whose statistics are reported.
    ///   - label: The `storage` dimension: tells apart the storages of one process. Defaults
    ///     to `"default"`.
    ///   - interval: The time between two reports of ``run()``. Defaults to 10 seconds.
    ///   - factory: The metrics backend. Defaults to the one bootstrapped in `MetricsSystem`.
    public convenience init<Key, Value: Sendable>(
        storage: Storage<Key, Value>, label: String = "default", interval: Duration = .seconds(10),
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.init(label: label, interval: interval, factory: factory) { storage.statistics }
    }

    /// Creates a reporter of the statistics that `statistics` returns, for a storage this
    /// process reaches only through a closure (for example behind a type-erased wrapper).
    ///
    /// - Parameters:
    ///   - label: The `storage` dimension.
    ///   - interval: The time between two reports of ``run()``. Defaults to 10 seconds.
    ///   - factory: The metrics backend. Defaults to the one bootstrapped in `MetricsSystem`.
    ///   - statistics: Returns the storage's statistics now; called once per report.
    public init(
        label: String, interval: Duration = .seconds(10), factory: any MetricsFactory = MetricsSystem.factory,
        statistics: @escaping @Sendable () -> StorageStatistics
    ) {
        precondition(interval > .zero, "StorageMetrics interval must be positive, got \(interval)")
        self.label = label
        self.interval = interval
        self.factory = factory
        self.sample = statistics
    }

    /// Reads the storage's statistics once and reports them: what each counter grew by since
    /// the previous report (everything since the storage was created, the first time), and
    /// each tier's current entries and bytes.
    ///
    /// Safe to call from any thread, also while ``run()`` runs: reports are serialized, so
    /// every increment is reported exactly once.
    ///
    /// - Complexity: O(tiers); no lock of the storage is held while metrics are recorded.
    public func report() {
        // The sample is taken under the reporter's lock: two reports that sampled outside it
        // could apply in the opposite order, and the older sample would then count the newer
        // one's growth a second time. The storage never calls back into the reporter, so no
        // lock order can be inverted.
        state.withLock { state in
            state.report(sample(), label: label, factory: factory)
        }
    }

    /// Reports every ``interval`` until the task is cancelled (or, with the trait
    /// `ServiceLifecycle`, until its service group shuts down gracefully), then reports once
    /// more and returns, so the last increments before a shutdown are not lost.
    ///
    /// - Throws: Nothing today; `throws` leaves room for a backend that can fail.
    public func run() async throws {
        await reportUntilCancelled(every: interval) { self.report() }
    }
}

#if ServiceLifecycle
/// With the trait `ServiceLifecycle`, a reporter runs in a `ServiceGroup` as it is: ``run()``
/// returns on graceful shutdown after a last report.
extension StorageMetrics: Service {}
#endif

// MARK: - Metric names

extension StorageMetrics {
    /// The names of the metrics this module reports (see the "Metrics reference" article).
    public enum Name {
        /// Counter, dimensions `storage`, `tier`: reads the tier answered.
        public static let hits = "larder_hits_total"
        /// Counter, dimensions `storage`, `tier`: reads that found nothing in the tier.
        public static let misses = "larder_misses_total"
        /// Counter, dimensions `storage`, `tier`: completed writes into the tier.
        public static let writes = "larder_writes_total"
        /// Counter, dimensions `storage`, `tier`: values copied into the tier from a slower one.
        public static let promotions = "larder_promotions_total"
        /// Counter, dimensions `storage`, `tier`, `cause`: entries removed by the tier's limits
        /// (`cause="limit"`), because they expired (`"expired"`) or because they were damaged
        /// (`"corrupt"`).
        public static let evictions = "larder_evictions_total"
        /// Counter, dimensions `storage`, `tier`: failed operations (I/O, network).
        public static let errors = "larder_errors_total"
        /// Gauge, dimensions `storage`, `tier`: entries in the tier now.
        public static let entries = "larder_entries"
        /// Gauge, dimensions `storage`, `tier`: stored bytes in the tier now (the total cost,
        /// for memory).
        public static let bytes = "larder_bytes"
        /// Counter, dimension `storage`: reads that found nothing in any tier.
        public static let requestMisses = "larder_request_misses_total"
        /// Counter, dimension `storage`: completed `setValue` calls.
        public static let requestWrites = "larder_request_writes_total"
        /// Counter, dimension `storage`: entries the transformer could not decode (each removed).
        public static let decodingFailures = "larder_decoding_failures_total"
        /// Counter, dimension `storage`: values made by get-or-load loaders.
        public static let loads = "larder_loads_total"
        /// Counter, dimension `storage`: loaded values the tiers refused to store.
        public static let loadStoreFailures = "larder_load_store_failures_total"
        /// Counter, dimension `storage`: loader runs that threw.
        public static let loadFailures = "larder_load_failures_total"
        /// Counter, dimension `storage`: get-or-load calls answered with a stale value.
        public static let staleServed = "larder_stale_served_total"
        /// Counter, dimensions `storage`, `kind`: get-or-load calls that reached their soft
        /// timeout (`kind="soft"`, a stale value returned) or gave up at their hard timeout
        /// (`"hard"`).
        public static let loadTimeouts = "larder_load_timeouts_total"
        /// Counter, dimensions `storage`, `outcome`: background refreshes ahead of expiry
        /// started (`outcome="started"`) and failed (`"failed"`, the old value stays).
        public static let refreshes = "larder_refreshes_total"
    }
}

// MARK: - Report state

/// The metric handles made so far and the statistics last reported; guarded by the reporter's
/// mutex, so two reports never add the same growth twice.
private struct ReportState {
    var previous = StorageStatistics()
    var storageMetrics: StorageLevelMetrics?
    var tierMetrics: [StorageTier: TierMetrics] = [:]

    mutating func report(_ statistics: StorageStatistics, label: String, factory: any MetricsFactory) {
        let storage = storageMetrics ?? StorageLevelMetrics(label: label, factory: factory)
        storageMetrics = storage
        storage.requestMisses.add(statistics.misses, previous.misses)
        storage.requestWrites.add(statistics.writes, previous.writes)
        storage.decodingFailures.add(statistics.decodingFailures, previous.decodingFailures)
        storage.loads.add(statistics.loads, previous.loads)
        storage.loadStoreFailures.add(statistics.loadStoreFailures, previous.loadStoreFailures)
        storage.loadFailures.add(statistics.loadFailures, previous.loadFailures)
        storage.staleServed.add(statistics.staleServed, previous.staleServed)
        storage.softTimeouts.add(statistics.softTimeouts, previous.softTimeouts)
        storage.hardTimeouts.add(statistics.hardTimeouts, previous.hardTimeouts)
        storage.refreshesStarted.add(statistics.refreshesStarted, previous.refreshesStarted)
        storage.refreshFailures.add(statistics.refreshFailures, previous.refreshFailures)
        for (tier, figures) in statistics.tiers {
            let metrics = tierMetrics[tier] ?? TierMetrics(label: label, tier: tier, factory: factory)
            tierMetrics[tier] = metrics
            metrics.report(figures, since: previous[tier])
        }
        previous = statistics
    }
}

/// The storage-wide counters of one reporter.
private struct StorageLevelMetrics {
    let requestMisses, requestWrites, decodingFailures, loads, loadStoreFailures: Counter
    let loadFailures, staleServed, softTimeouts, hardTimeouts, refreshesStarted, refreshFailures: Counter

    init(label: String, factory: any MetricsFactory) {
        let dimensions = [("storage", label)]
        func counter(_ name: String, _ extra: [(String, String)] = []) -> Counter {
            Counter(label: name, dimensions: dimensions + extra, factory: factory)
        }
        requestMisses = counter(StorageMetrics.Name.requestMisses)
        requestWrites = counter(StorageMetrics.Name.requestWrites)
        decodingFailures = counter(StorageMetrics.Name.decodingFailures)
        loads = counter(StorageMetrics.Name.loads)
        loadStoreFailures = counter(StorageMetrics.Name.loadStoreFailures)
        loadFailures = counter(StorageMetrics.Name.loadFailures)
        staleServed = counter(StorageMetrics.Name.staleServed)
        softTimeouts = counter(StorageMetrics.Name.loadTimeouts, [("kind", "soft")])
        hardTimeouts = counter(StorageMetrics.Name.loadTimeouts, [("kind", "hard")])
        refreshesStarted = counter(StorageMetrics.Name.refreshes, [("outcome", "started")])
        refreshFailures = counter(StorageMetrics.Name.refreshes, [("outcome", "failed")])
    }
}

/// The counters and gauges of one tier of one reporter.
private struct TierMetrics {
    let hits, misses, writes, promotions, limitEvictions, expirations, corruptDrops, errors: Counter
    let entries, bytes: Gauge

    init(label: String, tier: StorageTier, factory: any MetricsFactory) {
        let dimensions = [("storage", label), ("tier", tier.name)]
        func counter(_ name: String, cause: String? = nil) -> Counter {
            Counter(label: name, dimensions: dimensions + (cause.map { [("cause", $0)] } ?? []), factory: factory)
        }
        hits = counter(StorageMetrics.Name.hits)
        misses = counter(StorageMetrics.Name.misses)
        writes = counter(StorageMetrics.Name.writes)
        promotions = counter(StorageMetrics.Name.promotions)
        limitEvictions = counter(StorageMetrics.Name.evictions, cause: "limit")
        expirations = counter(StorageMetrics.Name.evictions, cause: "expired")
        corruptDrops = counter(StorageMetrics.Name.evictions, cause: "corrupt")
        errors = counter(StorageMetrics.Name.errors)
        entries = Gauge(label: StorageMetrics.Name.entries, dimensions: dimensions, factory: factory)
        bytes = Gauge(label: StorageMetrics.Name.bytes, dimensions: dimensions, factory: factory)
    }

    func report(_ now: TierStatistics, since before: TierStatistics) {
        hits.add(now.hits, before.hits)
        misses.add(now.misses, before.misses)
        writes.add(now.writes, before.writes)
        promotions.add(now.promotions, before.promotions)
        limitEvictions.add(now.evictions, before.evictions)
        expirations.add(now.expirations, before.expirations)
        corruptDrops.add(now.corruptEntriesDropped, before.corruptEntriesDropped)
        errors.add(now.errors, before.errors)
        entries.record(now.totalCount)
        bytes.record(now.totalSize)
    }
}

extension Counter {
    /// Adds the growth from `before` to `now`; a counter that went down (a tier replaced or
    /// reset) adds nothing, and the next report counts from its new value.
    fileprivate func add(_ now: Int, _ before: Int) {
        if now > before { increment(by: now - before) }
    }
}
#endif
