#if Memcached && Vapor
import Foundation
import Larder
import LarderMemcached
import LarderTestSupport
import LarderVapor
import NIOPosix
import Testing
import Vapor

/// Both traits on: Larder as Vapor's cache over a memcached tier. Two app instances (two
/// storages on their own directories) share one server: what one caches, the other reads;
/// what one deletes, the other no longer sees.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct VaporOverMemcachedTests {
    struct Forecast: Codable, Equatable, Sendable {
        var city: String
        var celsius: Int
    }

    @Test func twoInstancesShareValuesThroughTheRemoteTier() async throws {
        let folder = try TemporaryDirectory("vapor-memcached")
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope)
            let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
            func instance(_ name: String, localCopyMaxAge: Duration?) throws -> (LarderCache, MemcachedStore) {
                let remote = try MemcachedStore(configuration: .init(
                    port: server.port, namespace: "app:", deadline: .seconds(300), localCopyMaxAge: localCopyMaxAge))
                let storage = try Larder.Storage<String, JSONValue>(
                    configuration: .init(directory: folder.url.appendingPathComponent(name)),
                    additionalTiers: [remote], transformer: .jsonValue)
                return (LarderCache(storage: storage, on: eventLoop), remote)
            }
            let (first, firstRemote) = try instance("a", localCopyMaxAge: .seconds(60))
            let (second, secondRemote) = try instance("b", localCopyMaxAge: .zero)

            let forecast = Forecast(city: "Oslo", celsius: -3)
            try await first.set("forecast", to: forecast, expiresIn: .seconds(3_600))
            #expect(try await second.get("forecast", as: Forecast.self) == forecast)
            #expect(secondRemote.statistics.hits == 1, "the second instance read it from memcached")

            try await first.delete("forecast")
            #expect(try await second.get("forecast", as: Forecast.self) == nil)
            #expect(try await first.get("forecast", as: Forecast.self) == nil)
            await firstRemote.close()
            await secondRemote.close()
        }
    }
}
#endif
