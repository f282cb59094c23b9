import CSQLite
import Foundation

/// The writing side of the disk tier's SQLite index: schema, migrations, and the row writes.
///
/// Not thread-safe: a ``DiskStore`` keeps its one `DiskIndex` (the one writer connection)
/// behind a lock; reads go through ``DiskIndexReader``s of their own. Every statement is
/// prepared once and reused; no SQL is ever built from keys or values.
///
/// Schema 6 (this version) adds the `tags` table (see ``DiskTagIndex/upgradeAddingTags``).
/// Schema 5 added `changes (seq, key, writer)`: one row per change to an entry row, written by
/// triggers in the changing transaction, which ``ChangeWatch`` reads (see `upgrade4To5`).
/// Schema 3 added `sliding` and `totals.charge`, schema 4 S3-FIFO's queue, counter, small-queue
/// totals and ghost (see `upgrade3To4`). Schema 2:
/// - `entries`: one row per entry (key, blob file or inline data, sizes, encoding, checksum,
///   dates, metadata). A read changes nothing in it.
/// - `access (entry, seq, accessed)`: the recency of each entry apart from its row, so that
///   recording reads rewrites a narrow row instead of the entry (inline data included).
///   `seq` is a store-wide sequence in the order of reads and writes (not of their
///   millisecond): eviction takes the lowest first. New numbers continue from the high-water
///   mark `totals.seq` inside the write transaction, so they stay monotonic across processes and
///   reopens (it lives in the totals row, whose page every write rewrites anyway, so keeping it
///   costs no extra page in the WAL). The writer stores the mark ahead of the numbers it hands
///   out (``sequenceReservation``) and keeps it between its own commits while no other
///   connection commits, so a run of writes reads and writes it once per reservation. `seq` has no index (ranking a read is one update by row id): eviction scans for
///   the lowest 256 once and keeps them as candidates, which stay exactly the least recent
///   ones because numbers only grow — a candidate whose number changed (read again, or its row
///   id reused) is dropped when it is checked.
/// - `crc_kind`: 1 = CRC-32C of the key's UTF-8 bytes followed by the stored bytes (the key is
///   covered, so a row moved to another key fails its check without a digest); 0 = the CRC-32
///   (zlib) of the stored bytes alone, as schema 1 wrote it (the row's `hash` must then match
///   the key's digest).
final class DiskIndex {
    static let schemaVersion: Int64 = 6

    /// A row as the read path needs it.
    struct Location {
        /// The row's id, which names its `access` row.
        var rowID: Int64
        /// The digest of the key the row was written for; read only for schema-1 rows
        /// (``crcKind`` 0), whose checksum does not cover the key.
        var hash: String?
        var file: String?
        /// The `file` column's bytes exactly as stored (a damaged column may not be valid UTF-8,
        /// so `file` alone cannot identify the row again).
        var fileBytes: Data?
        var size: Int
        var originalSize: Int
        var encodingCode: Int64
        var crc: UInt32
        var crcKind: Int64
        var created: Int64
        var expires: Int64?
        var inlineData: Data?
        var metadata: Data?
        /// The sliding lifetime in milliseconds (schema 3): each read extends `expires` to the
        /// read's time plus this.
        var sliding: Int64?
        /// The row's S3-FIFO read counter and last recorded use, when the lookup asked for them
        /// (`nil` also for a row without an access row).
        var counter: Counter?

        struct Counter {
            var count: Int64
            var accessed: Int64

            /// See ``Location/isSaturated(at:window:)``.
            func isSaturated(at now: Int64, window: Int64) -> Bool {
                guard count >= DiskIndex.maxReadCount else { return false }
                let (start, overflow) = now.subtractingReportingOverflow(window)
                return overflow || accessed >= start
            }
        }
    }

    /// A row to insert or replace.
    struct Row {
        var key: String
        var hash: String
        var file: String?
        var size: Int
        var originalSize: Int
        var encoding: DiskStore.Encoding
        var crc: UInt32
        var created: Int64
        var expires: Int64?
        var inlineData: Data?
        var metadata: Data?
        var sliding: Int64?
    }

    /// An entry eviction may remove.
    struct EvictionCandidate {
        var rowID: Int64
        var key: String
        var file: String?
        var size: Int
    }

    /// One recorded read: the entry's row id and the time of the read.
    struct Access {
        var rowID: Int64
        var time: Int64
    }

    /// A sliding lifetime renewed by a read, written with the next ranking of reads: the row a
    /// disk read found, or the key a faster tier served (``Storage``'s memory hits).
    struct Extension {
        enum Target {
            case row(Int64)
            case key(String)
        }
        var target: Target
        /// The new expiry, in milliseconds; an expiry already later is kept.
        var expires: Int64
    }

    /// What the read log hands to a ranking: reads in order, and the lifetimes they renewed.
    struct PendingReads {
        var accesses: [Access] = []
        /// The numbers reserved for the first `sequences.count` accesses.
        var sequences: [Int64] = []
        var extensions: [Extension] = []
        var isEmpty: Bool { accesses.isEmpty && extensions.isEmpty }
    }

    let connection: SQLiteConnection
    /// The read statements, on this (the writer's) connection.
    let reads: DiskIndexReader
    /// The least recently used entries found by the last scan of `access`, oldest first:
    /// `(row id, seq)`. Only candidates found changed or gone are dropped, so a transaction that
    /// rolls back after evicting some loses none.
    private var candidates: [(rowID: Int64, sequence: Int64)] = []
    private var candidateStart = 0
    /// S3-FIFO's candidates per queue (``Queue``), kept as `candidates` is: the oldest rows of
    /// each queue found by the last scan, dropped only once found changed or gone.
    var queueCandidates: [[(rowID: Int64, sequence: Int64)]] = [[], []]
    var queueCandidateStarts = [0, 0]
    /// Whether S3-FIFO has evicted from this index (libCacheSim's `has_evicted`), once read
    /// from or written to `meta`.
    var hasS3FIFOEvicted: Bool?
    /// Candidates one scan of `access` keeps.
    static let candidateCount = 256

