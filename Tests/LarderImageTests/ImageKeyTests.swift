import Foundation
import LarderImage
import Testing

@Suite(.timeLimit(.minutes(10)))
struct ImageKeyTests {
    let filter = ImageKey.KeyFilter.removingQueryItems(named: ["token", "signature"])

    // MARK: - Canonical source

    @Test
    func lowercasesSchemeAndHostButNotThePath() {
        let key = ImageKey("HTTPS://CDN.Example.COM/Images/A.PNG")
        #expect(key.canonicalString == "https://cdn.example.com/Images/A.PNG")
    }

    @Test
    func dropsDefaultPortsAndFragmentsAndGivesAnEmptyPathASlash() {
        #expect(ImageKey("http://example.com:80").canonicalString == "http://example.com/")
        #expect(ImageKey("https://example.com:443/a.png#top").canonicalString == "https://example.com/a.png")
        #expect(ImageKey("https://example.com:8443/a.png").canonicalString == "https://example.com:8443/a.png")
    }

    @Test
    func removesFilteredQueryItemsAndSortsTheRestStably() {
        // Given the same image with a different token, order and fragment
        let first = ImageKey("https://cdn.example.com/a.png?w=2&token=abc&h=1&tag=x&tag=y", filter: filter)
        let second = ImageKey(URL(string: "https://cdn.example.com/a.png?h=1&signature=s&w=2&tag=x&tag=y&token=zzz#f")!,
                              filter: filter)
        // Then both keys are equal, and repeated names keep their order
        #expect(first == second)
        #expect(first.canonicalString == "https://cdn.example.com/a.png?h=1&tag=x&tag=y&w=2")
        #expect(ImageKey("https://e.com/a?tag=y&tag=x").canonicalString == "https://e.com/a?tag=y&tag=x")
    }

    @Test
    func dropsTheQuestionMarkWhenEveryQueryItemIsFiltered() {
        #expect(ImageKey("https://e.com/a.png?token=1", filter: filter).canonicalString == "https://e.com/a.png")
    }

    @Test
    func keepsQueryItemsWithoutAFilterAndMatchesFiltersOnDecodedItems() {
        #expect(ImageKey("https://e.com/a?token=1").canonicalString == "https://e.com/a?token=1")
        // Given a closure filter that looks at the decoded value
        let byValue = ImageKey.KeyFilter { $0.value == "a b" }
        #expect(ImageKey("https://e.com/a?x=a%20b&y=1", filter: byValue).canonicalString == "https://e.com/a?y=1")
    }

    @Test
    func keepsPercentEncodingOfTheQueryAsItWas() {
        let key = ImageKey("https://e.com/a?q=a%2Bb%26c")
        #expect(key.canonicalString == "https://e.com/a?q=a%2Bb%26c")
    }

    @Test
    func escapesOpaqueSourcesSoTheyCannotContainTheVariantSeparator() {
        let key = ImageKey("avatar/42#big%", targetSize: .init(width: 2, height: 2))
        #expect(key.canonicalString == "avatar/42%23big%25#size=2x2")
        #expect(ImageKey("avatar/42%23").source != ImageKey("avatar/42#").source)
    }

    // MARK: - Variants

    @Test
    func appendsSizeAndProcessorsInAFixedOrder() {
        let key = ImageKey("https://e.com/a.png", targetSize: .init(width: 100, height: 80), processors: ["resize", "blur(3)"])
        #expect(key.canonicalString == "https://e.com/a.png#size=100x80#p=resize,blur(3)")
        let processorsOnly = ImageKey("https://e.com/a.png", processors: ["a"])
        #expect(processorsOnly.canonicalString == "https://e.com/a.png#p=a")
    }

    @Test
    func distinguishesProcessorOrder() {
        let first = ImageKey("https://e.com/a.png", processors: ["a", "b"])
        let second = ImageKey("https://e.com/a.png", processors: ["b", "a"])
        #expect(first != second)
        #expect(first.canonicalString != second.canonicalString)
    }

