import CSQLite
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A read connection checked out of a ``DiskStore``'s pool.
///
/// `@unchecked Sendable`: it moves between threads only through the pool's lock, and one
/// thread at a time uses it (the one that checked it out).
final class PooledReader: @unchecked Sendable {
    let reader: DiskIndexReader
    /// The pool generation it was opened in; a reader of an older one is never reused.
    let generation: Int
    /// The thread that last checked it out (``DiskStore/ReaderPool/takeIdle(for:)``); read
    /// and written under the pool's lock.
    @exclusivity(unchecked) var lastThread: UInt
    /// A descriptor of the store's directory, opened just before the connection: once the
    /// directory is deleted its link count is 0 (``isDirectoryGone``), while the connection
    /// would go on answering from the deleted index it still has open. A descriptor of the
    /// directory, not of `index.sqlite`: closing a descriptor of the database would drop the
    /// POSIX locks SQLite holds on it through its own.
    private let directoryDescriptor: Int32

    init(reader: DiskIndexReader, generation: Int, thread: UInt, directoryDescriptor: Int32) {
        self.reader = reader
        self.generation = generation
        self.lastThread = thread
        self.directoryDescriptor = directoryDescriptor
    }

    deinit {
        closeDescriptor(directoryDescriptor)
    }

    /// Whether the directory this reader's index was in has been deleted (one `fstat`).
    var isDirectoryGone: Bool {
        var info = stat()
        return fstat(directoryDescriptor, &info) != 0 || info.st_nlink == 0
    }
}

// The read-connection pool, and the log of reads that decides least-recently-used order.
extension DiskStore {
    /// What a read records as its reader goes back into the pool.
    enum ReadRecord {
        /// Nothing (not a value read, or one whose outcome is decided later).
        case none
        case miss
        /// A hit, logged for least-recently-used order.
        case hit(DiskIndex.Access)
        /// A hit counted but not logged: under S3-FIFO, a read that would change nothing in
        /// the index (see ``DiskIndex/Location/isSaturated(at:window:)``).
        case unloggedHit
        /// A hit that renewed a sliding lifetime to `expires`, logged with it.
        case slidingHit(DiskIndex.Access, expires: Int64)
        /// Nothing, for an answer about the index's contents other than a value read (a key
        /// list, totals, an expiry): checked against a vanished directory as a hit is.
        case answer

        /// Whether the read found something in the index (so its directory must still exist).
        var reportsContents: Bool {
            switch self {
            case .none, .miss: false
            case .hit, .unloggedHit, .slidingHit, .answer: true
            }
        }
    }

    /// Runs `body` with a pooled read connection, outside the writer's lock.
    ///
    /// When SQLite finds the index corrupt, the index is reset as ``withIndex(_:)`` does (once,
    /// whichever connection found it: the pool generation tells whether another thread already
    /// did) and `body` runs once more on a fresh connection. An error from a read that another
    /// thread's reset overtook is not the caller's either: `body` runs again.
    func withReader<T>(_ body: (DiskIndexReader) throws -> T) throws -> T {
        try withRecordingReader { reader in (try body(reader), ReadRecord.answer) }
    }

