#if Metrics
import CoreMetrics
#if ServiceLifecycle
import ServiceLifecycle
#endif

/// The counters and gauges of one reporter of a remote tier's statistics, and the sample last
/// reported: each report adds every counter's growth since then and sets every gauge.
struct SampledCounters<Statistics> {
    private var previous: Statistics
    private let counters: [(Counter, KeyPath<Statistics, Int>)]
    private let gauges: [(Gauge, KeyPath<Statistics, Int>)]

    /// A reporter of `counters` and `gauges`; its first report adds everything above `zero`.
    init(zero: Statistics, counters: [(Counter, KeyPath<Statistics, Int>)], gauges: [(Gauge, KeyPath<Statistics, Int>)]) {
        previous = zero
        self.counters = counters
        self.gauges = gauges
    }

    mutating func report(_ statistics: Statistics) {
        for (counter, field) in counters where statistics[keyPath: field] > previous[keyPath: field] {
            counter.increment(by: statistics[keyPath: field] - previous[keyPath: field])
        }
        for (gauge, field) in gauges { gauge.record(statistics[keyPath: field]) }
        previous = statistics
    }
}

/// Calls `report` every `interval` until the task is cancelled (or, with the trait
/// `ServiceLifecycle`, until its service group shuts down gracefully), then once more, so the
/// last increments before a shutdown are not lost: the `run()` of every reporter.
func reportUntilCancelled(every interval: Duration, _ report: @escaping @Sendable () -> Void) async {
    let reportPeriodically: @Sendable () async -> Void = {
        while !Task.isCancelled {
            report()
            try? await Task.sleep(for: interval)
        }
    }
    #if ServiceLifecycle
    await cancelWhenGracefulShutdown(reportPeriodically)
    #else
    await reportPeriodically()
    #endif
    report()
}
#endif

#if Metrics && (Memcached || Redis)
/// The counters memcached's and Redis's tiers both keep, reported by ``MemcachedMetrics`` and
/// ``RedisMetrics`` under the same names but for the system (`larder_<system>_errors_total`…).
protocol SharedTierCounts {
    var errors: Int { get }
    var timeouts: Int { get }
    var rejectedValues: Int { get }
    var oversizedValues: Int { get }
    var leaseWins: Int { get }
    var leaseWaits: Int { get }
    var rejectedFills: Int { get }
    var staleServes: Int { get }
    var breakerOpens: Int { get }
    var breakerRejections: Int { get }
}

extension SharedTierCounts {
    /// The counters of those figures for a reporter of `system`'s tier, dimension `store`.
    static func sharedCounters(system: String, label: String, factory: any MetricsFactory) -> [(Counter, KeyPath<Self, Int>)] {
        func counter(_ name: String, _ extra: [(String, String)] = []) -> Counter {
            Counter(label: "larder_\(system)_\(name)", dimensions: [("store", label)] + extra, factory: factory)
        }
        return [
            (counter("errors_total"), \.errors),
            (counter("timeouts_total"), \.timeouts),
            (counter("rejected_values_total"), \.rejectedValues),
            (counter("oversized_values_total"), \.oversizedValues),
            (counter("leases_total", [("outcome", "won")]), \.leaseWins),
            (counter("leases_total", [("outcome", "waited")]), \.leaseWaits),
            (counter("leases_total", [("outcome", "refused")]), \.rejectedFills),
            (counter("stale_served_total"), \.staleServes),
            (counter("breaker_opens_total"), \.breakerOpens),
            (counter("breaker_rejections_total"), \.breakerRejections),
        ]
    }
}
#endif
