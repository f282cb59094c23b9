import Foundation
import Larder
import LarderTestSupport
import Testing
@testable import LarderImage

/// Freshness from the response: each Cache-Control directive, Expires with Date and Age, the
/// bounds, and the fixed policy, through a real cache and a loopback server.
@Suite(.timeLimit(.minutes(10)))
struct ImageFreshnessTests {
    let clock = TestClock()
    let folder: TemporaryDirectory
    let png: Data

    init() throws {
        folder = try TemporaryDirectory("freshness")
        png = try #require(Fixture.all.first { $0.name == "image.png" }).data
    }

    /// Serves the PNG with `headers` and returns the expiry the cache gave it (`nil` when it
    /// stored nothing), with how many downloads two requests made.
    func expiry(
        for headers: [(String, String)], freshness: ImageFreshness = .fromResponse()
    ) async throws -> (expiry: TimeInterval?, stored: Bool, downloads: Int, metadata: ImageMetadata?) {
        let png = self.png
        let server = try TestHTTPServer { _, _ in
            TestHTTPServer.Response(headers: [("Content-Type", "image/png")] + headers, body: png)
        }
        let cache = try ImageCache(fetcher: HTTPImageFetcher { $0.maximumAttempts = 1 }) {
            $0.directory = folder.url.appendingPathComponent(UUID().uuidString)
            $0.disk.logHandler = nil
            $0.now = clock.now
            $0.freshness = freshness
        }
        let key = ImageKey(server.url("/image.png"))
        _ = try await cache.image(for: key)
        let entry = try await cache.storage.entry(forKey: key, tiers: .disk)
        _ = try await cache.image(for: key)
        let expiry = entry?.expirationDate.map { $0.timeIntervalSince(clock.now()) }
        return (expiry, entry != nil, server.requestCount("/image.png"), entry?.value.metadata)
    }

    @Test func maxAgeSetsTheLifetimeLessTheAgeAlreadySpent() async throws {
        #expect(try await expiry(for: [("Cache-Control", "public, max-age=3600")]).expiry == 3_600)
        #expect(try await expiry(for: [("Cache-Control", "max-age=3600"), ("Age", "600")]).expiry == 3_000)
    }

    @Test func lifetimesAreClampedToTheBoundsAndDefaultWhenTheServerSaysNothing() async throws {
        let bounds = ImageFreshness.fromResponse(minimum: .seconds(120), maximum: .seconds(7_200), default: .seconds(900))
        #expect(try await expiry(for: [("Cache-Control", "max-age=5")], freshness: bounds).expiry == 120)
        #expect(try await expiry(for: [("Cache-Control", "max-age=999999")], freshness: bounds).expiry == 7_200)
        #expect(try await expiry(for: [], freshness: bounds).expiry == 900)
        #expect(try await expiry(for: [("Cache-Control", "immutable, max-age=10")], freshness: bounds).expiry == 7_200)
    }

    @Test func expiresCountsFromTheServersDate() async throws {
        // Expires one hour after the server's Date: an hour of freshness, whatever our clock says
        let result = try await expiry(for: [
            ("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Expires", "Sun, 06 Nov 1994 09:49:37 GMT"),
        ])
        #expect(result.expiry == 3_600)
        // An invalid Expires means already expired: nothing is stored
        #expect(try await expiry(for: [("Expires", "0")]).stored == false)
    }

    @Test func noStoreAndNoCacheKeepTheImageOutOfTheCache() async throws {
        for directive in ["no-store", "no-cache", "max-age=0"] {
            let result = try await expiry(for: [("Cache-Control", directive)])
            #expect(!result.stored, "\(directive)")
            #expect(result.downloads == 2, "\(directive): the second request downloads again")
        }
    }

    @Test func aFixedPolicyIgnoresTheServer() async throws {
        let result = try await expiry(for: [("Cache-Control", "no-store")], freshness: .fixed(.seconds(60)))
        #expect(result.expiry == 60)
        #expect(result.downloads == 1)
        #expect(try await expiry(for: [("Cache-Control", "max-age=5")], freshness: .fixed(nil)).expiry == nil)
    }

