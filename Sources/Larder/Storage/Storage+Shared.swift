import Foundation
import Synchronization

// The rules for shared tiers (see SharedCacheTier): failure is a miss, local copies are
// bounded, writes go local then shared, removals shared then local, and get-or-load takes a
// lease from a LeasingCacheTier so that one loader runs per key across every process.

extension Storage where Value: Sendable {
    /// Whether any byte tier is shared (a remote cache).
    var hasSharedTiers: Bool { tiers.contains { $0 is any SharedCacheTier } }

    /// The expiry of the local copies of a write that also goes to shared tiers in `tiers`:
    /// the earlier of `expiry` and each such tier's ``SharedCacheTier/localCopyMaxAge``.
    func localCopyExpiry(_ expiry: Expiry?, sharedTiersIn tiers: StorageTiers) -> Expiry? {
        let now = now()
        var bound: Date?
        for case let shared as any SharedCacheTier in self.tiers where tiers.contains(shared.tierID) {
            guard let maxAge = shared.localCopyMaxAge else { continue }
            let end = now.addingTimeInterval(maxAge.seconds)
            bound = min(bound ?? end, end)
        }
        guard let bound else { return expiry }
        let requested = (expiry ?? memory.configuration.defaultExpiry).expirationDate(from: now)
        return .date(min(requested ?? bound, bound))
    }

    // MARK: - Pushed invalidations

    /// Registers `key` with the tiers that push invalidations, before a read or write through
    /// them may leave a local copy (see ``InvalidatingCacheTier``); the first call installs the
    /// storage's listeners.
    func guardLocalCopies(of key: Key) {
        guard let localCopyGuard else { return }
        localCopyGuard.register(key) {
            for tier in localCopyGuard.tiers {
                tier.addInvalidationListener { [weak self] invalidation in
                    self?.dropLocalCopies(invalidation)
                }
            }
        }
    }

    /// Drops the local copies an invalidation names: at once from memory (a promotion not yet
    /// past its check is skipped); then, for a key whose turn was held (a promotion past its
    /// check may still write) and for the local byte tiers, under the key's turn.
    func dropLocalCopies(_ invalidation: TierInvalidation) {
        guard let keys = localCopyGuard?.take(invalidation), !keys.isEmpty else { return }
        let hasLocalByteTiers = !localTiers.isEmpty
        var later: [Key] = []
        for key in keys {
            let wasHeld = turns.bump(key)
            if memory.removeValue(forKey: key) { emit(.removed, key.cacheKey, .memory) }
            // A value changed or removed elsewhere is not served later as this instance's
            // fail-safe stale copy either.
            if staleCopies != nil { dropStaleCopyInMemory(forKey: key) }
            if wasHeld || hasLocalByteTiers { later.append(key) }
        }
        guard !later.isEmpty else { return }
        let local = localTierIDs(in: .all)
        Task {
            for key in later {
                _ = try? await self.turns.withTurn(key) {
                    _ = try await self.removeLocally(forKey: key, tiers: local)
                    for tier in self.localTiers { try self.dropStaleCopy(forKey: key, in: tier) }
                }
            }
        }
    }

    /// The shared part of a write: each shared tier named gets the value, each not named loses
    /// it. A failure is counted and the tier's old value is removed if possible; nothing throws.
    ///
    /// The tiers in `untouched` are left as they are: a shared tier whose read just failed is
    /// neither written nor cleared (failure is a miss, never a delete of the fleet's value).
    nonisolated(nonsending) func writeShared(
        _ write: PreparedWrite, forKey key: Key, expiry: Expiry?, tiers: StorageTiers, untouched: Set<StorageTier> = []
    ) async {
        guardLocalCopies(of: key)
        for tier in self.tiers where tier is any SharedCacheTier && !untouched.contains(tier.tierID) {
            do {
                if tiers.contains(tier.tierID), let encoded = write.encoded {
                    try await tier.setValue(encoded, forKey: key.cacheKey, expiry: expiry, metadata: sharedMetadata(write),
                                            isCompressible: write.isCompressible)
                    emit(.written, key.cacheKey, tier.tierID)
                } else if try await tier.removeValue(forKey: key.cacheKey) {
                    emit(.removed, key.cacheKey, tier.tierID)
                }
                try await dropStaleCopy(forKey: key, from: tier)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
                _ = try? await tier.removeValue(forKey: key.cacheKey)
                try? await dropStaleCopy(forKey: key, from: tier)
            }
        }
    }

    /// The shared part of a removal; a failure is counted, never thrown.
    nonisolated(nonsending) func removeShared(forKey key: Key, tiers: StorageTiers) async -> Bool {
        var removed = false
        for tier in self.tiers.reversed() where tier is any SharedCacheTier && tiers.contains(tier.tierID) {
            do {
                if try await tier.removeValue(forKey: key.cacheKey) {
                    removed = true
                    emit(.removed, key.cacheKey, tier.tierID)
                }
                try await dropStaleCopy(forKey: key, from: tier)
            } catch {
                counters.tier(tier.tierID).errors.add(1, ordering: .relaxed)
            }
        }
        return removed
    }

