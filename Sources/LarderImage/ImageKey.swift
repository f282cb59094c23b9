public import Foundation
public import Larder

/// The identity of a cached image: its source, plus the target size and processors of a variant.
///
/// Two keys that name the same image have the same ``canonicalString``, which is what the
/// cache stores. Canonicalisation of a URL source:
///
/// - the scheme and host are lower-cased, and a default port (`:80` for `http`, `:443` for
///   `https`) is dropped; an empty path on an `http(s)` URL becomes `/`;
/// - the fragment is dropped: it is never sent to the server, so it cannot change the image;
/// - query items the ``KeyFilter`` names (volatile ones such as `token` or `signature`) are
///   removed, and the rest are sorted by name. The sort is stable, so repeated names keep
///   their relative order;
/// - the path and query are normalized as RFC 3986 section 6.2.2 says: percent-encodings use
///   upper-case hex digits, percent-encoded unreserved characters are decoded (`%41` is `A`),
///   and `.` and `..` path segments are removed (`/x/../a.png` is `/a.png`);
/// - a source that is not an absolute URL is kept as it is, with `%` and `#` percent-encoded.
///
/// A variant appends `#size=<W>x<H>` and then `#p=<id>,<id>…` to the source part. A canonical
/// source never contains a raw `#`, so every variant of a source starts with
/// ``variantPrefix``, which is what a key-prefix scan looks for, and the original's
/// canonical string is the source part alone.
///
/// ```swift
/// let filter = ImageKey.KeyFilter.removingQueryItems(named: ["token", "signature"])
/// let key = ImageKey(URL(string: "HTTPS://CDN.Example.com/a.png?w=2&token=x&h=1")!, filter: filter,
///                    targetSize: .init(width: 100, height: 80), processors: ["blur(3)"])
/// key.canonicalString          // "https://cdn.example.com/a.png?h=1&w=2#size=100x80#p=blur(3)"
/// key.original.canonicalString // "https://cdn.example.com/a.png?h=1&w=2"
/// key.isVariant(of: key.original) // true
/// ```
public struct ImageKey: Sendable, Hashable, CustomStringConvertible {
    /// A target size in whole pixels, so two requests never differ by floating-point noise.
    ///
    /// ```swift
    /// let thumbnail = ImageKey.PixelSize(width: 120, height: 90)
    /// ```
    public struct PixelSize: Sendable, Hashable, CustomStringConvertible {
        /// The width in pixels, at least 1.
        public let width: Int
        /// The height in pixels, at least 1.
        public let height: Int

        /// Creates a pixel size.
        ///
        /// - Precondition: `width` and `height` are positive.
        public init(width: Int, height: Int) {
            precondition(width > 0 && height > 0, "a target pixel size is positive")
            self.width = width
            self.height = height
        }

        /// `"<width>x<height>"`, as it appears in a canonical string.
        public var description: String { "\(width)x\(height)" }
    }

    /// Decides which query items of a URL source are volatile and left out of the key.
    ///
    /// ```swift
    /// let byName = ImageKey.KeyFilter.removingQueryItems(named: ["token", "expires"])
    /// let byRule = ImageKey.KeyFilter { $0.name.hasPrefix("X-Amz-") }
    /// ```
    public struct KeyFilter: Sendable {
        /// Returns `true` for a query item to remove.
        public let shouldRemove: @Sendable (URLQueryItem) -> Bool

        /// Creates a filter that removes the query items for which `shouldRemove` returns `true`.
        public init(removingQueryItemsWhere shouldRemove: @escaping @Sendable (URLQueryItem) -> Bool) {
            self.shouldRemove = shouldRemove
        }

        /// A filter that removes query items whose name is in `names` (compared exactly).
        public static func removingQueryItems(named names: Set<String>) -> KeyFilter {
            KeyFilter { names.contains($0.name) }
        }
    }

    /// The canonical form of the source: the part of ``canonicalString`` before any variant.
    public let source: String

    /// The source exactly as the caller gave it: what a fetcher requests. It is not part of
    /// the key's identity (two keys with equal canonical strings are equal whatever their
    /// request strings), so signed URLs and servers that care about query order get the URL
    /// they expect while equivalent URLs share one cache entry.
    public let requestString: String

    /// The target pixel size of a resized variant, or `nil` for the original size.
    public let targetSize: PixelSize?

    /// Identifiers of the processors applied to the image, in the order they run.
    public let processors: [String]

