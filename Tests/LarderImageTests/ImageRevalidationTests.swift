import Foundation
import Larder
import LarderTestSupport
import Synchronization
import Testing
@testable import LarderImage

/// Stale images against a real loopback server: conditional requests and `304` refreshes in
/// place (no body sent, the blob file untouched), `200` replacements, `no-cache`,
/// `stale-while-revalidate` with concurrent callers, `stale-if-error`, and exact statistics.
@Suite(.timeLimit(.minutes(10)))
struct ImageRevalidationTests {
    let clock = TestClock()
    let folder: TemporaryDirectory
    let png: Data
    let gif: Data
    /// A JPEG of 40 KB and more (a comment segment pads it), so the disk keeps it in a blob file.
    let bigJPEG: Data

    init() throws {
        folder = try TemporaryDirectory("revalidation")
        func fixture(_ name: String) throws -> Data { try #require(Fixture.all.first { $0.name == name }).data }
        png = try fixture("image.png")
        gif = try fixture("image.gif")
        let jpeg = try fixture("image.jpg")
        let comment = [UInt8](repeating: 0x41, count: 40_000)
        bigJPEG = jpeg.prefix(2) + Data([0xFF, 0xFE] + Bytes.be16(UInt16(comment.count + 2)) + comment) + jpeg.dropFirst(2)
    }

    var directory: URL { folder.url.appendingPathComponent("images") }

    func makeCache(_ configure: (inout HTTPImageFetcher.Configuration) -> Void = { _ in }) throws -> ImageCache {
        var fetcherConfiguration = HTTPImageFetcher.Configuration()
        fetcherConfiguration.maximumAttempts = 1
        fetcherConfiguration.now = clock.now
        configure(&fetcherConfiguration)
        return try ImageCache(fetcher: HTTPImageFetcher(configuration: fetcherConfiguration)) {
            $0.directory = directory
            $0.disk.logHandler = nil
            $0.now = clock.now
        }
    }

    /// The one blob file of the disk tier: its inode, modification date and size.
    func blobFile() throws -> (inode: Int, modified: Date, size: Int) {
        let blobs = directory.appendingPathComponent("blobs")
        let files = try #require(FileManager.default.enumerator(at: blobs, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }
            .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
        try #require(files.count == 1, "one blob file, found \(files.count)")
        let attributes = try FileManager.default.attributesOfItem(atPath: files[0].path)
        return (try #require(attributes[.systemFileNumber] as? Int), try #require(attributes[.modificationDate] as? Date),
                try #require(attributes[.size] as? Int))
    }

    /// Polls until `condition` holds; the suite's time limit ends a wait that never succeeds.
    func eventually(_ condition: () -> Bool) async {
        while !condition() { try? await Task.sleep(for: .milliseconds(1)) }
    }

    // MARK: - 304 and 200

    @Test func a304RefreshesTheLifetimeWithoutTransferringOrRewritingTheBytes() async throws {
        // Given a 40 KB JPEG served for 60 s with an ETag, answered 304 for 600 s when it matches
        let body = bigJPEG
        let server = try TestHTTPServer { _, _, headers in
            if headers["if-none-match"] == "\"v1\"" {
                return .init(status: 304, headers: [("ETag", "\"v1\""), ("Cache-Control", "max-age=600")])
            }
            return .init(headers: [("Content-Type", "image/jpeg"), ("ETag", "\"v1\""), ("Cache-Control", "max-age=60")],
                         body: body)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/big.jpg"))
        let first = try await cache.image(for: key)
        let blob = try blobFile()
        #expect(first.source == .network && first.freshness == .fresh)
        #expect(server.bodyBytesSent("/big.jpg") == body.count)

        // When the image goes stale and is asked for again
        clock.advance(by: 120)
        let second = try await cache.image(for: key)

        // Then one conditional request confirmed it: no body was sent, the blob file is the
        // same file, unchanged, and the image is fresh for the 304's 600 s
        #expect(second.freshness == .revalidated)
        #expect(second.source == .memory)
        #expect(second.data == body)
        #expect(server.requestCount("/big.jpg") == 2)
        #expect(server.requestHeaders("/big.jpg")["if-none-match"] == "\"v1\"")
        #expect(server.bodyBytesSent("/big.jpg") == body.count)
        let after = try blobFile()
        #expect(after.inode == blob.inode && after.modified == blob.modified && after.size == blob.size)
        #expect(second.metadata.freshUntil == clock.now().addingTimeInterval(600))

        // And the disk's copy has the new lifetime, also for a cache opened afresh
        try await cache.removeAll(tiers: .memory)
        let fromDisk = try await cache.image(for: key)
        #expect(fromDisk.source == .disk && fromDisk.freshness == .fresh)
        #expect(fromDisk.metadata.freshUntil == clock.now().addingTimeInterval(600))
        let reopened = try makeCache()
        clock.advance(by: 500)
        let afterReopening = try await reopened.image(for: key)
        #expect(afterReopening.source == .disk && afterReopening.freshness == .fresh)
        #expect(server.requestCount("/big.jpg") == 2)

        // And past the new lifetime it is revalidated again, still without a body
        clock.advance(by: 200)
        #expect(try await reopened.image(for: key).freshness == .revalidated)
        #expect(server.requestCount("/big.jpg") == 3)
        #expect(server.bodyBytesSent("/big.jpg") == body.count)
        let last = try blobFile()
        #expect(last.inode == blob.inode && last.modified == blob.modified)
    }

    @Test func aMemoryOnlyCacheRevalidatesAndKeepsTheRefreshedImageInMemory() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, _, headers in
            if headers["if-none-match"] == "\"m\"" { return .init(status: 304, headers: [("Cache-Control", "max-age=300")]) }
            return .init(headers: [("Content-Type", "image/png"), ("ETag", "\"m\""), ("Cache-Control", "max-age=60")], body: png)
        }
        let cache = try ImageCache(fetcher: HTTPImageFetcher { $0.maximumAttempts = 1; $0.now = clock.now }) {
            $0.now = clock.now
        }
        let key = ImageKey(server.url("/m.png"))
        _ = try await cache.image(for: key)
        clock.advance(by: 61)
        #expect(try await cache.image(for: key).freshness == .revalidated)
        clock.advance(by: 200)
        let fresh = try await cache.image(for: key)
        #expect(fresh.freshness == .fresh && fresh.source == .memory)
        #expect(server.requestCount("/m.png") == 2 && server.bodyBytesSent("/m.png") == png.count)
    }

    @Test func lastModifiedAloneIsSentAsIfModifiedSince() async throws {
        let png = self.png
        let stamp = "Sat, 21 Nov 2026 10:00:00 GMT"
        let server = try TestHTTPServer { _, _, headers in
            if headers["if-modified-since"] == stamp { return .init(status: 304) }
            return .init(headers: [("Content-Type", "image/png"), ("Last-Modified", stamp), ("Cache-Control", "max-age=60")],
                         body: png)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/a.png"))
        _ = try await cache.image(for: key)
        clock.advance(by: 61)
        let result = try await cache.image(for: key)
        #expect(result.freshness == .revalidated)
        #expect(server.requestHeaders("/a.png")["if-none-match"] == nil)
        // A 304 that says nothing about freshness keeps the lifetime the image had
        #expect(result.metadata.freshUntil == clock.now().addingTimeInterval(60))
        #expect(result.metadata.lastModified == stamp)
    }

    @Test func a200ToAConditionalRequestReplacesTheImage() async throws {
        // Given a PNG with ETag v1, replaced on the server by a GIF with ETag v2
        let png = self.png, gif = self.gif
        let server = try TestHTTPServer { _, attempt, _ in
            attempt == 1
                ? .init(headers: [("Content-Type", "image/png"), ("ETag", "\"v1\""), ("Cache-Control", "max-age=60")], body: png)
                : .init(headers: [("Content-Type", "image/gif"), ("ETag", "\"v2\""), ("Cache-Control", "max-age=60")], body: gif)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/swap"))
        _ = try await cache.image(for: key)

        // When it is stale and revalidated
        clock.advance(by: 61)
        let result = try await cache.image(for: key)

        // Then the conditional request got the new image, which replaced the old in every tier
        #expect(server.requestHeaders("/swap")["if-none-match"] == "\"v1\"")
        #expect(result.source == .network && result.freshness == .fresh)
        #expect(result.data == gif && result.metadata.entityTag == "\"v2\"")
        try await cache.removeAll(tiers: .memory)
        let fromDisk = try await cache.image(for: key)
        #expect(fromDisk.source == .disk && fromDisk.data == gif && fromDisk.metadata.entityTag == "\"v2\"")
        #expect(server.requestCount("/swap") == 2)
        #expect(cache.statistics.revalidations == 1 && cache.statistics.downloads == 1)
    }

    // MARK: - Directives

    @Test(arguments: ["no-cache", "max-age=0"])
    func anImageWithAValidatorThatMustBeRevalidatedIsAskedAboutAtEveryUse(_ directive: String) async throws {
        let png = self.png
        let server = try TestHTTPServer { _, _, headers in
            if headers["if-none-match"] == "\"n\"" { return .init(status: 304, headers: [("Cache-Control", directive)]) }
            return .init(headers: [("Content-Type", "image/png"), ("ETag", "\"n\""), ("Cache-Control", directive)], body: png)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/n.png"))
        #expect(try await cache.image(for: key).source == .network)
        // Each later use, even at the same instant, makes one conditional request and no download
        for _ in 0..<3 { #expect(try await cache.image(for: key).freshness == .revalidated) }
        #expect(server.requestCount("/n.png") == 4)
        #expect(server.bodyBytesSent("/n.png") == png.count)
        #expect(cache.statistics.revalidations == 3 && cache.statistics.downloads == 1)
    }

    @Test func mustRevalidateForbidsServingStaleOnError() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, attempt, _ in
            attempt == 1
                ? .init(headers: [("Content-Type", "image/png"), ("ETag", "\"m\""),
                                  ("Cache-Control", "max-age=60, stale-if-error=600, must-revalidate")], body: png)
                : .init(status: 503)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/m.png"))
        let first = try await cache.image(for: key)
        #expect(first.metadata.staleIfError == .zero)
        clock.advance(by: 120)
        await #expect(throws: ImageFetchError.badStatus(code: 503)) { try await cache.image(for: key) }
    }

    @Test(arguments: [304, 200])
    func aNoStoreAnswerToARevalidationRemovesTheImage(status: Int) async throws {
        // Given a cached image whose revalidation is answered with no-store (a 304, or a 200
        // with a new image)
        let png = self.png, gif = self.gif
        let server = try TestHTTPServer { _, attempt, _ in
            attempt == 1
                ? .init(headers: [("Content-Type", "image/png"), ("ETag", "\"s\""), ("Cache-Control", "max-age=60")], body: png)
                : .init(status: status, headers: [("Content-Type", "image/gif"), ("Cache-Control", "no-store")],
                        body: status == 200 ? gif : Data())
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/s.png"))
        _ = try await cache.image(for: key)
        clock.advance(by: 61)
        // Then the answer is returned, and no tier keeps the stale image or the new one
        let result = try await cache.image(for: key)
        #expect(result.freshness == (status == 304 ? .revalidated : .fresh))
        #expect(result.data == (status == 304 ? png : gif))
        #expect(try await cache.cachedImage(for: key) == nil)
    }

    // MARK: - stale-while-revalidate

    @Test(arguments: [false, true])
    func staleWhileRevalidateAnswersTwentyCallersAtOnceWithOneBackgroundRequest(fromDisk: Bool) async throws {
        // Given an image fresh for 60 s that may be served stale for 600 s more, whose
        // revalidation takes 300 ms
        let png = self.png
        let server = try TestHTTPServer { _, _, headers in
            let cacheControl = ("Cache-Control", "max-age=60, stale-while-revalidate=600")
            if headers["if-none-match"] == "\"w\"" {
                return .init(status: 304, headers: [cacheControl], delay: .milliseconds(300))
            }
            return .init(headers: [("Content-Type", "image/png"), ("ETag", "\"w\""), cacheControl], body: png)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/w.png"))
        _ = try await cache.image(for: key)
        if fromDisk { try await cache.removeAll(tiers: .memory) }

        // When 20 callers ask for it at once once it is stale
        clock.advance(by: 120)
        let results = try await withThrowingTaskGroup(of: ImageResult.self) { group in
            for _ in 0..<20 { group.addTask { try await cache.image(for: key) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }

        // Then every caller got the stale image at once, and one background request refreshed it
        #expect(results.count == 20)
        #expect(results.allSatisfy { $0.freshness == .staleWhileRevalidate && $0.data == png })
        await eventually { cache.statistics.revalidations == 1 && cache.loads.operationCount == 0 }
        #expect(server.requestCount("/w.png") == 2)
        let after = try await cache.image(for: key)
        #expect(after.freshness == .fresh && after.source == .memory)
        #expect(after.metadata.freshUntil == clock.now().addingTimeInterval(60))
        let statistics = cache.statistics
        #expect(statistics.staleWhileRevalidate == 20 && statistics.revalidations == 1 && statistics.requests == 22)

        // And past the window a caller waits for the revalidation instead
        clock.advance(by: 60 + 601)
        #expect(try await cache.image(for: key).freshness == .revalidated)
        #expect(server.requestCount("/w.png") == 3)
    }

    // MARK: - stale-if-error

    enum Failure: String, CaseIterable, Sendable { case serverError, transport, notFound }

    @Test(arguments: Failure.allCases)
    func staleIfErrorServesTheStaleImageOnTransportErrorsAnd5xxWithinTheWindow(_ failure: Failure) async throws {
        // Given an image fresh for 60 s, usable for 300 s more if revalidation fails
        let png = self.png
        let failing = Atomic<Bool>(false)
        let server = try TestHTTPServer { _, _, _ in
            if failing.load(ordering: .relaxed) { return .init(status: failure == .notFound ? 404 : 503) }
            return .init(headers: [("Content-Type", "image/png"), ("ETag", "\"e\""),
                                   ("Cache-Control", "max-age=60, stale-if-error=300")], body: png)
        }
        let cache = try makeCache()
        let key = ImageKey(server.url("/e.png"))
        _ = try await cache.image(for: key)
        failing.store(true, ordering: .relaxed)
        if failure == .transport { server.stop() }

        // When it is stale and revalidating fails, inside the window
        clock.advance(by: 120)
        if failure == .notFound {
            // Then a 4xx is not an error stale-if-error covers
            await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await cache.image(for: key) }
            return
        }
        let inside = try await cache.image(for: key)
        // Then the stale image is returned, and stays stale (nothing was refreshed)
        #expect(inside.freshness == .staleIfError && inside.data == png && inside.source == .memory)
        #expect(try await cache.image(for: key).freshness == .staleIfError)
        // And outside the window the error reaches the caller
        clock.advance(by: 300)
        await #expect(throws: ImageFetchError.self) { try await cache.image(for: key) }
        let statistics = cache.statistics
        #expect(statistics.staleIfError == 2 && statistics.failures == 1 && statistics.revalidations == 3)
    }

    // MARK: - Statistics

    @Test func statisticsAfterAScriptedSequenceEqualExactCounts() async throws {
        // Given A (ETag, 304 when asked), B (stale-while-revalidate), C (stale-if-error and no
        // validator, failing after its first download) and D (404)
        let png = self.png
        let server = try TestHTTPServer { path, attempt, headers in
            let image = { (cacheControl: String, etag: String?) in
                TestHTTPServer.Response(
                    headers: [("Content-Type", "image/png"), ("Cache-Control", cacheControl)] + (etag.map { [("ETag", $0)] } ?? []),
                    body: png)
            }
            switch path {
            case "/a": return headers["if-none-match"] == "\"a\"" ? .init(status: 304) : image("max-age=60", "\"a\"")
            case "/b": return headers["if-none-match"] == "\"b\"" ? .init(status: 304)
                : image("max-age=60, stale-while-revalidate=1000", "\"b\"")
            case "/c": return attempt == 1 ? image("max-age=60, stale-if-error=1000", nil) : .init(status: 503)
            default: return .init(status: 404)
            }
        }
        let cache = try makeCache()
        let (a, b, c, d) = (ImageKey(server.url("/a")), ImageKey(server.url("/b")), ImageKey(server.url("/c")),
                            ImageKey(server.url("/d")))

        // When the script runs
        for key in [a, b, c] { #expect(try await cache.image(for: key).source == .network) }
        for key in [a, b, c] { #expect(try await cache.image(for: key).source == .memory) }
        clock.advance(by: 120)
        #expect(try await cache.image(for: a).freshness == .revalidated)
        #expect(try await cache.image(for: b).freshness == .staleWhileRevalidate)
        await eventually { cache.statistics.revalidations == 2 && cache.loads.operationCount == 0 }
        #expect(try await cache.image(for: b).freshness == .fresh)
        #expect(try await cache.image(for: c).freshness == .staleIfError)
        try await cache.removeAll(tiers: .memory)
        let fromDisk = try await cache.image(for: a)
        #expect(fromDisk.source == .disk && fromDisk.freshness == .fresh)
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await cache.image(for: d) }

        // Then each request counted once, in exactly one place
        var expected = ImageCacheStatistics()
        expected.memoryHits = 4
        expected.tierHits = ["disk": 1]
        expected.revalidated = 1
        expected.staleWhileRevalidate = 1
        expected.staleIfError = 1
        expected.downloaded = 3
        expected.downloads = 5                 // A, B, C, C's failed refetch, D
        expected.revalidations = 2             // A in the foreground, B in the background
        expected.failures = 1
        #expect(cache.statistics == expected)
        #expect(expected.requests == 12 && expected.hits == 8 && expected.misses == 3)
    }
}
