#if Metrics
import CoreMetrics
import Foundation
import Larder
import LarderMetrics
import LarderTestSupport
import MetricsTestKit
import Testing
#if ServiceLifecycle
import Logging
import ServiceLifecycle
#endif

@Suite(.timeLimit(.minutes(10)))
struct StorageMetricsTests {
    let folder: TemporaryDirectory
    let storage: Storage<String, String>
    let metrics = TestMetrics()

    init() throws {
        let folder = try TemporaryDirectory("metrics")
        self.folder = folder
        storage = try Storage<String, String>(transformer: .string) { configuration in
            configuration.directory = folder.url
            configuration.memory.countLimit = 2
        }
    }

    func counter(_ name: String, _ label: String = "s", tier: String? = nil, cause: String? = nil) throws -> Int64 {
        var dimensions = [("storage", label)]
        if let tier { dimensions.append(("tier", tier)) }
        if let cause { dimensions.append(("cause", cause)) }
        return try metrics.expectCounter(name, dimensions).totalValue
    }

    func gauge(_ name: String, tier: String) throws -> Double? {
        try metrics.expectGauge(name, [("storage", "s"), ("tier", tier)]).lastValue
    }

    // MARK: - Counters

    @Test func reportsEveryCounterOfTheStatisticsPerTier() throws {
        // Given three writes (memory holds two, so one is evicted there), a memory hit, a disk
        // hit and a read that misses everywhere
        for index in 0..<3 { try storage.setValue("value-\(index)", forKey: "k\(index)") }
        _ = try storage.value(forKey: "k2")
        _ = try storage.value(forKey: "k0")
        _ = try storage.value(forKey: "absent")
        let statistics = storage.statistics

        // When the reporter reports once
        StorageMetrics(storage: storage, label: "s", factory: metrics).report()

        // Then every counter equals the storage's statistics
        for (tier, figures) in [("memory", statistics[.memory]), ("disk", statistics[.disk])] {
            #expect(try counter(StorageMetrics.Name.hits, tier: tier) == Int64(figures.hits))
            #expect(try counter(StorageMetrics.Name.misses, tier: tier) == Int64(figures.misses))
            #expect(try counter(StorageMetrics.Name.writes, tier: tier) == Int64(figures.writes))
            #expect(try counter(StorageMetrics.Name.promotions, tier: tier) == Int64(figures.promotions))
            #expect(try counter(StorageMetrics.Name.evictions, tier: tier, cause: "limit") == Int64(figures.evictions))
            #expect(try counter(StorageMetrics.Name.evictions, tier: tier, cause: "expired") == Int64(figures.expirations))
            #expect(try counter(StorageMetrics.Name.errors, tier: tier) == Int64(figures.errors))
            #expect(try gauge(StorageMetrics.Name.entries, tier: tier) == Double(figures.totalCount))
            #expect(try gauge(StorageMetrics.Name.bytes, tier: tier) == Double(figures.totalSize))
        }
        #expect(try counter(StorageMetrics.Name.requestMisses) == Int64(statistics.misses))
        #expect(try counter(StorageMetrics.Name.requestWrites) == 3)
        // and the figures are the ones the operations imply
        #expect(try counter(StorageMetrics.Name.hits, tier: "memory") == 1)
        #expect(try counter(StorageMetrics.Name.hits, tier: "disk") == 1)
        #expect(try counter(StorageMetrics.Name.requestMisses) == 1)
        #expect(try counter(StorageMetrics.Name.evictions, tier: "memory", cause: "limit") >= 1)
        #expect(try gauge(StorageMetrics.Name.entries, tier: "disk") == 3)
    }

    @Test func aSecondReportAddsOnlyWhatEachCounterGrewBy() throws {
        // Given a first report after two writes
        let reporter = StorageMetrics(storage: storage, label: "s", factory: metrics)
        try storage.setValue("a", forKey: "k0")
        try storage.setValue("b", forKey: "k1")
        reporter.report()
        let writes = try metrics.expectCounter(StorageMetrics.Name.requestWrites, [("storage", "s")])
        #expect(writes.values == [2])

        // When nothing happens and it reports again, then nothing is added
        reporter.report()
        #expect(writes.values == [2])

        // When one more write happens, the next report adds exactly one
        try storage.setValue("c", forKey: "k2")
        reporter.report()
        #expect(writes.values == [2, 1])
        #expect(writes.totalValue == Int64(storage.statistics.writes))
        #expect(try gauge(StorageMetrics.Name.entries, tier: "disk") == 3)
    }

