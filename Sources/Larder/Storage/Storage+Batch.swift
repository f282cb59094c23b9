public import Foundation
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
        // Taken before any read, so that a write meanwhile keeps an older value out of memory.
        let tokens = missing.mapValues { (turns.token(for: $0), sharedTurns.token(for: $0)) }
        for (position, tier) in self.tiers.enumerated() where tiers.contains(tier.tierID) && !missing.isEmpty {
            let read = try await batchRead(Array(missing.keys), from: tier)
            counters.tier(tier.tierID).misses.add(missing.count - read.count, ordering: .relaxed)
            for (cacheKey, entry) in read {
                guard let key = missing[cacheKey], let keyTokens = tokens[cacheKey] else { continue }
                guard let value = try? transformer.decode(entry.data) else {
                    counters.decodingFailures.add(1, ordering: .relaxed)
                    counters.tier(tier.tierID).misses.add(1, ordering: .relaxed)
                    _ = try? await turns.withTurnIfUnchanged(key, since: keyTokens.0) {
                        try await removeBytes(forKey: cacheKey, from: tier)
                    }
                    continue
                }
                counters.tier(tier.tierID).hits.add(1, ordering: .relaxed)
                try await promote(
                    entry, value, forKey: key, from: position, tiers: tiers, token: keyTokens.0, sharedToken: keyTokens.1)
                found[key] = value
                missing[cacheKey] = nil
            }
        }
        counters.misses.add(missing.count, ordering: .relaxed)
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