    private let selectFile: SQLiteStatement
    private let selectExisting: SQLiteStatement
    private let upsert: SQLiteStatement
    private let selectRowID: SQLiteStatement
    private let upsertAccess: SQLiteStatement
    private let touchAccess: SQLiteStatement
    private let selectSequence: SQLiteStatement
    private let updateSequence: SQLiteStatement
    private let deleteKey: SQLiteStatement
    private let deleteRowID: SQLiteStatement
    private let deleteIfUnchanged: SQLiteStatement
    private let deleteExpiredBatch: SQLiteStatement
    private let selectLowestRanked: SQLiteStatement
    private let selectCandidate: SQLiteStatement
    private let selectUnranked: SQLiteStatement
    private let selectMeta: SQLiteStatement
    private let upsertMeta: SQLiteStatement
    private let deleteAllEntries: SQLiteStatement
    private let pruneChanges: SQLiteStatement
    /// The change rows this index keeps (``retainedChanges(forSizeLimit:)``).
    let retainedChanges: Int64
    /// Write transactions since the change rows were last pruned (``pruneChangesIfDue()``).
    private var transactionsSincePrune = 0
    /// The statements of the `tags` table.
    let tags: DiskTagIndex

    /// Opens (creating when new, upgrading when older) the index at `path`.
    ///
    /// - Throws: ``StorageError/sqlite(code:message:sql:)`` (check `isDatabaseCorruption`), or
    ///   ``ForeignIndexError`` when the file is a database of some other schema.
    /// `writer` is the writer id schema 5's triggers record in the change rows this
    /// connection's writes add (see ``ChangeWatch``); `retainedChanges` how many change rows
    /// the index keeps (``retainedChanges(forSizeLimit:)``).
    init(
        path: String, durability: DiskStore.Durability, busyTimeout: Duration, walLimit: Int = 4 << 20,
        writer: Int64 = 0, retainedChanges: Int64 = DiskIndex.retainedChanges(forSizeLimit: .max)
    ) throws {
        self.retainedChanges = retainedChanges
        let connection = try SQLiteConnection(path: path, busyTimeout: busyTimeout)
        self.connection = connection
        try connection.setWriterID(writer)
        // Switching a new database to WAL takes an exclusive lock without consulting the busy
        // handler, so two stores opening one new directory at once can get SQLITE_BUSY here:
        // retry until the busy timeout, as the handler would.
        // A new index can give pages back to the file system (see `releaseFreePages`); the mode
        // must be chosen before the database is switched to WAL or gets its first table.
        // Pages of 2 KiB (SQLite's default is 4 KiB): a write commits whole pages to the WAL
        // (entry row, key index, totals, access row), each checksummed and copied, so halving
        // the page cuts a 100 B set by about a fifth of its instructions for a few percent more
        // per read. An existing index keeps the page size it was created with.
        if try connection.scalarInt64("SELECT count(*) FROM sqlite_schema") == 0 {
            try connection.execute("PRAGMA page_size = \(Self.newPageSize)")
            try connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        }
        try Self.retryingWhileBusy(for: busyTimeout) { try connection.execute("PRAGMA journal_mode = WAL") }
        try connection.execute(durability == .durable ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        try Self.applyWALLimit(walLimit, to: connection)
        try connection.execute("PRAGMA temp_store = MEMORY")
        // 16 MiB of page cache (SQLite's default is 2 MiB), so the index of a 100k-entry store
        // stays in memory instead of being read back page by page.
        try connection.execute("PRAGMA cache_size = -16384")
        try Self.migrate(connection)
        try Self.verifySchema(connection)
        reads = try DiskIndexReader(connection: connection)

        let columns = "key, hash, file, size, original_size, encoding, crc, crc_kind, created, accessed, seq, expires, data, metadata, sliding"
        selectFile = try connection.statement("SELECT file FROM entries WHERE key = ?")
        selectExisting = try connection.statement("SELECT rowid, file FROM entries WHERE key = ?")
        // `accessed` and `seq` in `entries` are schema 1's; schema 2 keeps recency in `access`.
        upsert = try connection.statement("""
            INSERT INTO entries (\(columns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?8, 0, ?9, ?10, ?11, ?12)
            ON CONFLICT (key) DO UPDATE SET hash = excluded.hash, file = excluded.file, size = excluded.size,
                original_size = excluded.original_size, encoding = excluded.encoding, crc = excluded.crc,
                crc_kind = excluded.crc_kind, created = excluded.created, accessed = excluded.accessed,
                expires = excluded.expires, data = excluded.data, metadata = excluded.metadata,
                sliding = excluded.sliding
            """)
        selectRowID = try connection.statement("SELECT rowid FROM entries WHERE key = ?")
        upsertAccess = try connection.statement("""
            INSERT INTO access (entry, seq, accessed) VALUES (?, ?, ?)
            ON CONFLICT (entry) DO UPDATE SET seq = excluded.seq, accessed = excluded.accessed
            """)
        // A plain update by row id (no upsert: that would need a statement journal): a read
        // recorded for a row deleted since changes nothing. The numbers a flush hands out are
        // above every number in the table (they continue from the high-water mark), so `seq` is
        // assigned as is; `max` keeps `accessed` from moving back when a row id was reused by a
        // newer entry.
        selectSequence = try connection.statement("SELECT seq FROM totals WHERE id = 0")
        updateSequence = try connection.statement("UPDATE totals SET seq = ? WHERE id = 0")
        touchAccess = try connection.statement(
            "UPDATE access SET seq = ?2, accessed = max(accessed, ?3) WHERE entry = ?1 AND seq < ?2")
        deleteKey = try connection.statement("DELETE FROM entries WHERE key = ? RETURNING file")
        deleteRowID = try connection.statement("DELETE FROM entries WHERE rowid = ? RETURNING file")
        deleteIfUnchanged = try connection.statement(
            "DELETE FROM entries WHERE key = ? AND created = ? AND crc = ? AND file IS CAST(? AS TEXT) RETURNING file")
        deleteExpiredBatch = try connection.statement("""
            DELETE FROM entries WHERE rowid IN
                (SELECT rowid FROM entries WHERE expires IS NOT NULL AND expires <= ? LIMIT ?)
            RETURNING file, key
            """)
        // A scan of the narrow table with a top-N sort: run once per `candidateCount` evictions.
        selectLowestRanked = try connection.statement("SELECT entry, seq FROM access ORDER BY seq LIMIT ?")
        selectCandidate = try connection.statement("""
            SELECT e.rowid, e.key, e.file, e.size, a.seq FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry
            WHERE a.entry = ?
            """)
        // Entries without an access row (none in a healthy index) rank below every other.
        selectUnranked = try connection.statement("""
            SELECT rowid, key, file, size FROM entries WHERE key IS NOT ? AND rowid NOT IN (SELECT entry FROM access) LIMIT ?
            """)
        selectMeta = try connection.statement("SELECT value FROM meta WHERE name = ?")
        upsertMeta = try connection.statement(
            "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        deleteAllEntries = try connection.statement("DELETE FROM entries RETURNING file")
        pruneChanges = try connection.statement("DELETE FROM changes WHERE seq < (SELECT max(seq) FROM changes) - ?")
        tags = try DiskTagIndex(connection: connection)
    }

    /// Runs `body` again while it fails with `SQLITE_BUSY` or `SQLITE_LOCKED`, backing off from
    /// 1 ms to 50 ms, until `timeout` has passed.
    static func retryingWhileBusy(for timeout: Duration, _ body: () throws -> Void) throws {
        let deadline = ContinuousClock.now + timeout
        var delay = 0.001
        while true {
            do {
                return try body()
            } catch let error as StorageError
                where [SQLITE_BUSY, SQLITE_LOCKED].contains((error.sqliteResultCode ?? 0) & 0xFF)
                && ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: delay)
                delay = min(delay * 2, 0.05)
            }
        }
    }

