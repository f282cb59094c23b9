public import Foundation

// Refreshing an entry — new expiry, new tier metadata, the same bytes — and reading the
// metadata a byte tier keeps beside a value. An HTTP cache answers "304 Not Modified" this way.
extension Storage {
    /// Gives the entry for `key` a new expiry and new tier metadata in every named tier that
    /// holds a live one, without rewriting its bytes where the tier can help it.
    ///
    /// The disk tier updates its index row in place (``DiskStore/refresh(forKey:expiry:metadata:)``:
    /// no blob file is read or written); another byte tier gets its own bytes back with the new
    /// expiry and metadata. Memory, which keeps decoded values and no metadata, takes `value`
    /// when given (the caller's refreshed copy of the value), else only the new expiry.
    ///
    /// ```swift
    /// try storage.refresh(forKey: url, expiry: .seconds(3_600), metadata: headers, value: updated)
    /// ```
    ///
    /// - Parameters:
    ///   - expiry: The new expiry; one that has already passed removes the entry.
    ///   - metadata: The new metadata of the byte tiers (`nil` clears it).
    ///   - value: Memory's new copy, stored only where some named tier held a live entry.
    ///   - tiers: Where to refresh; defaults to the configuration's default tiers.
    /// - Returns: Whether any named tier held a live entry.
    /// - Throws: ``StorageError/Code/invalidInput`` for an expiry that is not finite or oversized
    ///   metadata; a tier's error.
    @discardableResult
    public func refresh(
        forKey key: Key, expiry: Expiry, metadata: Data?, value: Value? = nil, tiers: StorageTiers? = nil
    ) throws -> Bool {
        let tiers = tiers ?? configuration.defaultTiers
        try checkExpiry(expiry, tiers: tiers)
        // Caller code (the cost and compressibility closures) runs before the key's turn.
        let copy = value.map { (value: $0, cost: memoryCost(of: $0)) }
        let isCompressible = value.map(transformer.isCompressible) ?? transformer.isCompressible
        return try turns.withTurn(key) {
            var found = false
            for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
                if try refreshBytes(forKey: key.cacheKey, expiry: expiry, metadata: metadata,
                                    isCompressible: isCompressible, in: tier) {
                    found = true
                }
            }
            return refreshMemory(forKey: key, expiry: expiry, copy: copy, tiers: tiers, foundBelow: found) || found
        }
    }

    /// The metadata kept with the live entry for `key` by the first named byte tier that holds
    /// one, without reading its value where the tier can help it (the disk reads its index row
    /// only); `nil` when no named byte tier holds the key or its entry has no metadata.
    ///
    /// Not counted as a hit or a miss.
    public func metadata(forKey key: Key, tiers: StorageTiers? = nil) throws -> Data? {
        let tiers = tiers ?? configuration.defaultTiers
        for tier in localTiers where tiers.contains(tier.tierID) {
            if let disk = tier as? DiskStore {
                if let attributes = try disk.attributes(forKey: key.cacheKey) { return attributes.metadata }
            } else if let entry = try tier.entry(forKey: key.cacheKey) {
                return entry.metadata
            }
        }
        return nil
    }

    /// Refreshes one local tier; see ``refresh(forKey:expiry:metadata:value:tiers:)-(_,_,_,_,_)``.
    private func refreshBytes(
        forKey key: String, expiry: Expiry, metadata: Data?, isCompressible: Bool, in tier: any LocalCacheTier
    ) throws -> Bool {
        if let disk = tier as? DiskStore { return try disk.refresh(forKey: key, expiry: expiry, metadata: metadata) }
        guard let found = try tier.entry(forKey: key) else { return false }
        try tier.setValue(found.data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
        return true
    }

    /// Memory's part of a refresh: the new copy (with its cost, computed before the key's turn)
    /// where some tier held the key, else the expiry.
    func refreshMemory(
        forKey key: Key, expiry: Expiry, copy: (value: Value, cost: Int)?, tiers: StorageTiers, foundBelow: Bool
    ) -> Bool {
        guard tiers.includesMemory else { return false }
        guard let copy else { return memory.setExpiry(expiry, forKey: key) }
        guard foundBelow || currentMemory.containsValue(forKey: key) else { return false }
        return memory.setValue(copy.value, forKey: key, cost: copy.cost, expiry: expiry)
    }
}

