#if Metrics && Redis
import Larder
import LarderMetrics
import LarderRedis
import MetricsTestKit
import Testing

@Suite(.timeLimit(.minutes(10)))
struct RedisMetricsTests {
    @Test func reportsTheStoresOwnCountersWhenItsServerIsUnreachable() async throws {
        // Given a Redis tier whose server refuses connections (nothing listens on port 1 of
        // loopback) and whose breaker opens after three failures, after reads that fail
        let store = try RedisStore(configuration: .init(
            port: 1, deadline: .seconds(300), breakerThreshold: 3, breakerCooldown: .seconds(3_600), isTrackingEnabled: false))
        for index in 0..<5 { _ = try? await store.entry(forKey: "k\(index)") }
        let statistics = store.statistics
        try #require(statistics.errors == 5)
        #expect(statistics.openBreakers == 1)

        // When the reporter reports
        let metrics = TestMetrics()
        let reporter = RedisMetrics(store: store, label: "sessions", factory: metrics)
        reporter.report()

        // Then the counters equal the store's, under the `store` dimension
        let dimensions = [("store", "sessions")]
        #expect(try metrics.expectCounter(RedisMetrics.Name.errors, dimensions).totalValue == 5)
        #expect(try metrics.expectCounter(RedisMetrics.Name.timeouts, dimensions).totalValue == Int64(statistics.timeouts))
        #expect(try metrics.expectCounter(RedisMetrics.Name.breakerOpens, dimensions).totalValue == Int64(statistics.breakerOpens))
        #expect(
            try metrics.expectCounter(RedisMetrics.Name.invalidationsReceived, dimensions).totalValue
                == Int64(statistics.invalidationsReceived))
        #expect(
            try metrics.expectCounter(RedisMetrics.Name.leases, dimensions + [("outcome", "waited")]).totalValue
                == Int64(statistics.leaseWaits))
        #expect(try metrics.expectGauge(RedisMetrics.Name.trackedKeys, dimensions).lastValue == Double(statistics.trackedKeys))
        #expect(try metrics.expectGauge(RedisMetrics.Name.openBreakers, dimensions).lastValue == 1)

        // and a later failure is added once, by the next report
        _ = try? await store.entry(forKey: "later")
        reporter.report()
        reporter.report()
        #expect(try metrics.expectCounter(RedisMetrics.Name.errors, dimensions).totalValue == 6)
        await store.close()
    }
}
#endif