    // MARK: - Schema

    /// Schema 1, as version 1 of the store created it; a new index is created as schema 1 and
    /// then upgraded, so new and upgraded indexes have exactly one shape.
    private static let schema1 = """
        CREATE TABLE entries (
            key TEXT NOT NULL UNIQUE,
            hash TEXT NOT NULL,
            file TEXT,
            size INTEGER NOT NULL,
            original_size INTEGER NOT NULL,
            encoding INTEGER NOT NULL,
            crc INTEGER NOT NULL,
            created INTEGER NOT NULL,
            accessed INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            expires INTEGER,
            data BLOB,
            metadata BLOB
        );
        CREATE INDEX entries_by_access ON entries (accessed, seq);
        CREATE INDEX entries_by_expiry ON entries (expires) WHERE expires IS NOT NULL;
        CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 0), count INTEGER NOT NULL, size INTEGER NOT NULL);
        INSERT INTO totals (id, count, size) VALUES (0, 0, 0);
        CREATE TABLE meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
        CREATE TRIGGER entries_insert AFTER INSERT ON entries BEGIN
            UPDATE totals SET count = count + 1, size = size + NEW.size WHERE id = 0;
        END;
        CREATE TRIGGER entries_delete AFTER DELETE ON entries BEGIN
            UPDATE totals SET count = count - 1, size = size - OLD.size WHERE id = 0;
        END;
        CREATE TRIGGER entries_resize AFTER UPDATE OF size ON entries WHEN NEW.size <> OLD.size BEGIN
            UPDATE totals SET size = size + NEW.size - OLD.size WHERE id = 0;
        END;
        PRAGMA user_version = 1;
        """

    /// Schema 1 → 2: CRC-32C rows (`crc_kind`), recency in `access` ranked by the old
    /// `(accessed, seq)` order, whose index goes. Row data is not rewritten: old rows keep their
    /// CRC-32 and are verified with it, so the upgrade costs one pass over the narrow columns.
    private static let upgrade1To2 = """
        ALTER TABLE entries ADD COLUMN crc_kind INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE access (entry INTEGER PRIMARY KEY, seq INTEGER NOT NULL, accessed INTEGER NOT NULL);
        INSERT INTO access (entry, seq, accessed)
            SELECT rowid, row_number() OVER (ORDER BY accessed, seq), accessed FROM entries;
        ALTER TABLE totals ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
        UPDATE totals SET seq = (SELECT coalesce(max(seq), 0) FROM access) WHERE id = 0;
        DROP INDEX entries_by_access;
        CREATE TRIGGER entries_forget_access AFTER DELETE ON entries BEGIN
            DELETE FROM access WHERE entry = OLD.rowid;
        END;
        PRAGMA user_version = 2;
        """

    /// Schema 2 → 3: a sliding lifetime per row (`NULL`: a fixed expiry).
    private static let upgrade2To3 = """
        ALTER TABLE entries ADD COLUMN sliding INTEGER;
        ALTER TABLE totals ADD COLUMN charge INTEGER NOT NULL DEFAULT 0;
        DROP TRIGGER entries_insert;
        DROP TRIGGER entries_delete;
        DROP TRIGGER entries_resize;
        CREATE TRIGGER entries_insert AFTER INSERT ON entries BEGIN
            UPDATE totals SET count = count + 1, size = size + NEW.size, charge = charge + \(charge("NEW")) WHERE id = 0;
        END;
        CREATE TRIGGER entries_delete AFTER DELETE ON entries BEGIN
            UPDATE totals SET count = count - 1, size = size - OLD.size, charge = charge - \(charge("OLD")) WHERE id = 0;
        END;
        CREATE TRIGGER entries_resize AFTER UPDATE OF size, file, key, metadata ON entries
        WHEN NEW.size <> OLD.size OR NEW.file IS NOT OLD.file OR NEW.key <> OLD.key OR NEW.metadata IS NOT OLD.metadata BEGIN
            UPDATE totals SET size = size + NEW.size - OLD.size, charge = charge + \(charge("NEW")) - \(charge("OLD"))
            WHERE id = 0;
        END;
        UPDATE totals SET charge = (SELECT coalesce(sum(\(charge("e"))), 0) FROM entries AS e) WHERE id = 0;
        PRAGMA user_version = 3;
        """