    @Test
    func escapesSeparatorsInsideProcessorIdentifiers() {
        // Given ["a,b"] and ["a", "b"], which must not collide
        let joined = ImageKey("x", processors: ["a,b"])
        let split = ImageKey("x", processors: ["a", "b"])
        #expect(joined.canonicalString == "x#p=a%2Cb")
        #expect(joined.canonicalString != split.canonicalString)
        #expect(ImageKey("x", processors: ["c#1%"]).canonicalString == "x#p=c%231%25")
    }

    @Test
    func givesTheOriginalKeyAndRecognisesVariantsByPrefix() {
        let variant = ImageKey("https://E.com/a.png?token=t", filter: filter, targetSize: .init(width: 10, height: 20))
        let original = variant.original
        #expect(original == ImageKey("https://e.com/a.png"))
        #expect(original.isOriginal)
        #expect(!variant.isOriginal)
        #expect(variant.isVariant(of: original))
        #expect(!original.isVariant(of: original))
        #expect(variant.canonicalString.hasPrefix(original.variantPrefix))
        // A different source that merely starts with the same characters is not a variant
        let longer = ImageKey("https://e.com/a.png2", targetSize: .init(width: 10, height: 20))
        #expect(!longer.canonicalString.hasPrefix(original.variantPrefix))
        #expect(!longer.isVariant(of: original))
    }

    @Test(arguments: [
        ImageKey("https://e.com/a.png"),
        ImageKey("https://e.com/a.png?b=1&a=2", targetSize: .init(width: 3, height: 4)),
        ImageKey("https://e.com/a.png", processors: ["x,y", "z%", "#"]),
        ImageKey("avatar#1", targetSize: .init(width: 1, height: 1), processors: ["p"]),
    ])
    func recreatesAKeyFromItsCanonicalString(_ key: ImageKey) throws {
        let parsed = try #require(ImageKey(canonicalString: key.canonicalString))
        #expect(parsed == key)
        #expect(parsed.canonicalString == key.canonicalString)
    }

    @Test(arguments: ["", "#size=1x1", "a#size=0x1", "a#size=1x", "a#size=01x1", "a#p=", "a#p=b,", "a#q=1",
                      "a#p=b#size=1x1", "a#size=1x1#size=1x1"])
    func rejectsMalformedCanonicalStrings(_ string: String) {
        #expect(ImageKey(canonicalString: string) == nil)
    }

    // MARK: - RFC 3986 normalization

    @Test(arguments: [
        ("https://e.com/%c3%bc.png", "https://e.com/%C3%BC.png"),
        ("https://e.com/%7euser/%41.png", "https://e.com/~user/A.png"),
        ("https://e.com/x/../a.png", "https://e.com/a.png"),
        ("https://e.com/a/./b/../../c/./d.png", "https://e.com/c/d.png"),
        ("https://e.com/../a.png", "https://e.com/a.png"),
        ("https://e.com/a/b/..", "https://e.com/a/"),
        ("https://e.com/a.png?q=%2f%2A&%61=1", "https://e.com/a.png?a=1&q=%2F%2A"),
        ("https://e.com/dir/", "https://e.com/dir/"),
    ])
    func equivalentURLsNormalizeToOneKey(_ input: String, _ expected: String) {
        // RFC 3986 section 6.2.2: case of percent-encodings, unreserved characters, dot segments
        #expect(ImageKey(input).canonicalString == expected)
        #expect(ImageKey(input) == ImageKey(expected))
    }

    @Test func reservedCharactersStayEncoded() {
        // "%2F" is a slash inside a segment, "%3F" a question mark: decoding them would change
        // the URL's meaning, so they stay encoded (upper-cased).
        #expect(ImageKey("https://e.com/a%2fb%3f.png").canonicalString == "https://e.com/a%2Fb%3F.png")
    }

    @Test func theRequestStringIsWhatTheCallerGaveAndNotPartOfTheIdentity() {
        let first = ImageKey("https://E.com/x/../a.png?b=1&a=2")
        let second = ImageKey("https://e.com/a.png?a=2&b=1")
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(first.requestString == "https://E.com/x/../a.png?b=1&a=2")
        #expect(first.original.requestString == first.requestString)
    }
}
