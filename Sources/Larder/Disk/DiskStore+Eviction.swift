import Foundation

// Expiry, limits and least-recently-used order: access recording, trims and eviction.
extension DiskStore {
    /// Removes every expired entry, in batches.
    ///
    /// - Returns: The number of entries removed.
    @discardableResult
    public func removeExpired() throws -> Int {
        let now = configuration.now().milliseconds
        var total = 0
        while true {
            let batch: (count: Int, files: [String]) = try withLiveIndex { state, index in
                let batch = try index.connection.transaction { try index.deleteExpired(now: now, limit: Self.batchSize) }
                state.statistics.expirations += batch.count
                return batch
            }
            for name in batch.files { files.remove(name: name) }
            total += batch.count
            if batch.count < Self.batchSize { return total }
        }
    }

    /// Removes expired entries, then least recently used ones, until the stored size is at or
    /// below `size` bytes.
    public func trim(toSize size: Int) throws {
        try trim(count: .max, size: max(0, size))
    }

    /// Removes expired entries, then least recently used ones, until at most `count` remain.
    public func trim(toCount count: Int) throws {
        try trim(count: max(0, count), size: .max)
    }

    func trim(count: Int, size: Int) throws {
        let now = configuration.now().milliseconds
        let removed: [String] = try withLiveIndex { state, index in
            return try index.connection.transaction {
                try flushAccesses(index: index)
                return try Self.shrink(&state, index: index, now: now, toCount: count, toSize: size, keeping: nil)
            }
        }
        for name in removed { files.remove(name: name) }
    }

    static func evictIfNeeded(
        _ state: inout State, index: DiskIndex, configuration: Configuration, now: Int64, keeping key: String
    ) throws -> [String] {
        let totals = try index.totals()
        guard totals.count > configuration.countLimit || totals.size > configuration.sizeLimit else { return [] }
        let ratio = configuration.overflowTrimRatio
        let targetCount = totals.count > configuration.countLimit
            ? trimTarget(limit: configuration.countLimit, ratio: ratio) : configuration.countLimit
        let targetSize = totals.size > configuration.sizeLimit
            ? trimTarget(limit: configuration.sizeLimit, ratio: ratio) : configuration.sizeLimit
        return try shrink(&state, index: index, now: now, toCount: targetCount, toSize: targetSize, keeping: key)
    }

    /// Removes expired rows, then least recently used ones, until both totals are at or below
    /// their targets; returns the blob files to delete after the transaction commits.
    static func shrink(
        _ state: inout State, index: DiskIndex, now: Int64, toCount targetCount: Int, toSize targetSize: Int,
        keeping key: String?
    ) throws -> [String] {
        var totals = try index.totals()
        var obsolete: [String] = []
        while totals.count > targetCount || totals.size > targetSize {
            let batch = try index.deleteExpired(now: now, limit: batchSize)
            state.statistics.expirations += batch.count
            obsolete += batch.files
            totals = try index.totals()
            if batch.count < batchSize { break }
        }
        while totals.count > targetCount || totals.size > targetSize {
            let candidates = try index.leastRecentlyUsed(limit: batchSize, excluding: key)
            var deletedAny = false
            for row in candidates {
                guard totals.count > targetCount || totals.size > targetSize else { break }
                let deleted = try index.delete(rowID: row.rowID)
                guard deleted.existed else { continue }
                deletedAny = true
                if let file = deleted.file { obsolete.append(file) }
                state.statistics.evictions += 1
                totals.count -= 1
                totals.size -= row.size
            }
            // Nothing left to evict (or an index that lists rows it cannot delete): stop
            // rather than loop; the limits are met again by the next write.
            guard deletedAny else { break }
        }
        return obsolete
    }
}
