public import Foundation
internal import Synchronization

/// A cache of decoded values in memory over an ordered list of byte tiers.
///
/// `Storage` composes one ``MemoryStore`` of decoded values and the byte tiers behind it,
/// fastest first: a ``DiskStore`` when the configuration names a directory, then any
/// ``CacheTier``s given at creation. The rules that compose them are written once, here:
///
/// - **Reads** look in memory, then in each named tier in order. A hit in a byte tier is decoded
///   once and copied (promoted) into the faster tiers the call names, with its remaining
///   lifetime. Bytes the transformer cannot decode are a miss that removes them.
/// - **Writes** reach the named byte tiers slowest first, then memory; every tier the call does
///   not name loses its older value for the key, so it can never resurface. If a tier refuses
///   the write, the key is removed from every faster tier and the error is thrown: a faster tier
///   never holds a value a slower one refused.
/// - **Removals** reach the named tiers slowest first, then memory.
/// - **Ordering:** writes and removals of one key take turns (see the note below); a read that
///   starts after a write returned sees that write, and a promotion never puts an older value
///   over a newer write or a removal.
///
/// ```swift
/// let storage = try Storage<URL, Data>(
///     configuration: .init(directory: cachesURL.appendingPathComponent("thumbnails")),
///     transformer: .data)
/// try storage.setValue(bytes, forKey: url, expiry: .seconds(3_600))
/// let cached = try storage.value(forKey: url)        // memory hit
/// let entry = try storage.entry(forKey: url)         // value, tier and expiration
/// try storage.removeValue(forKey: url, tiers: .all)
/// ```
///
/// No thread lock is held across I/O or caller code: the transformer, the cost closure and the
/// tiers' I/O run outside every lock. Writes of one key wait for each other (a thread blocks, a
/// task suspends); reads never wait for a write.
///
/// - Important: The synchronous API reaches memory and the local tiers (``LocalCacheTier``,
///   such as the disk) and does their I/O on the calling thread; the `async` forms run that work
///   on Larder's I/O queue and are the only ones that reach tiers that are not local.
public final class Storage<Key: CacheKey, Value> {
    /// The configuration the storage was created with.
    public let configuration: Configuration
    /// The memory tier of decoded values.
    ///
    /// For inspection; writes through it bypass the storage's per-key ordering.
    public let memory: MemoryStore<Key, Value>
    /// The byte tiers behind memory, fastest first.
    ///
    /// For inspection; writes through them bypass the storage's per-key ordering.
    public let tiers: [any CacheTier]
    /// The value codec for the byte tiers.
    public let transformer: Transformer<Value>