    /// Marks `key`'s value stale in every leasing tier named and drops the local copies: readers
    /// of ``value(forKey:tiers:expiry:failureExpiry:options:orLoad:)`` keep getting the old value from
    /// the shared tier while exactly one caller in the fleet recomputes it.
    ///
    /// A failure of a shared tier is counted, never thrown.
    public func invalidate(forKey key: Key, tiers: StorageTiers? = nil) async throws {
        let tiers = tiers ?? configuration.defaultTiers
        try await sharedTurns.withTurn(key) {
            for case let leasing as any LeasingCacheTier in self.tiers where tiers.contains(leasing.tierID) {
                do {
                    try await leasing.invalidate(forKey: key.cacheKey)
                } catch {
                    counters.tier(leasing.tierID).errors.add(1, ordering: .relaxed)
                }
            }
            _ = try await self.turns.withTurn(key) {
                try await self.removeLocally(forKey: key, tiers: self.localTierIDs(in: tiers))
            }
        }
    }

    /// `tiers` without the shared ones.
    func localTierIDs(in tiers: StorageTiers) -> StorageTiers {
        StorageTiers(tierIDs.filter { id in
            tiers.contains(id) && !self.tiers.contains { $0.tierID == id && $0 is any SharedCacheTier }
        })
    }

    /// `tiers` without `excluded`.
    func tierIDs(in tiers: StorageTiers, excluding excluded: Set<StorageTier>) -> StorageTiers {
        guard !excluded.isEmpty else { return tiers }
        return StorageTiers(tierIDs.filter { tiers.contains($0) && !excluded.contains($0) })
    }

    // MARK: - Get-or-load with a lease

    /// The first leasing tier named in `tiers`, if any.
    func leasingTier(in tiers: StorageTiers) -> (any LeasingCacheTier)? {
        for case let leasing as any LeasingCacheTier in self.tiers where tiers.contains(leasing.tierID) {
            return leasing
        }
        return nil
    }