    /// Schema 3 → 4: S3-FIFO's state (``DiskStore/Configuration/policy``). Each access row
    /// gets its queue (`0` main, also every row an LRU store ranks; `1` small) and a read
    /// counter (0...3); the totals row keeps the small queue's count, size and charge (kept by
    /// triggers on deletes and resizes, and by the S3-FIFO code on moves) and the ghost's count
    /// and charge; `ghost` holds the digests of keys recently evicted from the small queue, in
    /// FIFO order by `seq`. Every existing row starts in main with counter 0, in its LRU order.
    private static let upgrade3To4 = """
        ALTER TABLE access ADD COLUMN queue INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE access ADD COLUMN freq INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE totals ADD COLUMN small_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE totals ADD COLUMN small_size INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE totals ADD COLUMN small_charge INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE totals ADD COLUMN ghost_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE totals ADD COLUMN ghost_charge INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE ghost (digest INTEGER PRIMARY KEY, seq INTEGER NOT NULL, charge INTEGER NOT NULL);
        CREATE INDEX ghost_by_seq ON ghost (seq);
        CREATE TRIGGER ghost_insert AFTER INSERT ON ghost BEGIN
            UPDATE totals SET ghost_count = ghost_count + 1, ghost_charge = ghost_charge + NEW.charge WHERE id = 0;
        END;
        CREATE TRIGGER ghost_delete AFTER DELETE ON ghost BEGIN
            UPDATE totals SET ghost_count = ghost_count - 1, ghost_charge = ghost_charge - OLD.charge WHERE id = 0;
        END;
        DROP TRIGGER entries_forget_access;
        CREATE TRIGGER entries_forget_access AFTER DELETE ON entries BEGIN
            UPDATE totals SET small_count = small_count - 1, small_size = small_size - OLD.size,
                small_charge = small_charge - \(charge("OLD"))
            WHERE id = 0 AND (SELECT queue FROM access WHERE entry = OLD.rowid) = 1;
            DELETE FROM access WHERE entry = OLD.rowid;
        END;
        CREATE TRIGGER entries_resize_small AFTER UPDATE OF size, file, key, metadata ON entries
        WHEN (NEW.size <> OLD.size OR NEW.file IS NOT OLD.file OR NEW.key <> OLD.key OR NEW.metadata IS NOT OLD.metadata)
            AND (SELECT queue FROM access WHERE entry = NEW.rowid) = 1 BEGIN
            UPDATE totals SET small_size = small_size + NEW.size - OLD.size,
                small_charge = small_charge + \(charge("NEW")) - \(charge("OLD"))
            WHERE id = 0;
        END;
        PRAGMA user_version = 4;
        """

    /// Schema 4 → 5: the change rows ``ChangeWatch`` follows. Every insert and removal of an
    /// entry row, and every update that gives it another value (a new write time or checksum),
    /// other metadata, another kind of lifetime or an earlier expiry, adds a row with the next
    /// `seq`, the key and the writer id of the connection (`larder_writer()`, see
    /// ``SQLiteConnection/setWriterID(_:)``). A lifetime renewed by reads (only ever later) adds
    /// none: a copy elsewhere then only expires sooner. The table keeps the last
    /// ``retainedChanges`` rows (``pruneChangesIfDue()``).
    private static let upgrade4To5 = """
        CREATE TABLE changes (seq INTEGER PRIMARY KEY, key TEXT NOT NULL, writer INTEGER NOT NULL);
        CREATE TRIGGER entries_change_insert AFTER INSERT ON entries BEGIN
            INSERT INTO changes (key, writer) VALUES (NEW.key, larder_writer());
        END;
        CREATE TRIGGER entries_change_delete AFTER DELETE ON entries BEGIN
            INSERT INTO changes (key, writer) VALUES (OLD.key, larder_writer());
        END;
        CREATE TRIGGER entries_change_update AFTER UPDATE ON entries
        WHEN NEW.created IS NOT OLD.created OR NEW.crc IS NOT OLD.crc OR NEW.metadata IS NOT OLD.metadata
            OR NEW.sliding IS NOT OLD.sliding
            OR coalesce(NEW.expires, 9223372036854775807) < coalesce(OLD.expires, 9223372036854775807) BEGIN
            INSERT INTO changes (key, writer) VALUES (NEW.key, larder_writer());
        END;
        PRAGMA user_version = 5;
        """

    /// Change rows an index of a store of `sizeLimit` bytes keeps: one per 8 KiB of the limit,
    /// 64 to 16,384 (a row takes about 40 bytes and its key; the table stays within the
    /// footprint's slack). A ``ChangeWatch`` further behind drops every memory copy.
    static func retainedChanges(forSizeLimit sizeLimit: Int) -> Int64 {
        Int64(min(16_384, max(64, sizeLimit / 8_192)))
    }
    /// Write transactions between two prunings of the change rows.
    static let pruneInterval = 256

    /// What a row costs on disk, as `sizeLimit` counts it (schema 3's `totals.charge`): a value
    /// in a blob file takes whole 4 KiB blocks, plus a block for its directory entry (a shard
    /// directory in the layout of earlier versions; room to spare in a flat `blobs/`); bytes in
    /// the index (an inline value, the key, the metadata) count twice, for the key index, the
    /// row's own overhead and pages that B-tree splits and deletions leave part empty; plus a
    /// fixed cost per row (columns, the access row, the file name).
    static func charge(_ row: String) -> String {
        """
        (CASE WHEN \(row).file IS NULL \
        THEN 2 * (\(row).size + length(CAST(\(row).key AS BLOB)) + coalesce(length(\(row).metadata), 0)) + 128 \
        ELSE ((\(row).size + 4095) / 4096 + 1) * 4096 \
        + 2 * (length(CAST(\(row).key AS BLOB)) + coalesce(length(\(row).metadata), 0)) + 256 END)
        """
    }

