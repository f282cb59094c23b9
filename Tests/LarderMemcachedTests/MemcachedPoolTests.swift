#if Memcached
import LarderRemoteCore
import Foundation
import Larder
@testable import LarderMemcached
import LarderTestSupport
import NIOCore
import Synchronization
import Testing

/// Placement on libmemcached's weighted ketama ring, checked against libmemcached itself.
@Suite(.timeLimit(.minutes(10)))
struct KetamaRingTests {
    /// The wire keys of `count` cache keys under `namespace`, as the store sends them.
    static func wireKeys(_ count: Int, namespace: String = "larder:") throws -> [[UInt8]] {
        let remoteKey = try RemoteKey(namespace: namespace)
        return (0..<count).map { remoteKey.key(for: "key-\($0)") }
    }

    /// Builds `Tests/Tools/ketama-reference.c` against Debian's libmemcached-dev, or `nil`
    /// (outside CI) when the compiler or the library is missing.
    static func referenceTool() throws -> URL? {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tools/ketama-reference.c")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("ketama-reference-\(UUID().uuidString)")
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["cc", source.path, "-lmemcached", "-o", output.path]
        compiler.standardError = FileHandle.nullDevice
        try compiler.run()
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0 else {
            if MemcachedServer.isCI { throw TestFailure("cannot build ketama-reference.c: install libmemcached-dev") }
            return nil
        }
        return output
    }

    /// The server index libmemcached picks for each key.
    static func libmemcachedPlacement(tool: URL, servers: [MemcachedStore.Server], keys: [[UInt8]]) throws -> [Int] {
        let process = Process()
        process.executableURL = tool
        process.arguments = servers.map { "\($0.host):\($0.port):\($0.weight)" }
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var lines = Data()
        lines.reserveCapacity(keys.count * 80)
        for key in keys { lines.append(contentsOf: key); lines.append(0x0A) }
        let text = lines
        // Written from another thread: the tool answers as it reads, and a full pipe would block.
        let writer = Thread {
            input.fileHandleForWriting.write(text)
            try? input.fileHandleForWriting.close()
        }
        writer.start()
        let answer = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: answer, as: UTF8.self).split(separator: "\n").compactMap { Int($0) }
    }

    static let serverLists: [[MemcachedStore.Server]] = [
        [.init(host: "127.0.0.1", port: 11211)],
        [.init(host: "127.0.0.1", port: 11211), .init(host: "127.0.0.1", port: 11212), .init(host: "127.0.0.1", port: 11213)],
        [.init(host: "10.0.0.5"), .init(host: "10.0.0.6", weight: 2), .init(host: "10.0.0.7", weight: 3)],
        [.init(host: "cache-a.internal", port: 11311, weight: 5), .init(host: "cache-b.internal", port: 11211, weight: 1),
         .init(host: "cache-c.internal", port: 21211, weight: 0), .init(host: "192.168.7.1", port: 11211, weight: 7)],
        (0..<10).map { .init(host: "mc\($0).example.com", port: 11211 + $0, weight: 1 + $0 % 3) },
    ]

    @Test(arguments: 0..<serverLists.count)
    func placementAgreesWithLibmemcachedOnEveryKey(list: Int) throws {
        guard let tool = try Self.referenceTool() else {
            print("KetamaRingTests: libmemcached-dev or cc missing, placement not compared")
            return
        }
        defer { try? FileManager.default.removeItem(at: tool) }
        let servers = Self.serverLists[list]
        let keys = try Self.wireKeys(100_000, namespace: "ns\(list):")
        let expected = try Self.libmemcachedPlacement(tool: tool, servers: servers, keys: keys)
        #expect(expected.count == keys.count)
        let ring = KetamaRing(servers: servers.map { ($0.host, $0.port, $0.weight) })
        var disagreements = 0
        for (index, key) in keys.enumerated() where index < expected.count && ring.server(for: key) != expected[index] {
            disagreements += 1
        }
        #expect(disagreements == 0, "\(disagreements) of \(keys.count) keys placed differently from libmemcached")
    }

    @Test func addingAServerMovesAboutItsShareOfTheKeys() throws {
        let keys = try Self.wireKeys(100_000)
        for count in [2, 3, 5, 8] {
            let before = (0..<count).map { ("10.1.0.\($0)", 11211, 1) }
            let after = before + [("10.1.0.\(count)", 11211, 1)]
            let old = KetamaRing(servers: before)
            let new = KetamaRing(servers: after)
            var moved = 0
            var movedElsewhere = 0
            for key in keys {
                let from = old.server(for: key)
                let to = new.server(for: key)
                if from != to {
                    moved += 1
                    if to != count { movedElsewhere += 1 }
                }
            }
            let share = Double(moved) / Double(keys.count)
            let ideal = 1 / Double(count + 1)
            print("ketama: \(count) → \(count + 1) servers moved \(String(format: "%.3f", share)) of the keys (ideal \(String(format: "%.3f", ideal)))")
            #expect(movedElsewhere == 0, "a key moved between two old servers")
            #expect(abs(share - ideal) < ideal * 0.35)
        }
    }

    @Test func replicasAreDistinctServersStartingWithTheKeysOwn() throws {
        let ring = KetamaRing(servers: (0..<5).map { ("10.2.0.\($0)", 11211, 1) })
        for key in try Self.wireKeys(2_000) {
            let servers = ring.servers(for: key, count: 3)
            #expect(servers.count == 3 && Set(servers).count == 3)
            #expect(servers[0] == ring.server(for: key))
        }
        #expect(ring.servers(for: Array("k".utf8), count: 9).count == 5)
    }

    @Test func aBadServerListIsRefusedWithAClearError() {
        for servers: [MemcachedStore.Server] in [[], [.init(host: "a", port: 0)], [.init(host: "a", weight: -1)],
                                                 [.init(host: "a b")], [.init(host: "a"), .init(host: "a")]] {
            #expect(throws: StorageError.self) { try MemcachedStore(configuration: .init(servers: servers)) }
        }
        #expect(throws: StorageError.self) {
            try MemcachedStore(configuration: .init(servers: [.init(host: "a")], failover: .replicas(0)))
        }
        #expect(throws: StorageError.self) {
            try MemcachedStore(configuration: .init(servers: [.init(host: "a")], failover: .gutter([], maxTTL: .seconds(5))))
        }
    }
}

