public import Foundation

// Trims by age across the local tiers.
extension Storage {
    /// Removes every value written, or last used (written or read in any tier), before `date`
    /// from `tiers`, slowest first.
    ///
    /// A value the memory tier has served since `date` is used, so its copies below memory are
    /// kept under ``EntryAge/lastUsed`` even if no read reached them; under
    /// ``EntryAge/written``, a memory copy of a value removed below goes too (a copy promoted
    /// from disk is stamped when promoted, not when first written). Tiers that are not local (a
    /// shared remote cache) keep no times and are not trimmed.
    ///
    /// ```swift
    /// // PINCache's trimToDate: what nobody has used for a week.
    /// try storage.trim(toDate: Date().addingTimeInterval(-7 * 86_400))
    /// ```
    ///
    /// - Parameters:
    ///   - date: Values older than this go.
    ///   - age: Which moment counts: ``EntryAge/lastUsed`` (the default) or ``EntryAge/written``.
    ///   - tiers: The tiers to trim; defaults to ``Configuration/defaultTiers``.
    /// - Returns: The number of values removed from each local tier trimmed.
    /// - Throws: ``StorageError/Code/invalidInput`` when `tiers` names no tier of this storage,
    ///   or a named local tier keeps no times; the errors of the disk tier.
    @discardableResult
    public func trim(toDate date: Date, by age: EntryAge = .lastUsed, tiers: StorageTiers? = nil) throws -> [StorageTier: Int] {
        let tiers = tiers ?? configuration.defaultTiers
        try checkNamesATier(tiers)
        let spared = age == .lastUsed ? Set(memory.keys(usedSince: date).map(\.cacheKey)) : []
        var counts: [StorageTier: Int] = [:]
        var removedBelow = Set<String>()
        for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
            let removed = try tier.trim(toDate: date, by: age, sparing: spared)
            counts[tier.tierID] = removed.count
            removedBelow.formUnion(removed)
        }
        // A read that found a removed value before the trim must not promote it after.
        if !removedBelow.isEmpty { turns.advanceEpoch() }
        if tiers.includesMemory {
            var removed = memory.trim(toDate: date, by: age)
            if age == .written, !removedBelow.isEmpty {
                // The cache keys are computed here, outside the memory tier's lock.
                for key in memory.keys() where removedBelow.contains(key.cacheKey) {
                    if memory.removeValue(forKey: key) {
                        removed += 1
                        emit(.removed, key.cacheKey, .memory)
                    }
                }
            }
            counts[.memory] = removed
        }
        return counts
    }
}

extension Storage where Value: Sendable {
    /// Removes every value written, or last used, before `date`; see
    /// ``trim(toDate:by:tiers:)-(_,_,_)``. The local tiers' work runs on Larder's I/O queue.
    @discardableResult
    public func trim(toDate date: Date, by age: EntryAge = .lastUsed, tiers: StorageTiers? = nil) async throws -> [StorageTier: Int] {
        try await offload { try self.trim(toDate: date, by: age, tiers: tiers) }
    }
}