    /// The write-ahead log's bound for a store of `sizeLimit` bytes: 1/16 of it, within
    /// 64 KiB...4 MiB. SQLite checkpoints when the log reaches it and truncates it back to it.
    static func walLimit(forSizeLimit sizeLimit: Int) -> Int {
        min(4 << 20, max(walFloor, sizeLimit / 16))
    }

    /// The smallest log bound; it is part of the footprint's fixed slack.
    static let walFloor = 64 << 10

    /// The page size of a new index, in bytes.
    static let newPageSize = 2_048

    /// Sets the log's bound (`journal_size_limit`) and the checkpoint threshold in pages (of
    /// the index's own page size, so the threshold is the same number of bytes in every index),
    /// installing the connection's ``SQLiteLogMonitor`` the first time.
    static func applyWALLimit(_ bytes: Int, to connection: SQLiteConnection) throws {
        let pageSize = max(512, Int(try connection.scalarInt64("PRAGMA page_size") ?? 4_096))
        // Integers the store computed, not user data: pragmas take no bound parameters.
        try connection.execute("PRAGMA journal_size_limit = \(bytes)")
        let threshold = max(16, bytes / pageSize)
        if let monitor = connection.logMonitor {
            monitor.setThreshold(threshold)
        } else {
            connection.installLogMonitor(SQLiteLogMonitor(threshold: threshold, path: connection.path, queue: larderIOQueue))
        }
    }

    /// Gives the file system back the index's free pages when more than `pages` are free (an
    /// index created without incremental auto-vacuum keeps them for reuse).
    func releaseFreePages(beyond pages: Int) throws {
        guard try connection.scalarInt64("PRAGMA freelist_count") ?? 0 > Int64(pages) else { return }
        try connection.execute("PRAGMA incremental_vacuum")
    }

    /// Creates the schema in a new database, upgrades an older one, or checks that an existing
    /// one is ours.
    private static func migrate(_ connection: SQLiteConnection) throws {
        let version = try connection.scalarInt64("PRAGMA user_version") ?? 0
        if version == schemaVersion { return }
        guard (0..<schemaVersion).contains(version) else {
            throw ForeignIndexError(reason: "schema version \(version) is not \(schemaVersion)")
        }
        try connection.transaction {
            // Another process may have created or upgraded the schema between the check above
            // and this write lock: that is our schema, not a foreign one (moving it aside would
            // split the two processes onto different files).
            var current = try connection.scalarInt64("PRAGMA user_version") ?? 0
            if current == schemaVersion { return }
            guard (0..<schemaVersion).contains(current) else {
                throw ForeignIndexError(reason: "schema version \(current) is not \(schemaVersion)")
            }
            if current == 0 {
                let objects = try connection.scalarInt64("SELECT count(*) FROM sqlite_schema") ?? 0
                guard objects == 0 else {
                    throw ForeignIndexError(reason: "the database holds \(objects) objects of another schema")
                }
                try connection.execute(schema1)
                current = 1
            }
            // The upgrades run fixed SQL against the schema they expect: one that fails as SQL
            // (a table, column or trigger not there) met a schema that is not ours.
            do {
                if current == 1 {
                    try connection.execute(upgrade1To2)
                    current = 2
                }
                if current == 2 {
                    try connection.execute(upgrade2To3)
                    current = 3
                }
                if current == 3 {
                    try connection.execute(upgrade3To4)
                    current = 4
                }
                if current == 4 {
                    try connection.execute(upgrade4To5)
                    current = 5
                }
                if current == 5 {
                    try connection.execute(DiskTagIndex.upgradeAddingTags)
                }
            } catch let error as StorageError where (error.sqliteResultCode ?? 0) & 0xFF == SQLITE_ERROR {
                throw ForeignIndexError(reason: "schema version \(current) could not be upgraded (\(error))")
            }
        }
    }

    /// One object of a schema as `sqlite_schema` holds it (its root page aside).
    struct SchemaObject: Equatable {
        var type: String
        var name: String
        var table: String
        var sql: String
    }

    /// Checks that the schema's tables, indexes and triggers are, text for text, the ones this
    /// version makes: every index is created as schema 1 and upgraded by the same statements,
    /// so all have one shape. A damaged byte in an object's SQL that SQLite still parses (a
    /// trigger naming `OLD.siz\u{FFFD}`) would otherwise fail every statement that touches the
    /// object, from the open on; this way the open finds it, and the index is moved aside as a
    /// foreign one. (Statistics tables that `ANALYZE` adds are not compared.)
    private static func verifySchema(_ connection: SQLiteConnection) throws {
        let expected = try referenceSchema.get()
        let found = try schemaObjects(connection)
        guard found != expected else { return }
        let differing = zip(found, expected).first { $0 != $1 }.map { "\($0.0.type) \($0.0.name)" }
            ?? "the number of objects (\(found.count), not \(expected.count))"
        throw ForeignIndexError(reason: "the schema differs from schema \(schemaVersion)'s at \(differing)")
    }

    /// The schema a new index gets, made once per process in an in-memory database.
    private static let referenceSchema = Result { () throws -> [SchemaObject] in
        let connection = try SQLiteConnection(path: ":memory:")
        defer { connection.close() }
        try migrate(connection)
        return try schemaObjects(connection)
    }

    private static func schemaObjects(_ connection: SQLiteConnection) throws -> [SchemaObject] {
        let sql = "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite_stat%' ORDER BY name"
        return try connection.statement(sql).withReset { statement in
            var objects: [SchemaObject] = []
            while try statement.step() {
                objects.append(SchemaObject(
                    type: statement.string(0), name: statement.string(1), table: statement.string(2), sql: statement.string(3)))
            }
            return objects
        }
    }

    // MARK: - Reads on the writer's connection

    func totals() throws -> (count: Int, size: Int, charge: Int) {
        try reads.totals()
    }

    /// Sets the totals row to the count and stored size of the rows (call inside a transaction).
    func recountTotals() throws {
        try connection.execute("""
            UPDATE totals SET count = (SELECT count(*) FROM entries),
                size = (SELECT coalesce(sum(size), 0) FROM entries),
                charge = (SELECT coalesce(sum(\(Self.charge("e"))), 0) FROM entries AS e) WHERE id = 0
            """)
        try recountQueueTotals()
    }

