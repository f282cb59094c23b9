internal import Foundation
import Synchronization

// Tags: values written with tags and removed together, in every tier. Memory keeps its keys'
// tags in `MemoryTags`; a local byte tier in its own index (`TaggingCacheTier`: the disk's
// `tags` table); a shared tier cannot find values by tag, so a removal there writes the tag's
// removal time into the tier and every read compares it with the value's `SharedStamp` (see
// `SharedInvalidations`). `removeAll()` reaches shared tiers the same way, through their clear
// time.

extension Storage {
    /// The most tags one value may carry.
    static var maxTagsPerValue: Int { 64 }
    /// The longest tag, in UTF-8 bytes.
    static var maxTagLength: Int { 256 }

    /// Throws ``StorageError/Code/invalidInput`` for a tag that is empty or too long, or too many.
    func checkTags(_ tags: Set<String>) throws {
        if tags.count > Self.maxTagsPerValue {
            throw StorageError.invalidInput("\(tags.count) tags exceed the limit of \(Self.maxTagsPerValue) per value")
        }
        for tag in tags { try checkTag(tag) }
    }

    func checkTag(_ tag: String) throws {
        if tag.isEmpty { throw StorageError.invalidInput("a tag must not be empty") }
        if tag.utf8.count > Self.maxTagLength {
            throw StorageError.invalidInput("the tag \(tag.prefix(32))… of \(tag.utf8.count) bytes exceeds \(Self.maxTagLength) bytes")
        }
    }

    /// Refuses a tagged write to a named byte tier that is not shared and keeps no tags: its
    /// copy could never be removed by tag.
    func checkTaggingTiers(_ tiers: StorageTiers) throws {
        for (position, tier) in self.tiers.enumerated()
        where tiers.contains(tier.tierID) && sharedTierAt[position] == nil && !(tier is any TaggingCacheTier) {
            throw StorageError.invalidInput("the tier \(tier.tierID) keeps no tags: write tagged values to other tiers")
        }
    }

    /// Writes a prepared write's bytes to local tier `tier`, with its tags when it has any.
    func setLocalBytes(_ write: PreparedWrite, _ encoded: Data, forKey key: String, expiry: Expiry?, in tier: any LocalCacheTier) throws {
        guard !write.tags.isEmpty, let tagging = tier as? any TaggingCacheTier else {
            return try tier.setValue(encoded, forKey: key, expiry: expiry, metadata: nil, isCompressible: write.isCompressible)
        }
        try tagging.setValue(encoded, forKey: key, expiry: expiry, metadata: nil, isCompressible: write.isCompressible,
                             tags: write.tags)
    }

    /// Gives memory's `key` the write's tags (after memory took the value); a tag index grown
    /// past twice memory's count is pruned of the keys memory evicted.
    func setMemoryTags(_ tags: Set<String>, forKey key: Key) {
        let count = memoryTags.set(tags, forKey: key)
        if count > max(1_024, 2 * memory.totalCount) { memoryTags.prune { memory.containsValue(forKey: $0) } }
    }

    /// Drops `key`'s tags in memory (its memory value was removed or replaced untagged).
    @usableFromInline
    func dropMemoryTags(forKey key: Key) {
        memoryTags.forget(key)
    }

