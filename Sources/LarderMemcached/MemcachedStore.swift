#if Memcached
import LarderRemoteCore
public import Foundation
public import Larder
public import NIOCore
import NIOPosix
import Synchronization

/// A remote byte tier on a memcached server, spoken in memcached's meta text protocol.
///
/// Add it to a ``Larder/Storage`` as an extra tier; ``Larder/Storage``'s `async` API then reads
/// memory, disk, then memcached, and get-or-load uses memcached's leases so that one loader runs
/// per key across every process sharing the server.
///
/// ```swift
/// let remote = try MemcachedStore(configuration: .init(host: "10.0.0.5", port: 11211, namespace: "feed:"))
/// let storage = try Storage<String, Data>(configuration: .init(), additionalTiers: [remote], transformer: .data)
/// let feed = try await storage.value(forKey: "home", expiry: .seconds(60)) { _ in try await api.fetchHome() }
/// ```
///
/// Every value is stored in an envelope (magic, version, encoding, CRC-32C, the original key's
/// digest): bytes that another client wrote, that were damaged, or that belong to another key
/// are a miss and are deleted. Keys become `namespace` + the hex SHA-256 of the cache key, so
/// any key fits memcached's 250-byte limit. Values whose envelope exceeds
/// ``Configuration/maxItemSize`` are not stored remotely (they stay local).
///
/// Used directly, its methods throw ``Larder/StorageError`` (code `.io`, cause a
/// ``MemcachedError``) on a remote failure; through `Storage` a failure is a miss.
///
/// Its calls are `nonisolated(nonsending)`: they run on the caller's executor (an actor's, or
/// the event loop a task prefers) up to the wait for the server's reply and after it, with no
/// hop to Swift's global executor on the way in or between its own steps. What they run there
/// is building the command and checking the reply, plus gzip for compressible values of 512
/// bytes and more (a write compresses, a read of such a value decompresses): callers that must
/// not spend that on their own executor (the main actor, say, with large values) call from a
/// task of their own.
///
/// - Important: `keys(withPrefix:)` returns nothing and `removeAll()` does nothing: memcached
///   cannot list or clear one namespace. Remote values end by their TTL.
public final class MemcachedStore: LeasingCacheTier, BatchReadingCacheTier {
    /// One memcached server of the pool.
    public struct Server: Sendable, Hashable, CustomStringConvertible {
        /// The server's host name or address, as every client of the pool spells it (it names
        /// the server's points on the ring).
        public var host: String
        /// The server's port. Defaults to 11211.
        public var port: Int
        /// The server's share of the keys, relative to the others' (libmemcached's weight).
        /// Defaults to 1.
        public var weight: Int

        public init(host: String, port: Int = 11211, weight: Int = 1) {
            self.host = host
            self.port = port
            self.weight = weight
        }

        public var description: String { "\(host):\(port)" }
    }

    /// What happens to the keys of a server that does not answer.
    public struct Failover: Sendable, Hashable {
        enum Kind: Sendable, Hashable {
            case none
            case gutter([Server], maxTTL: Duration)
            case replicas(Int)
        }
        let kind: Kind

        /// Its keys are misses until it answers again (the default).
        public static let none = Failover(kind: .none)

        /// A small spare pool takes a failed server's keys: a write its own server refused is
        /// stored in the gutter with a lifetime of at most `maxTTL`, a read its own server
        /// cannot answer reads the gutter, and every removal reaches the gutter too. A value
        /// read from the gutter is at most `maxTTL` old.
        public static func gutter(_ servers: [Server], maxTTL: Duration) -> Failover {
            Failover(kind: .gutter(servers, maxTTL: maxTTL))
        }

        /// Each value is written to `count` distinct servers (the key's own, then the next ones
        /// round the ring); a read asks the first and, when it fails, the next. A failed server
        /// then costs no misses.
        public static func replicas(_ count: Int) -> Failover {
            Failover(kind: .replicas(count))
        }
    }

