import Foundation
import Synchronization

/// The disk tier's record of reads: hit and miss counts, and the hits (with the sliding
/// lifetimes they renewed) waiting to be written into the index, where their order decides
/// least-recently-used order (or S3-FIFO's counters).
///
/// A read calls ``record(_:)``; the store's write doorway (``DiskStore/withWriteTransaction(_:ranking:_:)``)
/// calls ``drain(into:)`` inside a write transaction. Nothing else touches the log.
///
/// Invariants: the reads come out of ``drain(into:)`` in the order they were recorded, across
/// threads (a read recorded before another began comes out first); reserved sequence numbers
/// belong to a prefix of the pending reads, one each; reads that a failed drain took go back in
/// front of the log, so none is lost or reordered (beyond ``backlogLimit``, the oldest go).
///
/// Each thread records into a *lane* of its own (one lock per lane, on cache lines of its own),
/// with a *ticket* from one counter that orders the lanes' reads; the lanes are *gathered* into
/// the shared log, in ticket order, when one fills, when the oldest read is ``flushDelay`` old,
/// or before a drain.
final class AccessLog: Sendable {
    /// What a read records.
    enum Record {
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
        /// list, totals, an expiry).
        case answer

        /// Whether the read found something in the index (so its directory must still exist).
        var reportsContents: Bool {
            switch self {
            case .none, .miss: false
            case .hit, .unloggedHit, .slidingHit, .answer: true
            }
        }
    }

    /// What the recording thread does about the log after ``record(_:)``.
    enum Step {
        case none
        /// Drain the log on this thread.
        case rankHere
        /// Queue a drain on Larder's I/O queue (the log records that one is queued; call
        /// ``backgroundRankingEnded(ranked:)`` after each one).
        case rankInBackground
    }

    /// Recorded reads wait in memory until they name this many distinct rows… (A ranking
    /// rewrites the pages of `access` its reads touch: 4,096 reads of a 15,000-entry index share
    /// most pages, which made a ranked read cost about half what it did at 512. And each ranking
    /// commits, which makes every pooled reader drop its page cache and fetch its pages again:
    /// at 16,384 rather than 4,096, one thread read a 40,000-entry index 1.95x as fast, two
    /// threads 1.41x.)
    static let flushCount = 16_384
    /// …or this many reads are pending (a ranking writes each row once, at its last read, so
    /// reads of a hot set cost it little)…
    static let flushReads = 4 * flushCount
    /// …or the oldest has waited this long (milliseconds), or a write transaction needs them.
    static let flushDelay: Int64 = 2_000
    /// A reader that finds this many reads waiting while a background ranking runs ranks them
    /// itself, so the log cannot outgrow the ranking.
    static let inlineBacklog = 2 * flushReads
    /// At most this many unranked reads are kept when draining keeps failing (another process
    /// holding the write lock); older ones are dropped.
    static let backlogLimit = 4 * flushReads

    /// Whether a due log is drained on Larder's I/O queue rather than by the reading thread.
    let ranksInBackground: Bool
    /// The shared log, with the ticket counter's value at the last gathering.
    private let shared: Locked<Shared>
    private let lanes: [Locked<Lane>]
    /// Each lane's misses and unlogged hits, counted without a lock.
    private let laneCounts: [LaneCounts]
    /// The next read's ticket.
    private let tickets = Atomic<UInt64>(0)
    /// The lanes a read has used, one bit each: a process with one reading thread has one lane
    /// to look at, not all of them.
    private let usedLanes = Atomic<Int>(0)
    /// The time of the oldest read waiting in a lane or in the log, or later (never earlier):
    /// a read that finds it ``flushDelay`` old gathers the lanes.
    private let oldestUnranked = Atomic<Int64>(.max)

    init(ranksInBackground: Bool) {
        self.ranksInBackground = ranksInBackground
        shared = Locked(Shared(), spinsBeforeSleeping: true)
        lanes = (0..<laneCount).map { _ in Locked(Lane(), ownsCacheLines: true) }
        laneCounts = (0..<laneCount).map { _ in LaneCounts() }
    }