    /// The byte tiers that synchronous calls reach (a prefix of nothing in particular: every
    /// local tier, in order).
    let localTiers: [any LocalCacheTier]
    /// Whether every byte tier is local, so an async call can run the synchronous path in one
    /// hop to the I/O queue.
    let allTiersLocal: Bool
    /// The counters of each of ``localTiers``, in the same order (looked up once, not per read).
    let localTierCounters: [TierCounters]
    /// The identity of each of ``localTiers``, in the same order (read once, not per read).
    let localTierIDs: [StorageTier]
    /// Whether ``Configuration/defaultTiers`` names each of ``localTiers``, in the same order.
    let defaultTiersNameLocal: [Bool]
    /// Each of ``tiers`` as a local tier, or `nil`, in the same order (cast once, not per call).
    let localTierAt: [(any LocalCacheTier)?]
    /// The storage's one local tier when it has exactly one and it is a ``DiskStore`` (the usual
    /// case), and the counters of its one local tier (counters of no tier when it has several):
    /// a value read calls the store directly rather than through the tier protocol's witness
    /// table (see ``readValueBelowMemory(forKey:tiers:)``).
    let soleDiskStore: DiskStore?
    let soleLocalTierCounters: TierCounters
    /// Each of ``tiers`` as a shared tier, or `nil`, in the same order (cast once, not per call).
    let sharedTierAt: [(any SharedCacheTier)?]
    let turns: KeyTurns<Key>
    /// The disk tier's watch of the changes other stores make to its directory, when memory
    /// follows them (``Configuration/followsDirectory``); see `Storage+Coherence.swift`.
    let changeWatch: ChangeWatch?
    /// Whether ``changeWatch`` is set (read inline on every memory hit).
    @usableFromInline let followsDirectory: Bool
    /// The keys whose local copies an ``InvalidatingCacheTier`` guards (`nil` without one).
    let localCopyGuard: LocalCopyGuard<Key>?
    /// Per-key turns of the network step of async writes and removals with a shared tier: only
    /// async callers ever wait on them, so no thread blocks on a remote round trip.
    let sharedTurns = KeyTurns<Key>()
    /// Get-or-load: one coalesced load per key in flight.
    let loads = RequestCoalescer<Key, LoadedValue<Entry>>()
    /// Get-or-load: the loader runs in flight, one per key, which may outlive their callers.
    let loadRuns = LoadRuns<Key, LoadedValue<Entry>>()
    /// Get-or-load failures remembered for their `failureExpiry`.
    let failures = FailureMemory<Key>()
    /// Keys whose loader failed while a stale value was served, for `failSafeThrottle`.
    let failSafeThrottles = FailureMemory<Key>()
    /// The last load duration of recently loaded keys, for probabilistic early refresh.
    let loadDurations = LoadDurations<Key>()
    /// The stale copies of memory's values, when the storage keeps stale copies
    /// (``LoadOptions/maxStale`` in ``Configuration/loading``); see `Storage+FailSafe.swift`.
    @usableFromInline let staleCopies: MemoryStore<Key, Value>?
    /// The tags of memory's values (see `Storage+Tags.swift`).
    @usableFromInline let memoryTags = MemoryTags<Key>()
    /// The invalidation times of the shared tiers this process knows (see `Storage+Tags.swift`).
    let sharedInvalidations = SharedInvalidations()
    /// The observers of ``events(bufferSize:)``.
    @usableFromInline let broadcaster: EventBroadcaster
    @usableFromInline let counters: Counters
    /// Whether ``Configuration/defaultTiers`` names memory (read once, not per read).
    @usableFromInline let defaultTiersIncludeMemory: Bool
    /// Whether the storage has a shared tier, which only the `async` API reaches: each
    /// synchronous call then checks that it names none (see ``checkSynchronous(_:)``).
    @usableFromInline let hasAsyncOnlyTiers: Bool
    /// The identities of every tier: memory first, then the byte tiers in order.
    public let tierIDs: [StorageTier]