    /// ``withReader(_:)`` for a value read: `body` also returns the hit or miss to record. Most
    /// reads take only their thread's lane: the reader parked there, and the log of reads
    /// there (see ``ReadLane``); a read that finds no reader in its lane takes one from the
    /// pool, and one that fills its lane gathers every lane into the pool's log. When the log
    /// is due, it is ranked into the index after the reader is back: on Larder's I/O queue, or
    /// here (see ``Configuration/ranksReadsInBackground``).
    func withRecordingReader<T>(_ body: (DiskIndexReader) throws -> (T, ReadRecord)) throws -> T {
        try checkDirectoryIfDue()
        let lane = currentLaneNumber()
        var attempt = 0
        var recreations = 0
        while true {
            var (idle, status) = takeParkedReader(lane: lane)
            if idle == nil {
                let thread = currentThreadIdentity()
                (idle, status) = readers.withLock { pool in (pool.takeIdle(for: thread), PoolStatus(pool)) }
            }
            let generation = status.generation
            guard !status.isClosed else { throw StorageError.closed }
            do {
                guard let pooled = try idle ?? openReader(generation: generation) else {
                    // The directory vanished (or holds another index): create it again, or
                    // join the index now there, and read that.
                    try recreateVanishedDirectory(&recreations)
                    continue
                }
                pooled.reader.startRead(lingering: !status.isLingeringPaused, now: CoarseClock.now())
                let result: T
                let record: ReadRecord
                do {
                    (result, record) = try body(pooled.reader)
                } catch {
                    // A failed read leaves no snapshot behind (the next read, or a reset, starts afresh).
                    pooled.reader.endLingering()
                    _ = checkIn(pooled, record: .none, lane: lane)
                    throw error
                }
                // An answer that reports contents comes from a live index only: a reader whose
                // directory was deleted still reads the unlinked index. A miss needs no look
                // (a vanished directory reads as empty).
                if record.reportsContents, pooled.isDirectoryGone {
                    pooled.reader.endLingering()  // Dropped, not checked in: it closes here.
                    try recreateVanishedDirectory(&recreations)
                    continue
                }
                rank(checkIn(pooled, record: record, lane: lane))
                return result
            } catch let error as StorageError where attempt < 2 {
                attempt += 1
                let isReset = hasResetSince(generation)
                if error.isDatabaseCorruption && attempt == 1 {
                    try state.withLock { state in
                        guard readers.withLock({ $0.generation }) == generation else { return }
                        try resetCorruptIndex(&state, error: error)
                    }
                } else if !isReset {
                    throw error
                } // Else another thread reset the index under this read (a reader can then see
                  // its tables missing): read again, on a connection to the new index.
            }
        }
    }

    /// A new read connection of pool generation `generation`, or `nil` when the directory
    /// vanished or `index.sqlite` is no longer the file the store opened: a reader is never
    /// opened (and so never creates an index) in a directory deleted or replaced under the
    /// store. One `open` and one `stat` besides SQLite's own, only when the pool has no reader.
    private func openReader(generation: Int) throws -> PooledReader? {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw StorageError.io(
                operation: "opening directory", path: directory.path, reason: String(cString: strerror(code)),
                cause: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
        }
        guard FileIdentity(path: indexPath) == indexIdentityCopy.withLock({ $0 }) else {
            closeDescriptor(descriptor)
            return nil
        }
        do {
            let reader = try DiskIndexReader(
                path: indexPath, busyTimeout: configuration.busyTimeout, countsLookups: policy.countsLookups)
            return PooledReader(
                reader: reader, generation: generation, thread: currentThreadIdentity(), directoryDescriptor: descriptor)
        } catch let error as StorageError where error.sqliteResultCode.map({ $0 & 0xFF == SQLITE_CANTOPEN }) ?? false {
            // The directory went between the look above and SQLite's open.
            closeDescriptor(descriptor)
            return nil
        } catch {
            closeDescriptor(descriptor)
            throw error
        }
    }

    /// Creates the vanished directory and its index again, or joins the index another store
    /// created there (see ``reopenIfDirectoryChanged(_:)``), so that the read that found it
    /// gone reads the new, empty index. `recreations` counts the calls of one read: a
    /// directory deleted again and again under it ends in an error rather than a loop.
    private func recreateVanishedDirectory(_ recreations: inout Int) throws {
        recreations += 1
        guard recreations <= 4 else {
            throw StorageError.io(
                operation: "reading", path: directory.path, reason: "the directory was deleted again at every try",
                cause: POSIXError(.ENOENT))
        }
        try state.withLock { try reopenIfDirectoryChanged(&$0) }
    }

    /// Whether the index was reset since the pool's `generation`, waiting for a reset under
    /// way to finish first: a read that failed during one (which can see the index emptied and
    /// not yet rebuilt) is then read again. Only a failed read asks, so the wait costs nothing
    /// on the read path; the reset holds the writer's lock, which no reader holds.
    private func hasResetSince(_ generation: Int) -> Bool {
        while true {
            let (current, resetting) = readers.withLock { ($0.generation, $0.resetsInProgress > 0) }
            if current != generation { return true }
            if !resetting { return false }
            usleep(1_000)
        }
    }