    @Test func staleWindowsAreRecordedAndKeepTheImageCachedThatMuchLonger() async throws {
        // Fresh for 100 s, then usable stale for 50 s (background revalidation) or 200 s (on
        // errors): kept for the longer window
        let result = try await expiry(for: [("Cache-Control", "max-age=100, stale-while-revalidate=50, stale-if-error=200")])
        let metadata = try #require(result.metadata)
        #expect(result.expiry == 300)
        #expect(metadata.freshUntil == clock.now().addingTimeInterval(100))
        #expect(metadata.staleWhileRevalidate == .seconds(50) && metadata.staleIfError == .seconds(200))
        #expect(result.downloads == 1)
        // must-revalidate and no-cache forbid serving stale: no windows
        let strict = try #require(try await expiry(for: [
            ("Cache-Control", "max-age=100, stale-while-revalidate=50, stale-if-error=200, must-revalidate"),
        ]).metadata)
        #expect(strict.staleWhileRevalidate == .zero && strict.staleIfError == .zero)
        // A window alone keeps an image with no fresh lifetime and no validator
        let windowOnly = try await expiry(for: [("Cache-Control", "max-age=0, stale-while-revalidate=30")])
        #expect(windowOnly.stored && windowOnly.expiry == 30)
    }

    @Test func aValidatorKeepsAStaleImageForTheStaleRetentionToBeRevalidated() async throws {
        let headers = [("Cache-Control", "max-age=100"), ("ETag", "\"x\"")]
        #expect(try await expiry(for: headers).expiry == 100 + 7 * 86_400)
        let short = ImageFreshness.fromResponse(staleRetention: .seconds(1_000))
        #expect(try await expiry(for: headers, freshness: short).expiry == 1_100)
        // no-cache with a validator: stored, stale at once
        let noCache = try await expiry(for: [("Cache-Control", "no-cache"), ("ETag", "\"x\"")], freshness: short)
        #expect(noCache.stored && noCache.expiry == 1_000)
        #expect(noCache.metadata?.freshUntil == clock.now())
    }

    @Test(arguments: [
        "max-age=1e400", "max-age=-5", "max-age=nan", "max-age=inf", "max-age=", "max-age", "=,=,,",
        "stale-while-revalidate=1e308, max-age=1", "stale-if-error=-1e308", "stale-if-error=nan, no-cache",
        String(repeating: "max-age=9,", count: 2_000), "\u{0}max-age=1\u{FFFF}",
    ])
    func hostileCacheControlValuesGiveBoundedLifetimesWithoutTrapping(_ header: String) {
        let freshness = ImageFreshness.fromResponse()
        let now = Date(timeIntervalSince1970: 1_000_000)
        for age in [nil, "1e400", "-3", "x"] as [String?] {
            let decision = freshness.decision(
                cacheControl: header, expires: "Sun, 06 Nov 9999 08:49:37 GMT", date: nil, age: age, now: now,
                hasValidator: true)
            guard case let .store(lifetime) = decision else { continue }
            let freshUntil = lifetime.freshUntil
            #expect(freshUntil.map { $0 >= now && $0 <= now.addingTimeInterval(30 * 86_400) } ?? false, "\(header)")
            #expect(lifetime.staleWhileRevalidate <= .seconds(30 * 86_400) && lifetime.staleIfError <= .seconds(30 * 86_400))
        }
    }

    @Test func directivesParseWithQuotesCaseAndSpaces() {
        let directives = ImageFreshness.directives(#" Max-Age="60" , no-transform,STALE-while-revalidate=30"#)
        #expect(directives["max-age"] == .some("60"))
        #expect(directives["no-transform"] == .some(nil))
        #expect(directives["stale-while-revalidate"] == .some("30"))
    }
}