    /// Get-or-load below memory through `leasing`: the local tiers, then a lease-aware read.
    /// The winner runs the loader and fills; others serve a stale value at once or wait for the
    /// fill up to the tier's ``LeasingCacheTier/leaseWaitLimit``, then load without filling.
    ///
    /// With `maxStale`, a value loaded here also gets its stale copies (see `Storage+FailSafe`).
    func loadThroughLease(
        forKey key: Key, tiers: StorageTiers, leasing: any LeasingCacheTier, expiry: Expiry?, maxStale: Duration? = nil,
        loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Entry {
        guardLocalCopies(of: key)
        let local = localTierIDs(in: tiers)
        if self.tiers.contains(where: { !($0 is any SharedCacheTier) && local.contains($0.tierID) }),
           let found = try await walkTiers(forKey: key, tiers: local) {
            return found
        }
        let position = self.tiers.firstIndex { $0 === leasing }!
        let waitEnd = ContinuousClock.now + leasing.leaseWaitLimit
        var pause = Duration.milliseconds(5)
        while true {
            try Task.checkCancellation()
            let token = turns.token(for: key)
            let sharedToken = sharedTurns.token(for: key)
            let read: LeasedRead
            do {
                read = try await currentLeasedEntry(forKey: key.cacheKey, in: leasing)
            } catch {
                // Failure is a miss: the loader's value is neither written back to the tier nor
                // allowed to remove what the fleet shares there.
                counters.tier(leasing.tierID).errors.add(1, ordering: .relaxed)
                return try await loadAndStoreLocally(key, tiers: tiers, expiry: expiry, maxStale: maxStale, loader: loader)
            }
            switch read {
            case .hit(let found):
                if let value = decoded(found, from: leasing) {
                    try await promote(found, value, forKey: key, from: position, tiers: tiers, token: token, sharedToken: sharedToken)
                    return Entry(value: value, tier: leasing.tierID, expirationDate: found.expirationDate)
                }
                return try await loadAndStoreLocally(key, tiers: tiers, expiry: expiry, maxStale: maxStale, loader: loader)
            case .won(let lease, let stale):
                if let stale, let value = decoded(stale, from: leasing) {
                    // Serve the stale value now; this caller's lease refreshes it meanwhile.
                    let detachedKey = key
                    Task {
                        _ = try? await self.loadAndFill(
                            detachedKey, lease: lease, in: leasing, tiers: tiers, expiry: expiry, maxStale: maxStale,
                            releasesOnFailure: false, loader: loader)
                    }
                    return Entry(value: value, tier: leasing.tierID, expirationDate: stale.expirationDate)
                }
                let value = try await loadAndFill(
                    key, lease: lease, in: leasing, tiers: tiers, expiry: expiry, maxStale: maxStale,
                    releasesOnFailure: true, loader: loader)
                return loadedEntry(value, expiry: expiry)
            case .busy(let stale):
                if let stale, let value = decoded(stale, from: leasing) {
                    return Entry(value: value, tier: leasing.tierID, expirationDate: stale.expirationDate)
                }
                guard ContinuousClock.now < waitEnd else {
                    return try await loadAndStoreLocally(key, tiers: tiers, expiry: expiry, maxStale: maxStale, loader: loader)
                }
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    func decoded(_ found: TierEntry, from tier: any CacheTier) -> Value? {
        // A shared value this process knows to be invalidated (see `Storage+Tags.swift`).
        if tier is any SharedCacheTier, isKnownStale(found, in: tier) { return nil }
        do {
            return try transformer.decode(found.data)
        } catch {
            counters.decodingFailures.add(1, ordering: .relaxed)
            return nil
        }
    }

    /// Runs the loader when the leasing tier failed, stayed busy or held bytes that do not
    /// decode, and keeps the value in the local tiers of `tiers` only, as a bounded local copy
    /// (logging a refused write). The shared tiers are not touched: failure is a miss, never a
    /// purge of what the fleet shares.
    private func loadAndStoreLocally(
        _ key: Key, tiers: StorageTiers, expiry: Expiry?, maxStale: Duration?, loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Entry {
        let value = try await loader(key)
        counters.loads.add(1, ordering: .relaxed)
        let local = localTierIDs(in: tiers)
        guard local.includesMemory || self.tiers.contains(where: { local.contains($0.tierID) }) else {
            return loadedEntry(value, expiry: expiry)
        }
        do {
            let write = try prepareWrite(value, expiry: expiry, tiers: local)
            let localExpiry = localCopyExpiry(expiry, sharedTiersIn: tiers)
            let staleEnd = maxStale.flatMap { staleCopyEnd(expiry: expiry, maxStale: $0) }
            try await sharedTurns.withTurn(key) {
                try await self.turns.withTurn(key) {
                    try await self.writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: localExpiry, tiers: local)
                    if let staleEnd { await self.writeStaleCopiesLocally(write, value, forKey: key, until: staleEnd, tiers: local) }
                }
            }
        } catch {
            counters.loadStoreFailures.add(1, ordering: .relaxed)
            configuration.logHandler?("loaded value for \(key.cacheKey) was not stored: \(error)")
        }
        return loadedEntry(value, expiry: expiry)
    }

    /// The lease winner's work: load, store locally, fill the leasing tier under the lease.
    /// A refused fill (the key changed meanwhile) returns the value without caching it there.
    ///
    /// A loader that throws gives the lease back when `releasesOnFailure` (the key was missing:
    /// other callers are waiting for this fill), so the fleet does not wait out the lease.
    func loadAndFill(
        _ key: Key, lease: TierLease, in leasing: any LeasingCacheTier, tiers: StorageTiers, expiry: Expiry?,
        maxStale: Duration?, releasesOnFailure: Bool, loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Value {
        let value: Value
        do {
            value = try await loader(key)
        } catch {
            if releasesOnFailure {
                do {
                    try await leasing.releaseLease(lease, forKey: key.cacheKey)
                } catch {
                    counters.tier(leasing.tierID).errors.add(1, ordering: .relaxed)
                }
            }
            throw error
        }
        counters.loads.add(1, ordering: .relaxed)
        let write: PreparedWrite
        do {
            write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        } catch {
            counters.loadStoreFailures.add(1, ordering: .relaxed)
            return value
        }
        try? await sharedTurns.withTurn(key) {
            guard let encoded = write.encoded else { return }
            let filled: Bool
            do {
                filled = try await leasing.fill(encoded, forKey: key.cacheKey, lease: lease, expiry: expiry,
                                                metadata: self.sharedMetadata(write),
                                                isCompressible: write.isCompressible)
            } catch {
                counters.tier(leasing.tierID).errors.add(1, ordering: .relaxed)
                filled = false
            }
            let localTiers = filled ? self.localTierIDs(in: tiers) : StorageTiers([])
            let localExpiry = self.localCopyExpiry(expiry, sharedTiersIn: tiers)
            let staleEnd = maxStale.flatMap { self.staleCopyEnd(expiry: expiry, maxStale: $0) }
            try await self.turns.withTurn(key) {
                try await self.writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: localExpiry, tiers: localTiers)
                // A refused fill means a newer write: no stale copy of this older value.
                if let staleEnd, filled {
                    await self.writeStaleCopiesLocally(write, value, forKey: key, until: staleEnd, tiers: self.localTierIDs(in: tiers))
                }
            }
            if let staleEnd, filled {
                await self.writeStaleCopiesShared(write, forKey: key, until: staleEnd, tiers: StorageTiers([leasing.tierID]))
            }
        }
        return value
    }
}