    @Test func reportsFromManyThreadsCountEveryIncrementOnce() async throws {
        // Given a reporter that several tasks call while writes go on
        let reporter = StorageMetrics(storage: storage, label: "s", factory: metrics)
        let storage = storage
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for index in 0..<50 {
                        try? await storage.setValue("v", forKey: "w\(worker)-\(index)")
                        reporter.report()
                    }
                }
            }
        }
        // When a last report runs, the total is the storage's count exactly
        reporter.report()
        #expect(try counter(StorageMetrics.Name.requestWrites) == 200)
        #expect(try counter(StorageMetrics.Name.writes, tier: "disk") == Int64(storage.statistics[.disk].writes))
    }

    @Test func reportsLoadsAndLoaderFailures() async throws {
        // Given one get-or-load whose loader makes a value and one whose loader throws
        struct LoaderFailed: Error {}
        _ = try await storage.value(forKey: "loaded") { _ in "made" }
        await #expect(throws: LoaderFailed.self) {
            _ = try await storage.value(forKey: "failing") { _ in throw LoaderFailed() }
        }
        let statistics = storage.statistics

        // When the reporter reports
        StorageMetrics(storage: storage, label: "s", factory: metrics).report()

        // Then the load counters equal the storage's
        #expect(try counter(StorageMetrics.Name.loads) == Int64(statistics.loads))
        #expect(try counter(StorageMetrics.Name.loads) >= 1)
        #expect(try counter(StorageMetrics.Name.loadFailures) == Int64(statistics.loadFailures))
        #expect(try counter(StorageMetrics.Name.loadFailures) == 1)
        #expect(try counter(StorageMetrics.Name.staleServed) == Int64(statistics.staleServed))
        #expect(
            try metrics.expectCounter(StorageMetrics.Name.loadTimeouts, [("storage", "s"), ("kind", "hard")]).totalValue
                == Int64(statistics.hardTimeouts))
    }

    // MARK: - Dimensions

    @Test func twoStoragesAreToldApartByTheStorageDimension() throws {
        // Given a second storage with its own label
        let other = try Storage<String, String>(transformer: .string)
        try storage.setValue("a", forKey: "k")
        for index in 0..<5 { try other.setValue("b", forKey: "k\(index)") }

        // When both report into one backend
        StorageMetrics(storage: storage, label: "s", factory: metrics).report()
        StorageMetrics(storage: other, label: "other", factory: metrics).report()

        // Then each has its own series, and the memory-only storage has no disk series
        #expect(try counter(StorageMetrics.Name.writes, "s", tier: "memory") == 1)
        #expect(try counter(StorageMetrics.Name.writes, "other", tier: "memory") == 5)
        #expect(throws: (any Error).self) {
            try metrics.expectCounter(StorageMetrics.Name.writes, [("storage", "other"), ("tier", "disk")])
        }
    }

    // MARK: - run()

    @Test func runReportsUntilCancelledAndOnceMoreOnTheWayOut() async throws {
        // Given a reporter running every 10 ms
        let reporter = StorageMetrics(storage: storage, label: "s", interval: .milliseconds(10), factory: metrics)
        let task = Task { try await reporter.run() }

        // When a write happens, then a later report shows it (polled: the machine may stall)
        try await storage.setValue("a", forKey: "k0")
        let deadline = ContinuousClock.now + .seconds(300)
        while (try? counter(StorageMetrics.Name.requestWrites)) != 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try counter(StorageMetrics.Name.requestWrites) == 1)

        // When a write happens right before cancellation, the final report still counts it
        try await storage.setValue("b", forKey: "k1")
        task.cancel()
        try await task.value
        #expect(try counter(StorageMetrics.Name.requestWrites) == 2)
    }

    #if ServiceLifecycle
    @Test func asAServiceItStopsOnGracefulShutdownAfterALastReport() async throws {
        // Given a reporter with an hour-long interval, run by a service group
        let reporter = StorageMetrics(storage: storage, label: "s", interval: .seconds(3600), factory: metrics)
        var logger = Logger(label: "StorageMetricsTests")
        logger.logLevel = .critical
        let group = ServiceGroup(configuration: .init(services: [.init(service: reporter)], logger: logger))
        let running = Task { try await group.run() }
        // and its first report made (polled: the machine may stall)
        let deadline = ContinuousClock.now + .seconds(300)
        while (try? counter(StorageMetrics.Name.requestWrites)) == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }

        // When a write happens and the group shuts down gracefully
        try await storage.setValue("a", forKey: "k0")
        await group.triggerGracefulShutdown()

        // Then the group returns well before the interval, and the last report counted the write
        try await running.value
        #expect(try counter(StorageMetrics.Name.requestWrites) == 1)
    }
    #endif
}
#endif
