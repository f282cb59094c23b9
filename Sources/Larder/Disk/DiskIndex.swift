import CSQLite
import Foundation

/// The SQLite side of the disk tier: schema, prepared statements and row operations.
///
/// Not thread-safe: a ``DiskStore`` keeps its one `DiskIndex` behind a lock. Every statement is
/// prepared once and reused; no SQL is ever built from keys or values.
final class DiskIndex {
    static let schemaVersion: Int64 = 1

    /// A row as the read path needs it.
    struct Location {
        /// The digest of the key the row was written for (checked against the key read).
        var hash: String
        var file: String?
        /// The `file` column's bytes exactly as stored (a damaged column may not be valid UTF-8,
        /// so `file` alone cannot identify the row again).
        var fileBytes: Data?
        var size: Int
        var originalSize: Int
        var encodingCode: Int64
        var crc: UInt32
        var created: Int64
        var expires: Int64?
        var inlineData: Data?
        var metadata: Data?
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
        var accessed: Int64
        var sequence: Int64
        var expires: Int64?
        var inlineData: Data?
        var metadata: Data?
    }

    let connection: SQLiteConnection

    private let selectLocation: SQLiteStatement
    private let selectAttributes: SQLiteStatement
    private let selectFile: SQLiteStatement
    private let upsert: SQLiteStatement
    private let deleteKey: SQLiteStatement
    private let deleteIfUnchanged: SQLiteStatement
    private let deleteExpiredBatch: SQLiteStatement
    private let selectLeastRecent: SQLiteStatement
    private let updateAccess: SQLiteStatement
    private let selectTotals: SQLiteStatement
    private let selectKeys: SQLiteStatement
    private let selectKeysInRange: SQLiteStatement
    private let selectMeta: SQLiteStatement
    private let upsertMeta: SQLiteStatement
    private let deleteAllEntries: SQLiteStatement
    private let selectAllFiles: SQLiteStatement

