#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import Testing

/// One loader per key across the fleet: a lock key (`SET … NX PX`) beside each value.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisLeaseTests {
    static func storage(port: Int) throws -> (Storage<String, String>, RedisStore) {
        let store = try RedisStore(configuration: .init(
            port: port, namespace: "l:", deadline: .seconds(300), isTrackingEnabled: false, leaseWaitLimit: .seconds(120)))
        return (try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string), store)
    }

    @Test func theFirstCallerTakesTheLockTheNextWaitsAndAFillReleasesIt() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (_, store) = try Self.storage(port: server.port)
            let lock = String(decoding: store.resolve("k").lock, as: UTF8.self)
            guard case .won(let lease, stale: nil) = try await store.leasedEntry(forKey: "k", leaseDuration: .seconds(3_600)) else {
                Issue.record("the first caller did not win the lock")
                return
            }
            // The lock expires on its own (a dead holder's lock does not last).
            let pttl = try #require(Int(try server.cli("PTTL", lock)))
            #expect(pttl > 0 && pttl <= 3_600_000)
            #expect(try await store.leasedEntry(forKey: "k", leaseDuration: .seconds(3_600)) == .busy(stale: nil))
            #expect(try await store.fill(Data("loaded".utf8), forKey: "k", lease: lease, expiry: .seconds(3_600), metadata: nil, isCompressible: false))
            #expect(try server.cli("EXISTS", lock) == "0")
            guard case .hit(let entry) = try await store.leasedEntry(forKey: "k", leaseDuration: .seconds(3_600)) else {
                Issue.record("the filled value is not a hit")
                return
            }
            #expect(entry.data == Data("loaded".utf8))
            await store.close()
        }
    }

    @Test func aFillAfterAnotherWriteIsRefused() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (_, store) = try Self.storage(port: server.port)
            guard case .won(let lease, _) = try await store.leasedEntry(forKey: "k", leaseDuration: .seconds(3_600)) else {
                Issue.record("no lock")
                return
            }
            try await store.setValue(Data("newer".utf8), forKey: "k", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try await !store.fill(Data("older".utf8), forKey: "k", lease: lease, expiry: .seconds(3_600), metadata: nil, isCompressible: false))
            #expect(try await store.entry(forKey: "k")?.data == Data("newer".utf8))
            #expect(store.statistics.rejectedFills == 1)
            await store.close()
        }
    }

    @Test func aLoaderThatThrowsReleasesTheLockAtOnce() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, storeA) = try Self.storage(port: server.port)
            let (b, storeB) = try Self.storage(port: server.port)
            struct LoaderFailed: Error {}
            await #expect(throws: LoaderFailed.self) {
                _ = try await a.value(forKey: "k", expiry: .seconds(3_600)) { _ in throw LoaderFailed() }
            }
            #expect(try server.cli("EXISTS", String(decoding: storeA.resolve("k").lock, as: UTF8.self)) == "0")
            // B does not wait out a lease: it wins the lock and loads.
            #expect(try await b.value(forKey: "k", expiry: .seconds(3_600)) { _ in "from b" } == "from b")
            #expect(storeB.statistics.leaseWaits == 0 && storeB.statistics.leaseWins == 1)
            #expect(try await a.value(forKey: "k") == "from b")
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aDeadHoldersLockExpiresAndTheNextCallerLoads() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (_, holder) = try Self.storage(port: server.port)
            let (b, _) = try Self.storage(port: server.port)
            // The holder takes a short lock and "dies" (never fills, never releases).
            guard case .won = try await holder.leasedEntry(forKey: "k", leaseDuration: .milliseconds(300)) else {
                Issue.record("no lock")
                return
            }
            await holder.close()
            // B waits (up to its wait limit) and loads once the lock has expired.
            #expect(try await b.value(forKey: "k", expiry: .seconds(3_600)) { _ in "after expiry" } == "after expiry")
            #expect(try await b.value(forKey: "k") == "after expiry")
        }
    }

    @Test func aConditionalInvalidationLeavesAValueWrittenSinceFresh() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (_, store) = try Self.storage(port: server.port)
            try await store.setValue(Data("old".utf8), forKey: "c", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            let read = try #require(try await store.entry(forKey: "c"))
            // Given a value written after the read, expiring later
            try await store.setValue(Data("new".utf8), forKey: "c", expiry: .seconds(7_200), metadata: nil, isCompressible: false)
            // An invalidation of what was read leaves it fresh
            #expect(try await store.invalidate(forKey: "c", ifExpiringBy: try #require(read.expirationDate)) == false)
            guard case .hit(let fresh) = try await store.leasedEntry(forKey: "c", leaseDuration: .seconds(30)) else {
                Issue.record("the value written since was moved aside"); return
            }
            #expect(fresh.data == Data("new".utf8))
            // While one that still expires by then is moved aside
            let now = try #require(try await store.entry(forKey: "c"))
            #expect(try await store.invalidate(forKey: "c", ifExpiringBy: try #require(now.expirationDate)))
            guard case .won(_, stale: let stale?) = try await store.leasedEntry(forKey: "c", leaseDuration: .seconds(30)) else {
                Issue.record("the due value was not moved aside"); return
            }
            #expect(stale.data == Data("new".utf8))
            await store.close()
        }
    }

    @Test func invalidateServesTheStaleValueWhileOneCallerRecomputes() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, store) = try Self.storage(port: server.port)
            try await a.setValue("v1", forKey: "k", expiry: .seconds(3_600))
            try await a.invalidate(forKey: "k")
            #expect(try server.cli("EXISTS", String(decoding: store.resolve("k").key, as: UTF8.self)) == "0")
            let gate = AsyncStream<Void>.makeStream()
            let refreshed = AsyncStream<Void>.makeStream()
            // The stale value is served at once; the loader runs in the background.
            let value = try await a.value(forKey: "k", expiry: .seconds(3_600)) { _ in
                for await _ in gate.stream { break }
                refreshed.continuation.finish()
                return "v2"
            }
            #expect(value == "v1")
            gate.continuation.yield()
            for await _ in refreshed.stream {}
            #expect(await eventually { (try? await store.entry(forKey: "k"))?.data == Data("v2".utf8) })
            await store.close()
        }
    }
}
#endif