    /// Creates a storage.
    ///
    /// - Parameters:
    ///   - configuration: The tiers' settings; without a directory there is no disk tier.
    ///   - additionalTiers: Byte tiers placed after the disk tier, in order (slower ones last).
    ///   - transformer: The codec between values and the byte tiers' bytes.
    /// - Throws: ``StorageError`` with code ``StorageError/Code/invalidConfiguration`` for a bad
    ///   configuration of any tier or two tiers with one identity, or the errors of
    ///   ``DiskStore/init(directory:configuration:)``.
    public init(
        configuration: Configuration = .init(), additionalTiers: [any CacheTier] = [], transformer: Transformer<Value>
    ) throws {
        self.configuration = configuration
        self.defaultTiersIncludeMemory = configuration.defaultTiers.includesMemory
        self.transformer = transformer
        // The tiers the storage creates report their evictions and expirations to its events.
        let broadcaster = EventBroadcaster()
        self.broadcaster = broadcaster
        self.memory = try MemoryStore(
            configuration: configuration.effectiveMemory,
            removals: RemovalReporter(isActive: { broadcaster.hasObservers }) { key, kind in
                broadcaster.send(StorageEvent(kind: kind, key: key.cacheKey, tier: .memory))
            })
        var tiers: [any CacheTier] = []
        if let directory = configuration.directory {
            tiers.append(try DiskStore(
                directory: directory, configuration: configuration.effectiveDisk,
                removals: RemovalReporter(isActive: { broadcaster.hasObservers }) { key, kind in
                    broadcaster.send(StorageEvent(kind: kind, key: key, tier: .disk))
                }))
        }
        tiers += additionalTiers
        let ids = [StorageTier.memory] + tiers.map(\.tierID)
        if let duplicate = ids.first(where: { id in ids.filter { $0 == id }.count > 1 }) {
            throw StorageError.invalidConfiguration(
                field: "tiers", value: ids.map(\.name).joined(separator: ", "),
                reason: "the tier \(duplicate) appears twice")
        }
        self.tiers = tiers
        self.tierIDs = ids
        self.localTiers = tiers.compactMap { $0 as? any LocalCacheTier }
        self.allTiersLocal = localTiers.count == tiers.count
        self.hasAsyncOnlyTiers = !allTiersLocal
        self.counters = Counters(tiers: tiers.map(\.tierID))
        self.localTierCounters = localTiers.map { [counters] in counters.tier($0.tierID) }
        self.localTierIDs = localTiers.map(\.tierID)
        self.defaultTiersNameLocal = localTierIDs.map(configuration.defaultTiers.contains)
        self.localTierAt = tiers.map { $0 as? any LocalCacheTier }
        self.soleDiskStore = localTiers.count == 1 ? localTiers[0] as? DiskStore : nil
        self.soleLocalTierCounters = localTiers.count == 1 ? localTierCounters[0] : TierCounters()
        self.sharedTierAt = tiers.map { $0 as? any SharedCacheTier }
        let invalidating = tiers.compactMap { $0 as? any InvalidatingCacheTier }
        self.localCopyGuard = invalidating.isEmpty ? nil : LocalCopyGuard(tiers: invalidating)
        do {
            try configuration.loading.validate()
        } catch let error as StorageError {
            throw StorageError.invalidConfiguration(field: "loading", value: "\(configuration.loading)", reason: error.message)
        }
        self.staleCopies = configuration.loading.maxStale == nil ? nil : try MemoryStore(configuration: configuration.effectiveMemory)
        // A turn held while another store changed its key drops memory's copy before it ends.
        // `MemoryStore` is thread-safe whatever its `Value` (one lock guards its state).
        nonisolated(unsafe) let memory = memory, staleCopies = staleCopies
        turns = KeyTurns { key in
            memory.removeValue(forKey: key)
            staleCopies?.removeValue(forKey: key)
        }
        let disk = configuration.followsDirectory ? tiers.lazy.compactMap({ $0 as? DiskStore }).first : nil
        changeWatch = try disk?.makeChangeWatch()
        followsDirectory = changeWatch != nil
    }

    /// Creates a storage with a configuration edited by `configure`.
    public convenience init(transformer: Transformer<Value>, _ configure: (inout Configuration) -> Void) throws {
        var configuration = Configuration()
        configure(&configuration)
        try self.init(configuration: configuration, transformer: transformer)
    }

    /// The disk tier, if the storage has one; for inspection (see ``tiers``).
    public var disk: DiskStore? {
        tiers.lazy.compactMap { $0 as? DiskStore }.first
    }

    /// The byte tier with identity `id`, if the storage has one; for inspection.
    public func tier(_ id: StorageTier) -> (any CacheTier)? {
        tiers.first { $0.tierID == id }
    }

    // MARK: - Reading

    /// The value for `key` from the first tier that holds it, or `nil` on a miss.
    ///
    /// - Parameter tiers: Where to look; defaults to the configuration's default tiers.
    /// - Throws: ``StorageError`` for I/O failures, or when `tiers` names no tier of the storage.
    @inlinable
    public func value(forKey key: Key, tiers: StorageTiers? = nil) throws -> Value? {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        // A memory hit builds no `Entry` (its tier and date) only to drop it.
        if tiers?.includesMemory ?? defaultTiersIncludeMemory, let found = memoryValue(forKey: key) { return found }
        return try valueBelowMemory(forKey: key, tiers: tiers)
    }

    /// The value for `key` with the tier that answered and its expiration, or `nil` on a miss.
    ///
    /// A hit below memory is promoted into the faster tiers `tiers` names, with the entry's
    /// remaining lifetime. Bytes the transformer cannot decode are a miss that removes them.
    @inlinable
    public func entry(forKey key: Key, tiers: StorageTiers? = nil) throws -> Entry? {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        if let found = memoryEntry(forKey: key, tiers: tiers) { return found }
        return try entryBelowMemory(forKey: key, tiers: tiers)
    }

