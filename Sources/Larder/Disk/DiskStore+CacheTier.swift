extension DiskStore: LocalCacheTier {
    /// ``StorageTier/disk``.
    public var tierID: StorageTier { .disk }

    /// The store's ``Statistics`` in the vocabulary every tier shares.
    public var tierStatistics: TierStatistics {
        let statistics = self.statistics
        var shared = TierStatistics()
        shared.hits = statistics.hits
        shared.misses = statistics.misses
        shared.writes = statistics.writes
        shared.evictions = statistics.evictions
        shared.expirations = statistics.expirations
        shared.corruptEntriesDropped = statistics.corruptEntriesDropped
        shared.totalCount = statistics.totalCount
        shared.totalSize = statistics.totalSize
        return shared
    }
}
