import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LarderTestSupport
import Larder
@testable import LarderImage

import Testing

/// Interrupted downloads resume with `Range` and `If-Range`, against the loopback server
/// answering ranges as RFC 9110 section 14 says and cutting connections part way.
@Suite(.timeLimit(.minutes(10)))
struct ResumableDownloadTests {
    let directory: TemporaryDirectory
    /// A 200 KB PNG: the fixture with a large text chunk before its `IEND`.
    let image: Data

    init() throws {
        directory = try TemporaryDirectory("resumable")
        image = try Self.largePNG(seed: 0)
    }

    static func largePNG(seed: Int) throws -> Data {
        let png = try Fixture.all.first { $0.name == "image.png" }!.data
        let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: ($0 &* 7 &+ seed) % 251) })
        let length = UInt32(payload.count)
        var chunk = Data([UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
        chunk.append(contentsOf: Array("tEXt".utf8))
        chunk.append(payload)
        chunk.append(contentsOf: [0, 0, 0, 0])
        return png.prefix(png.count - 12) + chunk + png.suffix(12)
    }

    /// What the server serves now, and how it answers.
    struct Served: Sendable {
        var body: Data
        var entityTag: String? = "\"v1\""
        var lastModified: String? = nil
        /// Body bytes to send before closing the connection, by request number (1-based); a
        /// request not listed gets its whole body.
        var cuts: [Int: Int] = [:]
        /// Whether a range request gets a 206 (else the server ignores ranges).
        var honoursRanges = true
        /// Added to the start of every `Content-Range` (a server that answers the wrong range).
        var rangeSkew = 0
    }

    /// A loopback server answering `served` at every path, honouring `Range` with `If-Range` and
    /// recording each request's `Range` and `If-Range` header fields.
    final class RangeServer: Sendable {
        let served: Locked<Served>
        let requests: Locked<[(range: String?, ifRange: String?)]>
        let server: TestHTTPServer

        init(_ served: Served) throws {
            let state = Locked(served)
            let requests = Locked<[(range: String?, ifRange: String?)]>([])
            self.served = state
            self.requests = requests
            server = try TestHTTPServer { _, attempt, headers in
                requests.withLock { $0.append((headers["range"], headers["if-range"])) }
                let served = state.withLock { $0 }
                var fields = [("Content-Type", "image/png")]
                if let tag = served.entityTag { fields.append(("ETag", tag)) }
                if let date = served.lastModified { fields.append(("Last-Modified", date)) }
                let total = served.body.count
                var status = 200
                var start = 0
                if served.honoursRanges, let range = headers["range"], range.hasPrefix("bytes="), range.hasSuffix("-"),
                   let from = Int(range.dropFirst(6).dropLast()), from < total,
                   let ifRange = headers["if-range"], ifRange == served.entityTag || ifRange == served.lastModified {
                    status = 206
                    start = from
                    fields.append(("Content-Range", "bytes \(from + served.rangeSkew)-\(total - 1)/\(total)"))
                }
                let body = served.body[start...]
                let sent = served.cuts[attempt].map { body.prefix($0) } ?? body
                return TestHTTPServer.Response(status: status, headers: fields, body: Data(sent), declaredLength: body.count)
            }
        }

        func url(_ path: String) -> URL { server.url(path) }
        var log: [(range: String?, ifRange: String?)] { requests.withLock { $0 } }
    }

    func makeFetcher(attempts: Int = 3) -> HTTPImageFetcher {
        HTTPImageFetcher {
            $0.timeout = .seconds(10)
            $0.maximumAttempts = attempts
            $0.retryDelay = .milliseconds(10)
            $0.hostFailureThreshold = 0
        }
    }

    func makeCache(attempts: Int = 1) throws -> ImageCache {
        try ImageCache(fetcher: makeFetcher(attempts: attempts)) {
            $0.directory = directory.url
            $0.disk.logHandler = nil
        }
    }

    var partialFile: URL { directory.url.appendingPathComponent("partial") }

    var keptFiles: [String] {
        (try? FileManager.default.contentsOfDirectory(
            atPath: directory.url.appendingPathComponent("partial-downloads").path)) ?? []
    }

    // MARK: - Resuming

    @Test(arguments: [("\"v1\"", nil), (nil, "Sat, 21 Nov 2026 10:00:00 GMT")] as [(String?, String?)])
    func aCutDownloadResumesWhereItStoppedAndNoByteIsSentTwice(entityTag: String?, lastModified: String?) async throws {
        // Given a server that cuts the first response after 70,000 of 200 KB, with a strong
        // ETag or a Last-Modified date
        let image = self.image
        let range = try RangeServer(Served(body: image, entityTag: entityTag, lastModified: lastModified, cuts: [1: 70_000]))
        // When the image is fetched with a file for the interrupted download
        let fetched = try await makeFetcher().fetch(range.url("/big.png"), partialDownloadFile: partialFile)
        // Then the second attempt asked for the rest, with the validator, and got it
        #expect(fetched.data == image)
        #expect(fetched.statusCode == 200 && fetched.format == .png)
        let log = range.log
        #expect(log.count == 2)
        #expect(log.first?.range == nil)
        #expect(log.last?.range == "bytes=70000-")
        #expect(log.last?.ifRange == (entityTag ?? lastModified))
        // And the server sent each byte once; the kept bytes are gone
        #expect(range.server.bodyBytesSent("/big.png") == image.count)
        #expect(!FileManager.default.fileExists(atPath: partialFile.path))
    }

    @Test
    func aResumptionThatIsCutAgainKeepsGrowingAcrossFetches() async throws {
        // Given a server that cuts the first two responses, and a fetcher with one attempt per fetch
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 50_000, 2: 60_000]))
        let fetcher = makeFetcher(attempts: 1)
        let url = range.url("/twice.png")
        // When the first two fetches are cut off, then a third runs
        for expected in [50_000, 110_000] {
            await #expect(throws: ImageFetchError.truncated(expected: Int64(image.count), received: Int64(expected))) {
                try await fetcher.fetch(url, partialDownloadFile: partialFile)
            }
        }
        let fetched = try await fetcher.fetch(url, partialDownloadFile: partialFile)
        // Then it asked for the rest each time and every byte came once
        #expect(fetched.data == image)
        #expect(range.log.map(\.range) == [nil, "bytes=50000-", "bytes=110000-"])
        #expect(range.server.bodyBytesSent("/twice.png") == image.count)
    }

    @Test
    func aCacheResumesAfterARelaunchAndRemovesTheKeptBytes() async throws {
        // Given a cache whose download is cut off (one attempt)
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 120_000]))
        let key = ImageKey(range.url("/relaunch.png"))
        do {
            let cache = try makeCache()
            await #expect(throws: ImageFetchError.self) { try await cache.image(for: key) }
            #expect(keptFiles.count == 1)
        }
        // When a new cache on the same directory (a relaunch) loads the image
        let cache = try makeCache()
        let result = try await cache.image(for: key)
        // Then it resumed: the whole image, each byte sent once, the kept bytes removed
        #expect(result.source == .network && result.data == image)
        #expect(range.log.last?.range == "bytes=120000-")
        #expect(range.server.bodyBytesSent("/relaunch.png") == image.count)
        #expect(keptFiles.isEmpty)
        // And the image is cached as a whole, complete file
        let cached = try #require(try await cache.cachedImage(for: key))
        #expect(cached.data == image)
    }

    // MARK: - Starting over

    @Test
    func aChangedImageStartsFromZeroWithoutMixingVersions() async throws {
        // Given a download of version 1 cut off, after which the server has version 2
        let first = image, second = try Self.largePNG(seed: 3)
        let range = try RangeServer(Served(body: first, entityTag: "\"v1\"", cuts: [1: 90_000]))
        let fetcher = makeFetcher(attempts: 1)
        let url = range.url("/changed.png")
        await #expect(throws: ImageFetchError.self) { try await fetcher.fetch(url, partialDownloadFile: partialFile) }
        range.served.withLock { $0.body = second; $0.entityTag = "\"v2\"" }
        // When it is fetched again
        let fetched = try await fetcher.fetch(url, partialDownloadFile: partialFile)
        // Then the If-Range with v1 got the whole of version 2 (a 200), nothing of version 1
        #expect(range.log.last?.ifRange == "\"v1\"")
        #expect(fetched.data == second && fetched.entityTag == "\"v2\"")
        #expect(!FileManager.default.fileExists(atPath: partialFile.path))
    }

    @Test
    func aServerThatIgnoresRangesSendsTheWholeImageAgain() async throws {
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 80_000], honoursRanges: false))
        let fetched = try await makeFetcher().fetch(range.url("/ignores.png"), partialDownloadFile: partialFile)
        #expect(fetched.data == image)
        #expect(range.log.last?.range == "bytes=80000-")
        #expect(range.server.bodyBytesSent("/ignores.png") == 80_000 + image.count)
    }

    @Test
    func a206ThatDoesNotContinueTheKeptBytesIsDiscardedAndTheImageAskedForWhole() async throws {
        // Given a server whose 206 answers start 10 bytes before what was asked
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 80_000], rangeSkew: -10))
        // When the cut download is retried
        let fetched = try await makeFetcher().fetch(range.url("/skew.png"), partialDownloadFile: partialFile)
        // Then the bad 206 was dropped and the next request asked for everything
        #expect(fetched.data == image)
        #expect(range.log.map(\.range) == [nil, "bytes=80000-", nil])
        #expect(!FileManager.default.fileExists(atPath: partialFile.path))
    }

    @Test
    func aWeakEntityTagAloneIsNotResumed() async throws {
        let image = self.image
        let range = try RangeServer(Served(body: image, entityTag: "W/\"v1\"", cuts: [1: 80_000]))
        let fetched = try await makeFetcher().fetch(range.url("/weak.png"), partialDownloadFile: partialFile)
        #expect(fetched.data == image)
        #expect(range.log.map(\.range) == [nil, nil])
        #expect(!FileManager.default.fileExists(atPath: partialFile.path))
    }

    // MARK: - Checks and cleanup

    @Test
    func anAssembledImageThatIsNotCompleteIsRefusedAndNotCached() async throws {
        // Given a server whose bytes after the cut belong to a PNG without its IEND chunk (the
        // same ETag on damaged content)
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 70_000]))
        let key = ImageKey(range.url("/damaged.png"))
        let cache = try makeCache()
        await #expect(throws: ImageFetchError.self) { try await cache.image(for: key) }
        range.served.withLock { $0.body = image.prefix(image.count - 12) + Data(repeating: 0, count: 12) }
        // When the download is resumed
        let error = await #expect(throws: ImageCacheError.self) { try await cache.image(for: key) }
        // Then the assembled file fails the complete-file check, as any download would
        guard case .invalidImageData? = error else { Issue.record("expected invalidImageData, got \(String(describing: error))"); return }
        #expect(range.log.last?.range == "bytes=70000-")
        #expect(try await cache.cachedImage(for: key) == nil)
    }

    @Test
    func removingTheImageRemovesItsKeptBytes() async throws {
        // Given a cut download kept for an image
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 70_000]))
        let key = ImageKey(range.url("/removed.png"))
        let cache = try makeCache()
        await #expect(throws: ImageFetchError.self) { try await cache.image(for: key) }
        #expect(keptFiles.count == 1)
        // When the image is removed, the next load starts from zero
        try await cache.removeImage(source: key)
        #expect(keptFiles.isEmpty)
        #expect(try await cache.image(for: key).data == image)
        #expect(range.log.last?.range == nil)
        // And clearing the disk removes kept bytes as well
        range.served.withLock { $0.cuts = [1: 10_000] }  // request numbers count per path
        let other = ImageKey(range.url("/other.png"))
        await #expect(throws: ImageFetchError.self) { try await cache.image(for: other) }
        #expect(keptFiles.count == 1)
        try await cache.removeAll(tiers: .disk)
        #expect(keptFiles.isEmpty)
    }

    @Test
    func theCacheKeepsABoundedNumberOfInterruptedDownloads() async throws {
        // Given a server that cuts the first response for every path
        let image = self.image
        let range = try RangeServer(Served(body: image, cuts: [1: 30_000]))
        let cache = try makeCache()
        // When more images than the limit are cut off
        let count = ImageCache.partialDownloadCountLimit + 3
        for index in 0..<count {
            await #expect(throws: ImageFetchError.self) { try await cache.image(for: ImageKey(range.url("/\(index).png"))) }
        }
        // Then only the limit's worth of kept downloads are left, the last one among them
        #expect(keptFiles.count == ImageCache.partialDownloadCountLimit)
        let last = try #require(cache.partialDownloadFile(for: ImageKey(range.url("/\(count - 1).png"))))
        #expect(FileManager.default.fileExists(atPath: last.path))
    }

    @Test
    func theKeptDownloadsAreBoundedInBytesTheLeastRecentlyWrittenGoingFirst() throws {
        // Given three kept downloads of 30 MiB each (sparse files), written one after another
        let cache = try makeCache()
        let directory = try #require(cache.partialDownloadsDirectory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let size = UInt64(30 * 1024 * 1024)
        let names = ["oldest", "middle", "newest"]
        for (age, name) in names.enumerated() {
            let file = directory.appendingPathComponent(name)
            #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: size)
            try handle.close()
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSince1970: 1_000_000 + Double(age) * 60)], ofItemAtPath: file.path)
        }
        #expect(3 * Int(size) > ImageCache.partialDownloadSizeLimit)
        // When the cache trims them (as it does after every interrupted download)
        cache.trimPartialDownloads()
        // Then the least recently written goes, and what is left fits the limit
        #expect(Set(keptFiles) == ["middle", "newest"])
    }

    @Test
    func aDamagedOrForeignKeptFileIsIgnoredAndRemoved() throws {
        // Given a kept download written for one URL
        let header = PartialDownload.Header(url: "http://a.test/a.png", entityTag: "\"v1\"", total: 10, count: 4)
        PartialDownload(header: header, data: Data([1, 2, 3, 4])).write(to: partialFile)
        // Then it reads back for that URL only (another URL's read removes it)
        #expect(PartialDownload.read(from: partialFile, url: "http://a.test/a.png")?.data == Data([1, 2, 3, 4]))
        #expect(PartialDownload.read(from: partialFile, url: "http://a.test/b.png") == nil)
        #expect(!FileManager.default.fileExists(atPath: partialFile.path))
        // And a file cut short is ignored and removed
        PartialDownload(header: header, data: Data([1, 2, 3, 4])).write(to: partialFile)
        let contents = try Data(contentsOf: partialFile)
        try contents.dropLast(1).write(to: partialFile)
        #expect(PartialDownload.read(from: partialFile, url: "http://a.test/a.png") == nil)
        #expect(!FileManager.default.fileExists(atPath: partialFile.path))
    }

    @Test
    func contentRangeParsesOnlyACompleteByteRange() {
        #expect(ContentRange("bytes 10-99/100") == ContentRange("bytes 10-99/100"))
        #expect(ContentRange("bytes 10-99/100")?.start == 10)
        for bad in ["bytes 10-99/*", "bytes */100", "bytes 10-100/100", "bytes 20-10/100", "items 0-1/2", "bytes -1-5/9"] {
            #expect(ContentRange(bad) == nil, "\(bad)")
        }
    }
}