    /// The memory half of a read: no I/O, safe on any executor.
    @inlinable
    func memoryEntry(forKey key: Key, tiers: StorageTiers) -> Entry? {
        guard tiers.includesMemory else { return nil }
        if followsDirectory { followDirectory() }
        guard let found = memory.read(key, forOwner: true) else { return nil }
        let expirationDate = found.expiration == .infinity ? nil : Date(timeIntervalSinceReferenceDate: found.expiration)
        if found.sliding > 0, let expirationDate { renewBelowMemory(key, until: expirationDate) }
        return Entry(value: found.value, tier: .memory, expirationDate: expirationDate)
    }

    /// The memory half of ``value(forKey:tiers:)``, for a call that names memory.
    @inlinable
    func memoryValue(forKey key: Key) -> Value? {
        if followsDirectory { followDirectory() }
        guard let found = memory.read(key, forOwner: true) else { return nil }
        if found.sliding > 0, found.expiration != .infinity {
            renewBelowMemory(key, until: Date(timeIntervalSinceReferenceDate: found.expiration))
        }
        return found.value
    }

    /// A memory hit renewed a sliding lifetime: the disk tiers' copies are renewed too, in their
    /// read logs (written with their next ranking of reads, never on this read's path).
    @usableFromInline
    func renewBelowMemory(_ key: Key, until renewed: Date) {
        let cacheKey = key.cacheKey
        for case let disk as DiskStore in localTiers { disk.renewSlidingLifetime(forKey: cacheKey, until: renewed) }
    }

    /// The rest of a read after a memory miss: each named local tier in order.
    ///
    /// The entry point a client's inlined ``entry(forKey:tiers:)`` calls is this thin wrapper:
    /// its generic form only checks for the prespecialized types and forwards, so that check
    /// costs no metadata lookups (a generic body would look up `Optional<Value>` on every call
    /// before it could dispatch).
    @usableFromInline
    @_specialize(where Key == String, Value == Data)
    func entryBelowMemory(forKey key: Key, tiers: StorageTiers) throws -> Entry? {
        try readBelowMemory(forKey: key, tiers: tiers)
    }

    /// The value half of ``value(forKey:tiers:)`` below memory (`tiers` `nil` for the default
    /// tiers); a thin entry point like ``entryBelowMemory(forKey:tiers:)``.
    @usableFromInline
    @_specialize(where Key == String, Value == Data)
    func valueBelowMemory(forKey key: Key, tiers: StorageTiers?) throws -> Value? {
        try readValueBelowMemory(forKey: key, tiers: tiers)
    }

    /// A read that can promote nothing (one local tier, memory not named) asks the tier for its
    /// bytes alone: no entry, dates and metadata built only to be dropped. Every other read
    /// takes the entry path.
    ///
    /// A disk tier and the counters are reached through stored properties of their own (see
    /// ``soleDiskStore``), and the default tiers are not copied to be compared: each array
    /// element or copy read on this path cost a retain and a release, atomic operations (a
    /// `Storage` miss took three pairs more than the bare store's).
    @inline(never)
    private func readValueBelowMemory(forKey key: Key, tiers: StorageTiers?) throws -> Value? {
        guard localTiers.count == 1,
              tiers.map({ !$0.includesMemory && $0.contains(localTierIDs[0]) }) ?? (!defaultTiersIncludeMemory && defaultTiersNameLocal[0]) else {
            return try readBelowMemory(forKey: key, tiers: tiers ?? configuration.defaultTiers)?.value
        }
        // (The counters are used in place: a strong copy is retained and released. The counts
        // wrap, as no count of calls can reach 2^63: one atomic add, not a loop that checks for
        // overflow.)
        let found: Data?
        if let disk = soleDiskStore {
            found = try disk.value(forKey: key.cacheKey)
        } else {
            found = try localTiers[0].value(forKey: key.cacheKey)
        }
        guard let data = found else {
            soleLocalTierCounters.misses.wrappingAdd(1, ordering: .relaxed)
            counters.misses.wrappingAdd(1, ordering: .relaxed)
            return nil
        }
        guard let value = decodeOrDrop(data, forKey: key, from: localTiers[0], token: nil) else {
            counters.misses.wrappingAdd(1, ordering: .relaxed)
            return nil
        }
        soleLocalTierCounters.hits.wrappingAdd(1, ordering: .relaxed)
        return value
    }