    /// Puts `pooled` back (in the thread's lane, else in the pool unless the pool moved on or
    /// is full) and records `record`; returns what to do about the logged reads (see
    /// ``RankingStep``).
    private func checkIn(_ pooled: PooledReader, record: ReadRecord, lane: Int) -> RankingStep {
        let inLane = checkInToLane(pooled, record: record, lane: lane)
        if inLane.isParked && inLane.isLogged && !inLane.isDue { return .none }
        let inBackground = configuration.ranksReadsInBackground
        let (step, follow) = readers.withLockUnchecked { pool -> (RankingStep, LingerFollowUp) in
            let follow = inLane.isParked ? .none : pool.checkIn(pooled)
            guard !inLane.isLogged || inLane.isDue else { return (.none, follow) }
            gatherLanes(&pool)
            defer { publishOldestPending(pool) }
            if inLane.isLogged {
                guard case .hit(let access) = record else { return (.none, follow) }
                return (pool.log.step(due: pool.log.isDue(at: access.time), inBackground: inBackground), follow)
            }
            return (pool.log.record(record, inBackground: inBackground), follow)
        }
        switch follow {
        case .none:
            break
        case .sweep(let delay):
            if !isSweepScheduled.exchange(true, ordering: .acquiringAndReleasing) { scheduleLingerSweep(after: delay) }
        case .endThenReturn:
            // A checkpoint waits for readers: end this snapshot before the reader goes back.
            pooled.reader.endLingering()
            if !checkInToLane(pooled, record: .none, lane: lane).isParked {
                readers.withLock { _ = $0.checkIn(pooled) }
            }
        }
        return step
    }

    /// Queues ``sweepLingeringReads()`` on ``lingerSweepQueue`` to run after `delay` seconds.
    ///
    /// The queued sweep holds the store until it ran (not `[weak self]`, which would slow every
    /// later retain of the store: see `init`), and may then hold its last reference. That
    /// release closes the store, and a close checkpoints, which can wait up to the busy timeout
    /// for other connections' readers: for other stores' readers on the same directory, whose
    /// own sweeps would be queued behind it. So the sweep lets go of the store on Larder's I/O
    /// queue instead. (In the full test run, stores that tests dropped closed on
    /// this queue one after another, and kept every sweep of the process waiting for minutes.)
    private func scheduleLingerSweep(after delay: Double) {
        let held = HeldStore(self)
        lingerSweepQueue.asyncAfter(deadline: .now() + delay) {
            held.store?.sweepLingeringReads()
            larderIOQueue.async { held.store = nil }
        }
    }

    /// Ends the lingering read transactions of idle readers (see
    /// ``DiskIndexReader/startRead(lingering:now:)``). Runs ``lingerLimit`` after a reader came
    /// back lingering; a reader in use meanwhile queues the next sweep when it comes back.
    func sweepLingeringReads() {
        readers.withLockUnchecked { pool in
            isSweepScheduled.store(false, ordering: .sequentiallyConsistent)
            endIdleLingering(&pool)
        }
    }

    /// Ends the lingering read transactions of the readers idle in the pool or parked in a
    /// lane. Call with the pool's lock held.
    private func endIdleLingering(_ pool: inout ReaderPool) {
        pool.endIdleLingering()
        forEachUsedLane { lane in
            if let parked = lane.parked, parked.reader.isLingering { parked.reader.endLingering() }
        }
    }

    /// Writes the pool's generation, closing and lingering pause where the lanes read them.
    /// Call with the pool's lock held, after changing any of them.
    func publishStatus(_ pool: ReaderPool) {
        poolStatus.store(PoolStatus(pool).word, ordering: .sequentiallyConsistent)
    }

    /// Lowers ``oldestUnranked`` to the log's oldest read. Call with the pool's lock held,
    /// after logging in the pool's log.
    func publishOldestPending(_ pool: ReaderPool) {
        if let oldest = pool.log.oldestPending { _ = oldestUnranked.min(oldest, ordering: .relaxed) }
    }

