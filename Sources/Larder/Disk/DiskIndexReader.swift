import CSQLite
import Foundation

/// The read statements of the disk tier's index, on one connection: the writer's own, or one
/// of the read-only connections a ``DiskStore`` pools so that reads on different threads run in
/// parallel (WAL lets readers proceed beside the writer and each other).
///
/// Not thread-safe: one thread uses it at a time (the store's lock for the writer's, a
/// check-out from the pool for the others). Every statement is prepared once.
final class DiskIndexReader {
    let connection: SQLiteConnection

    private let selectLocation: SQLiteStatement
    private let selectCountedLocation: SQLiteStatement
    private let selectAttributes: SQLiteStatement
    private let selectExpiry: SQLiteStatement
    private let selectTotals: SQLiteStatement
    private let selectKeys: SQLiteStatement
    private let selectKeysInRange: SQLiteStatement

    /// The read transaction this connection keeps open between reads, if any (see
    /// ``startRead(lingering:now:)``), and when it began (``CoarseClock`` seconds).
    private(set) var isLingering = false
    private var lingeringSince: Double = 0
    /// The wal-index this connection maps (``csqlite_wal_index``), looked up at its first read.
    private var walIndex: UnsafeRawPointer?
    private var walIndexLookups = 0
    /// The wal-index header as it was just before the lingering transaction began.
    private var walHeaderAtBegin = WALIndexHeader()
    private let begin: SQLiteStatement
    private let commit: SQLiteStatement

    /// Whether value reads on this connection may ask their lookup for the entry's read
    /// counter (``DiskPolicy/countsLookups``, fixed when a pooled reader opens, so a read
    /// asks no policy).
    private(set) var countsLookups = false
    /// Under S3-FIFO, whether asking a lookup for the read counter has paid lately (see
    /// ``countsNextLookup()``): +2 for each counted lookup that found a saturated counter (a
    /// read then logs nothing), -1 for each that did not, within ±``counterScoreLimit``.
    private var counterScore = 0
    private var lookupsSinceProbe = 0
    static let counterScoreLimit = 16
    static let counterProbeInterval = 16

    /// Under S3-FIFO, the keys whose counted lookups found a saturated counter, with the last
    /// use their access row held, in the database as the wal-index header
    /// ``saturatedHeader`` describes. While a read's snapshot has that header, nothing has
    /// committed since, so the access row is still what it was and the lookup need not read it
    /// again (see ``knownSaturation(forKey:)``).
    private var saturated: [String: Int64] = [:]
    private var saturatedHeader = WALIndexHeader()
    /// The most keys ``saturated`` holds (about 40 bytes each, and the key's storage, which
    /// it shares with the caller's string when that is not small); when full, it takes no more
    /// until the next commit empties it.
    static let saturatedLimit = 16_384

    /// Prepares the read statements on `connection` (whose schema must be current).
    init(connection: SQLiteConnection) throws {
        self.connection = connection
        // One descent of the unique key index, then the row by id; the key digest is read only
        // for schema-1 rows (see `location(forKey:)`).
        let locationColumns = """
            e.rowid, e.file, e.size, e.original_size, e.encoding, e.crc, e.crc_kind, e.created, e.expires, e.data,
            e.metadata, e.hash, e.sliding
            """
        selectLocation = try connection.statement("SELECT \(locationColumns) FROM entries AS e WHERE e.key = ?")
        // Under S3-FIFO: the same, and the row's read counter and last use (one descent of
        // `access` by row id), so that a read which would change neither is not logged.
        selectCountedLocation = try connection.statement("""
            SELECT \(locationColumns), a.freq, a.accessed
            FROM entries AS e LEFT JOIN access AS a ON a.entry = e.rowid WHERE e.key = ?
            """)
        selectAttributes = try connection.statement("""
            SELECT e.key, e.size, e.original_size, e.encoding, e.file IS NULL, e.created, coalesce(a.accessed, e.accessed),
                e.expires, e.metadata
            FROM entries AS e LEFT JOIN access AS a ON a.entry = e.rowid WHERE e.key = ?
            """)
        selectExpiry = try connection.statement("SELECT expires FROM entries WHERE key = ?")
        selectTotals = try connection.statement("SELECT count, size, charge FROM totals WHERE id = 0")
        begin = try connection.statement("BEGIN")
        commit = try connection.statement("COMMIT")
        selectKeys = try connection.statement(
            "SELECT key FROM entries WHERE expires IS NULL OR expires > ? ORDER BY key")
        selectKeysInRange = try connection.statement(
            "SELECT key FROM entries WHERE key >= ? AND key < ? AND (expires IS NULL OR expires > ?) ORDER BY key")
    }

