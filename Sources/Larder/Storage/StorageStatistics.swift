/// Counters of a ``Storage`` since it was created, with its tiers' totals.
///
/// Every read through the storage is exactly one of: a hit in one tier, or a miss. A read that
/// misses memory and hits the disk counts a memory miss and a disk hit.
///
/// ```swift
/// let statistics = storage.statistics
/// print(statistics[.memory].hits, statistics[.disk].hits, statistics.misses)
/// print(statistics[.disk].totalSize)   // stored bytes on disk now
/// ```
public struct StorageStatistics: Sendable, Hashable {
    /// The figures of each tier the storage has.
    public var tiers: [StorageTier: TierStatistics] = [:]
    /// Reads that found nothing in any tier they looked at.
    public var misses = 0
    /// Completed `setValue` calls.
    public var writes = 0
    /// Entries whose bytes the transformer could not decode (each was removed).
    public var decodingFailures = 0
    /// Values made by a get-or-load loader (one per coalesced load, however many waited).
    public var loads = 0
    /// Loaded values the tiers refused to store (each was still returned).
    public var loadStoreFailures = 0
    /// Get-or-load calls answered with a stale value (fail-safe, or a soft timeout).
    public var staleServed = 0
    /// Get-or-load calls that returned a stale value at their soft timeout while the loader
    /// went on in the background.
    public var softTimeouts = 0
    /// Get-or-load calls that gave up at their hard timeout.
    public var hardTimeouts = 0
    /// Loader runs that threw (each counted once, however many callers waited).
    public var loadFailures = 0
    /// Background refreshes started ahead of expiry (``LoadOptions/refreshAfter`` or
    /// ``LoadOptions/earlyRefreshBeta``).
    public var refreshesStarted = 0
    /// Background refreshes whose loader threw or whose value was not stored; the old value
    /// stays.
    public var refreshFailures = 0
    /// Calls of ``Storage/removeValues(taggedWith:tiers:)-(_,_)``.
    public var tagRemovals = 0
    /// Values those calls removed, counting each tier's copy (shared tiers, which invalidate
    /// by time, report none).
    public var removedByTag = 0

    /// The figures of `tier`; zero for a tier the storage does not have.
    public subscript(tier: StorageTier) -> TierStatistics {
        tiers[tier] ?? TierStatistics()
    }

    /// Reads answered by any tier.
    public var hits: Int { tiers.values.reduce(0) { $0 + $1.hits } }

    /// Creates statistics with every counter at zero.
    public init() {}
}