    /// Ends the lingering read transactions of idle readers before the writer's lock holder
    /// writes, so that their snapshots (stale once it commits) do not keep SQLite from starting
    /// the log over. At most ``idleReaderLimit`` short `COMMIT`s of read transactions, under
    /// the pool's lock so that no read checks a reader out meanwhile.
    func endIdleLingeringReads() {
        readers.withLockUnchecked { endIdleLingering(&$0) }
    }

    /// How many idle readers keep a snapshot now (for tests).
    var idleLingeringReaderCount: Int {
        var count = readers.withLock { pool in pool.idle.count { $0.reader.isLingering } }
        forEachUsedLane { lane in if lane.parked?.reader.isLingering == true { count += 1 } }
        return count
    }

    /// Runs `body` (a checkpoint that waits for readers) while no reader of this store keeps a
    /// snapshot: idle readers end theirs now, readers in use when they come back, and none
    /// begins one meanwhile.
    func withLingeringPaused<T>(_ body: () throws -> T) rethrows -> T {
        readers.withLockUnchecked { pool in
            pool.lingerPauses += 1
            publishStatus(pool)
            endIdleLingering(&pool)
        }
        defer {
            readers.withLockUnchecked { pool in
                pool.lingerPauses -= 1
                publishStatus(pool)
            }
        }
        return try body()
    }

    /// Empties the pool and makes every checked-out reader close on its return (after a reset
    /// of the index, or on `close()`). Call with the writer's lock held.
    func retireReaders(closing: Bool) {
        let retired = readers.withLockUnchecked { pool in
            pool.generation += 1
            if closing { pool.isClosed = true }
            publishStatus(pool)
            var retired = pool.idle
            pool.idle = []
            forEachUsedLane { lane in
                if let parked = lane.parked { retired.append(parked) }
                lane.parked = nil
            }
            return retired
        }
        _ = retired // Released here, outside the pool's lock.
    }

    // MARK: - Recording reads

    func countMiss() {
        readers.withLock { $0.log.misses += 1 }
    }

    /// Logs a hit found outside ``withRecordingReader(_:)`` (an opened file), with the sliding
    /// lifetime it renewed, ranking the log when it is due.
    func recordHit(rowID: Int64, now: Int64, renewing expires: Int64? = nil) {
        rank(withLog { pool in
            if let expires { pool.log.extensions.append(DiskIndex.Extension(target: .row(rowID), expires: expires)) }
            let due = pool.log.logHit(DiskIndex.Access(rowID: rowID, time: now))
            return pool.log.step(due: due, inBackground: configuration.ranksReadsInBackground)
        })
    }

    /// Logs that a faster tier served `key`, renewing its sliding lifetime here to `expires`
    /// (written with the next ranking of reads; nothing if the entry has no sliding lifetime).
    /// Writes nothing itself, so a memory hit stays free of I/O: when the log is due, the
    /// ranking runs on Larder's I/O queue.
    func renewSlidingLifetime(forKey key: String, until expires: Date) {
        let now = configuration.now().milliseconds
        let step = withLog { pool in
            pool.log.extensions.append(DiskIndex.Extension(target: .key(key), expires: expires.milliseconds))
            let oldest = pool.log.oldestPending ?? now
            pool.log.oldestPending = oldest
            let due = pool.log.extensions.count >= Self.accessFlushCount || now - oldest >= Self.accessFlushDelay
            // Always in the background, whatever the configuration: this is a memory hit.
            return pool.log.step(due: due, inBackground: true, mayRankHere: false)
        }
        rank(step)
    }

    /// Whether renewed lifetimes wait in the log: an entry the index shows expired may be live.
    var hasPendingRenewals: Bool {
        readers.withLock { !$0.log.extensions.isEmpty }
    }

    /// Writes the logged reads now when renewed lifetimes wait among them, so that a read of
    /// the index sees every lifetime this process renewed.
    func writePendingRenewals() {
        if hasPendingRenewals { flushLoggedReads() }
    }

    /// Ranks the logged reads into the index now (what a background ranking does), so that the
    /// index shows every read so far.
    func rankLoggedReads() {
        flushLoggedReads()
    }

