#if Memcached
import Foundation
import Larder
@testable import LarderMemcached
import LarderTestSupport
import NIOCore
import Synchronization
import Testing

/// Get-or-load for services over a real memcached server: fail-safe stale copies shared by the
/// fleet, refresh ahead with one refresh per key across instances, and a failed shared read
/// that never deletes the fleet's value.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct StorageServiceLoadRemoteTests {
    /// One wall clock for every storage and memcached tier of a test: expiry moves when the test
    /// says (memcached's own TTLs are real time and longer than any test).
    let clock = LockedClock(Date(timeIntervalSince1970: 1_700_000_000))

    final class LockedClock: Sendable {
        private let current: Mutex<Date>
        init(_ start: Date) { current = Mutex(start) }
        var now: Date { current.withLock { $0 } }
        var closure: @Sendable () -> Date { { self.now } }
        func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    func makeStorage(port: Int, namespace: String, loading: LoadOptions, localCopyMaxAge: Duration? = nil,
                     deadline: Duration = .seconds(300)) throws -> (Storage<String, String>, MemcachedStore) {
        let store = try MemcachedStore(configuration: .init(
            port: port, namespace: namespace, deadline: deadline, localCopyMaxAge: localCopyMaxAge, now: clock.closure))
        var configuration = Storage<String, String>.Configuration()
        configuration.now = clock.closure
        configuration.loading = loading
        return (try Storage(configuration: configuration, additionalTiers: [store], transformer: .string), store)
    }

    @Test func aFreshInstanceServesTheFleetsStaleCopyWhenItsLoaderFails() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let loading = LoadOptions(maxStale: .seconds(3_600))
            let (a, storeA) = try makeStorage(port: server.port, namespace: "fs:", loading: loading)
            // Given a value one instance loaded with a 60 s lifetime, now two minutes old
            _ = try await a.value(forKey: "k", expiry: .seconds(60)) { _ in "v1" }
            clock.advance(by: 120)
            // Then another instance (nothing in its memory) reads nothing without a loader
            let (b, storeB) = try makeStorage(port: server.port, namespace: "fs:", loading: loading)
            #expect(try await b.value(forKey: "k") == nil)
            // And, its source down, gets the remote stale copy, marked stale
            let entry = try await b.entry(forKey: "k", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
            #expect(entry.value == "v1" && entry.isStale && entry.tier == .remote)
            #expect(b.statistics.staleServed == 1)
            // A write by any instance drops the fleet's stale copy: no older value comes back
            try await a.setValue("v2", forKey: "k", expiry: .seconds(60))
            clock.advance(by: 120)
            let (c, storeC) = try makeStorage(port: server.port, namespace: "fs:", loading: loading)
            await #expect(throws: LoaderControl<String>.Failure.self) {
                try await c.value(forKey: "k", expiry: .seconds(60)) { _ in throw LoaderControl<String>.Failure() }
            }
            for store in [storeA, storeB, storeC] { await store.close() }
        }
    }

    @Test func aHotKeyIsRefreshedAheadOfExpiryByOneInstanceOfTheFleet() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let loading = LoadOptions(refreshAfter: 0.5)
            let (a, storeA) = try makeStorage(port: server.port, namespace: "ra:", loading: loading)
            let (b, storeB) = try makeStorage(port: server.port, namespace: "ra:", loading: loading)
            let loaderA = LoaderControl<String>(.succeed("v1"))
            let loaderB = LoaderControl<String>(.succeed("from-b"))
            let loadA: @Sendable (String) async throws -> String = { _ in try await loaderA.load() }
            let loadB: @Sendable (String) async throws -> String = { _ in try await loaderB.load() }
            // Given a value loaded by A and copied into B's memory
            #expect(try await a.value(forKey: "k", expiry: .seconds(100), orLoad: loadA) == "v1")
            #expect(try await b.value(forKey: "k", expiry: .seconds(100), orLoad: loadB) == "v1")
            // When both see hits past the refresh point while A's refresh is loading
            clock.advance(by: 60)
            loaderA.set(.hang)
            #expect(try await a.value(forKey: "k", expiry: .seconds(100), orLoad: loadA) == "v1")
            #expect(await loaderA.waitForHanging(1))
            for _ in 0..<5 { #expect(try await b.value(forKey: "k", expiry: .seconds(100), orLoad: loadB) == "v1") }
            // Then only A loads; once it fills, B takes the new value from memcached
            loaderA.release(.success("v2"))
            #expect(try await pollUntil { try await a.value(forKey: "k") == "v2" })
            #expect(try await pollUntil { try await b.value(forKey: "k", expiry: .seconds(100), orLoad: loadB) == "v2" })
            #expect(loaderA.calls == 2 && loaderB.calls == 0)
            await storeA.close()
            await storeB.close()
        }
    }

    /// A shared tier without leases (the get-or-load path of a shared tier that cannot lease),
    /// forwarding to a real memcached tier.
    final class NonLeasingTier: SharedCacheTier {
        let base: MemcachedStore
        init(_ base: MemcachedStore) { self.base = base }
        var tierID: StorageTier { base.tierID }
        var localCopyMaxAge: Duration? { base.localCopyMaxAge }
        var copiesHitsToLocalTiers: Bool { base.copiesHitsToLocalTiers }
        var tierStatistics: TierStatistics { base.tierStatistics }
        func entry(forKey key: String) async throws -> TierEntry? { try await base.entry(forKey: key) }
        func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws {
            try await base.setValue(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
        }
        func removeValue(forKey key: String) async throws -> Bool { try await base.removeValue(forKey: key) }
        func containsValue(forKey key: String) async throws -> Bool { try await base.containsValue(forKey: key) }
        func keys(withPrefix prefix: String) async throws -> [String] { try await base.keys(withPrefix: prefix) }
        func removeAll() async throws { try await base.removeAll() }
        func removeExpired() async throws -> Int { try await base.removeExpired() }
        func close() async { await base.close() }
    }

    @Test func aSharedReadThatTimesOutIsAMissThatLeavesTheFleetsValue() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let proxy = try await ChaosProxy(upstreamPort: server.port)
            // Given the fleet's value, written straight to the server
            let direct = try MemcachedStore(configuration: .init(port: server.port, namespace: "nl:", deadline: .seconds(300)))
            try await direct.setValue(Data("fleet".utf8), forKey: "k", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            // And an instance whose replies are delayed far past its deadline (requests still
            // reach the server at once: a slow but live server)
            let slow = try MemcachedStore(configuration: .init(port: proxy.port, namespace: "nl:", deadline: .milliseconds(50)))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [NonLeasingTier(slow)], transformer: .string)
            proxy.set(.delay(.seconds(60)))
            // When its get-or-load finds the shared read failing
            let loaded = try await storage.value(forKey: "k", expiry: .seconds(60)) { _ in "local" }
            // Then it gets its loader's value, keeps it locally, and leaves the fleet's value alone
            #expect(loaded == "local")
            #expect(try await storage.value(forKey: "k", tiers: .memory) == "local")
            #expect(storage.statistics[.remote].errors > 0)
            try await Task.sleep(for: .milliseconds(200)) // a delete sent would have reached the server by now
            let shared = try await direct.entry(forKey: "k")
            #expect(shared.map { String(decoding: $0.data, as: UTF8.self) } == "fleet")
            proxy.set(.pass)
            await slow.close()
            await direct.close()
            await proxy.close()
        }
    }
}
#endif
