#if Redis
public import Foundation
public import Larder
import LarderRemoteCore
public import NIOCore
import NIOPosix
import Synchronization

/// A remote byte tier on a Redis (6 or later) or Valkey server, spoken in RESP3, that keeps
/// every instance's memory copies coherent through `CLIENT TRACKING`.
///
/// Add it to a ``Larder/Storage`` as an extra tier; `Storage`'s `async` API then reads memory,
/// disk, then Redis. With tracking on (the default), the server pushes an invalidation to every
/// store whenever any client sets, overwrites, removes or invalidates a key of the namespace,
/// and each `Storage` drops its local copy of that key at once, so ``Configuration/localCopyMaxAge``
/// can be long. Get-or-load takes a short lock key (`SET NX PX`) so that one loader runs per
/// key across every process.
///
/// ```swift
/// let remote = try await RedisStore.connect(configuration: .init(
///     host: "10.0.0.5", username: "app", password: secret, namespace: "feed:"))
/// let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [remote], transformer: .data)
/// let feed = try await storage.value(forKey: "home", expiry: .seconds(60)) { _ in try await api.fetchHome() }
/// ```
///
/// With ``Configuration/clusterSeeds`` it works on a Redis Cluster: each key goes to the primary
/// that serves its hash slot, `MOVED` and `ASK` redirections are followed, the slot map is read
/// again when it changes, batches are split by slot and sent to every primary at once, and a
/// failed primary's keys are misses until its replica has taken over.
///
/// Every value is stored in the same envelope as ``LarderMemcached``'s (magic, version,
/// encoding, CRC-32C, the original key's digest): bytes another client wrote, damaged bytes or
/// another key's bytes are a miss and are deleted. Keys become `namespace{<hex SHA-256 of the
/// key>}` (the braces are a Redis Cluster hash tag: a key's lock and stale copy share its
/// slot). Values whose envelope exceeds ``Configuration/maxItemSize`` are not stored remotely.
///
/// With ``Configuration/tls`` set, every connection speaks TLS and verifies the server's
/// certificate (``RedisTLS``).
///
/// Used directly, its methods throw ``Larder/StorageError`` (code `.io`, cause a
/// ``RedisError``) on a remote failure; through `Storage` a failure is a miss.
///
/// - Important: `keys(withPrefix:)` returns nothing (keys are stored hashed); `removeAll()`
///   scans and unlinks the namespace's keys, which costs a pass over the server's keyspace.
public final class RedisStore: LeasingCacheTier, BatchReadingCacheTier, InvalidatingCacheTier {
    /// A node of a Redis Cluster, by the address clients reach it at.
    public struct Node: Sendable, Hashable, CustomStringConvertible {
        /// The node's host name or address.
        public var host: String
        /// The node's port. Defaults to 6379.
        public var port: Int

        public init(host: String, port: Int = 6379) {
            self.host = host
            self.port = port
        }

        public var description: String { "\(host):\(port)" }
    }

    /// Settings of a ``RedisStore``.
    public struct Configuration: Sendable {
        /// The server's host name or address. Defaults to `127.0.0.1`.
        public var host: String
        /// The server's port. Defaults to 6379.
        public var port: Int
        /// Nodes of a Redis Cluster to read its slot map from (a few of its nodes suffice; the
        /// rest are discovered). Empty: one server at ``host``:``port``. Defaults to empty.
        public var clusterSeeds: [Node] = []
        /// How often a cluster's slot map is read again when no redirection or failed node asked
        /// for it. Defaults to 10 s.
        public var clusterRefreshInterval: Duration = .seconds(10)
        /// The ACL user for `AUTH`; `nil` with a password is the `default` user. Defaults to `nil`.
        public var username: String?
        /// The password for `AUTH`; `nil` sends none. Defaults to `nil`.
        public var password: String?
        /// TLS for every connection (``port`` is then the server's `tls-port`); `nil` speaks
        /// plain TCP. Defaults to `nil`.
        public var tls: RedisTLS?
        /// Prefix of every key this store writes, and the prefix whose changes it is told of:
        /// printable ASCII without spaces or `{}*?[]\`, ≤ 150 bytes. Defaults to `"larder:"`.
        public var namespace: String
        /// Pipelined connections kept open. Defaults to 2.
        public var connectionCount: Int
        /// The longest any operation (connecting included) may take before it is a miss.
        /// Defaults to 100 ms.
        public var deadline: Duration
        /// First and longest wait before reconnecting a failed connection. Defaults to 20 ms and 500 ms.
        public var reconnectBackoff: (initial: Duration, maximum: Duration)
        /// Consecutive failures that open the circuit breaker. Defaults to 8.
        public var breakerThreshold: Int
        /// How long an open breaker fails calls at once before one probe. Defaults to 250 ms.
        public var breakerCooldown: Duration
        /// The largest envelope stored remotely; larger values stay local. Defaults to 1 MiB.
        public var maxItemSize: Int
        /// Whether the store subscribes to invalidations (`CLIENT TRACKING … BCAST`) so that
        /// local copies are dropped when any client changes a key. Defaults to `true`.
        public var isTrackingEnabled: Bool
        /// The longest a local copy of a remote value lives; `.zero` keeps none; `nil` bounds it
        /// by the value's expiry only. With tracking, no copy is made while the tracking
        /// connection (in a cluster, any primary's) is down. Defaults to 10 minutes.
        public var localCopyMaxAge: Duration?
        /// How often the tracking connection is pinged (a server that stopped answering is a
        /// lost connection). Defaults to 1 s.
        public var trackingHeartbeat: Duration
        /// How many keys with local copies the store follows; past that it drops every other
        /// local copy and starts over. Defaults to 100,000.
        public var trackedKeyLimit: Int
        /// Whether remote hits are also copied to the local disk tier. Defaults to `false`.
        public var copiesHitsToLocalTiers: Bool
        /// The expiry of a write that gives none. Defaults to 1 hour.
        public var defaultExpiry: Expiry
        /// How long a loader's lock lasts if its holder never fills it. Defaults to 30 s.
        public var leaseDuration: Duration
        /// How long a caller that finds the lock held waits before loading on its own. Defaults to 2 s.
        public var leaseWaitLimit: Duration
        /// Keys per `MGET` in ``RedisStore/entries(forKeys:)`` (the batches are pipelined). Defaults to 256.
        public var batchSize: Int
        /// The name the connections give themselves (`CLIENT SETNAME`). Defaults to `"larder"`.
        public var clientName: String?
        /// The event loops the connections run on; `nil` uses NIO's shared group.
        public var eventLoopGroup: (any EventLoopGroup)?
        /// The clock the envelope's expiry and the TTL mapping use. Defaults to `Date()`.
        public var now: @Sendable () -> Date
        /// Watches each round trip to the server (a span, a duration), for example
        /// LarderTracing's `OperationTracer`. Defaults to `nil`: a round trip pays one check.
        public var observer: (any OperationObserver)? = nil

