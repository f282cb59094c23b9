import CLarderSQLiteVFS
import CSQLite
import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Larder's SQLite VFS gathers the frames a commit appends to the write-ahead log into one
/// write (CLarderSQLiteVFS). These tests hold it to what SQLite's own writes promised: every
/// commit is in the log file before it returns, so another connection sees it at once and a
/// copy of the files taken then recovers it; frames SQLite rewrites inside a transaction keep
/// their order and checksums.
@Suite
struct SQLiteLogVFSTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("sqlite-vfs")
    }

    func open(_ name: String = "db.sqlite") throws -> SQLiteConnection {
        let connection = try SQLiteConnection(path: folder.url.appendingPathComponent(name).path)
        try connection.execute("PRAGMA journal_mode = WAL")
        try connection.execute("PRAGMA synchronous = NORMAL")
        // No automatic checkpoint: the log keeps every frame these tests count and copy.
        try connection.execute("PRAGMA wal_autocheckpoint = 0")
        return connection
    }

    func counts(_ connection: SQLiteConnection) throws -> larder_sqlite_vfs_counts {
        var counts = larder_sqlite_vfs_counts()
        try #require(larder_sqlite_vfs_log_counts(connection.handle, &counts) == 1, "the log is not Larder's")
        return counts
    }

    func insert(_ connection: SQLiteConnection, id: Int64, value: Data) throws {
        let statement = try connection.statement("INSERT OR REPLACE INTO t (id, v) VALUES (?, ?)")
        try statement.withReset { statement in
            try statement.bind(id, at: 1)
            try statement.bind(value, at: 2)
            _ = try statement.step()
        }
    }

    func value(_ connection: SQLiteConnection, id: Int64) throws -> Data? {
        let statement = try connection.statement("SELECT v FROM t WHERE id = ?")
        return try statement.withReset { statement in
            try statement.bind(id, at: 1)
            return try statement.step() ? statement.data(0) : nil
        }
    }

    static func value(_ id: Int64, count: Int) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: Int64($0) &* 31 &+ id &* 7) })
    }

    @Test
    func aCommitReachesTheLogInOneWrite() throws {
        // Given a database in WAL mode opened through Larder's VFS
        let connection = try open()
        defer { connection.close() }
        try connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
        let before = try counts(connection)
        // When 50 transactions each write a 4 KiB value (several pages each)
        for id in 0..<50 as Range<Int64> {
            try connection.transaction { try insert(connection, id: id, value: Self.value(id, count: 4_096)) }
        }
        // Then SQLite asked for at least two writes per frame, and each commit reached the
        // file in one
        let after = try counts(connection)
        #expect(after.writes - before.writes == 50)
        #expect(after.calls - before.calls >= 50 * 4)
        #expect(after.directWrites == before.directWrites)
    }

    @Test
    func anotherConnectionSeesEveryCommitAsSoonAsItReturns() throws {
        // Given a writer and a reader on one database, both through Larder's VFS
        let writer = try open()
        defer { writer.close() }
        try writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
        let reader = try open()
        defer { reader.close() }
        // When the writer commits values of every size from 1 byte to 1 MiB (a commit larger
        // than what the VFS gathers goes to the file in several writes), the reader reading
        // each right after its commit
        let sizes = [1, 100, 2_000, 4_096, 30_000, 200_000, 300_000, 1 << 20]
        for (offset, size) in sizes.enumerated() {
            let id = Int64(offset)
            try writer.transaction { try insert(writer, id: id, value: Self.value(id, count: size)) }
            // Then the reader sees it, whole
            #expect(try value(reader, id: id) == Self.value(id, count: size), "\(size) bytes")
        }
        #expect(try reader.scalarInt64("SELECT count(*) FROM t") == Int64(sizes.count))
    }

    @Test
    func framesRewrittenInATransactionKeepTheirChecksumsThroughRecovery() throws {
        // Given a connection whose page cache holds 10 pages, so that a large transaction
        // spills pages into the log and SQLite writes some of them again before the commit
        // (it then rewrites those frames and their checksums in place)
        let connection = try open()
        defer { connection.close() }
        try connection.execute("PRAGMA cache_size = 10")
        try connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
        let before = try counts(connection)
        var expected: [Int64: Data] = [:]
        for round in 0..<3 as Range<Int64> {
            try connection.transaction {
                for id in 0..<200 as Range<Int64> {
                    let value = Self.value(id &+ round * 1_000, count: 300 + Int(id % 7) * 100)
                    try insert(connection, id: id, value: value)
                    expected[id] = value
                }
                // The first rows again: their pages are in the log already
                for id in 0..<40 as Range<Int64> {
                    let value = Self.value(id &+ round * 5_000, count: 500)
                    try insert(connection, id: id, value: value)
                    expected[id] = value
                }
            }
        }
        let after = try counts(connection)
        #expect(after.directWrites > before.directWrites, "no frame was rewritten: the test spilled nothing")

        // When the database and its log are copied as a crash would leave them (no
        // checkpoint, no wal-index) and opened: SQLite recovers the log, checking every
        // frame's checksum, and keeps only commits whose frames all check
        let copy = try TemporaryDirectory("sqlite-vfs-copy")
        let source = folder.url.appendingPathComponent("db.sqlite").path
        try FileManager.default.copyItem(atPath: source, toPath: copy.url.appendingPathComponent("db.sqlite").path)
        try FileManager.default.copyItem(atPath: source + "-wal", toPath: copy.url.appendingPathComponent("db.sqlite-wal").path)
        let recovered = try SQLiteConnection(path: copy.url.appendingPathComponent("db.sqlite").path)
        defer { recovered.close() }

        // Then every commit is there, and the database is sound
        #expect(try recovered.scalarInt64("SELECT count(*) FROM t") == 200)
        var rows: [Int64: Data] = [:]
        for id in expected.keys { rows[id] = try self.value(recovered, id: id) }
        #expect(rows == expected)
        let check = try recovered.statement("PRAGMA integrity_check")
        #expect(try check.withReset { try $0.step() ? $0.string(0) : nil } == "ok")
    }
}
