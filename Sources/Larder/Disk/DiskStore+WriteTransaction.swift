import Foundation

// The write doorway: every write transaction of the store goes through
// `withWriteTransaction`, which decides what the access log writes first, is the only
// caller of `AccessLog.drain(into:)`, and prunes the change rows (see `ChangeWatch`). The read path's side of the log (recording, and what a
// due log asks for) is here too.
extension DiskStore {
    /// What a write transaction writes of the access log before its own work.
    enum LoggedReads {
        /// Every read and renewal logged so far (a trim, an expiry pass, a take: whatever
        /// reads order or lifetimes decide).
        case first
        /// Only when renewed lifetimes wait among them (they decide what is live).
        case renewalsFirst
        /// Nothing up front; a write or an eviction asks the transaction (``WriteTransaction``).
        case asNeeded
        /// None: they are forgotten (the transaction empties the index).
        case forgotten
    }

    /// Runs `body` in a write transaction of `index` (`BEGIN IMMEDIATE … COMMIT`), with the
    /// writer's lock held (call inside ``withLiveIndex(_:)``), after writing what `ranking`
    /// asks of the access log. If the transaction does not commit, the reads it took go back
    /// into the log, and the numbers it gave logged reads are taken back.
    @inline(__always)  // Into each caller, so that what its body captures is not copied.
    func withWriteTransaction<T>(
        _ index: DiskIndex, ranking: LoggedReads = .first, _ body: (WriteTransaction) throws -> T
    ) throws -> T {
        let transaction = WriteTransaction(index: index, store: self)
        do {
            let result = try index.connection.transaction {
                switch ranking {
                case .first: try transaction.rankLoggedReads()
                case .renewalsFirst: if accessLog.hasPendingRenewals { try transaction.rankLoggedReads() }
                case .asNeeded: break
                case .forgotten: accessLog.discardAll()
                }
                let result = try body(transaction)
                try index.pruneChangesIfDue()
                return result
            }
            if transaction.numberedLoggedReads { accessLog.endWrite(committed: true) }
            if let counts = transaction.writtenCounts { directoryCounts.committed(counts) }
            return result
        } catch {
            if transaction.numberedLoggedReads { accessLog.endWrite(committed: false) }
            throw error
        }
    }

    /// Drains the access log into the index in a transaction of its own (what a due log asks
    /// for). Best effort: when another process holds the write lock, the reads stay in the log.
    /// Returns whether the reads were written.
    @discardableResult
    func rankLoggedReads() -> Bool {
        (try? withLiveIndex { _, index in
            guard accessLog.hasPending else { return }
            try withWriteTransaction(index) { _ in }
        }) != nil
    }

    /// Writes the logged reads when renewed lifetimes wait among them, so that a read of the
    /// index sees every lifetime this process renewed. Returns whether any waited.
    @discardableResult
    func writePendingRenewals() -> Bool {
        guard accessLog.hasPendingRenewals else { return false }
        rankLoggedReads()
        return true
    }

    /// ``withReader(_:)`` for an answer that decides which entries are live: renewed lifetimes
    /// this process logged are written first.
    func withRenewedReader<T>(_ body: (DiskIndexReader) throws -> T) throws -> T {
        writePendingRenewals()
        return try withReader(body)
    }

    /// ``withReader(_:)`` again, after writing renewed lifetimes, when any waited; `nil` when
    /// none did (an answer already read stands).
    func withReaderIfRenewalsWaited<T>(_ body: (DiskIndexReader) throws -> T) throws -> T? {
        guard writePendingRenewals() else { return nil }
        return try withReader(body)
    }

    /// Runs `body` (which replaces the index: a reset, a vanished directory) with the readers
    /// retired and the logged reads forgotten: their row ids mean nothing in another index.
    /// Call with the writer's lock held.
    func replacingIndex<T>(_ body: () throws -> T) rethrows -> T {
        try readers.retire {
            accessLog.discardAll()
            return try body()
        }
    }

    /// Records what a read found, and does what a due log asks.
    func record(_ record: AccessLog.Record) {
        switch accessLog.record(record) {
        case .none:
            break
        case .rankHere:
            rankLoggedReads()
        case .rankInBackground:
            larderIOQueue.async { [self] in rankInBackground() }
        }
    }

