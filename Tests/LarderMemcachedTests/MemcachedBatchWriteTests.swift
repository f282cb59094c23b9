#if Memcached
import LarderRemoteCore
import Foundation
import Larder
@testable import LarderMemcached
import LarderTestSupport
import NIOCore
import Synchronization
import Testing

/// `MemcachedStore.setValues(_:)` against real memcached servers: every value as one write
/// stores it, one quiet batch per server, and a failed server never leaves an older value to read.
@Suite(.enabled(if: MemcachedServer.shouldRun), .timeLimit(.minutes(10)))
struct MemcachedBatchWriteTests {
    /// Records each command or batch a store sends (name, server, batch size).
    final class CommandLog: OperationObserver {
        private let recorded = Mutex<[ObservedOperation]>([])

        var operations: [ObservedOperation] { recorded.withLock { $0 } }

        func clear() { recorded.withLock { $0.removeAll() } }

        nonisolated(nonsending) func observe<Result: Sendable>(
            _ operation: ObservedOperation, outcome: @Sendable (Result) -> ObservedOperation.Outcome,
            _ body: nonisolated(nonsending) @Sendable () async throws -> Result
        ) async throws -> Result {
            recorded.withLock { $0.append(operation) }
            return try await body()
        }
    }

    static func configuration(ports: [Int], observer: CommandLog? = nil) -> MemcachedStore.Configuration {
        var configuration = MemcachedStore.Configuration(
            servers: ports.map { .init(host: "127.0.0.1", port: $0) }, namespace: "bw:", deadline: .seconds(300),
            reconnectBackoff: (.milliseconds(5), .milliseconds(50)), breakerThreshold: 2, breakerCooldown: .milliseconds(100),
            localCopyMaxAge: .zero)
        configuration.observer = observer
        return configuration
    }

