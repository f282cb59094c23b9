import Foundation
import LarderTestSupport
import Testing
import Larder

// The README's quick start, compiled here so it cannot rot. `readmeQuotesThisExample` fails
// when the two drift apart.
// readme-quick-start begin
struct Profile: Codable, Sendable { var name: String; var avatar: URL }

func quickStart(cacheDirectory: URL) throws -> Profile? {
    let profiles = try Storage<String, Profile>(transformer: .json()) { configuration in
        configuration.directory = cacheDirectory       // omit for a memory-only cache
        configuration.memory.countLimit = 500
        configuration.disk.sizeLimit = 50 * 1024 * 1024
        configuration.disk.compression = .gzip(level: 6)
    }
    let ada = Profile(name: "Ada", avatar: URL(string: "https://example.com/ada.png")!)
    try profiles.setValue(ada, forKey: "user/1", expiry: .seconds(3_600))
    return try profiles.value(forKey: "user/1")        // memory hit; disk after a restart
}
// readme-quick-start end

@Suite struct ReadmeExampleTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func quickStartRunsAndPersists() throws {
        let folder = try TemporaryDirectory("readme")
        let profile = try #require(try quickStart(cacheDirectory: folder.url))
        #expect(profile.name == "Ada")
        #expect(FileManager.default.fileExists(atPath: folder.url.appendingPathComponent("index.sqlite").path))
    }

    @Test func readmeQuotesThisExample() throws {
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try #require(Self.between("// readme-quick-start begin\n", "// readme-quick-start end", in: source))
        let quoted = try #require(Self.between("<!-- readme-quick-start: kept identical to Tests/LarderTests/ReadmeExampleTests.swift -->\n```swift\nimport Foundation\nimport Larder\n\n", "```", in: readme))
        #expect(quoted == example)
    }

    static func between(_ start: String, _ end: String, in text: String) -> String? {
        guard let lower = text.range(of: start)?.upperBound,
              let upper = text.range(of: end, range: lower..<text.endIndex)?.lowerBound else { return nil }
        return String(text[lower..<upper])
    }
}
