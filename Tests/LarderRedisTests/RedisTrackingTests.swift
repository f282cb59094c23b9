#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import Testing

/// `CLIENT TRACKING`: every instance's memory copy of a key is dropped when any instance (or
/// any other client) changes it, and every copy is dropped when the tracking stream is lost.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisTrackingTests {
    /// One "instance": a storage with its own store (own connections, own tracking connection).
    static func instance(port: Int, namespace: String = "tr:") async throws -> (Storage<String, String>, RedisStore) {
        let store = try await RedisStore.connect(configuration: .init(
            port: port, namespace: namespace, deadline: .seconds(300), reconnectBackoff: (.milliseconds(5), .milliseconds(50)),
            localCopyMaxAge: .seconds(3_600), trackingHeartbeat: .seconds(1)))
        let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
        #expect(await eventually { store.isTrackingLive })
        return (storage, store)
    }

    /// Runs `change`, then waits until `store` received a push after it.
    static func afterPush(to store: RedisStore, _ change: () async throws -> Void) async rethrows -> Bool {
        let before = store.statistics.invalidationsReceived
        try await change()
        return await eventually { store.statistics.invalidationsReceived > before }
    }

    @Test func aWriteByOneInstanceDropsTheOthersMemoryCopy() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, storeA) = try await Self.instance(port: server.port)
            let (b, storeB) = try await Self.instance(port: server.port)
            // B hears of A's first write before it reads (a late push would drop B's fresh copy).
            #expect(try await Self.afterPush(to: storeB) { try await a.setValue("v1", forKey: "k", expiry: .seconds(3_600)) })
            #expect(try await b.value(forKey: "k") == "v1")
            #expect(b.memory.value(forKey: "k") == "v1", "B keeps a local copy")
            // A overwrites: B's copy goes without B doing anything.
            try await a.setValue("v2", forKey: "k", expiry: .seconds(3_600))
            #expect(await eventually { b.memory.value(forKey: "k") == nil })
            #expect(try await b.value(forKey: "k") == "v2")
            #expect(storeB.statistics.invalidationsReceived >= 1)
            // Removal and invalidation reach B too.
            #expect(b.memory.value(forKey: "k") == "v2")
            try await a.removeValue(forKey: "k")
            #expect(await eventually { b.memory.value(forKey: "k") == nil })
            #expect(try await b.value(forKey: "k") == nil)
            #expect(try await Self.afterPush(to: storeB) { try await a.setValue("v3", forKey: "k", expiry: .seconds(3_600)) })
            #expect(try await b.value(forKey: "k") == "v3")
            #expect(b.memory.value(forKey: "k") == "v3")
            try await a.invalidate(forKey: "k")
            #expect(await eventually { b.memory.value(forKey: "k") == nil })
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aChangeByAnotherClientDropsTheCopyAndOtherNamespacesDoNot() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, storeA) = try await Self.instance(port: server.port)
            try await a.setValue("v1", forKey: "k", expiry: .seconds(3_600))
            try await a.setValue("v1", forKey: "other", expiry: .seconds(3_600))
            let wire = String(decoding: storeA.resolve("k").key, as: UTF8.self)
            // A's own writes echo back (dropping its copies); once every echo has come (each
            // removes its key from those followed), re-read so both copies are in memory.
            #expect(await eventually { storeA.statistics.trackedKeys == 0 })
            #expect(try await a.value(forKey: "k") == "v1")
            #expect(try await a.value(forKey: "other") == "v1")
            let before = storeA.statistics.invalidationsReceived
            _ = try server.cli("SET", "elsewhere:key", "x")
            _ = try server.cli("DEL", wire)
            #expect(await eventually { a.memory.value(forKey: "k") == nil })
            #expect(a.memory.value(forKey: "other") == "v1", "a change of another key dropped this copy")
            #expect(storeA.statistics.invalidationsReceived == before + 1, "a key outside the namespace was pushed")
            await storeA.close()
        }
    }

    @Test func losingTheTrackingConnectionDropsEveryCopyBeforeAnyIsServedAgain() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, storeA) = try await Self.instance(port: server.port)
            for index in 0..<20 { try await a.setValue("v\(index)", forKey: "k\(index)", expiry: .seconds(3_600)) }
            #expect(await eventually { storeA.statistics.trackedKeys == 0 })
            for index in 0..<20 { #expect(try await a.value(forKey: "k\(index)") == "v\(index)") }
            #expect(a.memory.totalCount == 20)
            // The server dies: no invalidation can come, so no copy may be trusted.
            await server.kill()
            #expect(await eventually { a.memory.totalCount == 0 })
            #expect(!storeA.isTrackingLive)
            #expect(storeA.localCopyMaxAge == .zero, "copies made while the stream is down would be unguarded")
            // A value written elsewhere meanwhile is what A reads once the server is back.
            let restarted = try await server.restart()
            _ = restarted
            #expect(await eventually { storeA.isTrackingLive })
            #expect(storeA.statistics.localCopyResets >= 2, "a reset when the stream stopped and one when it resumed")
            #expect(try await a.value(forKey: "k0") == nil)
            await storeA.close()
        }
    }

    @Test func aFlushDropsEveryCopy() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, storeA) = try await Self.instance(port: server.port)
            for index in 0..<5 { try await a.setValue("v", forKey: "k\(index)", expiry: .seconds(3_600)) }
            #expect(await eventually { storeA.statistics.trackedKeys == 0 })
            for index in 0..<5 { _ = try await a.value(forKey: "k\(index)") }
            #expect(a.memory.totalCount == 5)
            _ = try server.cli("FLUSHALL")
            #expect(await eventually { a.memory.totalCount == 0 })
            await storeA.close()
        }
    }

    @Test func aStoreWithoutTrackingKeepsItsCopiesBoundedByAge() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try RedisStore(configuration: .init(port: server.port, deadline: .seconds(300), isTrackingEnabled: false,
                                                            localCopyMaxAge: .seconds(3_600)))
            #expect(store.localCopyMaxAge == .seconds(3_600))
            #expect(!store.isTrackingLive)
            store.trackLocalCopy(forKey: "k")
            #expect(store.statistics.trackedKeys == 0)
            await store.close()
        }
    }
}
#endif