/// The same resumption against Python's `http.server` (`Fixtures/range_server.py`, run as a
/// child process): another server's idea of ranges, validators and a cut connection.
@Suite(.timeLimit(.minutes(10)), .enabled(if: PythonRangeServer.isAvailable, "python3 is not installed"))
struct ResumableDownloadPythonTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory("resumable-python")
    }

    func makeCache(attempts: Int) throws -> ImageCache {
        let fetcher = HTTPImageFetcher {
            $0.timeout = .seconds(10)
            $0.maximumAttempts = attempts
            $0.retryDelay = .milliseconds(10)
            $0.hostFailureThreshold = 0
        }
        return try ImageCache(fetcher: fetcher) {
            $0.directory = directory.url.appendingPathComponent("cache")
            $0.disk.logHandler = nil
        }
    }

    @Test
    func aCutDownloadFromPythonsServerResumesAndNoByteIsSentTwice() async throws {
        // Given Python's server with a 200 KB PNG whose first response it cuts after 75,000 bytes
        let image = try ResumableDownloadTests.largePNG(seed: 1)
        let server = try PythonRangeServer(files: ["big.png": image], cut: 75_000, in: directory)
        let cache = try makeCache(attempts: 3)
        // When the image is loaded through a cache
        let result = try await cache.image(for: ImageKey(server.url("big.png")))
        // Then the retry asked for the rest and the server sent every byte once
        #expect(result.source == .network && result.data == image)
        #expect(try await server.bytesSent("big.png") == image.count)
    }

    @Test
    func aFileChangedOnPythonsServerIsDownloadedWholeAgain() async throws {
        // Given a download cut off by Python's server, after which the file changes
        let first = try ResumableDownloadTests.largePNG(seed: 1)
        let second = try ResumableDownloadTests.largePNG(seed: 2)
        let server = try PythonRangeServer(files: ["c.png": first], cut: 75_000, in: directory)
        let key = ImageKey(server.url("c.png"))
        await #expect(throws: ImageFetchError.self) { try await makeCache(attempts: 1).image(for: key) }
        // (a new modification time and size, so a new ETag and Last-Modified)
        try await Task.sleep(for: .milliseconds(1_100))
        try (second + Data([0])).write(to: server.root.appendingPathComponent("c.png"))
        // When it is loaded again
        let result = try await makeCache(attempts: 1).image(for: key)
        // Then the If-Range did not match: the whole new file came, nothing of the old one
        #expect(result.data == second + Data([0]))
        #expect(try await server.bytesSent("c.png") == 75_000 + second.count + 1)
    }
}

