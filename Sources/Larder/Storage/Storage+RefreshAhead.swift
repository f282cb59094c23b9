internal import Foundation
import Synchronization

// Refresh ahead of expiry: a get-or-load hit past its refresh point (`refreshAfter` of its
// lifetime, or XFetch's probabilistic test) is returned at once and starts one detached loader
// run for its key (see LoadRuns). With a leasing shared tier the run takes the key's lease, so
// one instance in the fleet refreshes it; the others keep the shared value meanwhile.

extension Storage where Value: Sendable {
    /// Starts a background refresh of `key` when `entry` (a get-or-load hit) is past its refresh
    /// point and no run for the key is in flight. Never waits, never throws.
    func refreshIfDue(
        _ entry: Entry, forKey key: Key, tiers: StorageTiers, expiry: Expiry?, options: LoadOptions,
        loader: @escaping @Sendable (Key) async throws -> Value
    ) {
        guard var lifetime = Self.lifetime(of: expiry ?? memory.configuration.defaultExpiry) else { return }
        // A local copy of a shared tier's value lives at most localCopyMaxAge: judge it on that.
        if sharedTierAt.indices.contains(where: { sharedTierAt[$0]?.tierID == entry.tier }) == false {
            for case let shared? in sharedTierAt where tiers.contains(shared.tierID) {
                if let maxAge = shared.localCopyMaxAge { lifetime = min(lifetime, maxAge.seconds) }
            }
        }
        guard isDue(entry.expirationDate, lifetime: lifetime, forKey: key, options: options), !loadRuns.isRunning(key) else {
            return
        }
        let leasing = leasingTier(in: tiers)
        let fullLifetime = Self.lifetime(of: expiry ?? memory.configuration.defaultExpiry) ?? lifetime
        let handle = loadRuns.run(for: key, detached: true) {
            LoadedValue(value: try await self.refreshRun(
                forKey: key, tiers: tiers, expiry: expiry, lifetime: fullLifetime, options: options, leasing: leasing, loader: loader))
        }
        guard handle.isNew else { return }
        counters.refreshesStarted.add(1, ordering: .relaxed)
        emit(.refreshStarted, key.cacheKey, entry.tier)
        watchBackgroundRun(handle, tier: entry.tier, maxStale: options.maxStale, throttle: options.failSafeThrottle)
    }

    /// Whether a value expiring at `expirationDate` after a lifetime of `lifetime` seconds is
    /// past its refresh point: `refreshAfter` of its lifetime gone, or XFetch's test passed.
    func isDue(_ expirationDate: Date?, lifetime: TimeInterval, forKey key: Key, options: LoadOptions) -> Bool {
        guard let expirationDate else { return false }
        let remaining = expirationDate.timeIntervalSince(now())
        if let fraction = options.refreshAfter, remaining <= (1 - fraction) * lifetime { return true }
        if let beta = options.earlyRefreshBeta, let delta = loadDurations.duration(for: key)?.seconds, delta > 0 {
            // XFetch: refresh when now − δ·β·ln(u) ≥ expiry, u uniform in (0, 1].
            let u = Double.random(in: Double.leastNonzeroMagnitude...1)
            return -delta * beta * log(u) >= remaining
        }
        return false
    }

    /// The lifetime in seconds a call's expiry gives a value written now, when it is a duration.
    static func lifetime(of expiry: Expiry) -> TimeInterval? {
        switch expiry {
        case .seconds(let seconds), .sliding(let seconds): return seconds
        case .never, .date: return nil
        }
    }

    /// A background refresh. With a leasing tier: a shared value that is not itself due is
    /// copied in (another instance refreshed it); else the value is marked stale there and the
    /// one instance that wins its lease loads and fills it, while the others keep serving.
    nonisolated(nonsending) private func refreshRun(
        forKey key: Key, tiers: StorageTiers, expiry: Expiry?, lifetime: TimeInterval, options: LoadOptions,
        leasing: (any LeasingCacheTier)?, loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Entry {
        guard let leasing else {
            return try await runLoader(
                forKey: key, tiers: tiers, expiry: expiry, maxStale: options.maxStale, leasing: nil, untouched: [], loader: loader)
        }
        let position = self.tiers.firstIndex { $0 === leasing }!
        let token = turns.token(for: key)
        let sharedToken = sharedTurns.token(for: key)
        let remote: TierEntry?
        do {
            remote = try await leasing.entry(forKey: key.cacheKey)
        } catch {
            // Failure is a miss, and no reason to load now: the local value is still live.
            counters.tier(leasing.tierID).errors.add(1, ordering: .relaxed)
            throw error
        }
        if let remote, !isDue(remote.expirationDate, lifetime: lifetime, forKey: key, options: options),
           let value = decoded(remote, from: leasing) {
            try await promote(remote, value, forKey: key, from: position, tiers: tiers, token: token, sharedToken: sharedToken)
            return Entry(value: value, tier: leasing.tierID, expirationDate: remote.expirationDate)
        }
        // Only the value read here, and only while it is still due: another instance may have
        // refreshed the key since, and its fresh value must stay fresh.
        if let expiration = remote?.expirationDate { try await leasing.invalidate(forKey: key.cacheKey, ifExpiringBy: expiration) }
        switch try await leasing.leasedEntry(forKey: key.cacheKey, leaseDuration: leasing.leaseDuration) {
        case .won(let lease, let stale):
            let value = try await loadAndFill(
                key, lease: lease, in: leasing, tiers: tiers, expiry: expiry, maxStale: options.maxStale,
                releasesOnFailure: stale == nil, loader: loader)
            return loadedEntry(value, expiry: expiry)
        case .hit(let found):
            guard let value = decoded(found, from: leasing) else { throw CancellationError() }
            try await promote(found, value, forKey: key, from: position, tiers: tiers, token: token, sharedToken: sharedToken)
            return Entry(value: value, tier: leasing.tierID, expirationDate: found.expirationDate)
        case .busy(let stale):
            // Another instance holds the lease and refreshes the key for the fleet.
            guard let stale, let value = decoded(stale, from: leasing) else { throw CancellationError() }
            return Entry(value: value, tier: leasing.tierID, expirationDate: stale.expirationDate)
        }
    }
}