    /// What a read that logged something does about the log.
    enum RankingStep {
        case none
        /// Rank the log on this thread.
        case rankHere
        /// Queue a ranking on Larder's I/O queue (the log records that one is queued).
        case rankInBackground
    }

    private func rank(_ step: RankingStep) {
        switch step {
        case .none:
            break
        case .rankHere:
            flushLoggedReads()
        case .rankInBackground:
            larderIOQueue.async { [self] in rankInBackground() }
        }
    }

    /// Ranks the log until fewer than a batch of reads wait (reads go on while a batch is
    /// written), then lets the next due read queue a ranking again. Stops at a failure: the
    /// reads went back into the log, and a later due read tries again.
    private func rankInBackground() {
        while true {
            let ranked = flushLoggedReads()
            let again = withLog { pool in
                let full = pool.log.isFull
                if ranked && full && !pool.isClosed { return true }
                pool.log.isRankingInBackground = false
                return false
            }
            guard again else { return }
        }
    }

    /// Ranks the logged reads into the index. They are taken from the log under the writer's
    /// lock, so no write transaction can rank later reads before them. Best effort: when another
    /// process holds the write lock, the reads go back into the log and wait for the next flush.
    /// Returns whether the reads taken were ranked.
    @discardableResult
    private func flushLoggedReads() -> Bool {
        (try? withLiveIndex { _, index in
            let due = withLog { $0.log.takePending() }
            guard !due.isEmpty else { return }
            do {
                try index.connection.transaction {
                    try recordReads(due.accesses, sequences: due.sequences, index: index)
                    try index.extendLifetimes(due.extensions)
                }
            } catch {
                restorePendingAccesses(due)
                throw error
            }
        }) != nil
    }

    /// Ranks the logged reads inside the caller's write transaction, before anything the
    /// transaction writes, and reserves `reserving` numbers after them; returns the last number
    /// used or reserved. On failure the reads go back into the log.
    @discardableResult
    func flushAccesses(index: DiskIndex, reserving: Int64 = 0) throws -> Int64 {
        let due = withLog { $0.log.takePending() }
        do {
            let sequence = try recordReads(due.accesses, sequences: due.sequences, index: index, reserving: reserving)
            try index.extendLifetimes(due.extensions)
            return sequence
        } catch {
            restorePendingAccesses(due)
            throw error
        }
    }

    private func restorePendingAccesses(_ due: DiskIndex.PendingReads) {
        guard !due.isEmpty else { return }
        readers.withLockUnchecked { pool in
            defer { publishOldestPending(pool) }
            // Reserved numbers stay a prefix: the log's own only follow reads that all had one.
            pool.log.reservedSequences = due.sequences.count == due.accesses.count
                ? due.sequences + pool.log.reservedSequences : due.sequences
            pool.log.pending.insert(contentsOf: due.accesses, at: 0)
            for access in due.accesses { pool.log.pendingRows.insert(access.rowID) }
            if pool.log.pending.count > Self.accessBacklogLimit {
                let dropped = pool.log.pending.count - Self.accessBacklogLimit
                pool.log.pending.removeFirst(dropped)
                pool.log.reservedSequences.removeFirst(min(dropped, pool.log.reservedSequences.count))
            }
            pool.log.extensions.insert(contentsOf: due.extensions, at: 0)
            if pool.log.extensions.count > Self.accessBacklogLimit {
                pool.log.extensions.removeFirst(pool.log.extensions.count - Self.accessBacklogLimit)
            }
            if let first = due.accesses.first {
                pool.log.oldestPending = pool.log.oldestPending.map { min($0, first.time) } ?? first.time
            }
        }
    }