        /// A configuration with a default for every setting.
        public init(
            host: String = "127.0.0.1", port: Int = 6379, username: String? = nil, password: String? = nil,
            tls: RedisTLS? = nil,
            namespace: String = "larder:", connectionCount: Int = 2, deadline: Duration = .milliseconds(100),
            reconnectBackoff: (initial: Duration, maximum: Duration) = (.milliseconds(20), .milliseconds(500)),
            breakerThreshold: Int = 8, breakerCooldown: Duration = .milliseconds(250), maxItemSize: Int = 1 << 20,
            isTrackingEnabled: Bool = true, localCopyMaxAge: Duration? = .seconds(600),
            trackingHeartbeat: Duration = .seconds(1), trackedKeyLimit: Int = 100_000,
            copiesHitsToLocalTiers: Bool = false, defaultExpiry: Expiry = .seconds(3_600),
            leaseDuration: Duration = .seconds(30), leaseWaitLimit: Duration = .seconds(2), batchSize: Int = 256,
            clientName: String? = "larder", eventLoopGroup: (any EventLoopGroup)? = nil,
            now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.tls = tls
            self.namespace = namespace
            self.connectionCount = connectionCount
            self.deadline = deadline
            self.reconnectBackoff = reconnectBackoff
            self.breakerThreshold = breakerThreshold
            self.breakerCooldown = breakerCooldown
            self.maxItemSize = maxItemSize
            self.isTrackingEnabled = isTrackingEnabled
            self.localCopyMaxAge = localCopyMaxAge
            self.trackingHeartbeat = trackingHeartbeat
            self.trackedKeyLimit = trackedKeyLimit
            self.copiesHitsToLocalTiers = copiesHitsToLocalTiers
            self.defaultExpiry = defaultExpiry
            self.leaseDuration = leaseDuration
            self.leaseWaitLimit = leaseWaitLimit
            self.batchSize = batchSize
            self.clientName = clientName
            self.eventLoopGroup = eventLoopGroup
            self.now = now
        }

        /// A configuration for a Redis Cluster reached through `clusterSeeds`, with a default for
        /// every other setting.
        ///
        /// ```swift
        /// var configuration = RedisStore.Configuration(
        ///     clusterSeeds: [.init(host: "10.0.0.5", port: 7000), .init(host: "10.0.0.6", port: 7000)], namespace: "feed:")
        /// configuration.deadline = .milliseconds(50)
        /// let remote = try await RedisStore.connect(configuration: configuration)
        /// ```
        public init(clusterSeeds: [Node], username: String? = nil, password: String? = nil, namespace: String = "larder:") {
            self.init(host: clusterSeeds.first?.host ?? "", port: clusterSeeds.first?.port ?? 0,
                      username: username, password: password, namespace: namespace)
            self.clusterSeeds = clusterSeeds
        }
    }

    /// Counters of a ``RedisStore``.
    public struct Statistics: Sendable, Hashable {
        public var hits = 0
        public var misses = 0
        public var writes = 0
        /// Failed operations (connection, timeout, open breaker, server error).
        public var errors = 0
        /// Operations whose deadline passed.
        public var timeouts = 0
        /// Values refused as foreign, truncated, damaged or another key's (each deleted).
        public var rejectedValues = 0
        /// Writes not sent because the value exceeds the item size.
        public var oversizedValues = 0
        /// Locks this process won (it ran the loader).
        public var leaseWins = 0
        /// Reads that found another caller's lock and no stale value.
        public var leaseWaits = 0
        /// Stale values served while someone refreshed them.
        public var staleServes = 0
        /// Fills refused because the key was written, removed or its lock lost meanwhile.
        public var rejectedFills = 0
        /// Times the circuit breaker opened.
        public var breakerOpens = 0
        /// Calls refused at once by the open breaker.
        public var breakerRejections = 0
        /// Servers (cluster nodes) whose circuit breaker is open now: a state, not a count of
        /// events.
        public var openBreakers = 0
        /// Reads of many keys in pipelined `MGET`s.
        public var batchReads = 0
        /// `invalidate` pushes received.
        public var invalidationsReceived = 0
        /// Times every local copy was dropped because the tracking stream had a gap (each loss
        /// and each resumption counts), the server was flushed or too many keys were followed.
        public var localCopyResets = 0
        /// Times the tracking subscription was established.
        public var trackingSubscriptions = 0
        /// Keys whose local copies the store follows now.
        public var trackedKeys = 0
        /// Cluster redirections followed (`MOVED`, `ASK`, `TRYAGAIN`).
        public var redirections = 0
        /// Times a cluster's slot map was read.
        public var topologyRefreshes = 0

