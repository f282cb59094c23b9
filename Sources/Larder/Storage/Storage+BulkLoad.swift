internal import Foundation
import Synchronization

extension Storage where Value: Sendable {
    /// The values of `keys` from the tiers, with the keys every tier missed made by one call of
    /// `loader`: bulk get-or-load.
    ///
    /// The tiers are read as ``values(forKeys:tiers:)`` reads them (a remote cache once for all
    /// the keys). A missed key whose single get-or-load
    /// (``value(forKey:tiers:expiry:failureExpiry:options:orLoad:)``) is in flight joins it
    /// rather than being loaded twice; every other missed key goes to `loader` in one call, and
    /// the values it returns are stored in `tiers` with `expiry`, in one batch per byte tier
    /// (``CacheTier/setValues(_:)``: one disk transaction, one pipeline per remote server); a
    /// shared tier whose read failed is left as it is. A key `loader` returns no value for is absent from the result; values
    /// it returns for keys not asked for are ignored.
    ///
    /// ```swift
    /// let users = try await storage.values(forKeys: ids, expiry: .seconds(300)) { missing in
    ///     try await database.users(withIDs: missing)   // one query for every key the cache missed
    /// }
    /// ```
    ///
    /// - Returns: The value of each key that a tier held or the loader made.
    /// - Throws: The loader's error (the values already found are not returned then),
    ///   `CancellationError`, or a tier's error while reading.
    public func values(
        forKeys keys: [Key], tiers: StorageTiers? = nil, expiry: Expiry? = nil,
        orLoad loader: @escaping @Sendable ([Key]) async throws -> [Key: Value]
    ) async throws -> [Key: Value] {
        let tiers = tiers ?? configuration.defaultTiers
        let failedShared = Locked(Set<StorageTier>())
        var found = try await values(forKeys: keys, tiers: tiers, failedSharedTiers: failedShared)
        var missing: [Key] = []
        var seen = Set<Key>()
        for key in keys where found[key] == nil && seen.insert(key).inserted { missing.append(key) }
        guard !missing.isEmpty else { return found }
        // Keys a single get-or-load is loading right now: join it, with the bulk loader as the
        // fallback should it have finished meanwhile.
        let inFlight = missing.filter { loads.waiterCount(for: $0) > 0 || loadRuns.isRunning($0) }
        let inFlightSet = Set(inFlight)
        let toLoad = missing.filter { !inFlightSet.contains($0) }
        let single: @Sendable (Key) async throws -> Value = { key in
            guard let value = try await loader([key])[key] else {
                throw StorageError(code: .invalidInput, message: "the bulk loader returned no value for \(key.cacheKey)")
            }
            return value
        }
        let untouched = failedShared.withLock { $0 }
        try await withThrowingTaskGroup(of: (Key, Value?).self) { group in
            for key in inFlight {
                group.addTask {
                    do {
                        return (key, try await self.value(forKey: key, tiers: tiers, expiry: expiry, orLoad: single))
                    } catch let error as StorageError where error.code == .invalidInput {
                        return (key, nil)
                    }
                }
            }
            if !toLoad.isEmpty {
                let loaded = try await loader(toLoad)
                counters.loads.add(1, ordering: .relaxed)
                let wanted = Set(toLoad)
                var stored: [(key: Key, value: Value)] = []
                for (key, value) in loaded where wanted.contains(key) {
                    found[key] = value
                    stored.append((key, value))
                }
                await storeLoaded(stored, expiry: expiry, tiers: tiers, untouched: untouched,
                                  maxStale: configuration.loading.maxStale)
            }
            for try await (key, value) in group {
                if let value { found[key] = value }
            }
        }
        return found
    }

    /// Stores what a bulk loader returned, as `storeLoaded(_:forKey:…)` stores one value, but
    /// with one ``CacheTier/setValues(_:)`` per byte tier (the fail-safe stale copies in the
    /// same batch) while every key's turn is held. A failure is counted and logged, never
    /// thrown: the caller has its values.
    nonisolated(nonsending) func storeLoaded(
        _ loaded: [(key: Key, value: Value)], expiry: Expiry?, tiers: StorageTiers, untouched: Set<StorageTier>,
        maxStale: Duration?
    ) async {
        // One write per cache key, in cache-key order: the order in which every holder of
        // several turns takes them.
        var batch = LoadedBatch()
        for (key, value) in loaded.sorted(by: { $0.key.cacheKey < $1.key.cacheKey }) {
            guard batch.keys.last.map({ $0.cacheKey != key.cacheKey }) ?? true else { continue }
            do {
                batch.writes.append(try prepareWrite(value, expiry: expiry, tiers: tiers))
                batch.keys.append(key)
                batch.values.append(value)
            } catch {
                noteUnstored(1, "loaded value for \(key.cacheKey)", error)
            }
        }
        guard !batch.keys.isEmpty else { return }
        let staleEnd = maxStale.flatMap { staleCopyEnd(expiry: expiry, maxStale: $0) }
        do {
            guard hasSharedTiers else {
                try await turns.withTurns(batch.keys) {
                    try await self.writeLocally(batch, expiry: expiry, tiers: tiers, staleEnd: staleEnd)
                }
                counters.writes.add(batch.keys.count, ordering: .relaxed)
                return
            }
            try await sharedTurns.withTurns(batch.keys) {
                let localExpiry = self.localCopyExpiry(expiry, sharedTiersIn: tiers)
                try await self.turns.withTurns(batch.keys) {
                    try await self.writeLocally(batch, expiry: localExpiry, tiers: tiers, staleEnd: staleEnd)
                }
                await self.writeShared(batch, expiry: expiry, tiers: tiers, untouched: untouched, staleEnd: staleEnd)
            }
            counters.writes.add(batch.keys.count, ordering: .relaxed)
        } catch {
            noteUnstored(batch.keys.count, "\(batch.keys.count) loaded values", error)
        }
    }

