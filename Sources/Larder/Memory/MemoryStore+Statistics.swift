extension MemoryStore {
    /// Counters of a ``MemoryStore``'s activity since it was created, and its current totals.
    ///
    /// ```swift
    /// let stats = store.statistics
    /// print("hit ratio \(stats.hitRatio), \(stats.totalCount) entries, \(stats.evictions) evicted")
    /// ```
    public struct Statistics: Sendable, Equatable {
        /// Reads (``MemoryStore/value(forKey:)``, ``MemoryStore/entry(forKey:)``) that returned a value.
        public var hits = 0
        /// Reads that returned nothing, including those that found an expired entry.
        public var misses = 0
        /// Writes that stored their value.
        public var writes = 0
        /// Writes refused because the entry cost too much, fitted no bucket, had already
        /// expired, or the count limit was `0`.
        public var rejections = 0
        /// Entries evicted to satisfy ``Configuration/countLimit`` or ``MemoryStore/trim(toCount:)``.
        public var countEvictions = 0
        /// Entries evicted to satisfy ``Configuration/costLimit`` or ``MemoryStore/trim(toCost:)``.
        public var costEvictions = 0
        /// Entries evicted to satisfy a size bucket's count limit.
        public var bucketEvictions = 0
        /// Expired entries removed, by a read, ``MemoryStore/containsValue(forKey:)`` or
        /// ``MemoryStore/removeExpired()``.
        public var expirations = 0
        /// The number of entries held when the snapshot was taken.
        public var totalCount = 0
        /// The total cost of the entries held when the snapshot was taken.
        public var totalCost = 0

        /// Creates statistics with every counter at zero.
        public init() {}

        /// Entries evicted for any limit (count, cost or bucket); expirations excluded.
        public var evictions: Int { countEvictions + costEvictions + bucketEvictions }

        /// Hits divided by reads, or `0` before the first read.
        public var hitRatio: Double {
            let reads = hits + misses
            return reads == 0 ? 0 : Double(hits) / Double(reads)
        }
    }
}

/// What a ``Storage`` did through the memory store it owns: its memory tier's hits and misses
/// (leaving out reads through ``Storage/memory`` directly and the storage's second looks inside
/// a load), and its writes when memory is its only tier.
@usableFromInline
struct OwnerCounts: Sendable {
    @usableFromInline var hits = 0
    @usableFromInline var misses = 0
    @usableFromInline var writes = 0

    @usableFromInline
    init() {}
}
