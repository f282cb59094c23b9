import Foundation
import Synchronization

// Insert-if-absent, remove-and-return and expiry-only updates. Each holds the key's turn, so it
// is atomic among this storage's calls; the slowest tier a call names decides, in one step
// where it can (the disk tier: one transaction), so it is atomic across processes sharing that
// tier too.
extension Storage {
    /// Stores `value` for `key` only when none of `tiers` holds a live value for it.
    ///
    /// The faster named tiers are checked first; the slowest named byte tier then decides and
    /// writes in one step (the disk tier does so in one transaction, so of several processes
    /// inserting one key into a shared directory exactly one succeeds). After a successful
    /// insert the other tiers are written as ``setValue(_:forKey:expiry:tiers:)-(_,_,_,_)``
    /// writes them.
    ///
    /// ```swift
    /// guard try sessions.insertValue(session, forKey: id, expiry: .seconds(3_600)) else {
    ///     throw SessionError.duplicate
    /// }
    /// ```
    ///
    /// - Returns: `true` when the value was stored; `false` when a live value was already there
    ///   (nothing changes).
    /// - Throws: The errors of ``setValue(_:forKey:expiry:tiers:)-(_,_,_,_)``.
    @discardableResult
    public func insertValue(_ value: Value, forKey key: Key, expiry: Expiry? = nil, tiers: StorageTiers? = nil) throws -> Bool {
        let tiers = tiers ?? configuration.defaultTiers
        let write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        if self.tiers.isEmpty {
            let inserted = memory.insertValue(value, forKey: key, cost: write.cost, expiry: expiry)
            if inserted { recordWrite(key, .memory) }
            return inserted
        }
        let inserted = try turns.withTurn(key) { () throws -> Bool in
            if tiers.includesMemory, currentMemory.containsValue(forKey: key) { return false }
            let named = localTiers.indices.filter { tiers.contains(localTiers[$0].tierID) }
            guard let deciding = named.last, let encoded = write.encoded else {
                try applyWrite(write, value, forKey: key, expiry: expiry, tiers: tiers)
                return true
            }
            for position in named.dropLast() {
                if try localTiers[position].containsValue(forKey: key.cacheKey) { return false }
            }
            let tier = localTiers[deciding]
            do {
                guard try tier.insertValue(
                    encoded, forKey: key.cacheKey, expiry: expiry, metadata: nil, isCompressible: write.isCompressible)
                else { return false }
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                removeFromTiers(fasterThan: deciding, key: key)
                throw error
            }
            emit(.written, key.cacheKey, tier.tierID)
            try applyWrite(write, value, forKey: key, expiry: expiry, tiers: tiers, skipping: deciding)
            return true
        }
        if inserted { counters.writes.add(1, ordering: .relaxed) }
        return inserted
    }