    /// A lane's counts that need no order: misses, and hits that log nothing.
    private final class LaneCounts: Sendable {
        let hits = Atomic<Int>(0)
        let misses = Atomic<Int>(0)
        /// Keeps two lanes' counters off one cache line (each instance is its own allocation).
        private let padding: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    private struct Shared {
        var log = ReadLog()
        /// The ticket counter at the last gathering: the reads still in lanes have tickets from here on.
        var gatheredTickets: UInt64 = 0
        /// The count of reserved numbers before the open write transaction's first reservation
        /// (see ``numberPendingReads(after:)``).
        var openReservation: Int?
    }

    /// One thread's reads since the last gathering, each with its ticket.
    private struct Lane {
        var reads: [DiskIndex.Access] = []
        var tickets: [UInt64] = []
        /// Logged hits counted here, never moved (see ``counts``).
        var hits = 0
        var isUsed = false

        /// Reads a lane holds before its thread gathers every lane into the log.
        static let limit = 256
    }

    // MARK: - Recording

    /// Counts what a read found and logs a hit; returns what the caller does about the log.
    /// A plain hit takes only the calling thread's lane; a miss takes no lock.
    func record(_ record: Record) -> Step {
        switch record {
        case .none, .answer:
            return .none
        case .slidingHit:
            return withGathered { $0.log.record(record, inBackground: ranksInBackground) }
        case .miss:
            laneCounts[currentLaneNumber()].misses.wrappingAdd(1, ordering: .relaxed)
            return .none
        case .unloggedHit:
            laneCounts[currentLaneNumber()].hits.wrappingAdd(1, ordering: .relaxed)
            return .none
        case .hit:
            break
        }
        let number = currentLaneNumber()
        let isDue: Bool = lanes[number].withLock { lane in
            if !lane.isUsed {
                lane.isUsed = true
                usedLanes.bitwiseOr(1 << number, ordering: .sequentiallyConsistent)
            }
            switch record {
            case .hit(let access):
                lane.hits += 1
                if lane.reads.isEmpty {
                    lane.reads.reserveCapacity(Lane.limit)
                    lane.tickets.reserveCapacity(Lane.limit)
                    _ = oldestUnranked.min(access.time, ordering: .relaxed)
                }
                lane.reads.append(access)
                // Taken under the lane's lock (see ``gather(_:)``).
                lane.tickets.append(tickets.wrappingAdd(1, ordering: .acquiringAndReleasing).oldValue)
                // Due when full, or when the oldest read here or anywhere (as far as
                // ``oldestUnranked`` knows) is old enough.
                let oldest = min(lane.reads[0].time, oldestUnranked.load(ordering: .relaxed))
                return lane.reads.count >= Lane.limit || access.time - oldest >= Self.flushDelay
            default:
                return false
            }
        }
        guard isDue, case .hit(let access) = record else { return .none }
        return withGathered { shared in
            shared.log.step(due: shared.log.isDue(at: access.time), inBackground: ranksInBackground)
        }
    }

    /// Logs that a faster tier served `key`, renewing its sliding lifetime to `expires`, at
    /// `now` (milliseconds). A memory hit: when the log is due, the step is always a background
    /// one.
    func renew(key: String, until expires: Int64, now: Int64) -> Step {
        withGathered { shared in
            shared.log.extensions.append(DiskIndex.Extension(target: .key(key), expires: expires))
            let oldest = shared.log.oldestPending ?? now
            shared.log.oldestPending = oldest
            let due = shared.log.extensions.count >= Self.flushCount || now - oldest >= Self.flushDelay
            return shared.log.step(due: due, inBackground: true, mayRankHere: false)
        }
    }

    /// After a background drain: whether to drain again (it `ranked` and a full batch waits
    /// already); otherwise the next due read may queue one.
    func backgroundRankingEnded(ranked: Bool) -> Bool {
        withGathered { shared in
            if ranked && shared.log.isFull { return true }
            shared.log.isRankingInBackground = false
            return false
        }
    }

