import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Large values handed out as open files: verified before they are handed out, readable for as
/// long as they are held whatever happens to the entry.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreOpenValueTests {
    let folder: TemporaryDirectory
    let clock = TestClock(Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        folder = try TemporaryDirectory("disk-open")
    }

    func makeStore(_ configure: (inout DiskStore.Configuration) -> Void = { _ in }) throws -> DiskStore {
        var configuration = DiskStore.Configuration()
        configuration.now = clock.closure
        configuration.logHandler = nil
        configure(&configuration)
        return try DiskStore(directory: folder.url.appendingPathComponent("store"), configuration: configuration)
    }

    static func bytes(_ count: Int, seed: UInt8 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    static func readAll(_ opened: DiskStore.OpenedValue) throws -> Data {
        try opened.fileHandle.seek(toOffset: 0)
        return try opened.fileHandle.readToEnd() ?? Data()
    }

    @Test func aLargeValueStaysReadableWhileHeldAfterOverwriteRemovalAndEviction() throws {
        let store = try makeStore { $0.countLimit = 3 }
        let value = Self.bytes(3 << 20)
        try store.setValue(value, forKey: "movie", expiry: .seconds(60), metadata: Data("video/mp4".utf8),
                           isCompressible: false)
        let opened = try #require(try store.openValue(forKey: "movie"))
        #expect(opened.size == value.count)
        #expect(opened.metadata == Data("video/mp4".utf8))
        #expect(opened.expirationDate == clock.peek.addingTimeInterval(60))
        #expect(try Self.readAll(opened) == value)

        // Overwritten, then removed, then its replacement evicted: the open file is unchanged.
        try store.setValue(Self.bytes(100, seed: 1), forKey: "movie")
        #expect(try Self.readAll(opened) == value)
        let second = try #require(try store.openValue(forKey: "movie"))
        try store.removeValue(forKey: "movie")
        #expect(try Self.readAll(second) == Self.bytes(100, seed: 1))
        #expect(try Self.readAll(opened) == value)
        #expect(try store.openValue(forKey: "movie") == nil)
    }

    @Test(arguments: [false, true])
    func inlineAndCompressedValuesAreDecodedIntoATemporaryFile(compressed: Bool) throws {
        let store = try makeStore { $0.compression = compressed ? .gzip(level: 6) : .none }
        let value = compressed ? Data(repeating: 65, count: 200_000) : Data("small".utf8)
        try store.setValue(value, forKey: "k")
        let opened = try #require(try store.openValue(forKey: "k"))
        #expect(opened.size == value.count)
        #expect(try Self.readAll(opened) == value)
        // The temporary file has no name: tmp/ holds nothing.
        let tmp = folder.url.appendingPathComponent("store/tmp").path
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
    }

    @Test func damagedMissingAndExpiredValuesAreMisses() throws {
        let store = try makeStore { $0.inlineThreshold = 0 }
        try store.setValue(Self.bytes(50_000), forKey: "flipped")
        try store.setValue(Self.bytes(50_000, seed: 2), forKey: "soon", expiry: .seconds(5))
        let attributes = try #require(try store.attributes(forKey: "flipped"))
        #expect(!attributes.isInline)
        // Flip one byte at the end of every blob of "flipped" (the last one written first).
        var flippedOne = false
        for path in StoreChecks.blobFiles(in: folder.url.appendingPathComponent("store")) {
            let url = URL(fileURLWithPath: path)
            var data = try Data(contentsOf: url)
            if data == Self.bytes(50_000) {
                data[49_999] ^= 1
                try data.write(to: url)
                flippedOne = true
            }
        }
        try #require(flippedOne)
        #expect(try store.openValue(forKey: "flipped") == nil, "a damaged value is never handed out")
        #expect(try store.attributes(forKey: "flipped") == nil, "and its entry is gone")
        #expect(store.statistics.corruptEntriesDropped == 1)
        clock.advance(by: 6)
        #expect(try store.openValue(forKey: "soon") == nil)
        #expect(try store.openValue(forKey: "missing") == nil)
        #expect(store.totalCount == 0)
    }
}