    /// Removes the value for `key` from `tiers` and returns it.
    ///
    /// The value returned is the one the slowest named tier held (decoded from its bytes), or
    /// memory's when no byte tier held one. The disk tier removes and returns in one
    /// transaction, so of several processes taking one key from a shared directory exactly one
    /// gets it.
    ///
    /// - Returns: The removed value, or `nil` when no named tier held a live one, or its bytes
    ///   did not decode (they are removed all the same).
    public func takeValue(forKey key: Key, tiers: StorageTiers? = nil) throws -> Value? {
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        if self.tiers.isEmpty {
            let value = currentMemory.takeValue(forKey: key)
            if value != nil { emit(.removed, key.cacheKey, .memory) }
            dropStaleCopyInMemory(forKey: key)
            return value
        }
        let taken: Taken = try turns.withTurn(key) {
            var taken = Taken()
            for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
                try dropStaleCopy(forKey: key, in: tier)
                guard let found = try tier.takeEntry(forKey: key.cacheKey) else { continue }
                emit(.removed, key.cacheKey, tier.tierID)
                if taken.bytes == nil { taken.bytes = found }
            }
            if tiers.includesMemory { dropStaleCopyInMemory(forKey: key) }
            if tiers.includesMemory, let value = currentMemory.takeValue(forKey: key) {
                emit(.removed, key.cacheKey, .memory)
                taken.value = value
            }
            return taken
        }
        return decodeTaken(taken)
    }

    /// Changes when the value for `key` expires in every named tier that holds a live one,
    /// without rewriting it: the disk tier updates its index row, memory its entry.
    ///
    /// An expiry that has already passed removes the value.
    ///
    /// - Returns: Whether any named tier held a live value.
    /// - Throws: ``StorageError/Code/invalidInput`` for an expiry that is not finite, or a
    ///   tier's error.
    @discardableResult
    public func setExpiry(_ expiry: Expiry, forKey key: Key, tiers: StorageTiers? = nil) throws -> Bool {
        let tiers = tiers ?? configuration.defaultTiers
        try checkExpiry(expiry, tiers: tiers)
        if self.tiers.isEmpty { return memory.setExpiry(expiry, forKey: key) }
        return try turns.withTurn(key) {
            var found = false
            for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
                if try tier.setExpiry(expiry, forKey: key.cacheKey) { found = true }
            }
            if tiers.includesMemory, currentMemory.setExpiry(expiry, forKey: key) { found = true }
            return found
        }
    }

    // MARK: - Helpers

    /// What a take removed: the slowest byte tier's bytes, and memory's value.
    struct Taken {
        var bytes: TierEntry?
        var value: Value?
    }

    /// The value a take returns: the slowest tier's bytes decoded (outside the key's turn:
    /// the transformer is caller code), else memory's value.
    func decodeTaken(_ taken: Taken) -> Value? {
        guard let bytes = taken.bytes else { return taken.value }
        do {
            return try transformer.decode(bytes.data)
        } catch {
            counters.decodingFailures.add(1, ordering: .relaxed)
            return nil
        }
    }

    func checkExpiry(_ expiry: Expiry, tiers: StorageTiers) throws {
        try checkNamesATier(tiers)
        guard expiry.isValid else { throw StorageError.invalidInput("expiry \(expiry) is not a finite time") }
    }

    func recordWrite(_ key: Key, _ tier: StorageTier) {
        counters.writes.add(1, ordering: .relaxed)
        emit(.written, key.cacheKey, tier)
    }
}