    /// Opens a pooled read connection to the index at `path`; `countsLookups` as the store's
    /// ``DiskPolicy/countsLookups`` says.
    convenience init(path: String, busyTimeout: Duration, countsLookups: Bool = false) throws {
        let connection = try SQLiteConnection(path: path, busyTimeout: busyTimeout)
        try connection.execute("PRAGMA query_only = 1")
        try connection.execute("PRAGMA cache_size = -16384")
        try self.init(connection: connection)
        self.countsLookups = countsLookups
    }

    // MARK: - Lingering read transactions

    /// Readies the connection for a read at `now` (``CoarseClock`` seconds).
    ///
    /// Beginning and ending a read transaction (SQLite's read-mark locks on the wal-index, two
    /// `fcntl` calls and a mutex every thread shares) is most of a small read's cost. So a
    /// pooled reader keeps its read transaction open after a read, `lingering`, and the next
    /// read on it reuses that snapshot while the snapshot is still the latest: while the
    /// wal-index header, which every commit rewrites (this store's, another store's, another
    /// process's), is unchanged since just before the transaction began. A read therefore sees
    /// every commit that ended before it started, as a fresh transaction would. A snapshot older
    /// than ``ReaderPool/lingerLimit`` is renewed, so that a checkpoint waiting for readers never
    /// waits longer; the store ends idle ones before it writes and after the same delay (see
    /// ``ReaderPool/sweepLingering()``).
    ///
    /// With `lingering` false the read runs in a transaction of its own, as SQLite's
    /// autocommit makes it.
    func startRead(lingering: Bool, now: Double) {
        if isLingering {
            if lingering, now - lingeringSince < ReaderPool.lingerLimit, let walIndex,
               csqlite_wal_index_header_equals(walIndex, &walHeaderAtBegin) != 0 {
                return
            }
            endLingering()
        }
        guard lingering else { return }
        if walIndex == nil {
            // After the connection's first read its wal-index is mapped; give up on a
            // connection that still has none after a few reads (it reads every time afresh).
            guard walIndexLookups < 4 else { return }
            walIndexLookups += 1
            guard let index = csqlite_wal_index(connection.handle) else { return }
            walIndex = UnsafeRawPointer(index)
        }
        guard let walIndex else { return }
        // The header first: a commit between the copy and the snapshot (taken by the read's
        // first step) only makes the next read renew a snapshot that was already current.
        csqlite_wal_index_header_copy(walIndex, &walHeaderAtBegin)
        guard (try? begin.withReset({ _ = try $0.step() })) != nil else { return }
        isLingering = true
        lingeringSince = now
        // A commit since the counters were read may have changed them (a bump, an eviction's
        // decrement, a removal, a row id reused): forget them all.
        if !saturated.isEmpty, saturatedHeader != walHeaderAtBegin { saturated.removeAll(keepingCapacity: true) }
        saturatedHeader = walHeaderAtBegin
    }

    /// The last use of `key`'s saturated read counter, when a counted lookup found it in the
    /// snapshot this read uses (S3-FIFO): the lookup can then skip the access row. `nil` when
    /// unknown, or when the read is not in a lingering transaction (whose header says whether
    /// anything committed since).
    func knownSaturation(forKey key: String) -> Int64? {
        guard isLingering, !saturated.isEmpty else { return nil }
        return saturated[key]
    }

    /// Remembers that a counted lookup of `key`, in this read's snapshot, found its counter
    /// saturated with last use `accessed` (see ``knownSaturation(forKey:)``).
    func noteSaturation(forKey key: String, accessed: Int64) {
        guard isLingering, saturated.count < Self.saturatedLimit else { return }
        saturated[key] = accessed
    }

    /// Ends the lingering read transaction, if any (its locks released at once).
    func endLingering() {
        guard isLingering else { return }
        isLingering = false
        if (try? commit.withReset({ _ = try $0.step() })) == nil, sqlite3_get_autocommit(connection.handle) == 0 {
            try? connection.execute("ROLLBACK")
        }
    }

    /// Whether the next S3-FIFO lookup should also read the row's counter.
    ///
    /// The counter costs a second descent (about 12% more instructions per read) and saves a
    /// logged read (about 30%) when it is saturated: worth it when at least a third of lookups
    /// find one, as re-reads of a warm cache do; not when most reads are first reads. So counted
    /// lookups continue while the score is not negative, and otherwise one in
    /// ``counterProbeInterval`` is counted to notice when re-reads return. Either way the
    /// outcome is the same: an uncounted read is logged, which changes nothing for a saturated
    /// counter.
    func countsNextLookup() -> Bool {
        if counterScore >= 0 { return true }
        lookupsSinceProbe += 1
        guard lookupsSinceProbe >= Self.counterProbeInterval else { return false }
        lookupsSinceProbe = 0
        return true
    }

    /// Records what a counted lookup found (see ``countsNextLookup()``).
    func noteCounter(saturated: Bool) {
        counterScore = saturated
            ? min(counterScore + 2, Self.counterScoreLimit) : max(counterScore - 1, -Self.counterScoreLimit)
    }

