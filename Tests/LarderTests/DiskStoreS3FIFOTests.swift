import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// ``DiskStore`` under ``EvictionPolicy/s3fifo``: a reference model replayed against a real
/// store (which rows survive, in which queue and order, with which counters), reads that never
/// write the entry row, switching policies on reopen, the schema 3 → 4 upgrade, and expiry,
/// trims, limits and sliding lifetimes under the policy.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreS3FIFOTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("disk-s3fifo")
    }

    func makeStore(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configuration.policy = .s3fifo
        configure(&configuration)
        return try DiskStore(directory: folder.url, configuration: configuration)
    }

    func indexConnection() throws -> SQLiteConnection {
        try SQLiteConnection(path: folder.url.appendingPathComponent("index.sqlite").path)
    }

    /// The text columns of a query's rows, through `connection`.
    static func strings(_ connection: SQLiteConnection, _ sql: String) throws -> [String] {
        try connection.statement(sql).withReset { statement in
            var rows: [String] = []
            while try statement.step() { rows.append(statement.string(0)) }
            return rows
        }
    }

    static let queueOrderSQL = """
        SELECT e.key || CASE a.queue WHEN 1 THEN ' small ' ELSE ' main ' END || a.freq
        FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry ORDER BY a.queue DESC, a.seq
        """

    // MARK: - Differential against the reference model

    struct DifferentialCase: CustomTestStringConvertible, Sendable {
        var name: String
        var countLimit = Int.max
        var sizeLimit = 1 << 30
        var ratio = 0.0
        var isInline = true
        var maxSize = 3_000
        var keyCount = 80
        var operations = 2_500
        var testDescription: String { name }
    }

    static let differentialCases: [DifferentialCase] = [
        .init(name: "count limit only", countLimit: 20),
        .init(name: "size and charge limits", sizeLimit: 60_000),
        .init(name: "all limits, overflow ratio 0.2", countLimit: 30, sizeLimit: 50_000, ratio: 0.2),
        .init(name: "blob files", sizeLimit: 150_000, isInline: false, maxSize: 6_000, keyCount: 40, operations: 700),
    ]

    @Test(.serialized, arguments: differentialCases)
    func behavesLikeTheReferenceModelOverRandomOperations(_ testCase: DifferentialCase) async throws {
        // Off the cooperative pool: a minute of computing must not hold one of its two threads.
        try await OffPool.run {
            try runDifferential(testCase, seed: 0x5EED_D15C)
            try runDifferential(testCase, seed: UInt64.random(in: 0...UInt64.max))
        }
    }

    func runDifferential(_ testCase: DifferentialCase, seed: UInt64) throws {
        try? FileManager.default.removeItem(at: folder.url)
        let store = try makeStore {
            $0.countLimit = testCase.countLimit
            $0.sizeLimit = testCase.sizeLimit
            $0.overflowTrimRatio = testCase.ratio
            $0.inlineThreshold = testCase.isInline ? 1 << 20 : 0
        }
        defer { store.close() }
        let connection = try indexConnection()
        defer { connection.close() }
        var model = ReferenceDiskS3FIFO(countLimit: testCase.countLimit, sizeLimit: testCase.sizeLimit, ratio: testCase.ratio)
        var random = SplitMix64(seed: seed)
        let context = "\(testCase.name), seed \(seed)"
        for step in 0..<testCase.operations {
            let key = "key-\(Int.random(in: 0..<testCase.keyCount, using: &random))"
            let now = clock.peek.milliseconds
            let roll = Int.random(in: 0..<100, using: &random)
            var wrote = false
            switch roll {
            case 0..<50:
                let hit = try store.value(forKey: key) != nil
                #expect(hit == model.read(key, now: now), "read of \(key) at step \(step), \(context)")
            case 50..<88:
                let size = Int.random(in: 1...testCase.maxSize, using: &random)
                let lifetime = Int.random(in: 0..<4, using: &random) == 0 ? Int.random(in: 1...30, using: &random) : nil
                try store.setValue(
                    Data(repeating: UInt8(step & 0xFF), count: size), forKey: key,
                    expiry: lifetime.map { .seconds(TimeInterval($0)) } ?? .never)
                model.write(
                    key, size: size, isInline: testCase.isInline, expires: lifetime.map { now + Int64($0) * 1_000 }, now: now)
                wrote = true
            case 88..<91:
                try store.removeValue(forKey: key)
                model.remove(key)
            case 91..<95:
                clock.advance(by: TimeInterval(Int.random(in: 1...8, using: &random)))
            case 95..<97:
                let count = Int.random(in: 0...testCase.keyCount / 2, using: &random)
                try store.trim(toCount: count)
                model.trim(toCount: count, toSize: .max, now: now)
                wrote = true
            case 97..<98:
                let size = Int.random(in: 0...testCase.sizeLimit / 2, using: &random)
                try store.trim(toSize: size)
                model.trim(toCount: .max, toSize: size, now: now)
                wrote = true
            default:
                // Lower the limits a little, or put them back.
                let lower = Bool.random(using: &random)
                let countLimit = lower && testCase.countLimit != .max ? testCase.countLimit * 3 / 4 : testCase.countLimit
                let sizeLimit = lower ? testCase.sizeLimit * 3 / 4 : testCase.sizeLimit
                try store.setLimits(countLimit: countLimit, sizeLimit: sizeLimit)
                model.setLimits(countLimit: countLimit, sizeLimit: sizeLimit, now: now)
                wrote = true
            }
            let keys = try Self.strings(connection, "SELECT key FROM entries ORDER BY key")
            guard keys == model.keys else {
                Issue.record("rows differ after step \(step) (\(roll)), \(context): store \(keys), model \(model.keys)")
                return
            }
            // After a write, once the logged reads are in the index (a write of a store alone
            // leaves them in the log; an eviction or trim wrote them first), queues, order and
            // counters must match too.
            if wrote {
                store.rankLoggedReads()
                let order = try Self.strings(connection, Self.queueOrderSQL)
                guard order == model.queueOrder else {
                    Issue.record("queues differ after step \(step), \(context): store \(order), model \(model.queueOrder)")
                    return
                }
            }
        }
        #expect(store.statistics.evictions == model.evictions, "\(context)")
        #expect(store.statistics.evictions > 0, "the case must evict, \(context)")
    }

    // MARK: - Reads

    @Test func readsNeverWriteTheEntryRowOnlyTheCounter() throws {
        // Given a store with inline and file entries, its reads ranked into the index
        let store = try makeStore { $0.inlineThreshold = 1_000 }
        try store.setValue(Data(repeating: 1, count: 100), forKey: "inline")
        try store.setValue(Data(repeating: 2, count: 5_000), forKey: "file")
        let connection = try indexConnection()
        defer { connection.close() }
        let rowsSQL = "SELECT quote(key) || quote(file) || size || crc || created || quote(expires) || quote(data) FROM entries ORDER BY key"
        let before = try Self.strings(connection, rowsSQL)
        let accessSQL = "SELECT e.key || ' ' || a.seq || ' ' || a.freq FROM access AS a JOIN entries AS e ON e.rowid = a.entry ORDER BY e.key"
        let accessBefore = try Self.strings(connection, accessSQL)
        // When each is read several times, another key is written, and the reads are ranked
        for _ in 0..<5 {
            #expect(try store.value(forKey: "inline") != nil)
            #expect(try store.value(forKey: "file") != nil)
        }
        try store.setValue(Data([9]), forKey: "other")
        store.rankLoggedReads()
        // Then the entry rows are byte for byte the same, nothing moved in its queue, and the
        // counters saturated at 3
        #expect(try Self.strings(connection, rowsSQL).filter { !$0.hasPrefix("'other'") } == before)
        let accessAfter = try Self.strings(connection, accessSQL).filter { !$0.hasPrefix("other") }
        #expect(accessAfter.map { $0.split(separator: " ")[1] } == accessBefore.map { $0.split(separator: " ")[1] })
        #expect(accessAfter.map { $0.split(separator: " ")[2] } == ["3", "3"])
        // And a second store on the directory sees the same values
        let second = try makeStore()
        defer { second.close() }
        #expect(try second.value(forKey: "file") == Data(repeating: 2, count: 5_000))
        store.close()
    }

    @Test func readsOfAHotEntryWriteNothingWhileItsLastUseIsRecent() throws {
        // Given an entry read three times, the reads ranked: its counter is saturated and its
        // last use recorded
        let store = try makeStore { $0.ranksReadsInBackground = false }
        defer { store.close() }
        try store.setValue(Data([1]), forKey: "hot")
        for _ in 0..<3 { _ = try store.value(forKey: "hot") }
        store.rankLoggedReads()
        let connection = try indexConnection()
        defer { connection.close() }
        let accessSQL = """
            SELECT a.freq || ' ' || a.seq || ' ' || a.accessed FROM access AS a CROSS JOIN entries AS e
            ON e.rowid = a.entry WHERE e.key = 'hot'
            """
        let saturated = try Self.strings(connection, accessSQL)
        #expect(saturated.first?.hasPrefix("3 ") == true)
        #expect(saturated.first?.hasSuffix(" \(clock.peek.milliseconds)") == true)
        // When it is read 1,100 times a second later (over two batches of logged reads, which
        // this store would rank on the reading thread, moving the last use to the reads' time)
        clock.advance(by: 1)
        var intact = 0
        for _ in 0..<1_100 where try store.value(forKey: "hot") == Data([1]) { intact += 1 }
        // Then every read was a hit and none reached the index: the access row is unchanged
        // (the background checkpoint of the earlier writes may still run, so the database's
        // own version is no measure here)
        #expect(intact == 1_100)
        #expect(store.statistics.hits == 1_103)
        #expect(try Self.strings(connection, accessSQL) == saturated)
        // And once its recorded use is more than 2 s old, a read is logged again and moves it
        clock.advance(by: 1.5)
        #expect(try store.value(forKey: "hot") == Data([1]))
        store.rankLoggedReads()
        let after = try Self.strings(connection, accessSQL)
        #expect(after.first?.hasPrefix("3 ") == true)
        #expect(after.first?.hasSuffix(" \(clock.peek.milliseconds)") == true)
    }

    @Test func aReaderTrustsTheCountersItSawOnlyUntilSomethingCommits() throws {
        // Given a read connection in a lingering read transaction that noted a saturated counter
        let store = try makeStore { $0.ranksReadsInBackground = false }
        defer { store.close() }
        try store.setValue(Data([1]), forKey: "k")
        let reader = try DiskIndexReader(
            path: folder.url.appendingPathComponent("index.sqlite").path, busyTimeout: .seconds(1))
        defer {
            reader.endLingering()
            reader.connection.close()
        }
        _ = try reader.location(forKey: "k")  // maps the wal-index
        reader.startRead(lingering: true, now: 0)
        #expect(reader.isLingering)
        reader.noteSaturation(forKey: "k", accessed: 42)
        #expect(reader.knownSaturation(forKey: "k") == 42)
        #expect(reader.knownSaturation(forKey: "other") == nil)
        // When its snapshot is renewed for age alone (nothing committed), it still knows
        reader.startRead(lingering: true, now: 1)
        #expect(reader.isLingering)
        #expect(reader.knownSaturation(forKey: "k") == 42)
        // Then a commit by another connection makes it forget
        try store.setValue(Data([2]), forKey: "other")
        reader.startRead(lingering: true, now: 1.001)
        #expect(reader.isLingering)
        #expect(reader.knownSaturation(forKey: "k") == nil)
        // And outside a lingering transaction it neither notes nor knows anything
        reader.endLingering()
        reader.noteSaturation(forKey: "k", accessed: 43)
        #expect(reader.knownSaturation(forKey: "k") == nil)
        reader.startRead(lingering: true, now: 2)
        #expect(reader.knownSaturation(forKey: "k") == nil)
    }

    @Test func aCounterAnotherConnectionChangedIsReadAgain() throws {
        // Given a hot entry whose saturated counter the store's reader has seen
        let store = try makeStore { $0.ranksReadsInBackground = false }
        defer { store.close() }
        try store.setValue(Data([1]), forKey: "hot")
        for _ in 0..<3 { _ = try store.value(forKey: "hot") }
        store.rankLoggedReads()
        // (The first reads found no saturated counter, so lookups stopped reading it but for
        // one probe in 16: these reads let the probes see it saturated again.)
        for _ in 0..<40 { _ = try store.value(forKey: "hot") }
        store.rankLoggedReads()
        for _ in 0..<5 { #expect(try store.value(forKey: "hot") == Data([1])) }
        let connection = try indexConnection()
        defer { connection.close() }
        let counterSQL = "SELECT '' || a.freq FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry WHERE e.key = 'hot'"
        #expect(try Self.strings(connection, counterSQL) == ["3"])
        // When another connection lowers the counter (as another process's eviction does)
        try connection.execute("UPDATE access SET freq = 1 WHERE entry = (SELECT rowid FROM entries WHERE key = 'hot')")
        // Then the store's next read looks at the counter again, is logged, and bumps it
        #expect(try store.value(forKey: "hot") == Data([1]))
        store.rankLoggedReads()
        let bumped = try Self.strings(connection, counterSQL)
        #expect(bumped == ["2"], "\(bumped)")
    }

    @Test func lookupsReadTheCounterOnlyWhileThatPays() throws {
        // Given a read connection to a store's index
        let store = try makeStore()
        defer { store.close() }
        try store.setValue(Data([1]), forKey: "k")
        let reader = try DiskIndexReader(
            path: folder.url.appendingPathComponent("index.sqlite").path, busyTimeout: .seconds(1))
        defer { reader.connection.close() }
        #expect(try reader.location(forKey: "k", counted: true)?.counter?.count == 0)
        #expect(try reader.location(forKey: "k")?.counter == nil)
        // When 160 lookups in a row find no saturated counter (first reads)
        var counted = 0
        for _ in 0..<160 where reader.countsNextLookup() {
            counted += 1
            reader.noteCounter(saturated: false)
        }
        // Then only the first and one in 16 after it read the counter
        #expect(counted == 10)
        // And when lookups find saturated counters again (re-reads), the probes notice and
        // every lookup reads the counter once more
        var lastCounted = 0
        for lookup in 0..<160 where reader.countsNextLookup() {
            reader.noteCounter(saturated: true)
            if lookup >= 110 { lastCounted += 1 }
        }
        #expect(lastCounted == 50)
    }

    @Test func aKeyReadTwiceInTheSmallQueueMovesToMainInsteadOfBeingEvicted() throws {
        // Given ten entries (count limit 10: small queue 1) with a full cache
        let store = try makeStore { $0.countLimit = 10; $0.overflowTrimRatio = 0 }
        defer { store.close() }
        for index in 0..<10 { try store.setValue(Data([UInt8(index)]), forKey: "k\(index)") }
        // When one more is written (evicting one), then the newcomer is read twice before the
        // next write
        try store.setValue(Data([10]), forKey: "k10")
        _ = try store.value(forKey: "k10")
        _ = try store.value(forKey: "k10")
        try store.setValue(Data([11]), forKey: "k11")
        try store.setValue(Data([12]), forKey: "k12")
        // Then k10 survived by moving to main; k11 (read never) was evicted from small
        let keys = try store.keys()
        #expect(keys.contains("k10"))
        #expect(!keys.contains("k11"))
        #expect(keys.contains("k12"))
        // And a key evicted from small comes back into main through the ghost
        try store.setValue(Data([11]), forKey: "k11")
        let connection = try indexConnection()
        defer { connection.close() }
        #expect(try Self.strings(connection, Self.queueOrderSQL).contains("k11 main 0"))
    }

    // MARK: - Writes after reads

    /// Each entry's key, row id and read counter in the index, by key.
    static let countersSQL = """
        SELECT e.key || ' ' || a.entry || ' ' || a.freq FROM access AS a CROSS JOIN entries AS e ON e.rowid = a.entry
        ORDER BY e.key
        """

    @Test func aWriteOfAStoreAloneLeavesTheReadsBeforeItInTheLog() throws {
        // Given a store alone on its directory, reads ranked only when told (no background)
        let store = try makeStore { $0.ranksReadsInBackground = false }
        defer { store.close() }
        for key in ["a", "b"] { try store.setValue(Data(key.utf8), forKey: key) }
        let connection = try indexConnection()
        defer { connection.close() }
        // When a is read twice, then c is written and b overwritten
        _ = try store.value(forKey: "a")
        _ = try store.value(forKey: "a")
        try store.setValue(Data("c".utf8), forKey: "c")
        try store.setValue(Data("b2".utf8), forKey: "b")
        // Then the writes bumped no counter of a read: a's is still 0 (b's overwrite counts as
        // its read)
        #expect(try Self.strings(connection, Self.countersSQL) == ["a 1 0", "b 2 1", "c 3 0"])
        // And once the log is ranked, the reads count as if written before: a's counter is 2
        store.rankLoggedReads()
        #expect(try Self.strings(connection, Self.countersSQL) == ["a 1 2", "b 2 1", "c 3 0"])
        #expect(store.statistics.hits == 2)
    }

    @Test func aRowIDReusedAfterARemovalIsNotBumpedByTheOldRead() throws {
        // Given x, then k (the highest row id), both written, reads ranked only when told
        let store = try makeStore { $0.ranksReadsInBackground = false }
        defer { store.close() }
        try store.setValue(Data("x".utf8), forKey: "x")
        try store.setValue(Data("k".utf8), forKey: "k")
        // When k is read, removed, and n written (SQLite gives it k's row id again)
        _ = try store.value(forKey: "k")
        #expect(try store.removeValue(forKey: "k"))
        try store.setValue(Data("n".utf8), forKey: "n")
        store.rankLoggedReads()
        // Then k's read did not count as n's: n took row id 2 with its counter at 0
        let connection = try indexConnection()
        defer { connection.close() }
        #expect(try Self.strings(connection, Self.countersSQL) == ["n 2 0", "x 1 0"])
    }

    @Test func aWriteBumpsTheReadsBeforeItWhileAnotherStoreHasTheDirectoryOpen() throws {
        // Given two stores on one directory
        let first = try makeStore { $0.ranksReadsInBackground = false }
        defer { first.close() }
        for key in ["a", "b"] { try first.setValue(Data(key.utf8), forKey: key) }
        let second = try makeStore()
        let connection = try indexConnection()
        defer { connection.close() }
        // When the first reads a and writes c
        _ = try first.value(forKey: "a")
        try first.setValue(Data("c".utf8), forKey: "c")
        // Then the read is in the index already, for the other store's evictions to see
        #expect(try Self.strings(connection, Self.countersSQL) == ["a 1 1", "b 2 0", "c 3 0"])
        // And once the second is closed, the first is alone again: its writes leave the log
        second.close()
        _ = try first.value(forKey: "b")
        try first.setValue(Data("d".utf8), forKey: "d")
        #expect(try Self.strings(connection, Self.countersSQL) == ["a 1 1", "b 2 0", "c 3 0", "d 4 0"])
    }

    // MARK: - Expiry, trims, limits, sliding lifetimes

    @Test func expiredEntriesGoBeforeAnyQueuedOne() throws {
        // Given a full store where one old, often-read entry and one new entry have expired
        let store = try makeStore { $0.countLimit = 5; $0.overflowTrimRatio = 0 }
        defer { store.close() }
        try store.setValue(Data([0]), forKey: "expiring", expiry: .seconds(10))
        for index in 1..<4 { try store.setValue(Data([UInt8(index)]), forKey: "k\(index)") }
        try store.setValue(Data([4]), forKey: "expiring-too", expiry: .seconds(10))
        clock.advance(by: 11)
        // When one more entry is written
        try store.setValue(Data([5]), forKey: "k5")
        // Then both expired ones went and every live one stayed
        #expect(try store.keys() == ["k1", "k2", "k3", "k5"])
        #expect(store.statistics.expirations == 2 && store.statistics.evictions == 0)
    }

    @Test func trimsAndLoweredLimitsEvictInS3FIFOOrder() throws {
        // Given 8 entries in the small queue (no limit reached), k0 read twice
        let store = try makeStore()
        defer { store.close() }
        for index in 0..<8 { try store.setValue(Data(repeating: 1, count: 100), forKey: "k\(index)") }
        _ = try store.value(forKey: "k0")
        _ = try store.value(forKey: "k0")
        // When trimmed to 6 entries (by count), then to 5 (by a lowered limit), then by size
        try store.trim(toCount: 6)
        // Then the oldest small entries without two reads went first: k1, k2; k0 moved to main
        #expect(try store.keys() == ["k0", "k3", "k4", "k5", "k6", "k7"])
        try store.setLimits(countLimit: 5)
        #expect(try store.keys() == ["k0", "k4", "k5", "k6", "k7"])
        // And trimmed by size, the small queue gives up its oldest first (main is within its
        // share of the limits): k0 in main and the newest small entry stay
        try store.trim(toSize: 200)
        #expect(try store.keys() == ["k0", "k7"])
        #expect(store.totalSize == 200)
    }

    @Test func slidingLifetimesRenewUnderS3FIFO() throws {
        // Given an entry with a 10-second sliding lifetime
        let store = try makeStore()
        defer { store.close() }
        try store.setValue(Data([1]), forKey: "session", expiry: .sliding(10))
        // When it is read every 6 seconds, four times
        for _ in 0..<4 {
            clock.advance(by: 6)
            #expect(try store.value(forKey: "session") != nil)
        }
        // Then it is still alive 24 seconds after it was written, and a second store agrees
        // once the renewals are written
        try store.setValue(Data([2]), forKey: "other")
        let second = try makeStore()
        defer { second.close() }
        #expect(try second.value(forKey: "session") == Data([1]))
        // And it expires 10 seconds after its last read
        clock.advance(by: 11)
        #expect(try store.value(forKey: "session") == nil)
    }

    @Test func trimByAgeSeesReadsRecordedAsCounters() throws {
        // Given two entries written at t0, and one of them read 10 seconds later
        let store = try makeStore()
        defer { store.close() }
        try store.setValue(Data([1]), forKey: "read")
        try store.setValue(Data([2]), forKey: "unread")
        let cutoff = clock.peek.addingTimeInterval(5)
        clock.advance(by: 10)
        #expect(try store.value(forKey: "read") == Data([1]))
        // When entries last used before t0 + 5 s are trimmed
        let removed = try store.trim(toDate: cutoff, by: .lastUsed)
        // Then only the unread one goes: the read's time reached the access row with its counter
        #expect(removed == 1)
        #expect(try store.keys() == ["read"])
        // And by write time, the read one goes too
        #expect(try store.trim(toDate: cutoff, by: .written) == 1)
        #expect(try store.keys().isEmpty)
    }

    @Test func aMemoryOnlyPolicyIsRejected() throws {
        #expect(throws: StorageError.self) { try makeStore { $0.policy = .wTinyLFU } }
    }

    // MARK: - Switching policy on reopen

    @Test func switchingFromLRUKeepsTheRecencyOrderAsMainsFIFOOrder() throws {
        // Given an LRU store where k0 was read last
        let lru = try makeStore { $0.policy = .lru }
        for index in 0..<5 { try lru.setValue(Data([UInt8(index)]), forKey: "k\(index)") }
        _ = try lru.value(forKey: "k0")
        lru.close()
        // When it is reopened under S3-FIFO and trimmed to 3 entries
        let s3fifo = try makeStore()
        defer { s3fifo.close() }
        try s3fifo.trim(toCount: 3)
        // Then the least recently used went first, as LRU would have done: every entry is in
        // main, in recency order, with counter 0
        #expect(try s3fifo.keys() == ["k0", "k3", "k4"])
    }

    @Test func switchingBackToLRUTreatsQueuePositionsAsRecency() throws {
        // Given an S3-FIFO store where k0 was read often (reads rank nothing under S3-FIFO)
        let s3fifo = try makeStore()
        for index in 0..<5 { try s3fifo.setValue(Data([UInt8(index)]), forKey: "k\(index)") }
        for _ in 0..<3 { _ = try s3fifo.value(forKey: "k0") }
        s3fifo.close()
        // When it is reopened under LRU and trimmed to 3 entries
        let lru = try makeStore { $0.policy = .lru }
        defer { lru.close() }
        try lru.trim(toCount: 3)
        // Then the entries that entered their queue first went first: the counters mean
        // nothing to LRU
        #expect(try lru.keys() == ["k2", "k3", "k4"])
        // And LRU reads rank again from here on
        _ = try lru.value(forKey: "k2")
        try lru.trim(toCount: 1)
        #expect(try lru.keys() == ["k2"])
    }

    // MARK: - Schema 3 → 4

    @Test func aSchema3StoreUpgradesWithItsLRUOrderIntact() throws {
        // Given a store, turned back into schema 3 (what the previous version wrote)
        let old = try makeStore { $0.policy = .lru }
        for index in 0..<6 { try old.setValue(Data(repeating: UInt8(index), count: 50 + index), forKey: "k\(index)") }
        _ = try old.value(forKey: "k1")
        old.close()
        let connection = try indexConnection()
        try connection.execute("""
            BEGIN;
            DROP TRIGGER entries_forget_tags;
            DROP TRIGGER entries_replace_tags;
            DROP TABLE tags;
            DROP TRIGGER entries_resize_small;
            DROP TRIGGER entries_forget_access;
            DROP TRIGGER ghost_insert;
            DROP TRIGGER ghost_delete;
            DROP TABLE ghost;
            ALTER TABLE access DROP COLUMN queue;
            ALTER TABLE access DROP COLUMN freq;
            ALTER TABLE totals DROP COLUMN small_count;
            ALTER TABLE totals DROP COLUMN small_size;
            ALTER TABLE totals DROP COLUMN small_charge;
            ALTER TABLE totals DROP COLUMN ghost_count;
            ALTER TABLE totals DROP COLUMN ghost_charge;
            CREATE TRIGGER entries_forget_access AFTER DELETE ON entries BEGIN
                DELETE FROM access WHERE entry = OLD.rowid;
            END;
            DROP TRIGGER entries_change_insert;
            DROP TRIGGER entries_change_delete;
            DROP TRIGGER entries_change_update;
            DROP TABLE changes;
            PRAGMA user_version = 3;
            COMMIT;
            """)
        connection.close()
        // When this version opens it under S3-FIFO
        let store = try makeStore()
        defer { store.close() }
        let check = try indexConnection()
        defer { check.close() }
        // Then it is the current schema, every value reads back, and every entry is in main, oldest
        // used first, with counter 0
        #expect(try check.scalarInt64("PRAGMA user_version") == DiskIndex.schemaVersion)
        #expect(try Self.strings(check, Self.queueOrderSQL) == ["k0 main 0", "k2 main 0", "k3 main 0", "k4 main 0", "k5 main 0", "k1 main 0"])
        for index in 0..<6 {
            #expect(try store.value(forKey: "k\(index)") == Data(repeating: UInt8(index), count: 50 + index))
        }
        // And the new queues work: a write enters small, trims follow main's FIFO order
        try store.setValue(Data([6]), forKey: "k6")
        #expect(try Self.strings(check, Self.queueOrderSQL).first == "k6 small 0")
        try store.trim(toCount: 4)
        #expect(try store.keys() == ["k1", "k3", "k4", "k5"])
        #expect(try check.scalarInt64("SELECT small_count FROM totals") == 0)
        #expect(store.statistics.evictions == 3)
    }
}