extension Storage where Value: Sendable {
    /// Stores `value` for `key` only when none of `tiers` holds a live value for it; see
    /// ``insertValue(_:forKey:expiry:tiers:)-(_,_,_,_)``. Reaches every tier, local or not.
    @discardableResult
    public func insertValue(
        _ value: Value, forKey key: Key, expiry: Expiry? = nil, tiers: StorageTiers? = nil
    ) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.insertValue(value, forKey: key, expiry: expiry, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        let write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        // Local tiers decide under the key's turn; shared tiers (a failure there is a miss,
        // never an error) are written afterwards, under a turn only async callers wait on.
        let inserted = try await sharedTurns.withTurn(key) { () async throws -> Bool in
            let localExpiry = hasSharedTiers ? localCopyExpiry(expiry, sharedTiersIn: tiers) : expiry
            let inserted = try await turns.withTurn(key) { () async throws -> Bool in
                if tiers.includesMemory, currentMemory.containsValue(forKey: key) { return false }
                let named = self.tiers.indices.filter {
                    tiers.contains(self.tiers[$0].tierID) && !(self.tiers[$0] is any SharedCacheTier)
                }
                guard let deciding = named.last, let encoded = write.encoded else {
                    try await writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: localExpiry, tiers: tiers)
                    return true
                }
                for position in named.dropLast() {
                    if try await containsBytes(forKey: key.cacheKey, in: self.tiers[position]) { return false }
                }
                let tier = self.tiers[deciding]
                do {
                    guard try await insertBytes(encoded, isCompressible: write.isCompressible, expiry: localExpiry,
                                                forKey: key.cacheKey, in: tier)
                    else { return false }
                } catch {
                    counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                    await removeFromTiers(fasterThan: deciding, key: key)
                    throw error
                }
                emit(.written, key.cacheKey, tier.tierID)
                try await writeLocally(
                    write, value, forKey: key, expiry: expiry, localExpiry: localExpiry, tiers: tiers, skipping: deciding)
                return true
            }
            if inserted && hasSharedTiers { await writeShared(write, forKey: key, expiry: expiry, tiers: tiers) }
            return inserted
        }
        if inserted { counters.writes.add(1, ordering: .relaxed) }
        return inserted
    }

    /// Removes the value for `key` from `tiers` and returns it; see
    /// ``takeValue(forKey:tiers:)-(_,_)``. Reaches every tier, local or not.
    public func takeValue(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Value? {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.takeValue(forKey: key, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        // Shared tiers first (as removals go), a failure there being a miss; then the local ones.
        let taken: Taken = try await sharedTurns.withTurn(key) { () async throws -> Taken in
            var taken = Taken()
            for tier in self.tiers.reversed() where tiers.contains(tier.tierID) && tier is any SharedCacheTier {
                try? await dropStaleCopy(forKey: key, from: tier)
                guard let found = try? await tier.takeEntry(forKey: key.cacheKey) else { continue }
                emit(.removed, key.cacheKey, tier.tierID)
                if taken.bytes == nil { taken.bytes = found }
            }
            return try await turns.withTurn(key) { () async throws -> Taken in
                for tier in self.tiers.reversed()
                where tiers.contains(tier.tierID) && !(tier is any SharedCacheTier) {
                    try await dropStaleCopy(forKey: key, from: tier)
                    guard let found = try await takeBytes(forKey: key.cacheKey, from: tier) else { continue }
                    emit(.removed, key.cacheKey, tier.tierID)
                    if taken.bytes == nil { taken.bytes = found }
                }
                if tiers.includesMemory { dropStaleCopyInMemory(forKey: key) }
                if tiers.includesMemory, let value = currentMemory.takeValue(forKey: key) {
                    emit(.removed, key.cacheKey, .memory)
                    taken.value = value
                }
                return taken
            }
        }
        return decodeTaken(taken)
    }

    /// Changes when the value for `key` expires in every named tier that holds one; see
    /// ``setExpiry(_:forKey:tiers:)-(_,_,_)``. Reaches every tier, local or not.
    @discardableResult
    public func setExpiry(_ expiry: Expiry, forKey key: Key, tiers: StorageTiers? = nil) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.setExpiry(expiry, forKey: key, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkExpiry(expiry, tiers: tiers)
        return try await sharedTurns.withTurn(key) { () async throws -> Bool in
            var found = false
            for tier in self.tiers.reversed() where tiers.contains(tier.tierID) && tier is any SharedCacheTier {
                // A failure of a shared tier is a miss, never an error.
                if (try? await tier.setExpiry(expiry, forKey: key.cacheKey)) == true { found = true }
            }
            return try await turns.withTurn(key) { () async throws -> Bool in
                for tier in self.tiers.reversed()
                where tiers.contains(tier.tierID) && !(tier is any SharedCacheTier) {
                    if try await setBytesExpiry(expiry, forKey: key.cacheKey, in: tier) { found = true }
                }
                if tiers.includesMemory, currentMemory.setExpiry(expiry, forKey: key) { found = true }
                return found
            }
        }
    }

    // Each runs a local tier's synchronous method on the I/O queue and awaits any other tier's.

    private func insertBytes(
        _ data: Data, isCompressible: Bool, expiry: Expiry?, forKey key: String, in tier: any CacheTier
    ) async throws -> Bool {
        if let local = tier as? any LocalCacheTier {
            return try await offload {
                try local.insertValue(data, forKey: key, expiry: expiry, metadata: nil, isCompressible: isCompressible)
            }
        }
        return try await tier.insertValue(data, forKey: key, expiry: expiry, metadata: nil, isCompressible: isCompressible)
    }

    nonisolated(nonsending) private func takeBytes(forKey key: String, from tier: any CacheTier) async throws -> TierEntry? {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.takeEntry(forKey: key) } }
        return try await tier.takeEntry(forKey: key)
    }

    nonisolated(nonsending) private func setBytesExpiry(_ expiry: Expiry, forKey key: String, in tier: any CacheTier) async throws -> Bool {
        if let local = tier as? any LocalCacheTier { return try await offload { try local.setExpiry(expiry, forKey: key) } }
        return try await tier.setExpiry(expiry, forKey: key)
    }
}