    /// The row for `key`, or `nil` when there is none. With `counted` (S3-FIFO), also its read
    /// counter and last use, from its access row.
    func location(forKey key: String, counted: Bool = false) throws -> DiskIndex.Location? {
        try (counted ? selectCountedLocation : selectLocation).withText(key, boundAt: 1) { statement in
            guard try statement.step() else { return nil }
            let crcKind = statement.int64(6)
            var location = DiskIndex.Location(
                rowID: statement.int64(0),
                hash: crcKind == 0 ? statement.string(11) : nil,
                file: statement.optionalString(1),
                fileBytes: statement.data(1),
                size: Int(statement.int64(2)),
                originalSize: Int(statement.int64(3)),
                encodingCode: statement.int64(4),
                crc: UInt32(truncatingIfNeeded: statement.int64(5)),
                crcKind: crcKind,
                created: statement.int64(7),
                expires: statement.optionalInt64(8),
                inlineData: statement.data(9),
                metadata: statement.data(10),
                sliding: statement.optionalInt64(12))
            if counted, let count = statement.optionalInt64(13), let accessed = statement.optionalInt64(14) {
                location.counter = DiskIndex.Location.Counter(count: count, accessed: accessed)
            }
            return location
        }
    }

    /// Whether a row exists for `key`, and its expiry.
    func expiry(forKey key: String) throws -> Int64?? {
        try selectExpiry.withText(key, boundAt: 1) { statement in
            guard try statement.step() else { return nil }
            return .some(statement.optionalInt64(0))
        }
    }

    func attributes(forKey key: String) throws -> (attributes: DiskStore.Attributes, expires: Int64?)? {
        try selectAttributes.withReset { statement in
            try statement.bind(key, at: 1)
            guard try statement.step() else { return nil }
            let expires = statement.optionalInt64(7)
            let attributes = DiskStore.Attributes(
                key: statement.string(0),
                size: Int(statement.int64(1)),
                originalSize: Int(statement.int64(2)),
                encoding: DiskStore.Encoding(rawValue: Int(statement.int64(3))) ?? .raw,
                isInline: statement.int64(4) != 0,
                creationDate: Date(milliseconds: statement.int64(5)),
                accessDate: Date(milliseconds: statement.int64(6)),
                expirationDate: expires.map(Date.init(milliseconds:)),
                metadata: statement.data(8))
            return (attributes, expires)
        }
    }

    func totals() throws -> (count: Int, size: Int, charge: Int) {
        try selectTotals.withReset { statement in
            guard try statement.step() else {
                throw StorageError.sqlite(code: SQLITE_CORRUPT, message: "the totals row is missing", sql: statement.sql)
            }
            return (Int(statement.int64(0)), Int(statement.int64(1)), Int(statement.int64(2)))
        }
    }

    func keys(now: Int64) throws -> [String] {
        try selectKeys.withReset { statement in
            try statement.bind(now, at: 1)
            var keys: [String] = []
            while try statement.step() { keys.append(statement.string(0)) }
            return keys
        }
    }

    /// Keys that start with `prefix` (a range scan on the key index), not expired at `now`.
    func keys(withPrefix prefix: String, now: Int64) throws -> [String] {
        // Every key with the prefix sorts at or after the prefix and before prefix + U+10FFFF.
        try selectKeysInRange.withReset { statement in
            try statement.bind(prefix, at: 1)
            try statement.bind(prefix + "\u{10FFFF}", at: 2)
            try statement.bind(now, at: 3)
            var keys: [String] = []
            while try statement.step() {
                let key = statement.string(0)
                if key.hasPrefix(prefix) { keys.append(key) }
            }
            return keys
        }
    }

    /// Every blob file the index names (for the orphan sweep; prepared on first use).
    func allFiles() throws -> Set<String> {
        try connection.statement("SELECT file FROM entries WHERE file IS NOT NULL").withReset { statement in
            var files = Set<String>()
            while try statement.step() { files.insert(statement.string(0)) }
            return files
        }
    }

    /// Every key, expired ones included, in ascending order (for `verify`; prepared on first use).
    func allKeys() throws -> [String] {
        try connection.statement("SELECT key FROM entries ORDER BY key").withReset { statement in
            var keys: [String] = []
            while try statement.step() { keys.append(statement.string(0)) }
            return keys
        }
    }
}

@available(*, unavailable)
extension DiskIndexReader: Sendable {}

/// The bytes of a wal-index header (``CSQLITE_WAL_INDEX_HEADER_BYTES``, 96), held inline.
struct WALIndexHeader: Equatable {
    var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    static func == (lhs: WALIndexHeader, rhs: WALIndexHeader) -> Bool {
        withUnsafeBytes(of: lhs.words) { left in
            withUnsafeBytes(of: rhs.words) { right in left.elementsEqual(right) }
        }
    }
}