    /// Settings of a ``MemcachedStore``.
    public struct Configuration: Sendable {
        /// The servers the keys are spread over, by libmemcached's weighted ketama ring.
        /// Defaults to one server on `127.0.0.1:11211`.
        public var servers: [Server]
        /// What a failed server's keys do: misses (`.none`, the default), a gutter pool, or replicas.
        public var failover: Failover
        /// The first server's host name or address.
        public var host: String {
            get { servers.first?.host ?? "" }
            set { if servers.isEmpty { servers = [Server(host: newValue)] } else { servers[0].host = newValue } }
        }
        /// The first server's port.
        public var port: Int {
            get { servers.first?.port ?? 0 }
            set { if servers.isEmpty { servers = [Server(host: "127.0.0.1", port: newValue)] } else { servers[0].port = newValue } }
        }
        /// Prefix of every key this store writes: printable ASCII, no spaces, ≤ 150 bytes.
        /// Defaults to `"larder:"`.
        public var namespace: String
        /// Pipelined connections kept open to each server. Defaults to 2.
        public var connectionCount: Int
        /// The longest any operation (connecting included) may take before it is a miss.
        /// Defaults to 100 ms.
        public var deadline: Duration
        /// First and longest wait before reconnecting a failed connection. Defaults to 20 ms and 500 ms.
        public var reconnectBackoff: (initial: Duration, maximum: Duration)
        /// Consecutive failures of one server that open its circuit breaker (the server is then
        /// left out until a probe succeeds). Defaults to 8.
        public var breakerThreshold: Int
        /// How long an open breaker fails calls at once before one probe. Defaults to 250 ms.
        public var breakerCooldown: Duration
        /// The servers' item size limit (`-I`); larger envelopes stay local. Defaults to 1 MiB
        /// minus 512 bytes of memcached's own item header.
        public var maxItemSize: Int
        /// The longest a local copy of a remote value lives; `.zero` keeps none; `nil` bounds it
        /// by the value's expiry only. Defaults to 60 s.
        public var localCopyMaxAge: Duration?
        /// Whether remote hits are also copied to the local disk tier. Defaults to `false`.
        public var copiesHitsToLocalTiers: Bool
        /// The expiry of a write that gives none. Defaults to 1 hour.
        public var defaultExpiry: Expiry
        /// How long a lease lasts if its holder never fills it. Defaults to 30 s.
        public var leaseDuration: Duration
        /// How long a caller that finds the lease busy waits before loading on its own. Defaults to 2 s.
        public var leaseWaitLimit: Duration
        /// How many keys per server this store remembers whose write or removal did not reach
        /// that server (each deleted there before it is read there again). Past that, every
        /// read of the server is a miss until the longest lifetime this store has written has
        /// passed. Defaults to 10,000 (about 1 MiB per server at most).
        public var recoveryJournalLimit: Int
        /// The event loops the connections run on; `nil` uses NIO's shared group.
        public var eventLoopGroup: (any EventLoopGroup)?
        /// The clock the envelope's expiry and the TTL mapping use. Defaults to `Date()`.
        public var now: @Sendable () -> Date
        /// Watches each command sent to a server (a span, a duration), for example
        /// LarderTracing's `OperationTracer`. Defaults to `nil`: a command pays one check.
        public var observer: (any OperationObserver)? = nil

        /// A configuration for one server, with a default for every setting.
        public init(
            host: String = "127.0.0.1", port: Int = 11211, namespace: String = "larder:", connectionCount: Int = 2,
            deadline: Duration = .milliseconds(100),
            reconnectBackoff: (initial: Duration, maximum: Duration) = (.milliseconds(20), .milliseconds(500)),
            breakerThreshold: Int = 8, breakerCooldown: Duration = .milliseconds(250),
            maxItemSize: Int = 1_048_576 - 512, localCopyMaxAge: Duration? = .seconds(60),
            copiesHitsToLocalTiers: Bool = false, defaultExpiry: Expiry = .seconds(3_600),
            leaseDuration: Duration = .seconds(30), leaseWaitLimit: Duration = .seconds(2),
            recoveryJournalLimit: Int = 10_000,
            eventLoopGroup: (any EventLoopGroup)? = nil,
            now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.init(
                servers: [Server(host: host, port: port)], namespace: namespace, connectionCount: connectionCount,
                deadline: deadline, reconnectBackoff: reconnectBackoff, breakerThreshold: breakerThreshold,
                breakerCooldown: breakerCooldown, maxItemSize: maxItemSize, localCopyMaxAge: localCopyMaxAge,
                copiesHitsToLocalTiers: copiesHitsToLocalTiers, defaultExpiry: defaultExpiry, leaseDuration: leaseDuration,
                leaseWaitLimit: leaseWaitLimit, recoveryJournalLimit: recoveryJournalLimit,
                eventLoopGroup: eventLoopGroup, now: now)
        }