    func meta(_ name: String) throws -> Int64? {
        try selectMeta.withReset { statement in
            try statement.bind(name, at: 1)
            return try statement.step() ? statement.optionalInt64(0) : nil
        }
    }

    /// The highest recency number handed out (0 in an empty index).
    ///
    /// Inside a transaction, a number this connection handed out in this transaction, or in
    /// the last one it committed with no commit by any other connection since (the data
    /// version tells), is returned without a query: a write then reads nothing it already knows.
    func maxSequence() throws -> Int64 {
        if let known = try validKnownSequence() { return known.value }
        let version = connection.isInTransaction ? connection.dataVersion() : nil
        let mark = try selectSequence.withReset { statement in
            guard try statement.step() else {
                throw StorageError.sqlite(code: SQLITE_CORRUPT, message: "the totals row is missing", sql: statement.sql)
            }
            return statement.int64(0)
        }
        // Numbers up to the stored mark may have been handed out: continue above it.
        knownSequence = version.map { KnownSequence(value: mark, reserved: mark, epoch: connection.epoch, version: $0) }
        return mark
    }

    /// What this connection knows of `totals.seq` (see ``maxSequence()``): the highest number
    /// it handed out, the mark it stored (numbers up to it are reserved: another connection
    /// continues above it), and the connection's epoch and data version then.
    private struct KnownSequence {
        var value: Int64
        var reserved: Int64
        var epoch: UInt64
        var version: UInt32
    }
    private var knownSequence: KnownSequence?

    /// Numbers stored ahead in `totals.seq`, so that a run of this connection's writes with no
    /// other connection's between them stores the mark once per this many numbers, not in
    /// every write. Numbers only need to grow: the gaps another connection or a reopen leaves
    /// above the last number used change no order.
    static let sequenceReservation: Int64 = 1_024

    /// ``knownSequence`` if it still holds: inside a transaction, in the same epoch and data
    /// version, or one commit later (this connection's commit of the transaction that set it)
    /// with no commit by another connection since.
    private func validKnownSequence() throws -> KnownSequence? {
        guard let known = knownSequence, connection.isInTransaction, let version = connection.dataVersion() else {
            return nil
        }
        if known.epoch == connection.epoch && known.version == version { return known }
        if known.epoch &+ 1 == connection.epoch && connection.versionAfterCommit == version {
            let renewed = KnownSequence(value: known.value, reserved: known.reserved, epoch: connection.epoch, version: version)
            knownSequence = renewed
            return renewed
        }
        knownSequence = nil
        return nil
    }

    // MARK: - Writes (call inside a transaction)

    func setMeta(_ name: String, _ value: Int64) throws {
        try upsertMeta.withReset { statement in
            try statement.bind(name, at: 1)
            try statement.bind(value, at: 2)
            try statement.step()
        }
    }

    /// The blob file currently recorded for `key`, if any (`.some(nil)` for an inline row).
    func file(forKey key: String) throws -> String?? {
        try selectFile.withText(key, boundAt: 1) { statement in
            guard try statement.step() else { return nil }
            return .some(statement.optionalString(0))
        }
    }

    /// The row id and blob file of the row for `key`, if there is one: one lookup that tells a
    /// write both the file an overwrite makes obsolete and the row id it keeps.
    func existingRow(forKey key: String) throws -> (rowID: Int64, file: String?)? {
        try selectExisting.withText(key, boundAt: 1) { statement in
            guard try statement.step() else { return nil }
            return (statement.int64(0), statement.optionalString(1))
        }
    }

    /// Inserts or replaces the row for `row.key` and ranks it most recent with `sequence`.
    /// `existing` is the row ``existingRow(forKey:)`` found for the key in this transaction (an
    /// overwrite keeps its row id), `nil` when there is none.
    func write(_ row: Row, sequence: Int64, existing: Int64?) throws {
        let rowID = try writeRow(row, existing: existing)
        try upsertAccess.withReset { statement in
            try statement.bind(rowID, at: 1)
            try statement.bind(sequence, at: 2)
            try statement.bind(row.created, at: 3)
            try statement.step()
        }
    }

    /// Inserts or replaces the row for `row.key` (its access row untouched); returns its row id.
    /// `existing`, when the caller looked the key up in this transaction: the row id found
    /// (`.some(nil)`: no row, so the upsert inserts).
    @inline(__always)
    func writeRow(_ row: Row, existing: Int64?? = nil) throws -> Int64 {
        // No `RETURNING rowid`: SQLite collects returned rows in an ephemeral table, which cost
        // about 19k instructions per write. An insert sets the last insert row id (reset to 0
        // first: automatic row ids start at 1); an update of an existing row leaves it at 0, and
        // the row id is then the one the caller found, or looked up by key.
        sqlite3_set_last_insert_rowid(connection.handle, 0)
        try upsert.withReset { statement in
            try statement.bind(row.key, at: 1)
            try statement.bind(row.hash, at: 2)
            if let file = row.file { try statement.bind(file, at: 3) } else { try statement.bindNull(at: 3) }
            try statement.bind(Int64(row.size), at: 4)
            try statement.bind(Int64(row.originalSize), at: 5)
            try statement.bind(Int64(row.encoding.rawValue), at: 6)
            try statement.bind(Int64(row.crc), at: 7)
            try statement.bind(row.created, at: 8)
            try statement.bind(row.expires, at: 9)
            try statement.bind(row.inlineData, at: 10)
            try statement.bind(row.metadata, at: 11)
            try statement.bind(row.sliding, at: 12)
            try statement.step()
        }
        var rowID = sqlite3_last_insert_rowid(connection.handle)
        if rowID == 0, case let known?? = existing { rowID = known }
        if rowID == 0 {
            rowID = try selectRowID.withText(row.key, boundAt: 1) { statement in
                guard try statement.step() else {
                    throw StorageError.sqlite(code: SQLITE_CORRUPT, message: "the written row is missing", sql: statement.sql)
                }
                return statement.int64(0)
            }
        }
        return rowID
    }

