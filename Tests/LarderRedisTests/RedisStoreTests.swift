#if Redis
import Foundation
import Larder
import LarderRemoteCore
@testable import LarderRedis
import LarderTestSupport
import Testing

/// `RedisStore` against a real redis-server: the promises of a shared tier.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisStoreTests {
    /// A store with a minute's deadline: these tests are about behaviour, not speed, and a test
    /// run that starts every suite at once can stall a busy 2-core machine for seconds.
    static func store(port: Int, namespace: String = "t:", tracking: Bool = false, maxItemSize: Int = 1 << 20,
                      batchSize: Int = 256, breakerThreshold: Int = 8) throws -> RedisStore {
        try RedisStore(configuration: .init(
            port: port, namespace: namespace, deadline: .seconds(300), breakerThreshold: breakerThreshold, maxItemSize: maxItemSize,
            isTrackingEnabled: tracking, batchSize: batchSize))
    }

    static func wireKey(_ key: String, namespace: String = "t:") throws -> String {
        let store = try RedisStore(configuration: .init(namespace: namespace, isTrackingEnabled: false))
        return String(decoding: store.resolve(key).key, as: UTF8.self)
    }

    // MARK: - Round trips

    @Test func aValueRoundTripsWithItsMetadataAndExpiry() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let payload = Data((0..<5_000).map { UInt8($0 % 7) })  // compressible: gzip path
            try await store.setValue(payload, forKey: "k\n with spaces ✓", expiry: .seconds(3_600), metadata: Data("meta".utf8), isCompressible: true)
            let entry = try #require(try await store.entry(forKey: "k\n with spaces ✓"))
            #expect(entry.data == payload)
            #expect(entry.metadata == Data("meta".utf8))
            let remaining = try #require(entry.expirationDate).timeIntervalSinceNow
            #expect(remaining > 3_000 && remaining <= 3_600)
            #expect(try await store.entry(forKey: "other") == nil)
            #expect(try await store.containsValue(forKey: "k\n with spaces ✓"))
            #expect(try await store.removeValue(forKey: "k\n with spaces ✓"))
            #expect(try await !store.removeValue(forKey: "k\n with spaces ✓"))
            #expect(try await store.entry(forKey: "k\n with spaces ✓") == nil)
            #expect(store.statistics.hits == 2 && store.statistics.writes == 1)  // entry, then containsValue
            await store.close()
        }
    }

    @Test func aLifetimeIsSetWithPXAndADateWithPXAT() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port)
            try await store.setValue(Data("a".utf8), forKey: "life", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            let lifeTTL = try #require(Int(try server.cli("PTTL", try Self.wireKey("life"))))
            #expect(lifeTTL > 3_000_000 && lifeTTL <= 3_600_000)
            let date = Date().addingTimeInterval(7_200)
            try await store.setValue(Data("b".utf8), forKey: "date", expiry: .date(date), metadata: nil, isCompressible: false)
            let at = try #require(Int64(try server.cli("PEXPIRETIME", try Self.wireKey("date"))))
            #expect(at == Int64((date.timeIntervalSince1970 * 1000).rounded(.up)))
            try await store.setValue(Data("c".utf8), forKey: "never", expiry: .never, metadata: nil, isCompressible: false)
            #expect(try server.cli("PTTL", try Self.wireKey("never")) == "-1")
            // An expiry already past removes the remote value instead of storing it.
            try await store.setValue(Data("d".utf8), forKey: "life", expiry: .seconds(-1), metadata: nil, isCompressible: false)
            #expect(try server.cli("EXISTS", try Self.wireKey("life")) == "0")
            await store.close()
        }
    }

    // MARK: - Never a wrong value

    @Test func bytesAnotherClientWroteAreAMissAndAreDeleted() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let wire = try Self.wireKey("k")
            _ = try server.cli("SET", wire, "not an envelope")
            #expect(try await store.entry(forKey: "k") == nil)
            #expect(store.statistics.rejectedValues == 1)
            #expect(try server.cli("EXISTS", wire) == "0")
            await store.close()
        }
    }

    @Test func anotherKeysEnvelopeCopiedUnderThisKeyIsAMiss() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port)
            try await store.setValue(Data("secret of a".utf8), forKey: "a", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try server.cli("COPY", try Self.wireKey("a"), try Self.wireKey("b")) == "1")
            #expect(try await store.entry(forKey: "b") == nil)
            #expect(try await store.entry(forKey: "a")?.data == Data("secret of a".utf8))
            #expect(store.statistics.rejectedValues == 1)
            await store.close()
        }
    }

    @Test func aValueLargerThanTheItemSizeStaysLocal() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port, maxItemSize: 1_024)
            let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [store], transformer: .data)
            try await storage.setValue(Data("small".utf8), forKey: "big", expiry: .seconds(3_600))
            #expect(try server.cli("EXISTS", try Self.wireKey("big")) == "1")
            let big = Data((0..<4_096).map { _ in UInt8.random(in: 0...255) })
            try await storage.setValue(big, forKey: "big", expiry: .seconds(3_600))
            // The older remote value did not outlive the write; the local copy serves reads.
            #expect(try server.cli("EXISTS", try Self.wireKey("big")) == "0")
            #expect(store.statistics.oversizedValues == 1)
            #expect(try await storage.value(forKey: "big") == big)
            await store.close()
        }
    }

    // MARK: - Batches

    @Test func aBatchReadUsesPipelinedMGETsAndReturnsOnlyPresentKeys() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port, batchSize: 64)
            for index in stride(from: 0, to: 300, by: 2) {
                try await store.setValue(Data("v\(index)".utf8), forKey: "k\(index)", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            _ = try server.cli("SET", try Self.wireKey("k1"), "garbage")
            let found = try await store.entries(forKeys: (0..<300).map { "k\($0)" })
            #expect(found.count == 150)
            for (key, entry) in found { #expect(entry.data == Data("v\(key.dropFirst())".utf8)) }
            #expect(store.statistics.rejectedValues == 1)
            // Through Storage: values(forKeys:) reaches the batch.
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            let values = try await storage.values(forKeys: ["k0", "k1", "k2", "k3"])
            #expect(values == ["k0": "v0", "k2": "v2"])
            await store.close()
        }
    }

    @Test func aBatchWriteKeepsEachValuesExpiryAndMetadataAndDropsOversizedOnes() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port, maxItemSize: 1_024)
            try await store.setValue(Data("old".utf8), forKey: "big", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            try await store.setValues([
                TierWrite(key: "a", data: Data("first".utf8), expiry: .seconds(3_600), metadata: Data("m-a".utf8)),
                TierWrite(key: "b", data: Data("b".utf8), expiry: .seconds(600), metadata: nil, isCompressible: false),
                TierWrite(key: "big", data: Data((0..<4_096).map { _ in UInt8.random(in: 0...255) }), expiry: .seconds(60)),
                TierWrite(key: "a", data: Data("last".utf8), expiry: .seconds(7_200), metadata: Data("m-a2".utf8)),
            ])
            let a = try #require(try await store.entry(forKey: "a"))
            #expect(a.data == Data("last".utf8) && a.metadata == Data("m-a2".utf8))
            #expect(try #require(a.expirationDate).timeIntervalSinceNow > 3_600)
            let b = try #require(try await store.entry(forKey: "b"))
            #expect(b.data == Data("b".utf8) && b.metadata == nil)
            #expect(try #require(b.expirationDate).timeIntervalSinceNow <= 600)
            // The oversized value removed the older remote one rather than leave it behind
            #expect(try await store.entry(forKey: "big") == nil)
            #expect(store.statistics.oversizedValues == 1)
            await store.close()
        }
    }

    @Test func aBulkLoadThroughStorageIsReadByAnotherInstanceWithoutLoading() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let keys = (0..<40).map { "user:\($0)" }
            let first = try Self.store(port: server.port)
            let loading = try Storage<String, String>(configuration: .init(), additionalTiers: [first], transformer: .string)
            let loaded = try await loading.values(forKeys: keys, expiry: .seconds(3_600)) { missing in
                Dictionary(uniqueKeysWithValues: missing.map { ($0, "name of \($0)") })
            }
            #expect(loaded.count == 40)
            let second = try Self.store(port: server.port)
            let reading = try Storage<String, String>(configuration: .init(), additionalTiers: [second], transformer: .string)
            let read = try await reading.values(forKeys: keys, expiry: .seconds(3_600)) { missing in
                Issue.record("loaded \(missing.count) keys the first instance had stored")
                return [:]
            }
            #expect(read == loaded)
            #expect(first.statistics.writes == 40)
            await first.close()
            await second.close()
        }
    }

    // MARK: - Pipelining

    /// 64 tasks share 2 pipelined connections, each writing and reading its own keys and
    /// batches: every reply reaches the caller that asked, never another key's value.
    @Test func concurrentCallersOnSharedConnectionsEachGetTheirOwnValues() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try Self.store(port: server.port)
            let wrong = Tally()
            let hits = Tally()
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<64 {
                    group.addTask {
                        for round in 0..<30 {
                            let key = "t\(task)-\(round % 5)"
                            let value = Data("\(key)#\(round)".utf8)
                            try? await store.setValue(value, forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
                            if let read = try? await store.entry(forKey: key) {
                                hits.add()
                                if read.data != value { wrong.add() }
                            }
                            if let batch = try? await store.entries(forKeys: [key, "t\(task)-missing"]) {
                                if batch.count != 1 || batch[key]?.data != value { wrong.add() }
                            }
                        }
                    }
                }
            }
            #expect(wrong.value == 0)
            #expect(hits.value == 64 * 30)
            await store.close()
        }
    }

    // MARK: - Failure is a miss

    @Test func aDeadServerIsAMissThroughStorageAndAnErrorUsedDirectly() async throws {
        let port = try RedisServer.freePort()
        let store = try RedisStore(configuration: .init(
            port: port, deadline: .seconds(300), breakerThreshold: 2, breakerCooldown: .seconds(3_600), isTrackingEnabled: false))
        let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
        #expect(try await storage.value(forKey: "k") == nil)
        try await storage.setValue("local", forKey: "k", expiry: .seconds(3_600))
        #expect(try await storage.value(forKey: "k") == "local")
        await #expect {
            _ = try await store.entry(forKey: "k")
        } throws: { error in
            (error as? StorageError)?.code == .io
        }
        // The breaker opened after two failures: calls now fail at once.
        #expect(store.statistics.breakerOpens == 1 && store.statistics.openBreakers == 1)
        #expect(store.statistics.breakerRejections >= 1)
        #expect(store.statistics.errors >= 3)
        await store.close()
    }

    @Test func aRestartedServerIsReachedAgain() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let store = try RedisStore(configuration: .init(
                port: server.port, deadline: .seconds(300), reconnectBackoff: (.milliseconds(1), .milliseconds(5)),
                breakerThreshold: 1_000, isTrackingEnabled: false))
            try await store.setValue(Data("1".utf8), forKey: "k", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            await server.kill()
            await #expect(throws: StorageError.self) { _ = try await store.entry(forKey: "k") }
            let restarted = try await server.restart()
            let reached = await eventually {
                (try? await store.setValue(Data("2".utf8), forKey: "k", expiry: .seconds(3_600), metadata: nil, isCompressible: false)) != nil
            }
            #expect(reached)
            #expect(try await store.entry(forKey: "k")?.data == Data("2".utf8))
            _ = restarted
            await store.close()
        }
    }

    // MARK: - removeAll

    @Test func removeAllUnlinksThisNamespaceOnly() async throws {
        try await withChildProcesses { scope in
            let server = try await RedisServer.start(in: scope)
            let mine = try Self.store(port: server.port, namespace: "mine:")
            let theirs = try Self.store(port: server.port, namespace: "theirs:")
            for index in 0..<2_500 {
                try await mine.setValue(Data("m".utf8), forKey: "k\(index)", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            try await theirs.setValue(Data("t".utf8), forKey: "k0", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            try await mine.removeAll()
            #expect(try server.cli("DBSIZE") == "1")
            #expect(try await theirs.entry(forKey: "k0")?.data == Data("t".utf8))
            await mine.close()
            await theirs.close()
        }
    }
}
#endif
