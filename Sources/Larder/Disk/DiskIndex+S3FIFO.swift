import CSQLite
import Foundation

// S3-FIFO's state in the index (schema 4): the queue and read counter of each access row, the
// small queue's totals, and the ghost of keys recently evicted from the small queue.
//
// Every statement here is a constant prepared once per connection (the connection's cache) and
// reused; keys reach SQL only as bound parameters or as their 64-bit ghost digest.
extension DiskIndex {
    /// Where an S3-FIFO read counter saturates (libCacheSim's `S3FIFO.c`: 3).
    static let maxReadCount: Int64 = 3

    /// The queue an access row is in (`access.queue`).
    enum Queue: Int64 {
        /// The main queue; also where an LRU store keeps every row (LRU ignores queues).
        case main = 0
        /// The small queue new entries enter.
        case small = 1
    }

    /// A count, stored size and charge (``charge(_:)``): the three measures the limits count.
    struct Measure: Equatable {
        var count = 0
        var size = 0
        var charge = 0

        static func - (lhs: Measure, rhs: Measure) -> Measure {
            Measure(count: lhs.count - rhs.count, size: lhs.size - rhs.size, charge: lhs.charge - rhs.charge)
        }

        /// Whether any measure is over `limit`'s.
        func exceeds(_ limit: Measure) -> Bool {
            count > limit.count || size > limit.size || charge > limit.charge
        }

        /// Whether any measure is at or over `limit`'s.
        func reaches(_ limit: Measure) -> Bool {
            count >= limit.count || size >= limit.size || charge >= limit.charge
        }
    }

    /// The queue shares of S3-FIFO for one set of limits: the small queue gets ⌊10%⌋ of each
    /// limit, main the rest, the ghost ⌊90%⌋ (libCacheSim's `S3FIFO` ratios).
    struct S3FIFOShares {
        var small: Measure
        var main: Measure
        var ghost: Measure

        static let smallRatio = 0.1
        static let ghostRatio = 0.9

        init(countLimit: Int, sizeLimit: Int, chargeLimit: Int) {
            func share(_ limit: Int, _ ratio: Double) -> Int {
                let value = (Double(limit) * ratio).rounded(.down)
                return value >= Double(Int.max) ? .max : Int(value)
            }
            small = Measure(
                count: share(countLimit, Self.smallRatio), size: share(sizeLimit, Self.smallRatio),
                charge: share(chargeLimit, Self.smallRatio))
            main = Measure(
                count: countLimit - small.count, size: sizeLimit - small.size, charge: chargeLimit - small.charge)
            ghost = Measure(
                count: share(countLimit, Self.ghostRatio), size: .max, charge: share(chargeLimit, Self.ghostRatio))
        }
    }

    /// What one S3-FIFO eviction needs to know: the shares, and the entry being written (in
    /// the totals but in no queue yet: it joins one after the write's evictions).
    struct S3FIFOContext {
        var shares: S3FIFOShares
        var pending = Measure()
    }

    /// An entry an S3-FIFO eviction picked, and the queue it was in.
    struct QueuedVictim {
        var row: EvictionCandidate
        var queue: Queue
        var charge: Int
    }

    // MARK: - Totals

    /// The small queue's count, stored size and charge.
    func smallTotals() throws -> Measure {
        try connection.statement("SELECT small_count, small_size, small_charge FROM totals WHERE id = 0").withReset { statement in
            guard try statement.step() else { return Measure() }
            return Measure(count: Int(statement.int64(0)), size: Int(statement.int64(1)), charge: Int(statement.int64(2)))
        }
    }

    /// The ghost's count and charge.
    func ghostTotals() throws -> Measure {
        try connection.statement("SELECT ghost_count, ghost_charge FROM totals WHERE id = 0").withReset { statement in
            guard try statement.step() else { return Measure() }
            return Measure(count: Int(statement.int64(0)), size: 0, charge: Int(statement.int64(1)))
        }
    }

