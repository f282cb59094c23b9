#if Memcached
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
    /// Settings of a ``MemcachedStore``.
    public struct Configuration: Sendable {
        /// The server's host name or address. Defaults to `127.0.0.1`.
        public var host: String
        /// The server's port. Defaults to 11211.
        public var port: Int
        /// Prefix of every key this store writes: printable ASCII, no spaces, ≤ 150 bytes.
        /// Defaults to `"larder:"`.
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
        /// The server's item size limit (`-I`); larger envelopes stay local. Defaults to 1 MiB
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
        /// The event loops the connections run on; `nil` uses NIO's shared group.
        public var eventLoopGroup: (any EventLoopGroup)?
        /// The clock the envelope's expiry and the TTL mapping use. Defaults to `Date()`.
        public var now: @Sendable () -> Date

        /// A configuration with a default for every setting.
        public init(
            host: String = "127.0.0.1", port: Int = 11211, namespace: String = "larder:", connectionCount: Int = 2,
            deadline: Duration = .milliseconds(100),
            reconnectBackoff: (initial: Duration, maximum: Duration) = (.milliseconds(20), .milliseconds(500)),
            breakerThreshold: Int = 8, breakerCooldown: Duration = .milliseconds(250),
            maxItemSize: Int = 1_048_576 - 512, localCopyMaxAge: Duration? = .seconds(60),
            copiesHitsToLocalTiers: Bool = false, defaultExpiry: Expiry = .seconds(3_600),
            leaseDuration: Duration = .seconds(30), leaseWaitLimit: Duration = .seconds(2),
            eventLoopGroup: (any EventLoopGroup)? = nil,
            now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.host = host
            self.port = port
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
        /// Reads of many keys in one quiet batch (``MemcachedStore/entries(forKeys:)``).
        public var batchReads = 0

        public init() {}
    }

    public let configuration: Configuration
    public let tierID: StorageTier
    private let pool: ConnectionPool
    private let remoteKey: RemoteKey
    private let counters = StoreCounters()

    /// Connects lazily to the configured server.
    ///
    /// - Throws: ``Larder/StorageError`` with code `.invalidConfiguration` for a bad namespace or limit.
    public init(configuration: Configuration = .init(), tierID: StorageTier = .remote) throws {
        guard configuration.connectionCount >= 1, configuration.breakerThreshold >= 1, configuration.maxItemSize > RemoteEnvelope.headerLength,
              configuration.deadline > .zero, (1...65_535).contains(configuration.port) else {
            throw StorageError.invalidConfiguration(field: "MemcachedStore.Configuration", value: "\(configuration.port)",
                                                    reason: "connectionCount, breakerThreshold ≥ 1, deadline > 0, a valid port and item size")
        }
        self.configuration = configuration
        self.tierID = tierID
        remoteKey = try RemoteKey(namespace: configuration.namespace)
        pool = ConnectionPool(
            settings: .init(
                host: configuration.host, port: configuration.port, connectionCount: configuration.connectionCount,
                deadline: TimeAmount(configuration.deadline),
                reconnectBackoff: (TimeAmount(configuration.reconnectBackoff.initial), TimeAmount(configuration.reconnectBackoff.maximum)),
                breakerThreshold: configuration.breakerThreshold, breakerCooldown: TimeAmount(configuration.breakerCooldown),
                maxValueLength: max(configuration.maxItemSize, 1 << 20) * 2),
            group: configuration.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton)
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
    public var taskExecutor: any TaskExecutor { pool.executor }

    /// One executor per connection, each running tasks on that connection's event loop (the
    /// first is ``taskExecutor``). Many concurrent callers spread over them use every loop, and
    /// each caller's commands go out on its own loop's connection.
    public var taskExecutors: [any TaskExecutor] { pool.executors }

    /// The store's counters.
    public var statistics: Statistics {
        var statistics = counters.snapshot()
        statistics.timeouts = pool.counters.timeouts.load(ordering: .relaxed)
        statistics.breakerOpens = pool.counters.breakerOpens.load(ordering: .relaxed)
        statistics.breakerRejections = pool.counters.breakerRejections.load(ordering: .relaxed)
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
        let response = try await send(MetaCommand(.get, key: resolved.key, flags: Self.getFlags))
        switch response.status {
        case .miss:
            counters.misses.add(1, ordering: .relaxed)
            return nil
        case .value:
            guard let entry = await accept(response, resolved: resolved) else { return nil }
            counters.hits.add(1, ordering: .relaxed)
            return entry
        default:
            throw unexpected(response)
        }
    }

    /// The entries of `keys` that are present, read in one quiet batch (`mg … q` per key, then
    /// `mn`) on one connection: misses cost no reply. ``Larder/Storage``'s
    /// `values(forKeys:tiers:)` reaches it for the keys its faster tiers miss.
    ///
    /// - Throws: ``Larder/StorageError`` (code `.io`) when the batch fails.
    nonisolated(nonsending) public func entries(forKeys keys: [String]) async throws -> [String: TierEntry] {
        let resolved = keys.map { remoteKey.resolve($0) }
        var commands: [MetaCommand] = []
        commands.reserveCapacity(keys.count + 1)
        for key in resolved { commands.append(MetaCommand(.get, key: key.key, flags: Self.quietGetFlags)) }
        commands.append(MetaCommand(.noop))
        let responses: [MetaResponse]
        counters.batchReads.add(1, ordering: .relaxed)
        do {
            responses = try await pool.sendBatch(commands)
        } catch {
            counters.errors.add(1, ordering: .relaxed)
            throw StorageError(code: .io, message: "memcached \(configuration.host):\(configuration.port): \(error)", cause: error)
        }
        var found: [String: TierEntry] = [:]
        found.reserveCapacity(keys.count)
        // By index: each reply is read where it lies (a reply holds two buffers to retain).
        for index in keys.indices where index < responses.count {
            switch responses[index].status {
            case .value:
                if let entry = await accept(responses[index], resolved: resolved[index]) {
                    counters.hits.add(1, ordering: .relaxed)
                    found[keys[index]] = entry
                }
            case .miss:
                counters.misses.add(1, ordering: .relaxed)
            default:
                counters.errors.add(1, ordering: .relaxed)
            }
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
        let response = try await send(MetaCommand(.set(envelope), key: resolved.key, flags: [.ttl(ttl)]))
        guard response.status == .stored else { throw unexpected(response) }
        counters.writes.add(1, ordering: .relaxed)
    }

    @discardableResult
    nonisolated(nonsending) public func removeValue(forKey key: String) async throws -> Bool {
        let response = try await send(MetaCommand(.delete, key: remoteKey.key(for: key)))
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
    /// client's values). Remote values end by their TTL.
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
        let response = try await send(MetaCommand(
            .get, key: resolved.key, flags: [.value, .remainingTTL, .cas, .vivify(seconds)]))
        guard response.status == .value else {
            if response.status == .miss { return .busy(stale: nil) }
            throw unexpected(response)
        }
        let won = response.hasFlag(UInt8(ascii: "W"))
        let busy = response.hasFlag(UInt8(ascii: "Z"))
        let stale = response.hasFlag(UInt8(ascii: "X"))
        // A placeholder the lease created (or that another caller's lease holds) is empty.
        let entry = (response.value?.readableBytes ?? 0) > 0 ? await accept(response, resolved: resolved) : nil
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
        guard case .token(let ttl) = RemoteTTL.make(expirationDate: expirationDate, now: now),
              envelope.readableBytes <= configuration.maxItemSize else {
            // Not cacheable remotely: release the placeholder so waiters stop waiting.
            _ = try await send(MetaCommand(.delete, key: resolved.key, flags: [.compareCAS(lease.token)]))
            return false
        }
        let response = try await send(MetaCommand(
            .set(envelope), key: resolved.key, flags: [.ttl(ttl), .compareCAS(lease.token)]))
        switch response.status {
        case .stored:
            counters.writes.add(1, ordering: .relaxed)
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
        let response = try await send(MetaCommand(.delete, key: remoteKey.key(for: key), flags: [.invalidate]))
        switch response.status {
        case .stored: return true
        case .notFound: return false
        default: throw unexpected(response)
        }
    }

    // MARK: - Helpers

    /// Sends one command, turning a failure into a ``Larder/StorageError`` and counting it.
    nonisolated(nonsending) private func send(_ command: MetaCommand) async throws -> MetaResponse {
        do {
            let response = try await pool.send(command)
            if response.status.isError { throw unexpected(response) }
            return response
        } catch let error as StorageError {
            counters.errors.add(1, ordering: .relaxed)
            throw error
        } catch {
            counters.errors.add(1, ordering: .relaxed)
            throw StorageError(code: .io, message: "memcached \(configuration.host):\(configuration.port): \(error)", cause: error)
        }
    }

    private func unexpected(_ response: MetaResponse) -> StorageError {
        let error = MemcachedError(.server, "unexpected reply \(response.status)")
        return StorageError(code: .io, message: "memcached \(configuration.host):\(configuration.port): \(error)", cause: error)
    }

    /// The flags of a plain read and of one read in a quiet batch (made once, not per call).
    private static let getFlags: [MetaFlag] = [.value, .remainingTTL, .cas]
    private static let quietGetFlags: [MetaFlag] = [.value, .remainingTTL, .cas, .quiet]

    /// Decodes a `VA` reply for the resolved key; a refused envelope is counted, deleted and a miss.
    nonisolated(nonsending) private func accept(_ response: MetaResponse, resolved: (key: [UInt8], digest: KeyDigest)) async -> TierEntry? {
        let decoded = (response.value ?? ByteBuffer()).withUnsafeReadableBytes {
            RemoteEnvelope.decode($0, digest: resolved.digest, maxPayloadLength: 1 << 30)
        }
        switch decoded {
        case .success(let envelope):
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
            _ = try? await send(MetaCommand(.delete, key: resolved.key, flags: cas))
            return nil
        }
    }
}

/// The store's own counters (relaxed atomics).
final class StoreCounters: Sendable {
    let hits = Atomic<Int>(0), misses = Atomic<Int>(0), writes = Atomic<Int>(0), errors = Atomic<Int>(0)
    let rejected = Atomic<Int>(0), oversized = Atomic<Int>(0), leaseWins = Atomic<Int>(0), leaseWaits = Atomic<Int>(0)
    let staleServes = Atomic<Int>(0), rejectedFills = Atomic<Int>(0), batchReads = Atomic<Int>(0)

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