    /// The hits and misses counted since the log was made.
    var counts: (hits: Int, misses: Int) {
        var (hits, misses) = shared.withLock { ($0.log.hits, $0.log.misses) }
        forEachUsedLane { lane in hits += lane.hits }
        for counts in laneCounts {
            hits += counts.hits.load(ordering: .relaxed)
            misses += counts.misses.load(ordering: .relaxed)
        }
        return (hits, misses)
    }

    /// Whether renewed lifetimes wait: an entry the index shows expired may be live.
    var hasPendingRenewals: Bool {
        shared.withLock { !$0.log.extensions.isEmpty }
    }

    /// Whether reads or renewals wait.
    var hasPending: Bool {
        let pending = pending
        return pending.reads || pending.renewals
    }

    /// Whether reads or renewals wait, as `(reads, renewals)`.
    var pending: (reads: Bool, renewals: Bool) {
        withGathered { (!$0.log.pending.isEmpty, !$0.log.extensions.isEmpty) }
    }

    // MARK: - Draining (the store's write doorway only)

    /// Takes every read and renewal recorded so far and hands them to `write`, in order, with
    /// the numbers reserved for them. If `write` throws, they go back in front of the log.
    func drain<T>(into write: (DiskIndex.PendingReads) throws -> T) rethrows -> T {
        let due = withGathered { $0.log.takePending() }
        do {
            return try write(due)
        } catch {
            restore(due)
            throw error
        }
    }

    /// Reserves the numbers after `maximum` for the pending reads that have none yet, so that a
    /// write numbered after them ranks after them without draining them now; returns how many.
    /// `nil` (nothing reserved) when renewals wait: those must be drained first. Call inside a
    /// write transaction, then ``endWrite(committed:)``, which takes the numbers back if the
    /// transaction did not commit.
    func numberPendingReads(after maximum: Int64) -> Int64? {
        withGathered { shared in
            guard shared.log.extensions.isEmpty else { return nil }
            let before = shared.log.reservedSequences.count
            if shared.openReservation == nil { shared.openReservation = before }
            let count = shared.log.pending.count - before
            shared.log.reservedSequences.append(contentsOf: (0..<Int64(count)).lazy.map { maximum + 1 + $0 })
            return Int64(count)
        }
    }

    /// Ends the write transaction that called ``numberPendingReads(after:)``: keeps the numbers
    /// if it `committed`, else takes back those reserved since. Only that write's reservations
    /// follow the mark: the writer's lock is held from the first reservation to here.
    func endWrite(committed: Bool) {
        shared.withLock { shared in
            guard let mark = shared.openReservation else { return }
            shared.openReservation = nil
            if !committed, shared.log.reservedSequences.count > mark {
                shared.log.reservedSequences.removeLast(shared.log.reservedSequences.count - mark)
            }
        }
    }

    /// Forgets the pending reads of `rowID` (a row id SQLite has just given a new row: they
    /// were reads of a removed entry), with their reserved numbers.
    func discard(row rowID: Int64) {
        withGathered { shared in
            guard shared.log.pendingRows.mayContain(rowID), shared.log.pending.contains(where: { $0.rowID == rowID })
            else { return }
            var reads: [DiskIndex.Access] = [], sequences: [Int64] = []
            reads.reserveCapacity(shared.log.pending.count)
            for (offset, read) in shared.log.pending.enumerated() where read.rowID != rowID {
                reads.append(read)
                if offset < shared.log.reservedSequences.count { sequences.append(shared.log.reservedSequences[offset]) }
            }
            shared.log.pending = reads
            shared.log.reservedSequences = sequences
            if reads.isEmpty { shared.log.oldestPending = nil }
        }
    }

    /// Forgets every pending read and renewal (their row ids mean nothing in a reset index).
    func discardAll() {
        withGathered { _ = $0.log.takePending() }
    }

    private func restore(_ due: DiskIndex.PendingReads) {
        guard !due.isEmpty else { return }
        shared.withLock { shared in
            shared.log.putBack(due)
            publishOldestPending(shared.log)
        }
    }

    // MARK: - Lanes