        public init() {}
    }

    public let configuration: Configuration
    public let tierID: StorageTier
    private let servers: any RedisServers
    private let tracking: (any TrackingSubscription)?
    private let namespace: [UInt8]
    private let hasher: RemoteKey
    private let counters = RedisCounters()
    /// Wire key → cache key of every key whose local copy an invalidation must reach.
    private let tracked = Mutex<[String: String]>([:])
    private let listeners = Mutex<[@Sendable (TierInvalidation) -> Void]>([])

    /// Connects lazily; the tracking connection starts at once (in the background).
    ///
    /// - Throws: ``Larder/StorageError`` with code `.invalidConfiguration` for a bad namespace,
    ///   address or limit, or TLS files that cannot be read.
    public init(configuration: Configuration = .init(), tierID: StorageTier = .remote) throws {
        guard configuration.connectionCount >= 1, configuration.breakerThreshold >= 1,
              configuration.maxItemSize > RemoteEnvelope.headerLength, configuration.deadline > .zero,
              configuration.deadline <= .seconds(86_400), configuration.trackingHeartbeat <= .seconds(86_400),
              configuration.batchSize >= 1, configuration.trackedKeyLimit >= 1, configuration.trackingHeartbeat > .zero else {
            throw StorageError.invalidConfiguration(
                field: "RedisStore.Configuration", value: "\(configuration.host):\(configuration.port)",
                reason: "connectionCount, breakerThreshold, batchSize, trackedKeyLimit ≥ 1, deadline and trackingHeartbeat in (0, 1 day], and maxItemSize above the envelope header")
        }
        for node in configuration.clusterSeeds.isEmpty ? [Node(host: configuration.host, port: configuration.port)] : configuration.clusterSeeds {
            guard (1...65_535).contains(node.port), !node.host.isEmpty, !node.host.utf8.contains(where: { $0 <= 0x20 }) else {
                throw StorageError.invalidConfiguration(
                    field: configuration.clusterSeeds.isEmpty ? "host/port" : "clusterSeeds", value: "\(node)",
                    reason: "needs a host without spaces and a port in 1...65535")
            }
        }
        guard configuration.clusterRefreshInterval > .zero, configuration.clusterRefreshInterval <= .seconds(86_400) else {
            throw StorageError.invalidConfiguration(
                field: "clusterRefreshInterval", value: "\(configuration.clusterRefreshInterval)", reason: "must be in (0, 1 day]")
        }
        _ = try RemoteKey(namespace: configuration.namespace)
        guard !configuration.namespace.contains(where: { "{}*?[]\\".contains($0) }) else {
            throw StorageError.invalidConfiguration(
                field: "namespace", value: configuration.namespace,
                reason: "must not contain any of {}*?[]\\ (hash-tag and pattern characters)")
        }
        self.configuration = configuration
        self.tierID = tierID
        namespace = Array(configuration.namespace.utf8)
        hasher = try RemoteKey(namespace: "")
        let group = configuration.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        let handshake = Handshake(username: configuration.username, password: configuration.password, clientName: configuration.clientName)
        let tls = try configuration.tls.map { try TLSClient($0, host: configuration.host) }
        let poolSettings = RedisConnectionPool.Settings(
            host: configuration.host, port: configuration.port, connectionCount: configuration.connectionCount,
            deadline: TimeAmount(configuration.deadline),
            reconnectBackoff: (TimeAmount(configuration.reconnectBackoff.initial), TimeAmount(configuration.reconnectBackoff.maximum)),
            breakerThreshold: configuration.breakerThreshold, breakerCooldown: TimeAmount(configuration.breakerCooldown),
            maxBulkLength: max(configuration.maxItemSize, 1 << 20) * 2, handshake: handshake, tls: tls,
            observer: configuration.observer)
        let cluster = configuration.clusterSeeds.isEmpty ? nil : RedisCluster(
            settings: .init(seeds: configuration.clusterSeeds, pool: poolSettings, refreshGap: .milliseconds(100),
                            refreshInterval: configuration.clusterRefreshInterval, maxRedirections: 5),
            group: group)
        servers = cluster ?? RedisConnectionPool(settings: poolSettings, group: group)
        if configuration.isTrackingEnabled {
            // Set below: the callbacks need `self`, which they reach weakly through a box.
            let box = WeakBox()
            let trackingSettings = TrackingConnection.Settings(
                host: configuration.host, port: configuration.port, handshake: handshake, tls: tls, prefix: configuration.namespace,
                deadline: TimeAmount(configuration.deadline), heartbeat: configuration.trackingHeartbeat,
                reconnectBackoff: configuration.reconnectBackoff)
            let onInvalidate: @Sendable ([String]?) -> Void = { keys in box.store?.received(keys) }
            let onGap: @Sendable () -> Void = { box.store?.resetLocalCopies() }
            if let cluster {
                tracking = ClusterTracking(cluster: cluster, settings: trackingSettings, group: group,
                                           onInvalidate: onInvalidate, onGap: onGap)
            } else {
                tracking = TrackingConnection(settings: trackingSettings, group: group, onInvalidate: onInvalidate, onGap: onGap)
            }
            box.set(self)
            tracking?.start()
        } else {
            tracking = nil
        }
    }

