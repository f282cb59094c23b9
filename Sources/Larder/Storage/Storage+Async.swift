import Dispatch
import Synchronization
public import Foundation

extension Storage where Value: Sendable {
    /// The value for `key` from the first tier that holds it, or `nil` on a miss.
    ///
    /// A memory hit returns at once; local tiers' I/O runs on Larder's I/O queue, never on the
    /// caller's executor; tiers that are not local (a remote cache) are reached only here.
    public func value(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Value? {
        try await entry(forKey: key, tiers: tiers)?.value
    }

    /// The value for `key` with the tier that answered and its expiration, or `nil` on a miss.
    public func entry(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Entry? {
        let tiers = tiers ?? configuration.defaultTiers
        if let found = memoryEntry(forKey: key, tiers: tiers) { return found }
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
        let write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        try await turns.withTurn(key) { () async throws in
            try await applyWrite(write, value, forKey: key, expiry: expiry, tiers: tiers)
        }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// The tier writes of a prepared write through every tier, local or not, holding the key's
    /// turn; see ``applyWrite(_:_:forKey:expiry:tiers:skipping:)-(_,_,_,_,_,_)``.
    func applyWrite(
        _ write: PreparedWrite, _ value: Value, forKey key: Key, expiry: Expiry?, tiers: StorageTiers,
        skipping skipped: Int? = nil
    ) async throws {
        for position in self.tiers.indices.reversed() where position != skipped {
            let tier = self.tiers[position]
            do {
                if tiers.contains(tier.tierID), let encoded = write.encoded {
                    try await setBytes(
                        TierEntry(data: encoded), expiry: expiry, isCompressible: write.isCompressible,
                        forKey: key.cacheKey, in: tier)
                    emit(.written, key.cacheKey, tier.tierID)
                } else if try await removeBytes(forKey: key.cacheKey, from: tier) {
                    emit(.removed, key.cacheKey, tier.tierID)
                }
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                await removeFromTiers(fasterThan: position, key: key)
                throw error
            }
        }
        if let cost = write.cost {
            memory.setValue(value, forKey: key, cost: cost, expiry: expiry)
            emit(.written, key.cacheKey, .memory)
        } else if memory.removeValue(forKey: key) {
            emit(.removed, key.cacheKey, .memory)
        }
    }

    /// Best effort after a failed write: no tier faster than `position` may keep a value.
    func removeFromTiers(fasterThan position: Int, key: Key) async {
        for faster in self.tiers[..<position] {
            _ = try? await removeBytes(forKey: key.cacheKey, from: faster)
        }
        memory.removeValue(forKey: key)
    }

    /// Removes the value for `key` from `tiers`, slowest first.
    @discardableResult
    public func removeValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.removeValue(forKey: key, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        return try await turns.withTurn(key) {
            var removed = false
            for tier in self.tiers.reversed() where tiers.contains(tier.tierID) {
                if try await removeBytes(forKey: key.cacheKey, from: tier) {
                    removed = true
                    emit(.removed, key.cacheKey, tier.tierID)
                }
            }
            if tiers.includesMemory, memory.removeValue(forKey: key) {
                removed = true
                emit(.removed, key.cacheKey, .memory)
            }
            return removed
        }
    }

    /// Whether any of `tiers` holds a live value for `key`.
    public func containsValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.containsValue(forKey: key, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        if tiers.includesMemory, memory.containsValue(forKey: key) { return true }
        for tier in self.tiers where tiers.contains(tier.tierID) {
            if try await containsBytes(forKey: key.cacheKey, in: tier) { return true }
        }
        return false
    }

    /// The cache keys of live entries that start with `prefix`, from every named tier.
    public func keys(withPrefix prefix: String, tiers: StorageTiers? = nil) async throws -> [String] {
        let local = try await offloadIfTiers(tiers) { try self.keys(withPrefix: prefix, tiers: tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        var found = Set(local)
        for tier in self.tiers where !(tier is any LocalCacheTier) && tiers.contains(tier.tierID) {
            found.formUnion(try await tier.keys(withPrefix: prefix))
        }
        return found.sorted()
    }

    /// Removes every value from `tiers`, slowest first.
    @discardableResult
    public func removeAll(tiers: StorageTiers? = nil) async throws -> [StorageTier: Int] {
        let tiers = tiers ?? configuration.defaultTiers
        var counts: [StorageTier: Int] = [:]
        for tier in self.tiers.reversed() where !(tier is any LocalCacheTier) && tiers.contains(tier.tierID) {
            counts[tier.tierID] = tier.tierStatistics.totalCount
            try await tier.removeAll()
        }
        let local = try await offloadIfTiers(tiers) { try self.removeAll(tiers: tiers) }
        return counts.merging(local) { $1 }
    }

    /// Removes expired entries from `tiers`.
    @discardableResult
    public func removeExpired(tiers: StorageTiers? = nil) async throws -> Int {
        let tiers = tiers ?? configuration.defaultTiers
        var removed = 0
        for tier in self.tiers.reversed() where !(tier is any LocalCacheTier) && tiers.contains(tier.tierID) {
            removed += try await tier.removeExpired()
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
    func walkTiers(forKey key: Key, tiers: StorageTiers) async throws -> Entry? {
        try checkNamesATier(tiers)
        let token = turns.token(for: key)
        for (position, tier) in self.tiers.enumerated() where tiers.contains(tier.tierID) {
            guard let found = try await bytes(forKey: key.cacheKey, in: tier) else {
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
            let cost = tiers.includesMemory ? memoryCost(of: value) : nil
            let expiry = found.expirationDate.map(Expiry.date) ?? .never
            let isCompressible = transformer.isCompressible(value)
            await turns.withTurnIfUnchanged(key, since: token) {
                for faster in self.tiers[..<position] where tiers.contains(faster.tierID) {
                    do {
                        try await setBytes(found, expiry: expiry, isCompressible: isCompressible,
                                           forKey: key.cacheKey, in: faster)
                        counters.tier(faster.tierID).promotions.add(1, ordering: .relaxed)
                    } catch {
                        counters.tier(faster.tierID).errors.add(1, ordering: .relaxed)
                    }
                }
                if let cost, memory.setValue(value, forKey: key, cost: cost, expiry: expiry) {
                    counters.memoryPromotions.add(1, ordering: .relaxed)
                }
            }
            return Entry(value: value, tier: tier.tierID, expirationDate: found.expirationDate)
        }
        counters.misses.add(1, ordering: .relaxed)
        return nil
    }

    // MARK: - Helpers

    // Each tier operation runs a local tier's synchronous method on the I/O queue and awaits any
    // other tier's directly.

    func bytes(forKey key: String, in tier: any CacheTier) async throws -> TierEntry? {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.entry(forKey: key) } }
        return try await tier.entry(forKey: key)
    }

    func setBytes(
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

    @discardableResult
    func removeBytes(forKey key: String, from tier: any CacheTier) async throws -> Bool {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.removeValue(forKey: key) } }
        return try await tier.removeValue(forKey: key)
    }

    func containsBytes(forKey key: String, in tier: any CacheTier) async throws -> Bool {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.containsValue(forKey: key) } }
        return try await tier.containsValue(forKey: key)
    }

    /// Runs the synchronous path on the I/O queue unless the call touches memory alone.
    func offloadIfTiers<T: Sendable>(
        _ tiers: StorageTiers?, _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let tiers = tiers ?? configuration.defaultTiers
        guard localTiers.contains(where: { tiers.contains($0.tierID) }) else { return try work() }
        return try await offload(work)
    }
}

/// Runs `work` on Larder's I/O queue and resumes with its result.
func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        larderIOQueue.async {
            continuation.resume(with: Result { try work() })
        }
    }
}

/// Runs non-throwing `work` on Larder's I/O queue.
func offload(_ work: @escaping @Sendable () -> Void) async {
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
