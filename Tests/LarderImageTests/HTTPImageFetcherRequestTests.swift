import Foundation
import Larder
@testable import LarderImage

import Testing

/// What the fetcher requests (the URL as the server sees it) and which failures it holds
/// against the server: every spelling `ImageKey` treats as equal reaches the server, and local
/// failures are neither retried nor remembered nor counted by the origin's breaker.
@Suite(.timeLimit(.minutes(10)))
struct HTTPImageFetcherRequestTests {
    let png: Data
    let clock = TestClock()

    init() throws {
        png = try Fixture.all.first { $0.name == "image.png" }!.data
    }

    func makeFetcher(attempts: Int = 3, threshold: Int = 3, timeout: Duration = .seconds(5)) -> HTTPImageFetcher {
        HTTPImageFetcher {
            $0.timeout = timeout
            $0.maximumAttempts = attempts
            $0.retryDelay = .milliseconds(10)
            $0.hostFailureThreshold = threshold
            $0.hostCooldown = .seconds(60)
            $0.now = clock.now
        }
    }

    func imageServer() throws -> TestHTTPServer {
        let png = self.png
        return try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
    }

    // MARK: - Scheme and host spellings

    @Test
    func everySpellingOfSchemeAndHostThatAKeyTreatsAsEqualIsFetchedInLowerCase() async throws {
        // Given a real server on loopback, and spellings of its URLs that ImageKey treats as equal
        // to their lower-case forms (curl resolves every *.localhost name to loopback, so an
        // internationalised host reaches the server too)
        let server = try imageServer()
        let port = server.port
        let spellings: [(spelling: String, lowerCase: String, host: String)] = [
            ("HTTP://127.0.0.1:\(port)/upper.png", "http://127.0.0.1:\(port)/upper.png", "127.0.0.1:\(port)"),
            ("Http://127.0.0.1:\(port)/mixed.png", "http://127.0.0.1:\(port)/mixed.png", "127.0.0.1:\(port)"),
            ("http://LOCALHOST:\(port)/host.png", "http://localhost:\(port)/host.png", "localhost:\(port)"),
            ("HTTP://Img.LocalHost:\(port)/both.png", "http://img.localhost:\(port)/both.png", "img.localhost:\(port)"),
            ("http://BÜCHER.localhost:\(port)/idn.png", "http://bücher.localhost:\(port)/idn.png",
             "xn--bcher-kva.localhost:\(port)"),
            ("http://XN--BCHER-KVA.localhost:\(port)/puny.png", "http://xn--bcher-kva.localhost:\(port)/puny.png",
             "xn--bcher-kva.localhost:\(port)"),
        ]
        for (spelling, lowerCase, host) in spellings {
            let key = ImageKey(spelling)
            #expect(key == ImageKey(lowerCase), "\(spelling) and \(lowerCase) name one image")
            // When the image is loaded through a cache with a fetcher, from the spelling
            let cache = try ImageCache(fetcher: makeFetcher()) { _ in }
            let result = try await cache.image(for: key)
            // Then the server was asked once, with the host in lower case (ASCII for an IDN)
            let path = try #require(URL(string: lowerCase)?.path)
            #expect(result.source == .network && result.data == png, "\(spelling)")
            #expect(server.requestCount(path) == 1, "\(spelling)")
            #expect(server.requestHeaders(path)["host"] == host, "\(spelling)")
        }
    }

    @Test
    func requestURLLowerCasesOnlyTheSchemeAndHost() throws {
        let url = try #require(URL(string: "HTTPS://CDN.Example.COM:8443/Path/A.PNG?Token=AbC"))
        let request = try #require(HTTPImageFetcher.requestURL(for: url))
        #expect(request.absoluteString == "https://cdn.example.com:8443/Path/A.PNG?Token=AbC")
        // An internationalised host is requested in its punycode form, whatever its case
        for idn in ["http://BÜCHER.Example/a.png", "http://bücher.example/a.png", "http://XN--BCHER-KVA.example/a.png"] {
            let url = try #require(URL(string: idn))
            #expect(HTTPImageFetcher.requestURL(for: url)?.absoluteString == "http://xn--bcher-kva.example/a.png", "\(idn)")
        }
        #expect(HTTPImageFetcher.requestURL(for: try #require(URL(string: "ftp://example.com/a.png"))) == nil)
        #expect(HTTPImageFetcher.requestURL(for: try #require(URL(string: "http:///a.png"))) == nil)
        #expect(HTTPImageFetcher.requestURL(for: URL(fileURLWithPath: "/tmp/a.png")) == nil)
    }

    // MARK: - Local failures

