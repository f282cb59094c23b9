import Foundation
import Larder
import LarderTestSupport
import Testing

/// The hits, misses and evictions every store on a directory adds to its index, read back by
/// another store (what `larder stats` shows).
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreDirectoryStatisticsTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("directory-statistics")
    }

    func store(countLimit: Int = 100, sizeLimit: Int = 1 << 20) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.countLimit = countLimit
        configuration.sizeLimit = sizeLimit
        return try DiskStore(directory: folder.url, configuration: configuration)
    }

    @Test func twoStoresCountsAddUpInTheIndex() throws {
        // Given a store that read two hits and a miss, then closed
        let first = try store()
        try first.setValue(Data("v".utf8), forKey: "k")
        _ = try first.value(forKey: "k")
        _ = try first.value(forKey: "k")
        _ = try first.value(forKey: "absent")
        first.close()

        // When a second store, with another size limit, reads a hit and two misses and closes
        let second = try store(sizeLimit: 2 << 20)
        _ = try second.value(forKey: "k")
        _ = try second.value(forKey: "absent")
        _ = try second.value(forKey: "other")
        second.close()

        // Then a third store sees both stores' counts, and the last size limit written
        let third = try store()
        let statistics = try third.directoryStatistics()
        #expect(statistics.hits == 3)
        #expect(statistics.misses == 3)
        #expect(statistics.sizeLimit == 2 << 20)
        #expect(statistics.totalCount == 1)
        third.close()
    }

    @Test func eachWriteOfTheLoggedReadsAddsOnlyTheGrowthSinceTheLastOne() throws {
        // Given a store with a value
        let store = try store()
        try store.setValue(Data("v".utf8), forKey: "k")

        // When it reads, writes its logged reads (a trim does), reads again and writes again
        _ = try store.value(forKey: "k")
        try store.trim(toCount: 100)
        let once = try store.directoryStatistics().hits
        _ = try store.value(forKey: "k")
        _ = try store.value(forKey: "gone")
        try store.trim(toCount: 100)

        // Then the index counts each read once, also after the close writes once more
        #expect(once == 1)
        #expect(try store.directoryStatistics().hits == 2)
        #expect(try store.directoryStatistics().misses == 1)
        store.close()
        let reader = try self.store()
        #expect(try reader.directoryStatistics().hits == 2)
        #expect(try reader.directoryStatistics().misses == 1)
        reader.close()
    }

    @Test func evictionsByTheLimitsAreCountedInTheIndex() throws {
        // Given a store that keeps two entries
        let store = try store(countLimit: 2)

        // When five are written
        for index in 0..<5 { try store.setValue(Data([UInt8(index)]), forKey: "k\(index)") }

        // Then the index counts as many evictions as the store did
        let evictions = store.statistics.evictions
        #expect(evictions >= 3)
        #expect(try store.directoryStatistics().evictions == evictions)
        #expect(try store.directoryStatistics().totalCount <= 2)
        store.close()
    }

    @Test func aStoreWithoutALimitRecordsNone() throws {
        // Given a store with no size limit (as the `larder` tool opens one)
        let store = try store(sizeLimit: .max)

        // When it reads and writes
        try store.setValue(Data("v".utf8), forKey: "k")
        _ = try store.value(forKey: "k")
        store.close()

        // Then its hit is counted but no limit is recorded
        let reader = try self.store(sizeLimit: .max)
        #expect(try reader.directoryStatistics().hits == 1)
        #expect(try reader.directoryStatistics().sizeLimit == nil)
        reader.close()
    }
}