/// `Fixtures/range_server.py` on loopback, started by the test and killed with it.
final class PythonRangeServer {
    let root: URL
    let port: Int
    private let process: Process
    private let input = Pipe()

    /// Whether `python3` can be run (CI always runs these tests: `.ci/run` installs it).
    static let isAvailable: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        return paths.contains { FileManager.default.isExecutableFile(atPath: "\($0)/python3") }
    }()

    init(files: [String: Data], cut: Int, in directory: TemporaryDirectory) throws {
        root = directory.url.appendingPathComponent("served")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        for (name, data) in files { try data.write(to: root.appendingPathComponent(name)) }
        let script = try #require(Bundle.module.url(forResource: "range_server", withExtension: "py", subdirectory: "Fixtures"))
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, root.path, String(cut)]
        let output = Pipe()
        process.standardOutput = output
        // The server exits when this pipe closes: at deinit, or when the test process dies.
        process.standardInput = input
        try process.run()
        // The first line is the port; an empty read means the server did not start.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            try? input.fileHandleForWriting.close()
            process.terminate()
            throw POSIXError(.ECHILD)
        }
        self.port = port
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    func url(_ name: String) -> URL { URL(string: "http://127.0.0.1:\(port)/\(name)")! }

    /// The body bytes the server sent for `name`, over every response.
    func bytesSent(_ name: String) async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: url("__sent/\(name)"))
        return try #require(Int(String(decoding: data, as: UTF8.self)))
    }
}
