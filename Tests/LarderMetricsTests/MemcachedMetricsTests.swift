#if Metrics && Memcached
import Larder
import LarderMemcached
import LarderMetrics
import MetricsTestKit
import Testing

@Suite(.timeLimit(.minutes(10)))
struct MemcachedMetricsTests {
    @Test func reportsTheStoresOwnCountersWhenItsServerIsUnreachable() async throws {
        // Given a memcached tier whose only server refuses connections (nothing listens on
        // port 1 of loopback), after reads that fail
        let store = try MemcachedStore(configuration: .init(servers: [.init(host: "127.0.0.1", port: 1)]))
        for index in 0..<10 { _ = try? await store.entry(forKey: "k\(index)") }
        let statistics = store.statistics
        try #require(statistics.errors > 0)
        #expect(statistics.openBreakers == 1, "eight failures in a row open the breaker, until a call succeeds")

        // When the reporter reports
        let metrics = TestMetrics()
        let reporter = MemcachedMetrics(store: store, label: "fleet", factory: metrics)
        reporter.report()

        // Then the counters equal the store's, under the `store` dimension
        let dimensions = [("store", "fleet")]
        #expect(try metrics.expectCounter(MemcachedMetrics.Name.errors, dimensions).totalValue == Int64(statistics.errors))
        #expect(try metrics.expectCounter(MemcachedMetrics.Name.timeouts, dimensions).totalValue == Int64(statistics.timeouts))
        #expect(try metrics.expectCounter(MemcachedMetrics.Name.breakerOpens, dimensions).totalValue == Int64(statistics.breakerOpens))
        #expect(
            try metrics.expectCounter(MemcachedMetrics.Name.breakerRejections, dimensions).totalValue
                == Int64(statistics.breakerRejections))
        #expect(
            try metrics.expectCounter(MemcachedMetrics.Name.leases, dimensions + [("outcome", "won")]).totalValue
                == Int64(statistics.leaseWins))
        #expect(
            try metrics.expectGauge(MemcachedMetrics.Name.pendingRecoveryDeletes, dimensions).lastValue
                == Double(statistics.pendingRecoveryDeletes))
        #expect(try metrics.expectGauge(MemcachedMetrics.Name.openBreakers, dimensions).lastValue == Double(statistics.openBreakers))

        // and a later failure is added once, by the next report
        _ = try? await store.entry(forKey: "later")
        reporter.report()
        #expect(try metrics.expectCounter(MemcachedMetrics.Name.errors, dimensions).totalValue == Int64(store.statistics.errors))
        await store.close()
    }
}
#endif
