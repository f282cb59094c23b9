public import Foundation

extension MemoryStore {
    /// The limits, expiry and clock of a ``MemoryStore``.
    ///
    /// Every property has a default, so set only what you need. The store checks the whole
    /// configuration once, when it is created, and throws ``StorageError/invalidConfiguration(field:value:reason:)``
    /// naming the first bad field; nothing is silently clamped.
    ///
    /// ```swift
    /// var configuration = MemoryStore<String, Data>.Configuration()
    /// configuration.costLimit = 64 * 1024 * 1024        // 64 MiB of values
    /// configuration.sizeBuckets = [
    ///     .init(maxEntryCost: 10 * 1024, countLimit: 50),  // at most 50 entries of ≤ 10 KiB
    ///     .init(maxEntryCost: 100 * 1024, countLimit: 20), // 20 of ≤ 100 KiB
    ///     .init(maxEntryCost: .max, countLimit: 10),       // and 10 larger ones
    /// ]
    /// configuration.overflowTrimRatio = 0.2              // on overflow, free 20% at once
    /// configuration.defaultExpiry = .seconds(600)
    /// let store = try MemoryStore<String, Data>(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The most entries the store keeps.
        ///
        /// `0` makes a store that keeps nothing. Must not be negative. Defaults to `Int.max`
        /// (no count limit).
        public var countLimit: Int

        /// The most total cost the store keeps.
        ///
        /// An entry whose cost alone exceeds this limit is not kept. Must not be negative.
        /// Defaults to 100 MiB (`104_857_600`), which with the default ``cost`` measure means
        /// 100 MiB of `Data`, `String` or `[UInt8]` bytes.
        public var costLimit: Int

        /// The largest cost of a single entry the store keeps.
        ///
        /// A write of a costlier entry is refused and also removes any older value stored
        /// under that key, so a read never returns a stale value. Must not be negative.
        /// Defaults to `Int.max` (only ``costLimit`` bounds a single entry).
        public var entryCostLimit: Int

        /// Size classes, each with its own count limit, ordered by ``SizeBucket/maxEntryCost``.
        ///
        /// An entry belongs to the first bucket whose `maxEntryCost` is at least its cost. When
        /// a bucket holds more than its `countLimit` entries, the store evicts that bucket's own
        /// least recently used entries, so a burst of large values cannot push out all the small
        /// ones. Under ``EvictionPolicy/s3fifo`` each bucket runs S3-FIFO over its own entries:
        /// its `countLimit` is split 10/90 between the small and main queues, and the scan for a
        /// victim visits only the bucket's entries, in the global queues' FIFO order. Under
        /// ``EvictionPolicy/wTinyLFU`` each bucket's `countLimit` is split 1/99 between the
        /// window and main, and the window's candidate contests the bucket's own main victim.
        /// An entry that fits no bucket is not kept (end the list with
        /// `maxEntryCost: .max` to accept every size). The buckets apply together with
        /// ``countLimit`` and ``costLimit``.
        ///
        /// Must be strictly increasing in `maxEntryCost`, with every `maxEntryCost` and
        /// `countLimit` positive. Defaults to `[]` (no buckets).
        public var sizeBuckets: [SizeBucket]

        /// The expiry of a write that passes no `expiry` of its own.
        ///
        /// `.seconds(_:)` must be positive and finite, `.date(_:)` finite. Defaults to
        /// ``Expiry/never``.
        public var defaultExpiry: Expiry

        /// The share of a limit to free at once when that limit is exceeded.
        ///
        /// When a write pushes a total over its limit (``countLimit``, ``costLimit`` or a
        /// bucket's `countLimit`), the store first removes every expired entry, then evicts the
        /// ``policy``'s victims (least recently used entries under LRU) until that total is at
        /// or below `(1 - overflowTrimRatio) × limit`, rounded down (the same rule, and the same
        /// target, as ``DiskStore``'s). `0` evicts just
        /// enough to fit; `0.2` frees a fifth of the limit, so the next writes don't evict
        /// again. The entry being written is never evicted by its own write. Must be in
        /// `0..<1`. Defaults to `0`.
        public var overflowTrimRatio: Double

        /// The cost of a value for which the caller gives none.
        ///
        /// Called outside the store's lock, at most once per write. Must return a non-negative
        /// number. Defaults to `nil`: the value's ``CacheCostMeasurable/cacheCost`` when
        /// `Value` conforms to ``CacheCostMeasurable`` (the byte count of `Data`, `String` and
        /// `[UInt8]`), otherwise `1`, so that ``costLimit`` acts as a second count limit.
        public var cost: (@Sendable (Value) -> Int)?

        /// The clock that expiry and ages are measured with.
        ///
        /// Inject a controllable clock in tests so that they never sleep. The store reads it
        /// outside its lock: on a write with an expiry, on a read of an entry that can expire,
        /// and in ``MemoryStore/removeExpired()``. With the default (`Date.init`), the times
        /// that ``MemoryStore/trim(toDate:by:)`` compares are stamped with the system's coarse
        /// clock (a resolution of a few milliseconds, read without a syscall); an injected
        /// clock is also read on every write and hit to stamp them.
        public var now: @Sendable () -> Date {
            didSet { usesSystemClock = false }
        }

        /// Whether ``now`` is the default system clock.
        var usesSystemClock: Bool

