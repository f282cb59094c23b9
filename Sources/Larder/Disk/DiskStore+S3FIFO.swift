import Foundation

// The disk tier's S3-FIFO (`Configuration.policy = .s3fifo`): where a write places its entry,
// how reads are recorded, and the queue shares of the limits in force. The victims themselves
// are chosen in `DiskIndex+S3FIFO.swift`; `shrink` (DiskStore+Eviction.swift) deletes them.
//
// The rules follow libCacheSim's `S3FIFO.c` (as ``MemoryStore``'s `.s3fifo` does), in the
// limits' own measures: count, stored size and charge (the footprint `sizeLimit` bounds).
// - A write of a new key removes its digest from the ghost; after the write's evictions (which
//   never pick it) it joins main if its digest was in the ghost, else main if no eviction has
//   happened yet and the small queue is full, else small. Its counter starts at 0.
// - An overwrite counts as a read and moves the entry to the front of its queue.
// - A read bumps the entry's counter (0...3) through the batched read log: the entry's row is
//   never written, only its narrow access row, and only when the log is ranked: in the
//   background, before an eviction or trim, at close; a write of a store alone on its
//   directory leaves the log as it is (the bumps commute with the write).
extension DiskStore {
    /// What an eviction under the limits in force needs from the policy (see
    /// ``DiskPolicy/evictionContext(of:pending:)``): S3-FIFO's queue shares, `nil` under LRU.
    func s3fifoContext(pending: DiskIndex.Measure = .init()) -> DiskIndex.S3FIFOContext? {
        policy.evictionContext(of: self, pending: pending)
    }

    /// The write transaction of `row` under S3-FIFO, after the logged reads were recorded
    /// (`sequence` is the write's sequence number); returns the blob files to delete.
    func writeS3FIFO(
        _ row: DiskIndex.Row, sequence: Int64, state: inout State, transaction: WriteTransaction, now: Int64
    ) throws -> [String] {
        let index = transaction.index
        var obsolete: [String] = []
        let previous = try index.file(forKey: row.key)
        if case let file?? = previous { obsolete.append(file) }
        let rowID = try index.writeRow(row)
        if previous != nil, try index.touchOverwritten(rowID: rowID, sequence: sequence, time: row.created) {
            obsolete += try evictIfNeeded(&state, in: transaction, now: now, keeping: row.key)
            return obsolete
        }
        // A new entry: in no queue until the write's evictions are done. Reads logged under its
        // row id were of a removed entry (the write is not committed: nobody has read it yet).
        transaction.forgetLoggedReads(ofNewRow: rowID)
        let wasGhost = try index.removeGhost(DiskIndex.ghostDigest(row.key))
        guard let measure = try index.measure(ofRow: rowID) else { return obsolete }
        let context = s3fifoContext(pending: measure)
        obsolete += try evictIfNeeded(&state, in: transaction, now: now, keeping: row.key, pending: measure)
        let queue: DiskIndex.Queue
        if wasGhost {
            queue = .main
        } else if let context, try !index.s3fifoHasEvicted(), try index.smallTotals().reaches(context.shares.small) {
            queue = .main
        } else {
            queue = .small
        }
        // After the moves of the evictions: the newest entry of its queue.
        let placed = try index.maxSequence() + 1
        try index.setMaxSequence(placed)
        try index.enqueue(rowID: rowID, measure: measure, in: queue, sequence: placed, time: row.created)
        return obsolete
    }
}