    /// A store whose connection, and credentials, were checked: `PING` went through (and, with
    /// tracking, the tracking connection subscribed within the deadline).
    ///
    /// - Throws: ``RedisError`` with code `.authentication` when the server refused the
    ///   username or password, `.tls` when the TLS handshake failed (an untrusted or misnamed
    ///   server certificate, a refused client certificate), `.unsupportedServer` without RESP3, `.connection` or `.timeout`
    ///   when it cannot be reached; ``Larder/StorageError`` for a bad configuration.
    public static func connect(configuration: Configuration = .init(), tierID: StorageTier = .remote) async throws -> RedisStore {
        let store = try RedisStore(configuration: configuration, tierID: tierID)
        do {
            let reply = try await store.servers.send([[.string("PING")]], routedBy: nil)
            guard case .simpleString = reply[0] else { throw RedisError(.server, "PING answered \(reply[0])") }
            if let tracking = store.tracking {
                let end = ContinuousClock.now + configuration.deadline
                while !tracking.isLive, ContinuousClock.now < end {
                    if let error = tracking.lastFailure, error.code == .authentication || error.code == .tls { throw error }
                    try await Task.sleep(for: .milliseconds(1))
                }
            }
        } catch {
            await store.close()
            throw error
        }
        return store
    }

    public var localCopyMaxAge: Duration? {
        guard let tracking else { return configuration.localCopyMaxAge }
        return tracking.isLive ? configuration.localCopyMaxAge : .zero
    }
    public var copiesHitsToLocalTiers: Bool { configuration.copiesHitsToLocalTiers }
    public var leaseWaitLimit: Duration { configuration.leaseWaitLimit }
    public var leaseDuration: Duration { configuration.leaseDuration }

    /// Whether invalidations are flowing now (tracking on and its connection, or in a cluster
    /// every primary's, subscribed).
    public var isTrackingLive: Bool { tracking?.isLive ?? false }

    /// The store's counters.
    public var statistics: Statistics {
        var statistics = counters.snapshot()
        let poolCounters = servers.poolCounters
        statistics.timeouts = poolCounters.timeouts.load(ordering: .relaxed)
        statistics.breakerOpens = poolCounters.breakerOpens.load(ordering: .relaxed)
        statistics.breakerRejections = poolCounters.breakerRejections.load(ordering: .relaxed)
        statistics.openBreakers = servers.openBreakers
        statistics.trackingSubscriptions = tracking?.subscriptionCount ?? 0
        if let cluster = servers as? RedisCluster {
            statistics.redirections = cluster.redirections.load(ordering: .relaxed)
            statistics.topologyRefreshes = cluster.refreshes.load(ordering: .relaxed)
        }
        statistics.trackedKeys = tracked.withLock { $0.count }
        return statistics
    }

    public var tierStatistics: TierStatistics {
        let statistics = self.statistics
        var tier = TierStatistics()
        tier.hits = statistics.hits
        tier.misses = statistics.misses
        tier.writes = statistics.writes
        tier.errors = statistics.errors
        tier.corruptEntriesDropped = statistics.rejectedValues
        return tier
    }

    // MARK: - Keys

    /// A key's wire names (`namespace{hex}`, its lock and its stale copy) and envelope digest.
    struct ResolvedKey {
        var key: [UInt8]
        var digest: KeyDigest
        var lock: [UInt8] { key + Array(":lock".utf8) }
        var stale: [UInt8] { key + Array(":stale".utf8) }
    }

    func resolve(_ cacheKey: String) -> ResolvedKey {
        let (hex, digest) = hasher.resolve(cacheKey)
        var key = namespace
        key.reserveCapacity(namespace.count + hex.count + 2)
        key.append(UInt8(ascii: "{"))
        key += hex
        key.append(UInt8(ascii: "}"))
        return ResolvedKey(key: key, digest: digest)
    }

    // MARK: - CacheTier

    public func entry(forKey key: String) async throws -> TierEntry? {
        let resolved = resolve(key)
        let reply = try await send([[.string("GET"), .bytes(resolved.key)]], routedBy: resolved.key)[0]
        switch reply {
        case .null:
            counters.misses.add(1, ordering: .relaxed)
            return nil
        case .bulkString(let bytes):
            guard let entry = await accept(bytes, resolved: resolved, storedAt: resolved.key) else { return nil }
            counters.hits.add(1, ordering: .relaxed)
            return entry
        default:
            throw unexpected(reply, "GET")
        }
    }