    /// Stores `value` for `key` with `tags` in `tiers`, so that ``removeValues(taggedWith:tiers:)-(_,_)``
    /// removes it with every other value carrying one of them.
    ///
    /// Otherwise as ``setValue(_:forKey:expiry:tiers:)-(_,_,_,_)``: a later write of the key
    /// replaces its tags (an untagged write drops them).
    ///
    /// ```swift
    /// try storage.setValue(profile, forKey: "/users/42", tags: ["user:42"])
    /// try storage.setValue(feed, forKey: "/feed/42", tags: ["user:42", "feed"])
    /// try storage.removeValues(taggedWith: "user:42")   // both go, from every tier
    /// ```
    ///
    /// - Throws: ``StorageError/Code/invalidInput`` for an empty tag, a tag over 256 UTF-8 bytes,
    ///   more than 64 tags, or a named local tier that keeps no tags (no tier changes); the
    ///   errors of ``setValue(_:forKey:expiry:tiers:)-(_,_,_,_)``.
    public func setValue(_ value: Value, forKey key: Key, expiry: Expiry? = nil, tags: Set<String>, tiers: StorageTiers? = nil) throws {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        try checkTags(tags)
        try checkTaggingTiers(tiers)
        var write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        write.tags = tags
        try turns.withTurn(key) { try applyWrite(write, value, forKey: key, expiry: expiry, tiers: tiers) }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// Removes every value tagged `tag` from `tiers`, slowest first: in the disk tier in one
    /// transaction, through its index of tags; in memory, the values written with the tag and
    /// the memory copies of values a byte tier removed.
    ///
    /// Each value removed is reported as a ``StorageEvent/Kind/removedByTag`` event of its tier
    /// and counted in ``StorageStatistics/removedByTag``; the call in
    /// ``StorageStatistics/tagRemovals``.
    ///
    /// - Returns: The number of values removed from each tier named.
    /// - Throws: ``StorageError/Code/invalidInput`` for an empty or overlong tag, or `tiers`
    ///   naming no tier of this storage; a tier's error.
    @discardableResult
    public func removeValues(taggedWith tag: String, tiers: StorageTiers? = nil) throws -> [StorageTier: Int] {
        if hasAsyncOnlyTiers { try checkSynchronous(tiers) }
        let tiers = tiers ?? configuration.defaultTiers
        try checkTag(tag)
        try checkNamesATier(tiers)
        counters.tagRemovals.add(1, ordering: .relaxed)
        var counts: [StorageTier: Int] = [:]
        var removedBelow = Set<String>()
        for tier in localTiers.reversed() where tiers.contains(tier.tierID) {
            guard let tagging = tier as? any TaggingCacheTier else { continue }
            let removed = try tagging.removeValues(taggedWith: tag)
            counts[tier.tierID] = removed.count
            removedBelow.formUnion(removed)
            // No stale copy to drop: only get-or-load makes them, and it writes no tags.
            for key in removed { emit(.removedByTag, key, tier.tierID) }
        }
        // A read that found a removed value before the removal must not promote it after.
        if !removedBelow.isEmpty { turns.advanceEpoch() }
        if tiers.includesMemory {
            var keys = memoryTags.take(taggedWith: tag)
            if !removedBelow.isEmpty {
                // The cache keys are computed here, outside the memory tier's lock.
                for key in memory.keys() where removedBelow.contains(key.cacheKey) { keys.insert(key) }
            }
            var removed = 0
            for key in keys {
                guard memory.removeValue(forKey: key) else { continue }
                memoryTags.forget(key)
                removed += 1
                emit(.removedByTag, key.cacheKey, .memory)
            }
            counts[.memory] = removed
        }
        counters.removedByTag.add(counts.values.reduce(0, +), ordering: .relaxed)
        return counts
    }
}

extension Storage where Value: Sendable {
    /// Stores `value` for `key` with `tags`; see ``setValue(_:forKey:expiry:tags:tiers:)-(_,_,_,_,_)``.
    ///
    /// A shared tier keeps the tags beside the value, so a removal of one of them by any process
    /// makes the value a miss there.
    public func setValue(
        _ value: Value, forKey key: Key, expiry: Expiry? = nil, tags: Set<String>, tiers: StorageTiers? = nil
    ) async throws {
        if allTiersLocal {
            return try await offloadIfTiers(tiers) { try self.setValue(value, forKey: key, expiry: expiry, tags: tags, tiers: tiers) }
        }
        let tiers = tiers ?? configuration.defaultTiers
        try checkTags(tags)
        try checkTaggingTiers(tiers)
        var write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        write.tags = tags
        try await writeThroughTiers(write, value, forKey: key, expiry: expiry, tiers: tiers)
    }

    /// Removes every value tagged `tag` from `tiers`; see ``removeValues(taggedWith:tiers:)-(_,_)``.
    ///
    /// A shared tier gets the tag's removal time: from then on, every value written there with
    /// the tag before it is a miss, for this process at once and for every other process on
    /// the tier within a second (their local copies live as long as
    /// ``SharedCacheTier/localCopyMaxAge`` allows, as after any change by another process). The
    /// removal time is the storage's clock, so the machines sharing a tier should agree on the
    /// time. A shared tier's failure is counted, never thrown; its count in the result is 0.
    @discardableResult
    public func removeValues(taggedWith tag: String, tiers: StorageTiers? = nil) async throws -> [StorageTier: Int] {
        let tiers = tiers ?? configuration.defaultTiers
        try checkTag(tag)
        var counts: [StorageTier: Int] = [:]
        for tier in self.tiers.reversed() where tier is any SharedCacheTier && tiers.contains(tier.tierID) {
            counts[tier.tierID] = 0
            await writeInvalidationTime(SharedInvalidations.tagName(tag), to: tier)
        }
        guard tiers.includesMemory || localTiers.contains(where: { tiers.contains($0.tierID) }) else {
            try checkNamesATier(tiers)
            counters.tagRemovals.add(1, ordering: .relaxed)
            return counts
        }
        let local = localTierIDs(in: tiers)
        return try await counts.merging(offloadIfTiers(local) { try self.removeValues(taggedWith: tag, tiers: local) }) { $1 }
    }

    // MARK: - Invalidation times of the shared tiers

    /// The metadata of a prepared write's value in a shared tier: its ``SharedStamp``.
    func sharedMetadata(_ write: PreparedWrite) -> Data {
        SharedStamp(written: SharedStamp.microseconds(now()), tags: write.tags.sorted()).metadata
    }