    /// Logs a hit found outside the reader pool (an opened file, a read under the writer's
    /// lock), with the sliding lifetime it renewed.
    func recordHit(rowID: Int64, now: Int64, renewing expires: Int64? = nil) {
        let access = DiskIndex.Access(rowID: rowID, time: now)
        record(expires.map { .slidingHit(access, expires: $0) } ?? .hit(access))
    }

    /// Logs that a faster tier served `key`, renewing its sliding lifetime here to `expires`
    /// (written with the next drain; nothing if the entry has no sliding lifetime). Writes
    /// nothing itself, so a memory hit stays free of I/O.
    func renewSlidingLifetime(forKey key: String, until expires: Date) {
        let step = accessLog.renew(key: key, until: expires.milliseconds, now: configuration.now().milliseconds)
        if step == .rankInBackground { larderIOQueue.async { [self] in rankInBackground() } }
    }

    /// Drains until less than a batch waits (reads go on while a batch is written). Stops at a
    /// failure: the reads went back into the log, and a later due read tries again.
    private func rankInBackground() {
        while accessLog.backgroundRankingEnded(ranked: rankLoggedReads()) {}
    }
}

/// An open write transaction of ``DiskStore/withWriteTransaction(_:ranking:_:)``: its index,
/// and what it may ask of the access log.
///
/// Invariant: it lives inside one transaction with the writer's lock held, so only it drains
/// the log or numbers logged reads meanwhile.
final class WriteTransaction {
    let index: DiskIndex
    private let store: DiskStore
    private var log: AccessLog { store.accessLog }
    /// Whether this transaction gave logged reads sequence numbers (kept only if it commits).
    fileprivate private(set) var numberedLoggedReads = false
    /// The directory counts this transaction added (marked written only if it commits).
    fileprivate private(set) var writtenCounts: DirectoryCounts.Written?

    fileprivate init(index: DiskIndex, store: DiskStore) {
        self.index = index
        self.store = store
    }

    /// Writes every logged read and renewal into the index now (an eviction needs them all).
    func rankLoggedReads() throws {
        _ = try drain(reserving: 0)
    }

    /// The sequence number of a least-recently-used write, after the reads logged before it
    /// without writing them: they are given the numbers just below the write's, and take them
    /// when drained. They are drained now instead when renewed lifetimes wait
    /// (they decide what the write finds live), or another store has the directory open (it
    /// sees this store's reads from this write on).
    func sequenceAfterLoggedReads() throws -> Int64 {
        if mustDrainBeforeWrite() { return try drain(reserving: 1) }
        let maximum = try index.maxSequence()
        guard let numbered = log.numberPendingReads(after: maximum) else { return try drain(reserving: 1) }
        numberedLoggedReads = true
        let sequence = maximum + numbered + 1
        try index.setMaxSequence(sequence)
        return sequence
    }

    /// The sequence number of an S3-FIFO write, leaving the reads logged before it in the log:
    /// a counter bump commutes with everything a write does to its row, and an eviction drains
    /// them first. Drained now when ``sequenceAfterLoggedReads()`` would.
    func sequenceBesideLoggedReads() throws -> Int64 {
        if mustDrainBeforeWrite() { return try drain(reserving: 1) }
        return try index.recordAccesses([], reserving: 1)
    }

    /// Forgets the logged reads of `rowID`, a row this transaction created: they were reads of
    /// a removed entry whose row id SQLite gave the new one.
    func forgetLoggedReads(ofNewRow rowID: Int64) {
        log.discard(row: rowID)
    }

    private func mustDrainBeforeWrite() -> Bool {
        let pending = log.pending
        return pending.renewals || (pending.reads && !store.isAloneOnDirectory(index))
    }

    private func drain(reserving: Int64) throws -> Int64 {
        let sequence = try log.drain { due in
            let sequence = try store.policy.recordReads(
                due.accesses, sequences: due.sequences, index: index, reserving: reserving)
            try index.extendLifetimes(due.extensions)
            return sequence
        }
        let (hits, misses) = log.counts
        writtenCounts = try store.directoryCounts.add(hits: hits, misses: misses, sizeLimit: store.sizeLimit, to: index) ?? writtenCounts
        return sequence
    }
}
