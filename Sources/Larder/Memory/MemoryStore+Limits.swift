public import Foundation

extension MemoryStore {
    /// The limits, and the totals to reach when one is exceeded: the configuration's until
    /// ``MemoryStore/setLimits(countLimit:costLimit:)`` changes the count and cost limits.
    @usableFromInline
    struct Limits {
        @usableFromInline private(set) var countLimit: Int
        @usableFromInline private(set) var countTarget: Int
        @usableFromInline private(set) var costLimit: Int
        @usableFromInline private(set) var costTarget: Int
        @usableFromInline private(set) var entryCostLimit: Int
        let ratio: Double
        let configuredEntryCostLimit: Int
        @usableFromInline let bucketMaxCosts: [Int]
        @usableFromInline let bucketCountLimits: [Int]
        @usableFromInline let bucketCountTargets: [Int]

        init(_ configuration: Configuration) {
            let ratio = configuration.overflowTrimRatio
            self.ratio = ratio
            configuredEntryCostLimit = configuration.entryCostLimit
            countLimit = configuration.countLimit
            countTarget = trimTarget(limit: countLimit, ratio: ratio)
            costLimit = configuration.costLimit
            costTarget = trimTarget(limit: costLimit, ratio: ratio)
            entryCostLimit = Swift.min(configuration.entryCostLimit, configuration.costLimit)
            bucketMaxCosts = configuration.sizeBuckets.map(\.maxEntryCost)
            bucketCountLimits = configuration.sizeBuckets.map(\.countLimit)
            bucketCountTargets = bucketCountLimits.map { trimTarget(limit: $0, ratio: ratio) }
        }

        /// Sets new count and cost limits, and the targets and entry cost limit that follow.
        mutating func change(countLimit: Int, costLimit: Int) {
            self.countLimit = countLimit
            countTarget = trimTarget(limit: countLimit, ratio: ratio)
            self.costLimit = costLimit
            costTarget = trimTarget(limit: costLimit, ratio: ratio)
            entryCostLimit = Swift.min(configuredEntryCostLimit, costLimit)
        }

        /// The bucket of an entry of `cost`: `.some(nil)` when there are no buckets, `nil` when
        /// no bucket fits.
        @inlinable @inline(__always)
        func bucket(forCost cost: Int) -> Int?? {
            if bucketMaxCosts.isEmpty { return .some(nil) }
            for (index, maxCost) in bucketMaxCosts.enumerated() where cost <= maxCost {
                return .some(index)
            }
            return nil
        }
    }

    /// The limits accounting: totals that every eviction policy shares.
    @usableFromInline
    struct Usage {
        @usableFromInline var count: Int
        @usableFromInline var cost: Int
        @usableFromInline var bucketCounts: [Int]

        @usableFromInline
        init(bucketCount: Int) {
            count = 0
            cost = 0
            bucketCounts = Array(repeating: 0, count: bucketCount)
            // Never the shared empty-array singleton, which is never uniquely referenced: the
            // optimizer hoists a uniqueness check of this array out of the eviction loops, and
            // on the singleton that check reallocates on every evicting write.
            bucketCounts.reserveCapacity(1)
        }

        @inlinable @inline(__always)
        mutating func add(cost: Int, bucket: Int?) {
            count += 1
            self.cost += cost
            if let bucket { bucketCounts[bucket] += 1 }
        }

        @inlinable @inline(__always)
        mutating func subtract(cost: Int, bucket: Int?) {
            count -= 1
            self.cost -= cost
            if let bucket { bucketCounts[bucket] -= 1 }
        }
    }
}

extension MemoryStore {
    /// The count limit in force: ``Configuration/countLimit`` until
    /// ``setLimits(countLimit:costLimit:)`` changes it.
    public var countLimit: Int { locked.withLockUnchecked { $0.limits.countLimit } }

    /// The cost limit in force: ``Configuration/costLimit`` until
    /// ``setLimits(countLimit:costLimit:)`` changes it.
    public var costLimit: Int { locked.withLockUnchecked { $0.limits.costLimit } }

    /// Changes the count and cost limits of the live store. A lowered limit trims at once,
    /// expired entries first, then the policy's victims, in the same hold of the lock: no write
    /// lands between the change and the trim. Size buckets keep their limits.
    ///
    /// - Parameters:
    ///   - countLimit: The new count limit; `nil` keeps the current one.
    ///   - costLimit: The new cost limit; `nil` keeps the current one. The configuration's
    ///     ``Configuration/entryCostLimit`` is capped by it, as at creation.
    /// - Throws: ``StorageError/Code/invalidConfiguration`` for a negative limit (nothing
    ///   changes).
    public func setLimits(countLimit: Int? = nil, costLimit: Int? = nil) throws {
        if let countLimit, countLimit < 0 {
            throw StorageError.invalidConfiguration(field: "countLimit", value: "\(countLimit)", reason: "must not be negative")
        }
        if let costLimit, costLimit < 0 {
            throw StorageError.invalidConfiguration(field: "costLimit", value: "\(costLimit)", reason: "must not be negative")
        }
        let now = currentTime()
        withStateReleasingRemoved { state, graveyard in
            let count = countLimit ?? state.limits.countLimit
            let cost = costLimit ?? state.limits.costLimit
            state.limits.change(countLimit: count, costLimit: cost)
            state.policy.resize(countLimit: count, costLimit: cost)
            state.trim(toCount: count, now: now, into: &graveyard)
            state.trim(toCost: cost, now: now, into: &graveyard)
        }
    }
}

extension MemoryStore {
    /// Removes every entry written, or last used (written or read), before `date`.
    ///
    /// Times come from the store's clock (``Configuration/now``); with the default system clock
    /// they have the resolution of its coarse clock, a few milliseconds.
    ///
    /// - Parameters:
    ///   - date: Entries older than this go.
    ///   - age: Which moment counts: ``EntryAge/lastUsed`` (the default) or ``EntryAge/written``.
    /// - Returns: The number of entries removed.
    /// - Complexity: O(n) in the number of entries, under the lock.
    @discardableResult
    public func trim(toDate date: Date, by age: EntryAge = .lastUsed) -> Int {
        let cutoff = date.timeIntervalSinceReferenceDate
        return withStateReleasingRemoved { state, graveyard in
            state.remove(olderThan: cutoff, by: age, into: &graveyard)
        }
    }

    /// The keys of entries written or read at or after `date` (for ``Storage``, which spares
    /// their copies in slower tiers when it trims by age).
    func keys(usedSince date: Date) -> Set<Key> {
        let cutoff = date.timeIntervalSinceReferenceDate
        return locked.withLockUnchecked { state in state.keys(usedSince: cutoff) }
    }
}