#if Redis
extension RedisTrackingTests {
    /// Past `trackedKeyLimit`, the other keys' copies are dropped and the key being read stays
    /// followed (a later write still drops its copy).
    @Test func pastTheFollowedKeyLimitOtherCopiesAreDroppedAndTheNewKeyStaysGuarded() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            // Written before the tracking store subscribes: no late push can drop a fresh copy.
            let writer = try RedisStore(configuration: .init(port: server.port, namespace: "lim:", deadline: .seconds(300), isTrackingEnabled: false))
            for index in 0..<4 {
                try await writer.setValue(Data("v\(index)".utf8), forKey: "k\(index)", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            let store = try await RedisStore.connect(configuration: .init(
                port: server.port, namespace: "lim:", deadline: .seconds(300), localCopyMaxAge: .seconds(3_600), trackedKeyLimit: 3))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            #expect(await eventually { store.isTrackingLive })
            for index in 0..<3 { #expect(try await storage.value(forKey: "k\(index)") == "v\(index)") }
            #expect(storage.memory.totalCount == 3)
            #expect(try await storage.value(forKey: "k3") == "v3")
            #expect(storage.memory.totalCount == 1 && storage.memory.value(forKey: "k3") == "v3")
            #expect(store.statistics.trackedKeys == 1)
            try await writer.setValue(Data("new".utf8), forKey: "k3", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(await eventually { storage.memory.value(forKey: "k3") == nil })
            await store.close()
            await writer.close()
        }
    }
}
#endif