    @inline(never)
    private func readBelowMemory(forKey key: Key, tiers: StorageTiers) throws -> Entry? {
        // Which local tiers the call names: for the default tiers (the same array, so the
        // comparison is one pointer test) worked out once at creation, not by comparing names.
        let namedByDefault = tiers == configuration.defaultTiers ? defaultTiersNameLocal : nil
        func names(_ position: Int) -> Bool {
            namedByDefault?[position] ?? tiers.contains(localTierIDs[position])
        }
        // Only a call that names no local tier (nor memory) pays the full check of its names.
        if !tiers.includesMemory, !localTiers.indices.contains(where: names) { try checkNamesATier(tiers) }
        // A hit is copied into memory or a faster local tier; a read that can do neither (one
        // local tier, memory not named) takes no token, and checks a drop another way.
        let token = tiers.includesMemory || localTiers.count > 1 ? turns.token(for: key) : nil
        let cacheKey = key.cacheKey
        for position in localTiers.indices where names(position) {
            let tier = localTiers[position]
            let tierCounters = localTierCounters[position]
            guard let found = try tier.entry(forKey: cacheKey) else {
                tierCounters.misses.add(1, ordering: .relaxed)
                continue
            }
            guard let value = decodeOrDrop(found.data, forKey: key, from: tier, token: token) else { continue }
            tierCounters.hits.add(1, ordering: .relaxed)
            if let token, tiers.includesMemory || localTiers.indices[..<position].contains(where: names) {
                let cost = tiers.includesMemory ? memoryCost(of: value) : nil
                turns.withTurnIfUnchanged(key, since: token) {
                    promote(found, value: value, cost: cost, forKey: key, above: position, tiers: tiers)
                }
            }
            return Entry(value: value, tier: localTierIDs[position], expirationDate: found.expirationDate)
        }
        counters.misses.add(1, ordering: .relaxed)
        return nil
    }

    /// Decodes bytes a tier returned; bytes that do not decode are removed from that tier
    /// (unless the key was written meanwhile) and read as a miss.
    ///
    /// - Parameter token: Taken before the read; `nil` when the read took none, and then the
    ///   bytes are removed only if a second read, after a fresh token, finds them unchanged.
    private func decodeOrDrop(
        _ data: Data, forKey key: Key, from tier: any LocalCacheTier, token: KeyTurns<Key>.Token?
    ) -> Value? {
        do {
            return try transformer.decode(data)
        } catch {
            counters.decodingFailures.add(1, ordering: .relaxed)
            counters.tier(tier.tierID).misses.add(1, ordering: .relaxed)
            let cacheKey = key.cacheKey
            var since = token
            if since == nil {
                let fresh = turns.token(for: key)
                if let again = try? tier.value(forKey: cacheKey), again == data { since = fresh }
            }
            if let since { _ = try? turns.withTurnIfUnchanged(key, since: since) { try tier.removeValue(forKey: cacheKey) } }
            return nil
        }
    }

    /// Copies a hit from local tier `position` into the faster named tiers, holding the key's
    /// turn. A tier that refuses the copy is skipped: the read has its value already.
    private func promote(
        _ found: TierEntry, value: Value, cost: Int?, forKey key: Key, above position: Int, tiers: StorageTiers
    ) {
        let expiry = found.expiry
        for faster in localTiers[..<position] where tiers.contains(faster.tierID) {
            do {
                try faster.setValue(found.data, forKey: key.cacheKey, expiry: expiry, metadata: found.metadata,
                                    isCompressible: transformer.isCompressible(value))
                counters.tier(faster.tierID).promotions.add(1, ordering: .relaxed)
            } catch {
                counters.tier(faster.tierID).errors.add(1, ordering: .relaxed)
            }
        }
        if let cost, memory.setValue(value, forKey: key, cost: cost, expiry: expiry) {
            counters.memoryPromotions.add(1, ordering: .relaxed)
        }
    }

