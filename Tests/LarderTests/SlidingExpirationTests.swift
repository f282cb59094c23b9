import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// `Expiry.sliding`: every read renews the lifetime, in memory, on disk (batched with the read
/// log, never a write on the read's path) and through `Storage`.
@Suite(.timeLimit(.minutes(10)))
struct SlidingExpirationTests {
    let folder: TemporaryDirectory
    let clock = TestClock()

    init() throws {
        folder = try TemporaryDirectory("sliding")
    }

    @Test(arguments: [EvictionPolicy.lru, .s3fifo])
    func memoryRenewsASlidingLifetimeOnEachReadAndNotAFixedOne(policy: EvictionPolicy) throws {
        let store = try MemoryStore<String, Int>(configuration: .init(now: clock.closure, policy: policy))
        let start = clock.peek
        store.setValue(1, forKey: "sliding", expiry: .sliding(10))
        store.setValue(2, forKey: "fixed", expiry: .seconds(10))

        clock.advance(by: 8)
        let entry = try #require(store.entry(forKey: "sliding"))
        #expect(entry.expirationDate == start + 18 && entry.slidingInterval == 10)
        #expect(store.entry(forKey: "fixed")?.expirationDate == start + 10)
        #expect(store.entry(forKey: "fixed")?.slidingInterval == nil)
        clock.advance(by: 8)  // t16: the fixed entry is gone, the sliding one lives to t18
        #expect(store.value(forKey: "fixed") == nil)
        #expect(store.value(forKey: "sliding") == 1)
        clock.advance(by: 9)  // t25: renewed at t16, so alive until t26
        #expect(store.removeExpired() == 0)
        #expect(store.value(forKey: "sliding") == 1)
        clock.advance(by: 10.5)  // t35.5: 10.5 s without a read
        #expect(store.removeExpired() == 1)
        #expect(store.value(forKey: "sliding") == nil)
        #expect(store.invariantViolations().isEmpty)
    }

    @Test func memorySetExpiryStartsAndEndsASlidingLifetime() throws {
        let store = try MemoryStore<String, Int>(configuration: .init(now: clock.closure))
        let start = clock.peek
        store.setValue(1, forKey: "k", expiry: .seconds(5))
        #expect(store.setExpiry(.sliding(5), forKey: "k"))
        clock.advance(by: 4)
        #expect(store.entry(forKey: "k")?.expirationDate == start + 9)
        #expect(store.setExpiry(.seconds(5), forKey: "k"))  // fixed again, from t4
        clock.advance(by: 4)
        #expect(store.entry(forKey: "k")?.expirationDate == start + 9, "a read no longer renews it")
        clock.advance(by: 2)
        #expect(store.value(forKey: "k") == nil)
    }

    func makeDisk(_ name: String = "disk") throws -> DiskStore {
        try DiskStore(directory: folder.url.appendingPathComponent(name)) {
            $0.now = clock.closure
            $0.logHandler = nil
        }
    }

    /// A read can see a sliding entry's row expired while a ranking of reads that renews it is
    /// being written (the log no longer holds the renewal, the index not yet). The removal that
    /// follows looks again under the writer's lock and keeps the entry (this was a lost entry in
    /// CI: `storageMemoryHitsRenewTheDiskCopyAndPromotionsKeepTheSlidingLifetime`).
    @Test func anExpiredRowRenewedSinceItWasReadIsNotRemoved() throws {
        let store = try makeDisk()
        let start = clock.peek
        try store.setValue(Data("v".utf8), forKey: "k", expiry: .sliding(10))
        // Given the row as a reader saw it (expiring at t10)
        let stale = try #require(try store.withReader { try $0.location(forKey: "k") })
        // and a renewal to t18 written to the index since
        clock.advance(by: 8)
        #expect(try store.value(forKey: "k") == Data("v".utf8))
        store.writePendingRenewals()
        // When, at t12, the stale row says expired and the store removes it
        clock.advance(by: 4)
        let removed = try store.removeExpiredEntry(key: "k", location: stale)
        // Then nothing was removed, and the entry lives (to t18, renewed again by this read)
        #expect(!removed)
        let entry = try #require(try store.entry(forKey: "k"))
        #expect(entry.data == Data("v".utf8) && entry.expirationDate.map { $0 >= start + 18 } == true)
    }