/// A pool of real memcached servers: a dead server costs only its own keys, failover, and no
/// stale value after a partition heals.
@Suite(.enabled(if: MemcachedServer.shouldRun), .serialized, .timeLimit(.minutes(10)))
struct MemcachedPoolTests {
    static func store(
        ports: [Int], failover: MemcachedStore.Failover = .none, namespace: String = "p:",
        deadline: Duration = .seconds(30)
    ) throws -> MemcachedStore {
        try MemcachedStore(configuration: .init(
            servers: ports.map { .init(host: "127.0.0.1", port: $0) }, failover: failover, namespace: namespace,
            deadline: deadline, reconnectBackoff: (.milliseconds(5), .milliseconds(50)),
            breakerThreshold: 2, breakerCooldown: .milliseconds(100), localCopyMaxAge: .zero))
    }

    static func value(_ key: String, _ generation: Int) -> Data { Data("\(key)#\(generation)".utf8) }

    /// The index in `ports` of the server that holds `key`.
    static func owner(of key: String, in store: MemcachedStore) -> Int {
        let wireKey = (try? RemoteKey(namespace: store.configuration.namespace))!.key(for: key)
        return KetamaRing(servers: store.configuration.servers.map { ($0.host, $0.port, $0.weight) }).server(for: wireKey)
    }