    /// Whether any of `tiers` holds a live value for `key`. Reads no value and does not change
    /// recency.
    public func containsValue(forKey key: Key, tiers: StorageTiers? = nil) throws -> Bool {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        if tiers.includesMemory, currentMemory.containsValue(forKey: key) { return true }
        for tier in localTiers where tiers.contains(tier.tierID) {
            if try tier.containsValue(forKey: key.cacheKey) { return true }
        }
        return false
    }

    /// The value for `key`, or `nil` on a miss or any error — for call sites where a cache
    /// failure should simply mean "not cached".
    public subscript(key: Key) -> Value? {
        (try? value(forKey: key)) ?? nil
    }

    /// The cache keys (``CacheKey/cacheKey``) of live entries that start with `prefix`, from
    /// every named tier, sorted and without repeats.
    public func keys(withPrefix prefix: String, tiers: StorageTiers? = nil) throws -> [String] {
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        var found = Set<String>()
        if tiers.includesMemory {
            if followsDirectory { followDirectory() }
            for key in memory.keys() where key.cacheKey.hasPrefix(prefix) { found.insert(key.cacheKey) }
        }
        for tier in localTiers where tiers.contains(tier.tierID) {
            found.formUnion(withoutStaleCopyKeys(try tier.keys(withPrefix: prefix)))
        }
        return found.sorted()
    }

    // MARK: - Writing

    /// Stores `value` for `key` in `tiers`, and removes any older value from the other tiers.
    ///
    /// The byte tiers are written slowest first, then memory. If a tier throws, the key is
    /// removed from every faster tier before the error is rethrown. Memory holds the value
    /// itself, never its encoded bytes.
    ///
    /// - Parameters:
    ///   - expiry: When the entry expires; `nil` takes each tier's default expiry.
    ///   - tiers: Where to store; defaults to the configuration's default tiers.
    /// - Throws: ``StorageError`` with code ``StorageError/Code/encoding`` when the transformer
    ///   refuses the value (no tier changes), ``StorageError/Code/invalidInput`` for an expiry
    ///   that is not finite or tiers the storage does not have, or a tier's error.
    @inlinable
    public func setValue(_ value: Value, forKey key: Key, expiry: Expiry? = nil, tiers: StorageTiers? = nil) throws {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        guard self.tiers.isEmpty else {
            return try setValueThroughTiers(value, forKey: key, expiry: expiry, tiers: tiers ?? configuration.defaultTiers)
        }
        // Memory alone: no promotion can race a write, so the store's own lock orders writes.
        // Memory is always a tier, so only a call that does not name it pays the full check.
        if !(tiers?.includesMemory ?? defaultTiersIncludeMemory) { try checkNamesATier(tiers ?? configuration.defaultTiers) }
        if let expiry, !expiry.isValid {
            throw StorageError(code: .invalidInput, message: "expiry \(expiry) is not a finite time")
        }
        memory.setValue(value, forKey: key, cost: nil, expiry: expiry, forOwner: true)
        if staleCopies != nil { dropStaleCopyInMemory(forKey: key) }
        if memoryTags.isInUse { dropMemoryTags(forKey: key) }
        if broadcaster.hasObservers { emit(.written, key.cacheKey, .memory) }
    }

