import CLarderSQLiteVFS
import CSQLite
import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Larder's SQLite VFS (CLarderSQLiteVFS) gathers the frames a commit appends to the
/// write-ahead log into one write, and reads a database page with the page after it. These
/// tests hold it to what SQLite's own calls promised: every commit is in the log file before it
/// returns, so another connection sees it at once and a copy of the files taken then recovers
/// it; frames SQLite rewrites inside a transaction keep their order and checksums; a page read
/// ahead never reaches a read that could see the file changed.
@Suite
struct SQLiteVFSTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("sqlite-vfs")
    }

    /// A connection through Larder's VFS (as every `SQLiteConnection`) to a database in WAL
    /// mode with 2 KiB pages, as `DiskStore`'s index, and no automatic checkpoint: the log
    /// keeps every frame the tests count and copy until they copy it into the database.
    func open() throws -> SQLiteConnection {
        let connection = try SQLiteConnection(path: folder.url.appendingPathComponent("db.sqlite").path)
        try connection.execute("PRAGMA page_size = 2048")
        try connection.execute("PRAGMA journal_mode = WAL")
        try connection.execute("PRAGMA synchronous = NORMAL")
        try connection.execute("PRAGMA wal_autocheckpoint = 0")
        return connection
    }

    /// What Larder's VFS counted for `connection`'s log (`log`) or main database file.
    func counts(_ connection: SQLiteConnection, log: Bool = true) throws -> larder_sqlite_vfs_counts {
        var counts = larder_sqlite_vfs_counts()
        try #require(larder_sqlite_vfs_counts_of(connection.handle, log ? 1 : 0, &counts) == 1, "not opened through Larder's VFS")
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
        try connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0, v BLOB)")
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
        try writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0, v BLOB)")
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
        try connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0, v BLOB)")
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

/// The database file's side of Larder's VFS: a page is read together with the one after it,
/// which is served to the read that comes next if that read asks for exactly it, within the
/// same transaction (any lock, shared-memory call or other read forgets it).
extension SQLiteVFSTests {
    func databaseCounts(_ connection: SQLiteConnection) throws -> larder_sqlite_vfs_counts {
        try counts(connection, log: false)
    }