    /// Assorted bytes for key number `index`: sizes from 0 to about 3 KB, every fourth one a
    /// compressible run of 600 bytes and more.
    static func payload(_ index: Int, generation: Int = 1) -> Data {
        if index % 4 == 0 { return Data(repeating: UInt8(truncatingIfNeeded: index + generation), count: 600 + index) }
        var generator = SplitMix64(seed: UInt64(index * 1_000 + generation))
        return Data((0..<((index * 37) % 3_000)).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
    }

    static let expiries: [Expiry?] = [.seconds(600), nil, .seconds(86_400 * 40), .never]

    /// A counter of the server's `stats` (read off the server itself).
    static func stat(_ name: String, port: Int) throws -> Int {
        let reply = try rawExchange(port: port, Array("stats\r\n".utf8)) { $0.suffix(5).elementsEqual("END\r\n".utf8) }
        for line in String(decoding: reply, as: UTF8.self).split(separator: "\r\n") {
            let words = line.split(separator: " ")
            if words.count == 3, words[1] == name, let value = Int(words[2]) { return value }
        }
        throw TestFailure("no \(name) in the stats of port \(port)")
    }

    // MARK: - Every write lands as setValue would land it

    @Test func aBatchStoresEveryValueMetadataAndExpiryInOneRoundTripPerServer() async throws {
        try await withChildProcesses { scope in
            // Given a pool of 3 servers, older values for three keys, one of them invalidated
            let servers = try await MemcachedServer.start(3, in: scope)
            let log = CommandLog()
            let store = try MemcachedStore(configuration: Self.configuration(ports: servers.map(\.port), observer: log))
            for key in ["oversized", "expired", "key-7"] {
                try await store.setValue(Data("old".utf8), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            #expect(try await store.invalidate(forKey: "key-7"))
            let setsBefore = try servers.map { try Self.stat("cmd_set", port: $0.port) }
            log.clear()

            // When one batch writes 120 keys (one of them twice), an oversized value and an expired one
            var writes = (0..<120).map { index in
                TierWrite(key: "key-\(index)", data: Self.payload(index), expiry: Self.expiries[index % 4],
                          metadata: index % 3 == 0 ? nil : Data("meta-\(index)".utf8), isCompressible: index % 2 == 0)
            }
            writes.insert(TierWrite(key: "key-5", data: Data("earlier".utf8), metadata: Data("earlier".utf8)), at: 0)
            var generator = SplitMix64(seed: 9)
            let big = Data((0..<(1 << 20) + 1).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            writes.append(TierWrite(key: "oversized", data: big, isCompressible: false))
            writes.append(TierWrite(key: "expired", data: Data("new".utf8), expiry: .date(Date(timeIntervalSinceNow: -60))))
            let start = Date()
            // (Through the protocol, as Storage calls it: the batch, not CacheTier's default.)
            let tier: any CacheTier = store
            try await tier.setValues(writes)
            let end = Date()
            let operations = log.operations

            // Then each server got exactly one batch holding exactly its own keys: one flush each
            let keys = (0..<120).map { "key-\($0)" } + ["oversized", "expired"]
            let owners = keys.map { MemcachedPoolTests.owner(of: $0, in: store) }
            #expect(Set(owners) == [0, 1, 2], "the keys spread over every server")
            for (index, server) in servers.enumerated() {
                let sent = operations.filter { $0.serverPort == server.port }
                #expect(sent.count == 1, "server \(index): one batch, not one round trip per key: \(sent.map(\.name))")
                #expect(sent.first?.batchSize == owners.count(where: { $0 == index }))
                #expect(sent.first?.name.hasPrefix("BATCH") == true)
                // Each of its values was set exactly once (the key given twice, once).
                let stored = keys.prefix(120).indices.count(where: { owners[$0] == index })
                #expect(try Self.stat("cmd_set", port: server.port) - setsBefore[index] == stored)
            }
            #expect(operations.count == 3)

            // The invalidated key's new value is fresh: a leased read is a plain hit, not a lease.
            guard case .hit(let fresh) = try await store.leasedEntry(forKey: "key-7", leaseDuration: .seconds(30)) else {
                Issue.record("key-7 is still invalidated after the batch wrote it")
                return
            }
            #expect(fresh.data == Self.payload(7))
            // Every value, its metadata and its expiry read back exactly.
            for index in 0..<120 {
                let entry = try #require(try await store.entry(forKey: "key-\(index)"), "key-\(index)")
                #expect(entry.data == Self.payload(index), "key-\(index)")
                #expect(entry.metadata == (index % 3 == 0 ? nil : Data("meta-\(index)".utf8)), "key-\(index)")
                let expiry = Self.expiries[index % 4] ?? .seconds(3_600)
                if let earliest = expiry.expirationDate(from: start), let latest = expiry.expirationDate(from: end) {
                    let expiration = try #require(entry.expirationDate, "key-\(index)")
                    // memcached keeps whole seconds: a read's expiry may end a second earlier.
                    #expect(expiration >= earliest.addingTimeInterval(-2) && expiration <= latest.addingTimeInterval(1), "key-\(index)")
                } else {
                    #expect(entry.expirationDate == nil, "key-\(index) never expires")
                }
            }
            // The oversized and the expired values removed the older remote copies.
            #expect(try await store.entry(forKey: "oversized") == nil)
            #expect(try await store.entry(forKey: "expired") == nil)
            let statistics = store.statistics
            #expect(statistics.writes == 3 + 120)
            #expect(statistics.oversizedValues == 1)
            #expect(statistics.batchWrites == 1)
            #expect(statistics.errors == 0)
            await store.close()
        }
    }

    @Test func anEmptyBatchSendsNothing() async throws {
        // Given a store whose only server is not there
        let log = CommandLog()
        let store = try MemcachedStore(configuration: Self.configuration(ports: [try MemcachedServer.freePort()], observer: log))
        // When it writes an empty batch, then a batch of one
        try await store.setValues([])
        // Then the empty one reached no server; the other tried and failed
        #expect(log.operations.isEmpty)
        #expect(store.statistics.errors == 0 && store.statistics.batchWrites == 0)
        await #expect(throws: StorageError.self) {
            try await store.setValues([TierWrite(key: "a", data: Data("1".utf8))])
        }
        #expect(log.operations.count == 1)
        #expect(store.statistics.errors == 1)
        await store.close()
    }

    // MARK: - Failures

    /// Server 0 is reached through a proxy that cuts it off while a batch writes a new
    /// generation: the call throws, the other servers' keys hold the new values, and the cut-off
    /// keys read as misses (never their older values), before and after the heal.
    @Test func aFailedServerMakesTheBatchThrowAndNoKeyReadsItsOlderValue() async throws {
        try await withChildProcesses { scope in
            let servers = try await MemcachedServer.start(3, in: scope)
            let proxy = try await ChaosProxy(upstreamPort: servers[0].port)
            let store = try MemcachedStore(
                configuration: Self.configuration(ports: servers.map(\.port)), tierID: .remote,
                connectingTo: { $0.port == servers[0].port ? MemcachedStore.Server(host: $0.host, port: proxy.port) : $0 })
            let keys = (0..<90).map { "key-\($0)" }
            func generation(_ number: Int) -> [TierWrite] {
                keys.map { TierWrite(key: $0, data: MemcachedPoolTests.value($0, number), expiry: .seconds(3_600), isCompressible: false) }
            }
            try await store.setValues(generation(1))
            let cutOff = keys.filter { MemcachedPoolTests.owner(of: $0, in: store) == 0 }
            #expect(!cutOff.isEmpty && cutOff.count < keys.count)

            // When server 0 is cut off during the next generation's batch
            proxy.set(.reset)
            let error = await #expect(throws: StorageError.self) { try await store.setValues(generation(2)) }
            #expect(error?.code == .io)

            // Then the live servers stored their keys, and each cut-off key counted one error
            let statistics = store.statistics
            #expect(statistics.writes == keys.count + keys.count - cutOff.count)
            #expect(statistics.errors == cutOff.count)
            #expect(statistics.pendingRecoveryDeletes == cutOff.count)
            for key in keys where !cutOff.contains(key) {
                #expect(try await store.entry(forKey: key)?.data == MemcachedPoolTests.value(key, 2), "\(key)")
            }
            for key in cutOff {
                let read = try? await store.entry(forKey: key)
                #expect(read == nil, "\(key) is a miss while its server is cut off, not generation \(read.map { String(decoding: $0.data, as: UTF8.self) } ?? "")")
            }

            // After the heal, the owed deletes reach server 0: its older values are gone.
            proxy.set(.pass)
            let deadline = ContinuousClock.now + .seconds(300)
            while store.statistics.pendingRecoveryDeletes > 0, ContinuousClock.now < deadline {
                _ = try? await store.entry(forKey: cutOff[0])
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(store.statistics.pendingRecoveryDeletes == 0)
            let direct = try MemcachedStore(configuration: Self.configuration(ports: [servers[0].port]))
            for key in cutOff {
                #expect(try await store.entry(forKey: key) == nil, "\(key)")
                #expect(try await direct.entry(forKey: key)?.data != MemcachedPoolTests.value(key, 1), "\(key) still holds generation 1")
            }
            await direct.close()
            await store.close()
            await proxy.close()
        }
    }

    /// A server whose item size limit is smaller than the store's refuses one value of the
    /// batch (`SERVER_ERROR object too large`): the refusal is detected and counted, the call
    /// throws, and no key of that server reads its older value.
    @Test func aValueTheServerRefusesIsCountedAndLeavesNoOlderValue() async throws {
        try await withChildProcesses { scope in
            let server = try await MemcachedServer.start(in: scope, arguments: ["-I", "2k", "-o", "slab_chunk_max=1024"])
            let store = try MemcachedStore(configuration: Self.configuration(ports: [server.port]))
            let keys = (0..<6).map { "key-\($0)" }
            for key in keys {
                try await store.setValue(MemcachedPoolTests.value(key, 1), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            var generator = SplitMix64(seed: 3)
            let tooLarge = Data((0..<4_096).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            var writes = keys.map { TierWrite(key: $0, data: MemcachedPoolTests.value($0, 2), isCompressible: false) }
            // key-3's last write is the one the server refuses.
            writes.append(TierWrite(key: "key-3", data: tooLarge, isCompressible: false))

            await #expect(throws: StorageError.self) { try await store.setValues(writes) }
            #expect(store.statistics.errors == keys.count, "every key of the refused batch is counted")
            for key in keys {
                let read = try? await store.entry(forKey: key)
                #expect(read == nil || read?.data == MemcachedPoolTests.value(key, 2), "\(key) never reads generation 1")
            }
            let deadline = ContinuousClock.now + .seconds(300)
            while store.statistics.pendingRecoveryDeletes > 0, ContinuousClock.now < deadline {
                _ = try? await store.entry(forKey: keys[0])
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(store.statistics.pendingRecoveryDeletes == 0)
            for key in keys {
                let read = try await store.entry(forKey: key)
                #expect(read == nil || (key != "key-3" && read?.data == MemcachedPoolTests.value(key, 2)), "\(key) never reads an older value")
            }
            await store.close()
        }
    }

    @Test func aGutterPoolTakesTheBatchOfADeadServerWithCappedLifetimes() async throws {
        try await withChildProcesses { scope in
            // Given 2 servers and a gutter pool with a 300 s cap, server 0 dead
            let servers = try await MemcachedServer.start(2, in: scope)
            let gutter = try await MemcachedServer.start(in: scope)
            var configuration = Self.configuration(ports: servers.map(\.port))
            configuration.failover = .gutter([.init(host: "127.0.0.1", port: gutter.port)], maxTTL: .seconds(300))
            let store = try MemcachedStore(configuration: configuration)
            await servers[0].kill()
            let keys = (0..<60).map { "key-\($0)" }
            let dead = keys.filter { MemcachedPoolTests.owner(of: $0, in: store) == 0 }
            #expect(!dead.isEmpty && dead.count < keys.count)

            // When a batch writes every key for an hour
            try await store.setValues(keys.map {
                TierWrite(key: $0, data: MemcachedPoolTests.value($0, 1), expiry: .seconds(3_600), isCompressible: false)
            })

            // Then every key reads back; the dead server's keys live in the gutter at most 300 s
            for key in keys {
                #expect(try await store.entry(forKey: key)?.data == MemcachedPoolTests.value(key, 1), "\(key)")
            }
            let gutterOnly = try MemcachedStore(configuration: Self.configuration(ports: [gutter.port]))
            for key in dead {
                let entry = try #require(try await gutterOnly.entry(forKey: key), "\(key) is in the gutter")
                #expect(try #require(entry.expirationDate).timeIntervalSinceNow <= 301, "\(key)")
            }
            // A batch's removal (an already-expired write) reaches the gutter too.
            try await store.setValues([TierWrite(key: dead[0], data: Data(), expiry: .date(Date(timeIntervalSinceNow: -60)))])
            #expect(try await gutterOnly.entry(forKey: dead[0]) == nil)
            #expect(try await store.entry(forKey: dead[0]) == nil)
            await gutterOnly.close()
            await store.close()
        }
    }

    @Test func replicasTakeTheBatchSoADeadServerCostsNoMisses() async throws {
        try await withChildProcesses { scope in
            let servers = try await MemcachedServer.start(3, in: scope)
            var configuration = Self.configuration(ports: servers.map(\.port))
            configuration.failover = .replicas(2)
            let store = try MemcachedStore(configuration: configuration)
            let keys = (0..<90).map { "key-\($0)" }
            try await store.setValues(keys.map { TierWrite(key: $0, data: MemcachedPoolTests.value($0, 1), isCompressible: false) })
            await servers[0].kill()
            for key in keys {
                #expect(try await store.entry(forKey: key)?.data == MemcachedPoolTests.value(key, 1), "\(key): a replica answers")
            }
            // A batch that loses one replica of each of its keys still stores each key once.
            try await store.setValues(keys.map { TierWrite(key: $0, data: MemcachedPoolTests.value($0, 2), isCompressible: false) })
            for key in keys {
                #expect(try await store.entry(forKey: key)?.data == MemcachedPoolTests.value(key, 2), "\(key)")
            }
            await store.close()
        }
    }
}
#endif
