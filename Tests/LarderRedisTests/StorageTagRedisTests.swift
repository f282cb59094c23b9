#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import Synchronization
import Testing

/// Tags and `removeAll()` through a real redis-server: a tag's removal time kept in Redis makes
/// the values written with it before misses for every instance.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct StorageTagRedisTests {
    final class LockedClock: Sendable {
        private let current = Mutex(Date())
        var closure: @Sendable () -> Date { { self.current.withLock { $0 } } }
        func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    let clock = LockedClock()

    func makeStorage(port: Int) throws -> (Storage<String, String>, RedisStore) {
        // No local copies: every read below memory asks the server, which is what is tested.
        let store = try RedisStore(configuration: .init(port: port, namespace: "tags:", deadline: .seconds(300), localCopyMaxAge: .zero))
        var configuration = Storage<String, String>.Configuration()
        configuration.now = clock.closure
        return (try Storage(configuration: configuration, additionalTiers: [store], transformer: .string), store)
    }

    @Test func aTagRemovedByOneInstanceMakesItsValuesMissesForTheOthers() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let (a, storeA) = try makeStorage(port: server.port)
            let (b, storeB) = try makeStorage(port: server.port)
            // Given tagged values written by A, read by B
            try await a.setValue("one", forKey: "k1", expiry: .seconds(3_600), tags: ["t"])
            try await a.setValue("two", forKey: "k2", expiry: .seconds(3_600), tags: ["u"])
            #expect(try await b.value(forKey: "k1") == "one")
            clock.advance(by: 1)
            // When A removes the tag
            try await a.removeValues(taggedWith: "t")
            // Then A misses at once and B once it reads the tag's time again; the other value stays
            #expect(try await a.value(forKey: "k1") == nil)
            clock.advance(by: 2)
            #expect(try await b.value(forKey: "k1") == nil)
            #expect(try await b.value(forKey: "k2") == "two")
            // And after a clear, nothing written before it is served
            clock.advance(by: 1)
            try await b.removeAll()
            clock.advance(by: 2)
            #expect(try await a.value(forKey: "k2") == nil)
            try await a.setValue("three", forKey: "k3", expiry: .seconds(3_600))
            #expect(try await b.value(forKey: "k3") == "three")
            await storeA.close()
            await storeB.close()
        }
    }
}
#endif