    /// Creates a key for an image at a URL.
    ///
    /// - Parameters:
    ///   - url: The image's address.
    ///   - filter: Removes volatile query items before the key is formed; `nil` keeps them all.
    ///   - targetSize: The pixel size of a resized variant; `nil` for the original.
    ///   - processors: Processor identifiers, in the order they run; empty for none.
    public init(_ url: URL, filter: KeyFilter? = nil, targetSize: PixelSize? = nil, processors: [String] = []) {
        self.init(url.absoluteString, filter: filter, targetSize: targetSize, processors: processors)
    }

    /// Creates a key for an image named by a string: an absolute URL, or any other identifier.
    ///
    /// A string that parses as an absolute URL (it has a scheme) is canonicalised as a URL;
    /// anything else is used as it is.
    ///
    /// - Parameters:
    ///   - source: A URL string or an opaque identifier such as `"avatar/42"`.
    ///   - filter: Removes volatile query items of a URL source; `nil` keeps them all.
    ///   - targetSize: The pixel size of a resized variant; `nil` for the original.
    ///   - processors: Processor identifiers, in the order they run; empty for none.
    ///
    /// - Precondition: No processor identifier is empty.
    public init(_ source: String, filter: KeyFilter? = nil, targetSize: PixelSize? = nil, processors: [String] = []) {
        precondition(!processors.contains(""), "a processor identifier is not empty")
        self.source = Self.canonicalSource(source, filter: filter)
        self.requestString = source
        self.targetSize = targetSize
        self.processors = processors
    }

    /// Recreates a key from a ``canonicalString`` read back from the cache.
    ///
    /// - Returns: The key, or `nil` when the string has a malformed variant part.
    public init?(canonicalString: String) {
        var parts = canonicalString.split(separator: "#", omittingEmptySubsequences: false)
        guard let source = parts.first, !source.isEmpty else { return nil }
        parts.removeFirst()
        var targetSize: PixelSize?
        var processors: [String] = []
        for (index, part) in parts.enumerated() {
            if part.hasPrefix("size="), index == 0 {
                let numbers = part.dropFirst(5).split(separator: "x", omittingEmptySubsequences: false)
                guard numbers.count == 2, let width = Int(numbers[0]), let height = Int(numbers[1]),
                      width > 0, height > 0, "\(width)x\(height)" == part.dropFirst(5)
                else { return nil }
                targetSize = PixelSize(width: width, height: height)
            } else if part.hasPrefix("p="), index == parts.count - 1 {
                let identifiers = part.dropFirst(2).split(separator: ",", omittingEmptySubsequences: false)
                for identifier in identifiers {
                    guard let decoded = String(identifier).removingPercentEncoding, !decoded.isEmpty else { return nil }
                    processors.append(decoded)
                }
            } else {
                return nil
            }
        }
        self.source = String(source)
        self.requestString = String(source)
        self.targetSize = targetSize
        self.processors = processors
    }

    /// The stable string that identifies the image in the cache.
    ///
    /// Equal keys have equal canonical strings, and keys that name the same image (see the type
    /// discussion) are equal. The format is `<source>[#size=<W>x<H>][#p=<id>,<id>…]`, with `%`,
    /// `,` and `#` percent-encoded inside processor identifiers.
    public var canonicalString: String {
        var result = source
        if let targetSize { result += "#size=\(targetSize)" }
        if !processors.isEmpty {
            result += "#p=" + processors.map(Self.escapeProcessor).joined(separator: ",")
        }
        return result
    }

    /// The key of the source's original: no target size, no processors.
    public var original: ImageKey {
        ImageKey(canonicalSource: source, requestString: requestString)
    }

    /// Whether this key names the original image rather than a variant.
    public var isOriginal: Bool { targetSize == nil && processors.isEmpty }

    /// The prefix that the canonical string of every variant of this key's source starts with:
    /// the canonical source followed by `#`.
    public var variantPrefix: String { source + "#" }

    /// Whether this key is a variant (a resized or processed version) of `other`'s source.
    ///
    /// A key is not a variant of itself when it is an original.
    public func isVariant(of other: ImageKey) -> Bool {
        source == other.source && !isOriginal
    }

    /// The canonical string, for logs.
    public var description: String { canonicalString }

    // MARK: - Canonicalisation

