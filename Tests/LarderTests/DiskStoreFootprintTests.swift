import Foundation
import LarderTestSupport
import Testing
@testable import Larder

#if canImport(Glibc)
import Glibc
#endif

/// `sizeLimit` bounds the whole directory (index, write-ahead log, blobs, tmp, directories) as
/// the file system allocates it, within `DiskStore.footprintSlack`, for limits from 1 MiB to
/// 1 GiB; `footprint` reports it.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreFootprintTests {
    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("footprint")
    }

    /// What `du` reports for `path`: the blocks allocated to it and to everything under it.
    static func allocatedBytes(under path: String) -> Int {
        var total = DiskStore.allocatedSize(of: path)
        guard let children = try? FileManager.default.contentsOfDirectory(atPath: path) else { return total }
        for child in children { total += allocatedBytes(under: path + "/" + child) }
        return total
    }

    /// Sizes from a heavy-tailed (Pareto) distribution between 32 bytes and `largest`.
    static func sizes(count: Int, largest: Int, seed: UInt64) -> [Int] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let uniform = Double(random.next() >> 11) / Double(1 << 53)
            let pareto = 32 / pow(1 - uniform * 0.999999, 1 / 1.1)
            return min(largest, Int(pareto))
        }
    }

    @Test(arguments: [1 << 20, 16 << 20, 256 << 20, 1 << 30])
    func theDirectoryStaysWithinTheSizeLimitAtRest(limit: Int) throws {
        let directory = folder.url.appendingPathComponent("limit-\(limit)")
        let store = try DiskStore(directory: directory) {
            $0.sizeLimit = limit
            $0.logHandler = nil
        }
        // About twice the limit in all, in values up to 1/32 of it; checked as it goes.
        let largest = max(64 << 10, limit / 32)
        let sizes = Self.sizes(count: 4_000, largest: largest, seed: UInt64(limit))
        let written = sizes.reduce(0, +)
        let scale = max(1.0, 2.0 * Double(limit) / Double(written))
        var worst = 0
        var total = 0
        for (index, size) in sizes.enumerated() {
            let size = Int(Double(size) * scale)
            total += size
            try store.setValue(Data(repeating: UInt8(truncatingIfNeeded: index), count: min(size, largest)), forKey: "k\(index)")
            if index % 97 == 0 || index == sizes.count - 1 {
                worst = max(worst, Self.allocatedBytes(under: directory.path))
            }
            if total > 2 * limit { break }
        }
        let bound = limit + DiskStore.footprintSlack
        #expect(worst <= bound, "du reached \(worst) bytes under a limit of \(limit) (bound \(bound))")
        #expect(store.totalCount > 0, "the store still keeps values")
        #expect(worst >= limit / 2, "the store filled up to its limit (du reached \(worst))")
        // The reported footprint is the directory's, within a few blocks.
        let measured = Self.allocatedBytes(under: directory.path)
        let reported = try store.footprint
        #expect(abs(reported - measured) <= 64 << 10, "reported \(reported), du \(measured)")
        store.close()
    }

    @Test func indexPagesFreedByEvictionsGoBackWhenSmallValuesGiveWayToFiles() throws {
        let limit = 1 << 20
        let directory = folder.url.appendingPathComponent("phases")
        let store = try DiskStore(directory: directory) {
            $0.sizeLimit = limit
            $0.logHandler = nil
        }
        // Small values fill the index, then values in files push them out.
        for index in 0..<6_000 { try store.setValue(Data(repeating: 1, count: 200), forKey: "small\(index)") }
        let afterSmall = Self.allocatedBytes(under: directory.path)
        for index in 0..<200 { try store.setValue(Data(repeating: 2, count: 40_000), forKey: "large\(index)") }
        try store.setValue(Data(repeating: 3, count: 10), forKey: "last")
        let afterLarge = Self.allocatedBytes(under: directory.path)
        #expect(afterSmall <= limit + DiskStore.footprintSlack)
        let parts = ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "blobs", "tmp"].map {
            "\($0)=\(Self.allocatedBytes(under: directory.appendingPathComponent($0).path))"
        }
        #expect(afterLarge <= limit + DiskStore.footprintSlack, "du \(afterLarge) after the files replaced the small values: \(parts)")
        #expect(try store.value(forKey: "large199") == Data(repeating: 2, count: 40_000))
    }

    @Test func loweringTheLimitShrinksTheDirectory() throws {
        let directory = folder.url.appendingPathComponent("lowered")
        let store = try DiskStore(directory: directory) {
            $0.sizeLimit = 16 << 20
            $0.logHandler = nil
        }
        for index in 0..<300 { try store.setValue(Data(repeating: 4, count: 40_000), forKey: "k\(index)") }
        #expect(Self.allocatedBytes(under: directory.path) > 8 << 20)
        try store.setLimits(sizeLimit: 2 << 20)
        try store.setValue(Data(repeating: 5, count: 10), forKey: "after")  // a write checkpoints the log
        let measured = Self.allocatedBytes(under: directory.path)
        #expect(measured <= (2 << 20) + DiskStore.footprintSlack, "du \(measured) after lowering the limit to 2 MiB")
    }
}