    /// Runs `body` on the shared log with every lane's reads gathered into it first.
    private func withGathered<T>(_ body: (inout Shared) throws -> T) rethrows -> T {
        try shared.withLockUnchecked { shared in
            gather(&shared)
            defer { publishOldestPending(shared.log) }
            return try body(&shared)
        }
    }

    private func publishOldestPending(_ log: ReadLog) {
        if let oldest = log.oldestPending { _ = oldestUnranked.min(oldest, ordering: .relaxed) }
    }

    /// Moves the lanes' reads into the log, in the order of their tickets. Call with the
    /// shared lock held.
    ///
    /// Only reads whose ticket is below the counter's value at the start are moved: a read
    /// takes its ticket and joins its lane in one hold of the lane's lock, so every such read
    /// is in its lane by the time this takes that lock, while a read with a higher ticket was
    /// logged during the gathering and waits for the next. So the log always grows by a prefix
    /// of the tickets' order, and a read that finished before another began (on any thread) is
    /// ranked before it. When no read took a ticket since the last gathering, no lane holds a read.
    private func gather(_ shared: inout Shared) {
        let cut = tickets.load(ordering: .sequentiallyConsistent)
        guard cut != shared.gatheredTickets else { return }
        shared.gatheredTickets = cut
        oldestUnranked.store(.max, ordering: .relaxed)
        var batches: [(reads: ArraySlice<DiskIndex.Access>, tickets: ArraySlice<UInt64>)] = []
        forEachUsedLane { lane in
            guard !lane.reads.isEmpty else { return }
            let taken = lane.tickets.partitioningIndex { $0 >= cut }
            guard taken > 0 else {
                _ = oldestUnranked.min(lane.reads[0].time, ordering: .relaxed)
                return
            }
            batches.append((lane.reads[..<taken], lane.tickets[..<taken]))
            if taken == lane.reads.count {
                lane.reads.removeAll(keepingCapacity: true)
                lane.tickets.removeAll(keepingCapacity: true)
            } else {
                lane.reads.removeFirst(taken)
                lane.tickets.removeFirst(taken)
                _ = oldestUnranked.min(lane.reads[0].time, ordering: .relaxed)
            }
        }
        shared.log.append(merging: batches)
    }

    private func forEachUsedLane(_ body: (inout Lane) -> Void) {
        var used = usedLanes.load(ordering: .sequentiallyConsistent)
        while used != 0 {
            let lane = used.trailingZeroBitCount
            used &= used - 1
            lanes[lane].withLock { body(&$0) }
        }
    }
}

/// The shared part of an ``AccessLog``: reads since the last drain, in the order they happened.
///
/// Invariants: `pending` is in read order; `reservedSequences` numbers a prefix of `pending`,
/// one each; `pendingRows` holds every row id of `pending` (or is full); `oldestPending` is no
/// later than the oldest pending read.
struct ReadLog {
    var hits = 0
    var misses = 0
    var pending: [DiskIndex.Access] = []
    /// The distinct rows of `pending`, counted up to ``AccessLog/flushCount``.
    var pendingRows = PendingRows()
    /// The sequence numbers that writes reserved for the first `reservedSequences.count`
    /// pending reads (one per read, in order).
    var reservedSequences: [Int64] = []
    /// Sliding lifetimes renewed by logged reads, written with their ranking.
    var extensions: [DiskIndex.Extension] = []
    var oldestPending: Int64?
    /// Whether a drain of the log is queued or running on Larder's I/O queue.
    var isRankingInBackground = false

