extension MemoryStore {
    /// The limits, and the totals to reach when one is exceeded, fixed at creation.
    @usableFromInline
    struct Limits {
        @usableFromInline let countLimit: Int
        @usableFromInline let countTarget: Int
        @usableFromInline let costLimit: Int
        @usableFromInline let costTarget: Int
        @usableFromInline let entryCostLimit: Int
        @usableFromInline let bucketMaxCosts: [Int]
        @usableFromInline let bucketCountLimits: [Int]
        @usableFromInline let bucketCountTargets: [Int]

        init(_ configuration: Configuration) {
            let ratio = configuration.overflowTrimRatio
            countLimit = configuration.countLimit
            countTarget = trimTarget(limit: countLimit, ratio: ratio)
            costLimit = configuration.costLimit
            costTarget = trimTarget(limit: costLimit, ratio: ratio)
            entryCostLimit = Swift.min(configuration.entryCostLimit, configuration.costLimit)
            bucketMaxCosts = configuration.sizeBuckets.map(\.maxEntryCost)
            bucketCountLimits = configuration.sizeBuckets.map(\.countLimit)
            bucketCountTargets = bucketCountLimits.map { trimTarget(limit: $0, ratio: ratio) }
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
