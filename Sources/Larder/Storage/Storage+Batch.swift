internal import Foundation
import Synchronization

/// A ``SharedCacheTier`` that reads many keys in one round trip (memcached's quiet `mg`
/// pipeline, for one).
///
/// ``Storage/values(forKeys:tiers:)`` asks such a tier once for every key that the faster tiers
/// missed, instead of once per key.
public protocol BatchReadingCacheTier: SharedCacheTier {
    /// The entries of `keys` that the tier holds; a key it does not hold is absent.
    func entries(forKeys keys: [String]) async throws -> [String: TierEntry]
}

extension Storage where Value: Sendable {
    /// The values of `keys` that some tier holds; a key no tier holds is absent from the result.
    ///
    /// Memory answers first; the keys it misses go through the other named tiers in order, as
    /// ``entry(forKey:tiers:)`` does (hits copied to the faster tiers with the same bounds), except
    /// that a ``BatchReadingCacheTier`` (a remote cache) is asked once for all of them. A shared
    /// tier's failure makes its keys misses, as in every async read.
    public func values(forKeys keys: [Key], tiers: StorageTiers? = nil) async throws -> [Key: Value] {
        try await values(forKeys: keys, tiers: tiers, failedSharedTiers: nil)
    }

    /// ``values(forKeys:tiers:)`` that also reports the shared tiers whose read failed.
    nonisolated(nonsending) func values(
        forKeys keys: [Key], tiers: StorageTiers?, failedSharedTiers: Locked<Set<StorageTier>>?
    ) async throws -> [Key: Value] {
        let tiers = tiers ?? configuration.defaultTiers
        var found: [Key: Value] = [:]
        found.reserveCapacity(keys.count)
        // The keys memory missed, once each, in the order asked, with their cache keys beside
        // them. This function is not specialized for `Key`: parallel arrays and lists of
        // positions (`[Int]`) need no run-time metadata per key, where arrays of tuples holding
        // a `Key` looked theirs up on every append and copy (about a tenth of a batch's time).
        var missingKeys: [Key] = []
        var missingCacheKeys: [String] = []
        missingKeys.reserveCapacity(keys.count)
        missingCacheKeys.reserveCapacity(keys.count)
        var positions: [String: Int] = [:]
        positions.reserveCapacity(keys.count)
        let readsMemory = tiers.includesMemory
        for key in keys {
            if readsMemory {
                guard found[key] == nil else { continue }
                if let hit = memoryEntry(forKey: key, tiers: tiers) {
                    found[key] = hit.value
                    continue
                }
            }
            let cacheKey = key.cacheKey
            guard positions[cacheKey] == nil else { continue }
            positions[cacheKey] = missingKeys.count
            missingKeys.append(key)
            missingCacheKeys.append(cacheKey)
        }
        guard !missingKeys.isEmpty else { return found }
        guard self.tiers.contains(where: { tiers.contains($0.tierID) && $0 is any BatchReadingCacheTier }) else {
            for key in missingKeys {
                if let failedSharedTiers, !allTiersLocal {
                    if tiers.includesMemory, let hit = currentMemory.entry(forKey: key) {
                        found[key] = hit.value
                    } else if let entry = try await walkTiers(forKey: key, tiers: tiers, failedSharedTiers: failedSharedTiers) {
                        found[key] = entry.value
                    }
                } else if let entry = try await entryAfterMemoryMiss(forKey: key, tiers: tiers) {
                    found[key] = entry.value
                }
            }
            return found
        }
        try checkNamesATier(tiers)
        // A hit is copied only into memory or a local byte tier; with neither named (a read of
        // the remote alone) there is nothing to promote and no turn to check.
        let promotes = tiers.includesMemory || localTiers.contains { tiers.contains($0.tierID) }
        // Taken before any read, so that a write meanwhile keeps an older value out of memory
        // and its bytes from being removed as undecodable.
        if localCopyGuard != nil { for key in missingKeys { guardLocalCopies(of: key) } }
        let tokens = missingKeys.map { turns.token(for: $0) }
        let sharedTokens = promotes ? missingKeys.map { sharedTurns.token(for: $0) } : nil
        var pending = Array(missingKeys.indices)
        for (position, tier) in self.tiers.enumerated() where tiers.contains(tier.tierID) && !pending.isEmpty {
            let tierCounters = counters.tier(tier.tierID)
            let read = try await batchRead(pending.map { missingCacheKeys[$0] }, from: tier, failedSharedTiers: failedSharedTiers)
            tierCounters.misses.add(pending.count - read.count, ordering: .relaxed)
            guard !read.isEmpty else { continue }
            var stillMissing: [Int] = []
            for index in pending {
                let cacheKey = missingCacheKeys[index]
                guard let entry = read[cacheKey] else {
                    stillMissing.append(index)
                    continue
                }
                let key = missingKeys[index]
                guard let value = try? transformer.decode(entry.data) else {
                    counters.decodingFailures.add(1, ordering: .relaxed)
                    tierCounters.misses.add(1, ordering: .relaxed)
                    _ = try? await turns.withTurnIfUnchanged(key, since: tokens[index]) {
                        try await removeBytes(forKey: cacheKey, from: tier)
                    }
                    stillMissing.append(index)
                    continue
                }
                tierCounters.hits.add(1, ordering: .relaxed)
                if let sharedTokens {
                    try await promote(
                        entry, value, forKey: key, from: position, tiers: tiers, token: tokens[index], sharedToken: sharedTokens[index])
                }
                found[key] = value
            }
            pending = stillMissing
        }
        counters.misses.add(pending.count, ordering: .relaxed)
        return found
    }

    /// The entries `tier` holds for `cacheKeys`: in one call from a batch-reading tier, key by key
    /// from any other; a shared tier's failure is counted and read as misses.
    nonisolated(nonsending) private func batchRead(
        _ cacheKeys: [String], from tier: any CacheTier, failedSharedTiers: Locked<Set<StorageTier>>?
    ) async throws -> [String: TierEntry] {
        if let batching = tier as? any BatchReadingCacheTier {
            do {
                var read = try await batching.entries(forKeys: cacheKeys)
                for (cacheKey, entry) in read {
                    if try await !isCurrent(entry, in: tier) { read[cacheKey] = nil }
                }
                return read
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                failedSharedTiers?.withLock { _ = $0.insert(tier.tierID) }
                return [:]
            }
        }
        var read: [String: TierEntry] = [:]
        let isShared = tier is any SharedCacheTier
        for cacheKey in cacheKeys {
            do {
                read[cacheKey] = try await bytes(forKey: cacheKey, in: tier)
            } catch where isShared {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                failedSharedTiers?.withLock { _ = $0.insert(tier.tierID) }
            }
        }
        return read
    }
}
