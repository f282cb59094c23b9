#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A server that stops answering (SIGSTOP: connections stay open, nothing comes back): reads
/// are misses once their deadline passes, the tracking heartbeat notices and every local copy
/// goes, and all recovers with the right values once the server answers again.
///
/// The deadlines are short on purpose (they are what is tested), so nothing here bounds how long
/// anything takes or assumes a read made before the stall succeeded on the first try: a loaded
/// machine only makes the test slower.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisFaultTests {
    @Test func aStalledServerIsAMissAfterTheDeadlineAndItsCopiesAreDropped() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let writer = try RedisStore(configuration: .init(port: server.port, namespace: "f:", deadline: .seconds(300), isTrackingEnabled: false))
            for index in 0..<10 {
                try await writer.setValue(Data("v\(index)".utf8), forKey: "k\(index)", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            let store = try RedisStore(configuration: .init(
                port: server.port, namespace: "f:", deadline: .milliseconds(300), reconnectBackoff: (.milliseconds(5), .milliseconds(50)),
                breakerThreshold: 1_000, localCopyMaxAge: .seconds(3_600), trackingHeartbeat: .milliseconds(100)))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            // Every copy in memory while tracking is live (a read that timed out is retried).
            let filled = await eventually {
                for index in 0..<10 where storage.memory.value(forKey: "k\(index)") == nil {
                    let value = try? await storage.entry(forKey: "k\(index)")
                    #expect(value == nil || value?.value == "v\(index)")
                }
                return storage.memory.totalCount == 10
            }
            #expect(filled)

            server.process.send(SIGSTOP)
            // The tracking connection stays open but silent: its heartbeat times out, every copy
            // goes, and none is made while it is down.
            #expect(await eventually { storage.memory.totalCount == 0 }, "the copies outlived a silent tracking connection")
            #expect(await eventually { !store.isTrackingLive })
            // Reads are misses, never thrown, never another key's value.
            for index in 0..<3 { #expect(try await storage.value(forKey: "k\(index)") == nil) }
            #expect(store.statistics.timeouts >= 1)
            #expect(storage.memory.totalCount == 0)

            server.process.send(SIGCONT)
            #expect(await eventually { (try? await store.entry(forKey: "k3"))?.data == Data("v3".utf8) }, "reads recover")
            #expect(await eventually { store.isTrackingLive }, "tracking resumes")
            for index in 0..<10 {
                let value = try await storage.value(forKey: "k\(index)")
                #expect(value == nil || value == "v\(index)")
            }
            await store.close()
            await writer.close()
        }
    }
}
#endif
