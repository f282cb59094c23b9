#if Vapor
import Foundation
import Larder
import LarderTestSupport
import LarderVapor
import NIOCore
import Testing
import Vapor
import VaporTesting

/// A clock that moves only when a test advances it.
final class SettableClock: Sendable {
    private let date = Locked(Date(timeIntervalSince1970: 1_700_000_000))
    var now: @Sendable () -> Date { { self.date.withLock { $0 } } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

struct Profile: Codable, Equatable, Sendable {
    var name: String
    var visits: Int
}

@Suite(.timeLimit(.minutes(10)))
struct LarderCacheTests {
    let directory: TemporaryDirectory
    let clock = SettableClock()

    init() throws {
        directory = try TemporaryDirectory("larder-vapor")
    }

    func makeStorage() throws -> Larder.Storage<String, JSONValue> {
        try Larder.Storage<String, JSONValue>(transformer: .jsonValue) { configuration in
            configuration.directory = directory.url
            configuration.now = clock.now
        }
    }

    /// Larder as the app's cache, with routes that read and write through `req.cache`.
    func configure(_ app: Application, storage: Larder.Storage<String, JSONValue>) {
        app.caches.use(.larder(storage))
        app.get("cache", ":key") { req async throws -> Response in
            let key = try req.parameters.require("key")
            guard let value = try await req.cache.get(key, as: String.self) else { return Response(status: .notFound) }
            return Response(status: .ok, body: .init(string: value))
        }
        app.put("cache", ":key") { req async throws -> HTTPStatus in
            let key = try req.parameters.require("key")
            let ttl: Int? = req.query["ttl"]
            try await req.cache.set(key, to: req.body.string ?? "", expiresIn: ttl.map { .seconds($0) })
            return .ok
        }
        app.delete("cache", ":key") { req async throws -> HTTPStatus in
            try await req.cache.delete(try req.parameters.require("key"))
            return .noContent
        }
    }

    func withLarderApp<T>(
        storage: Larder.Storage<String, JSONValue>? = nil, _ test: (Application, Larder.Storage<String, JSONValue>) async throws -> T
    ) async throws -> T {
        let storage = try storage ?? makeStorage()
        return try await withApp(configure: { configure($0, storage: storage) }) { app async throws in
            try await test(app, storage)
        }
    }

    // MARK: - Routes through req.cache

    @Test func routesReadAndWriteThroughTheRequestCache() async throws {
        try await withLarderApp { app, storage in
            let tester = try app.testing()
            // Given nothing cached, When the route reads, Then it is a miss.
            try await tester.test(.GET, "cache/greeting") { res async in #expect(res.status == .notFound) }
            // When a route writes, Then a later request reads it, and it reached the disk tier.
            try await tester.test(.PUT, "cache/greeting", beforeRequest: { req in req.body = ByteBuffer(string: "hello") }) {
                res async in #expect(res.status == .ok)
            }
            try await tester.test(.GET, "cache/greeting") { res async in
                #expect(res.status == .ok)
                #expect(res.body.string == "hello")
            }
            #expect(try await storage.value(forKey: "greeting", tiers: .disk)?.json == Data("\"hello\"".utf8))
            // When a route deletes, Then it is a miss again everywhere.
            try await tester.test(.DELETE, "cache/greeting") { res async in #expect(res.status == .noContent) }
            try await tester.test(.GET, "cache/greeting") { res async in #expect(res.status == .notFound) }
            #expect(try await storage.value(forKey: "greeting", tiers: .disk) == nil)
        }
    }

    @Test func overwritingReplacesTheValue() async throws {
        try await withLarderApp { app, _ in
            let tester = try app.testing()
            for body in ["first", "second"] {
                try await tester.test(.PUT, "cache/k", beforeRequest: { req in req.body = ByteBuffer(string: body) }) {
                    res async in #expect(res.status == .ok)
                }
            }
            try await tester.test(.GET, "cache/k") { res async in #expect(res.body.string == "second") }
        }
    }

    // MARK: - Expiry

    @Test func expiresInIsHonouredToTheSecond() async throws {
        try await withLarderApp { app, _ in
            let tester = try app.testing()
            try await tester.test(.PUT, "cache/token?ttl=2", beforeRequest: { req in req.body = ByteBuffer(string: "abc") }) {
                res async in #expect(res.status == .ok)
            }
            // Given a 2 s lifetime, When 1.999 s pass, Then the value is still served.
            clock.advance(by: 1.999)
            try await tester.test(.GET, "cache/token") { res async in #expect(res.body.string == "abc") }
            // When the 2 s are up, Then it is gone.
            clock.advance(by: 0.001)
            try await tester.test(.GET, "cache/token") { res async in #expect(res.status == .notFound) }
        }
    }

    @Test(arguments: [
        (CacheExpirationTime.seconds(90), 90.0), (.minutes(3), 180), (.hours(2), 7_200), (.days(1), 86_400),
    ])
    func everyExpirationUnitSetsTheExactLifetime(expiration: CacheExpirationTime, seconds: TimeInterval) async throws {
        try await withLarderApp { app, storage in
            let start = clock.now()
            try await app.cache.set("k", to: 1, expiresIn: expiration)
            let entry = try #require(try await storage.entry(forKey: "k", tiers: .disk))
            #expect(entry.expirationDate == start.addingTimeInterval(seconds))
        }
    }

    @Test func aValueSetWithoutExpirationNeverExpires() async throws {
        try await withLarderApp { app, _ in
            try await app.cache.set("forever", to: "yes")
            clock.advance(by: 10 * 365 * 86_400)
            #expect(try await app.cache.get("forever", as: String.self) == "yes")
        }
    }

    // MARK: - Vapor's cache conformance (the behaviours of Vapor's own cache tests)

    @Test func futureAndAsyncFormsAgree() async throws {
        try await withLarderApp { app, _ in
            let cache = try #require(app.cache as? LarderCache)
            #expect(try await cache.get("foo", as: String.self) == nil)
            try await cache.set("foo", to: "bar").get()
            #expect(try await cache.get("foo", as: String.self).get() == "bar")
            let typed: String? = try await cache.get("foo")
            #expect(typed == "bar")
            try await cache.set("foo2", to: "bar2", expiresIn: .seconds(1)).get()
            #expect(try await cache.get("foo2", as: String.self) == "bar2")
            clock.advance(by: 1)
            #expect(try await cache.get("foo2", as: String.self).get() == nil)
            try await cache.set("foo3", to: "bar3")
            try await cache.delete("foo3").get()
            #expect(try await cache.get("foo3", as: String.self) == nil)
        }
    }

    @Test func settingNilRemovesTheKeyFromEveryTier() async throws {
        try await withLarderApp { app, storage in
            try await app.cache.set("k", to: "v")
            try await app.cache.set("k", to: String?.none)
            #expect(try await app.cache.get("k", as: String.self) == nil)
            #expect(try await storage.value(forKey: "k", tiers: .disk) == nil)
            #expect(try await storage.value(forKey: "k", tiers: .memory) == nil)
            // The future form too, with an expiration given.
            try await app.cache.set("k", to: "v").get()
            try await app.cache.set("k", to: Int?.none, expiresIn: .seconds(5)).get()
            #expect(try await app.cache.get("k", as: String.self) == nil)
        }
    }

    @Test func codableValuesRoundTripAndAWrongTypeThrows() async throws {
        try await withLarderApp { app, _ in
            let profile = Profile(name: "Ada", visits: 3)
            try await app.cache.set("profile", to: profile)
            #expect(try await app.cache.get("profile", as: Profile.self) == profile)
            await #expect(throws: StorageError.self) { try await app.cache.get("profile", as: Int.self) }
            await #expect(throws: StorageError.self) { try await app.cache.get("profile", as: Int.self).get() }
        }
    }

    @Test func theConcreteCacheHasAsyncFormsWithoutFutures() async throws {
        try await withLarderApp { app, storage in
            let cache = LarderCache(storage: storage, on: app.eventLoopGroup.any())
            try await cache.set("n", to: 7, expiresIn: .seconds(3))
            #expect(try await cache.get("n", as: Int.self) == 7)
            clock.advance(by: 3)
            #expect(try await cache.get("n", as: Int.self) == nil)
            try await cache.set("m", to: 1)
            try await cache.set("m", to: Int?.none)
            #expect(try await cache.get("m", as: Int.self) == nil)
        }
    }

    @Test func theRequestCacheRunsOnTheRequestsEventLoopOverTheSameStorage() async throws {
        try await withLarderApp { app, storage in
            app.get("loop") { req async throws -> String in
                let cache = try #require(req.cache as? LarderCache)
                #expect(cache.eventLoop === req.eventLoop)
                #expect(cache.storage === storage)
                try await req.cache.set("from-request", to: "shared")
                return "ok"
            }
            try await app.testing().test(.GET, "loop") { res async in #expect(res.body.string == "ok") }
            #expect(try await app.cache.get("from-request", as: String.self) == "shared")
        }
    }

    @Test func aDiskHitIsServedWhenMemoryNoLongerHoldsTheValue() async throws {
        try await withLarderApp { app, storage in
            try await app.cache.set("k", to: Profile(name: "disk", visits: 1))
            storage.memory.removeAll()
            #expect(try await app.cache.get("k", as: Profile.self) == Profile(name: "disk", visits: 1))
        }
    }

    /// An immutable class, so that a test can tell the stored object from a decoded copy.
    final class Badge: Codable, Sendable {
        let label: String
        init(label: String) { self.label = label }
    }

    @Test func aMemoryHitAnswersTheStoredObjectWithoutDecoding() async throws {
        try await withLarderApp { app, storage in
            let cache = LarderCache(storage: storage, on: app.eventLoopGroup.any())
            let badge = Badge(label: "gold")
            try await cache.set("badge", to: badge)
            // Given the value in memory, Then both API styles answer the object itself.
            #expect(try await cache.get("badge", as: Badge.self) === badge)
            #expect(try await cache.get("badge", as: Badge.self).get() === badge)
            // A read as another type decodes the JSON; a wrong type still throws.
            #expect(try await cache.get("badge", as: [String: String].self) == ["label": "gold"])
            await #expect(throws: StorageError.self) { try await cache.get("badge", as: [Int].self).get() }
            // Given memory emptied, Then the disk's JSON is decoded once and the copy promoted
            // to memory answers later hits with that object.
            storage.memory.removeAll()
            let fromDisk = try #require(try await cache.get("badge", as: Badge.self))
            #expect(fromDisk !== badge && fromDisk.label == "gold")
            #expect(try await cache.get("badge", as: Badge.self).get() === fromDisk)
        }
    }

    // MARK: - Two processes on one directory

    @Test func twoAppProcessesOnOneDirectoryShowEachOthersChangesAtOnce() async throws {
        // Given two Vapor apps (processes) whose LarderCache lives in one directory
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let helper = URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("LarderVaporHelper")
        // When values are set, read, removed and overwritten through one app and read
        // through the other, Then every response shows the new state.
        let mismatches = try await SharedDirectoryApps.run(helper, arguments: [directory.url.path], withCreate: false)
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    // MARK: - Lifecycle

    @Test func shutdownClosesTheStorageAndARestartKeepsTheValues() async throws {
        let first = try makeStorage()
        try await withLarderApp(storage: first) { app, _ in
            try await app.testing().test(.PUT, "cache/kept", beforeRequest: { req in req.body = ByteBuffer(string: "on disk") }) {
                res async in #expect(res.status == .ok)
            }
            try await app.cache.set("short", to: "lived", expiresIn: .seconds(60))
        }
        // Given the first app shut down, Then its storage is closed.
        #expect(throws: StorageError.self) { try first.value(forKey: "kept", tiers: .disk) }
        // When a new app opens the same directory, Then the values (and their lifetimes) are there.
        clock.advance(by: 30)
        try await withApp(configure: { app in
            try app.caches.use(.larder(directory: directory.url) { $0.now = clock.now })
        }) { app async throws in
            #expect(try await app.cache.get("kept", as: String.self) == "on disk")
            #expect(try await app.cache.get("short", as: String.self) == "lived")
            clock.advance(by: 30)
            #expect(try await app.cache.get("short", as: String.self) == nil)
        }
    }

    @Test func manyConcurrentRequestsSeeTheirOwnWrites() async throws {
        try await withLarderApp { app, _ in
            let cache = try #require(app.cache as? LarderCache)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<16 {
                    group.addTask {
                        for round in 0..<20 {
                            let key = "t\(task)-\(round % 5)"
                            try await cache.set(key, to: round)
                            #expect(try await cache.get(key, as: Int.self) == round)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}
#endif
