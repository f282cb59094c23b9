import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// `DiskStore.setValues(_:)`: many writes in one transaction, each as `setValue` would write it.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreBatchWriteTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("disk-batch")
    }

    func makeStore(
        in directory: URL? = nil, _ configure: (inout DiskStore.Configuration) -> Void = { _ in }
    ) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configure(&configuration)
        return try DiskStore(directory: directory ?? folder.url, configuration: configuration)
    }

    func blobFiles(in directory: URL? = nil) -> [String] {
        StoreChecks.blobFiles(in: directory ?? folder.url)
    }

    /// A second connection to the store's index, as another process would open it.
    func openIndex() throws -> SQLiteConnection {
        try SQLiteConnection(path: folder.url.appendingPathComponent("index.sqlite").path)
    }

    /// Text gzip shrinks; the seed makes each value different.
    static func text(_ count: Int, seed: Int = 0) -> Data {
        Data((0..<count).map { UInt8(ascii: "a") + UInt8(($0 / 7 + seed) % 26) })
    }

    // MARK: - Round trips

    @Test(arguments: [false, true])
    func everyValueMetadataAndExpiryReadsBackExactly(gzip: Bool) throws {
        // Given a store with a default expiry, gzip on or off
        let store = try makeStore {
            $0.defaultExpiry = .seconds(600)
            $0.compression = gzip ? .gzip(level: 6) : .none
        }
        let now = clock.now
        let writes = [
            TierWrite(key: "empty", data: Data()),
            TierWrite(key: "small", data: Self.text(100), expiry: .seconds(60), metadata: Data("m1".utf8)),
            TierWrite(key: "blob", data: Self.text(100_000, seed: 1), expiry: .date(now.addingTimeInterval(120))),
            TierWrite(key: "raw blob", data: DiskStoreTests.bytes(40_000, seed: 3), expiry: .never,
                      metadata: Data([0, 1, 2]), isCompressible: false),
            TierWrite(key: "sliding", data: Self.text(20_000, seed: 2), expiry: .sliding(30)),
        ]
        // When they are written in one batch
        try store.setValues(writes)
        // Then each reads back as written, with its lifetime and metadata
        let expected: [String: (expires: Date?, sliding: TimeInterval?)] = [
            "empty": (now.addingTimeInterval(600), nil),
            "small": (now.addingTimeInterval(60), nil),
            "blob": (now.addingTimeInterval(120), nil),
            "raw blob": (nil, nil),
            "sliding": (now.addingTimeInterval(30), 30),
        ]
        for write in writes {
            let entry = try #require(try store.entry(forKey: write.key))
            #expect(entry.data == write.data, "\(write.key)")
            #expect(entry.metadata == write.metadata, "\(write.key)")
            #expect(entry.expirationDate == expected[write.key]?.expires, "\(write.key)")
            #expect(entry.slidingInterval == expected[write.key]?.sliding, "\(write.key)")
        }
        // Inline below the threshold, files above it, gzip only where it was allowed and helped
        let attributes = try writes.map { try #require(try store.attributes(forKey: $0.key)) }
        #expect(attributes.map(\.isInline) == [true, true, gzip, false, gzip])
        #expect(attributes.map(\.encoding) == [.raw, gzip ? .gzip : .raw, gzip ? .gzip : .raw, .raw, gzip ? .gzip : .raw])
        #expect(blobFiles().count == (gzip ? 1 : 3))
        #expect(store.statistics.writes == 5)
        #expect(store.totalCount == 5)
        // And each expires when its own expiry says
        clock.advance(by: 61)
        #expect(try store.value(forKey: "small") == nil)
        #expect(try store.value(forKey: "blob") != nil)
        clock.advance(by: 60)
        #expect(try store.value(forKey: "blob") == nil)
        #expect(try store.value(forKey: "raw blob") == writes[3].data)
        #expect(try store.value(forKey: "empty") == Data())
    }

    @Test func aBatchStoresWhatTheSameSingleWritesStore() throws {
        // Given two directories, one written by a batch and one by single writes of the same values
        let single = try TemporaryDirectory("disk-batch-single")
        let writes = (0..<40).map { index in
            TierWrite(key: "k\(index)", data: Self.text(index * 1_000, seed: index),
                      expiry: index % 3 == 0 ? nil : .seconds(Double(100 + index)),
                      metadata: index % 2 == 0 ? Data("meta \(index)".utf8) : nil, isCompressible: index % 5 != 0)
        }
        let configure: (inout DiskStore.Configuration) -> Void = {
            $0.compression = .gzip(level: 6)
            $0.inlineThreshold = 8_192
        }
        let batched = try makeStore(configure)
        let oneByOne = try makeStore(in: single.url, configure)
        // When both are written
        try batched.setValues(writes)
        for write in writes {
            try oneByOne.setValue(write.data, forKey: write.key, expiry: write.expiry, metadata: write.metadata,
                                  isCompressible: write.isCompressible)
        }
        // Then every entry and every total is the same
        #expect(try batched.keys() == oneByOne.keys())
        for write in writes {
            #expect(try batched.entry(forKey: write.key) == oneByOne.entry(forKey: write.key), "\(write.key)")
            #expect(try batched.attributes(forKey: write.key) == oneByOne.attributes(forKey: write.key), "\(write.key)")
        }
        #expect(batched.totalSize == oneByOne.totalSize)
        #expect(blobFiles().count == blobFiles(in: single.url).count)
        #expect(batched.statistics.writes == oneByOne.statistics.writes)
    }

    // MARK: - Duplicates and empty batches

    @Test func theLastWriteOfADuplicatedKeyWins() throws {
        // Given a stored value
        let store = try makeStore()
        try store.setValue(Data("old".utf8), forKey: "a")
        // When a batch writes the key twice (a file, then an inline value, then a file again)
        try store.setValues([
            TierWrite(key: "a", data: DiskStoreTests.bytes(30_000, seed: 1), metadata: Data("first".utf8)),
            TierWrite(key: "b", data: Data("b".utf8)),
            TierWrite(key: "a", data: Data("second".utf8), expiry: .seconds(5)),
            TierWrite(key: "c", data: DiskStoreTests.bytes(30_000, seed: 2)),
            TierWrite(key: "c", data: DiskStoreTests.bytes(20_000, seed: 3)),
        ])
        // Then each key holds its last write, and only the last writes' files exist
        let a = try #require(try store.entry(forKey: "a"))
        #expect(a.data == Data("second".utf8))
        #expect(a.metadata == nil)
        #expect(a.expirationDate == clock.now.addingTimeInterval(5))
        #expect(try store.value(forKey: "b") == Data("b".utf8))
        #expect(try store.value(forKey: "c") == DiskStoreTests.bytes(20_000, seed: 3))
        #expect(blobFiles().count == 1)
        #expect(store.totalCount == 3)
    }

    @Test func anEmptyBatchCommitsNothing() throws {
        // Given a store and a second connection that sees every commit to its index
        let store = try makeStore()
        try store.setValue(Data("x".utf8), forKey: "x")
        let observer = try openIndex()
        defer { observer.close() }
        let before = try observer.scalarInt64("PRAGMA data_version")
        // When an empty batch is written
        try store.setValues([])
        // Then no transaction committed; a batch that writes does commit
        #expect(try observer.scalarInt64("PRAGMA data_version") == before)
        try store.setValues([TierWrite(key: "y", data: Data("y".utf8))])
        #expect(try observer.scalarInt64("PRAGMA data_version") != before)
        #expect(store.statistics.writes == 2)
    }

    // MARK: - Invalid writes and failures

    @Test(arguments: ["expiry", "metadata", "size"])
    func anInvalidWriteInTheMiddleStoresNothingAndKeepsThePreviousValues(invalid: String) throws {
        // Given stored values, one of them in a file
        let store = try makeStore { $0.sizeLimit = 1 << 20 }
        let oldBlob = DiskStoreTests.bytes(30_000, seed: 9)
        try store.setValue(Data("old".utf8), forKey: "a")
        try store.setValue(oldBlob, forKey: "blob")
        let filesBefore = blobFiles()
        let bad: TierWrite = switch invalid {
        case "expiry": TierWrite(key: "bad", data: Data("x".utf8), expiry: .seconds(.infinity))
        case "metadata": TierWrite(key: "bad", data: Data("x".utf8), metadata: Data(count: DiskStore.metadataLimit + 1))
        default: TierWrite(key: "bad", data: DiskStoreTests.bytes((1 << 20) + 1), isCompressible: false)
        }
        // When a batch with one invalid write among new values and overwrites is written
        let error = #expect(throws: StorageError.self) {
            try store.setValues([
                TierWrite(key: "a", data: Data("new".utf8)),
                TierWrite(key: "blob", data: DiskStoreTests.bytes(40_000, seed: 1)),
                TierWrite(key: "new blob", data: DiskStoreTests.bytes(50_000, seed: 2)),
                bad,
                TierWrite(key: "after", data: Data("after".utf8)),
            ])
        }
        // Then it is refused as the single write is, nothing of it is stored and no file is left
        #expect(error?.code == .invalidInput)
        let single = #expect(throws: StorageError.self) {
            try store.setValue(bad.data, forKey: bad.key, expiry: bad.expiry, metadata: bad.metadata,
                               isCompressible: bad.isCompressible)
        }
        #expect(error?.description == single?.description)
        #expect(try store.value(forKey: "a") == Data("old".utf8))
        #expect(try store.value(forKey: "blob") == oldBlob)
        for key in ["new blob", "bad", "after"] { #expect(try store.value(forKey: key) == nil) }
        #expect(blobFiles() == filesBefore)
        #expect(store.statistics.writes == 2)
        #expect(store.totalCount == 2)
    }

    @Test func aTransactionThatFailsStoresNothingAndRemovesTheBatchFiles() throws {
        // Given stored values, and a trigger (added by a second connection) that fails any
        // insert of the key "poison"
        let store = try makeStore()
        let oldBlob = DiskStoreTests.bytes(30_000, seed: 9)
        try store.setValue(Data("old".utf8), forKey: "a")
        try store.setValue(oldBlob, forKey: "blob")
        let filesBefore = blobFiles()
        let connection = try openIndex()
        try connection.execute("""
            CREATE TRIGGER poison BEFORE INSERT ON entries WHEN NEW.key = 'poison'
            BEGIN SELECT RAISE(ABORT, 'poisoned'); END
            """)
        connection.close()
        // When a batch whose last row fails is written
        #expect(throws: (any Error).self) {
            try store.setValues([
                TierWrite(key: "a", data: Data("new".utf8)),
                TierWrite(key: "blob", data: DiskStoreTests.bytes(40_000, seed: 1)),
                TierWrite(key: "new blob", data: DiskStoreTests.bytes(50_000, seed: 2)),
                TierWrite(key: "poison", data: Data("x".utf8)),
            ])
        }
        // Then no row of it was committed (each row in a transaction of its own would have
        // stored the first three), and its files are gone
        #expect(try store.value(forKey: "a") == Data("old".utf8))
        #expect(try store.value(forKey: "blob") == oldBlob)
        #expect(try store.value(forKey: "new blob") == nil)
        #expect(blobFiles() == filesBefore)
        #expect(store.totalCount == 2)
        #expect(store.statistics.writes == 2)
        // And the store goes on taking writes
        try store.setValues([TierWrite(key: "new blob", data: DiskStoreTests.bytes(50_000, seed: 2))])
        #expect(try store.value(forKey: "new blob") == DiskStoreTests.bytes(50_000, seed: 2))
    }

    @Test func aWriterKilledDuringBatchesLeavesOneWholeBatch() async throws {
        let directory = folder.url.appendingPathComponent("killed")
        let keys = 64
        for round in 0..<5 {
            // Given a helper process writing generations of 64 keys, one batch each, killed at
            // a random moment after its second batch
            let lastDone: Int = try await withChildProcesses { scope in
                let child = try CrashHelper.start(in: scope, ["batch", directory.path, "\(keys)"])
                let started = await child.waitForOutputLine(prefix: "done 2", timeout: .seconds(300))
                #expect(started != nil, "round \(round): \(child.standardError)")
                try await Task.sleep(for: .milliseconds(Int.random(in: 0..<50)))
                child.kill()
                await child.waitForOutput()
                #expect(child.wasKilledBySignal, "round \(round): \(child.standardError)")
                let done = child.standardOutput.split(separator: "\n").compactMap { Int($0.dropFirst("done ".count)) }
                return done.last ?? 0
            }
            // When the directory is opened again
            let store = try DiskStore(directory: directory, configuration: StoreChecks.configuration())
            defer { store.close() }
            // Then every key holds the same generation: the last one done, or the one in flight
            let generations = try (0..<keys).map { index -> Int? in
                guard let data = try store.value(forKey: "k\(index)") else { return nil }
                let fields = String(decoding: data.prefix(32), as: UTF8.self).split(separator: " ")
                #expect(fields.count >= 2 && fields[1] == "k\(index)", "round \(round): another key's bytes")
                return Int(fields[0])
            }
            #expect(Set(generations).count == 1, "round \(round): generations \(Set(generations))")
            let generation = try #require(generations.first ?? nil, "round \(round): no value")
            #expect(generation == lastDone || generation == lastDone + 1, "round \(round): \(generation) after \(lastDone) done")
        }
    }

    // MARK: - Limits

    @Test(arguments: [EvictionPolicy.lru, .s3fifo], ["countLimit", "sizeLimit"])
    func aBatchLargerThanALimitLeavesTheStoreWithinIt(policy: EvictionPolicy, limit: String) throws {
        // Given a store of at most 10 entries or 100 kB, and the same store written one by one
        let single = try TemporaryDirectory("disk-batch-single")
        let configure: (inout DiskStore.Configuration) -> Void = {
            $0.policy = policy
            $0.inlineThreshold = 4_096
            if limit == "countLimit" { $0.countLimit = 10 } else { $0.sizeLimit = 100_000 }
        }
        let store = try makeStore(configure)
        let oneByOne = try makeStore(in: single.url, configure)
        try store.setValues((0..<5).map { TierWrite(key: "old\($0)", data: DiskStoreTests.bytes(5_000, seed: UInt8($0))) })
        for index in 0..<5 {
            try oneByOne.setValue(DiskStoreTests.bytes(5_000, seed: UInt8(index)), forKey: "old\(index)")
        }
        let writes = (0..<30).map { TierWrite(key: "k\($0)", data: DiskStoreTests.bytes(8_000, seed: UInt8($0))) }
        // When a batch of 30 values is written
        try store.setValues(writes)
        for write in writes { try oneByOne.setValue(write.data, forKey: write.key) }
        // Then the limits hold, the last value is kept, and eviction chose as single writes do
        #expect(limit == "countLimit" ? store.totalCount <= 10 : store.totalSize <= 100_000)
        #expect(try store.value(forKey: "k29") == writes[29].data)
        #expect(try store.keys() == oneByOne.keys())
        #expect(store.statistics.writes == 35)
        #expect(store.statistics.evictions == oneByOne.statistics.evictions)
        #expect(store.statistics.evictions == 35 - store.totalCount)
        // And only the entries left have files
        let stored = try store.keys().filter { try store.attributes(forKey: $0)?.isInline == false }
        #expect(blobFiles().count == stored.count)
    }

    @Test(arguments: ["countLimit", "sizeLimit"])
    func aBatchIntoAZeroLimitIsAcceptedAndEvicted(limit: String) throws {
        // Given a value stored by a store without limits on the directory
        let unlimited = try makeStore()
        try unlimited.setValue(DiskStoreTests.bytes(30_000), forKey: "a")
        let store = try makeStore { if limit == "countLimit" { $0.countLimit = 0 } else { $0.sizeLimit = 0 } }
        // When a zero-limit store writes a batch
        try store.setValues([
            TierWrite(key: "a", data: Data("new".utf8)),
            TierWrite(key: "b", data: DiskStoreTests.bytes(30_000)),
            TierWrite(key: "a", data: Data("newer".utf8)),
        ])
        // Then each key's write counts as a write and an eviction, and nothing is left
        #expect(store.statistics.writes == 2)
        #expect(store.statistics.evictions == 2)
        #expect(try unlimited.value(forKey: "a") == nil)
        #expect(try unlimited.keys().isEmpty)
        #expect(blobFiles().isEmpty)
    }

    // MARK: - Coherence

    @Test func everyRowOfABatchAddsItsChangeRow() throws {
        // Given a store and a second connection reading the index's change rows
        let store = try makeStore()
        let connection = try openIndex()
        defer { connection.close() }
        let before = try connection.scalarInt64("SELECT COALESCE(MAX(seq), 0) FROM changes") ?? 0
        // When a batch writes three keys
        try store.setValues(["x", "y", "z"].map { TierWrite(key: $0, data: Data($0.utf8)) })
        // Then each has its change row, in order, for other stores to drop their copies
        let statement = try connection.statement("SELECT key FROM changes WHERE seq > ?1 ORDER BY seq")
        let keys: [String] = try statement.withReset { statement in
            try statement.bind(before, at: 1)
            var keys: [String] = []
            while try statement.step() { keys.append(statement.string(0)) }
            return keys
        }
        #expect(keys == ["x", "y", "z"])
    }
}
