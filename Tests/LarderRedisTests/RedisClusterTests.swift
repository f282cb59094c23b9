#if Redis
import Foundation
import Larder
@testable import LarderRedis
import LarderTestSupport
import NIOCore
import NIOPosix
import Testing

/// Redis Cluster placement and replies without a server: the CRC16 of the specification, hash
/// tags, `CLUSTER SLOTS` and the redirections.
@Suite struct HashSlotTests {
    @Test func theChecksumIsTheSpecificationsCRC16() {
        // The cluster specification's test vector.
        #expect(HashSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(HashSlot.crc16([]) == 0)
    }

    @Test(arguments: [
        ("{user1000}.following", "user1000"), ("foo{}{bar}", "foo{}{bar}"), ("foo{{bar}}zap", "{bar"),
        ("foo{bar}{zap}", "bar"), ("no tag", "no tag"), ("{", "{"), ("}{", "}{"), ("a{b}", "b"),
    ])
    func aHashTagIsTheFirstNonEmptyBracedPart(key: String, hashed: String) {
        #expect(String(decoding: HashSlot.hashedPart(of: Array(key.utf8)), as: UTF8.self) == hashed)
        #expect(HashSlot.of(Array(key.utf8)) == HashSlot.of(Array(hashed.utf8)))
    }

    @Test func aKeysLockAndStaleCopyShareItsSlot() throws {
        let store = try RedisStore(configuration: .init(namespace: "c:", isTrackingEnabled: false))
        for key in ["a", "b", "k\n with spaces ✓", "{braces}"] {
            let resolved = store.resolve(key)
            #expect(HashSlot.of(resolved.lock) == HashSlot.of(resolved.key))
            #expect(HashSlot.of(resolved.stale) == HashSlot.of(resolved.key))
        }
    }

    @Test func theSlotMapIsReadFromClusterSlots() throws {
        func node(_ host: String, _ port: Int64) -> RESPValue { .array([.bulkString(ByteBuffer(string: host)), .integer(port), .bulkString(ByteBuffer(string: "id"))]) }
        let reply = RESPValue.array([
            .array([.integer(0), .integer(5_460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)]),
            .array([.integer(5_461), .integer(10_922), node("", 7001)]),
            .array([.integer(10_923), .integer(16_383), node("10.0.0.3", 7002)]),
        ])
        let topology = try ClusterTopology.parse(slotsReply: reply, askedHost: "10.0.0.9")
        #expect(topology.primaries == [.init(host: "10.0.0.1", port: 7000), .init(host: "10.0.0.9", port: 7001), .init(host: "10.0.0.3", port: 7002)])
        #expect(topology.nodes.contains(.init(host: "10.0.0.4", port: 7003)))
        #expect(topology.primary(forSlot: 0)?.port == 7000)
        #expect(topology.primary(forSlot: 5_461)?.port == 7001)
        #expect(topology.primary(forSlot: 16_383)?.port == 7002)
        #expect(topology.coversEverySlot)
        // A reply of another shape is a clear error, never a trap.
        #expect(throws: RedisError.self) { try ClusterTopology.parse(slotsReply: .array([.array([.integer(9), .integer(3), node("h", 1)])]), askedHost: "h") }
        #expect(throws: RedisError.self) { try ClusterTopology.parse(slotsReply: .array([.array([.integer(0), .integer(16_384), node("h", 1)])]), askedHost: "h") }
        #expect(throws: RedisError.self) { try ClusterTopology.parse(slotsReply: .simpleString("OK"), askedHost: "h") }
    }

    @Test func redirectionsAreReadFromErrorReplies() {
        #expect(ClusterRedirect(.error("MOVED 3999 127.0.0.1:6381"), askedHost: "x") == .moved(slot: 3_999, to: .init(host: "127.0.0.1", port: 6_381)))
        #expect(ClusterRedirect(.error("ASK 3999 :6381"), askedHost: "10.0.0.2") == .ask(slot: 3_999, to: .init(host: "10.0.0.2", port: 6_381)))
        #expect(ClusterRedirect(.error("MOVED 1 ::1:6381"), askedHost: "x") == .moved(slot: 1, to: .init(host: "::1", port: 6_381)))
        #expect(ClusterRedirect(.error("TRYAGAIN Multiple keys request during rehashing of slot"), askedHost: "x") == .tryAgain)
        #expect(ClusterRedirect(.error("MOVED 16384 h:1"), askedHost: "x") == nil)
        #expect(ClusterRedirect(.error("MOVED x h:1"), askedHost: "x") == nil)
        #expect(ClusterRedirect(.error("ERR wrong"), askedHost: "x") == nil)
        #expect(ClusterRedirect(.simpleString("MOVED 1 h:1"), askedHost: "x") == nil)
    }
}