    /// The entries of `keys` that are present, read with `MGET`s of at most
    /// ``Configuration/batchSize`` keys, pipelined on one connection per server and sent to every
    /// server at once (in a cluster, one `MGET` per slot).
    /// ``Larder/Storage``'s `values(forKeys:tiers:)` reaches it for the keys its faster tiers miss.
    ///
    /// - Throws: ``Larder/StorageError`` (code `.io`) when any server failed: the whole batch is
    ///   then a miss, so that no value of a key that could not be read is loaded and written back.
    public func entries(forKeys keys: [String]) async throws -> [String: TierEntry] {
        guard !keys.isEmpty else { return [:] }
        counters.batchReads.add(1, ordering: .relaxed)
        let resolved = keys.map(resolve)
        let chunks: [ArraySlice<Int>] = servers.multiKeyGroups(resolved.map(\.key)).flatMap { group in
            stride(from: 0, to: group.count, by: configuration.batchSize).map { group[$0..<min($0 + configuration.batchSize, group.count)] }
        }
        let commands = chunks.map { chunk in
            (key: resolved[chunk[chunk.startIndex]].key, command: [RESPArgument.string("MGET")] + chunk.map { .bytes(resolved[$0].key) })
        }
        let replies = try await checked(await servers.sendAll(commands).map { result in try result.get() })
        var found: [String: TierEntry] = [:]
        for (chunk, reply) in zip(chunks, replies) {
            guard case .array(let values) = reply, values.count == chunk.count else { throw unexpected(reply, "MGET") }
            for (index, value) in zip(chunk, values) {
                switch value {
                case .bulkString(let bytes):
                    if let entry = await accept(bytes, resolved: resolved[index], storedAt: resolved[index].key) {
                        counters.hits.add(1, ordering: .relaxed)
                        found[keys[index]] = entry
                    }
                default:
                    counters.misses.add(1, ordering: .relaxed)
                }
            }
        }
        return found
    }

