public import Foundation

/// An image from ``ImageCache`` and the step that produced it.
///
/// ```swift
/// let result = try await cache.image(for: key) { try await download($0) }
/// switch result.source {
/// case .memory, .disk: metrics.hits += 1
/// case .network, .processed: metrics.misses += 1
/// }
/// render(result.data)
/// ```
public struct ImageResult: Sendable, Hashable {
    /// Where an ``ImageResult`` came from.
    public enum Source: Sendable, Hashable, CustomStringConvertible {
        /// The memory tier held the image.
        case memory
        /// The disk tier held the image (it is now in memory too).
        case disk
        /// The fetch closure or the ``HTTPImageFetcher`` produced the bytes, which are now cached.
        case network
        /// A registered ``ImageProcessor`` made the variant from the cached (or just fetched)
        /// original; the variant is now cached.
        case processed

        public var description: String {
            switch self {
            case .memory: return "memory"
            case .disk: return "disk"
            case .network: return "network"
            case .processed: return "processed"
            }
        }
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
