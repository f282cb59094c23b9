import CLarderSQLiteVFS
import CSQLite
import Foundation

/// One SQLite connection with a cache of prepared statements.
///
/// Opened with `SQLITE_OPEN_NOMUTEX`: the owner serializes every use behind its own lock, so
/// SQLite's per-connection mutex would only add cost (GRDB's reasoning for its serialized
/// databases).
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: SQLiteStatement] = [:]
    /// The log hook's state (see ``installLogMonitor(_:)``), kept alive with the connection.
    var logMonitor: SQLiteLogMonitor?

    init(path: String, busyTimeout: Duration = .seconds(10)) throws {
        _ = Self.processSetup
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        // Larder's VFS (each commit's log frames in one write, a page read with the next; see
        // CLarderSQLiteVFS.h), or SQLite's default when it could not be registered.
        let code = sqlite3_open_v2(path, &handle, flags, larder_sqlite_vfs_name())
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            let extended = handle.map { sqlite3_extended_errcode($0) } ?? code
            sqlite3_close_v2(handle)
            throw StorageError.sqlite(code: extended, message: "\(message) (opening \(path))", sql: nil)
        }
        self.handle = handle
        self.path = path
        sqlite3_extended_result_codes(handle, 1)
        let milliseconds = busyTimeout.components.seconds * 1_000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
        sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
        try setWriterID(0)
    }

    /// Sets what `larder_writer()` returns on this connection: the writer id the index's
    /// triggers record in the change rows its writes add (see `ChangeWatch`). Every connection
    /// has the function (0 until a store sets its own), so that any of them can write entries.
    func setWriterID(_ writer: Int64) throws {
        let code = sqlite3_create_function_v2(
            handle, "larder_writer", 0, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
            UnsafeMutableRawPointer(bitPattern: Int(truncatingIfNeeded: writer)),
            { context, _, _ in sqlite3_result_int64(context, Int64(Int(bitPattern: sqlite3_user_data(context)))) },
            nil, nil, nil)
        guard code == SQLITE_OK else {
            throw StorageError.sqlite(code: code, message: "larder_writer() could not be registered", sql: nil)
        }
    }

    deinit {
        close()
    }

    /// Process-wide SQLite settings, applied once before the first connection opens: memory
    /// statistics off, so that every allocation SQLite makes (several per statement) does not
    /// take one process-wide mutex, which threads reading on different connections would
    /// otherwise meet on. `sqlite3_memory_used()` then reports 0. When SQLite was initialized
    /// already (another library in the process opened a database first), nothing changes.
    private static let processSetup: Void = {
        _ = csqlite_disable_memory_statistics()
    }()
    /// Whether a connection in another process has this (WAL-mode) database open, as SQLite
    /// sees it (`SQLITE_FCNTL_EXTERNAL_READER`: a test of the lock every connection holds on
    /// the shared-memory file; one `fcntl` query). Call while the connection has the
    /// shared memory open (inside a transaction); `true` when SQLite cannot tell.
    func hasExternalConnection() -> Bool {
        var external: Int32 = 0
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_EXTERNAL_READER, &external) == SQLITE_OK else {
            return true
        }
        return external != 0
    }

    /// Finalizes the cached statements, then closes the connection. Idempotent.
    func close() {
        logMonitor?.retire()
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// A cached prepared statement for `sql`, prepared on first use.
    func statement(_ sql: String) throws -> SQLiteStatement {
        if let cached = statements[sql] { return cached }
        let statement = try SQLiteStatement(connection: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Runs SQL that takes no parameters (schema, pragmas, transactions).
    func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(message)
            throw StorageError.sqlite(code: sqlite3_extended_errcode(handle), message: text, sql: sql)
        }
    }

    /// The first column of the first row of a parameterless query.
    func scalarInt64(_ sql: String) throws -> Int64? {
        let statement = try statement(sql)
        return try statement.withReset { try $0.step() ? $0.optionalInt64(0) : nil }
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, rolling back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try statement("BEGIN IMMEDIATE").withReset { _ = try $0.step() }
        do {
            let result = try body()
            try statement("COMMIT").withReset { _ = try $0.step() }
            epoch &+= 1
            versionAfterCommit = dataVersion()
            return result
        } catch {
            epoch &+= 1
            versionAfterCommit = nil
            if sqlite3_get_autocommit(handle) == 0 {
                try? execute("ROLLBACK")
            }
            throw error
        }
    }

    // MARK: - What this connection last saw

    /// Moves at the end of every ``transaction(_:)`` (commit or rollback) and at a reset: a
    /// value cached from inside one transaction is known to hold in a later one only when the
    /// epoch moved by exactly that transaction's commit (see ``versionAfterCommit``).
    private(set) var epoch: UInt64 = 0

    /// The main database's data version right after the last ``transaction(_:)`` committed,
    /// `nil` when the epoch last moved for any other reason.
    private(set) var versionAfterCommit: UInt32?

    /// SQLite's data version of the main database (`SQLITE_FCNTL_DATA_VERSION`): it changes
    /// with every commit, this connection's or any other's (in any process) that this
    /// connection has seen; a transaction sees every commit before it. A plain read of a
    /// counter in the pager, far cheaper than `PRAGMA data_version` or any query.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/c_fcntl_begin_atomic_write.html#sqlitefcntldataversion>
    func dataVersion() -> UInt32? {
        var version: UInt32 = 0
        return sqlite3_file_control(handle, "main", SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK ? version : nil
    }

    /// Whether a transaction is open on this connection.
    var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Empties the database file in place — schema and content — even when it is corrupt,
    /// under SQLite's locks, so other connections to the same file see an empty database rather
    /// than a file renamed under them.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/c_dbconfig_defensive.html#sqlitedbconfigresetdatabase>
    func resetDatabase() throws {
        statements.removeAll()
        epoch &+= 1
        versionAfterCommit = nil
        guard csqlite_set_reset_database(handle, 1) == SQLITE_OK else { throw error(SQLITE_ERROR, sql: nil) }
        defer { _ = csqlite_set_reset_database(handle, 0) }
        try execute("VACUUM")
    }

    var changes: Int { Int(sqlite3_changes64(handle)) }

    func error(_ code: Int32, sql: String?) -> StorageError {
        let extended = sqlite3_extended_errcode(handle)
        let message = String(cString: sqlite3_errmsg(handle))
        return .sqlite(code: extended != 0 ? extended : code, message: message, sql: sql)
    }
}

@available(*, unavailable)
extension SQLiteConnection: Sendable {}

extension StorageError {
    /// Whether this error says the database file is damaged or not a database at all.
    var isDatabaseCorruption: Bool {
        guard code == .sqlite, let resultCode = sqliteResultCode else { return false }
        let primary = resultCode & 0xFF
        return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB
    }
}