    public func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws {
        let resolved = resolve(key)
        guard let (envelope, ttl) = try prepare(data, expiry: expiry, metadata: metadata, isCompressible: isCompressible,
                                                 digest: resolved.digest) else {
            // Expired already, or too large: an older remote value must not outlive this write.
            _ = try await removeValue(forKey: key)
            return
        }
        // The lock first: a fill racing this write is refused (it checks the lock), or runs
        // before the SET, which then replaces it. One key per DEL: a cluster node whose slot is
        // migrating refuses a command of several keys that it holds only some of.
        let replies = try await send([
            [.string("DEL"), .bytes(resolved.lock)],
            [.string("DEL"), .bytes(resolved.stale)],
            [.string("SET"), .bytes(resolved.key), .buffer(envelope)] + ttl.arguments,
        ], routedBy: resolved.key)
        guard case .simpleString("OK") = replies[2] else { throw unexpected(replies[2], "SET") }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// Stores many values at once: each key's commands go to the server of its slot, each
    /// server's share pipelined on one connection and every server at once.
    ///
    /// As ``setValue(_:forKey:expiry:metadata:isCompressible:)`` does for one key, a value that
    /// must not be stored remotely (expired already, or larger than
    /// ``Configuration/maxItemSize``) removes the key's remote value instead; a key written
    /// twice keeps its last write.
    ///
    /// ```swift
    /// try await remote.setValues([
    ///     TierWrite(key: "home", data: home, expiry: .seconds(60)),
    ///     TierWrite(key: "trending", data: trending, expiry: .seconds(10)),
    /// ])
    /// ```
    ///
    /// - Throws: ``Larder/StorageError`` (code `.io`) when a server failed; the values on the
    ///   other servers are stored.
    public func setValues(_ writes: [TierWrite]) async throws {
        var commands: [(key: [UInt8], command: [RESPArgument])] = []
        var sets: [Int] = []
        for write in writes {
            let resolved = resolve(write.key)
            // As in setValue: the lock first, one key per DEL.
            commands.append((resolved.key, [.string("DEL"), .bytes(resolved.lock)]))
            commands.append((resolved.key, [.string("DEL"), .bytes(resolved.stale)]))
            if let (envelope, ttl) = try prepare(write.data, expiry: write.expiry, metadata: write.metadata,
                                                  isCompressible: write.isCompressible, digest: resolved.digest) {
                sets.append(commands.count)
                commands.append((resolved.key, [.string("SET"), .bytes(resolved.key), .buffer(envelope)] + ttl.arguments))
            } else {
                commands.append((resolved.key, [.string("DEL"), .bytes(resolved.key)]))
            }
        }
        guard !commands.isEmpty else { return }
        let results = await servers.sendAll(commands)
        let stored = sets.filter { if case .success(.simpleString("OK")) = results[$0] { true } else { false } }.count
        counters.writes.add(stored, ordering: .relaxed)
        _ = try await checked(try results.map { try $0.get() })
    }

    /// ``setValues(_:)`` of `values`, all with `expiry`, no metadata.
    public func setValues(_ values: [String: Data], expiry: Expiry? = nil, isCompressible: Bool = false) async throws {
        try await setValues(values.map { TierWrite(key: $0.key, data: $0.value, expiry: expiry, isCompressible: isCompressible) })
    }

    @discardableResult
    public func removeValue(forKey key: String) async throws -> Bool {
        let resolved = resolve(key)
        let replies = try await send([
            [.string("DEL"), .bytes(resolved.lock)],
            [.string("DEL"), .bytes(resolved.stale)],
            [.string("DEL"), .bytes(resolved.key)],
        ], routedBy: resolved.key)
        guard case .integer(let removed) = replies[2] else { throw unexpected(replies[2], "DEL") }
        return removed > 0
    }

    public func containsValue(forKey key: String) async throws -> Bool {
        try await entry(forKey: key) != nil
    }

    /// Always empty: keys are stored hashed.
    public func keys(withPrefix prefix: String) async throws -> [String] { [] }

    /// Unlinks every key of the namespace (`SCAN … MATCH namespace*` on every server, a
    /// cluster's primaries included, then `UNLINK`), which every store tracking it hears of.
    /// Other namespaces are untouched.
    public func removeAll() async throws {
        for server in try await reaching(await servers.everyServer()) {
            var cursor = "0"
            repeat {
                let scan: [RESPArgument] = [.string("SCAN"), .string(cursor), .string("MATCH"), .string(configuration.namespace + "*"),
                                            .string("COUNT"), .string("1000")]
                let reply = try await checked(await server.send([scan]))[0]
                guard case .array(let parts) = reply, parts.count == 2, let next = parts[0].string,
                      case .array(let keys) = parts[1] else { throw unexpected(reply, "SCAN") }
                let names: [[UInt8]] = keys.compactMap { key in
                    if case .bulkString(let bytes) = key { return Array(buffer: bytes) }
                    return nil
                }
                let unlinks = servers.multiKeyGroups(names).map { group in
                    (key: names[group[0]], command: [RESPArgument.string("UNLINK")] + group.map { .bytes(names[$0]) })
                }
                _ = try await checked(await servers.sendAll(unlinks).map { result in try result.get() })
                cursor = next
            } while cursor != "0"
        }
    }

    /// Always 0: the server drops expired keys itself.
    public func removeExpired() async throws -> Int { 0 }

    public func close() async {
        servers.close()
        await tracking?.close()
    }

    // MARK: - Leases (a lock key per value: `SET lock token NX PX`)

    public func leasedEntry(forKey key: String, leaseDuration: Duration) async throws -> LeasedRead {
        let resolved = resolve(key)
        let token = UInt64.random(in: 1...UInt64.max)
        let milliseconds = max(1, Int64((leaseDuration.seconds * 1000).rounded(.up)))
        let reply = try await send([[
            .string("EVAL"), .string(Scripts.leasedRead), .string("3"),
            .bytes(resolved.key), .bytes(resolved.lock), .bytes(resolved.stale), .integer(Int64(bitPattern: token)), .integer(milliseconds),
        ]], routedBy: resolved.key)[0]
        guard case .array(let parts) = reply, parts.count >= 1, case .integer(let outcome) = parts[0] else {
            throw unexpected(reply, "EVAL (leased read)")
        }
        var found: TierEntry?
        if parts.count > 1, case .bulkString(let bytes) = parts[1] {
            found = await accept(bytes, resolved: resolved, storedAt: outcome == 1 ? resolved.key : resolved.stale)
        }
        switch outcome {
        case 1:
            guard let found else { return .busy(stale: nil) }
            counters.hits.add(1, ordering: .relaxed)
            return .hit(found)
        case 2:
            counters.leaseWins.add(1, ordering: .relaxed)
            return .won(TierLease(token: token), stale: found)
        default:
            if found == nil { counters.leaseWaits.add(1, ordering: .relaxed) } else { counters.staleServes.add(1, ordering: .relaxed) }
            return .busy(stale: found)
        }
    }

    public func fill(
        _ data: Data, forKey key: String, lease: TierLease, expiry: Expiry?, metadata: Data?, isCompressible: Bool
    ) async throws -> Bool {
        let resolved = resolve(key)
        guard let (envelope, ttl) = try prepare(data, expiry: expiry, metadata: metadata, isCompressible: isCompressible,
                                                 digest: resolved.digest) else {
            // Not cacheable remotely: give the lock back so waiters stop waiting.
            try await releaseLease(lease, forKey: key)
            return false
        }
        let reply = try await send([[
            .string("EVAL"), .string(Scripts.fill), .string("3"),
            .bytes(resolved.key), .bytes(resolved.lock), .bytes(resolved.stale),
            .integer(Int64(bitPattern: lease.token)), .buffer(envelope),
        ] + ttl.scriptArguments], routedBy: resolved.key)[0]
        guard case .integer(let filled) = reply else { throw unexpected(reply, "EVAL (fill)") }
        if filled == 1 {
            counters.writes.add(1, ordering: .relaxed)
            return true
        }
        counters.rejectedFills.add(1, ordering: .relaxed)
        return false
    }

    /// Moves the value aside as the key's stale copy (`RENAME`, keeping its TTL): readers of
    /// get-or-load are served it while one of them recomputes the value.
    @discardableResult
    public func invalidate(forKey key: String) async throws -> Bool {
        let resolved = resolve(key)
        let reply = try await send([[
            .string("EVAL"), .string(Scripts.moveAside), .string("2"), .bytes(resolved.key), .bytes(resolved.stale),
        ]], routedBy: resolved.key)[0]
        guard case .integer(let moved) = reply else { throw unexpected(reply, "EVAL (invalidate)") }
        return moved == 1
    }

    /// Moves the value aside, as ``invalidate(forKey:)`` does, only when it expires by `date`
    /// and is still the bytes read here (compared in a script): a value written in between is
    /// left fresh.
    @discardableResult
    public func invalidate(forKey key: String, ifExpiringBy date: Date) async throws -> Bool {
        let resolved = resolve(key)
        guard case .bulkString(let bytes) = try await send([[.string("GET"), .bytes(resolved.key)]], routedBy: resolved.key)[0],
              let current = await accept(bytes, resolved: resolved, storedAt: resolved.key),
              let expiration = current.expirationDate, expiration <= date else { return false }
        let reply = try await send([[
            .string("EVAL"), .string(Scripts.moveAsideIfEqual), .string("2"), .bytes(resolved.key), .bytes(resolved.stale), .buffer(bytes),
        ]], routedBy: resolved.key)[0]
        guard case .integer(let moved) = reply else { throw unexpected(reply, "EVAL (invalidate if due)") }
        return moved == 1
    }

    /// Deletes the lock if this caller still holds it (its loader failed), so that waiters
    /// stop waiting at once and one of them takes the lock.
    public func releaseLease(_ lease: TierLease, forKey key: String) async throws {
        let resolved = resolve(key)
        _ = try await send([[
            .string("EVAL"), .string(Scripts.deleteIfEqual), .string("1"), .bytes(resolved.lock), .integer(Int64(bitPattern: lease.token)),
        ]], routedBy: resolved.key)
    }

    // MARK: - Invalidations

    public func addInvalidationListener(_ listener: @escaping @Sendable (TierInvalidation) -> Void) {
        listeners.withLock { $0.append(listener) }
    }

    public func trackLocalCopy(forKey key: String) {
        guard tracking != nil else { return }
        let wire = String(decoding: resolve(key).key, as: UTF8.self)
        let limit = configuration.trackedKeyLimit
        // Past the limit every other key is let go, and with it its local copy; this key (about
        // to be read or written) stays followed, in the storage's table as in this one.
        let evicted: [String] = tracked.withLock { tracked in
            tracked[wire] = key
            guard tracked.count > limit else { return [] }
            var others = Array(tracked.values)
            others.removeAll { $0 == key }
            tracked = [wire: key]
            return others
        }
        if !evicted.isEmpty {
            counters.resets.add(1, ordering: .relaxed)
            broadcast(.keys(evicted))
        }
    }

    /// An `invalidate` push: the keys it names that have local copies (`nil`: all of them).
    private func received(_ wireKeys: [String]?) {
        counters.invalidations.add(1, ordering: .relaxed)
        guard let wireKeys else {
            resetLocalCopies()
            return
        }
        let keys: [String] = tracked.withLock { tracked in wireKeys.compactMap { tracked.removeValue(forKey: $0) } }
        if !keys.isEmpty { broadcast(.keys(keys)) }
    }

    /// Every local copy loses its guard: the stream had a gap, or the server was flushed.
    private func resetLocalCopies() {
        counters.resets.add(1, ordering: .relaxed)
        tracked.withLock { $0.removeAll() }
        broadcast(.all)
    }

    private func broadcast(_ invalidation: TierInvalidation) {
        let listeners = self.listeners.withLock { $0 }
        for listener in listeners { listener(invalidation) }
    }

    // MARK: - Helpers

    /// The envelope and TTL of a write, or `nil` when the value must not be stored remotely
    /// (already expired, or larger than ``Configuration/maxItemSize``).
    private func prepare(
        _ data: Data, expiry: Expiry?, metadata: Data?, isCompressible: Bool, digest: KeyDigest
    ) throws -> (ByteBuffer, RedisTTL)? {
        let now = configuration.now()
        let expiry = expiry ?? configuration.defaultExpiry
        let expirationDate = expiry.expirationDate(from: now)
        let ttl = RedisTTL.make(expiry: expiry, expirationDate: expirationDate, now: now)
        guard ttl != .expired else { return nil }
        var envelope = ByteBuffer()
        try RemoteEnvelope.encode(digest: digest, payload: data, expirationDate: expirationDate, metadata: metadata,
                                  compress: isCompressible, into: &envelope)
        guard envelope.readableBytes <= configuration.maxItemSize else {
            counters.oversized.add(1, ordering: .relaxed)
            return nil
        }
        return (envelope, ttl)
    }

    /// Decodes bytes read for `resolved`; a refused envelope is counted, deleted (only if the
    /// key still holds exactly those bytes) and a miss.
    private func accept(_ bytes: ByteBuffer, resolved: ResolvedKey, storedAt wireKey: [UInt8]) async -> TierEntry? {
        let decoded = bytes.withUnsafeReadableBytes {
            RemoteEnvelope.decode($0, digest: resolved.digest, maxPayloadLength: 1 << 30)
        }
        switch decoded {
        case .success(let envelope):
            if let expiration = envelope.expirationDate, expiration <= configuration.now() {
                counters.misses.add(1, ordering: .relaxed)
                return nil
            }
            return TierEntry(data: envelope.payload, expirationDate: envelope.expirationDate, metadata: envelope.metadata)
        case .failure:
            counters.rejected.add(1, ordering: .relaxed)
            counters.misses.add(1, ordering: .relaxed)
            _ = try? await send([[
                .string("EVAL"), .string(Scripts.deleteIfEqual), .string("1"), .bytes(wireKey), .buffer(bytes),
            ]], routedBy: wireKey)
            return nil
        }
    }

    /// Sends commands to the server of `key`'s slot, turning a failure into a
    /// ``Larder/StorageError`` and an error reply into one too.
    private func send(_ commands: [[RESPArgument]], routedBy key: [UInt8]) async throws -> [RESPValue] {
        try await checked(await servers.send(commands, routedBy: key))
    }

    /// The replies `operation` got, with a failure turned into a ``Larder/StorageError`` and an
    /// error reply into one too.
    private func checked(_ operation: @autoclosure () async throws -> [RESPValue]) async throws -> [RESPValue] {
        let replies = try await reaching(await operation())
        for reply in replies {
            if case .error(let message) = reply {
                counters.errors.add(1, ordering: .relaxed)
                let error = RedisError(.server, message)
                throw StorageError(code: .io, message: "redis: \(error)", cause: error)
            }
        }
        return replies
    }

    /// The result of `operation`, whose failure is turned into a ``Larder/StorageError``.
    private func reaching<Result>(_ operation: @autoclosure () async throws -> Result) async throws -> Result {
        do {
            return try await operation()
        } catch {
            counters.errors.add(1, ordering: .relaxed)
            var cause = error
            if let redis = error as? RedisError, redis.code != .authentication, let refusal = servers.refusal {
                cause = refusal
            }
            throw StorageError(code: .io, message: "redis \(servers.name): \(cause)", cause: cause)
        }
    }

    private func unexpected(_ reply: RESPValue, _ command: String) -> StorageError {
        counters.errors.add(1, ordering: .relaxed)
        let error = RedisError(.protocolViolation, "\(command) answered \(String(describing: reply).prefix(200))")
        return StorageError(code: .io, message: "redis: \(error)", cause: error)
    }
}

/// How an expiry becomes Redis's: `PX` milliseconds for a lifetime, `PXAT` a unix time in
/// milliseconds for a date (the moment the caller named, on the server's clock), nothing for
/// none.
enum RedisTTL: Equatable {
    /// Already expired: nothing to store.
    case expired
    /// No expiry.
    case none
    /// Milliseconds from now (≥ 1).
    case px(Int64)
    /// Unix time in milliseconds.
    case pxat(Int64)

