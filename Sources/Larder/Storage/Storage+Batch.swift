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
        let tiers = tiers ?? configuration.defaultTiers
        var found: [Key: Value] = [:]
        found.reserveCapacity(keys.count)
        var missing: [String: Key] = [:]
        missing.reserveCapacity(keys.count)
        for key in keys where found[key] == nil {
            if let hit = memoryEntry(forKey: key, tiers: tiers) {
                found[key] = hit.value
            } else {
                missing[key.cacheKey] = key
            }
        }
        guard !missing.isEmpty else { return found }
        guard self.tiers.contains(where: { tiers.contains($0.tierID) && $0 is any BatchReadingCacheTier }) else {
            for key in missing.values {
                if let entry = try await entryAfterMemoryMiss(forKey: key, tiers: tiers) { found[key] = entry.value }
            }
            return found
        }
        try checkNamesATier(tiers)
        // A hit is copied only into memory or a local byte tier; with neither named (a read of
        // the remote alone) there is nothing to promote and no turn to check.
        let promotes = tiers.includesMemory || localTiers.contains { tiers.contains($0.tierID) }
        // Taken before any read, so that a write meanwhile keeps an older value out of memory
        // and its bytes from being removed as undecodable.
        var pending = missing.map { cacheKey, key in
            (cacheKey: cacheKey, key: key, token: turns.token(for: key), sharedToken: promotes ? sharedTurns.token(for: key) : nil)
        }
        for (position, tier) in self.tiers.enumerated() where tiers.contains(tier.tierID) && !pending.isEmpty {
            let tierCounters = counters.tier(tier.tierID)
            // A closure, not `\.cacheKey`: a key path into this generic tuple is instantiated
            // at run time on every call (metadata lookups and demangling, ~10% of a batch).
            let read = try await batchRead(pending.map { $0.cacheKey }, from: tier)
            tierCounters.misses.add(pending.count - read.count, ordering: .relaxed)
            guard !read.isEmpty else { continue }
            var stillMissing = pending
            stillMissing.removeAll(keepingCapacity: true)
            for item in pending {
                guard let entry = read[item.cacheKey] else {
                    stillMissing.append(item)
                    continue
                }
                guard let value = try? transformer.decode(entry.data) else {
                    counters.decodingFailures.add(1, ordering: .relaxed)
                    tierCounters.misses.add(1, ordering: .relaxed)
                    _ = try? await turns.withTurnIfUnchanged(item.key, since: item.token) {
                        try await removeBytes(forKey: item.cacheKey, from: tier)
                    }
                    stillMissing.append(item)
                    continue
                }
                tierCounters.hits.add(1, ordering: .relaxed)
                if let sharedToken = item.sharedToken {
                    try await promote(entry, value, forKey: item.key, from: position, tiers: tiers, token: item.token, sharedToken: sharedToken)
                }
                found[item.key] = value
            }
            pending = stillMissing
        }
        counters.misses.add(pending.count, ordering: .relaxed)
        return found
    }

    /// The entries `tier` holds for `cacheKeys`: in one call from a batch-reading tier, key by key
    /// from any other; a shared tier's failure is counted and read as misses.
    private func batchRead(_ cacheKeys: [String], from tier: any CacheTier) async throws -> [String: TierEntry] {
        if let batching = tier as? any BatchReadingCacheTier {
            do {
                return try await batching.entries(forKeys: cacheKeys)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                return [:]
            }
        }
        var read: [String: TierEntry] = [:]
        for cacheKey in cacheKeys {
            if tier is any SharedCacheTier {
                do {
                    read[cacheKey] = try await bytes(forKey: cacheKey, in: tier)
                } catch {
                    counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                }
            } else {
                read[cacheKey] = try await bytes(forKey: cacheKey, in: tier)
            }
        }
        return read
    }
}
