/// Counters and totals of one tier, in the same vocabulary for every tier: what a byte tier
/// reports, and what ``StorageStatistics`` reports per tier (memory included).
public struct TierStatistics: Sendable, Hashable {
    /// Reads that returned a value.
    public var hits = 0
    /// Reads that found nothing, an expired entry or a damaged one.
    public var misses = 0
    /// Completed writes.
    public var writes = 0
    /// Values copied into this tier from a slower one by a ``Storage`` read.
    public var promotions = 0
    /// Entries removed by the tier's limits.
    public var evictions = 0
    /// Expired entries removed.
    public var expirations = 0
    /// Entries dropped because their bytes were damaged or missing.
    public var corruptEntriesDropped = 0
    /// Operations that failed (I/O, network).
    public var errors = 0
    /// Entries in the tier now.
    public var totalCount = 0
    /// Stored bytes in the tier now (the total cost, for memory).
    public var totalSize = 0

    /// Creates statistics with every counter at zero.
    public init() {}
}