    static func make(expiry: Expiry, expirationDate: Date?, now: Date) -> RedisTTL {
        guard let expirationDate else { return .none }
        let remaining = expirationDate.timeIntervalSince(now)
        guard remaining > 0 else { return .expired }
        if case .date = expiry {
            return .pxat(Int64(min((expirationDate.timeIntervalSince1970 * 1000).rounded(.up), 9e15)))
        }
        return .px(max(1, Int64(min((remaining * 1000).rounded(.up), 9e15))))
    }

    /// The arguments of `SET`.
    var arguments: [RESPArgument] {
        switch self {
        case .px(let milliseconds): return [.string("PX"), .integer(milliseconds)]
        case .pxat(let milliseconds): return [.string("PXAT"), .integer(milliseconds)]
        case .none, .expired: return []
        }
    }

    /// The mode and amount the fill script reads.
    var scriptArguments: [RESPArgument] {
        switch self {
        case .px(let milliseconds): return [.string("PX"), .integer(milliseconds)]
        case .pxat(let milliseconds): return [.string("PXAT"), .integer(milliseconds)]
        case .none, .expired: return [.string("NONE"), .integer(0)]
        }
    }
}

/// The Lua scripts of the lock protocol, each one atomic on the server.
enum Scripts {
    /// KEYS: value, lock, stale; ARGV: token, lock milliseconds. `{1, value}` on a hit;
    /// `{2, stale}` when this caller took the lock; `{3, stale}` when another holds it.
    static let leasedRead = """
        local v = redis.call('GET', KEYS[1])
        if v then return {1, v} end
        local s = redis.call('GET', KEYS[3])
        if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2, s} end
        return {3, s}
        """
    /// KEYS: value, lock, stale; ARGV: token, envelope, mode (PX, PXAT, NONE), amount. Stores
    /// the value only while the lock holds the token; 1 when stored.
    static let fill = """
        if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
        redis.call('DEL', KEYS[2], KEYS[3])
        if ARGV[3] == 'PX' then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
        elseif ARGV[3] == 'PXAT' then redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[4])
        else redis.call('SET', KEYS[1], ARGV[2]) end
        return 1
        """
    /// KEYS: value, stale. Renames the value to its stale copy (TTL kept); 1 if there was one.
    static let moveAside = """
        if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('RENAME', KEYS[1], KEYS[2]) return 1 end
        return 0
        """
    /// KEYS: value, stale; ARGV: bytes. ``moveAside``, only while the value is exactly these bytes.
    static let moveAsideIfEqual = """
        if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('RENAME', KEYS[1], KEYS[2]) return 1 end
        return 0
        """
    /// KEYS: key; ARGV: bytes. Deletes the key only while it holds exactly these bytes.
    static let deleteIfEqual = """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """
}

/// Lets the tracking callbacks, created before the store is, reach it without retaining it.
private final class WeakBox: Sendable {
    private let reference = Mutex<WeakReference?>(nil)
    private struct WeakReference: @unchecked Sendable { weak var store: RedisStore? }
    func set(_ store: RedisStore) { reference.withLock { $0 = WeakReference(store: store) } }
    var store: RedisStore? { reference.withLock { $0?.store } }
}

/// The store's own counters (relaxed atomics).
final class RedisCounters: Sendable {
    let hits = Atomic<Int>(0), misses = Atomic<Int>(0), writes = Atomic<Int>(0), errors = Atomic<Int>(0)
    let rejected = Atomic<Int>(0), oversized = Atomic<Int>(0), leaseWins = Atomic<Int>(0), leaseWaits = Atomic<Int>(0)
    let staleServes = Atomic<Int>(0), rejectedFills = Atomic<Int>(0), batchReads = Atomic<Int>(0)
    let invalidations = Atomic<Int>(0), resets = Atomic<Int>(0)

    func snapshot() -> RedisStore.Statistics {
        var statistics = RedisStore.Statistics()
        statistics.hits = hits.load(ordering: .relaxed)
        statistics.misses = misses.load(ordering: .relaxed)
        statistics.writes = writes.load(ordering: .relaxed)
        statistics.errors = errors.load(ordering: .relaxed)
        statistics.rejectedValues = rejected.load(ordering: .relaxed)
        statistics.oversizedValues = oversized.load(ordering: .relaxed)
        statistics.leaseWins = leaseWins.load(ordering: .relaxed)
        statistics.leaseWaits = leaseWaits.load(ordering: .relaxed)
        statistics.staleServes = staleServes.load(ordering: .relaxed)
        statistics.rejectedFills = rejectedFills.load(ordering: .relaxed)
        statistics.batchReads = batchReads.load(ordering: .relaxed)
        statistics.invalidationsReceived = invalidations.load(ordering: .relaxed)
        statistics.localCopyResets = resets.load(ordering: .relaxed)
        return statistics
    }
}
#endif
