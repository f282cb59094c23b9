internal import Foundation
import Synchronization

extension Storage where Value: Sendable {
    /// The value for `key` from the first tier that holds it, or else the value `loader` makes,
    /// which is then stored in `tiers` with `expiry`: get-or-load.
    ///
    /// However many callers ask for one missing key at once, one `loader` runs for it in this
    /// process and every caller gets its value (or its error). Each caller can be cancelled on
    /// its own and leaves at once with `CancellationError`; the loader runs in a task of its own,
    /// cancelled only when the last caller waiting for it has left.
    ///
    /// ```swift
    /// let feed = try await storage.value(forKey: "feed", expiry: .seconds(60)) { _ in
    ///     try await api.fetchFeed()      // runs once, however many requests wait
    /// }
    /// ```
    ///
    /// Errors are not cached unless `failureExpiry` is given: then, for that long, callers asking
    /// for `key` get the loader's error at once without running it again (negative caching).
    /// A value the tiers refuse to store is still returned; the failure is logged and counted.
    ///
    /// - Parameters:
    ///   - tiers: Where to look and where to store; defaults to the configuration's tiers.
    ///   - expiry: The loaded value's expiry; `nil` takes each tier's default.
    ///   - failureExpiry: How long a loader's error is remembered for `key`; `nil` remembers none.
    ///   - loader: Makes the value of a missing key.
    /// - Throws: The loader's error, `CancellationError`, or a tier's error while reading.
    public func value(
        forKey key: Key, tiers: StorageTiers? = nil, expiry: Expiry? = nil, failureExpiry: Duration? = nil,
        orLoad loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Value {
        let tiers = tiers ?? configuration.defaultTiers
        if let found = memoryEntry(forKey: key, tiers: tiers) { return found.value }
        if let failure = failures.remembered(key, now: now()) { throw failure }
        let loaded = try await loads.value(for: key) {
            // A load that finished while this one waited to start may have filled memory.
            if tiers.includesMemory, let found = self.memory.entry(forKey: key) {
                return LoadedValue(value: found.value)
            }
            if let leasing = self.leasingTier(in: tiers) {
                return LoadedValue(value: try await self.loadThroughLease(
                    forKey: key, tiers: tiers, leasing: leasing, expiry: expiry, loader: loader))
            }
            // A shared tier whose read failed does not get the loaded value (failure = miss).
            let failedShared = Locked(Set<StorageTier>())
            if self.allTiersLocal {
                if let found = try await self.entryBelowMemory(forKey: key, tiers: tiers) {
                    return LoadedValue(value: found.value)
                }
            } else if let found = try await self.walkTiers(forKey: key, tiers: tiers, failedSharedTiers: failedShared) {
                return LoadedValue(value: found.value)
            }
            let storeTiers = self.tierIDs(in: tiers, excluding: failedShared.withLock { $0 })
            let value: Value
            do {
                value = try await loader(key)
            } catch {
                if let failureExpiry, !(error is CancellationError) {
                    self.failures.remember(error, for: key, until: self.now().addingTimeInterval(failureExpiry.seconds))
                }
                throw error
            }
            do {
                try await self.setValue(value, forKey: key, expiry: expiry, tiers: storeTiers)
            } catch {
                self.counters.loadStoreFailures.add(1, ordering: .relaxed)
                self.configuration.logHandler?("loaded value for \(key.cacheKey) was not stored: \(error)")
            }
            self.counters.loads.add(1, ordering: .relaxed)
            return LoadedValue(value: value)
        }
        return loaded.value
    }

    /// Forgets a failure remembered by `value(forKey:tiers:expiry:failureExpiry:orLoad:)` for
    /// `key`, so the next call runs its loader.
    public func forgetFailure(forKey key: Key) {
        failures.forget(key)
    }

    /// A read of memory alone that counts a memory hit or miss but, unlike
    /// `entry(forKey:tiers: .memory)`, no overall miss: for a caller that goes on to
    /// ``entryAfterMemoryMiss(forKey:tiers:)``, so its request counts one hit or one miss.
    package func entryInMemory(forKey key: Key) -> Entry? {
        memoryEntry(forKey: key, tiers: .memory)
    }

    /// A read for a caller that has already looked in memory (and counted that miss): memory
    /// is checked again without counting, in case a load filled it meanwhile, then the tiers
    /// below it, so each request counts one hit or one miss.
    nonisolated(nonsending) package func entryAfterMemoryMiss(forKey key: Key, tiers: StorageTiers? = nil) async throws -> Entry? {
        let tiers = tiers ?? configuration.defaultTiers
        if tiers.includesMemory, let found = memory.entry(forKey: key) {
            return Entry(value: found.value, tier: .memory, expirationDate: found.expirationDate)
        }
        return try await entryBelowMemory(forKey: key, tiers: tiers)
    }

    /// Counts a read that a caller did not make because it waited for another caller's read
    /// of the same key (a coalesced load above the storage), as that read counted below
    /// memory: a hit in `tier` and a miss in each byte tier before it, or, when `tier` is
    /// `nil` (no tier had the key), a miss in every byte tier and overall. `.memory` counts
    /// nothing: a read that found the key in memory after a miss there counts nothing either.
    ///
    /// With it, a caller that counted its memory miss with ``entryInMemory(forKey:)`` and then
    /// joined another caller's ``entryAfterMemoryMiss(forKey:tiers:)`` counts once, in the tier
    /// that answered, as a caller that made the read itself does.
    package func countJoinedRead(answeredBy tier: StorageTier?) {
        guard tier != .memory else { return }
        for byteTier in tiers {
            let counters = self.counters.tier(byteTier.tierID)
            if byteTier.tierID == tier {
                counters.hits.add(1, ordering: .relaxed)
                return
            }
            counters.misses.add(1, ordering: .relaxed)
        }
        counters.misses.add(1, ordering: .relaxed)
    }

    /// The async read below memory, whichever path the storage's tiers take.
    nonisolated(nonsending) private func entryBelowMemory(forKey key: Key, tiers: StorageTiers) async throws -> Entry? {
        if allTiersLocal {
            guard localTiers.contains(where: { tiers.contains($0.tierID) }) else {
                counters.misses.add(1, ordering: .relaxed)
                return nil
            }
            return try await offload { try self.entryBelowMemory(forKey: key, tiers: tiers) }
        }
        return try await walkTiers(forKey: key, tiers: tiers)
    }

    func now() -> Date {
        configuration.now?() ?? memory.configuration.now()
    }
}