    /// Counts the small queue's and the ghost's totals again from their rows (with the other
    /// totals, after an unclean shutdown).
    func recountQueueTotals() throws {
        try connection.execute("""
            UPDATE totals SET
                small_count = (SELECT count(*) FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry WHERE a.queue = 1),
                small_size = (SELECT coalesce(sum(e.size), 0) FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry
                    WHERE a.queue = 1),
                small_charge = (SELECT coalesce(sum(\(Self.charge("e"))), 0) FROM access AS a CROSS JOIN entries AS e
                    ON e.rowid = a.entry WHERE a.queue = 1),
                ghost_count = (SELECT count(*) FROM ghost),
                ghost_charge = (SELECT coalesce(sum(charge), 0) FROM ghost)
            WHERE id = 0
            """)
    }

    private func addToSmall(_ measure: Measure, sign: Int64) throws {
        try connection.statement("""
            UPDATE totals SET small_count = small_count + ?1, small_size = small_size + ?2, small_charge = small_charge + ?3
            WHERE id = 0
            """).withReset { statement in
            try statement.bind(sign * Int64(measure.count), at: 1)
            try statement.bind(sign * Int64(measure.size), at: 2)
            try statement.bind(sign * Int64(measure.charge), at: 3)
            try statement.step()
        }
    }

    /// The stored size and charge of the row `rowID` (count 1), or `nil` when it is gone.
    func measure(ofRow rowID: Int64) throws -> Measure? {
        try connection.statement("SELECT e.size, \(Self.charge("e")) FROM entries AS e WHERE e.rowid = ?").withReset { statement in
            try statement.bind(rowID, at: 1)
            guard try statement.step() else { return nil }
            return Measure(count: 1, size: Int(statement.int64(0)), charge: Int(statement.int64(1)))
        }
    }

    // MARK: - Access rows

    /// Reads recorded under S3-FIFO: each bumps its row's counter (saturating at 3) and moves
    /// nothing. Rows are updated in row-id order, one update per row however often it was read;
    /// `accessed` (the last-used time of ``DiskStore/trim(toDate:by:)``) keeps the latest read.
    func recordFrequencies(_ accesses: [Access]) throws {
        guard !accesses.isEmpty else { return }
        // Sorted by row id, the reads of one row are a run: no hashing, and the updates walk
        // the table's pages in order.
        let sorted = accesses.sorted { $0.rowID < $1.rowID }
        let update = try connection.statement(
            "UPDATE access SET freq = min(\(Self.maxReadCount), freq + ?2), accessed = max(accessed, ?3) WHERE entry = ?1")
        var start = 0
        while start < sorted.count {
            let rowID = sorted[start].rowID
            var end = start + 1, time = sorted[start].time
            while end < sorted.count, sorted[end].rowID == rowID {
                time = max(time, sorted[end].time)
                end += 1
            }
            try update.withReset { statement in
                try statement.bind(rowID, at: 1)
                try statement.bind(Int64(end - start), at: 2)
                try statement.bind(time, at: 3)
                try statement.step()
            }
            start = end
        }
    }

    /// An overwrite under S3-FIFO: counts as a read and moves the entry to the front of its
    /// queue. Returns `false` when the row has no access row (it is then placed as new).
    func touchOverwritten(rowID: Int64, sequence: Int64, time: Int64) throws -> Bool {
        try connection.statement("""
            UPDATE access SET seq = ?2, accessed = max(accessed, ?3), freq = min(\(Self.maxReadCount), freq + 1) WHERE entry = ?1
            """).withReset { statement in
            try statement.bind(rowID, at: 1)
            try statement.bind(sequence, at: 2)
            try statement.bind(time, at: 3)
            try statement.step()
        }
        return connection.changes > 0
    }

    /// Places a new entry at the front of `queue` with counter 0 (nothing if its row is gone).
    func enqueue(rowID: Int64, measure: Measure, in queue: Queue, sequence: Int64, time: Int64) throws {
        try connection.statement("""
            INSERT INTO access (entry, seq, accessed, queue, freq) SELECT ?1, ?2, ?3, ?4, 0
            WHERE EXISTS (SELECT 1 FROM entries WHERE rowid = ?1)
            ON CONFLICT (entry) DO UPDATE SET seq = excluded.seq, accessed = excluded.accessed,
                queue = excluded.queue, freq = 0
            """).withReset { statement in
            try statement.bind(rowID, at: 1)
            try statement.bind(sequence, at: 2)
            try statement.bind(time, at: 3)
            try statement.bind(queue.rawValue, at: 4)
            try statement.step()
        }
        if connection.changes > 0, queue == .small { try addToSmall(measure, sign: 1) }
    }