    /// Counts what a read found and logs a hit's access; returns what to do about the log.
    mutating func record(_ record: AccessLog.Record, inBackground: Bool) -> AccessLog.Step {
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

    /// Counts a hit and logs its access; returns whether the log is due.
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

    /// Whether the log is due to be drained at `now` (milliseconds): full, or its oldest read
    /// old enough.
    func isDue(at now: Int64) -> Bool {
        pendingRows.isFull || pending.count >= AccessLog.flushReads
            || oldestPending.map { now - $0 >= AccessLog.flushDelay } ?? false
    }

    /// Whether the log holds a full batch of distinct rows, reads, or renewals.
    var isFull: Bool {
        pendingRows.isFull || pending.count >= AccessLog.flushReads || extensions.count >= AccessLog.flushCount
    }

    /// What to do about a log that is `due`: nothing while a background drain is queued or
    /// running, unless reads have piled up past ``AccessLog/inlineBacklog`` behind it, when
    /// the reader drains them itself (if `mayRankHere`); otherwise queue one in the
    /// background, or drain here.
    mutating func step(due: Bool, inBackground: Bool, mayRankHere: Bool = true) -> AccessLog.Step {
        guard due else { return .none }
        guard inBackground else { return .rankHere }
        if isRankingInBackground {
            let behind = max(pending.count, extensions.count) >= AccessLog.inlineBacklog
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
        pending.reserveCapacity(AccessLog.flushCount)
        extensions = []
        oldestPending = nil
        return due
    }

    /// Puts back in front what a failed drain took, keeping at most ``AccessLog/backlogLimit``.
    mutating func putBack(_ due: DiskIndex.PendingReads) {
        // Reserved numbers stay a prefix: the log's own only follow reads that all had one.
        reservedSequences = due.sequences.count == due.accesses.count ? due.sequences + reservedSequences : due.sequences
        pending.insert(contentsOf: due.accesses, at: 0)
        for access in due.accesses { pendingRows.insert(access.rowID) }
        if pending.count > AccessLog.backlogLimit {
            let dropped = pending.count - AccessLog.backlogLimit
            pending.removeFirst(dropped)
            reservedSequences.removeFirst(min(dropped, reservedSequences.count))
        }
        extensions.insert(contentsOf: due.extensions, at: 0)
        if extensions.count > AccessLog.backlogLimit {
            extensions.removeFirst(extensions.count - AccessLog.backlogLimit)
        }
        if let first = due.accesses.first {
            oldestPending = oldestPending.map { min($0, first.time) } ?? first.time
        }
    }

    /// Appends the reads of `batches` (each in ticket order) in the order of their tickets.
    mutating func append(merging batches: [(reads: ArraySlice<DiskIndex.Access>, tickets: ArraySlice<UInt64>)]) {
        switch batches.count {
        case 0:
            return
        case 1:
            for access in batches[0].reads { logAccess(access) }
        default:
            var heads = batches.map { $0.reads.startIndex }
            while true {
                var next: Int?
                for (batch, head) in heads.enumerated() where head < batches[batch].reads.endIndex {
                    if let chosen = next, batches[chosen].tickets[heads[chosen]] < batches[batch].tickets[head] { continue }
                    next = batch
                }
                guard let next else { return }
                logAccess(batches[next].reads[heads[next]])
                heads[next] += 1
            }
        }
    }
}

/// The distinct row ids among a read log's pending reads, counted up to
/// ``AccessLog/flushCount``: an open-addressing set with Fibonacci hashing (as
/// ``DiskIndex/lastReads(_:)``), at most half full. Once full it records nothing more and
/// answers "maybe" for every row: the log is then due, and only a drain empties it.
struct PendingRows {
    private var slots: [Int64] = []
    private(set) var count = 0
    private static let bits = 1 + AccessLog.flushCount.trailingZeroBitCount
    private static let mask = (1 << bits) - 1
    /// Never an automatic row id (those start at 1).
    private static let empty = Int64.min

    /// Whether ``AccessLog/flushCount`` distinct rows (or a row id that cannot be recorded)
    /// were inserted since the set was last emptied.
    var isFull: Bool { count >= AccessLog.flushCount }

    mutating func insert(_ rowID: Int64) {
        guard !isFull else { return }
        guard rowID != Self.empty else {
            count = AccessLog.flushCount
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

extension Collection {
    /// The first index whose element satisfies `belongs` (which must be false, then true, along
    /// the collection); `endIndex` if none does.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Index {
        var low = startIndex, count = self.count
        while count > 0 {
            let half = count / 2
            let middle = index(low, offsetBy: half)
            if belongs(self[middle]) {
                count = half
            } else {
                low = index(after: middle)
                count -= half + 1
            }
        }
        return low
    }
}