    @Test func keysSpreadOverTheServersAndADeadServerCostsOnlyItsOwnKeys() async throws {
        try await withChildProcesses { scope in
            var servers: [MemcachedServer] = []
            for _ in 0..<3 { servers.append(try await MemcachedServer.start(in: scope)) }
            let store = try Self.store(ports: servers.map(\.port))
            let keys = (0..<300).map { "key-\($0)" }
            for key in keys { try await store.setValue(Self.value(key, 1), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false) }
            // Each server holds exactly the keys the ring gives it (read straight off the server).
            let owners = keys.map { Self.owner(of: $0, in: store) }
            for (index, server) in servers.enumerated() {
                let single = try Self.store(ports: [server.port])
                var held = 0
                for key in keys where try await single.entry(forKey: key) != nil { held += 1 }
                #expect(held == owners.filter { $0 == index }.count)
                #expect(held > 50, "each of 3 servers holds about a third of 300 keys")
                await single.close()
            }
            await servers[1].kill()
            var hits = 0
            var wrong = 0
            var thrown = 0
            for key in keys {
                do {
                    if let entry = try await store.entry(forKey: key) {
                        hits += 1
                        if entry.data != Self.value(key, 1) { wrong += 1 }
                    }
                } catch {
                    thrown += 1
                    #expect(Self.owner(of: key, in: store) == 1, "only the dead server's keys fail")
                }
            }
            #expect(hits == owners.filter { $0 != 1 }.count, "every live server's key still hits")
            #expect(wrong == 0)
            // Through Storage, failure is a miss: nothing throws.
            let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [store], transformer: .data)
            for key in keys { _ = try await storage.value(forKey: key, tiers: .remote) }
            #expect(thrown > 0 && store.statistics.breakerOpens > 0)
            // The server comes back on its port: after the breaker's probe, its keys work again.
            servers[1] = try await servers[1].restart()
            let deadKey = try #require(keys.first { Self.owner(of: $0, in: store) == 1 })
            let end = ContinuousClock.now + .seconds(60)
            var rejoined = false
            while !rejoined, ContinuousClock.now < end {
                try? await store.setValue(Self.value(deadKey, 2), forKey: deadKey, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
                rejoined = (try? await store.entry(forKey: deadKey))?.data == Self.value(deadKey, 2)
                if !rejoined { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(rejoined, "the restarted server rejoins the pool")
            await store.close()
        }
    }

    @Test func replicasCostNoMissesWhenAServerDies() async throws {
        try await withChildProcesses { scope in
            var servers: [MemcachedServer] = []
            for _ in 0..<3 { servers.append(try await MemcachedServer.start(in: scope)) }
            let store = try Self.store(ports: servers.map(\.port), failover: .replicas(2))
            let keys = (0..<200).map { "key-\($0)" }
            for key in keys { try await store.setValue(Self.value(key, 1), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false) }
            await servers[0].kill()
            var hits = 0
            for key in keys where try await store.entry(forKey: key)?.data == Self.value(key, 1) { hits += 1 }
            #expect(hits == keys.count, "a replica answers for every key of the dead server")
            // Removals reach every replica: none resurfaces from the second copy.
            for key in keys.prefix(50) { try? await store.removeValue(forKey: key) }
            for key in keys.prefix(50) { #expect(try await store.entry(forKey: key) == nil) }
            await store.close()
        }
    }

    @Test func aGutterPoolTakesADeadServersKeysWithShortLifetimes() async throws {
        try await withChildProcesses { scope in
            var servers: [MemcachedServer] = []
            for _ in 0..<2 { servers.append(try await MemcachedServer.start(in: scope)) }
            let gutter = try await MemcachedServer.start(in: scope)
            let store = try Self.store(
                ports: servers.map(\.port), failover: .gutter([.init(host: "127.0.0.1", port: gutter.port)], maxTTL: .seconds(5)))
            await servers[0].kill()
            let keys = (0..<100).map { "key-\($0)" }.filter { Self.owner(of: $0, in: store) == 0 }
            #expect(!keys.isEmpty)
            for key in keys {
                try await store.setValue(Self.value(key, 1), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            }
            for key in keys { #expect(try await store.entry(forKey: key)?.data == Self.value(key, 1), "read from the gutter") }
            // In the gutter, each lives at most maxTTL (5 s), not the hour asked for.
            let gutterOnly = try Self.store(ports: [gutter.port])
            for key in keys {
                let entry = try #require(try await gutterOnly.entry(forKey: key))
                let lifetime = try #require(entry.expirationDate).timeIntervalSinceNow
                #expect(lifetime <= 5.5)
            }
            // A removal reaches the gutter too.
            try await store.removeValue(forKey: keys[0])
            #expect(try await gutterOnly.entry(forKey: keys[0]) == nil)
            await gutterOnly.close()
            await store.close()
        }
    }

    /// Instance A reaches every server through a proxy; B directly. A is cut off from one
    /// server while both write; after the heal, no read returns a value older than the key's
    /// last completed write.
    @Test func aHealedPartitionServesNoValueOlderThanTheLastWrite() async throws {
        try await withChildProcesses { scope in
            var servers: [MemcachedServer] = []
            for _ in 0..<3 { servers.append(try await MemcachedServer.start(in: scope)) }
            var proxies: [ChaosProxy] = []
            for server in servers { proxies.append(try await ChaosProxy(upstreamPort: server.port)) }
            // Both name the real servers (so both place every key alike); A connects through
            // the proxies.
            let proxyFor = Dictionary(uniqueKeysWithValues: zip(servers.map(\.port), proxies.map(\.port)))
            let storeA = try MemcachedStore(
                configuration: Self.store(ports: servers.map(\.port), deadline: .milliseconds(500)).configuration,
                tierID: .remote, connectingTo: { MemcachedStore.Server(host: $0.host, port: proxyFor[$0.port]!) })
            let storeB = try Self.store(ports: servers.map(\.port))
            let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [storeA], transformer: .data)
            let keys = (0..<240).map { "key-\($0)" }
            let owner = Dictionary(uniqueKeysWithValues: keys.map { ($0, Self.owner(of: $0, in: storeB)) })
            var latest: [String: Data?] = [:]
            for key in keys {
                try await storage.setValue(Self.value(key, 1), forKey: key, expiry: .seconds(3_600), tiers: .remote)
                latest[key] = Self.value(key, 1)
            }
            // Cut A off from server 0 and write a new generation from A.
            proxies[0].set(.reset)
            for key in keys {
                try await storage.setValue(Self.value(key, 2), forKey: key, expiry: .seconds(3_600), tiers: .remote)
                latest[key] = Self.value(key, 2)
            }
            let cutOff = keys.filter { owner[$0] == 0 }
            #expect(!cutOff.isEmpty)
            #expect(storeA.statistics.pendingRecoveryDeletes >= cutOff.count)
            // Meanwhile B overwrites a third of the keys and removes another third.
            for (index, key) in keys.enumerated() {
                switch index % 3 {
                case 0:
                    try await storeB.setValue(Self.value(key, 3), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
                    latest[key] = Self.value(key, 3)
                case 1:
                    try await storeB.removeValue(forKey: key)
                    latest[key] = .some(nil)
                default:
                    break
                }
            }
            // Heal, and measure how long until A owes no delete.
            let healed = ContinuousClock.now
            proxies[0].set(.pass)
            var recovery: Duration?
            let end = healed + .seconds(60)
            while ContinuousClock.now < end {
                // Traffic to the healed server lets its breaker's probe through.
                _ = try await storage.value(forKey: cutOff[0], tiers: .remote)
                if storeA.statistics.pendingRecoveryDeletes == 0 {
                    recovery = ContinuousClock.now - healed
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            let recovered = try #require(recovery, "A's owed deletes were sent")
            print("partition heal: \(cutOff.count) keys owed a delete, recovered in \(recovered)")
            // Every read, by either instance, is a miss or the last completed write.
            var stale = 0
            for key in keys {
                let allowed = latest[key]!
                for read in [try await storage.value(forKey: key, tiers: .remote), try await storeB.entry(forKey: key)?.data] {
                    if let read, read != allowed { stale += 1 }
                }
            }
            #expect(stale == 0, "\(stale) reads returned a value older than the key's last write")
            await storeA.close()
            await storeB.close()
            for proxy in proxies { await proxy.close() }
        }
    }

    @Test func aBatchReadSplitsByServerAndSurvivesADeadOne() async throws {
        try await withChildProcesses { scope in
            var servers: [MemcachedServer] = []
            for _ in 0..<3 { servers.append(try await MemcachedServer.start(in: scope)) }
            let store = try Self.store(ports: servers.map(\.port))
            let keys = (0..<150).map { "key-\($0)" }
            for key in keys { try await store.setValue(Self.value(key, 1), forKey: key, expiry: .seconds(3_600), metadata: nil, isCompressible: false) }
            let all = try await store.entries(forKeys: keys + ["absent"])
            #expect(all.count == keys.count)
            #expect(keys.allSatisfy { all[$0]?.data == Self.value($0, 1) })
            await servers[2].kill()
            let some = try await store.entries(forKeys: keys)
            let live = keys.filter { Self.owner(of: $0, in: store) != 2 }
            #expect(some.count == live.count)
            #expect(live.allSatisfy { some[$0]?.data == Self.value($0, 1) })
            await store.close()
        }
    }
}
#endif