    /// The sequence number of a write of the least-recently-used store, inside its
    /// transaction (with the writer's lock held), after the reads logged before it without
    /// ranking them: numbers just below the write's are reserved for the pending reads that
    /// have none yet, and they take them when they are ranked (later, in the background, or
    /// before an eviction, which this store alone makes). So a write does not pay for the
    /// reads before it. `nil` when the reads must be ranked now instead: renewed lifetimes wait
    /// (they decide what the write finds live), or another store, in this process or another,
    /// has the directory open (it sees this store's reads from its next write, as before).
    ///
    /// If the transaction does not commit, ``cancelReservation(_:)`` with the returned count.
    func reserveSequence(index: DiskIndex) throws -> (sequence: Int64, reservedBefore: Int)? {
        if mustRankReadsBeforeWrite(index: index) { return nil }
        let maximum = try index.maxSequence()
        let reservation: (reserved: Int64, before: Int)? = withLog { pool in
            guard pool.log.extensions.isEmpty else { return nil }  // renewed since the check above
            let before = pool.log.reservedSequences.count
            let count = pool.log.pending.count - before
            pool.log.reservedSequences.append(contentsOf: (0..<Int64(count)).lazy.map { maximum + 1 + $0 })
            return (Int64(count), before)
        }
        guard let reservation else { return nil }
        let sequence = maximum + reservation.reserved + 1
        try index.setMaxSequence(sequence)
        return (sequence, reservation.before)
    }

    /// The sequence number of a write of the S3-FIFO store, inside its transaction (with the
    /// writer's lock held). The reads logged before it are left in the log: a counter bump
    /// commutes with everything a write does to its row (an overwrite counts as one more read,
    /// the read time is kept as a maximum), and what does not commute, an eviction, bumps them
    /// first (``evictIfNeeded(_:index:now:keeping:pending:)``). They are bumped now instead when
    /// renewed lifetimes wait among them, or another store has the directory open (as
    /// ``reserveSequence(index:)`` decides for LRU).
    func s3fifoWriteSequence(index: DiskIndex) throws -> Int64 {
        if mustRankReadsBeforeWrite(index: index) { return try flushAccesses(index: index, reserving: 1) }
        return try index.recordAccesses([], reserving: 1)
    }

    /// Whether a write must rank the logged reads in its own transaction, under either policy:
    /// renewed lifetimes wait among them (they decide what the write finds live), or reads wait
    /// while another store, in this process or another, has the directory open (it sees them
    /// from this write on).
    private func mustRankReadsBeforeWrite(index: DiskIndex) -> Bool {
        let (hasPending, hasRenewals) = withLog { (!$0.log.pending.isEmpty, !$0.log.extensions.isEmpty) }
        return hasRenewals || (hasPending && !isAloneOnDirectory(index))
    }

    /// Forgets the logged reads of `rowID`, a row a write has just created: they were reads of
    /// a removed entry whose row id SQLite gave the new one, and would bump its counter.
    func discardPendingReads(ofNewRow rowID: Int64) {
        withLog { pool in
            guard pool.log.pendingRows.mayContain(rowID), pool.log.pending.contains(where: { $0.rowID == rowID }) else { return }
            // Reserved numbers belong to a prefix of the reads (S3-FIFO's log has none): they
            // go with their reads.
            var reads: [DiskIndex.Access] = [], sequences: [Int64] = []
            reads.reserveCapacity(pool.log.pending.count)
            for (offset, read) in pool.log.pending.enumerated() where read.rowID != rowID {
                reads.append(read)
                if offset < pool.log.reservedSequences.count { sequences.append(pool.log.reservedSequences[offset]) }
            }
            pool.log.pending = reads
            pool.log.reservedSequences = sequences
            if reads.isEmpty { pool.log.oldestPending = nil }
        }
    }

    /// Takes back the numbers a write reserved that did not commit (they may be used again).
    /// Only the write's own reservations can follow `reservedBefore`: the writer's lock is held
    /// from the reservation to here, and only its holder ranks or reserves.
    func cancelReservation(_ reservedBefore: Int) {
        readers.withLock { pool in
            if pool.log.reservedSequences.count > reservedBefore {
                pool.log.reservedSequences.removeLast(pool.log.reservedSequences.count - reservedBefore)
            }
        }
    }

    /// Forgets the logged reads (their row ids mean nothing in a reset or emptied index).
    func discardPendingAccesses() {
        withLog { _ = $0.log.takePending() }
    }
}

