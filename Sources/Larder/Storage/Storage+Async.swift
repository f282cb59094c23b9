import Dispatch
import Synchronization
internal import Foundation

extension Storage where Value: Sendable {
    /// The value for `key` from the first tier that holds it, or `nil` on a miss.
    ///
    /// A memory hit returns at once; local tiers' I/O runs on Larder's I/O queue, never on the
    /// caller's executor; tiers that are not local (a remote cache) are reached only here.
    @inlinable
    public func value(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Value? {
        // As the synchronous read: a memory hit builds no `Entry`, and below memory a read
        // with nothing to promote asks its one local tier for the bytes alone.
        if tiers?.includesMemory ?? defaultTiersIncludeMemory, let found = memoryValue(forKey: key) { return found }
        return try await valueAfterMemoryMiss(forKey: key, tiers: tiers)
    }

    /// The rest of an async value read (`tiers` `nil` for the default tiers); see
    /// ``entryAfterMemoryMiss(forKey:tiers:)``.
    @usableFromInline
    nonisolated(nonsending) func valueAfterMemoryMiss(forKey key: Key, tiers: StorageTiers?) async throws -> Value? {
        if allTiersLocal {
            return try await offload { try self.valueBelowMemory(forKey: key, tiers: tiers) }
        }
        return try await walkTiers(forKey: key, tiers: tiers ?? configuration.defaultTiers)?.value
    }

    /// The value for `key` with the tier that answered and its expiration, or `nil` on a miss.
    ///
    /// Inlinable, so that a memory hit runs specialized for the caller's key and value types.
    @inlinable
    public func entry(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Entry? {
        let tiers = tiers ?? configuration.defaultTiers
        if let found = memoryEntry(forKey: key, tiers: tiers) { return found }
        return try await entryAfterMemoryMiss(forKey: key, tiers: tiers)
    }

    /// The rest of an async read: local tiers on the I/O queue, or the walk through tiers that
    /// are not local.
    @usableFromInline
    nonisolated(nonsending) func entryAfterMemoryMiss(forKey key: Key, tiers: StorageTiers) async throws -> Entry? {
        if allTiersLocal {
            return try await offload { try self.entryBelowMemory(forKey: key, tiers: tiers) }
        }
        return try await walkTiers(forKey: key, tiers: tiers)
    }

    /// Stores `value` for `key` in `tiers`; see ``setValue(_:forKey:expiry:tiers:)-(_,_,_,_)``.
    public func setValue(_ value: Value, forKey key: Key, expiry: Expiry? = nil, tiers: StorageTiers? = nil) async throws {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.setValue(value, forKey: key, expiry: expiry, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try await writeThroughTiers(prepareWrite(value, expiry: expiry, tiers: tiers), value, forKey: key, expiry: expiry, tiers: tiers)
    }

    /// The tier writes of an async write when some tier is not local: under the key's turns,
    /// the local tiers, then the shared ones.
    nonisolated(nonsending) func writeThroughTiers(
        _ write: PreparedWrite, _ value: Value, forKey key: Key, expiry: Expiry?, tiers: StorageTiers
    ) async throws {
        guard hasSharedTiers else {
            try await turns.withTurn(key) {
                try await self.writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: expiry, tiers: tiers)
            }
            counters.writes.add(1, ordering: .relaxed)
            return
        }
        // Local tiers under the key's turn, then the shared tiers under a turn that only async
        // callers wait on (see SharedCacheTier).
        try await sharedTurns.withTurn(key) {
            let localExpiry = self.localCopyExpiry(expiry, sharedTiersIn: tiers)
            try await self.turns.withTurn(key) {
                try await self.writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: localExpiry, tiers: tiers)
            }
            await self.writeShared(write, forKey: key, expiry: expiry, tiers: tiers)
        }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// Best effort after a failed write: no local tier faster than `position` may keep a value.
    nonisolated(nonsending) func removeFromTiers(fasterThan position: Int, key: Key) async {
        for faster in self.tiers[..<position] where !(faster is any SharedCacheTier) {
            _ = try? await removeBytes(forKey: key.cacheKey, from: faster)
            try? await dropStaleCopy(forKey: key, from: faster)
        }
        memory.removeValue(forKey: key)
        dropStaleCopyInMemory(forKey: key)
        dropMemoryTags(forKey: key)
    }

    /// Removes the value for `key` from `tiers`, slowest first.
    @discardableResult
    public func removeValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.removeValue(forKey: key, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        guard hasSharedTiers else {
            return try await turns.withTurn(key) { try await self.removeLocally(forKey: key, tiers: tiers) }
        }
        // The shared tiers first, so no local read can copy the value back from them.
        return try await sharedTurns.withTurn(key) {
            let removedShared = await self.removeShared(forKey: key, tiers: tiers)
            let removedLocal = try await self.turns.withTurn(key) { try await self.removeLocally(forKey: key, tiers: tiers) }
            return removedShared || removedLocal
        }
    }

    /// The local part of a removal, under the key's turn.
    nonisolated(nonsending) func removeLocally(forKey key: Key, tiers: StorageTiers) async throws -> Bool {
        var removed = false
        for tier in self.tiers.reversed() where tiers.contains(tier.tierID) && !(tier is any SharedCacheTier) {
            if try await removeBytes(forKey: key.cacheKey, from: tier) {
                removed = true
                emit(.removed, key.cacheKey, tier.tierID)
            }
            try await dropStaleCopy(forKey: key, from: tier)
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

    /// The local part of a write, under the key's turn: local byte tiers slowest first, then
    /// memory; a tier not named loses its value. Local copies expire at `localExpiry`.
    /// `skipped` is a tier already written (by an insert-if-absent).
    nonisolated(nonsending) func writeLocally(
        _ write: PreparedWrite, _ value: Value, forKey key: Key, expiry: Expiry?, localExpiry: Expiry?, tiers: StorageTiers,
        skipping skipped: Int? = nil
    ) async throws {
        // With a shared tier, a local copy bounded to nothing (localCopyMaxAge zero) is not kept.
        let keepsLocalCopies = !hasSharedTiers
            || localExpiry.map { !($0.expirationDate(from: now()).map { $0 <= now() } ?? false) } ?? true
        // The tier an insert-if-absent already wrote loses its stale copy too.
        if let skipped, staleCopies != nil { try await dropStaleCopy(forKey: key, from: self.tiers[skipped]) }
        for position in self.tiers.indices.reversed()
        where position != skipped && !(self.tiers[position] is any SharedCacheTier) {
            let tier = self.tiers[position]
            do {
                if tiers.contains(tier.tierID), keepsLocalCopies, let encoded = write.encoded {
                    if !write.tags.isEmpty, let local = tier as? any LocalCacheTier {
                        try await offload { try self.setLocalBytes(write, encoded, forKey: key.cacheKey, expiry: localExpiry, in: local) }
                    } else {
                        try await setBytes(
                            TierEntry(data: encoded), expiry: localExpiry, isCompressible: write.isCompressible,
                            forKey: key.cacheKey, in: tier)
                    }
                    emit(.written, key.cacheKey, tier.tierID)
                } else if try await removeBytes(forKey: key.cacheKey, from: tier) {
                    emit(.removed, key.cacheKey, tier.tierID)
                }
                try await dropStaleCopy(forKey: key, from: tier)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                await removeFromTiers(fasterThan: position, key: key)
                throw error
            }
        }
        if let cost = write.cost, keepsLocalCopies {
            if memory.setValue(value, forKey: key, cost: cost, expiry: localExpiry) { emit(.written, key.cacheKey, .memory) }
            setMemoryTags(write.tags, forKey: key)
        } else {
            if memory.removeValue(forKey: key) { emit(.removed, key.cacheKey, .memory) }
            dropMemoryTags(forKey: key)
        }
        dropStaleCopyInMemory(forKey: key)
    }

    /// Whether any of `tiers` holds a live value for `key`.
    public func containsValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.containsValue(forKey: key, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        if tiers.includesMemory, currentMemory.containsValue(forKey: key) { return true }
        for tier in self.tiers where tiers.contains(tier.tierID) {
            if tier is any SharedCacheTier {
                // The value itself: one removed by tag or cleared (older than an invalidation
                // time) is not there for this storage, though the server still holds it.
                if let found = try? await tier.entry(forKey: key.cacheKey), (try? await isCurrent(found, in: tier)) == true {
                    return true
                }
            } else if try await containsBytes(forKey: key.cacheKey, in: tier) {
                return true
            }
        }
        return false
    }

    /// The cache keys of live entries that start with `prefix`, from every named tier.
    public func keys(withPrefix prefix: String, tiers: StorageTiers? = nil) async throws -> [String] {
        let local = try await offloadIfTiers(tiers) { try self.keys(withPrefix: prefix, tiers: tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        var found = Set(local)
        for tier in self.tiers where !(tier is any LocalCacheTier) && tiers.contains(tier.tierID) {
            guard tier is any SharedCacheTier else {
                found.formUnion(try await tier.keys(withPrefix: prefix))
                continue
            }
            found.formUnion((try? await tier.keys(withPrefix: prefix)) ?? [])
        }
        return withoutStaleCopyKeys(found.sorted())
    }

    /// Removes every value from `tiers`, slowest first.
    @discardableResult
    public func removeAll(tiers: StorageTiers? = nil) async throws -> [StorageTier: Int] {
        let tiers = tiers ?? configuration.defaultTiers
        var counts: [StorageTier: Int] = [:]
        for tier in self.tiers.reversed() where !(tier is any LocalCacheTier) && tiers.contains(tier.tierID) {
            counts[tier.tierID] = tier.tierStatistics.totalCount
            if tier is any SharedCacheTier {
                try? await tier.removeAll()
                // Whatever the tier kept (memcached cannot clear one namespace) is older than
                // its clear time from now on: a miss in every process.
                await writeInvalidationTime(SharedInvalidations.clearName, to: tier)
            } else {
                try await tier.removeAll()
            }
        }
        // The synchronous clear of the local tiers named (it refuses a set naming a shared one).
        let localIDs = localTierIDs(in: tiers)
        guard localIDs.includesMemory || localTiers.contains(where: { localIDs.contains($0.tierID) }) else {
            try checkNamesATier(tiers)
            return counts
        }
        let local = try await offloadIfTiers(localIDs) { try self.removeAll(tiers: localIDs) }
        return counts.merging(local) { $1 }
    }

    /// Removes expired entries from `tiers`.
    @discardableResult
    public func removeExpired(tiers: StorageTiers? = nil) async throws -> Int {
        let tiers = tiers ?? configuration.defaultTiers
        var removed = 0
        for tier in self.tiers.reversed() where !(tier is any LocalCacheTier) && tiers.contains(tier.tierID) {
            removed += tier is any SharedCacheTier ? (try? await tier.removeExpired()) ?? 0 : try await tier.removeExpired()
        }
        return try await removed + offloadIfTiers(tiers) { try self.removeExpired(tiers: tiers) }
    }

    /// Closes every byte tier.
    public func close() async {
        for tier in self.tiers where !(tier is any LocalCacheTier) { await tier.close() }
        await offload { self.close() }
    }

    // MARK: - The path through tiers that are not local

    /// A read after a memory miss when some tier is not local: each named tier in order, local
    /// ones on the I/O queue.
    nonisolated(nonsending) func walkTiers(forKey key: Key, tiers: StorageTiers) async throws -> Entry? {
        try await walkTiers(forKey: key, tiers: tiers, failedSharedTiers: nil)
    }

    /// ``walkTiers(forKey:tiers:)`` that also reports the shared tiers whose read failed (a
    /// failure of a shared tier is a miss: counted, never thrown).
    nonisolated(nonsending) func walkTiers(forKey key: Key, tiers: StorageTiers, failedSharedTiers: Locked<Set<StorageTier>>?) async throws -> Entry? {
        try checkNamesATier(tiers)
        // Before the token: an invalidation from here on skips the promotion of what is read.
        if localCopyGuard != nil { guardLocalCopies(of: key) }
        let token = turns.token(for: key)
        let sharedToken = sharedTurns.token(for: key)
        for (position, tier) in self.tiers.enumerated() where tiers.contains(tier.tierID) {
            let read: TierEntry?
            do {
                read = try await bytes(forKey: key.cacheKey, at: position)
            } catch where sharedTierAt[position] != nil {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                failedSharedTiers?.withLock { _ = $0.insert(tier.tierID) }
                read = nil
            }
            guard let found = read else {
                counters.tier(tier.tierID).misses.add(1, ordering: .relaxed)
                continue
            }
            let value: Value
            do {
                value = try transformer.decode(found.data)
            } catch {
                counters.decodingFailures.add(1, ordering: .relaxed)
                counters.tier(tier.tierID).misses.add(1, ordering: .relaxed)
                _ = try? await turns.withTurnIfUnchanged(key, since: token) {
                    try await removeBytes(forKey: key.cacheKey, from: tier)
                }
                continue
            }
            counters.tier(tier.tierID).hits.add(1, ordering: .relaxed)
            try await promote(found, value, forKey: key, from: position, tiers: tiers, token: token, sharedToken: sharedToken)
            return Entry(value: value, tier: tier.tierID, expirationDate: found.expirationDate)
        }
        counters.misses.add(1, ordering: .relaxed)
        return nil
    }

    /// Copies a value read from the tier at `position` into the faster tiers named, unless the
    /// key was written meanwhile; a shared tier's value is copied with its local bounds.
    nonisolated(nonsending) func promote(
        _ found: TierEntry, _ value: Value, forKey key: Key, from position: Int, tiers: StorageTiers,
        token: KeyTurns<Key>.Token, sharedToken: KeyTurns<Key>.Token
    ) async throws {
        let shared = sharedTierAt[position]
        var found = found
        var tags: Set<String> = []
        if shared != nil, let stamp = SharedStamp(metadata: found.metadata) {
            // The stamp is the shared tier's, never a local copy's metadata (the caller's own
            // metadata in it is); memory keeps its tags.
            tags = Set(stamp.tags)
            found.metadata = stamp.userMetadata
        }
        var expiry = found.expiry
        if let shared {
            if shared.localCopyMaxAge == .zero { return }
            if let maxAge = shared.localCopyMaxAge {
                let bound = now().addingTimeInterval(maxAge.seconds)
                expiry = .date(min(found.expirationDate ?? bound, bound))
            }
        }
        let cost = tiers.includesMemory ? memoryCost(of: value) : nil
        // A faster tier takes a copy when named, and, of a shared tier's value, only when the
        // shared tier allows local copies and the faster tier is local.
        func takesCopy(_ faster: Int) -> Bool {
            guard tiers.contains(self.tiers[faster].tierID) else { return false }
            guard let shared else { return true }
            return shared.copiesHitsToLocalTiers && sharedTierAt[faster] == nil
        }
        // Nothing to copy (memory not named, no faster tier takes a copy): no turn to take.
        if cost == nil, !(0..<position).contains(where: takesCopy) { return }
        let isCompressible = transformer.isCompressible(value)
        await turns.withTurnIfUnchanged(key, since: token) {
            // A write or removal in its network step holds (or has changed) the shared turn.
            if hasSharedTiers, !sharedTurns.isUnchanged(key, since: sharedToken) { return }
            for index in 0..<position where takesCopy(index) {
                let faster = self.tiers[index]
                do {
                    if !tags.isEmpty, let tagging = faster as? any TaggingCacheTier {
                        // A copy of a tagged value keeps its tags, so a removal by tag finds it.
                        let (data, expiry, tags, metadata) = (found.data, expiry, tags, found.metadata)
                        try await offload {
                            try tagging.setValue(data, forKey: key.cacheKey, expiry: expiry, metadata: metadata,
                                                 isCompressible: isCompressible, tags: tags)
                        }
                    } else {
                        try await setBytes(found, expiry: expiry, isCompressible: isCompressible,
                                           forKey: key.cacheKey, in: faster)
                    }
                    counters.tier(faster.tierID).promotions.add(1, ordering: .relaxed)
                } catch {
                    counters.tier(faster.tierID).errors.add(1, ordering: .relaxed)
                }
            }
            if let cost, memory.setValue(value, forKey: key, cost: cost, expiry: expiry) {
                counters.memoryPromotions.add(1, ordering: .relaxed)
                if shared != nil { setMemoryTags(tags, forKey: key) }
            }
        }
    }

    // MARK: - Helpers

    // Each tier operation runs a local tier's synchronous method on the I/O queue and awaits any
    // other tier's directly.
    //
    // The internal steps of the async paths (these helpers, the walk through tiers, promotion,
    // the key turns) are `nonisolated(nonsending)`: they run where the public call runs (Swift's
    // global executor, or the executor the task prefers), so a read makes no executor switch
    // between its own steps. The public calls themselves stay concurrent, so a caller on an
    // actor never runs a transformer's decoding on that actor.

    nonisolated(nonsending) func bytes(forKey key: String, in tier: any CacheTier) async throws -> TierEntry? {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.entry(forKey: key) } }
        return try await currentShared(tier.entry(forKey: key), from: tier)
    }

    /// ``bytes(forKey:in:)`` of the tier at `position`, with the cast made at init.
    nonisolated(nonsending) func bytes(forKey key: String, at position: Int) async throws -> TierEntry? {
        if let local = localTierAt[position] { return try await offload { try local.entry(forKey: key) } }
        return try await currentShared(tiers[position].entry(forKey: key), from: tiers[position])
    }

    /// `entry` read from `tier`, or `nil` when `tier` is shared and the entry is older than one
    /// of its invalidation times (see `Storage+Tags.swift`).
    nonisolated(nonsending) func currentShared(_ entry: TierEntry?, from tier: any CacheTier) async throws -> TierEntry? {
        guard let entry, tier is any SharedCacheTier else { return entry }
        return try await isCurrent(entry, in: tier) ? entry : nil
    }

    nonisolated(nonsending) func setBytes(
        _ entry: TierEntry, expiry: Expiry?, isCompressible: Bool, forKey key: String, in tier: any CacheTier
    ) async throws {
        if let local = tier as? any LocalCacheTier {
            return try await offload {
                try local.setValue(entry.data, forKey: key, expiry: expiry, metadata: entry.metadata,
                                   isCompressible: isCompressible)
            }
        }
        try await tier.setValue(entry.data, forKey: key, expiry: expiry, metadata: entry.metadata,
                                isCompressible: isCompressible)
    }

    /// ``CacheTier/setValues(_:)`` of `tier`, off the caller's executor for a local tier; no
    /// call for no writes.
    nonisolated(nonsending) func setBytes(_ writes: [TierWrite], in tier: any CacheTier) async throws {
        guard !writes.isEmpty else { return }
        if let local = tier as? any LocalCacheTier { return try await offload { try local.setValues(writes) } }
        try await tier.setValues(writes)
    }

    @discardableResult
    nonisolated(nonsending) func removeBytes(forKey key: String, from tier: any CacheTier) async throws -> Bool {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.removeValue(forKey: key) } }
        return try await tier.removeValue(forKey: key)
    }

    nonisolated(nonsending) func containsBytes(forKey key: String, in tier: any CacheTier) async throws -> Bool {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.containsValue(forKey: key) } }
        return try await tier.containsValue(forKey: key)
    }

    /// Runs the synchronous path on the I/O queue unless the call touches memory alone.
    nonisolated(nonsending) func offloadIfTiers<T: Sendable>(
        _ tiers: StorageTiers?, _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let tiers = tiers ?? configuration.defaultTiers
        guard localTiers.contains(where: { tiers.contains($0.tierID) }) else { return try work() }
        return try await offload(work)
    }
}

/// Runs `work` on Larder's I/O queue and resumes with its result.
nonisolated(nonsending) func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        larderIOQueue.async {
            continuation.resume(with: Result { try work() })
        }
    }
}

/// Runs non-throwing `work` on Larder's I/O queue.
nonisolated(nonsending) func offload(_ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { continuation in
        larderIOQueue.async {
            work()
            continuation.resume()
        }
    }
}

/// Where the async forms run local tiers' I/O: off the cooperative pool, so a slow disk never
/// starves Swift concurrency's threads.
let larderIOQueue = DispatchQueue(label: "larder.io", qos: .userInitiated, attributes: .concurrent)
