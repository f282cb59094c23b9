import Foundation
import Synchronization

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
                // Renewed lifetimes first.
                let batch = try withWriteTransaction(index) { _ in try index.deleteExpired(now: now, limit: Self.batchSize) }
                state.statistics.expirations += batch.count
                for key in batch.keys { state.recordRemoval(key, .expired) }
                return (batch.count, batch.files)
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
            try withWriteTransaction(index) { _ in
                try Self.shrink(
                    &state, index: index, now: now, toCount: count, toSize: size, keeping: nil, s3fifo: s3fifoContext())
            }
        }
        for name in removed { files.remove(name: name) }
    }

    func evictIfNeeded(
        _ state: inout State, in transaction: WriteTransaction, now: Int64, keeping key: String,
        pending: DiskIndex.Measure = .init()
    ) throws -> [String] {
        let index = transaction.index
        let countLimit = self.countLimit, sizeLimit = self.sizeLimit
        let chargeLimit = Self.chargeLimit(forSizeLimit: sizeLimit)
        let totals = try index.totals()
        guard totals.count > countLimit || totals.size > sizeLimit || totals.charge > chargeLimit else { return [] }
        // Every read logged so far counts first: under LRU the victims are the least recently
        // used, under S3-FIFO the counters decide (a write leaves the reads before it pending;
        // under LRU with the numbers below its own).
        try transaction.rankLoggedReads()
        let ratio = configuration.overflowTrimRatio
        let targetCount = totals.count > countLimit ? trimTarget(limit: countLimit, ratio: ratio) : countLimit
        let targetSize = totals.size > sizeLimit ? trimTarget(limit: sizeLimit, ratio: ratio) : sizeLimit
        let targetCharge = totals.charge > chargeLimit ? trimTarget(limit: chargeLimit, ratio: ratio) : chargeLimit
        return try Self.shrink(
            &state, index: index, now: now, toCount: targetCount, toSize: targetSize, toCharge: targetCharge,
            keeping: key, s3fifo: s3fifoContext(pending: pending))
    }

    /// The most the rows may cost (``DiskIndex/charge(_:)``) under `sizeLimit`: the limit less
    /// the part of the write-ahead log's bound above its floor, plus a small allowance (both
    /// within ``footprintSlack``), so that a tiny limit still means its stored bytes.
    static func chargeLimit(forSizeLimit sizeLimit: Int) -> Int {
        max(0, sizeLimit - (DiskIndex.walLimit(forSizeLimit: sizeLimit) - DiskIndex.walFloor)) + chargeAllowance
    }

    /// What rows may cost beyond the limit; the fixed part of the footprint (schema pages, the
    /// log's floor, SQLite's shared memory, the directories) takes the rest of the slack.
    static let chargeAllowance = 96 << 10

    /// The count limit in force: ``Configuration/countLimit`` until
    /// ``setLimits(countLimit:sizeLimit:)`` changes it.
    public var countLimit: Int { limits.count.load(ordering: .relaxed) }

    /// The size limit in force: ``Configuration/sizeLimit`` until
    /// ``setLimits(countLimit:sizeLimit:)`` changes it.
    public var sizeLimit: Int { limits.size.load(ordering: .relaxed) }

    /// Changes the limits of the live store (this instance; other stores on the directory keep
    /// theirs). A lowered limit trims at once, expired entries first, then the least recently
    /// used, in the same hold of the writer's lock: no write lands between the change and the
    /// trim.
    ///
    /// - Parameters:
    ///   - countLimit: The new count limit; `nil` keeps the current one.
    ///   - sizeLimit: The new size limit in stored bytes; `nil` keeps the current one.
    /// - Throws: ``StorageError/Code/invalidConfiguration`` for a negative limit (nothing
    ///   changes), or the errors of a trim.
    public func setLimits(countLimit: Int? = nil, sizeLimit: Int? = nil) throws {
        if let countLimit, countLimit < 0 {
            throw StorageError.invalidConfiguration(field: "countLimit", value: "\(countLimit)", reason: "must not be negative")
        }
        if let sizeLimit, sizeLimit < 0 {
            throw StorageError.invalidConfiguration(field: "sizeLimit", value: "\(sizeLimit)", reason: "must not be negative")
        }
        let now = configuration.now().milliseconds
        let removed: [String] = try withLiveIndex { state, index in
            if let countLimit { limits.count.store(countLimit, ordering: .relaxed) }
            if let sizeLimit { limits.size.store(sizeLimit, ordering: .relaxed) }
            let count = self.countLimit, size = self.sizeLimit
            if sizeLimit != nil { try DiskIndex.applyWALLimit(DiskIndex.walLimit(forSizeLimit: size), to: index.connection) }
            let removed = try withWriteTransaction(index) { _ in
                try Self.shrink(
                    &state, index: index, now: now, toCount: count, toSize: size,
                    toCharge: Self.chargeLimit(forSizeLimit: size), keeping: nil, s3fifo: s3fifoContext())
            }
            // A lowered limit also bounds the log at once (readers may keep part of it alive).
            if sizeLimit != nil { readers.truncateLog(of: index.connection) }
            return removed
        }
        for name in removed { files.remove(name: name) }
    }

    /// Removes expired rows, then least recently used ones, until both totals are at or below
    /// their targets; returns the blob files to delete after the transaction commits.
    static func shrink(
        _ state: inout State, index: DiskIndex, now: Int64, toCount targetCount: Int, toSize targetSize: Int,
        toCharge targetCharge: Int = .max, keeping key: String?, s3fifo: DiskIndex.S3FIFOContext? = nil
    ) throws -> [String] {
        var totals = try index.totals()
        var obsolete: [String] = []
        let evictionsBefore = state.statistics.evictions
        func isOver() -> Bool { totals.count > targetCount || totals.size > targetSize || totals.charge > targetCharge }
        // Rows stored inline free pages as blob rows do: give them back either way.
        let countBefore = totals.count
        defer { if totals.count < countBefore || !obsolete.isEmpty { try? index.releaseFreePages(beyond: 16) } }
        while isOver() {
            let batch = try index.deleteExpired(now: now, limit: batchSize)
            state.statistics.expirations += batch.count
            for key in batch.keys { state.recordRemoval(key, .expired) }
            obsolete += batch.files
            totals = try index.totals()
            if batch.count < batchSize { break }
        }
        while isOver() {
            if let s3fifo, let victim = try index.s3fifoVictim(s3fifo, excluding: key) {
                let deleted = try index.delete(rowID: victim.row.rowID)
                guard deleted.existed else { break }
                if let file = deleted.file { obsolete.append(file) }
                totals = try index.totals()
                if victim.queue == .small {
                    // No more digests than entries either: the ghost's rows are not charged.
                    var limit = s3fifo.shares.ghost
                    limit.count = min(limit.count, totals.count)
                    try index.addGhost(DiskIndex.ghostDigest(victim.row.key), charge: victim.charge, limit: limit)
                }
                state.statistics.evictions += 1
                state.recordRemoval(victim.row.key, .evicted)
                continue
            }
            let candidates = try index.leastRecentlyUsed(limit: batchSize, excluding: key)
            var deletedAny = false
            for row in candidates {
                guard isOver() else { break }
                let deleted = try index.delete(rowID: row.rowID)
                guard deleted.existed else { continue }
                deletedAny = true
                if let file = deleted.file { obsolete.append(file) }
                state.statistics.evictions += 1
                state.recordRemoval(row.key, .evicted)
                totals = try index.totals()
            }
            // Nothing left to evict (or an index that lists rows it cannot delete): stop
            // rather than loop; the limits are met again by the next write.
            guard deletedAny else { break }
        }
        try DirectoryCounts.add(state.statistics.evictions - evictionsBefore, to: DiskStore.MetaName.evictions, in: index)
        return obsolete
    }
}
