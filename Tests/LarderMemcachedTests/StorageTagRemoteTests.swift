#if Memcached
import Foundation
import Larder
@testable import LarderMemcached
import LarderTestSupport
import Synchronization
import Testing

/// Tags and `removeAll()` over a real memcached server, which can neither find values by tag
/// nor clear one namespace: the removing instance writes the tag's removal time (or the clear
/// time) into the server, and every instance's reads of values written before it are misses.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct StorageTagRemoteTests {
    /// One wall clock for every storage and memcached tier of a test, moved by the test.
    let clock = StorageServiceLoadRemoteTests.LockedClock(Date(timeIntervalSince1970: 1_700_000_000))

    func makeStorage(port: Int, namespace: String, disk: URL? = nil) throws -> (Storage<String, String>, MemcachedStore) {
        // No local copies: every read below memory asks the server, which is what is tested.
        let store = try MemcachedStore(configuration: .init(
            port: port, namespace: namespace, deadline: .seconds(300), localCopyMaxAge: .zero, now: clock.closure))
        var configuration = Storage<String, String>.Configuration(directory: disk)
        configuration.now = clock.closure
        return (try Storage(configuration: configuration, additionalTiers: [store], transformer: .string), store)
    }

    @Test func aTagRemovedByOneInstanceMakesItsValuesMissesForTheWholeFleet() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try makeStorage(port: server.port, namespace: "tag:")
            let (b, storeB) = try makeStorage(port: server.port, namespace: "tag:")
            // Given values tagged for two users, written by A and read by B
            try await a.setValue("profile 1", forKey: "/users/1", expiry: .seconds(3_600), tags: ["user:1"])
            try await a.setValue("profile 2", forKey: "/users/2", expiry: .seconds(3_600), tags: ["user:2"])
            #expect(try await b.value(forKey: "/users/1") == "profile 1")
            clock.advance(by: 1)
            // When A removes user 1's tag
            let counts = try await a.removeValues(taggedWith: "user:1")
            #expect(counts[.remote] == 0)
            // Then A misses at once, and B as soon as it reads the tag's time again
            #expect(try await a.value(forKey: "/users/1") == nil)
            clock.advance(by: 2)
            #expect(try await b.value(forKey: "/users/1") == nil)
            #expect(try await b.values(forKeys: ["/users/1", "/users/2"]) == ["/users/2": "profile 2"])
            #expect(try await b.containsValue(forKey: "/users/1", tiers: .remote) == false)
            #expect(try await b.containsValue(forKey: "/users/2", tiers: .remote))
            // Though the server still holds the bytes (it removed nothing)
            #expect(try await storeB.entry(forKey: "/users/1") != nil)
            // And a value written with the tag after the removal is a hit everywhere
            try await b.setValue("profile 1, again", forKey: "/users/1", expiry: .seconds(3_600), tags: ["user:1"])
            #expect(try await a.value(forKey: "/users/1") == "profile 1, again")
            #expect(a.statistics.tagRemovals == 1)
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aRefreshedSharedValueKeepsItsStampBesideTheCallersMetadata() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try makeStorage(port: server.port, namespace: "meta:")
            // Given a tagged value, refreshed with the caller's metadata (an HTTP cache's 304)
            try await a.setValue("page", forKey: "/p", expiry: .seconds(3_600), tags: ["t"])
            let etag = Data("etag-1".utf8)
            #expect(try await a.refresh(forKey: "/p", expiry: .seconds(3_600), metadata: etag, tiers: .remote))
            // Then the caller reads its own metadata back, not the stamp
            #expect(try await a.metadata(forKey: "/p", tiers: .remote) == etag)
            #expect(try await a.value(forKey: "/p", tiers: .remote) == "page")
            // And the value keeps its tag: a removal by tag still reaches it
            clock.advance(by: 1)
            _ = try await a.removeValues(taggedWith: "t")
            #expect(try await a.value(forKey: "/p", tiers: .remote) == nil)
            await storeA.close()
        }
    }

    @Test func getOrLoadOfARemovedTagsValueLoadsOnceAndReplacesItForTheFleet() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try makeStorage(port: server.port, namespace: "tagload:")
            let (b, storeB) = try makeStorage(port: server.port, namespace: "tagload:")
            // Given a tagged value, then its tag removed
            try await a.setValue("old", forKey: "k", expiry: .seconds(3_600), tags: ["t"])
            clock.advance(by: 1)
            try await a.removeValues(taggedWith: "t")
            clock.advance(by: 2)
            // When B runs get-or-load
            let loads = Atomic<Int>(0)
            let value = try await b.value(forKey: "k", expiry: .seconds(3_600)) { _ in
                loads.add(1, ordering: .relaxed)
                return "fresh"
            }
            // Then it loaded (the old value is a miss) and the fleet gets the new value
            #expect(value == "fresh" && loads.load(ordering: .relaxed) == 1)
            #expect(try await a.value(forKey: "k") == "fresh")
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func removeAllReachesTheServerForEveryInstance() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let (a, storeA) = try makeStorage(port: server.port, namespace: "clear:")
            let (b, storeB) = try makeStorage(port: server.port, namespace: "clear:")
            // Given a value written by A, one written straight to the server, and B reading them
            try await a.setValue("v", forKey: "k", expiry: .seconds(3_600))
            try await storeA.setValue(Data("raw".utf8), forKey: "raw", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try await b.value(forKey: "k") == "v")
            #expect(try await b.value(forKey: "raw") == "raw")
            clock.advance(by: 1)
            // When A clears every tier
            try await a.removeAll()
            // Then every value written before is a miss, for A at once and for B within a second
            #expect(try await a.value(forKey: "k") == nil)
            clock.advance(by: 2)
            #expect(try await b.value(forKey: "k") == nil)
            #expect(try await b.value(forKey: "raw") == nil)
            // And values written after the clear are hits
            try await b.setValue("after", forKey: "k", expiry: .seconds(3_600))
            #expect(try await a.value(forKey: "k") == "after")
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aTaggedValueCopiedToTheDiskGoesWithItsTag() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let folder = try TemporaryDirectory("tag-remote")
            let writer = try MemcachedStore(configuration: .init(
                port: server.port, namespace: "tagdisk:", deadline: .seconds(300), now: clock.closure))
            var configuration = Storage<String, String>.Configuration()
            configuration.now = clock.closure
            let a = try Storage(configuration: configuration, additionalTiers: [writer], transformer: .string)
            let reader = try MemcachedStore(configuration: .init(
                port: server.port, namespace: "tagdisk:", deadline: .seconds(300), copiesHitsToLocalTiers: true, now: clock.closure))
            configuration.directory = folder.url
            let b = try Storage(configuration: configuration, additionalTiers: [reader], transformer: .string)
            // Given a tagged value A wrote, which B copied into its memory and disk
            try await a.setValue("v", forKey: "k", expiry: .seconds(3_600), tags: ["t"])
            #expect(try await b.entry(forKey: "k")?.tier == .remote)
            #expect(try await b.value(forKey: "k", tiers: .disk) == "v")
            #expect(try b.disk?.tags(forKey: "k") == ["t"])
            clock.advance(by: 1)
            // When B removes the tag
            let counts = try await b.removeValues(taggedWith: "t")
            // Then its local copies went with it, and the shared value is a miss
            #expect(counts[.memory] == 1 && counts[.disk] == 1)
            #expect(try await b.value(forKey: "k") == nil)
            await writer.close()
            await reader.close()
        }
    }
}
#endif
