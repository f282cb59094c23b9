internal import Foundation
import Synchronization

// Fail-safe: the *stale copies* of get-or-load's values. A stale copy is a second entry for a
// key, kept `maxStale` past the value's expiry, apart from the value every read sees: in memory
// a store of its own (`staleCopies`), in each byte tier an entry under the key's *stale-copy
// key* (`staleCopyPrefix` + the cache key). So no read but a fail-safe get-or-load ever meets
// one, and the read paths pay nothing for them. Writes and removals of a storage that keeps
// stale copies drop the key's stale copy from each tier they change (in the same turn), so an
// overwritten or removed value never comes back as a stale one.

extension Storage {
    /// The start of every stale-copy key in the byte tiers; no key that a caller writes should
    /// start with it (U+0001 is not in any URL or sensible key).
    static var staleCopyPrefix: String { "\u{1}stale\u{1}" }

    /// The stale-copy key of `key` in the byte tiers.
    func staleCopyKey(_ key: Key) -> String {
        Self.staleCopyPrefix + key.cacheKey
    }

    /// `keys` without stale-copy keys (for the key listings).
    func withoutStaleCopyKeys(_ keys: [String]) -> [String] {
        keys.filter { !$0.hasPrefix(Self.staleCopyPrefix) }
    }

    /// Drops `key`'s stale copy from memory, when the storage keeps stale copies (the synchronous
    /// paths call it where they change memory's value).
    @usableFromInline
    func dropStaleCopyInMemory(forKey key: Key) {
        staleCopies?.removeValue(forKey: key)
    }

    /// Drops `key`'s stale copy from a local tier whose value a write or removal changes.
    func dropStaleCopy(forKey key: Key, in tier: any LocalCacheTier) throws {
        guard staleCopies != nil else { return }
        _ = try tier.removeValue(forKey: staleCopyKey(key))
    }
}

extension Storage where Value: Sendable {
    /// ``dropStaleCopy(forKey:in:)`` for any tier, from the async paths.
    nonisolated(nonsending) func dropStaleCopy(forKey key: Key, from tier: any CacheTier) async throws {
        guard staleCopies != nil else { return }
        _ = try await removeBytes(forKey: staleCopyKey(key), from: tier)
    }

    /// When the stale copy of a value written now with `expiry` is dropped: its expiration plus
    /// `maxStale`; `nil` for a value that never expires (it needs no stale copy).
    func staleCopyEnd(expiry: Expiry?, maxStale: Duration) -> Date? {
        (expiry ?? memory.configuration.defaultExpiry).expirationDate(from: now())?.addingTimeInterval(maxStale.seconds)
    }

    /// Writes `key`'s stale copies into memory and the local byte tiers of `tiers`. Called under
    /// the key's turn, after the value itself; a refusal is counted, never thrown.
    nonisolated(nonsending) func writeStaleCopiesLocally(
        _ write: PreparedWrite, _ value: Value, forKey key: Key, until end: Date, tiers: StorageTiers
    ) async {
        guard let staleCopies else { return }
        for (position, tier) in self.tiers.enumerated() where sharedTierAt[position] == nil && tiers.contains(tier.tierID) {
            guard let encoded = write.encoded else { continue }
            do {
                try await setBytes(TierEntry(data: encoded), expiry: .date(end), isCompressible: write.isCompressible,
                                   forKey: staleCopyKey(key), in: tier)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
            }
        }
        if let cost = write.cost { staleCopies.setValue(value, forKey: key, cost: cost, expiry: .date(end)) }
    }

    /// Writes `key`'s stale copy into each shared tier of `tiers` except `skipped` (a failure
    /// is counted, as every shared tier's).
    nonisolated(nonsending) func writeStaleCopiesShared(
        _ write: PreparedWrite, forKey key: Key, until end: Date, tiers: StorageTiers, skipping skipped: Set<StorageTier> = []
    ) async {
        guard staleCopies != nil, let encoded = write.encoded else { return }
        for (position, tier) in self.tiers.enumerated()
        where sharedTierAt[position] != nil && tiers.contains(tier.tierID) && !skipped.contains(tier.tierID) {
            do {
                try await tier.setValue(encoded, forKey: staleCopyKey(key), expiry: .date(end), metadata: sharedMetadata(write),
                                        isCompressible: write.isCompressible)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
            }
        }
    }

    /// The stale copy of `key` from the first tier of `tiers` that holds one, marked stale; a
    /// tier's failure or bytes that do not decode are a miss. Counts no hit or miss.
    nonisolated(nonsending) func staleEntry(forKey key: Key, tiers: StorageTiers) async -> Entry? {
        guard let staleCopies else { return nil }
        if tiers.includesMemory, let found = staleCopies.entry(forKey: key) {
            return Entry(staleValue: found.value, tier: .memory, expirationDate: found.expirationDate)
        }
        for (position, tier) in self.tiers.enumerated() where tiers.contains(tier.tierID) {
            guard let found = try? await bytes(forKey: staleCopyKey(key), at: position),
                  let value = try? transformer.decode(found.data) else { continue }
            return Entry(staleValue: value, tier: tier.tierID, expirationDate: found.expirationDate)
        }
        return nil
    }
}