    @Test(arguments: [4, 64 * 1024])
    func aDiskReadRenewsTheLifetimeInItsReadLogNotInTheIndex(size: Int) throws {
        let store = try makeDisk()
        let other = try makeDisk()  // another store on the directory: its own read log
        let start = clock.peek
        let value = Data(repeating: 7, count: size)  // inline, or a blob file
        try store.setValue(value, forKey: "k", expiry: .sliding(10))
        try store.setValue(Data("f".utf8), forKey: "fixed", expiry: .seconds(10))

        clock.advance(by: 8)
        let entry = try #require(try store.entry(forKey: "k"))
        #expect(entry.data == value && entry.expirationDate == start + 18 && entry.slidingInterval == 10)
        // The read wrote nothing: the index still says t10.
        #expect(try other.attributes(forKey: "k")?.expirationDate == start + 10)

        // t12: expired in the index, but the renewal this store logged keeps it alive.
        clock.advance(by: 4)
        #expect(try store.containsValue(forKey: "k"))
        #expect(try store.value(forKey: "k") == value)  // renewed again, to t22
        #expect(try store.value(forKey: "fixed") == nil)
        #expect(try store.removeExpired() == 0)
        #expect(try other.attributes(forKey: "k")?.expirationDate == start + 22, "written with the ranking")

        // t21: another store's read sees the renewed lifetime; t32.5 without a read ends it.
        clock.advance(by: 9)
        #expect(try other.value(forKey: "k") == value)
        other.close()
        clock.advance(by: 11.5)
        #expect(try store.value(forKey: "k") == nil)
        #expect(store.totalCount == 0)
    }

    @Test func renewalsSurviveCloseAndReopenAndSetExpiryIsNotUndoneByThem() throws {
        let start = clock.peek
        do {
            let store = try makeDisk()
            try store.setValue(Data("v".utf8), forKey: "k", expiry: .sliding(10))
            clock.advance(by: 5)
            #expect(try store.value(forKey: "k") != nil)  // renewed to t15, in the log
            store.close()
        }
        let store = try makeDisk()
        #expect(try store.attributes(forKey: "k")?.expirationDate == start + 15)

        clock.advance(by: 1)
        #expect(try store.value(forKey: "k") != nil)  // renewed to t16, in the log
        #expect(try store.setExpiry(.seconds(2), forKey: "k"))  // a fixed end at t8, after the renewal
        clock.advance(by: 1)
        #expect(try store.entry(forKey: "k")?.expirationDate == start + 8, "the logged renewal did not undo it")
        clock.advance(by: 2)
        #expect(try store.value(forKey: "k") == nil)
    }

    @Test func takeAndInsertSeeLifetimesRenewedInTheLog() throws {
        let store = try makeDisk()
        let start = clock.peek
        try store.setValue(Data("a".utf8), forKey: "a", expiry: .sliding(10))
        try store.setValue(Data("b".utf8), forKey: "b", expiry: .sliding(10))
        clock.advance(by: 9)
        _ = try store.value(forKey: "a")
        _ = try store.value(forKey: "b")
        clock.advance(by: 2)  // t11: both expired in the index, renewed to t19 in the log
        #expect(try !store.insertValue(Data("new".utf8), forKey: "a"), "a is alive")
        let taken = try #require(try store.takeEntry(forKey: "b"))
        #expect(taken.data == Data("b".utf8) && taken.expirationDate == start + 19 && taken.slidingInterval == 10)
    }

    func makeStorage() throws -> Storage<String, String> {
        try Storage(transformer: .string) {
            $0.directory = folder.url.appendingPathComponent("storage")
            $0.now = clock.closure
            $0.disk.logHandler = nil
        }
    }

    @Test func storageMemoryHitsRenewTheDiskCopyAndPromotionsKeepTheSlidingLifetime() throws {
        let storage = try makeStorage()
        let disk = try #require(storage.disk)
        let start = clock.peek
        try storage.setValue("v", forKey: "k", expiry: .sliding(10))
        for _ in 0..<3 {
            clock.advance(by: 8)
            #expect(try storage.entry(forKey: "k")?.tier == .memory)
        }
        // t24: memory renewed it to t34; its disk copy was renewed through the read log.
        #expect(try storage.entry(forKey: "k", tiers: .disk)?.expirationDate == start + 34)
        _ = try storage.removeAll(tiers: .memory)
        clock.advance(by: 9)  // t33
        let promoted = try #require(try storage.entry(forKey: "k"))
        #expect(promoted.tier == .disk && promoted.expirationDate == start + 43)
        #expect(storage.memory.entry(forKey: "k")?.slidingInterval == 10, "the memory copy slides too")
        clock.advance(by: 9)  // t42
        #expect(try storage.value(forKey: "k") == "v")
        disk.close()
        clock.advance(by: 10.5)
        #expect(try storage.value(forKey: "k", tiers: .memory) == nil)
    }

    @Test func anInvalidSlidingExpiryIsRefused() throws {
        let store = try makeDisk()
        #expect(throws: StorageError.self) { try store.setValue(Data("v".utf8), forKey: "k", expiry: .sliding(.infinity)) }
        #expect(throws: StorageError.self) { try DiskStore(directory: folder.url.appendingPathComponent("bad")) { $0.defaultExpiry = .sliding(0) } }
        #expect(try store.keys().isEmpty)
    }
}