/// Where idle readers' snapshots are ended (``DiskStore/sweepLingeringReads()``): a serial queue
/// of its own, which gets a thread even while Larder's I/O queue is backed up with rankings
/// (a late sweep would keep other processes' checkpoints waiting).
let lingerSweepQueue = DispatchQueue(label: "larder.linger-sweep", qos: .userInitiated)

/// A store held by a queued sweep (``DiskStore/scheduleLingerSweep(after:)``), so that the
/// sweep can choose the queue its reference ends on. Touched by the sweep's block, then by
/// the block it queues, one after the other.
private final class HeldStore: @unchecked Sendable {
    var store: DiskStore?
    init(_ store: DiskStore) { self.store = store }
}

/// What a reader's return asks for beyond it (see ``DiskStore/ReaderPool/checkIn(_:)``).
enum LingerFollowUp: Equatable {
    case none
    /// Queue ``DiskStore/sweepLingeringReads()`` to run after this many seconds, unless one is
    /// queued (``DiskStore/isSweepScheduled``).
    case sweep(after: Double)
    /// End the reader's snapshot, then return it again: a checkpoint waits for readers.
    case endThenReturn
}

/// The calling thread, as a number (``DiskStore/ReaderPool/takeIdle(for:)``).
func currentThreadIdentity() -> UInt {
    #if canImport(Darwin)
    UInt(bitPattern: pthread_self())
    #else
    UInt(pthread_self())
    #endif
}

extension DiskStore.ReaderPool {
    /// An idle reader for `thread`: the one it used last if that one is idle, else the one
    /// returned last. A connection that stays with one thread frees the pages it cached on the
    /// thread that allocated them, and SQLite frees its whole cache after every commit that
    /// the connection sees: moved between threads, those frees wait on the other thread's
    /// allocator lock.
    mutating func takeIdle(for thread: UInt) -> PooledReader? {
        var position = idle.count - 1
        while position >= 0, idle[position].lastThread != thread { position -= 1 }
        // The usual case, one thread reading, finds its reader last: no elements move.
        let pooled = position >= 0 && position < idle.count - 1 ? idle.remove(at: position) : idle.popLast()
        pooled?.lastThread = thread
        return pooled
    }

    /// Puts `pooled` back unless the pool moved on or is full (a reader not kept closes when
    /// the caller releases it, outside the lock), or asks for its snapshot to end first.
    mutating func checkIn(_ pooled: PooledReader) -> LingerFollowUp {
        guard !isClosed, generation == pooled.generation, idle.count < DiskStore.idleReaderLimit else { return .none }
        guard pooled.reader.isLingering else {
            idle.append(pooled)
            return .none
        }
        if lingerPauses > 0 { return .endThenReturn }
        idle.append(pooled)
        return .sweep(after: sweepDelay)
    }

    /// Ends the lingering read transactions of the idle readers.
    mutating func endIdleLingering() {
        for pooled in idle where pooled.reader.isLingering { pooled.reader.endLingering() }
    }
}

extension DiskStore.ReadLog {
    /// Counts what a read found and logs a hit's access; returns what to do about the log.
    mutating func record(_ record: DiskStore.ReadRecord, inBackground: Bool) -> DiskStore.RankingStep {
        let due: Bool
        switch record {
        case .none, .answer:
            return .none
        case .miss:
            misses += 1
            return .none
        case .unloggedHit:
            hits += 1
            return .none
        case .hit(let access):
            due = logHit(access)
        case .slidingHit(let access, let expires):
            extensions.append(DiskIndex.Extension(target: .row(access.rowID), expires: expires))
            due = logHit(access)
        }
        return step(due: due, inBackground: inBackground)
    }

    /// Counts a hit and logs its access; returns whether the log is due to be ranked (full, or
    /// its oldest read old enough).
    mutating func logHit(_ access: DiskIndex.Access) -> Bool {
        hits += 1
        logAccess(access)
        return isDue(at: access.time)
    }

    /// Logs a read's access (counted as a hit elsewhere: in its lane).
    mutating func logAccess(_ access: DiskIndex.Access) {
        pending.append(access)
        pendingRows.insert(access.rowID)
        if oldestPending == nil { oldestPending = access.time }
    }