    /// Moves an access row to the front of `queue` with counter `frequency`.
    private func requeue(_ rowID: Int64, in queue: Queue, sequence: Int64, frequency: Int64) throws {
        try connection.statement("UPDATE access SET queue = ?2, seq = ?3, freq = ?4 WHERE entry = ?1").withReset { statement in
            try statement.bind(rowID, at: 1)
            try statement.bind(queue.rawValue, at: 2)
            try statement.bind(sequence, at: 3)
            try statement.bind(frequency, at: 4)
            try statement.step()
        }
    }

    // MARK: - Choosing victims

    /// Whether S3-FIFO ever evicted from this index: until then, a full small queue sends new
    /// entries to main (libCacheSim's `has_evicted`). Kept in `meta`, so every process and
    /// reopen agrees.
    func s3fifoHasEvicted() throws -> Bool {
        if let known = hasS3FIFOEvicted, known { return true }
        let value = try meta("s3fifo_evicted") ?? 0 != 0
        hasS3FIFOEvicted = value
        return value
    }

    /// The entry to evict under S3-FIFO, after the moves finding it takes (call inside the
    /// write transaction; `nil` when neither queue holds an entry but `excludedKey`'s).
    ///
    /// If main is over its share of a limit, or the small queue is empty, main gives up an
    /// entry: its oldest with counter 0; older ones with a counter go back to main's front with
    /// the counter less one. Otherwise small gives up its oldest with a counter below 2; older
    /// ones with 2 or more move to main's front with counter 0. A small queue emptied by moves
    /// hands the choice to main.
    func s3fifoVictim(_ context: S3FIFOContext, excluding excludedKey: String?) throws -> QueuedVictim? {
        if try !s3fifoHasEvicted() {
            try setMeta("s3fifo_evicted", 1)
            hasS3FIFOEvicted = true
        }
        var sequence = try maxSequence()
        let start = sequence
        let victim = try s3fifoVictim(context, excluding: excludedKey, sequence: &sequence)
        if sequence != start { try setMaxSequence(sequence) }
        return victim
    }

    private func s3fifoVictim(
        _ context: S3FIFOContext, excluding excludedKey: String?, sequence: inout Int64
    ) throws -> QueuedVictim? {
        let all = try totals()
        let small = try smallTotals()
        let main = Measure(count: all.count, size: all.size, charge: all.charge) - small - context.pending
        if main.exceeds(context.shares.main) || small.count <= 0 {
            if let victim = try mainVictim(sequence: &sequence, excluding: excludedKey) { return victim }
        }
        while let oldest = try oldestQueued(.small, excluding: excludedKey) {
            guard oldest.frequency >= 2 else { return oldest.victim }
            sequence += 1
            try requeue(oldest.victim.row.rowID, in: .main, sequence: sequence, frequency: 0)
            try addToSmall(Measure(count: 1, size: oldest.victim.row.size, charge: oldest.victim.charge), sign: -1)
        }
        return try mainVictim(sequence: &sequence, excluding: excludedKey)
    }

    private func mainVictim(sequence: inout Int64, excluding excludedKey: String?) throws -> QueuedVictim? {
        while let oldest = try oldestQueued(.main, excluding: excludedKey) {
            guard oldest.frequency > 0 else { return oldest.victim }
            sequence += 1
            try requeue(oldest.victim.row.rowID, in: .main, sequence: sequence, frequency: min(oldest.frequency, 3) - 1)
        }
        return nil
    }

    /// The oldest row of `queue` other than `excludedKey`'s, from the candidates of the last
    /// scan (scanning again when they run out).
    private func oldestQueued(_ queue: Queue, excluding excludedKey: String?) throws
        -> (victim: QueuedVictim, frequency: Int64)? {
        let slot = Int(queue.rawValue)
        for pass in 0..<2 {
            if pass == 1 { try scanQueue(queue) }
            var position = queueCandidateStarts[slot]
            var atFront = true
            while position < queueCandidates[slot].count {
                let candidate = queueCandidates[slot][position]
                position += 1
                if let found = try queuedRow(candidate, in: queue) {
                    atFront = false
                    if found.victim.row.key != excludedKey { return found }
                } else if atFront {
                    queueCandidateStarts[slot] = position
                }
            }
        }
        return nil
    }

