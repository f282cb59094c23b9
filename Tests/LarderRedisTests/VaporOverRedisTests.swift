#if Redis && Vapor
import Foundation
import Larder
import LarderRedis
import LarderTestSupport
import LarderVapor
import Testing
import Vapor

/// Both traits on: Larder as Vapor's cache over a Redis tier, registered in one line. Two
/// applications share one server; a write by one drops the other's memory copy through a pushed
/// invalidation (with an hour-long local copy, only tracking can make the second see it), and
/// shutting an application down closes its Redis tier.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct VaporOverRedisTests {
    struct Forecast: Codable, Equatable, Sendable {
        var city: String
        var celsius: Int
    }

    @Test func twoApplicationsShareValuesAndAWriteDropsTheOthersCopy() async throws {
        let folder = try TemporaryDirectory("vapor-redis")
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            func application(_ name: String) async throws -> (Application, RedisStore) {
                let redis = try await RedisStore.connect(configuration: .init(
                    port: server.port, namespace: "vapor:", deadline: .seconds(300), localCopyMaxAge: .seconds(3_600)))
                let app = try await Application.make(.testing)
                // The one line.
                try app.caches.use(.larder(directory: folder.url.appendingPathComponent(name), sharedTier: redis))
                return (app, redis)
            }
            let (first, firstRedis) = try await application("a")
            let (second, secondRedis) = try await application("b")
            #expect(await eventually { firstRedis.isTrackingLive && secondRedis.isTrackingLive })

            // Given a value one application cached, the other reads it from Redis (and keeps a copy)
            try await first.cache.set("forecast", to: Forecast(city: "Oslo", celsius: -3), expiresIn: .hours(1))
            #expect(try await second.cache.get("forecast", as: Forecast.self) == Forecast(city: "Oslo", celsius: -3))
            #expect(secondRedis.statistics.hits == 1)

            // When the first overwrites and then deletes it, the second's copy goes each time
            try await first.cache.set("forecast", to: Forecast(city: "Oslo", celsius: 2), expiresIn: .hours(1))
            #expect(await eventually {
                (try? await second.cache.get("forecast", as: Forecast.self)) == Forecast(city: "Oslo", celsius: 2)
            })
            try await first.cache.delete("forecast")
            #expect(await eventually { (try? await second.cache.get("forecast", as: Forecast.self)) == nil })
            #expect(secondRedis.statistics.invalidationsReceived >= 2)

            // Then shutting an application down closes its Redis tier too
            try await first.asyncShutdown()
            try await second.asyncShutdown()
            await #expect {
                _ = try await firstRedis.entry(forKey: "forecast")
            } throws: { error in
                "\(error)".contains("closed")
            }
        }
    }
}
#endif