    /// Opens (creating when new) the index at `path`.
    ///
    /// - Throws: ``StorageError/sqlite(code:message:sql:)`` (check `isDatabaseCorruption`), or
    ///   ``ForeignIndexError`` when the file is a database of some other schema.
    init(path: String, durability: DiskStore.Durability, busyTimeout: Duration) throws {
        let connection = try SQLiteConnection(path: path, busyTimeout: busyTimeout)
        self.connection = connection
        // Switching a new database to WAL takes an exclusive lock without consulting the busy
        // handler, so two stores opening one new directory at once can get SQLITE_BUSY here:
        // retry until the busy timeout, as the handler would.
        try Self.retryingWhileBusy(for: busyTimeout) { try connection.execute("PRAGMA journal_mode = WAL") }
        try connection.execute(durability == .durable ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        try connection.execute("PRAGMA journal_size_limit = 4194304")
        try connection.execute("PRAGMA temp_store = MEMORY")
        // 16 MiB of page cache (SQLite's default is 2 MiB), so the index of a 100k-entry store
        // stays in memory instead of being read back page by page.
        try connection.execute("PRAGMA cache_size = -16384")
        try Self.migrate(connection)

        let columns = "key, hash, file, size, original_size, encoding, crc, created, accessed, seq, expires, data, metadata"
        selectLocation = try connection.statement(
            "SELECT file, size, original_size, encoding, crc, created, expires, data, hash, metadata FROM entries WHERE key = ?")
        selectAttributes = try connection.statement(
            "SELECT key, size, original_size, encoding, file IS NULL, created, accessed, expires, metadata FROM entries WHERE key = ?")
        selectFile = try connection.statement("SELECT file FROM entries WHERE key = ?")
        upsert = try connection.statement("""
            INSERT INTO entries (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (key) DO UPDATE SET hash = excluded.hash, file = excluded.file, size = excluded.size,
                original_size = excluded.original_size, encoding = excluded.encoding, crc = excluded.crc,
                created = excluded.created, accessed = excluded.accessed, seq = excluded.seq,
                expires = excluded.expires, data = excluded.data, metadata = excluded.metadata
            """)
        deleteKey = try connection.statement("DELETE FROM entries WHERE key = ? RETURNING file")
        deleteIfUnchanged = try connection.statement(
            "DELETE FROM entries WHERE key = ? AND created = ? AND crc = ? AND file IS CAST(? AS TEXT) RETURNING file")
        deleteExpiredBatch = try connection.statement("""
            DELETE FROM entries WHERE rowid IN
                (SELECT rowid FROM entries WHERE expires IS NOT NULL AND expires <= ? LIMIT ?)
            RETURNING file
            """)
        selectLeastRecent = try connection.statement(
            "SELECT key, file, size FROM entries WHERE key <> ? ORDER BY accessed, seq LIMIT ?")
        updateAccess = try connection.statement("UPDATE entries SET accessed = ?, seq = ? WHERE key = ?")
        selectTotals = try connection.statement("SELECT count, size FROM totals WHERE id = 0")
        selectKeys = try connection.statement(
            "SELECT key FROM entries WHERE expires IS NULL OR expires > ? ORDER BY key")
        selectKeysInRange = try connection.statement(
            "SELECT key FROM entries WHERE key >= ? AND key < ? AND (expires IS NULL OR expires > ?) ORDER BY key")
        selectMeta = try connection.statement("SELECT value FROM meta WHERE name = ?")
        upsertMeta = try connection.statement(
            "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        deleteAllEntries = try connection.statement("DELETE FROM entries RETURNING file")
        selectAllFiles = try connection.statement("SELECT file FROM entries WHERE file IS NOT NULL")
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

    /// Creates the schema in a new database, or checks that an existing one is ours.
    private static func migrate(_ connection: SQLiteConnection) throws {
        let version = try connection.scalarInt64("PRAGMA user_version") ?? 0
        if version == schemaVersion { return }
        guard version == 0 else { throw ForeignIndexError(reason: "schema version \(version) is not \(schemaVersion)") }
        try connection.transaction {
            // Another process may have created the schema between the check above and this
            // write lock: that is our schema, not a foreign one (moving it aside would split the
            // two processes onto different files).
            let current = try connection.scalarInt64("PRAGMA user_version") ?? 0
            if current == schemaVersion { return }
            guard current == 0 else { throw ForeignIndexError(reason: "schema version \(current) is not \(schemaVersion)") }
            let objects = try connection.scalarInt64("SELECT count(*) FROM sqlite_schema") ?? 0
            guard objects == 0 else {
                throw ForeignIndexError(reason: "the database holds \(objects) objects of another schema")
            }
            try connection.execute("""
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
                PRAGMA user_version = \(schemaVersion);
                """)
        }
    }

    // MARK: - Reads

    func location(forKey key: String) throws -> Location? {
        try selectLocation.withReset { statement in
            try statement.bind(key, at: 1)
            guard try statement.step() else { return nil }
            return Location(
                hash: statement.string(8),
                file: statement.optionalString(0),
                fileBytes: statement.data(0),
                size: Int(statement.int64(1)),
                originalSize: Int(statement.int64(2)),
                encodingCode: statement.int64(3),
                crc: UInt32(truncatingIfNeeded: statement.int64(4)),
                created: statement.int64(5),
                expires: statement.optionalInt64(6),
                inlineData: statement.data(7),
                metadata: statement.data(9))
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

    func totals() throws -> (count: Int, size: Int) {
        try selectTotals.withReset { statement in
            guard try statement.step() else {
                throw StorageError.sqlite(code: SQLITE_CORRUPT, message: "the totals row is missing", sql: statement.sql)
            }
            return (Int(statement.int64(0)), Int(statement.int64(1)))
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

    func allFiles() throws -> Set<String> {
        try selectAllFiles.withReset { statement in
            var files = Set<String>()
            while try statement.step() { files.insert(statement.string(0)) }
            return files
        }
    }

    func meta(_ name: String) throws -> Int64? {
        try selectMeta.withReset { statement in
            try statement.bind(name, at: 1)
            return try statement.step() ? statement.optionalInt64(0) : nil
        }
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
        try selectFile.withReset { statement in
            try statement.bind(key, at: 1)
            guard try statement.step() else { return nil }
            return .some(statement.optionalString(0))
        }
    }

    func write(_ row: Row) throws {
        try upsert.withReset { statement in
            try statement.bind(row.key, at: 1)
            try statement.bind(row.hash, at: 2)
            if let file = row.file { try statement.bind(file, at: 3) } else { try statement.bindNull(at: 3) }
            try statement.bind(Int64(row.size), at: 4)
            try statement.bind(Int64(row.originalSize), at: 5)
            try statement.bind(Int64(row.encoding.rawValue), at: 6)
            try statement.bind(Int64(row.crc), at: 7)
            try statement.bind(row.created, at: 8)
            try statement.bind(row.accessed, at: 9)
            try statement.bind(row.sequence, at: 10)
            try statement.bind(row.expires, at: 11)
            try statement.bind(row.inlineData, at: 12)
            try statement.bind(row.metadata, at: 13)
            try statement.step()
        }
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

    /// Deletes up to `limit` expired rows; returns the count and their blob files.
    func deleteExpired(now: Int64, limit: Int) throws -> (count: Int, files: [String]) {
        try deleteExpiredBatch.withReset { statement in
            try statement.bind(now, at: 1)
            try statement.bind(Int64(limit), at: 2)
            return try Self.deletedRows(statement)
        }
    }

    /// The least recently used rows, oldest first, skipping `excludedKey`.
    func leastRecentlyUsed(limit: Int, excluding excludedKey: String) throws -> [(key: String, file: String?, size: Int)] {
        try selectLeastRecent.withReset { statement in
            try statement.bind(excludedKey, at: 1)
            try statement.bind(Int64(limit), at: 2)
            var rows: [(key: String, file: String?, size: Int)] = []
            while try statement.step() {
                rows.append((statement.string(0), statement.optionalString(1), Int(statement.int64(2))))
            }
            return rows
        }
    }

    func touch(key: String, accessed: Int64, sequence: Int64) throws {
        try updateAccess.withReset { statement in
            try statement.bind(accessed, at: 1)
            try statement.bind(sequence, at: 2)
            try statement.bind(key, at: 3)
            try statement.step()
        }
    }

    func deleteAll() throws -> (count: Int, files: [String]) {
        try deleteAllEntries.withReset { try Self.deletedRows($0) }
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