    /// Writes the time called `name` (now) into shared tier `tier`, and records it for this
    /// process's reads; a failure is counted, never thrown.
    nonisolated(nonsending) func writeInvalidationTime(_ name: String, to tier: any CacheTier) async {
        let now = now()
        let time = SharedStamp.microseconds(now)
        sharedInvalidations.record(name, time: time, in: tier.tierID, now: now)
        var bytes = Data(count: 8)
        for index in 0..<8 { bytes[index] = UInt8(truncatingIfNeeded: UInt64(bitPattern: time) >> (56 - 8 * index)) }
        do {
            try await tier.setValue(bytes, forKey: SharedInvalidations.key(name), expiry: .never, metadata: nil, isCompressible: false)
        } catch {
            counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
        }
    }

    /// Whether `entry`, read from shared tier `tier`, was written after the tier's clear time
    /// and after the removal of each of its tags, reading the times this process has not read
    /// for a second. A time that cannot be read makes the entry a miss (the error is thrown,
    /// for the caller to count as the tier's failure).
    nonisolated(nonsending) func isCurrent(_ entry: TierEntry, in tier: any CacheTier) async throws -> Bool {
        let stamp = SharedStamp(metadata: entry.metadata)
        let names = [SharedInvalidations.clearName] + (stamp?.tags ?? []).map(SharedInvalidations.tagName)
        let now = now()
        var times = sharedInvalidations.fresh(names, in: tier.tierID, now: now)
        let unknown = names.filter { times[$0] == nil }
        if !unknown.isEmpty {
            let keys = unknown.map(SharedInvalidations.key)
            let read: [String: TierEntry]
            if unknown.count > 1, let batching = tier as? any BatchReadingCacheTier {
                read = try await batching.entries(forKeys: keys)
            } else {
                var found: [String: TierEntry] = [:]
                for key in keys { found[key] = try await tier.entry(forKey: key) }
                read = found
            }
            for name in unknown {
                let time = read[SharedInvalidations.key(name)].flatMap { Self.invalidationTime($0.data) }
                sharedInvalidations.record(name, time: time, in: tier.tierID, now: now)
                times[name] = .some(time)
            }
        }
        let written = stamp?.written ?? .min
        return !names.contains { name in (times[name] ?? nil).map { written < $0 } ?? false }
    }

    /// Whether `entry`, read from shared tier `tier`, is older than an invalidation time this
    /// process knows (``isCurrent(_:in:)`` reading nothing, for the synchronous paths).
    func isKnownStale(_ entry: TierEntry, in tier: any CacheTier) -> Bool {
        let stamp = SharedStamp(metadata: entry.metadata)
        let names = [SharedInvalidations.clearName] + (stamp?.tags ?? []).map(SharedInvalidations.tagName)
        let times = sharedInvalidations.fresh(names, in: tier.tierID, now: now())
        let written = stamp?.written ?? .min
        return names.contains { name in (times[name] ?? nil).map { written < $0 } ?? false }
    }

    /// The time in an invalidation key's bytes (8, big-endian), or `nil` for other bytes.
    static func invalidationTime(_ data: Data) -> Int64? {
        guard data.count == 8 else { return nil }
        return Int64(bitPattern: data.reduce(0) { $0 << 8 | UInt64($1) })
    }
}

extension Storage where Value: Sendable {
    /// A lease-aware read of `key` in `tier` with every entry older than one of the tier's
    /// invalidation times (a value removed by tag or cleared) read as a miss. Such a value found
    /// live is marked stale there first, so that one caller in the fleet wins its lease and
    /// replaces it.
    nonisolated(nonsending) func currentLeasedEntry(forKey key: String, in tier: any LeasingCacheTier) async throws -> LeasedRead {
        let read = try await currentShared(tier.leasedEntry(forKey: key, leaseDuration: tier.leaseDuration), from: tier)
        guard case .hit(let found) = read, try await !isCurrent(found, in: tier) else { return read }
        try await tier.invalidate(forKey: key)
        let again = try await currentShared(tier.leasedEntry(forKey: key, leaseDuration: tier.leaseDuration), from: tier)
        if case .hit = again { return .busy(stale: nil) }
        return again
    }

    /// `read` with its stale value dropped when that is older than one of `tier`'s invalidation
    /// times; a hit is left for ``currentLeasedEntry(forKey:in:)`` to judge.
    nonisolated(nonsending) func currentShared(_ read: LeasedRead, from tier: any CacheTier) async throws -> LeasedRead {
        switch read {
        case .hit:
            return read
        case .won(let lease, let stale?):
            return try await isCurrent(stale, in: tier) ? read : .won(lease, stale: nil)
        case .busy(let stale?):
            return try await isCurrent(stale, in: tier) ? read : .busy(stale: nil)
        case .won, .busy:
            return read
        }
    }
}
