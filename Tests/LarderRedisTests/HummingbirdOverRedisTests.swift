#if Redis && Hummingbird
import Foundation
import Larder
import LarderHummingbird
import LarderRedis
import LarderTestSupport
import Testing

/// Both traits on: Larder as Hummingbird's persist driver over a Redis tier, in one line. Two
/// app instances share one server; a write by one reaches the other's memory tier as a pushed
/// invalidation (with an hour-long local copy, only tracking can make the second see it).
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct HummingbirdOverRedisTests {
    struct Session: Codable, Equatable, Sendable {
        var user: String
        var visits: Int
    }

    @Test func twoInstancesShareValuesAndAWriteDropsTheOthersCopy() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            func instance() async throws -> (LarderPersistDriver, RedisStore) {
                let redis = try await RedisStore.connect(configuration: .init(
                    port: server.port, namespace: "hb:", deadline: .seconds(300), localCopyMaxAge: .seconds(3_600)))
                // The one line: the persist driver over a storage whose shared tier is Redis.
                let driver = LarderPersistDriver(storage: try Storage(configuration: .init(), additionalTiers: [redis], transformer: .jsonValue))
                return (driver, redis)
            }
            let (first, firstRedis) = try await instance()
            let (second, secondRedis) = try await instance()
            try await first.set(key: "session", value: Session(user: "ann", visits: 1), expires: .seconds(3_600))
            #expect(try await second.get(key: "session", as: Session.self) == Session(user: "ann", visits: 1))
            try await first.set(key: "session", value: Session(user: "ann", visits: 2), expires: .seconds(3_600))
            #expect(await eventually { (try? await second.get(key: "session", as: Session.self)) == Session(user: "ann", visits: 2) })
            try await first.remove(key: "session")
            #expect(await eventually { (try? await second.get(key: "session", as: Session.self)) == nil })
            #expect(secondRedis.statistics.invalidationsReceived >= 2)
            await firstRedis.close()
            await secondRedis.close()
        }
    }
}
#endif