    static func randomValue(_ seed: Int, count: Int) -> Data {
        var generator = SplitMix64(seed: UInt64(seed))
        return Data((0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
    }

    func read(_ connection: SQLiteConnection, id: Int64) throws -> (Data?, Int64?) {
        let statement = try connection.statement("SELECT v, n FROM t WHERE id = ?")
        return try statement.withReset { statement in
            try statement.bind(id, at: 1)
            return try statement.step() ? (statement.data(0), statement.int64(1)) : (nil, nil)
        }
    }

    @Test
    func aValueOverTwoOverflowPagesIsReadWithOneReadOfTheFile() throws {
        // Given 40 values of 4,300 bytes (a 2 KiB leaf and two overflow pages each), all copied
        // into the database file
        let writer = try open()
        defer { writer.close() }
        try makeTable(writer, rows: 40, valueSize: 4_300)
        // When another connection reads each once
        let reader = try open()
        defer { reader.close() }
        _ = try read(reader, id: 0)
        let before = try databaseCounts(reader)
        for id in 1..<40 as Range<Int64> { #expect(try read(reader, id: id).0 == Self.randomValue(Int(id), count: 4_300)) }
        // Then the second overflow page of most came with the first
        let after = try databaseCounts(reader)
        #expect(after.readAheadHits - before.readAheadHits >= 30)
    }

    func makeTable(_ writer: SQLiteConnection, rows: Int, valueSize: Int) throws {
        try writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0, v BLOB)")
        try writer.transaction {
            for id in 0..<rows { try insert(writer, id: Int64(id), value: Self.randomValue(id, count: valueSize)) }
        }
        try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    func overwrite(_ writer: SQLiteConnection, id: Int64, with value: Data) throws {
        try writer.transaction {
            let statement = try writer.statement("UPDATE t SET v = ? WHERE id = ?")
            try statement.withReset { statement in
                try statement.bind(value, at: 1)
                try statement.bind(id, at: 2)
                _ = try statement.step()
            }
        }
    }

    func bump(_ writer: SQLiteConnection, id: Int64) throws {
        try writer.transaction {
            let statement = try writer.statement("UPDATE t SET n = n + 1 WHERE id = ?")
            try statement.withReset { statement in
                try statement.bind(id, at: 1)
                _ = try statement.step()
            }
        }
    }

    /// 2,090 bytes: 232 in the row's cell, the rest on one overflow page of its own (2 KiB
    /// pages), so six rows share one leaf, the table's root, and their overflow pages follow
    /// each other in the file.
    static let oneOverflowPage = 2_090

    @Test
    func aPageReadAheadIsNotServedInTheNextTransaction() throws {
        // Given six values on one overflow page each, pages 3 to 8, all in the database file,
        // and a reader that has just read row 2 (page 5, with page 6, row 3's, read ahead)
        let writer = try open()
        defer { writer.close() }
        try makeTable(writer, rows: 6, valueSize: Self.oneOverflowPage)
        let reader = try open()
        defer { reader.close() }
        #expect(try read(reader, id: 2).0 == Self.randomValue(2, count: Self.oneOverflowPage))
        // When the writer overwrites row 3 in place, the log is copied into the database file,
        // and a later commit (a seventh row) puts the file's header page and the table's root
        // in the log again
        let newValue = Self.randomValue(99, count: Self.oneOverflowPage)
        try overwrite(writer, id: 3, with: newValue)
        try writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        try writer.transaction { try insert(writer, id: 6, value: Self.randomValue(6, count: Self.oneOverflowPage)) }
        // Then the reader's next transaction, which reads those two pages from the log and
        // then page 6 from the file, before any other read of the file, gets the new bytes
        #expect(try read(reader, id: 3).0 == newValue)
    }

    @Test
    func aPageReadAheadIsNeverServedOnceTheFileMayHaveChanged() throws {
        // Given a writer and a reader taking turns on values of one overflow page each
        let writer = try open()
        defer { writer.close() }
        let rows = 12
        try makeTable(writer, rows: rows, valueSize: Self.oneOverflowPage)
        var model: [Int64: (value: Data, n: Int64)] = [:]
        for id in 0..<rows { model[Int64(id)] = (Self.randomValue(id, count: Self.oneOverflowPage), 0) }
        let reader = try open()
        defer { reader.close() }
        var generator = SplitMix64(seed: 7)
        var mismatches = 0
        // When 4,000 turns each read one value, then make one to three changes: an overwrite in
        // place, a change of the small column beside a value, a new row, a copy of the log into
        // the database file (so the file's pages change between the reader's transactions,
        // while the pages leading to them come from the log)
        for turn in 0..<4_000 {
            let id = Int64(generator.next() % UInt64(model.count))
            let (value, n) = try read(reader, id: id)
            if value != model[id]?.value || n != model[id]?.n { mismatches += 1 }
            for change in 0..<Int(1 + generator.next() % 3) {
                let target = Int64(generator.next() % UInt64(model.count))
                switch generator.next() % 5 {
                case 0:
                    let value = Self.randomValue(10_000 + turn * 3 + change, count: Self.oneOverflowPage)
                    try overwrite(writer, id: target, with: value)
                    model[target]?.value = value
                case 4 where model.count < 200:
                    // A new row: the file grows, so its header page changes too
                    let id = Int64(model.count)
                    let value = Self.randomValue(20_000 + turn * 3 + change, count: Self.oneOverflowPage)
                    try writer.transaction { try insert(writer, id: id, value: value) }
                    model[id] = (value, 0)
                case 1:
                    try bump(writer, id: target)
                    model[target]?.n += 1
                case 2:
                    try writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
                default:
                    try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                }
            }
        }
        // Then every read saw the last committed state, and reads were served ahead
        #expect(mismatches == 0)
        #expect(try databaseCounts(reader).readAheadHits > 100)
    }
}