    /// Sets the high-water mark of recency numbers (call inside a transaction).
    ///
    /// Stores `sequence` plus ``sequenceReservation`` as the mark, unless this connection
    /// stored a mark at or above `sequence` that still holds (``maxSequence()``).
    func setMaxSequence(_ sequence: Int64) throws {
        if var known = try validKnownSequence(), sequence <= known.reserved {
            known.value = max(known.value, sequence)
            knownSequence = known
            return
        }
        knownSequence = nil
        let (ahead, overflow) = sequence.addingReportingOverflow(Self.sequenceReservation)
        let reserved = overflow ? sequence : ahead
        try updateSequence.withReset { statement in
            try statement.bind(reserved, at: 1)
            try statement.step()
        }
        let version = connection.isInTransaction ? connection.dataVersion() : nil
        knownSequence = version.map {
            KnownSequence(value: sequence, reserved: reserved, epoch: connection.epoch, version: $0)
        }
    }

    /// Ranks recorded reads in their order, after everything already ranked, then reserves
    /// `reserving` more numbers; returns the last number used or reserved. An entry read several
    /// times is ranked once, at its last read.
    @discardableResult
    func recordAccesses(_ accesses: [Access], sequences reserved: [Int64] = [], reserving: Int64 = 0) throws -> Int64 {
        guard !accesses.isEmpty || reserving > 0 else { return try maxSequence() }
        var sequence = try maxSequence()
        let isLastRead = Self.lastReads(accesses)
        for (position, access) in accesses.enumerated() where isLastRead[position] {
            // A read a write reserved a number for takes it (below the write's); the others
            // take the next ones.
            let number: Int64
            if position < reserved.count {
                number = reserved[position]
            } else {
                sequence += 1
                number = sequence
            }
            try touchAccess.withReset { statement in
                try statement.bind(access.rowID, at: 1)
                try statement.bind(number, at: 2)
                try statement.bind(access.time, at: 3)
                try statement.step()
            }
        }
        sequence += reserving
        try setMaxSequence(sequence)
        return sequence
    }

    /// Writes renewed sliding lifetimes (call inside a transaction, with the reads' ranking).
    /// Only rows that still have a sliding lifetime change, and never to expire sooner.
    func extendLifetimes(_ extensions: [Extension]) throws {
        // The last renewal of each row or key is the latest: write only that one.
        var rows = Set<Int64>(), keys = Set<String>()
        for renewal in extensions.reversed() {
            switch renewal.target {
            case .row(let rowID):
                guard rows.insert(rowID).inserted else { continue }
                try connection.statement(Self.extendRowSQL).withReset { statement in
                    try statement.bind(rowID, at: 1)
                    try statement.bind(renewal.expires, at: 2)
                    try statement.step()
                }
            case .key(let key):
                guard keys.insert(key).inserted else { continue }
                try connection.statement(Self.extendKeySQL).withReset { statement in
                    try statement.bind(key, at: 1)
                    try statement.bind(renewal.expires, at: 2)
                    try statement.step()
                }
            }
        }
    }

    static let extendRowSQL =
        "UPDATE entries SET expires = ?2 WHERE rowid = ?1 AND sliding IS NOT NULL AND expires < ?2"
    static let extendKeySQL =
        "UPDATE entries SET expires = ?2 WHERE key = ?1 AND sliding IS NOT NULL AND expires < ?2"

    /// For each recorded read, whether it is the last read of its row in `accesses`.
    ///
    /// Walks the reads backwards through an open-addressing set of row ids (Fibonacci hashing;
    /// row ids are plain integers, so `Dictionary`'s seeded hashing would cost several times as
    /// much per read).
    static func lastReads(_ accesses: [Access]) -> [Bool] {
        var isLast = [Bool](repeating: false, count: accesses.count)
        var bits = 1
        while 1 << bits < accesses.count * 2 { bits += 1 }
        let mask = (1 << bits) - 1
        let empty = Int64.min // never an automatic row id (those start at 1)
        var slots = [Int64](repeating: empty, count: 1 << bits)
        for position in accesses.indices.reversed() {
            let rowID = accesses[position].rowID
            guard rowID != empty else {
                isLast[position] = true
                continue
            }
            var slot = Int(truncatingIfNeeded: (UInt64(bitPattern: rowID) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - bits))
            while true {
                if slots[slot] == empty {
                    slots[slot] = rowID
                    isLast[position] = true
                    break
                }
                if slots[slot] == rowID { break }
                slot = (slot + 1) & mask
            }
        }
        return isLast
    }

    /// Deletes the row for `key`; returns whether one existed and its blob file.
    func delete(key: String) throws -> (existed: Bool, file: String?) {
        try deleteKey.withReset { statement in
            try statement.bind(key, at: 1)
            guard try statement.step() else { return (false, nil) }
            let file = statement.optionalString(0)
            while try statement.step() {}
            return (true, file)
        }
    }

    /// Deletes the row only if it is still the one described by `location`; returns whether it
    /// did (a concurrent overwrite makes it a no-op).
    func deleteIfUnchanged(key: String, location: Location) throws -> Bool {
        try deleteIfUnchanged.withReset { statement in
            try statement.bind(key, at: 1)
            try statement.bind(location.created, at: 2)
            try statement.bind(Int64(location.crc), at: 3)
            try statement.bind(location.fileBytes, at: 4)
            guard try statement.step() else { return false }
            while try statement.step() {}
            return true
        }
    }

    /// Deletes up to `limit` expired rows; returns the count, their blob files and their keys.
    func deleteExpired(now: Int64, limit: Int) throws -> (count: Int, files: [String], keys: [String]) {
        try deleteExpiredBatch.withReset { statement in
            try statement.bind(now, at: 1)
            try statement.bind(Int64(limit), at: 2)
            var files: [String] = []
            var keys: [String] = []
            while try statement.step() {
                if let file = statement.optionalString(0) { files.append(file) }
                keys.append(statement.string(1))
            }
            return (keys.count, files, keys)
        }
    }

