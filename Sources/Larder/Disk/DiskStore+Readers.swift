import Foundation

/// A read connection checked out of a ``DiskStore``'s pool.
///
/// `@unchecked Sendable`: it moves between threads only through the pool's lock, and one
/// thread at a time uses it (the one that checked it out).
final class PooledReader: @unchecked Sendable {
    let reader: DiskIndexReader
    /// The pool generation it was opened in; a reader of an older one is never reused.
    let generation: Int

    init(reader: DiskIndexReader, generation: Int) {
        self.reader = reader
        self.generation = generation
    }
}

// The read-connection pool, and the log of reads that decides least-recently-used order.
extension DiskStore {
    /// Runs `body` with a pooled read connection, outside the writer's lock.
    ///
    /// When SQLite finds the index corrupt, the index is reset as ``withIndex(_:)`` does (once,
    /// whichever connection found it: the pool generation tells whether another thread already
    /// did) and `body` runs once more on a fresh connection.
    func withReader<T>(_ body: (DiskIndexReader) throws -> T) throws -> T {
        try checkDirectoryIfDue()
        var attempt = 0
        while true {
            let (idle, generation, isClosed) = readers.withLock { pool in
                (pool.idle.popLast(), pool.generation, pool.isClosed)
            }
            guard !isClosed else { throw StorageError.closed }
            do {
                let pooled = try idle ?? PooledReader(
                    reader: DiskIndexReader(path: indexPath, busyTimeout: configuration.busyTimeout), generation: generation)
                defer { checkIn(pooled) }
                return try body(pooled.reader)
            } catch let error as StorageError where error.isDatabaseCorruption && attempt == 0 {
                attempt += 1
                try state.withLock { state in
                    guard readers.withLock({ $0.generation }) == generation else { return }
                    try resetCorruptIndex(&state, error: error)
                }
            }
        }
    }

    private func checkIn(_ pooled: PooledReader) {
        let kept = readers.withLock { pool in
            guard !pool.isClosed, pool.generation == pooled.generation, pool.idle.count < Self.idleReaderLimit else {
                return false
            }
            pool.idle.append(pooled)
            return true
        }
        _ = kept // A reader not kept closes when released, outside the lock.
    }

    /// Empties the pool and makes every checked-out reader close on its return (after a reset
    /// of the index, or on `close()`). Call with the writer's lock held.
    func retireReaders(closing: Bool) {
        let retired = readers.withLock { pool in
            pool.generation += 1
            if closing { pool.isClosed = true }
            let retired = pool.idle
            pool.idle = []
            return retired
        }
        _ = retired // Released here, outside the pool's lock.
    }

    // MARK: - Recording reads

    func countMiss() {
        reads.withLock { $0.misses += 1 }
    }

    /// Counts a hit and logs the read for least-recently-used order; ranks the log into the
    /// index when it is full or old enough. Best effort: when another process holds the write
    /// lock, the reads wait for the next flush.
    func recordHit(rowID: Int64, now: Int64) {
        let due: [DiskIndex.Access]? = reads.withLock { log in
            log.hits += 1
            log.pending.append(DiskIndex.Access(rowID: rowID, time: now))
            let oldest = log.oldestPending ?? now
            log.oldestPending = oldest
            guard log.pending.count >= Self.accessFlushCount || now - oldest >= Self.accessFlushDelay else { return nil }
            let due = log.pending
            log.pending = []
            log.oldestPending = nil
            return due
        }
        guard let due else { return }
        do {
            _ = try withLiveIndex { _, index in try index.connection.transaction { try index.recordAccesses(due) } }
        } catch {
            restorePendingAccesses(due)
        }
    }

    /// Ranks the logged reads inside the caller's write transaction, before anything the
    /// transaction writes, and reserves `reserving` numbers after them; returns the last number
    /// used or reserved. On failure the reads go back into the log.
    @discardableResult
    func flushAccesses(index: DiskIndex, reserving: Int64 = 0) throws -> Int64 {
        let due = reads.withLock { log in
            let due = log.pending
            log.pending = []
            log.oldestPending = nil
            return due
        }
        do {
            return try index.recordAccesses(due, reserving: reserving)
        } catch {
            restorePendingAccesses(due)
            throw error
        }
    }

    private func restorePendingAccesses(_ accesses: [DiskIndex.Access]) {
        guard !accesses.isEmpty else { return }
        reads.withLock { log in
            log.pending.insert(contentsOf: accesses, at: 0)
            if log.pending.count > Self.accessBacklogLimit {
                log.pending.removeFirst(log.pending.count - Self.accessBacklogLimit)
            }
            log.oldestPending = log.oldestPending.map { min($0, accesses[0].time) } ?? accesses[0].time
        }
    }

    /// Forgets the logged reads (their row ids mean nothing in a reset or emptied index).
    func discardPendingAccesses() {
        reads.withLock { log in
            log.pending = []
            log.oldestPending = nil
        }
    }
}