        /// How the store chooses which entries to evict.
        ///
        /// The limits above mean the same under every policy; the policy only picks the
        /// victims. ``EvictionPolicy/s3fifo`` keeps more of a skewed working set than LRU and
        /// makes a hit cheaper (it bumps a counter instead of moving a list node);
        /// ``EvictionPolicy/wTinyLFU`` keeps the most of it, admitting a new entry into its
        /// main cache only when it was used more often than the entry it would push out.
        /// Defaults to
        /// ``EvictionPolicy/lru``.
        public var policy: EvictionPolicy

        /// Creates a configuration; every parameter has the default documented on its property.
        public init(
            countLimit: Int = .max,
            costLimit: Int = 100 * 1024 * 1024,
            entryCostLimit: Int = .max,
            sizeBuckets: [SizeBucket] = [],
            defaultExpiry: Expiry = .never,
            overflowTrimRatio: Double = 0,
            cost: (@Sendable (Value) -> Int)? = nil,
            now: (@Sendable () -> Date)? = nil,
            policy: EvictionPolicy = .lru
        ) {
            self.countLimit = countLimit
            self.costLimit = costLimit
            self.entryCostLimit = entryCostLimit
            self.sizeBuckets = sizeBuckets
            self.defaultExpiry = defaultExpiry
            self.overflowTrimRatio = overflowTrimRatio
            self.cost = cost
            self.now = now ?? { Date() }
            self.usesSystemClock = now == nil
            self.policy = policy
        }
    }
}

/// One size class of a ``MemoryStore``: how many entries of at most a given cost it keeps.
///
/// ```swift
/// let buckets: [SizeBucket] = [
///     SizeBucket(maxEntryCost: 10 * 1024, countLimit: 50),
///     SizeBucket(maxEntryCost: .max, countLimit: 10),
/// ]
/// ```
public struct SizeBucket: Sendable, Hashable {
    /// The largest entry cost in this bucket (entries costlier than the previous bucket's
    /// `maxEntryCost` and at most this one). Must be positive.
    public var maxEntryCost: Int

    /// The most entries this bucket keeps. Must be positive.
    public var countLimit: Int

    /// Creates a bucket of at most `countLimit` entries, each costing at most `maxEntryCost`.
    public init(maxEntryCost: Int, countLimit: Int) {
        self.maxEntryCost = maxEntryCost
        self.countLimit = countLimit
    }
}

/// A value that knows its cost in a ``MemoryStore``, typically its size in bytes.
///
/// A store whose configuration has no ``MemoryStore/Configuration/cost`` closure charges a
/// conforming value its ``cacheCost`` when the caller passes no cost. The conformance is looked
/// up once when the store is created, not on every write.
///
/// ```swift
/// struct Thumbnail: CacheCostMeasurable {
///     var pixels: [UInt32]
///     var cacheCost: Int { pixels.count * 4 }
/// }
/// ```
public protocol CacheCostMeasurable {
    /// The cost of this value, usually its size in bytes. Must not be negative.
    var cacheCost: Int { get }
}

extension Data: CacheCostMeasurable {
    /// The number of bytes.
    public var cacheCost: Int { count }
}

extension String: CacheCostMeasurable {
    /// The number of UTF-8 bytes.
    public var cacheCost: Int { utf8.count }
}

extension Array: CacheCostMeasurable where Element == UInt8 {
    /// The number of bytes.
    public var cacheCost: Int { count }
}

// MARK: - Validation

extension MemoryStore.Configuration {
    /// Throws ``StorageError/invalidConfiguration(field:value:reason:)`` for the first invalid field.
    func validate() throws(StorageError) {
        func invalid(_ field: String, _ value: some Any, _ reason: String) -> StorageError {
            .invalidConfiguration(field: field, value: "\(value)", reason: reason)
        }
        if countLimit < 0 { throw invalid("countLimit", countLimit, "must not be negative") }
        if costLimit < 0 { throw invalid("costLimit", costLimit, "must not be negative") }
        if entryCostLimit < 0 {
            throw invalid("entryCostLimit", entryCostLimit, "must not be negative")
        }
        if !(overflowTrimRatio >= 0 && overflowTrimRatio < 1) {
            throw invalid("overflowTrimRatio", overflowTrimRatio, "must be in 0..<1")
        }
        for (index, bucket) in sizeBuckets.enumerated() {
            if bucket.maxEntryCost <= 0 {
                throw invalid("sizeBuckets[\(index)].maxEntryCost", bucket.maxEntryCost, "must be positive")
            }
            if bucket.countLimit <= 0 {
                throw invalid("sizeBuckets[\(index)].countLimit", bucket.countLimit, "must be positive")
            }
            if index > 0, bucket.maxEntryCost <= sizeBuckets[index - 1].maxEntryCost {
                throw invalid(
                    "sizeBuckets[\(index)].maxEntryCost", bucket.maxEntryCost,
                    "must be greater than sizeBuckets[\(index - 1)].maxEntryCost (\(sizeBuckets[index - 1].maxEntryCost)); buckets must be strictly increasing"
                )
            }
        }
        switch defaultExpiry {
        case .never:
            break
        case .seconds(let seconds), .sliding(let seconds):
            if !(seconds.isFinite && seconds > 0) {
                throw invalid("defaultExpiry", defaultExpiry, "seconds must be positive and finite")
            }
        case .date:
            if !defaultExpiry.isValid {
                throw invalid("defaultExpiry", defaultExpiry, "the date must be finite")
            }
        }
    }
}
