/// What an ``ImageCache`` did since it was created: each ``ImageCache/image(for:)`` call counts
/// exactly once, as a hit (a fresh image from memory or a tier below it, a revalidated image,
/// or a stale one), a miss (processed or downloaded), or a failure.
///
/// ```swift
/// let statistics = cache.statistics
/// print(statistics.hits, statistics.misses, statistics.downloads)
/// ```
public struct ImageCacheStatistics: Sendable, Hashable {
    /// Requests answered from memory.
    public var memoryHits = 0
    /// Requests answered by a tier below memory (the disk), by tier name.
    public var tierHits: [String: Int] = [:]
    /// Requests answered by a stale image that a `304 Not Modified` confirmed.
    public var revalidated = 0
    /// Requests answered at once by a stale image within its `stale-while-revalidate` window.
    public var staleWhileRevalidate = 0
    /// Requests answered by a stale image within its `stale-if-error` window after
    /// revalidating it failed.
    public var staleIfError = 0
    /// Requests answered by a variant made from the cached original.
    public var processed = 0
    /// Requests answered by a download (every caller that waited for it counts).
    public var downloaded = 0
    /// Downloads that ran: one per coalesced load, however many callers waited for it.
    public var downloads = 0
    /// Conditional requests (`If-None-Match`, `If-Modified-Since`) that ran, in the foreground or
    /// the background: one per coalesced revalidation, whatever it got back.
    public var revalidations = 0
    /// Requests that failed (a fetch, processor or storage error, or cancellation).
    public var failures = 0

    /// Creates statistics at zero.
    public init() {}

    /// Requests answered from the cache's bytes: fresh, revalidated or stale.
    public var hits: Int { memoryHits + tierHits.values.reduce(0, +) + revalidated + staleWhileRevalidate + staleIfError }
    /// Requests that needed a download or a processor.
    public var misses: Int { processed + downloaded }
    /// Every request: hits, misses and failures.
    public var requests: Int { hits + misses + failures }
}