    /// Whether the log is due to be ranked at `now` (milliseconds): full, or its oldest read
    /// old enough.
    func isDue(at now: Int64) -> Bool {
        pendingRows.isFull || pending.count >= DiskStore.accessFlushReads
            || oldestPending.map { now - $0 >= DiskStore.accessFlushDelay } ?? false
    }

    /// Whether the log holds a full batch: ``DiskStore/accessFlushCount`` distinct rows read,
    /// ``DiskStore/accessFlushReads`` reads, or ``DiskStore/accessFlushCount`` renewals.
    var isFull: Bool {
        pendingRows.isFull || pending.count >= DiskStore.accessFlushReads || extensions.count >= DiskStore.accessFlushCount
    }

    /// What to do about a log that is `due` (full or old enough): nothing while a background
    /// ranking is queued or running, unless reads have piled up past
    /// ``DiskStore/accessInlineBacklog`` behind it, when the reader ranks them itself (if
    /// `mayRankHere`); otherwise queue one in the background, or rank here.
    mutating func step(due: Bool, inBackground: Bool, mayRankHere: Bool = true) -> DiskStore.RankingStep {
        guard due else { return .none }
        guard inBackground else { return .rankHere }
        if isRankingInBackground {
            let behind = max(pending.count, extensions.count) >= DiskStore.accessInlineBacklog
            return behind && mayRankHere ? .rankHere : .none
        }
        isRankingInBackground = true
        return .rankInBackground
    }

    /// Empties the log of pending reads and renewals and returns them, in read order.
    mutating func takePending() -> DiskIndex.PendingReads {
        let due = DiskIndex.PendingReads(accesses: pending, sequences: reservedSequences, extensions: extensions)
        pending = []
        pendingRows.removeAll()
        reservedSequences = []
        pending.reserveCapacity(DiskStore.accessFlushCount)
        extensions = []
        oldestPending = nil
        return due
    }
}

/// The distinct row ids among a read log's pending reads, counted up to
/// ``DiskStore/accessFlushCount``: an open-addressing set with Fibonacci hashing (as
/// ``DiskIndex/lastReads(_:)``), at most half full. Once full it records nothing more and
/// answers "maybe" for every row: the log is then due, and only a ranking empties it.
struct PendingRows {
    private var slots: [Int64] = []
    private(set) var count = 0
    private static let bits = 1 + DiskStore.accessFlushCount.trailingZeroBitCount
    private static let mask = (1 << bits) - 1
    /// Never an automatic row id (those start at 1).
    private static let empty = Int64.min

    /// Whether ``DiskStore/accessFlushCount`` distinct rows (or a row id that cannot be
    /// recorded) were inserted since the set was last emptied.
    var isFull: Bool { count >= DiskStore.accessFlushCount }

    mutating func insert(_ rowID: Int64) {
        guard !isFull else { return }
        guard rowID != Self.empty else {
            count = DiskStore.accessFlushCount
            return
        }
        if slots.isEmpty { slots = [Int64](repeating: Self.empty, count: 1 << Self.bits) }
        var slot = Self.slot(of: rowID)
        while true {
            let found = slots[slot]
            if found == rowID { return }
            if found == Self.empty {
                slots[slot] = rowID
                count += 1
                return
            }
            slot = (slot + 1) & Self.mask
        }
    }

    /// `false` only when no pending read is of `rowID`.
    func mayContain(_ rowID: Int64) -> Bool {
        if isFull { return true }
        guard !slots.isEmpty else { return false }
        var slot = Self.slot(of: rowID)
        while true {
            let found = slots[slot]
            if found == rowID { return true }
            if found == Self.empty { return false }
            slot = (slot + 1) & Self.mask
        }
    }

    /// Empties the set, keeping its storage.
    mutating func removeAll() {
        guard count > 0 else { return }
        slots.withUnsafeMutableBufferPointer { $0.update(repeating: Self.empty) }
        count = 0
    }

    private static func slot(of rowID: Int64) -> Int {
        Int(truncatingIfNeeded: (UInt64(bitPattern: rowID) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - bits))
    }
}

/// Closes a file descriptor (from where `close` would name ``DiskStore/close()``).
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