    /// Up to `limit` of the least recently used rows, oldest first, skipping `excludedKey`;
    /// rows without an access row come after the ranked ones run out. Call again after
    /// deleting the rows returned, until it returns none.
    func leastRecentlyUsed(limit: Int, excluding excludedKey: String?) throws -> [EvictionCandidate] {
        var rows: [EvictionCandidate] = []
        for pass in 0..<2 {
            if pass == 1 {
                guard rows.isEmpty else { break }
                try scanCandidates()
            }
            // Candidates found gone or changed at the front are dropped; valid ones stay until
            // found gone (deleting them is the caller's transaction, which may roll back).
            var position = candidateStart
            var atFront = true
            while rows.count < limit && position < candidates.count {
                let candidate = candidates[position]
                position += 1
                if let row = try candidateRow(candidate) {
                    atFront = false
                    if row.key != excludedKey { rows.append(row) }
                } else if atFront {
                    candidateStart = position
                }
            }
        }
        return rows.isEmpty ? try unranked(limit: limit, excluding: excludedKey) : rows
    }

    /// The candidate's entry, if its access row still holds the number it was found with.
    private func candidateRow(_ candidate: (rowID: Int64, sequence: Int64)) throws -> EvictionCandidate? {
        try selectCandidate.withReset { statement in
            try statement.bind(candidate.rowID, at: 1)
            guard try statement.step(), statement.int64(4) == candidate.sequence else { return nil }
            return Self.evictionCandidate(statement)
        }
    }

    private static func evictionCandidate(_ statement: SQLiteStatement) -> EvictionCandidate {
        EvictionCandidate(
            rowID: statement.int64(0), key: statement.string(1), file: statement.optionalString(2),
            size: Int(statement.int64(3)))
    }

    private func scanCandidates() throws {
        candidates = try selectLowestRanked.withReset { statement in
            try statement.bind(Int64(Self.candidateCount), at: 1)
            var found: [(rowID: Int64, sequence: Int64)] = []
            while try statement.step() { found.append((statement.int64(0), statement.int64(1))) }
            return found
        }
        candidateStart = 0
    }

    private func unranked(limit: Int, excluding excludedKey: String?) throws -> [EvictionCandidate] {
        try selectUnranked.withReset { statement in
            if let excludedKey { try statement.bind(excludedKey, at: 1) } else { try statement.bindNull(at: 1) }
            try statement.bind(Int64(limit), at: 2)
            var rows: [EvictionCandidate] = []
            while try statement.step() { rows.append(Self.evictionCandidate(statement)) }
            return rows
        }
    }

    /// Deletes the row with id `rowID` (an eviction candidate); returns whether it existed and
    /// its blob file.
    func delete(rowID: Int64) throws -> (existed: Bool, file: String?) {
        try deleteRowID.withReset { statement in
            try statement.bind(rowID, at: 1)
            guard try statement.step() else { return (false, nil) }
            let file = statement.optionalString(0)
            while try statement.step() {}
            return (true, file)
        }
    }

    /// Deletes every row; of the change rows that adds, only the last is kept, so that every
    /// ``ChangeWatch`` behind it finds the rows before it gone and drops every copy.
    func deleteAll() throws -> (count: Int, files: [String]) {
        let deleted = try deleteAllEntries.withReset { try Self.deletedRows($0) }
        try prune(keeping: 0)
        return deleted
    }

    /// Deletes the oldest change rows beyond ``retainedChanges``, once every
    /// ``pruneInterval`` write transactions (call inside one).
    func pruneChangesIfDue() throws {
        transactionsSincePrune += 1
        guard transactionsSincePrune >= Self.pruneInterval else { return }
        transactionsSincePrune = 0
        try prune(keeping: retainedChanges)
    }

    /// Deletes the change rows but the last `kept` + 1.
    private func prune(keeping kept: Int64) throws {
        try pruneChanges.withReset { statement in
            try statement.bind(kept, at: 1)
            while try statement.step() {}
        }
    }

    /// Steps a `DELETE … RETURNING file` to the end: the rows deleted and their blob files.
    private static func deletedRows(_ statement: SQLiteStatement) throws -> (count: Int, files: [String]) {
        var count = 0
        var files: [String] = []
        while try statement.step() {
            count += 1
            if let file = statement.optionalString(0) { files.append(file) }
        }
        return (count, files)
    }
}

extension DiskIndex.Location {
    /// The expiry a read at `now` renews a sliding lifetime to, or `nil` when the row has a
    /// fixed expiry (or an expiry already later).
    func renewedExpiry(at now: Int64) -> Int64? {
        guard let sliding, let expires else { return nil }
        let (renewed, overflow) = now.addingReportingOverflow(sliding)
        let end = overflow ? Int64.max : renewed
        return end > expires ? end : nil
    }

    /// Whether recording a read at `now` would change nothing that matters under S3-FIFO: the
    /// counter is saturated (``DiskIndex/maxReadCount``), and the last use recorded is at most
    /// `window` milliseconds old (or later than `now`). Such a read is counted as a hit and
    /// not logged, so that reads of hot entries write nothing at all; last-used times then
    /// lag real reads by less than `window`.
    func isSaturated(at now: Int64, window: Int64) -> Bool {
        counter?.isSaturated(at: now, window: window) ?? false
    }
}

@available(*, unavailable)
extension DiskIndex: Sendable {}

/// The index file is a valid SQLite database of some other schema.
struct ForeignIndexError: Error {
    var reason: String
}

extension Date {
    /// Milliseconds since 1970, the unit the index stores.
    var milliseconds: Int64 {
        let value = (timeIntervalSince1970 * 1_000).rounded(.down)
        return value >= Double(Int64.max) ? .max : value <= Double(Int64.min) ? .min : Int64(value)
    }

    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1_000)
    }
}

extension TimeInterval {
    /// This many seconds in whole milliseconds (rounded to the nearest), the index's unit.
    var milliseconds: Int64 {
        let value = (self * 1_000).rounded()
        return value >= Double(Int64.max) ? .max : value <= Double(Int64.min) ? .min : Int64(value)
    }
}
