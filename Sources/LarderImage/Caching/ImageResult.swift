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

    /// The image bytes and metadata.
    public var image: CachedImage
    /// The step that answered.
    public var source: Source

    /// Creates a result.
    public init(image: CachedImage, source: Source) {
        self.image = image
        self.source = source
    }

    /// The encoded image bytes.
    public var data: Data { image.data }
    /// The image's format, size and validators.
    public var metadata: ImageMetadata { image.metadata }
}
