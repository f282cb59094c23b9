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
    /// `options` (or the configuration's ``Configuration/loading``) add fail-safe stale values,
    /// soft and hard timeouts and refresh ahead of expiry; to know whether the value returned is
    /// stale, call ``entry(forKey:tiers:expiry:failureExpiry:options:orLoad:)`` instead.
    ///
    /// - Parameters:
    ///   - tiers: Where to look and where to store; defaults to the configuration's tiers.
    ///   - expiry: The loaded value's expiry; `nil` takes each tier's default.
    ///   - failureExpiry: How long a loader's error is remembered for `key`; `nil` remembers none.
    ///   - options: Fail-safe, timeouts and refresh ahead; `nil` takes ``Configuration/loading``.
    ///   - loader: Makes the value of a missing key.
    /// - Throws: The loader's error, `CancellationError`, ``StorageError/Code/timeout`` after a
    ///   hard timeout with no stale value, ``StorageError/Code/invalidInput`` for options out of
    ///   range, or a tier's error while reading.
    public func value(
        forKey key: Key, tiers: StorageTiers? = nil, expiry: Expiry? = nil, failureExpiry: Duration? = nil,
        options: LoadOptions? = nil, orLoad loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Value {
        try await entry(forKey: key, tiers: tiers, expiry: expiry, failureExpiry: failureExpiry, options: options, orLoad: loader).value
    }

    /// Get-or-load that says where the value came from and whether it is stale.
    ///
    /// The same call as ``value(forKey:tiers:expiry:failureExpiry:options:orLoad:)``; the entry's
    /// ``Entry/tier`` is the tier that held the value, or ``StorageTier/loader`` for a value the
    /// loader made in this call, and ``Entry/isStale`` is `true` for a stale copy returned by
    /// fail-safe (the loader threw or timed out) or at a soft timeout.
    ///
    /// ```swift
    /// let options = LoadOptions(maxStale: .seconds(3_600), softTimeout: .milliseconds(100))
    /// let quote = try await storage.entry(forKey: symbol, expiry: .seconds(5), options: options) {
    ///     try await exchange.quote(for: $0)
    /// }
    /// if quote.isStale { log.warning("served a stale quote for \(symbol)") }
    /// ```
    public func entry(
        forKey key: Key, tiers: StorageTiers? = nil, expiry: Expiry? = nil, failureExpiry: Duration? = nil,
        options: LoadOptions? = nil, orLoad loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Entry {
        let tiers = tiers ?? configuration.defaultTiers
        let options = try loadOptions(options)
        if let found = memoryEntry(forKey: key, tiers: tiers) {
            if options.refreshAfter != nil || options.earlyRefreshBeta != nil {
                refreshIfDue(found, forKey: key, tiers: tiers, expiry: expiry, options: options, loader: loader)
            }
            return found
        }
        if let failure = failures.remembered(key, now: now()) { throw failure }
        let loaded = try await loads.value(for: key) {
            LoadedValue(value: try await self.loadEntry(
                forKey: key, tiers: tiers, expiry: expiry, failureExpiry: failureExpiry, options: options, loader: loader))
        }
        return loaded.value
    }

    /// `options`, checked, or the configuration's.
    func loadOptions(_ options: LoadOptions?) throws -> LoadOptions {
        guard let options else { return configuration.loading }
        try options.validate()
        if let maxStale = options.maxStale, staleCopies == nil {
            throw StorageError(
                code: .invalidInput,
                message: "LoadOptions.maxStale \(maxStale) needs a storage that keeps stale copies: "
                    + "set Configuration.loading.maxStale when creating it")
        }
        return options
    }

    /// The coalesced part of get-or-load after a memory miss: the other tiers, then a stale copy
    /// (fail-safe), then the key's loader run, waited for within the options' timeouts.
    nonisolated(nonsending) private func loadEntry(
        forKey key: Key, tiers: StorageTiers, expiry: Expiry?, failureExpiry: Duration?, options: LoadOptions,
        loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Entry {
        // A load that finished while this one waited to start may have filled memory.
        if tiers.includesMemory, let found = currentMemory.entry(forKey: key) {
            return Entry(value: found.value, tier: .memory, expirationDate: found.expirationDate)
        }
        let leasing = leasingTier(in: tiers)
        // A shared tier whose read failed is not touched by the store (failure = miss).
        let failedShared = Locked(Set<StorageTier>())
        if leasing == nil {
            let found: Entry?
            if allTiersLocal {
                found = try await entryBelowMemory(forKey: key, tiers: tiers)
            } else {
                found = try await walkTiers(forKey: key, tiers: tiers, failedSharedTiers: failedShared)
            }
            if let found {
                if options.refreshAfter != nil || options.earlyRefreshBeta != nil {
                    refreshIfDue(found, forKey: key, tiers: tiers, expiry: expiry, options: options, loader: loader)
                }
                return found
            }
        }
        // Stale copies are looked up only when they are needed: after a failure, at a timeout,
        // or while the loader is throttled. A miss costs no extra read.
        let failSafe = options.maxStale != nil
        if failSafe, failSafeThrottles.remembered(key, now: now()) != nil,
           let stale = await staleEntry(forKey: key, tiers: tiers) {
            // The loader failed a moment ago: the stale value, without calling it again.
            return servedStale(stale, forKey: key)
        }
        let untouched = failedShared.withLock { $0 }
        let handle = loadRuns.run(for: key) {
            LoadedValue(value: try await self.runLoader(
                forKey: key, tiers: tiers, expiry: expiry, maxStale: options.maxStale, leasing: leasing,
                untouched: untouched, loader: loader))
        }
        // At the soft timeout a stale copy is looked up; with none, the wait goes on.
        let staleAtSoftTimeout = Locked<Entry?>(nil)
        let outcome: RunOutcome<LoadedValue<Entry>>
        do {
            outcome = try await awaitRun(
                handle.task, soft: failSafe ? options.softTimeout : nil, hard: options.hardTimeout,
                clock: configuration.loadClock
            ) {
                guard let stale = await self.staleEntry(forKey: key, tiers: tiers) else { return false }
                staleAtSoftTimeout.withLock { $0 = stale }
                return true
            }
        } catch {
            // Every caller of this key left: the run is cancelled unless it was detached.
            loadRuns.abandon(handle)
            throw error
        }
        do {
            switch outcome {
            case .finished(.success(let loaded)):
                return loaded.value
            case .finished(.failure(let error)):
                if failSafe, !(error is CancellationError), let stale = await staleEntry(forKey: key, tiers: tiers) {
                    failSafeThrottles.remember(error, for: key, until: now().addingTimeInterval(options.failSafeThrottle.seconds))
                    return servedStale(stale, forKey: key)
                }
                if let failureExpiry, !(error is CancellationError) {
                    failures.remember(error, for: key, until: now().addingTimeInterval(failureExpiry.seconds))
                }
                throw error
            case .softTimeout:
                // The run goes on, detached, and stores its value.
                guard let stale = staleAtSoftTimeout.withLock({ $0 }) else { return try await handle.task.value.value }
                loadRuns.detach(handle)
                watchBackgroundRun(handle, tier: stale.tier, maxStale: options.maxStale, throttle: options.failSafeThrottle)
                counters.softTimeouts.add(1, ordering: .relaxed)
                emit(.softTimeout, key.cacheKey, stale.tier)
                return servedStale(stale, forKey: key)
            case .hardTimeout:
                loadRuns.abandon(handle)
                counters.hardTimeouts.add(1, ordering: .relaxed)
                if failSafe, let stale = await staleEntry(forKey: key, tiers: tiers) {
                    emit(.hardTimeout, key.cacheKey, stale.tier)
                    failSafeThrottles.remember(
                        StorageError(code: .timeout, message: "hard timeout"), for: key,
                        until: now().addingTimeInterval(options.failSafeThrottle.seconds))
                    return servedStale(stale, forKey: key)
                }
                emit(.hardTimeout, key.cacheKey, .loader)
                throw StorageError(
                    code: .timeout,
                    message: "the loader for \(key.cacheKey) did not finish within \(options.hardTimeout ?? .zero) "
                        + "(LoadOptions.hardTimeout)")
            }
        }
    }

    /// Counts and reports a stale value served, and returns it.
    private func servedStale(_ stale: Entry, forKey key: Key) -> Entry {
        counters.staleServed.add(1, ordering: .relaxed)
        emit(.staleServed, key.cacheKey, stale.tier)
        return stale
    }

    /// A loader run: the loader (through the leasing tier's lease when there is one), then the
    /// value stored in `tiers`, with stale copies when `maxStale` is set. Shared tiers in
    /// `untouched` (their read failed) are neither written nor cleared.
    nonisolated(nonsending) func runLoader(
        forKey key: Key, tiers: StorageTiers, expiry: Expiry?, maxStale: Duration?, leasing: (any LeasingCacheTier)?,
        untouched: Set<StorageTier>, loader: @escaping @Sendable (Key) async throws -> Value
    ) async throws -> Entry {
        let timed: @Sendable (Key) async throws -> Value = { key in
            let started = ContinuousClock.now
            do {
                let value = try await self.observedLoad(key, loader)
                self.loadDurations.record(ContinuousClock.now - started, for: key)
                return value
            } catch {
                if !(error is CancellationError) { self.counters.loadFailures.add(1, ordering: .relaxed) }
                throw error
            }
        }
        if let leasing {
            return try await loadThroughLease(
                forKey: key, tiers: tiers, leasing: leasing, expiry: expiry, maxStale: maxStale, loader: timed)
        }
        let value = try await timed(key)
        counters.loads.add(1, ordering: .relaxed)
        do {
            try await storeLoaded(value, forKey: key, expiry: expiry, tiers: tiers, untouched: untouched, maxStale: maxStale)
        } catch {
            counters.loadStoreFailures.add(1, ordering: .relaxed)
            configuration.logHandler?("loaded value for \(key.cacheKey) was not stored: \(error)")
        }
        return loadedEntry(value, expiry: expiry)
    }

    /// The entry of a value the loader made in this call.
    func loadedEntry(_ value: Value, expiry: Expiry?) -> Entry {
        Entry(value: value, tier: .loader,
              expirationDate: (expiry ?? memory.configuration.defaultExpiry).expirationDate(from: now()))
    }

    /// Stores a loaded value in `tiers` (and its stale copies when `maxStale` is set): local
    /// tiers under the key's turn, then the shared ones, except the shared tiers in `untouched`,
    /// which keep what they hold.
    nonisolated(nonsending) func storeLoaded(
        _ value: Value, forKey key: Key, expiry: Expiry?, tiers: StorageTiers, untouched: Set<StorageTier>,
        maxStale: Duration?
    ) async throws {
        let write = try prepareWrite(value, expiry: expiry, tiers: tiers)
        let staleEnd = maxStale.flatMap { staleCopyEnd(expiry: expiry, maxStale: $0) }
        guard hasSharedTiers else {
            try await turns.withTurn(key) {
                try await self.writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: expiry, tiers: tiers)
                if let staleEnd { await self.writeStaleCopiesLocally(write, value, forKey: key, until: staleEnd, tiers: tiers) }
            }
            counters.writes.add(1, ordering: .relaxed)
            return
        }
        try await sharedTurns.withTurn(key) {
            let localExpiry = self.localCopyExpiry(expiry, sharedTiersIn: tiers)
            try await self.turns.withTurn(key) {
                try await self.writeLocally(write, value, forKey: key, expiry: expiry, localExpiry: localExpiry, tiers: tiers)
                if let staleEnd { await self.writeStaleCopiesLocally(write, value, forKey: key, until: staleEnd, tiers: tiers) }
            }
            await self.writeShared(write, forKey: key, expiry: expiry, tiers: tiers, untouched: untouched)
            if let staleEnd { await self.writeStaleCopiesShared(write, forKey: key, until: staleEnd, tiers: tiers, skipping: untouched) }
        }
        counters.writes.add(1, ordering: .relaxed)
    }

    /// Follows a run nobody waits for any more (after a soft timeout, or a refresh): a failure
    /// is counted and reported as a failed refresh, and throttles the loader when fail-safe is on.
    func watchBackgroundRun(
        _ handle: LoadRuns<Key, LoadedValue<Entry>>.Handle, tier: StorageTier, maxStale: Duration?, throttle: Duration
    ) {
        Task {
            guard case .failure(let error) = await handle.task.result, !(error is CancellationError) else { return }
            self.counters.refreshFailures.add(1, ordering: .relaxed)
            self.emit(.refreshFailed, handle.key.cacheKey, tier)
            if maxStale != nil {
                self.failSafeThrottles.remember(error, for: handle.key, until: self.now().addingTimeInterval(throttle.seconds))
            }
        }
    }

    /// Forgets a failure remembered by `value(forKey:tiers:expiry:failureExpiry:options:orLoad:)` for
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
        if tiers.includesMemory, let found = currentMemory.entry(forKey: key) {
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