    /// The candidate's row, if its access row is still in `queue` with the number it was
    /// found with.
    private func queuedRow(_ candidate: (rowID: Int64, sequence: Int64), in queue: Queue) throws
        -> (victim: QueuedVictim, frequency: Int64)? {
        try connection.statement("""
            SELECT e.rowid, e.key, e.file, e.size, a.seq, a.queue, a.freq, \(Self.charge("e"))
            FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry WHERE a.entry = ?
            """).withReset { statement in
            try statement.bind(candidate.rowID, at: 1)
            guard try statement.step(), statement.int64(4) == candidate.sequence, statement.int64(5) == queue.rawValue
            else { return nil }
            let row = EvictionCandidate(
                rowID: statement.int64(0), key: statement.string(1), file: statement.optionalString(2),
                size: Int(statement.int64(3)))
            return (QueuedVictim(row: row, queue: queue, charge: Int(statement.int64(7))), statement.int64(6))
        }
    }

    /// Finds the oldest rows of `queue` (a scan of the narrow access table with a top-N sort,
    /// run once per ``candidateCount`` rows taken).
    private func scanQueue(_ queue: Queue) throws {
        let slot = Int(queue.rawValue)
        queueCandidates[slot] = try connection.statement(
            "SELECT entry, seq FROM access WHERE queue = ? ORDER BY seq LIMIT ?"
        ).withReset { statement in
            try statement.bind(queue.rawValue, at: 1)
            try statement.bind(Int64(Self.candidateCount), at: 2)
            var found: [(rowID: Int64, sequence: Int64)] = []
            while try statement.step() { found.append((statement.int64(0), statement.int64(1))) }
            return found
        }
        queueCandidateStarts[slot] = 0
    }

    // MARK: - Ghost

    /// Removes `digest` from the ghost; returns whether it was there (the key was evicted from
    /// the small queue recently, so its entry goes to main).
    func removeGhost(_ digest: Int64) throws -> Bool {
        try connection.statement("DELETE FROM ghost WHERE digest = ?").withReset { statement in
            try statement.bind(digest, at: 1)
            try statement.step()
        }
        return connection.changes > 0
    }

    /// Remembers `digest` (of a key evicted from the small queue) at the ghost's front, first
    /// dropping its oldest digests until it fits `limit` (count and charge). A digest larger
    /// than the limit alone is not kept. The callers' limit is ⌊90%⌋ of each store limit and
    /// at most as many digests as the store has entries (a ghost row is not charged).
    func addGhost(_ digest: Int64, charge: Int, limit: Measure) throws {
        guard charge <= limit.charge, limit.count > 0 else { return }
        var ghost = try ghostTotals()
        let dropOldest = try connection.statement(
            "DELETE FROM ghost WHERE digest = (SELECT digest FROM ghost ORDER BY seq LIMIT 1) RETURNING charge")
        while ghost.count > 0, ghost.count + 1 > limit.count || ghost.charge + charge > limit.charge {
            let dropped: Int? = try dropOldest.withReset { statement in
                guard try statement.step() else { return nil }
                let charge = Int(statement.int64(0))
                while try statement.step() {}
                return charge
            }
            guard let dropped else { break }
            ghost.count -= 1
            ghost.charge -= dropped
        }
        try connection.statement("""
            INSERT INTO ghost (digest, seq, charge) VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM ghost), ?2)
            ON CONFLICT (digest) DO NOTHING
            """).withReset { statement in
            try statement.bind(digest, at: 1)
            try statement.bind(Int64(charge), at: 2)
            try statement.step()
        }
    }

    /// The ghost digest of `key`: 64-bit FNV-1a of its UTF-8 bytes (the same in every process;
    /// a collision only places one entry in the other queue).
    static func ghostDigest(_ key: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var key = key
        key.withUTF8 { bytes in
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01B3
            }
        }
        return Int64(bitPattern: hash)
    }
}
