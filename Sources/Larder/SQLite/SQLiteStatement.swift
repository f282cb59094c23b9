import CSQLite
import Foundation

/// A prepared statement, finalized on deinit. Not thread-safe: it lives inside the
/// connection's lock.
final class SQLiteStatement {
    let handle: OpaquePointer
    let sql: String
    unowned let connection: SQLiteConnection

    init(connection: SQLiteConnection, sql: String) throws {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(
            connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw connection.error(code, sql: sql)
        }
        self.handle = statement
        self.sql = sql
        self.connection = connection
    }

    deinit {
        sqlite3_finalize(handle)
    }

    // MARK: - Binding (1-based indexes)

    func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    func bind(_ value: Int64?, at index: Int32) throws {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    func bind(_ value: String, at index: Int32) throws {
        var value = value
        try value.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                return try check(sqlite3_bind_text(handle, index, "", 0, csqlite_transient()))
            }
            try base.withMemoryRebound(to: CChar.self, capacity: utf8.count) { chars in
                try check(sqlite3_bind_text64(
                    handle, index, chars, sqlite3_uint64(utf8.count), csqlite_transient(), UInt8(SQLITE_UTF8)))
            }
        }
    }

    /// Binds `text` at `index` without copying it (`SQLITE_STATIC`), runs `body`, and resets the
    /// statement before the bytes go away: the hot lookups by key pay no copy and no allocation
    /// for their one parameter.
    func withText<T>(_ text: String, boundAt index: Int32, _ body: (SQLiteStatement) throws -> T) throws -> T {
        var text = text
        return try text.withUTF8 { utf8 in
            defer { reset() }
            let code = utf8.withMemoryRebound(to: CChar.self) { chars in
                // An empty buffer may have no address, and a NULL pointer would bind NULL, not "".
                guard let base = chars.baseAddress, chars.count > 0 else {
                    return sqlite3_bind_text(handle, index, "", 0, csqlite_transient())
                }
                return sqlite3_bind_text64(
                    handle, index, base, sqlite3_uint64(chars.count), csqlite_static(), UInt8(SQLITE_UTF8))
            }
            try check(code)
            return try body(self)
        }
    }

    func bind(_ value: Data?, at index: Int32) throws {
        guard let value else { return try bindNull(at: index) }
        try value.withUnsafeBytes { bytes in
            // A zero-length blob needs a non-NULL pointer, or SQLite stores NULL.
            var empty: UInt8 = 0
            let base = bytes.baseAddress ?? withUnsafePointer(to: &empty) { UnsafeRawPointer($0) }
            try check(sqlite3_bind_blob64(
                handle, index, base, sqlite3_uint64(bytes.count), csqlite_transient()))
        }
    }

    func bindNull(at index: Int32) throws {
        try check(sqlite3_bind_null(handle, index))
    }

    // MARK: - Stepping

    /// Steps once; returns `true` when a row is available.
    @discardableResult
    func step() throws -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error(code, sql: sql)
        }
    }

    /// Resets the statement and clears its bindings, ready for the next use.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Runs `body` with the statement, resetting it afterwards whatever happens.
    func withReset<T>(_ body: (SQLiteStatement) throws -> T) rethrows -> T {
        defer { reset() }
        return try body(self)
    }

    // MARK: - Columns (0-based indexes)

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    func optionalInt64(_ column: Int32) -> Int64? {
        isNull(column) ? nil : int64(column)
    }

    func string(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalString(_ column: Int32) -> String? {
        isNull(column) ? nil : string(column)
    }

    func data(_ column: Int32) -> Data? {
        if isNull(column) { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw connection.error(code, sql: sql) }
    }
}

@available(*, unavailable)
extension SQLiteStatement: Sendable {}