    /// A write when the storage has byte tiers: slowest first, under the key's turn.
    ///
    /// Prespecialized for `Storage<String, Data>`, as the read's entry points are: the generic
    /// body looked up type metadata at run time on every write (a tenth of a disk write's
    /// instructions under callgrind, more than the rest of `Storage`'s own work).
    @usableFromInline
    @_specialize(where Key == String, Value == Data)
    func setValueThroughTiers(_ value: Value, forKey key: Key, expiry: Expiry?, tiers: StorageTiers) throws {
        let write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        try turns.withTurn(key) { try applyWrite(write, value, forKey: key, expiry: expiry, tiers: tiers) }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// The tier writes of a prepared write, holding the key's turn: each local tier slowest
    /// first (the named ones get the value, the others lose theirs), then memory. `skipped` is
    /// a tier already written (by an insert-if-absent).
    func applyWrite(
        _ write: PreparedWrite, _ value: Value, forKey key: Key, expiry: Expiry?, tiers: StorageTiers,
        skipping skipped: Int? = nil
    ) throws {
        let cacheKey = key.cacheKey
        // The tier an insert-if-absent already wrote loses its stale copy too.
        if let skipped, staleCopies != nil { try dropStaleCopy(forKey: key, in: localTiers[skipped]) }
        for position in localTiers.indices.reversed() where position != skipped {
            let tier = localTiers[position]
            do {
                if tiers.contains(tier.tierID), let encoded = write.encoded {
                    try setLocalBytes(write, encoded, forKey: cacheKey, expiry: expiry, in: tier)
                    emit(.written, cacheKey, tier.tierID)
                } else if try tier.removeValue(forKey: cacheKey) {
                    emit(.removed, cacheKey, tier.tierID)
                }
                try dropStaleCopy(forKey: key, in: tier)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                removeFromTiers(fasterThan: position, key: key)
                throw error
            }
        }
        if let cost = write.cost {
            if memory.setValue(value, forKey: key, cost: cost, expiry: expiry) { emit(.written, cacheKey, .memory) }
            setMemoryTags(write.tags, forKey: key)
        } else {
            if memory.removeValue(forKey: key) { emit(.removed, cacheKey, .memory) }
            dropMemoryTags(forKey: key)
        }
        dropStaleCopyInMemory(forKey: key)
    }

    /// What a write needs before it takes the key's turn: caller code (transformer, cost
    /// closure) runs here, outside any turn or lock.
    struct PreparedWrite {
        var encoded: Data?
        var isCompressible: Bool
        var cost: Int?
        /// The value's tags (see `Storage+Tags.swift`).
        var tags: Set<String> = []
    }

    func prepareWrite(_ value: Value, expiry: Expiry?, tiers: StorageTiers) throws -> PreparedWrite {
        try checkNamesATier(tiers)
        if let expiry, !expiry.isValid {
            throw StorageError.invalidInput("expiry \(expiry) is not a finite time")
        }
        let needsBytes = self.tiers.contains { tiers.contains($0.tierID) }
        let encoded: Data?
        do {
            encoded = needsBytes ? try transformer.encode(value) : nil
        } catch {
            throw StorageError.wrappingEncoding(error)
        }
        return PreparedWrite(
            encoded: encoded,
            isCompressible: needsBytes && transformer.isCompressible(value),
            cost: tiers.includesMemory ? memoryCost(of: value) : nil)
    }

    /// Best effort after a failed write: no tier faster than `position` may keep a value.
    func removeFromTiers(fasterThan position: Int, key: Key) {
        for tier in localTiers[..<position] {
            _ = try? tier.removeValue(forKey: key.cacheKey)
            try? dropStaleCopy(forKey: key, in: tier)
        }
        memory.removeValue(forKey: key)
        dropStaleCopyInMemory(forKey: key)
        dropMemoryTags(forKey: key)
    }

    /// Removes the value for `key` from `tiers`, slowest first.
    ///
    /// - Returns: Whether any tier held a value.
    @discardableResult
    public func removeValue(forKey key: Key, tiers: StorageTiers? = nil) throws -> Bool {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        return try turns.withTurn(key) {
            var removed = false
            for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
                if try tier.removeValue(forKey: key.cacheKey) {
                    removed = true
                    emit(.removed, key.cacheKey, tier.tierID)
                }
                try dropStaleCopy(forKey: key, in: tier)
            }
            if tiers.includesMemory {
                if memory.removeValue(forKey: key) {
                    removed = true
                    emit(.removed, key.cacheKey, .memory)
                }
                dropStaleCopyInMemory(forKey: key)
                dropMemoryTags(forKey: key)
            }
            return removed
        }
    }

