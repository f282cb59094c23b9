/// How soon a download should start when ``HTTPImageFetcher`` is at its concurrency bound:
/// waiting downloads start in order of priority, then of arrival.
///
/// An open set of values: use the presets or any other raw value.
///
/// ```swift
/// let visible = try await cache.image(for: key, priority: .high)   // ahead of prefetches
/// ```
public struct FetchPriority: RawRepresentable, Hashable, Comparable, Sendable {
    public let rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// Prefetches: whatever is left after every other download.
    public static let low = FetchPriority(rawValue: 0)
    /// The default.
    public static let normal = FetchPriority(rawValue: 50)
    /// Images on screen now.
    public static let high = FetchPriority(rawValue: 100)

    public static func < (lhs: FetchPriority, rhs: FetchPriority) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}
