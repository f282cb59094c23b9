public import Foundation
public import Larder

/// An image from ``ImageCache`` and the step that produced it.
///
/// ```swift
/// let result = try await cache.image(for: key) { try await download($0) }
/// if result.source.isCached { metrics.hits += 1 } else { metrics.misses += 1 }
/// render(result.data)
/// ```
public struct ImageResult: Sendable, Hashable {
    /// Where an ``ImageResult`` came from: a storage tier, the network, or a processor.
    ///
    /// An open set (like `StorageTier`): a storage with more tiers adds sources without
    /// breaking a caller's `switch`.
    public struct Source: Sendable, Hashable, CustomStringConvertible {
        /// The source's name: a tier's name, `"network"` or `"processed"`.
        public let name: String

        private init(name: String) {
            self.name = name
        }

        /// The storage tier `tier` held the image (it is now in the faster tiers too).
        public static func tier(_ tier: StorageTier) -> Source {
            Source(name: tier.name)
        }

        /// The memory tier held the image.
        public static let memory = Source.tier(.memory)
        /// The disk tier held the image (it is now in memory too).
        public static let disk = Source.tier(.disk)
        /// The fetch closure or the ``HTTPImageFetcher`` produced the bytes, which are now cached.
        public static let network = Source(name: "network")
        /// A registered ``ImageProcessor`` made the variant from the cached (or just fetched)
        /// original; the variant is now cached.
        public static let processed = Source(name: "processed")

        /// Whether a cache tier answered (no fetch, no processing).
        public var isCached: Bool { self != .network && self != .processed }

        public var description: String { name }
    }

    /// Whether an ``ImageResult`` was fresh, confirmed by the server, or stale.
    ///
    /// An open set, like ``Source``.
    ///
    /// ```swift
    /// if result.freshness.isStale { showStaleBadge() }
    /// ```
    public struct Freshness: Sendable, Hashable, CustomStringConvertible {
        /// The name: `"fresh"`, `"revalidated"`, `"stale-while-revalidate"` or `"stale-if-error"`.
        public let name: String

        private init(name: String) {
            self.name = name
        }

        /// Within its lifetime, or just downloaded or processed.
        public static let fresh = Freshness(name: "fresh")
        /// Stale, and a conditional request confirmed it (`304 Not Modified`): its lifetime and
        /// validators were refreshed without transferring or rewriting the bytes.
        public static let revalidated = Freshness(name: "revalidated")
        /// Stale but within its `stale-while-revalidate` window: returned at once while one
        /// revalidation runs in the background.
        public static let staleWhileRevalidate = Freshness(name: "stale-while-revalidate")
        /// Stale, and revalidating it failed (a transport error or a 5xx) within its
        /// `stale-if-error` window.
        public static let staleIfError = Freshness(name: "stale-if-error")

        /// Whether the image was returned past its lifetime without the server confirming it.
        public var isStale: Bool { self == .staleWhileRevalidate || self == .staleIfError }

        public var description: String { name }
    }

    /// The image bytes and metadata.
    public var image: CachedImage
    /// The step that answered: for a revalidated or stale image, the tier that held the bytes.
    public var source: Source
    /// Whether the image was fresh, revalidated or stale.
    public var freshness: Freshness

    /// Creates a result.
    public init(image: CachedImage, source: Source, freshness: Freshness = .fresh) {
        self.image = image
        self.source = source
        self.freshness = freshness
    }

    /// The encoded image bytes.
    public var data: Data { image.data }
    /// The image's format, size and validators.
    public var metadata: ImageMetadata { image.metadata }
}
