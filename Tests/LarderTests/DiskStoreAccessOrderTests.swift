import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Least-recently-used order on disk: the order of reads and writes decides it, never their
/// millisecond (the injected clock here never moves unless a test says so), across the batch
/// flushes of the read log, across stores sharing a directory and across reopening; and a read
/// writes nothing to the entry's row.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreAccessOrderTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("disk-access-order")
    }

    func makeStore(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configuration.overflowTrimRatio = 0
        configure(&configuration)
        return try DiskStore(directory: folder.url, configuration: configuration)
    }

    /// The integer columns of a query's rows, read through a second connection.
    func query(_ sql: String, columns: Int32 = 1) throws -> [[Int64]] {
        let connection = try SQLiteConnection(path: folder.url.appendingPathComponent("index.sqlite").path)
        defer { connection.close() }
        return try connection.statement(sql).withReset { statement in
            var rows: [[Int64]] = []
            while try statement.step() { rows.append((0..<columns).map { statement.int64($0) }) }
            return rows
        }
    }

    // MARK: - Reads within one millisecond

    @Test func readsInOneMillisecondKeepTheirOrderEveryTime() throws {
        // The case Nuke's and PINCache's tests port: wrong in 6 of 8 rounds when order came
        // from the millisecond. Here every round must keep exactly key3 and key4.
        for round in 0..<8 {
            // Given five keys written and read back at one frozen instant
            let store = try makeStore { $0.inlineThreshold = round % 2 == 0 ? 16_384 : 0 }
            try store.removeAll()
            for index in 1...5 { try store.setValue(Data("v\(index)".utf8), forKey: "key\(index)") }
            for index in [5, 1, 2] { _ = try store.value(forKey: "key\(index)") }
            // When key3 and then key4 are read last
            _ = try store.value(forKey: "key3")
            _ = try store.value(forKey: "key4")
            // Then trimming to two keeps exactly key3 and key4
            try store.trim(toCount: 2)
            #expect(try store.keys() == ["key3", "key4"], "round \(round)")
            store.close()
        }
    }

    @Test func manyReadsAcrossSeveralFlushesRankInReadOrder() throws {
        // Given 200 keys written at one instant
        let store = try makeStore()
        let keys = (0..<200).map { "k\($0)" }
        for key in keys { try store.setValue(Data(key.utf8), forKey: key) }
        // When 1,500 reads in a shuffled order (three flushes of the read log) end with 20 keys
        var generator = SplitMix64(seed: 42)
        var order: [String] = []
        for _ in 0..<1_500 { order.append(keys[Int(generator.next() % 200)]) }
        for key in order { #expect(try store.value(forKey: key) == Data(key.utf8)) }
        var lastSeen: [String] = []
        for key in order.reversed() where !lastSeen.contains(key) {
            lastSeen.append(key)
            if lastSeen.count == 20 { break }
        }
        // Then trimming to 20 keeps exactly the 20 most recently read
        try store.trim(toCount: 20)
        #expect(try Set(store.keys()) == Set(lastSeen))
    }

    @Test(arguments: [false, true])
    func aDueBatchOfReadsIsRankedInReadOrderWithNoWrite(inBackground: Bool) async throws {
        // Given more keys than one batch of reads, written at one frozen instant
        let store = try makeStore { $0.ranksReadsInBackground = inBackground }
        let keys = (0..<(AccessLog.flushCount + 88)).map { "k\($0)" }
        for key in keys { try store.setValue(Data(key.utf8), forKey: key) }
        let lastWritten = try query("SELECT max(seq) FROM access")[0][0]
        // When exactly one batch of reads is logged, newest key first
        let readOrder = Array(keys.indices.reversed().prefix(AccessLog.flushCount))
        for index in readOrder { #expect(try store.value(forKey: keys[index]) == Data(keys[index].utf8)) }
        // Then the batch reaches the index with no write, trim or close: before the last read
        // returns when ranked on the reading thread, soon after on Larder's I/O queue
        let rankedSQL = "SELECT CAST(substr(e.key, 2) AS INTEGER) FROM access a JOIN entries e ON e.rowid = a.entry "
            + "WHERE a.seq > \(lastWritten) ORDER BY a.seq"
        // (No deadline of our own: the ranking waits in Larder's I/O queue, which a loaded full
        // run can keep busy for a minute and more; the suite's time limit bounds the wait.)
        var ranked = try query(rankedSQL).map { Int($0[0]) }
        while inBackground, ranked.count < readOrder.count {
            try await Task.sleep(for: .milliseconds(5))
            ranked = try query(rankedSQL).map { Int($0[0]) }
        }
        // And in the order of the reads
        #expect(ranked == readOrder)
        // And a trim afterwards keeps the two read last
        try store.trim(toCount: 2)
        #expect(try store.keys() == [keys[readOrder[readOrder.count - 1]], keys[readOrder[readOrder.count - 2]]].sorted())
    }

    @Test func rereadsOfAFewRowsWaitUntilFourBatchesOfReadsThenRankInTheirLastOrder() throws {
        // Given three keys, written at one frozen instant (so only counts make the log due)
        let store = try makeStore { $0.ranksReadsInBackground = false }
        let keys = ["a", "b", "c"]
        for key in keys { try store.setValue(Data(key.utf8), forKey: key) }
        let lastWritten = try query("SELECT max(seq) FROM access")[0][0]
        let rankedSQL = "SELECT e.key FROM access a JOIN entries e ON e.rowid = a.entry WHERE a.seq > \(lastWritten) ORDER BY a.seq"
        func ranked() throws -> [String] {
            let connection = try SQLiteConnection(path: folder.url.appendingPathComponent("index.sqlite").path)
            defer { connection.close() }
            return try connection.statement(rankedSQL).withReset { statement in
                var keys: [String] = []
                while try statement.step() { keys.append(statement.string(0)) }
                return keys
            }
        }
        // When all but three of four batches' worth of reads are logged (far more than one
        // batch's worth of reads, of three rows)
        for index in 0..<(AccessLog.flushReads - 3) { _ = try store.value(forKey: keys[index % 3]) }
        // Then nothing is ranked yet: three rows are far from a batch of distinct rows
        #expect(try ranked() == [])
        // When the last three reads are c, a, b
        for key in ["c", "a", "b"] { _ = try store.value(forKey: key) }
        // Then they were ranked on this thread, each row once, at its last read
        #expect(try ranked() == ["c", "a", "b"])
        #expect(try query("SELECT count(*) FROM access WHERE seq > \(lastWritten)")[0][0] == 3)
        // And a trim keeps the two read last
        try store.trim(toCount: 2)
        #expect(try store.keys() == ["a", "b"])
    }

    @Test func pendingRowsCountDistinctRowsAndNeverForgetOne() {
        var rows = PendingRows()
        #expect(!rows.mayContain(7))
        for _ in 0..<3 { for rowID in Int64(1)...1_000 { rows.insert(rowID * 7) } }
        #expect(rows.count == 1_000)
        #expect(!rows.isFull)
        #expect((Int64(1)...1_000).allSatisfy { rows.mayContain($0 * 7) })
        #expect((Int64(1)...1_000).filter { rows.mayContain($0 * 7 + 1) }.isEmpty)
        // Full at a batch of distinct rows: then every row may be pending
        for rowID in Int64(1_001)...Int64(AccessLog.flushCount) { rows.insert(rowID * 7) }
        #expect(rows.count == AccessLog.flushCount)
        #expect(rows.isFull)
        #expect(rows.mayContain(3))
        rows.insert(Int64(AccessLog.flushCount + 1) * 7)
        #expect(rows.count == AccessLog.flushCount)
        // Emptied, it counts afresh
        rows.removeAll()
        #expect(rows.count == 0)
        #expect(!rows.mayContain(7))
        rows.insert(.min)
        #expect(rows.isFull)
    }

    @Test func writesAndReadsInterleaveInTheirOrder() throws {
        // Given a, b, c written, a read, then d written: b is the least recent and goes
        let store = try makeStore { $0.countLimit = 3 }
        for key in ["a", "b", "c"] { try store.setValue(Data(key.utf8), forKey: key) }
        _ = try store.value(forKey: "a")
        try store.setValue(Data("d".utf8), forKey: "d")
        #expect(try store.keys() == ["a", "c", "d"])
        // When c is read and e written
        _ = try store.value(forKey: "c")
        try store.setValue(Data("e".utf8), forKey: "e")
        // Then a goes (read before d was written); c (read after) and d stay
        #expect(try store.keys() == ["c", "d", "e"])
    }

    @Test func anOverwriteRanksTheEntryMostRecentUnderItsOldRowID() throws {
        // Given a, b, c written (inline and file rows), then a overwritten in both forms
        for threshold in [16_384, 0] {
            let store = try makeStore { $0.inlineThreshold = threshold }
            try store.removeAll()
            for key in ["a", "b", "c"] { try store.setValue(Data(key.utf8), forKey: key) }
            let rowID = try query("SELECT rowid FROM entries WHERE key = 'a'")
            try store.setValue(Data("a2".utf8), forKey: "a")
            // Then the overwrite kept the row, its access row holds the highest number, and a
            // trim to two keeps a (most recent) and c
            #expect(try query("SELECT rowid FROM entries WHERE key = 'a'") == rowID)
            #expect(try query("SELECT entry FROM access ORDER BY seq DESC LIMIT 1") == rowID)
            #expect(try query("SELECT count(*) FROM access") == [[3]])
            try store.trim(toCount: 2)
            #expect(try store.keys() == ["a", "c"], "threshold \(threshold)")
            #expect(try store.value(forKey: "a") == Data("a2".utf8))
            store.close()
        }
    }

    @Test func eachRowIsRankedAtItsLastReadInABatch() {
        // Given reads of rows 5, 7, 5, 9, 7 (and a batch of 3,000 reads over 40 rows)
        let accesses = [5, 7, 5, 9, 7].map { DiskIndex.Access(rowID: $0, time: 0) }
        // Then only the last read of each row counts, in read order
        #expect(DiskIndex.lastReads(accesses) == [false, false, true, true, true])
        #expect(DiskIndex.lastReads([]) == [])
        var generator = SystemRandomNumberGenerator()
        let many = (0..<3_000).map { _ in DiskIndex.Access(rowID: Int64.random(in: 1...40, using: &generator), time: 0) }
        let expected = many.indices.map { position in !many[(position + 1)...].contains { $0.rowID == many[position].rowID } }
        #expect(DiskIndex.lastReads(many) == expected)
        #expect(DiskIndex.lastReads(many).filter { $0 }.count == Set(many.map(\.rowID)).count)
    }

    // MARK: - Eviction candidates

    @Test func candidatesReadAgainAreSkippedByLaterEvictions() throws {
        // Given a full store of 300 whose first eviction scanned the 256 least recent entries
        let first = try makeStore { $0.countLimit = 300 }
        let second = try makeStore { $0.countLimit = 300 }
        for index in 0..<300 { try first.setValue(Data([1]), forKey: "k\(index)") }
        try first.setValue(Data([1]), forKey: "n0")
        #expect(try !first.containsValue(forKey: "k0"))
        // When k1 and k2 are read and n1 written (evicting k3, the least recent now)
        _ = try first.value(forKey: "k1")
        _ = try first.value(forKey: "k2")
        try first.setValue(Data([1]), forKey: "n1")
        // And another store on the directory reads k4 and writes n2 (evicting k5)
        _ = try second.value(forKey: "k4")
        try second.setValue(Data([1]), forKey: "n2")
        // And the first store, whose candidates still list k4, writes n3 and n4
        for index in 3...4 { try first.setValue(Data([1]), forKey: "n\(index)") }
        // Then the entries read again stayed, and the next least recent ones went, in order
        for key in ["k1", "k2", "k4", "k8", "n0", "n1", "n2", "n3", "n4"] {
            #expect(try first.containsValue(forKey: key), "\(key)")
        }
        for key in ["k0", "k3", "k5", "k6", "k7"] { #expect(try !first.containsValue(forKey: key), "\(key)") }
        #expect(first.totalCount == 300)
    }

    @Test func trimEvictsAnEntryWithTheEmptyKey() throws {
        // Given entries including one whose key is empty, the least recent of all
        let store = try makeStore()
        try store.setValue(Data([1]), forKey: "")
        for key in ["a", "b"] { try store.setValue(Data([2]), forKey: key) }
        // When trimmed to two, then to none
        try store.trim(toCount: 2)
        #expect(try store.keys() == ["a", "b"])
        try store.setValue(Data([1]), forKey: "")
        try store.trim(toCount: 0)
        // Then the empty key goes like any other
        #expect(try store.keys().isEmpty)
    }

    // MARK: - Writes after reads

    @Test func aWriteOfAStoreAloneLeavesTheReadsBeforeItUnrankedYetAfterThem() throws {
        // Given a store alone on its directory, reads ranked only when told (no background)
        let store = try makeStore { $0.ranksReadsInBackground = false }
        for key in ["a", "b", "c", "d"] { try store.setValue(Data(key.utf8), forKey: key) }
        let written = try query("SELECT seq FROM access ORDER BY entry")
        // When a and b are read, then e is written
        _ = try store.value(forKey: "a")
        _ = try store.value(forKey: "b")
        try store.setValue(Data("e".utf8), forKey: "e")
        // Then the write ranked nothing: the four rows keep their numbers, and e's is the
        // highest
        let after = try query("SELECT seq FROM access ORDER BY entry")
        #expect(Array(after.prefix(4)) == written)
        #expect(after[4][0] > written.map { $0[0] }.max()!)
        // And the order is c, d, a, b, e all the same: trimming to three keeps a, b and e
        try store.trim(toCount: 3)
        #expect(try store.keys() == ["a", "b", "e"])
        try store.trim(toCount: 1)
        #expect(try store.keys() == ["e"])
    }

    @Test func anEvictingWriteRanksTheReadsBeforeItFirst() throws {
        // Given a store of four entries at its count limit
        let store = try makeStore {
            $0.countLimit = 4
            $0.ranksReadsInBackground = false
        }
        for key in ["a", "b", "c", "d"] { try store.setValue(Data(key.utf8), forKey: key) }
        // When a and b are read and e written (the write evicts one entry), then f (another)
        _ = try store.value(forKey: "a")
        _ = try store.value(forKey: "b")
        try store.setValue(Data("e".utf8), forKey: "e")
        try store.setValue(Data("f".utf8), forKey: "f")
        // Then the least recently used went: c, then d
        #expect(try store.keys() == ["a", "b", "e", "f"])
    }

    @Test func aRowNumberReusedAfterARemovalIsNotRankedByTheOldRead() throws {
        // Given x, then k (the highest row id), both written
        let store = try makeStore { $0.ranksReadsInBackground = false }
        try store.setValue(Data("x".utf8), forKey: "x")
        try store.setValue(Data("k".utf8), forKey: "k")
        // When k is read, removed, x read, and n written (SQLite gives it k's row id again)
        _ = try store.value(forKey: "k")
        #expect(try store.removeValue(forKey: "k"))
        _ = try store.value(forKey: "x")
        try store.setValue(Data("n".utf8), forKey: "n")
        #expect(try query("SELECT entry FROM access ORDER BY entry") == [[1], [2]], "n took k's row id")
        // Then k's old read, ranked now with a number below n's write, leaves n alone: n stays
        // the most recent, so trimming to one keeps it
        try store.trim(toCount: 1)
        #expect(try store.keys() == ["n"])
    }

    @Test func aWriteRanksTheReadsBeforeItWhileAnotherStoreHasTheDirectoryOpen() throws {
        // Given two stores on one directory
        let first = try makeStore { $0.ranksReadsInBackground = false }
        for key in ["a", "b", "c"] { try first.setValue(Data(key.utf8), forKey: key) }
        let second = try makeStore()
        // When the first reads a and writes d
        _ = try first.value(forKey: "a")
        try first.setValue(Data("d".utf8), forKey: "d")
        // Then the read is in the index already: the second store's trim sees it
        try second.trim(toCount: 2)
        #expect(try second.keys() == ["a", "d"])
        // And once the second is closed, the first is alone again: its writes rank nothing
        second.close()
        let before = try query("SELECT seq FROM access ORDER BY entry")
        _ = try first.value(forKey: "a")
        try first.setValue(Data("e".utf8), forKey: "e")
        #expect(Array(try query("SELECT seq FROM access ORDER BY entry").prefix(2)) == before)
    }

    // MARK: - Across stores and reopening

    @Test func orderIsMonotonicAcrossTwoStoresOnOneDirectory() throws {
        // Given two stores (as two processes) on one directory, each with its own read log
        let first = try makeStore()
        let second = try makeStore()
        for key in ["a", "b", "c", "d"] { try first.setValue(Data(key.utf8), forKey: key) }
        // When the first reads a and writes x (ranking its read), then the second reads b and
        // writes y, then the first reads c and writes z
        _ = try first.value(forKey: "a")
        try first.setValue(Data("x".utf8), forKey: "x")
        _ = try second.value(forKey: "b")
        try second.setValue(Data("y".utf8), forKey: "y")
        _ = try first.value(forKey: "c")
        try first.setValue(Data("z".utf8), forKey: "z")
        // Then the global order is d, a, x, b, y, c, z: trimming keeps the newest of it
        try second.trim(toCount: 5)
        #expect(try first.keys() == ["b", "c", "x", "y", "z"])
        try first.trim(toCount: 2)
        #expect(try second.keys() == ["c", "z"])
    }

    @Test func orderSurvivesReopenWithReadsInOneMillisecond() throws {
        do {
            let store = try makeStore()
            for key in ["a", "b", "c", "d"] { try store.setValue(Data(key.utf8), forKey: key) }
            _ = try store.value(forKey: "b")
            _ = try store.value(forKey: "a") // logged, ranked on close
            store.close()
        }
        // When the store reopens, reads c and writes e
        let store = try makeStore()
        _ = try store.value(forKey: "c")
        try store.setValue(Data("e".utf8), forKey: "e")
        // Then the order continues: d, b, a, c, e
        try store.trim(toCount: 3)
        #expect(try store.keys() == ["a", "c", "e"])
    }

    // MARK: - The read pool

    @Test func readsOnManyThreadsShareThePoolAndCloseEndsThemAll() async throws {
        // Given values read from eight tasks at once (more than the idle pool keeps)
        let store = try makeStore()
        for index in 0..<50 { try store.setValue(Data("v\(index)".utf8), forKey: "k\(index)") }
        let wrong = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<200 {
                        let index = (task * 7 + round) % 50
                        if (try? store.value(forKey: "k\(index)")) != Data("v\(index)".utf8) { wrong += 1 }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        // Then every read returned its value, and every hit was counted
        #expect(wrong == 0)
        #expect(store.statistics.hits == 1_600)
        #expect(store.readers.census.idle <= ReaderPool.idleLimit)
        // When the store closes, the pool closes with it (the readers parked in the threads'
        // lanes too) and later reads throw `closed`
        store.close()
        #expect(store.readers.census.idle == 0 && store.readers.census.isClosed)
        #expect(store.readers.census.parked == 0)
        let readError = #expect(throws: StorageError.self) { try store.value(forKey: "k1") }
        #expect(readError?.code == .closed)
        let keysError = #expect(throws: StorageError.self) { try store.keys() }
        #expect(keysError?.code == .closed)
        // And the ranked reads survived the close
        let reopened = try makeStore()
        try reopened.trim(toCount: 1)
        #expect(try reopened.keys().count == 1)
    }

    @Test func readsHandedFromThreadToThreadRankInTheOrderTheyHappened() throws {
        // Given 40 entries and 12 threads (more than a store has lanes, so some share one),
        // each read made by a thread picked at random, one after the other
        let store = try makeStore()
        for index in 0..<40 { try store.setValue(Data("v\(index)".utf8), forKey: "k\(index)") }
        var random = SplitMix64(seed: 13)
        var order = (0..<40).shuffled(using: &random)
        order += (0..<300).map { _ in Int.random(in: 0..<40, using: &random) }
        let workers = (0..<12).map { _ in ReadWorker(store: store) }
        defer { for worker in workers { worker.stop() } }
        var misread: [String] = []
        for index in order {
            let key = "k\(index)"
            if workers.randomElement(using: &random)!.read(key) != Data("v\(index)".utf8) { misread.append(key) }
        }
        #expect(misread.isEmpty)
        // When the store trims to ten entries (gathering every thread's reads)
        try store.trim(toCount: 10)
        // Then exactly the ten most recently read keys are left
        var lastRead: [String] = []
        for index in order.reversed() where lastRead.count < 10 && !lastRead.contains("k\(index)") {
            lastRead.append("k\(index)")
        }
        #expect(Set(try store.keys()) == Set(lastRead))
    }

    // MARK: - A read writes nothing to the entry row

    @Test func readsLeaveTheEntryRowUntouched() throws {
        // Given an inline entry written at t0
        let store = try makeStore()
        try store.setValue(Data(repeating: 7, count: 4_000), forKey: "k")
        let before = try query("SELECT accessed, seq, created, crc FROM entries", columns: 4)
        // When it is read many times at a later instant and the log is ranked
        clock.advance(by: 5)
        for _ in 0..<600 { _ = try store.value(forKey: "k") }
        store.close()
        // Then the entry's row is as written, and the access row has the read's time
        #expect(try query("SELECT accessed, seq, created, crc FROM entries", columns: 4) == before)
        let access = try query("SELECT accessed, seq FROM access", columns: 2)
        #expect(access.count == 1)
        #expect(access.first?.first == clock.now.milliseconds)
        let attributes = try #require(try makeStore().attributes(forKey: "k"))
        #expect(attributes.accessDate == Date(milliseconds: clock.now.milliseconds))
    }

    @Test func removedEntriesLeaveNoAccessRows() throws {
        // Given entries read (logged) and then removed, expired and evicted
        let store = try makeStore { $0.countLimit = 10 }
        for index in 0..<30 { try store.setValue(Data([UInt8(index)]), forKey: "k\(index)", expiry: index < 5 ? .seconds(1) : nil) }
        for index in 20..<30 { _ = try store.value(forKey: "k\(index)") }
        try store.removeValue(forKey: "k25")
        clock.advance(by: 2)
        try store.removeExpired()
        store.close()
        // Then every access row names a live entry, and every entry has one
        #expect(try query("SELECT count(*) FROM access WHERE entry NOT IN (SELECT rowid FROM entries)") == [[0]])
        #expect(try query("SELECT count(*) FROM entries WHERE rowid NOT IN (SELECT entry FROM access)") == [[0]])
    }
}

/// Damage to the narrow `access` table, which reads never touch: the write, trim or
/// attributes call that reads a damaged page finds it, empties the index and keeps working.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreAccessCorruptionTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("disk-access-corruption")
    }

    func makeStore(ranksReadsInBackground: Bool = true) throws -> DiskStore {
        try DiskStore(directory: folder.url, configuration: Reliability.configuration {
            $0.inlineThreshold = 1_000
            $0.ranksReadsInBackground = ranksReadsInBackground
        })
    }

    /// Writes entries, closes the store, and overwrites the page of `access` (its root, and
    /// with 40 rows its only page) with garbage (the WAL is checkpointed away by `close()`).
    func makeStoreWithDamagedAccessPages() throws -> [String: Data] {
        var values: [String: Data] = [:]
        let store = try makeStore()
        for index in 0..<40 {
            let key = "k\(index)"
            let value = CrashPayload.make(key: key, generation: 1, size: index % 2 == 0 ? 100 : 3_000)
            try store.setValue(value, forKey: key)
            values[key] = value
        }
        store.close()
        let path = folder.url.appendingPathComponent("index.sqlite").path
        let connection = try SQLiteConnection(path: path)
        let pageSize = try #require(try connection.scalarInt64("PRAGMA page_size"))
        let pages = [
            try #require(try connection.scalarInt64("SELECT rootpage FROM sqlite_schema WHERE name = 'access'")),
        ]
        connection.close()
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        for page in pages {
            try handle.seek(toOffset: UInt64((page - 1) * pageSize))
            handle.write(Data(repeating: 0xA5, count: Int(pageSize)))
        }
        return values
    }

    @Test(arguments: ["write", "trim", "attributes", "read-then-flush", "read-then-background-flush"])
    func damagedAccessPagesAreFoundAndTheStoreKeepsWorking(operation: String) async throws {
        // Given a store whose access table pages are garbage
        let values = try makeStoreWithDamagedAccessPages()
        let store = try makeStore(ranksReadsInBackground: operation == "read-then-background-flush")
        // When an operation reads those pages
        switch operation {
        case "write": try store.setValue(Data("new".utf8), forKey: "new")
        case "trim": try store.trim(toCount: 5)
        case "attributes": _ = try store.attributes(forKey: "k1")
        default:
            // Reads fill the log, whose ranking (on this thread, or on the I/O queue while the
            // reads go on and meet the reset) reads the damaged pages. No read throws.
            for _ in 0..<(AccessLog.flushReads / 2 + 1) {
                _ = try store.value(forKey: "k0")
                _ = try store.value(forKey: "k1")
            }
            // Until the ranking met the damage (on the I/O queue it may wait a while in a loaded
            // run: the suite's time limit bounds the wait).
            while store.statistics.indexResets == 0 {
                for key in ["k0", "k1"] { if let read = try store.value(forKey: key) { #expect(read == values[key]) } }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        // Then the damage was found and the index emptied (a cache loses entries, never lies)
        #expect(store.statistics.indexResets == 1, "\(operation)")
        // And no key reads as wrong bytes; the store keeps working with exact totals
        for (key, value) in values {
            if let read = try store.value(forKey: key) { #expect(read == value) }
        }
        Reliability.expectStillWorks(store, operation)
        try Reliability.expectTotalsExact(store, operation)
        try store.setValue(Data("after".utf8), forKey: "after")
        #expect(try store.value(forKey: "after") == Data("after".utf8))
    }
}

/// A thread of its own that reads one key of a store when asked and waits for the next: the
/// reads of several workers happen one after another, each on its worker's thread.
private final class ReadWorker: @unchecked Sendable {
    // @unchecked: `key` and `result` are handed over through the semaphores.
    private let store: DiskStore
    private let go = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private var key: String?
    private var result: Data?

    init(store: DiskStore) {
        self.store = store
        let thread = Thread { [self] in
            while true {
                go.wait()
                guard let key else { return }
                result = try? store.value(forKey: key)
                done.signal()
            }
        }
        thread.start()
    }

    /// Reads `key` on the worker's thread and returns what it read.
    func read(_ key: String) -> Data? {
        self.key = key
        go.signal()
        done.wait()
        return result
    }

    /// Ends the thread.
    func stop() {
        key = nil
        go.signal()
    }
}