    /// Values a bulk load stores, side by side, one per cache key.
    struct LoadedBatch {
        var keys: [Key] = []
        var values: [Value] = []
        var writes: [PreparedWrite] = []
    }

    private func noteUnstored(_ count: Int, _ what: String, _ error: any Error) {
        counters.loadStoreFailures.add(count, ordering: .relaxed)
        configuration.logHandler?("\(what) not stored: \(error)")
    }

    /// ``writeLocally(_:_:forKey:expiry:localExpiry:tiers:skipping:)`` and
    /// ``writeStaleCopiesLocally(_:_:forKey:until:tiers:)`` for a batch: each local byte tier,
    /// slowest first, gets one ``CacheTier/setValues(_:)``, then memory takes the values.
    nonisolated(nonsending) private func writeLocally(
        _ batch: LoadedBatch, expiry: Expiry?, tiers: StorageTiers, staleEnd: Date?
    ) async throws {
        let keepsLocalCopies = !hasSharedTiers
            || expiry.map { !($0.expirationDate(from: now()).map { $0 <= now() } ?? false) } ?? true
        for position in self.tiers.indices.reversed() where sharedTierAt[position] == nil {
            let tier = self.tiers[position]
            let named = tiers.contains(tier.tierID)
            do {
                var writes = named ? staleCopyWrites(batch, until: staleEnd, metadata: { _ in nil }) : []
                if named && keepsLocalCopies {
                    writes = tierWrites(batch, expiry: expiry, metadata: { _ in nil }) + writes
                } else {
                    for key in batch.keys where try await removeBytes(forKey: key.cacheKey, from: tier) {
                        emit(.removed, key.cacheKey, tier.tierID)
                    }
                }
                if staleEnd == nil || !named { for key in batch.keys { try await dropStaleCopy(forKey: key, from: tier) } }
                try await setBytes(writes, in: tier)
                if named && keepsLocalCopies { for key in batch.keys { emit(.written, key.cacheKey, tier.tierID) } }
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                for key in batch.keys { await removeFromTiers(fasterThan: position, key: key) }
                throw error
            }
        }
        for (index, key) in batch.keys.enumerated() {
            if let cost = batch.writes[index].cost, keepsLocalCopies {
                if memory.setValue(batch.values[index], forKey: key, cost: cost, expiry: expiry) { emit(.written, key.cacheKey, .memory) }
            } else if memory.removeValue(forKey: key) {
                emit(.removed, key.cacheKey, .memory)
            }
            // Loaded values carry no tags.
            dropMemoryTags(forKey: key)
            dropStaleCopyInMemory(forKey: key)
            if let staleCopies, let staleEnd, let cost = batch.writes[index].cost {
                staleCopies.setValue(batch.values[index], forKey: key, cost: cost, expiry: .date(staleEnd))
            }
        }
    }

    /// ``writeShared(_:forKey:expiry:tiers:untouched:)`` and
    /// ``writeStaleCopiesShared(_:forKey:until:tiers:skipping:)`` for a batch: one
    /// ``CacheTier/setValues(_:)`` per shared tier named. A failure is counted, and the batch's
    /// keys are removed from that tier (best effort), never thrown.
    nonisolated(nonsending) private func writeShared(
        _ batch: LoadedBatch, expiry: Expiry?, tiers: StorageTiers, untouched: Set<StorageTier>, staleEnd: Date?
    ) async {
        for key in batch.keys { guardLocalCopies(of: key) }
        for tier in self.tiers where tier is any SharedCacheTier && !untouched.contains(tier.tierID) {
            do {
                if tiers.contains(tier.tierID) {
                    let metadata = { (write: PreparedWrite) -> Data? in self.sharedMetadata(write) }
                    try await tier.setValues(tierWrites(batch, expiry: expiry, metadata: metadata)
                                             + staleCopyWrites(batch, until: staleEnd, metadata: metadata))
                    for key in batch.keys { emit(.written, key.cacheKey, tier.tierID) }
                    if staleEnd == nil { for key in batch.keys { try await dropStaleCopy(forKey: key, from: tier) } }
                } else {
                    for key in batch.keys {
                        if try await tier.removeValue(forKey: key.cacheKey) { emit(.removed, key.cacheKey, tier.tierID) }
                        try await dropStaleCopy(forKey: key, from: tier)
                    }
                }
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                for key in batch.keys {
                    _ = try? await tier.removeValue(forKey: key.cacheKey)
                    try? await dropStaleCopy(forKey: key, from: tier)
                }
            }
        }
    }

    /// The batch's values as tier writes with `expiry`.
    private func tierWrites(_ batch: LoadedBatch, expiry: Expiry?, metadata: (PreparedWrite) -> Data?) -> [TierWrite] {
        zip(batch.keys, batch.writes).compactMap { key, write in
            write.encoded.map { TierWrite(key: key.cacheKey, data: $0, expiry: expiry, metadata: metadata(write),
                                          isCompressible: write.isCompressible) }
        }
    }

    /// The batch's fail-safe stale copies, kept until `end`; none without fail-safe.
    private func staleCopyWrites(_ batch: LoadedBatch, until end: Date?, metadata: (PreparedWrite) -> Data?) -> [TierWrite] {
        guard staleCopies != nil, let end else { return [] }
        return zip(batch.keys, batch.writes).compactMap { key, write in
            write.encoded.map { TierWrite(key: staleCopyKey(key), data: $0, expiry: .date(end), metadata: metadata(write),
                                          isCompressible: write.isCompressible) }
        }
    }
}