extension Storage where Value: Sendable {
    /// Refreshes the entry for `key`; see ``refresh(forKey:expiry:metadata:value:tiers:)-(_,_,_,_,_)``.
    /// Reaches every tier, local or not; a tier that is not local gets its bytes back with the
    /// new expiry and metadata (a failure of a shared tier is ignored, as a miss).
    @discardableResult
    public func refresh(
        forKey key: Key, expiry: Expiry, metadata: Data?, value: Value? = nil, tiers: StorageTiers? = nil
    ) async throws -> Bool {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) {
                try self.refresh(forKey: key, expiry: expiry, metadata: metadata, value: value, tiers: tiers)
            }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkExpiry(expiry, tiers: tiers)
        let copy = value.map { (value: $0, cost: memoryCost(of: $0)) }
        let isCompressible = value.map(transformer.isCompressible) ?? transformer.isCompressible
        return try await sharedTurns.withTurn(key) { () async throws -> Bool in
            var found = false
            for tier in self.tiers.reversed() where tiers.contains(tier.tierID) && tier is any SharedCacheTier {
                guard let entry = try? await tier.entry(forKey: key.cacheKey) else { continue }
                // The value keeps its stamp (written time, tags), with the new metadata in it.
                let stamped = SharedStamp(metadata: entry.metadata).map {
                    SharedStamp(written: $0.written, tags: $0.tags, userMetadata: metadata).metadata
                } ?? metadata
                let refreshed = TierEntry(data: entry.data, expirationDate: nil, metadata: stamped)
                if (try? await setBytes(refreshed, expiry: expiry, isCompressible: isCompressible,
                                        forKey: key.cacheKey, in: tier)) != nil { found = true }
            }
            return try await turns.withTurn(key) { () async throws -> Bool in
                for tier in self.tiers.reversed() where tiers.contains(tier.tierID) && !(tier is any SharedCacheTier) {
                    if let local = tier as? any LocalCacheTier {
                        if try await offload({
                            try self.refreshBytes(forKey: key.cacheKey, expiry: expiry, metadata: metadata,
                                                  isCompressible: isCompressible, in: local)
                        }) { found = true }
                    } else if let entry = try await tier.entry(forKey: key.cacheKey) {
                        let refreshed = TierEntry(data: entry.data, expirationDate: nil, metadata: metadata)
                        try await setBytes(refreshed, expiry: expiry, isCompressible: isCompressible, forKey: key.cacheKey, in: tier)
                        found = true
                    }
                }
                return refreshMemory(forKey: key, expiry: expiry, copy: copy, tiers: tiers, foundBelow: found) || found
            }
        }
    }

    /// The metadata of the live entry for `key`; see ``metadata(forKey:tiers:)-(_,_)``. Runs on
    /// the I/O queue; a byte tier that is not local is read as well.
    public func metadata(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Data? {
        let tiers = tiers ?? configuration.defaultTiers
        for tier in self.tiers where tiers.contains(tier.tierID) {
            if let disk = tier as? DiskStore {
                if let attributes = try await offload({ try disk.attributes(forKey: key.cacheKey) }) {
                    return attributes.metadata
                }
            } else if tier is any SharedCacheTier {
                // A failure of a shared tier is a miss.
                if let entry = try? await tier.entry(forKey: key.cacheKey) {
                    return SharedStamp(metadata: entry.metadata).map(\.userMetadata) ?? entry.metadata
                }
            } else if let entry = try await bytes(forKey: key.cacheKey, in: tier) {
                return entry.metadata
            }
        }
        return nil
    }
}
