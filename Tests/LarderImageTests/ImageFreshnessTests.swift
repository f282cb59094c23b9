import Foundation
import Larder
import LarderTestSupport
import Testing
@testable import LarderImage

/// Freshness from the response: each Cache-Control directive, Expires with Date and Age, the
/// bounds, and the fixed policy, through a real cache and a loopback server.
@Suite(.timeLimit(.minutes(5)))
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
    ) async throws -> (expiry: TimeInterval?, stored: Bool, downloads: Int) {
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
        return (expiry, entry != nil, server.requestCount("/image.png"))
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

    @Test func directivesParseWithQuotesCaseAndSpaces() {
        let directives = ImageFreshness.directives(#" Max-Age="60" , no-transform,STALE-while-revalidate=30"#)
        #expect(directives["max-age"] == .some("60"))
        #expect(directives["no-transform"] == .some(nil))
        #expect(directives["stale-while-revalidate"] == .some("30"))
    }
}
