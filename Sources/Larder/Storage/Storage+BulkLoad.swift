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
    /// each value it returns is stored in `tiers` with `expiry` (a shared tier whose read failed
    /// is left as it is). A key `loader` returns no value for is absent from the result; values
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
                for (key, value) in loaded where wanted.contains(key) {
                    found[key] = value
                    group.addTask {
                        do {
                            try await self.storeLoaded(value, forKey: key, expiry: expiry, tiers: tiers, untouched: untouched,
                                                     maxStale: self.configuration.loading.maxStale)
                        } catch {
                            self.counters.loadStoreFailures.add(1, ordering: .relaxed)
                            self.configuration.logHandler?("loaded value for \(key.cacheKey) was not stored: \(error)")
                        }
                        return (key, nil)
                    }
                }
            }
            for try await (key, value) in group {
                if let value { found[key] = value }
            }
        }
        return found
    }
}