    @Test
    func aURLThatCannotBeRequestedFailsAtOnceAndNeverOpensTheBreaker() async throws {
        // Given a live server and a fetcher whose breaker opens at the first failure
        let server = try imageServer()
        let fetcher = makeFetcher(attempts: 3, threshold: 1)
        // When URLs of the same host that cannot be requested are fetched, again and again
        for _ in 0..<3 {
            for text in ["ftp://127.0.0.1:\(server.port)/a.png", "file:///tmp/a.png"] {
                let url = try #require(URL(string: text))
                let error = await #expect(throws: ImageFetchError.self) { try await fetcher.fetch(url) }
                // Then each fails as a local failure, not a remembered one or a closed host
                guard case .invalidRequest? = error else {
                    Issue.record("expected invalidRequest, got \(String(describing: error))")
                    return
                }
            }
        }
        // And a valid image of the same host is fetched, first time
        #expect(try await fetcher.fetch(server.url("/a.png")).data == png)
        #expect(server.requestCount("/a.png") == 1)
    }

    @Test
    func anUnsupportedSpellingThroughTheCacheDoesNotBlockTheHostsNextImage() async throws {
        // Given a cache whose fetcher's breaker opens at the first failure (the issue's case:
        // an upper-case scheme was retried and opened the host's breaker)
        let server = try imageServer()
        let cache = try ImageCache(fetcher: makeFetcher(attempts: 3, threshold: 1)) { _ in }
        // When an upper-case scheme and then another image of the host are loaded
        let first = try await cache.image(for: ImageKey("HTTP://127.0.0.1:\(server.port)/first.png"))
        let second = try await cache.image(for: ImageKey(server.url("/second.png")))
        // Then both come from the server, each with one request
        #expect(first.source == .network && second.source == .network)
        #expect(server.requestCount("/first.png") == 1 && server.requestCount("/second.png") == 1)
    }

    @Test
    func aCancelledFetchIsNeitherRetriedNorCountedByTheOriginsBreaker() async throws {
        // Given a server that holds the first request for one path until the test lets it go
        // (or 280 s pass), and a fetcher whose breaker opens at the first failure
        let png = self.png
        let release = DispatchSemaphore(value: 0)
        let server = try TestHTTPServer { path, attempt in
            if path == "/held.png", attempt == 1 { _ = release.wait(timeout: .now() + 280) }
            return TestHTTPServer.Response(headers: [("Content-Type", "image/png")], body: png)
        }
        defer { release.signal() }
        let fetcher = makeFetcher(attempts: 3, threshold: 1, timeout: .seconds(600))
        let held = server.url("/held.png")
        let task = Task { try await fetcher.fetch(held) }
        // When the fetch is cancelled while the server holds its request (no deadline of its
        // own for the request to arrive: the suite's time limit bounds the wait)
        while server.requestCount("/held.png") < 1 {
            try await Task.sleep(for: .milliseconds(10))
        }
        task.cancel()
        await #expect(throws: ImageFetchError.cancelled) { try await task.value }
        release.signal()
        // Then the origin's next image and the same URL are fetched at once, and the cancelled
        // fetch made no request of its own after the first
        #expect(try await fetcher.fetch(server.url("/next.png")).data == png)
        #expect(try await fetcher.fetch(held).data == png)
        #expect(server.requestCount("/held.png") == 2)
    }

    // MARK: - One breaker per origin

    @Test
    func aDeadPortDoesNotBlockALivePortOnTheSameHost() async throws {
        // Given a dead port and a live server on the same host, and a breaker that opens at once
        let deadPort = try ReservedPort()
        defer { deadPort.release() }
        let server = try imageServer()
        let fetcher = makeFetcher(attempts: 1, threshold: 1)
        let dead = try #require(URL(string: "http://127.0.0.1:\(deadPort.port)/a.png"))
        // When the dead port fails and its breaker opens
        let first = await #expect(throws: ImageFetchError.self) { try await fetcher.fetch(dead) }
        guard case .transport? = first else { Issue.record("expected transport, got \(String(describing: first))"); return }
        await #expect(throws: ImageFetchError.hostUnavailable(host: "127.0.0.1:\(deadPort.port)")) {
            try await fetcher.fetch(dead)
        }
        // Then the live port of the same host is still fetched
        #expect(try await fetcher.fetch(server.url("/live.png")).data == png)
        #expect(server.requestCount("/live.png") == 1)
        // And the dead port's breaker is still open
        await #expect(throws: ImageFetchError.hostUnavailable(host: "127.0.0.1:\(deadPort.port)")) {
            try await fetcher.fetch(dead)
        }
    }
}