    private init(canonicalSource: String, requestString: String) {
        self.source = canonicalSource
        self.requestString = requestString
        self.targetSize = nil
        self.processors = []
    }

    // Identity is the canonical string alone; `requestString` only says what to fetch.

    public static func == (lhs: ImageKey, rhs: ImageKey) -> Bool {
        lhs.source == rhs.source && lhs.targetSize == rhs.targetSize && lhs.processors == rhs.processors
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(source)
        hasher.combine(targetSize)
        hasher.combine(processors)
    }

    private static let defaultPorts = ["http": 80, "https": 443, "ws": 80, "wss": 443]

    static func canonicalSource(_ source: String, filter: KeyFilter?) -> String {
        guard var components = URLComponents(string: source), let scheme = components.scheme, !scheme.isEmpty else {
            return escapeOpaque(source)
        }
        let lowerScheme = scheme.lowercased()
        components.scheme = lowerScheme
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        if let port = components.port, defaultPorts[lowerScheme] == port { components.port = nil }
        if components.percentEncodedPath.isEmpty, components.host != nil, lowerScheme.hasPrefix("http") {
            components.percentEncodedPath = "/"
        }
        components.fragment = nil
        components.percentEncodedPath = removingDotSegments(normalizingPercentEncoding(components.percentEncodedPath))
        if let items = components.percentEncodedQueryItems {
            let kept = items.filter { item in
                guard let filter else { return true }
                let decoded = URLQueryItem(name: item.name.removingPercentEncoding ?? item.name,
                                           value: item.value.map { $0.removingPercentEncoding ?? $0 })
                return !filter.shouldRemove(decoded)
            }
            // Stable sort by name (enumerated offsets break ties), keeping encodings as they were.
            let sorted = kept.enumerated().sorted { lhs, rhs in
                lhs.element.name != rhs.element.name ? lhs.element.name < rhs.element.name : lhs.offset < rhs.offset
            }.map(\.element)
            components.percentEncodedQueryItems = sorted.isEmpty ? nil : sorted.map { item in
                URLQueryItem(name: normalizingPercentEncoding(item.name), value: item.value.map(normalizingPercentEncoding))
            }
        }
        guard let canonical = components.string else { return escapeOpaque(source) }
        return canonical
    }

    /// RFC 3986 section 6.2.2.1–2: hexadecimal digits of percent-encodings upper-cased, and
    /// percent-encoded unreserved characters (letters, digits, `-`, `.`, `_`, `~`) decoded.
    static func normalizingPercentEncoding(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        let bytes = Array(text.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                let byte = high << 4 | low
                if isUnreserved(byte) {
                    result.append(byte)
                } else {
                    result += [UInt8(ascii: "%"), hexDigit(high), hexDigit(low)]
                }
                index += 3
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// RFC 3986 section 5.2.4: `.` and `..` segments removed from a path.
    static func removingDotSegments(_ path: String) -> String {
        guard path.contains(".") else { return path }
        var input = Substring(path)
        var output: [Substring] = []
        // Segments keep their leading "/"; the loop follows the RFC's steps A–E.
        while !input.isEmpty {
            if input.hasPrefix("../") { input = input.dropFirst(3) }
            else if input.hasPrefix("./") { input = input.dropFirst(2) }
            else if input.hasPrefix("/./") { input = input.dropFirst(2) }
            else if input == "/." { input = "/" }
            else if input.hasPrefix("/../") { input = input.dropFirst(3); if !output.isEmpty { output.removeLast() } }
            else if input == "/.." { input = "/"; if !output.isEmpty { output.removeLast() } }
            else if input == "." || input == ".." { input = "" }
            else {
                let start = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[start...].firstIndex(of: "/") ?? input.endIndex
                output.append(input[..<end])
                input = input[end...]
            }
        }
        return output.joined()
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Escapes `%` and `#` so an opaque source can neither contain the variant separator nor
    /// collide with another source after escaping.
    private static func escapeOpaque(_ source: String) -> String {
        source.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "#", with: "%23")
    }

    private static func escapeProcessor(_ identifier: String) -> String {
        identifier.replacingOccurrences(of: "%", with: "%25")
            .replacingOccurrences(of: ",", with: "%2C")
            .replacingOccurrences(of: "#", with: "%23")
    }
}

extension ImageKey: CacheKey {
    /// The ``canonicalString``, which is what the disk tier stores and prefix scans match.
    public var cacheKey: String { canonicalString }
}
