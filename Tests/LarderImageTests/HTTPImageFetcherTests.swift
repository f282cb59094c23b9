import Foundation
import Larder
@testable import LarderImage

import Testing

@Suite(.timeLimit(.minutes(10)))
struct HTTPImageFetcherTests {
    let png: Data
    let clock = TestClock()

    init() throws {
        png = try Fixture.all.first { $0.name == "image.png" }!.data
    }

    /// A fetcher with test-sized timeouts and delays.
    // Ten seconds unless a test is about timeouts: a run that starts every suite at once can
    // stall a loaded 2-core machine long enough for a 1 s timeout to fire on a healthy server.
    func makeFetcher(attempts: Int = 3, timeout: Duration = .seconds(10), concurrency: Int = 6) -> HTTPImageFetcher {
        HTTPImageFetcher {
            $0.timeout = timeout
            $0.maximumAttempts = attempts
            $0.retryDelay = .milliseconds(10)
            $0.maximumConcurrentDownloads = concurrency
            $0.now = clock.now
        }
    }

    func image(_ body: Data, type: String = "image/png") -> TestHTTPServer.Response {
        TestHTTPServer.Response(headers: [("Content-Type", type)], body: body)
    }

    // MARK: - Success

    @Test
    func fetchesAnImageWithItsFormatValidatorsAndProgress() async throws {
        // Given a server that answers with a PNG, an ETag and a Last-Modified date
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png"), ("ETag", "\"v1\""),
                                              ("Last-Modified", "Sat, 21 Nov 2026 10:00:00 GMT")], body: png)
        }
        let reports = Locked<[(Int64, Int64?)]>([])
        // When the image is fetched
        let fetched = try await makeFetcher().fetch(server.url("/a.png")) { received, expected in
            reports.withLock { $0.append((received, expected)) }
        }
        // Then the bytes, format, validators and progress are all there
        #expect(fetched.data == png)
        #expect(fetched.format == .png)
        #expect(fetched.statusCode == 200)
        #expect(fetched.entityTag == "\"v1\"")
        #expect(fetched.lastModified == "Sat, 21 Nov 2026 10:00:00 GMT")
        let last = try #require(reports.withLock { $0.last })
        #expect(last.0 == Int64(png.count))
        #expect(last.1 == Int64(png.count))
    }

    @Test
    func revalidateSendsBothValidatorsAndReturnsThe304sHeadersOrTheNewImage() async throws {
        // Given a server that answers 304 when both validators match, else 200 with a new ETag
        let png = self.png
        let stamp = "Sat, 21 Nov 2026 10:00:00 GMT"
        let server = try TestHTTPServer { _, _, headers in
            if headers["if-none-match"] == "\"v1\"", headers["if-modified-since"] == stamp {
                return TestHTTPServer.Response(status: 304, headers: [
                    ("ETag", "\"v1\""), ("Cache-Control", "max-age=600"), ("Date", "Sun, 22 Nov 2026 10:00:00 GMT"),
                    ("Age", "5"), ("Expires", "Sun, 22 Nov 2026 11:00:00 GMT")])
            }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png"), ("ETag", "\"v2\"")], body: png)
        }
        let fetcher = makeFetcher()
        let url = server.url("/v.png")
        // When it is revalidated with matching validators, then with an outdated one
        let unchanged = try await fetcher.revalidate(url, entityTag: "\"v1\"", lastModified: stamp)
        let changed = try await fetcher.revalidate(url, entityTag: "\"v0\"", lastModified: nil)
        // Then the 304 comes back with its header fields, and the 200 with the new image
        #expect(unchanged == .notModified(NotModifiedResponse(
            url: url, entityTag: "\"v1\"", lastModified: nil, cacheControl: "max-age=600",
            expires: "Sun, 22 Nov 2026 11:00:00 GMT", date: "Sun, 22 Nov 2026 10:00:00 GMT", age: "5")))
        guard case let .modified(image) = changed else { Issue.record("expected the new image, got \(changed)"); return }
        #expect(image.data == png && image.entityTag == "\"v2\"")
        #expect(server.requestHeaders("/v.png")["if-none-match"] == "\"v0\"")
        #expect(server.requestHeaders("/v.png")["if-modified-since"] == nil)
        // And a 304 to a request that was not conditional is an error, not an image
        let stray = try TestHTTPServer { _, _ in TestHTTPServer.Response(status: 304) }
        await #expect(throws: ImageFetchError.badStatus(code: 304)) { try await fetcher.fetch(stray.url("/s.png")) }
        await #expect(throws: ImageFetchError.badStatus(code: 304)) {
            try await fetcher.revalidate(stray.url("/s.png"), entityTag: nil, lastModified: nil)
        }
    }

    @Test
    func acceptsOctetStreamAndAMissingContentTypeWhenTheBytesAreAnImage() async throws {
        let png = self.png
        let server = try TestHTTPServer { path, _ in
            path == "/octet" ? TestHTTPServer.Response(headers: [("Content-Type", "application/octet-stream")], body: png)
                : TestHTTPServer.Response(body: png)
        }
        let fetcher = makeFetcher()
        #expect(try await fetcher.fetch(server.url("/octet")).format == .png)
        #expect(try await fetcher.fetch(server.url("/none")).format == .png)
    }

    // MARK: - Status and retries

    @Test
    func failsOn404WithoutRetrying() async throws {
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Response(status: 404) }
        await #expect(throws: ImageFetchError.badStatus(code: 404)) {
            try await makeFetcher().fetch(server.url("/missing"))
        }
        #expect(server.requestCount("/missing") == 1)
    }

    @Test
    func retriesA500AndReturnsTheNextSuccess() async throws {
        // Given a server that fails the first request with 500 and answers the second
        let png = self.png
        let server = try TestHTTPServer { _, attempt in
            attempt == 1 ? TestHTTPServer.Response(status: 500) : TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        let fetched = try await makeFetcher().fetch(server.url("/flaky"))
        #expect(fetched.data == png)
        #expect(server.requestCount("/flaky") == 2)
    }

    @Test(arguments: [503, 429])
    func givesUpAfterTheConfiguredNumberOfAttempts(_ status: Int) async throws {
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Response(status: status) }
        await #expect(throws: ImageFetchError.badStatus(code: status)) {
            try await makeFetcher(attempts: 3).fetch(server.url("/down"))
        }
        #expect(server.requestCount("/down") == 3)
        await #expect(throws: ImageFetchError.badStatus(code: status)) {
            try await makeFetcher(attempts: 2).fetch(server.url("/down2"))
        }
        #expect(server.requestCount("/down2") == 2)
    }

    // MARK: - Timeouts, truncation, content

    @Test
    func timesOutASlowResponse() async throws {
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Response(status: 200, delay: .seconds(300)) }
        let start = ContinuousClock.now
        await #expect(throws: ImageFetchError.timedOut) {
            try await makeFetcher(attempts: 1, timeout: .seconds(1)).fetch(server.url("/slow"))
        }
        let elapsed = ContinuousClock.now - start
        // Not before the timeout, and long before the server would answer (300 s): the upper
        // bound is loose because a loaded 2-core machine can starve the test for a while.
        #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(240))
    }

    @Test
    func retriesATimeoutAndSucceedsWhenTheServerSpeedsUp() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, attempt in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png,
                                    delay: attempt == 1 ? .seconds(2) : .zero)
        }
        let fetched = try await makeFetcher(attempts: 2, timeout: .seconds(1)).fetch(server.url("/slow-once"))
        #expect(fetched.data == png)
        #expect(server.requestCount("/slow-once") == 2)
    }

    @Test
    func rejectsABodyShorterThanItsContentLength() async throws {
        // Given a server that announces 1000 bytes, sends the PNG, and closes
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png, declaredLength: 1000)
        }
        await #expect(throws: ImageFetchError.truncated(expected: 1000, received: Int64(png.count))) {
            try await makeFetcher(attempts: 2).fetch(server.url("/cut"))
        }
        #expect(server.requestCount("/cut") == 2) // truncation is retried
    }

    @Test
    func rejectsANonImageContentTypeWithoutRetrying() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "text/html; charset=utf-8")], body: png)
        }
        let error = await #expect(throws: ImageFetchError.self) {
            try await makeFetcher().fetch(server.url("/html"))
        }
        guard case .invalidContent? = error else { Issue.record("expected invalidContent, got \(String(describing: error))"); return }
        #expect(server.requestCount("/html") == 1)
    }

    @Test
    func rejectsImageContentTypeWhoseBytesAreNotAnImage() async throws {
        let server = try TestHTTPServer { path, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: path == "/empty" ? Data() : Data("<html>".utf8))
        }
        for path in ["/html-bytes", "/empty"] {
            let error = await #expect(throws: ImageFetchError.self) { try await makeFetcher().fetch(server.url(path)) }
            guard case .invalidContent? = error else { Issue.record("\(path): \(String(describing: error))"); continue }
        }
    }

    // MARK: - Concurrency, failure memory, cancellation

    @Test
    func boundsTheNumberOfConcurrentDownloads() async throws {
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png, delay: .milliseconds(150))
        }
        let fetcher = makeFetcher(concurrency: 2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<6 {
                group.addTask { _ = try await fetcher.fetch(server.url("/c\(index)")) }
            }
            try await group.waitForAll()
        }
        #expect(server.maximumInFlight == 2)
        #expect((0..<6).allSatisfy { server.requestCount("/c\($0)") == 1 })
    }

    @Test
    func failsFastForARecentlyFailedURLUntilTheMemoryExpires() async throws {
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Response(status: 404) }
        let fetcher = makeFetcher()
        let url = server.url("/gone")
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await fetcher.fetch(url) }
        // When the same URL is fetched again within the TTL, no request is made
        await #expect(throws: ImageFetchError.recentlyFailed(underlying: .badStatus(code: 404))) { try await fetcher.fetch(url) }
        clock.advance(by: 29)
        await #expect(throws: ImageFetchError.recentlyFailed(underlying: .badStatus(code: 404))) { try await fetcher.fetch(url) }
        #expect(server.requestCount("/gone") == 1)
        // Then, after the TTL, it is requested again; other URLs were never affected
        clock.advance(by: 2)
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await fetcher.fetch(url) }
        #expect(server.requestCount("/gone") == 2)
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await fetcher.fetch(server.url("/other")) }
    }

    @Test
    func onlyFailuresAboutTheURLAreRememberedAndTheyCanBeForgotten() async throws {
        // Given a server that answers 500 three times, then 200
        let png = self.png
        let server = try TestHTTPServer { path, attempt in
            if path == "/flaky", attempt <= 3 { return TestHTTPServer.Response(status: 500) }
            if path == "/missing" { return TestHTTPServer.Response(status: 404) }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        let fetcher = makeFetcher()
        // A 5xx that exhausts the attempts is not remembered: the next fetch asks the server
        await #expect(throws: ImageFetchError.badStatus(code: 500)) { try await fetcher.fetch(server.url("/flaky")) }
        #expect(try await fetcher.fetch(server.url("/flaky")).data == png)
        // A 404 is remembered, and forgetting it sends the next fetch to the server again
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await fetcher.fetch(server.url("/missing")) }
        await #expect(throws: ImageFetchError.recentlyFailed(underlying: .badStatus(code: 404))) {
            try await fetcher.fetch(server.url("/missing"))
        }
        fetcher.forgetFailure(for: server.url("/missing"))
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await fetcher.fetch(server.url("/missing")) }
        fetcher.forgetFailures()
        await #expect(throws: ImageFetchError.badStatus(code: 404)) { try await fetcher.fetch(server.url("/missing")) }
        #expect(server.requestCount("/missing") == 3)
    }

    @Test(arguments: ["binary/octet-stream", "application/octet-stream", nil] as [String?])
    func genericContentTypesAreAcceptedWhenTheBytesAreAnImage(contentType: String?) async throws {
        let png = self.png
        let server = try TestHTTPServer { path, _ in
            let body = path == "/fake" ? Data("<html>".utf8) : png
            return TestHTTPServer.Response(headers: contentType.map { [("Content-Type", $0)] } ?? [], body: body)
        }
        #expect(try await makeFetcher().fetch(server.url("/real")).data == png)
        let error = await #expect(throws: ImageFetchError.self) { try await makeFetcher().fetch(server.url("/fake")) }
        guard case .invalidContent? = error else { Issue.record("expected invalidContent, got \(String(describing: error))"); return }
    }

    @Test
    func retryAfterInSecondsIsWaitedAndBounded() async throws {
        // Given a server that answers 503 with Retry-After: 1 (and then 3600), then 200
        let png = self.png
        let server = try TestHTTPServer { path, attempt in
            if attempt == 1 {
                return TestHTTPServer.Response(status: 503, headers: [("Retry-After", path == "/long" ? "3600" : "1")])
            }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        // When it is fetched, the second attempt waits what the server asked (not 10 ms)
        let start = ContinuousClock.now
        #expect(try await makeFetcher().fetch(server.url("/short")).data == png)
        #expect(ContinuousClock.now - start >= .milliseconds(950))
        // And a longer ask is bounded by maximumRetryAfter
        let bounded = HTTPImageFetcher {
            $0.retryDelay = .milliseconds(10)
            $0.maximumRetryAfter = .milliseconds(300)
            $0.now = clock.now
        }
        let boundedStart = ContinuousClock.now
        #expect(try await bounded.fetch(server.url("/long")).data == png)
        let waited = ContinuousClock.now - boundedStart
        #expect(waited >= .milliseconds(280) && waited < .seconds(60))
        #expect(server.requestCount("/short") == 2 && server.requestCount("/long") == 2)
    }

    @Test
    func retryAfterAsAnHTTPDateIsCountedFromTheFetchersClock() {
        // RFC 9110's three date forms, one second after the fetcher's "now"
        let now = Date(timeIntervalSince1970: 784_111_776) // Sun, 06 Nov 1994 08:49:36 GMT
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            let date = HTTPImageFetcher.httpDate(text)
            #expect(date?.timeIntervalSince(now) == 1, "\(text)")
        }
        #expect(HTTPImageFetcher.httpDate("soon") == nil)
    }

    @Test
    func aDeadHostFailsFastAndRecoversAtTheFirstFetchAfterItReturns() async throws {
        // Given a host that refuses connections (a port held without listening: a stopped
        // server's port could be given to another test's server meanwhile)
        let png = self.png
        let deadHost = try ReservedPort()
        let port = deadHost.port
        let fetcher = HTTPImageFetcher {
            $0.retryDelay = .milliseconds(10)
            $0.hostFailureThreshold = 3
            $0.hostCooldown = .seconds(5)
            $0.now = clock.now
        }
        let url = URL(string: "http://127.0.0.1:\(port)/a.png")!
        // When one fetch exhausts its attempts, the breaker opens
        let first = await #expect(throws: ImageFetchError.self) { try await fetcher.fetch(url) }
        guard case .transport? = first else { Issue.record("expected transport, got \(String(describing: first))"); return }
        // Then 200 more fetches of the host fail at once, without connecting
        for index in 0..<200 {
            await #expect(throws: ImageFetchError.hostUnavailable(host: "127.0.0.1:\(port)")) {
                try await fetcher.fetch(URL(string: "http://127.0.0.1:\(port)/\(index).png")!)
            }
        }
        // When the host is back (listening on the socket that held the port, so the port is
        // never free for another socket to take) and the cooldown has passed, the first fetch
        // succeeds
        let server = try TestHTTPServer(takingOver: deadHost) { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        clock.advance(by: 6)
        #expect(try await fetcher.fetch(url).data == png)
        #expect(try await fetcher.fetch(URL(string: "http://127.0.0.1:\(port)/b.png")!).data == png)
        #expect(server.requestCount("/a.png") == 1)
    }

    @Test
    func cancellingTheTaskCancelsTheRequestAndIsNotRememberedAsAFailure() async throws {
        let png = self.png
        // The server holds the first request until the test lets it go (or 280 s pass), on the
        // server's own thread.
        let release = DispatchSemaphore(value: 0)
        let server = try TestHTTPServer { _, attempt in
            if attempt == 1 { _ = release.wait(timeout: .now() + 280) }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        defer { release.signal() }
        let fetcher = makeFetcher(timeout: .seconds(600))
        let url = server.url("/cancel")
        let task = Task { try await fetcher.fetch(url) }
        // Cancel once the server holds the request. No deadline of its own: on a loaded machine
        // the fetch may not start for a minute (other tests hold both of the pool's threads),
        // and cancelling before the request arrives would test something else. The suite's time
        // limit bounds the wait.
        while server.requestCount("/cancel") < 1 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let start = ContinuousClock.now
        task.cancel()
        await #expect(throws: ImageFetchError.cancelled) { try await task.value }
        // The task ended on cancellation, not when the server let the request go.
        #expect(ContinuousClock.now - start < .seconds(240))
        release.signal()
        #expect(server.requestCount("/cancel") == 1)
        // The URL is not in the failure memory: the next fetch goes to the server
        #expect(try await fetcher.fetch(url).data == png)
        #expect(server.requestCount("/cancel") == 2)
    }

    @Test
    func roundsASubSecondTimeoutUpInsteadOfTimingOutAtOnce() async throws {
        // FoundationNetworking times out immediately below one second; the fetcher must not.
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png, delay: .milliseconds(300))
        }
        let fetched = try await makeFetcher(attempts: 1, timeout: .milliseconds(500)).fetch(server.url("/subsecond"))
        #expect(fetched.data == png)
    }

    @Test
    func reportsATransportErrorWhenNothingListens() async throws {
        let deadHost = try ReservedPort()
        defer { deadHost.release() }
        let url = URL(string: "http://127.0.0.1:\(deadHost.port)/closed")!
        let error = await #expect(throws: ImageFetchError.self) { try await makeFetcher(attempts: 2).fetch(url) }
        guard case .transport? = error else { Issue.record("expected transport, got \(String(describing: error))"); return }
    }
}