    /// Removes every value from `tiers`, slowest first.
    ///
    /// - Returns: The number of entries each cleared tier held when the clear began (expired
    ///   entries included).
    @discardableResult
    public func removeAll(tiers: StorageTiers? = nil) throws -> [StorageTier: Int] {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        var counts: [StorageTier: Int] = [:]
        for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
            counts[tier.tierID] = tier.tierStatistics.totalCount
            try tier.removeAll()
        }
        // Promotions that read a cleared tier before the clear must not land in memory after it.
        turns.advanceEpoch()
        if tiers.includesMemory {
            counts[.memory] = memory.totalCount
            memory.removeAll()
            staleCopies?.removeAll()
            memoryTags.removeAll()
        }
        return counts
    }

    /// Removes expired entries from `tiers`.
    ///
    /// - Returns: The number of entries removed.
    @discardableResult
    public func removeExpired(tiers: StorageTiers? = nil) throws -> Int {
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        var removed = 0
        for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
            removed += try tier.removeExpired()
        }
        if tiers.includesMemory { removed += memory.removeExpired() }
        return removed
    }

    /// Closes every byte tier; later calls that reach one throw ``StorageError/Code/closed``.
    /// Memory stays usable. Calling it again does nothing.
    public func close() {
        for tier in localTiers { tier.close() }
    }

    // MARK: - Events

    /// A new observer's sequence of changes: values written to and removed from each tier by
    /// this storage's calls, and the entries memory and the disk tier evict to meet their
    /// limits or drop as expired (when a read, a write's overflow or ``removeExpired(tiers:)``
    /// finds them). Promotions, clears (``removeAll(tiers:)``) and the evictions of tiers given
    /// as `additionalTiers` are not reported; neither are removals by other processes.
    ///
    /// Several observers may iterate at once; each has a buffer of `bufferSize` events, and one
    /// that falls behind loses its oldest events (see ``StorageEvents/droppedCount``) without
    /// ever slowing the storage.
    public func events(bufferSize: Int = 256) -> StorageEvents {
        broadcaster.subscribe(bufferSize: bufferSize)
    }

    @usableFromInline
    func emit(_ kind: StorageEvent.Kind, _ key: String, _ tier: StorageTier) {
        broadcaster.send(StorageEvent(kind: kind, key: key, tier: tier))
    }

    // MARK: - Helpers

    /// Throws when `tiers` names no tier this storage has: that is a caller's mistake, not a
    /// silent no-op.
    @usableFromInline
    func checkNamesATier(_ tiers: StorageTiers) throws {
        guard !tierIDs.contains(where: { tiers.contains($0) }) else { return }
        throw StorageError(
            code: .invalidInput,
            message: "tiers \(tiers) name no tier of this storage (it has \(StorageTiers(tierIDs)))")
    }

    /// The memory cost of `value`, computed outside every lock (it may run the caller's closure).
    func memoryCost(of value: Value) -> Int {
        memory.measure?(value) ?? 1
    }
}

extension Storage: Sendable where Value: Sendable {}

extension Storage {
    /// Refuses a synchronous call that names a shared tier (or leaves `tiers` `nil` while the
    /// default tiers name one): only the `async` API reaches the network, and a synchronous
    /// call that silently skipped the tier would read around it, or leave its copy behind a
    /// write or removal. Loud instead: call it with `await` from an async context, or name the
    /// local tiers only.
    @usableFromInline
    func checkSynchronous(_ tiers: StorageTiers?) throws {
        let named = tiers ?? configuration.defaultTiers
        // The usual call names local tiers only: answered from the cast table, no allocation.
        guard localTierAt.indices.contains(where: { localTierAt[$0] == nil && named.contains(self.tiers[$0].tierID) }) else { return }
        let shared = self.tiers.filter { !($0 is any LocalCacheTier) && named.contains($0.tierID) }.map(\.tierID.name)
        throw StorageError(
            code: .invalidInput,
            message: "a synchronous call cannot reach the shared tier \(shared.joined(separator: ", ")): "
                + "call the async form with `await` from an async function, or pass tiers: [.memory, .disk]")
    }
}
