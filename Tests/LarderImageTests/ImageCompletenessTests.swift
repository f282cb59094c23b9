import Foundation
import Larder
import LarderTestSupport
import Testing
@testable import LarderImage

/// Complete-file validation: every fixture whose format has an end marker or a declared size is
/// complete, and every shorter prefix of it is refused with a reason.
@Suite(.timeLimit(.minutes(10)))
struct ImageCompletenessTests {
    /// The fixtures of formats whose end can be told from their structure.
    static let checked: [Fixture] = Fixture.all.filter {
        [ImageFormat.png, .apng, .jpeg, .gif, .webp, .heic, .heif, .avif, .bmp].contains($0.format)
    }

    @Test(arguments: checked)
    func aWholeFileIsCompleteAndEveryShorterPrefixIsNot(fixture: Fixture) throws {
        // Given a complete file from a real encoder
        let data = try fixture.data
        #expect(ImageFormat.isComplete(data))
        #expect(ImageCompleteness.problem(with: data, format: fixture.format) == nil)
        // Then every prefix that still sniffs as the format, but ends early, has a problem
        // (WebP's RIFF size allows one missing pad byte at the end)
        let tolerance = fixture.format == .webp ? 1 : 0
        for length in 0..<(data.count - tolerance) {
            let prefix = data.prefix(length)
            #expect(ImageCompleteness.problem(with: prefix, format: fixture.format) != nil,
                    "\(fixture.name) cut to \(length) of \(data.count) bytes")
        }
    }

    @Test func reasonsNameTheFormatAndWhatIsMissing() throws {
        let png = try #require(Fixture.all.first { $0.name == "image.png" }).data
        let jpeg = try #require(Fixture.all.first { $0.name == "image.jpg" }).data
        let gif = try #require(Fixture.all.first { $0.name == "image.gif" }).data
        #expect(ImageCompleteness.problem(with: png.prefix(png.count - 12), format: .png)?.contains("IEND") == true)
        #expect(ImageCompleteness.problem(with: jpeg.prefix(jpeg.count - 2), format: .jpeg)?.contains("EOI") == true)
        #expect(ImageCompleteness.problem(with: gif.prefix(gif.count - 1), format: .gif)?.contains("trailer") == true)
    }

    @Test func hostileLengthsAreRefusedWithoutTrapping() {
        // A PNG chunk claiming 4 GiB, a JPEG segment of length 1, a GIF with an unknown block
        var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        png += [0xFF, 0xFF, 0xFF, 0xFF] + Array("IHDR".utf8)
        #expect(ImageCompleteness.problem(with: png, format: .png) != nil)
        let jpeg = Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01])
        #expect(ImageCompleteness.problem(with: jpeg, format: .jpeg) != nil)
        var gif = Data("GIF89a".utf8) + Data([5, 0, 3, 0, 0, 0, 0])
        gif.append(0x99)
        #expect(ImageCompleteness.problem(with: gif, format: .gif)?.contains("unknown block") == true)
    }

    @Test(arguments: checked)
    func theCacheRefusesATruncatedDownloadAndCachesNothing(fixture: Fixture) async throws {
        // Given a cache and a fetch that returns a file cut short by one byte
        let folder = try TemporaryDirectory("completeness")
        let cache = try ImageCache { $0.directory = folder.url; $0.disk.logHandler = nil }
        let data = try fixture.data
        let key = ImageKey("https://img.example.com/\(fixture.name)")
        let cut = data.prefix(data.count - (fixture.format == .webp ? 2 : 1))
        // When it is loaded
        let error = await #expect(throws: ImageCacheError.self) { try await cache.image(for: key) { _ in cut } }
        // Then the error says why and nothing is cached
        guard case .invalidImageData(let reason)? = error else {
            Issue.record("expected invalidImageData, got \(String(describing: error))")
            return
        }
        #expect(!reason.isEmpty)
        #expect(try await cache.cachedImage(for: key) == nil)
        // And with validation off, the same bytes are accepted
        let lenient = try ImageCache { $0.requiresCompleteImages = false }
        #expect(try await lenient.image(for: key) { _ in cut }.source == .network)
    }
}