/// `RedisStore` on a real Redis Cluster of three primaries and three replicas started by each
/// test: placement, redirections, batches, leases, tracking per primary, and a primary killed
/// mid-load.
@Suite(.enabled(if: RedisServer.shouldRun), .timeLimit(.minutes(10)))
struct RedisClusterTests {
    static func configuration(_ cluster: RedisTestCluster, namespace: String = "c:", tracking: Bool = false) -> RedisStore.Configuration {
        var configuration = RedisStore.Configuration(clusterSeeds: cluster.seeds, namespace: namespace)
        configuration.deadline = .seconds(300)
        configuration.isTrackingEnabled = tracking
        configuration.localCopyMaxAge = .seconds(3_600)
        configuration.reconnectBackoff = (.milliseconds(5), .milliseconds(50))
        return configuration
    }

    /// A cache key whose wire key lies in `slot`.
    static func key(inSlot slot: Int, of store: RedisStore, prefix: String) -> String {
        var index = 0
        while HashSlot.of(store.resolve("\(prefix)\(index)").key) != slot { index += 1 }
        return "\(prefix)\(index)"
    }

    @Test func theSlotOfEveryKeyIsTheServers() async throws {
        try await withChildProcesses { scope in
            // One node with cluster support answers CLUSTER KEYSLOT (no slots needed).
            let directory = try TemporaryDirectory("larder-redis-keyslot")
            let server = try await RedisServer.start(in: scope, arguments: [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--dir", directory.url.path])
            let store = try RedisStore(configuration: .init(namespace: "c:", isTrackingEnabled: false))
            var keys: [[UInt8]] = ["", "{", "}", "{}", "{}{a}", "a{b", "é{ü}", "\u{0}{\u{1}}"].map { Array($0.utf8) }
            keys += (0..<300).map { store.resolve("key \($0)").key }
            keys += (0..<200).map { index in (0..<(index % 40)).map { _ in UInt8.random(in: 0...255) } }
            let pool = RedisConnectionPool(
                settings: .init(host: "127.0.0.1", port: server.port, connectionCount: 1, deadline: .seconds(300),
                                reconnectBackoff: (.milliseconds(5), .milliseconds(50)), breakerThreshold: 8,
                                breakerCooldown: .milliseconds(250), maxBulkLength: 1 << 20, handshake: .init()),
                group: MultiThreadedEventLoopGroup.singleton)
            let replies = try await pool.send(keys.map { [.string("CLUSTER"), .string("KEYSLOT"), .bytes($0)] })
            for (key, reply) in zip(keys, replies) {
                #expect(reply == .integer(Int64(HashSlot.of(key))), "key \(key)")
            }
            pool.close()
        }
    }

    @Test func valuesRoundTripAcrossEveryPrimaryWithBatchesLeasesAndRemoveAll() async throws {
        try await withChildProcesses { scope in
            let cluster = try await RedisTestCluster.start(in: scope)
            let store = try await RedisStore.connect(configuration: Self.configuration(cluster))
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            let keys = (0..<300).map { "key-\($0)" }
            // One batch of writes, split by slot over every primary at once.
            try await store.setValues(Dictionary(uniqueKeysWithValues: keys.map { ($0, Data("value of \($0)".utf8)) }), expiry: .seconds(3_600))
            #expect(store.statistics.writes == keys.count)
            // Every primary holds a share.
            let primaries = try cluster.primaries()
            #expect(primaries.count == 3)
            for primary in primaries {
                let node = try #require(cluster.node(port: primary.port))
                let count = try #require(Int(try node.cli("DBSIZE")))
                #expect(count > 20, "primary \(primary.port) holds \(count) keys")
            }
            // One key at a time, and a batch split by slot over every primary at once.
            for key in keys.prefix(30) { #expect(try await store.entry(forKey: key)?.data == Data("value of \(key)".utf8)) }
            let found = try await store.entries(forKeys: keys + ["absent-1", "absent-2"])
            #expect(found.count == keys.count)
            for key in keys { #expect(found[key]?.data == Data("value of \(key)".utf8)) }
            let values = try await storage.values(forKeys: Array(keys.prefix(100)), tiers: .remote)
            #expect(values.count == 100 && values["key-7"] == "value of key-7")
            // Removal, and the lock protocol on the key's own node.
            #expect(try await store.removeValue(forKey: "key-0"))
            #expect(try await store.entry(forKey: "key-0") == nil)
            guard case .won(let lease, stale: nil) = try await store.leasedEntry(forKey: "key-0", leaseDuration: .seconds(3_600)) else {
                Issue.record("the first caller did not win the lock")
                return
            }
            #expect(try await store.leasedEntry(forKey: "key-0", leaseDuration: .seconds(3_600)) == .busy(stale: nil))
            #expect(try await store.fill(Data("loaded".utf8), forKey: "key-0", lease: lease, expiry: .seconds(3_600), metadata: nil, isCompressible: false))
            #expect(try await store.entry(forKey: "key-0")?.data == Data("loaded".utf8))
            #expect(try await store.invalidate(forKey: "key-1"))
            guard case .won(_, stale: let stale) = try await store.leasedEntry(forKey: "key-1", leaseDuration: .seconds(3_600)) else {
                Issue.record("no lock after an invalidation")
                return
            }
            #expect(stale?.data == Data("value of key-1".utf8))
            #expect(try await !store.invalidate(forKey: "key-2", ifExpiringBy: Date()))
            #expect(try await store.invalidate(forKey: "key-2", ifExpiringBy: .distantFuture))
            #expect(try await store.entry(forKey: "key-2") == nil)
            // Get-or-load through Storage: one loader call, and the value on the cluster.
            let loads = Tally()
            let loaded = try await storage.value(forKey: "loaded-key", expiry: .seconds(3_600)) { _ in
                loads.add()
                return "made"
            }
            #expect(loaded == "made" && loads.value == 1)
            #expect(try await store.entry(forKey: "loaded-key")?.data == Data("made".utf8))
            // removeAll reaches every primary; another namespace is untouched.
            let other = try RedisStore(configuration: Self.configuration(cluster, namespace: "other:"))
            try await other.setValue(Data("kept".utf8), forKey: "kept", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            try await store.removeAll()
            #expect(try await store.entries(forKeys: keys).isEmpty)
            #expect(try await other.entry(forKey: "kept")?.data == Data("kept".utf8))
            #expect(store.statistics.errors == 0)
            await other.close()
            await store.close()
        }
    }

    @Test func aClusterNoNodeOfWhichAnswersIsAClearErrorAtConnectAndAMissThroughStorage() async throws {
        // Seeds where nothing listens.
        let seeds = try (0..<2).map { _ in RedisStore.Node(host: "127.0.0.1", port: try RedisServer.freePort()) }
        var configuration = RedisStore.Configuration(clusterSeeds: seeds, namespace: "c:")
        configuration.deadline = .seconds(300)
        await #expect {
            _ = try await RedisStore.connect(configuration: configuration)
        } throws: { error in
            (error as? RedisError)?.code == .connection
        }
        let store = try RedisStore(configuration: configuration)
        let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
        #expect(try await storage.value(forKey: "k") == nil)
        #expect(try await storage.values(forKeys: ["a", "b"]).isEmpty)
        try await storage.setValue("v", forKey: "k", expiry: .seconds(60))
        #expect(store.statistics.errors >= 2)
        await #expect(throws: StorageError.self) { try await store.entry(forKey: "k") }
        // A bad seed is refused at once.
        #expect(throws: StorageError.self) { try RedisStore(configuration: .init(clusterSeeds: [.init(host: "a b", port: 7000)])) }
        #expect(throws: StorageError.self) { try RedisStore(configuration: .init(clusterSeeds: [.init(host: "h", port: 0)])) }
        await store.close()
    }

    @Test func aWrongPasswordIsAnAuthenticationErrorAtConnect() async throws {
        try await withChildProcesses { scope in
            let directory = try TemporaryDirectory("larder-redis-cluster-auth")
            let node = try await RedisServer.start(in: scope, arguments: [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--dir", directory.url.path,
                "--requirepass", "secret"], password: "secret")
            var configuration = RedisStore.Configuration(
                clusterSeeds: [.init(host: "127.0.0.1", port: node.port)], password: "wrong", namespace: "c:")
            configuration.deadline = .seconds(300)
            await #expect {
                _ = try await RedisStore.connect(configuration: configuration)
            } throws: { error in
                (error as? RedisError)?.code == .authentication
            }
        }
    }

    @Test func aMigratingSlotIsFollowedThroughAskAndAMovedSlotThroughMoved() async throws {
        try await withChildProcesses { scope in
            let cluster = try await RedisTestCluster.start(in: scope)
            let store = try await RedisStore.connect(configuration: Self.configuration(cluster))
            try await store.setValue(Data("old".utf8), forKey: "resident", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            let wire = store.resolve("resident").key
            let slot = HashSlot.of(wire)
            let primaries = try cluster.primaries()
            let source = try #require(primaries.first { $0.slots.contains { $0.contains(slot) } })
            let target = try #require(primaries.first { $0.port != source.port })
            let sourceNode = try #require(cluster.node(port: source.port))
            let targetNode = try #require(cluster.node(port: target.port))
            let sourceID = try sourceNode.cli("CLUSTER", "MYID")
            let targetID = try targetNode.cli("CLUSTER", "MYID")
            // The slot starts migrating: a key the source does not hold is asked of the target.
            #expect(try targetNode.cli("CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID) == "OK")
            #expect(try sourceNode.cli("CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID) == "OK")
            let newcomer = Self.key(inSlot: slot, of: store, prefix: "newcomer-")
            try await store.setValue(Data("new".utf8), forKey: newcomer, expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try targetNode.cli("CLUSTER", "COUNTKEYSINSLOT", "\(slot)") == "1", "the new key was written to the importing node")
            #expect(try await store.entry(forKey: newcomer)?.data == Data("new".utf8))
            #expect(try await store.entry(forKey: "resident")?.data == Data("old".utf8))
            let asked = store.statistics.redirections
            #expect(asked >= 2)
            // The slot moves for good: the source answers MOVED, which the store follows.
            #expect(try sourceNode.cli("MIGRATE", "127.0.0.1", "\(target.port)", "", "0", "60000", "KEYS",
                                       String(decoding: wire, as: UTF8.self)) == "OK")
            for node in cluster.nodes { _ = try node.cli("CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID) }
            #expect(try await store.entry(forKey: "resident")?.data == Data("old".utf8))
            #expect(try await store.entry(forKey: newcomer)?.data == Data("new".utf8))
            #expect(store.statistics.redirections > asked)
            try await store.setValue(Data("newer".utf8), forKey: "resident", expiry: .seconds(3_600), metadata: nil, isCompressible: false)
            #expect(try await store.entry(forKey: "resident")?.data == Data("newer".utf8))
            #expect(try targetNode.cli("CLUSTER", "COUNTKEYSINSLOT", "\(slot)") == "2")
            #expect(store.statistics.errors == 0)
            await store.close()
        }
    }

    @Test func aWriteOnAnyPrimaryDropsTheOtherInstancesCopy() async throws {
        try await withChildProcesses { scope in
            let cluster = try await RedisTestCluster.start(in: scope)
            let storeA = try await RedisStore.connect(configuration: Self.configuration(cluster, namespace: "tr:", tracking: true))
            let storeB = try await RedisStore.connect(configuration: Self.configuration(cluster, namespace: "tr:", tracking: true))
            let a = try Storage<String, String>(configuration: .init(), additionalTiers: [storeA], transformer: .string)
            let b = try Storage<String, String>(configuration: .init(), additionalTiers: [storeB], transformer: .string)
            #expect(await eventually { storeA.isTrackingLive && storeB.isTrackingLive })
            #expect(storeB.statistics.trackingSubscriptions >= 3, "one subscription per primary")
            // A key on each primary.
            let primaries = try cluster.primaries()
            let keys = try primaries.map { primary in
                let slot = try #require(primary.slots.first).lowerBound
                return Self.key(inSlot: slot, of: storeA, prefix: "on-\(primary.port)-")
            }
            for key in keys {
                let before = storeB.statistics.invalidationsReceived
                try await a.setValue("v1", forKey: key, expiry: .seconds(3_600))
                // B hears of A's first write before it reads (a late push would drop B's fresh copy).
                #expect(await eventually { storeB.statistics.invalidationsReceived > before })
                #expect(try await b.value(forKey: key) == "v1")
                #expect(b.memory.value(forKey: key) == "v1", "B keeps a local copy")
            }
            for key in keys {
                try await a.setValue("v2", forKey: key, expiry: .seconds(3_600))
                #expect(await eventually { b.memory.value(forKey: key) == nil }, "the push of \(key)'s primary reached B")
                #expect(try await b.value(forKey: key) == "v2")
            }
            await storeA.close()
            await storeB.close()
        }
    }

    @Test func aKilledPrimaryCostsOnlyMissesUntilItsReplicaTakesOver() async throws {
        try await withChildProcesses { scope in
            // A replica takes over after a second without its primary.
            let cluster = try await RedisTestCluster.start(in: scope, nodeTimeout: .seconds(1))
            var configuration = Self.configuration(cluster, namespace: "fo:", tracking: true)
            // Short deadlines so a dead node is a quick miss; nothing below bounds how long anything takes.
            configuration.deadline = .seconds(2)
            configuration.breakerCooldown = .milliseconds(50)
            configuration.trackingHeartbeat = .milliseconds(200)
            let store = try RedisStore(configuration: configuration)
            let storage = try Storage<String, String>(configuration: .init(), additionalTiers: [store], transformer: .string)
            // Every key written first by a store with a generous deadline (a stall cannot skip one).
            let keyCount = 300
            let seeder = try RedisStore(configuration: Self.configuration(cluster, namespace: "fo:"))
            try await seeder.setValues(Dictionary(uniqueKeysWithValues: (0..<keyCount).map { ("k\($0)", Data("value-\($0)-0".utf8)) }),
                                       expiry: .seconds(3_600))
            await seeder.close()
            // The primary to kill, and the keys it serves.
            let primaries = try cluster.primaries()
            let victim = primaries[0]
            let victimKeys = (0..<keyCount).filter { index in
                let slot = HashSlot.of(store.resolve("k\(index)").key)
                return victim.slots.contains { $0.contains(slot) }
            }
            #expect(victimKeys.count > 20)
            let victimSet = Set(victimKeys)
            #expect(await eventually {
                guard let found = try? await storage.values(forKeys: (0..<keyCount).map { "k\($0)" }, tiers: .remote) else { return false }
                return found.count == keyCount
            })
            try await cluster.waitUntilReplicated(primaryPort: victim.port)
            // An instance that only holds local copies (read once, before the kill).
            let watcher = try RedisStore(configuration: configuration)
            let watching = try Storage<String, String>(configuration: .init(), additionalTiers: [watcher], transformer: .string)
            #expect(await eventually {
                for index in 0..<30 { _ = try? await watching.value(forKey: "k\(index)") }
                return watching.memory.totalCount > 0
            })

            let wrong = Tally(), thrown = Tally(), hits = Tally(), misses = Tally()
            let killedAt = Locked<ContinuousClock.Instant?>(nil)
            let firstVictimHit = Locked<ContinuousClock.Instant?>(nil)
            let promoted = Locked<ContinuousClock.Instant?>(nil)
            let stop = Locked(false)
            /// Checks a value read for key `index`: its own, never another key's. A remote read
            /// started after the kill that hits a key of the killed primary is the recovery.
            @Sendable func check(_ value: String?, index: Int, remoteReadStartedAt started: ContinuousClock.Instant? = nil) {
                guard let value else {
                    misses.add()
                    return
                }
                guard value.hasPrefix("value-\(index)-") else {
                    wrong.add()
                    return
                }
                hits.add()
                if victimSet.contains(index), let started, let killed = killedAt.withLock({ $0 }), started > killed {
                    let now = ContinuousClock.now
                    firstVictimHit.withLock { if $0 == nil { $0 = now } }
                }
            }
            await withTaskGroup(of: Void.self) { group in
                // Readers of single keys (remote only: memory copies would hide the tier) and of batches.
                for reader in 0..<4 {
                    group.addTask {
                        var round = 0
                        while !stop.withLock({ $0 }) {
                            round += 1
                            do {
                                if reader == 0 {
                                    let indices = (0..<20).map { _ in Int.random(in: 0..<keyCount) }
                                    let started = ContinuousClock.now
                                    let found = try await storage.values(forKeys: indices.map { "k\($0)" }, tiers: .remote)
                                    for index in Set(indices) { check(found["k\(index)"], index: index, remoteReadStartedAt: started) }
                                } else {
                                    let index = reader == 1 ? victimKeys.randomElement()! : Int.random(in: 0..<keyCount)
                                    let started = ContinuousClock.now
                                    let value = try await storage.value(forKey: "k\(index)", tiers: .remote)
                                    check(value, index: index, remoteReadStartedAt: started)
                                    // And through every tier, memory copies included.
                                    check(try await storage.value(forKey: "k\(index)"), index: index)
                                }
                            } catch {
                                thrown.add()
                            }
                            // A dead node fails fast: leave the machine to the others now and then.
                            if round % 10 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
                        }
                    }
                }
                // A writer: every value names its key.
                group.addTask {
                    var version = 1
                    while !stop.withLock({ $0 }) {
                        let index = Int.random(in: 0..<keyCount)
                        do {
                            try await storage.setValue("value-\(index)-\(version)", forKey: "k\(index)", expiry: .seconds(3_600))
                        } catch {
                            thrown.add()
                        }
                        version += 1
                        try? await Task.sleep(for: .milliseconds(2))
                    }
                }
                group.addTask {
                    // Load first, then the kill.
                    _ = await eventually { hits.value > 200 }
                    guard let victimNode = cluster.node(port: victim.port) else { return }
                    // From the moment the process is gone (reaped).
                    await victimNode.kill()
                    killedAt.withLock { $0 = .now }
                    // When the cluster itself had a replica take over (for the report).
                    let replicas = victim.replicas.compactMap(cluster.node(port:))
                    _ = await eventually {
                        guard replicas.contains(where: { (try? $0.cli("ROLE"))?.hasPrefix("master") == true }) else { return false }
                        promoted.withLock { $0 = .now }
                        return true
                    }
                    // Until every key of the killed primary is read again (generous: a loaded
                    // machine only makes this slower).
                    _ = await eventually { firstVictimHit.withLock { $0 } != nil }
                    _ = await eventually {
                        guard let found = try? await storage.values(forKeys: victimKeys.map { "k\($0)" }, tiers: .remote) else { return false }
                        return found.count == victimKeys.count
                    }
                    stop.withLock { $0 = true }
                }
            }
            let killed = try #require(killedAt.withLock { $0 })
            let recovered = try #require(firstVictimHit.withLock { $0 }, "hits on the killed primary's keys came back")
            let all = try await storage.values(forKeys: victimKeys.map { "k\($0)" }, tiers: .remote)
            #expect(all.count == victimKeys.count, "every key of the killed primary is served by its replica")
            for index in victimKeys { #expect(all["k\(index)"]?.hasPrefix("value-\(index)-") == true) }
            #expect(wrong.value == 0, "no read returned another key's value")
            #expect(thrown.value == 0, "no call threw")
            // The lost primary's tracking connection dropped every local copy; tracking follows
            // the new primary.
            #expect(watching.memory.totalCount == 0)
            #expect(await eventually { store.isTrackingLive && watcher.isTrackingLive })
            #expect(store.statistics.topologyRefreshes >= 2)
            let seconds = (recovered - killed) / .seconds(1)
            let promotion = promoted.withLock { $0 }.map { ($0 - killed) / .seconds(1) } ?? -1
            FileHandle.standardError.write(Data(String(
                format: "RedisClusterTests failover: hits on the killed primary's keys came back %.3f s after the kill (its replica was primary after %.3f s; %d hits, %d misses, %d wrong, %d thrown)\n",
                seconds, promotion, hits.value, misses.value, wrong.value, thrown.value).utf8))
            await watcher.close()
            await store.close()
        }
    }
}
#endif