        /// A configuration for a pool of servers, with a default for every other setting.
        ///
        /// ```swift
        /// let remote = try MemcachedStore(configuration: .init(
        ///     servers: [.init(host: "10.0.0.5"), .init(host: "10.0.0.6"), .init(host: "10.0.0.7", weight: 2)],
        ///     failover: .replicas(2), namespace: "feed:"))
        /// ```
        public init(
            servers: [Server], failover: Failover = .none, namespace: String = "larder:", connectionCount: Int = 2,
            deadline: Duration = .milliseconds(100),
            reconnectBackoff: (initial: Duration, maximum: Duration) = (.milliseconds(20), .milliseconds(500)),
            breakerThreshold: Int = 8, breakerCooldown: Duration = .milliseconds(250),
            maxItemSize: Int = 1_048_576 - 512, localCopyMaxAge: Duration? = .seconds(60),
            copiesHitsToLocalTiers: Bool = false, defaultExpiry: Expiry = .seconds(3_600),
            leaseDuration: Duration = .seconds(30), leaseWaitLimit: Duration = .seconds(2),
            recoveryJournalLimit: Int = 10_000,
            eventLoopGroup: (any EventLoopGroup)? = nil,
            now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.servers = servers
            self.failover = failover
            self.namespace = namespace
            self.connectionCount = connectionCount
            self.deadline = deadline
            self.reconnectBackoff = reconnectBackoff
            self.breakerThreshold = breakerThreshold
            self.breakerCooldown = breakerCooldown
            self.maxItemSize = maxItemSize
            self.localCopyMaxAge = localCopyMaxAge
            self.copiesHitsToLocalTiers = copiesHitsToLocalTiers
            self.defaultExpiry = defaultExpiry
            self.leaseDuration = leaseDuration
            self.leaseWaitLimit = leaseWaitLimit
            self.recoveryJournalLimit = recoveryJournalLimit
            self.eventLoopGroup = eventLoopGroup
            self.now = now
        }
    }

    /// Counters of a ``MemcachedStore``.
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
        /// Leases this process won (it ran the loader).
        public var leaseWins = 0
        /// Reads that found another caller's lease and waited.
        public var leaseWaits = 0
        /// Stale values served while someone refreshed them.
        public var staleServes = 0
        /// Lease fills the server refused because the key changed meanwhile.
        public var rejectedFills = 0
        /// Times the circuit breaker opened.
        public var breakerOpens = 0
        /// Calls refused at once by the open breaker.
        public var breakerRejections = 0
        /// Servers whose circuit breaker is open now (a state, not a count of events).
        public var openBreakers = 0
        /// Reads of many keys in one quiet batch (``MemcachedStore/entries(forKeys:)``).
        public var batchReads = 0
        /// Writes of many keys in one quiet batch per server (``MemcachedStore/setValues(_:)``).
        public var batchWrites = 0
        /// Keys whose write or removal did not reach their server and whose delete there is
        /// still owed (summed over the servers; see ``Configuration/recoveryJournalLimit``).
        public var pendingRecoveryDeletes = 0

        public init() {}
    }

    public let configuration: Configuration
    public let tierID: StorageTier
    private let pool: ServerPool
    private let remoteKey: RemoteKey
    private let counters = StoreCounters()

    /// Connects lazily to the configured servers.
    ///
    /// - Throws: ``Larder/StorageError`` with code `.invalidConfiguration` for a bad namespace,
    ///   server list, failover or limit.
    public convenience init(configuration: Configuration = .init(), tierID: StorageTier = .remote) throws {
        try self.init(configuration: configuration, tierID: tierID, connectingTo: { $0 })
    }

    /// A store whose connections to each server go to the address `route` gives (the ring
    /// still places keys by the configured names): the tests reach servers through proxies.
    init(configuration: Configuration, tierID: StorageTier, connectingTo route: (Server) -> Server) throws {
        guard configuration.connectionCount >= 1, configuration.breakerThreshold >= 1, configuration.maxItemSize > RemoteEnvelope.headerLength,
              configuration.deadline > .zero, configuration.recoveryJournalLimit >= 0 else {
            throw StorageError.invalidConfiguration(field: "MemcachedStore.Configuration", value: "\(configuration.servers)",
                                                    reason: "connectionCount, breakerThreshold ≥ 1, deadline > 0, recoveryJournalLimit ≥ 0 and a valid item size")
        }
        try Self.validate(servers: configuration.servers, field: "servers")
        switch configuration.failover.kind {
        case .none: break
        case .replicas(let count):
            guard count >= 1 else {
                throw StorageError.invalidConfiguration(field: "failover", value: "replicas(\(count))", reason: "needs at least 1 replica")
            }
        case .gutter(let servers, let maxTTL):
            try Self.validate(servers: servers, field: "failover.gutter")
            guard maxTTL > .zero else {
                throw StorageError.invalidConfiguration(field: "failover", value: "gutter maxTTL \(maxTTL)", reason: "must be positive")
            }
        }
        self.configuration = configuration
        self.tierID = tierID
        remoteKey = try RemoteKey(namespace: configuration.namespace)
        let group = configuration.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton
        pool = ServerPool(
            servers: configuration.servers, failover: configuration.failover,
            journalLimit: configuration.recoveryJournalLimit, now: configuration.now
        ) { named in
            let server = route(named)
            return ConnectionPool(
                settings: .init(
                    host: server.host, port: server.port, connectionCount: configuration.connectionCount,
                    deadline: TimeAmount(configuration.deadline),
                    reconnectBackoff: (TimeAmount(configuration.reconnectBackoff.initial), TimeAmount(configuration.reconnectBackoff.maximum)),
                    breakerThreshold: configuration.breakerThreshold, breakerCooldown: TimeAmount(configuration.breakerCooldown),
                    maxValueLength: max(configuration.maxItemSize, 1 << 20) * 2, observer: configuration.observer),
                group: group)
        }
    }

    private static func validate(servers: [Server], field: String) throws {
        guard !servers.isEmpty else {
            throw StorageError.invalidConfiguration(field: field, value: "[]", reason: "needs at least one server")
        }
        for server in servers {
            guard (1...65_535).contains(server.port), server.weight >= 0, !server.host.isEmpty,
                  !server.host.utf8.contains(where: { $0 <= 0x20 }) else {
                throw StorageError.invalidConfiguration(
                    field: field, value: "\(server) weight \(server.weight)",
                    reason: "a server needs a host without spaces, a port in 1...65535 and a weight ≥ 0")
            }
        }
        guard Set(servers.map { "\($0.host):\($0.port)" }).count == servers.count else {
            throw StorageError.invalidConfiguration(field: field, value: "\(servers)", reason: "lists a server twice")
        }
    }

    public var localCopyMaxAge: Duration? { configuration.localCopyMaxAge }
    public var copiesHitsToLocalTiers: Bool { configuration.copiesHitsToLocalTiers }
    public var leaseWaitLimit: Duration { configuration.leaseWaitLimit }
    public var leaseDuration: Duration { configuration.leaseDuration }

    /// An executor that runs tasks on the event loop of the store's first connection.
    ///
    /// A caller that runs its remote calls under `withTaskExecutorPreference(store.taskExecutor)`
    /// sends and is resumed on the connection's own thread: no hop to the event loop and back per
    /// call, which is most of a call's cost at one call in flight. Keep such tasks short and
    /// non-blocking: they share the thread with the connection's I/O.
    ///
    /// ```swift
    /// let value = try await withTaskExecutorPreference(store.taskExecutor) {
    ///     try await storage.value(forKey: "home", tiers: .remote)
    /// }
    /// ```
    public var taskExecutor: any TaskExecutor { pool.members[0].connections.executor }

    /// One executor per connection, each running tasks on that connection's event loop (the
    /// first is ``taskExecutor``). Many concurrent callers spread over them use every loop, and
    /// each caller's commands go out on its own loop's connection.
    public var taskExecutors: [any TaskExecutor] { pool.members.flatMap(\.connections.executors) }

    /// The store's counters.
    public var statistics: Statistics {
        var statistics = counters.snapshot()
        for member in pool.allMembers {
            let counters = member.connections.counters
            statistics.timeouts += counters.timeouts.load(ordering: .relaxed)
            statistics.breakerOpens += counters.breakerOpens.load(ordering: .relaxed)
            statistics.breakerRejections += counters.breakerRejections.load(ordering: .relaxed)
            statistics.pendingRecoveryDeletes += member.journal.count
            if member.connections.isBreakerOpen { statistics.openBreakers += 1 }
        }
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

    // MARK: - CacheTier

    nonisolated(nonsending) public func entry(forKey key: String) async throws -> TierEntry? {
        let resolved = remoteKey.resolve(key)
        let read: (MetaResponse, ServerPool.Member)?
        do {
            read = try await pool.read(MetaCommand(.get, key: resolved.key, flags: Self.getFlags), key: resolved.key)
        } catch {
            throw failure(error, key: resolved.key)
        }
        guard let (response, member) = read else {
            counters.misses.add(1, ordering: .relaxed)
            return nil
        }
        switch response.status {
        case .miss:
            counters.misses.add(1, ordering: .relaxed)
            return nil
        case .value:
            guard let entry = await accept(response, resolved: resolved, from: member) else { return nil }
            counters.hits.add(1, ordering: .relaxed)
            return entry
        default:
            throw unexpected(response)
        }
    }

    /// The entries of `keys` that are present, read in one quiet batch per server (`mg … q`
    /// per key, then `mn`), the servers' batches sent at once: misses cost no reply.
    /// ``Larder/Storage``'s `values(forKeys:tiers:)` reaches it for the keys its faster tiers
    /// miss. The keys of a server that fails are read one by one through the failover (or
    /// are misses).
    ///
    /// - Throws: ``Larder/StorageError`` (code `.io`) when every server's batch failed.
    nonisolated(nonsending) public func entries(forKeys keys: [String]) async throws -> [String: TierEntry] {
        let resolved = keys.map { remoteKey.resolve($0) }
        counters.batchReads.add(1, ordering: .relaxed)
        // Each key in its own server's batch; one that server owes a delete takes the slow path.
        var batches: [ObjectIdentifier: (member: ServerPool.Member, indices: [Int])] = [:]
        var oneByOne: [Int] = []
        let now = configuration.now()
        for index in keys.indices {
            let member = pool.primary(for: resolved[index].key)
            if member.journal.blocks(resolved[index].key, now: now) {
                oneByOne.append(index)
            } else {
                batches[ObjectIdentifier(member), default: (member, [])].indices.append(index)
            }
        }
        var found: [String: TierEntry] = [:]
        found.reserveCapacity(keys.count)
        var failures = 0
        var lastError: (any Error)?
        let parts = Array(batches.values)
        let replies = await pool.sendQuietBatches(parts.map { batch in
            (batch.member, batch.indices.map { MetaCommand(.get, key: resolved[$0].key, flags: Self.quietGetFlags) })
        })
        for (part, batch) in parts.enumerated() {
            switch replies[part] {
            case .failure(let error):
                failures += 1
                lastError = error
                counters.errors.add(1, ordering: .relaxed)
                // With failover, the failed server's keys can still be read elsewhere.
                if pool.replicas > 1 || pool.gutter != nil { oneByOne.append(contentsOf: batch.indices) }
            case .success(let responses):
                // By index: each reply is read where it lies (a reply holds two buffers to retain).
                for (position, index) in batch.indices.enumerated() where position < responses.count {
                    switch responses[position].status {
                    case .value:
                        if let entry = await accept(responses[position], resolved: resolved[index], from: batch.member) {
                            counters.hits.add(1, ordering: .relaxed)
                            found[keys[index]] = entry
                        }
                    case .miss:
                        counters.misses.add(1, ordering: .relaxed)
                    default:
                        counters.errors.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        for index in oneByOne {
            if let entry = try? await entry(forKey: keys[index]) { found[keys[index]] = entry }
        }
        if failures > 0, failures == parts.count, found.isEmpty, let lastError {
            throw StorageError(code: .io, message: "memcached: \(lastError)", cause: lastError)
        }
        return found
    }

    nonisolated(nonsending) public func setValue(_ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool) async throws {
        let now = configuration.now()
        let expirationDate = (expiry ?? configuration.defaultExpiry).expirationDate(from: now)
        guard case .token(let ttl) = RemoteTTL.make(expirationDate: expirationDate, now: now) else {
            _ = try await removeValue(forKey: key)
            return
        }
        let resolved = remoteKey.resolve(key)
        var envelope = ByteBuffer()
        try RemoteEnvelope.encode(
            digest: resolved.digest, payload: data, expirationDate: expirationDate, metadata: metadata,
            compress: isCompressible, into: &envelope)
        guard envelope.readableBytes <= configuration.maxItemSize else {
            // Stays local; an older remote value must not outlive this write.
            counters.oversized.add(1, ordering: .relaxed)
            _ = try await removeValue(forKey: key)
            return
        }
        let payload = envelope
        let response = try await update(key: resolved.key, ttl: ttl) { ttl in
            MetaCommand(.set(payload), key: resolved.key, flags: [.ttl(ttl ?? 0)])
        }
        guard response.status == .stored else { throw unexpected(response) }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// Stores many values, each as ``setValue(_:forKey:expiry:metadata:isCompressible:)``
    /// stores one, in one quiet batch per server (`ms … q` per key, `md … q` for a value that
    /// stays local, then `mn`), every server's batch sent at once: only a refusal costs a reply.
    ///
    /// A key given twice keeps its last write. A value whose envelope exceeds
    /// ``Configuration/maxItemSize``, or that has already expired, removes the remote copy
    /// instead. With replicas or a gutter pool, writes and removals follow the same failover
    /// rules as one write does.
    ///
    /// - Parameter writes: The values, keys and expiries; an empty batch sends nothing.
    /// - Throws: ``Larder/StorageError`` (code `.io`) after every batch was answered or failed,
    ///   when a server failed (deadline, connection, open breaker) or refused a key: the other
    ///   keys are stored, and each failed key is a miss for this store until its delete
    ///   reached its server (see ``Configuration/recoveryJournalLimit``). Each failed key counts
    ///   one error in ``statistics``, each stored one a write.
    /// - Complexity: One round trip per server the keys live on (two with a gutter pool).
    nonisolated(nonsending) public func setValues(_ writes: [TierWrite]) async throws {
        guard !writes.isEmpty else { return }
        counters.batchWrites.add(1, ordering: .relaxed)
        let now = configuration.now()
        var last: [String: Int] = [:]
        last.reserveCapacity(writes.count)
        for index in writes.indices { last[writes[index].key] = index }
        var updates: [ServerPool.BatchUpdate] = []
        updates.reserveCapacity(last.count)
        for (index, write) in writes.enumerated() where last[write.key] == index {
            let expirationDate = (write.expiry ?? configuration.defaultExpiry).expirationDate(from: now)
            let resolved = remoteKey.resolve(write.key)
            guard case .token(let ttl) = RemoteTTL.make(expirationDate: expirationDate, now: now) else {
                updates.append(.removal(key: resolved.key))
                continue
            }
            var envelope = ByteBuffer()
            try RemoteEnvelope.encode(
                digest: resolved.digest, payload: write.data, expirationDate: expirationDate, metadata: write.metadata,
                compress: write.isCompressible, into: &envelope)
            guard envelope.readableBytes <= configuration.maxItemSize else {
                // Stays local; an older remote value must not outlive this write.
                counters.oversized.add(1, ordering: .relaxed)
                updates.append(.removal(key: resolved.key))
                continue
            }
            updates.append(.write(envelope, key: resolved.key, ttl: ttl))
        }
        var failed = 0
        var firstFailure: (key: [UInt8], error: any Error)?
        for (update, result) in zip(updates, await pool.updateBatch(updates)) {
            switch result {
            case .success:
                if update.envelope != nil { counters.writes.add(1, ordering: .relaxed) }
            case .failure(let error):
                failed += 1
                if firstFailure == nil { firstFailure = (update.key, error) }
            }
        }
        guard let firstFailure else { return }
        counters.errors.add(failed, ordering: .relaxed)
        let server = pool.primary(for: firstFailure.key).server
        throw StorageError(
            code: .io, message: "memcached: \(failed) of \(updates.count) writes failed, first on \(server): \(firstFailure.error)",
            cause: firstFailure.error)
    }

    @discardableResult
    nonisolated(nonsending) public func removeValue(forKey key: String) async throws -> Bool {
        let wireKey = remoteKey.key(for: key)
        let response = try await update(key: wireKey, ttl: nil) { _ in MetaCommand(.delete, key: wireKey) }
        switch response.status {
        case .stored: return true
        case .notFound: return false
        default: throw unexpected(response)
        }
    }

    nonisolated(nonsending) public func containsValue(forKey key: String) async throws -> Bool {
        try await entry(forKey: key) != nil
    }

    /// Always empty: memcached cannot list keys.
    public func keys(withPrefix prefix: String) async throws -> [String] { [] }

    /// Does nothing: memcached cannot clear one namespace (`flush_all` would clear every
    /// client's values). Remote values end by their TTL; a `Storage`'s `removeAll()` makes them
    /// misses for every storage on the namespace through a clear time kept in memcached.
    public func removeAll() async throws {}

    /// Always 0: the server drops expired items itself.
    public func removeExpired() async throws -> Int { 0 }

    public func close() async {
        await pool.close()
    }

    // MARK: - Leases

    nonisolated(nonsending) public func leasedEntry(forKey key: String, leaseDuration: Duration) async throws -> LeasedRead {
        let seconds = max(1, Int64(leaseDuration.seconds.rounded(.up)))
        let resolved = remoteKey.resolve(key)
        // Leases live on the key's own server only: a lease there is what every instance sees.
        let member = pool.primary(for: resolved.key)
        guard !member.journal.blocks(resolved.key, now: configuration.now()) else {
            counters.errors.add(1, ordering: .relaxed)
            throw StorageError(code: .io, message: "memcached \(member.server): a delete of this key is owed there first")
        }
        let response = try await send(MetaCommand(
            .get, key: resolved.key, flags: [.value, .remainingTTL, .cas, .vivify(seconds)]), to: member, key: resolved.key, isWrite: false)
        guard response.status == .value else {
            if response.status == .miss { return .busy(stale: nil) }
            throw unexpected(response)
        }
        let won = response.hasFlag(UInt8(ascii: "W"))
        let busy = response.hasFlag(UInt8(ascii: "Z"))
        let stale = response.hasFlag(UInt8(ascii: "X"))
        // A placeholder the lease created (or that another caller's lease holds) is empty.
        let entry = (response.value?.readableBytes ?? 0) > 0 ? await accept(response, resolved: resolved, from: member, handsBackWin: false) : nil
        if won {
            guard let cas = response.integerFlag(UInt8(ascii: "c")) else { throw unexpected(response) }
            counters.leaseWins.add(1, ordering: .relaxed)
            return .won(TierLease(token: cas), stale: entry)
        }
        if busy || stale || entry == nil {
            if entry == nil { counters.leaseWaits.add(1, ordering: .relaxed) } else { counters.staleServes.add(1, ordering: .relaxed) }
            return .busy(stale: entry)
        }
        counters.hits.add(1, ordering: .relaxed)
        return .hit(entry!)
    }

    nonisolated(nonsending) public func fill(
        _ data: Data, forKey key: String, lease: TierLease, expiry: Expiry?, metadata: Data?, isCompressible: Bool
    ) async throws -> Bool {
        let now = configuration.now()
        let expirationDate = (expiry ?? configuration.defaultExpiry).expirationDate(from: now)
        let resolved = remoteKey.resolve(key)
        var envelope = ByteBuffer()
        try RemoteEnvelope.encode(
            digest: resolved.digest, payload: data, expirationDate: expirationDate, metadata: metadata,
            compress: isCompressible, into: &envelope)
        let member = pool.primary(for: resolved.key)
        guard case .token(let ttl) = RemoteTTL.make(expirationDate: expirationDate, now: now),
              envelope.readableBytes <= configuration.maxItemSize else {
            // Not cacheable remotely: release the placeholder so waiters stop waiting.
            _ = try await send(MetaCommand(.delete, key: resolved.key, flags: [.compareCAS(lease.token)]),
                               to: member, key: resolved.key, isWrite: true)
            return false
        }
        let response = try await send(MetaCommand(
            .set(envelope), key: resolved.key, flags: [.ttl(ttl), .compareCAS(lease.token)]), to: member, key: resolved.key, isWrite: true)
        switch response.status {
        case .stored:
            counters.writes.add(1, ordering: .relaxed)
            // The other replicas get the value as a plain write (the lease lives on the first).
            for replica in pool.replicas(for: resolved.key).dropFirst() {
                _ = try? await send(MetaCommand(.set(envelope), key: resolved.key, flags: [.ttl(ttl)]),
                                    to: replica, key: resolved.key, isWrite: true)
            }
            return true
        case .exists, .notFound, .notStored:
            counters.rejectedFills.add(1, ordering: .relaxed)
            return false
        default:
            throw unexpected(response)
        }
    }

    @discardableResult
    nonisolated(nonsending) public func invalidate(forKey key: String) async throws -> Bool {
        let wireKey = remoteKey.key(for: key)
        let response = try await update(key: wireKey, ttl: nil) { _ in MetaCommand(.delete, key: wireKey, flags: [.invalidate]) }
        switch response.status {
        case .stored: return true
        case .notFound: return false
        default: throw unexpected(response)
        }
    }

    /// Reads the value with its CAS and invalidates exactly those bytes (`md … I C<cas>`) when
    /// they expire by `date`, give or take the second of memcached's whole-second TTLs (a read's
    /// expiration is capped by the server's remaining TTL); a value written in between is left
    /// fresh. A value already stale (`X`) is left as it is, with its lease.
    @discardableResult
    nonisolated(nonsending) public func invalidate(forKey key: String, ifExpiringBy date: Date) async throws -> Bool {
        let resolved = remoteKey.resolve(key)
        let member = pool.primary(for: resolved.key)
        let response = try await send(MetaCommand(.get, key: resolved.key, flags: Self.getFlags), to: member, key: resolved.key, isWrite: false)
        guard response.status == .value, let current = await accept(response, resolved: resolved, from: member),
              !response.hasFlag(UInt8(ascii: "X")), let cas = response.integerFlag(UInt8(ascii: "c")),
              let expiration = current.expirationDate, expiration <= date.addingTimeInterval(1) else { return false }
        let marked = try await send(
            MetaCommand(.delete, key: resolved.key, flags: [.invalidate, .compareCAS(cas)]), to: member, key: resolved.key, isWrite: true)
        switch marked.status {
        case .stored:
            // The other replicas hold plain copies: mark them too (the lease lives on the first).
            for replica in pool.replicas(for: resolved.key).dropFirst() {
                _ = try? await send(MetaCommand(.delete, key: resolved.key, flags: [.invalidate]), to: replica, key: resolved.key, isWrite: true)
            }
            return true
        case .exists, .notFound: return false
        default: throw unexpected(marked)
        }
    }

    // MARK: - Helpers

    /// Releases a lease this caller won on a missing key without filling it (its loader
    /// failed), so that the callers waiting for the fill stop waiting: the empty placeholder
    /// the lease created is deleted if it is still the one the lease made.
    nonisolated(nonsending) public func releaseLease(_ lease: TierLease, forKey key: String) async throws {
        let wireKey = remoteKey.key(for: key)
        let member = pool.primary(for: wireKey)
        _ = try await send(MetaCommand(.delete, key: wireKey, flags: [.compareCAS(lease.token)]), to: member, key: wireKey, isWrite: false)
    }

    /// Sends one command about `key` to `member`, turning a failure into a
    /// ``Larder/StorageError`` and counting it.
    nonisolated(nonsending) private func send(
        _ command: MetaCommand, to member: ServerPool.Member, key: [UInt8], isWrite: Bool
    ) async throws -> MetaResponse {
        let response: MetaResponse
        do {
            response = try await pool.send(command, to: member, key: key, isWrite: isWrite)
        } catch {
            throw failure(error, key: key)
        }
        if response.status.isError {
            counters.errors.add(1, ordering: .relaxed)
            throw unexpected(response)
        }
        return response
    }

    /// A write or removal of `key` through the pool's failover rules (see ``ServerPool``).
    nonisolated(nonsending) private func update(
        key: [UInt8], ttl: Int64?, make: @Sendable (Int64?) -> MetaCommand
    ) async throws -> MetaResponse {
        let response: MetaResponse
        do {
            response = try await pool.update(key: key, ttl: ttl, make: make)
        } catch {
            throw failure(error, key: key)
        }
        if response.status.isError {
            counters.errors.add(1, ordering: .relaxed)
            throw unexpected(response)
        }
        return response
    }

    /// Counts a failure and wraps it in a ``Larder/StorageError`` naming the key's server.
    private func failure(_ error: any Error, key: [UInt8]) -> StorageError {
        counters.errors.add(1, ordering: .relaxed)
        if let error = error as? StorageError { return error }
        return StorageError(code: .io, message: "memcached \(pool.primary(for: key).server): \(error)", cause: error)
    }

    private func unexpected(_ response: MetaResponse) -> StorageError {
        let error = MemcachedError(.server, "unexpected reply \(response.status)")
        return StorageError(code: .io, message: "memcached: \(error)", cause: error)
    }

    /// The flags of a plain read and of one read in a quiet batch (made once, not per call).
    private static let getFlags: [MetaFlag] = [.value, .remainingTTL, .cas]
    private static let quietGetFlags: [MetaFlag] = [.value, .remainingTTL, .cas, .quiet]

    /// Decodes a `VA` reply for the resolved key; a refused envelope is counted, deleted and a miss.
    ///
    /// memcached gives the win token of an invalidated value (`W`) to the first read that sees
    /// it, whatever the read. Unless `handsBackWin` is false (a leased read, which wins it on
    /// purpose), the token is handed back by marking the value stale again (`md … I C<cas>`,
    /// which frees it), so that a get-or-load's leased read can still win it.
    nonisolated(nonsending) private func accept(
        _ response: MetaResponse, resolved: (key: [UInt8], digest: KeyDigest), from member: ServerPool.Member,
        handsBackWin: Bool = true
    ) async -> TierEntry? {
        let decoded = (response.value ?? ByteBuffer()).withUnsafeReadableBytes {
            RemoteEnvelope.decode($0, digest: resolved.digest, maxPayloadLength: 1 << 30)
        }
        switch decoded {
        case .success(let envelope):
            if handsBackWin, response.hasFlag(UInt8(ascii: "W")), let cas = response.integerFlag(UInt8(ascii: "c")) {
                _ = try? await send(
                    MetaCommand(.delete, key: resolved.key, flags: [.invalidate, .compareCAS(cas)]), to: member, key: resolved.key, isWrite: false)
            }
            let now = configuration.now()
            var expiration = envelope.expirationDate
            // A local copy never outlives the server's remaining TTL.
            // (`t-1`, no TTL, reads as no number.)
            if let seconds = response.integerFlag(UInt8(ascii: "t")) {
                let serverEnd = now.addingTimeInterval(Double(seconds))
                expiration = min(expiration ?? serverEnd, serverEnd)
            }
            if let expiration, expiration <= now {
                counters.misses.add(1, ordering: .relaxed)
                return nil
            }
            return TierEntry(data: envelope.payload, expirationDate: expiration, metadata: envelope.metadata)
        case .failure:
            counters.rejected.add(1, ordering: .relaxed)
            counters.misses.add(1, ordering: .relaxed)
            // Delete exactly the bytes refused: a value written since then is left alone.
            let cas = response.integerFlag(UInt8(ascii: "c")).map { [MetaFlag.compareCAS($0)] } ?? []
            _ = try? await send(MetaCommand(.delete, key: resolved.key, flags: cas), to: member, key: resolved.key, isWrite: false)
            return nil
        }
    }
}

/// The store's own counters (relaxed atomics).
final class StoreCounters: Sendable {
    let hits = Atomic<Int>(0), misses = Atomic<Int>(0), writes = Atomic<Int>(0), errors = Atomic<Int>(0)
    let rejected = Atomic<Int>(0), oversized = Atomic<Int>(0), leaseWins = Atomic<Int>(0), leaseWaits = Atomic<Int>(0)
    let staleServes = Atomic<Int>(0), rejectedFills = Atomic<Int>(0), batchReads = Atomic<Int>(0)
    let batchWrites = Atomic<Int>(0)

    func snapshot() -> MemcachedStore.Statistics {
        var statistics = MemcachedStore.Statistics()
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
        statistics.batchWrites = batchWrites.load(ordering: .relaxed)
        return statistics
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
#endif
