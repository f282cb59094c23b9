public import Foundation

/// Makes a variant (a resized or otherwise processed image) from its original's bytes.
///
/// ``ImageCache`` looks processors up by ``identifier``. To make a missing variant it runs, in
/// order, the processor registered under ``resizeIdentifier`` when the key has a
/// ``ImageKey/targetSize``, then one processor for each of the key's
/// ``ImageKey/processors``. Each step gets the previous step's output (the original for the
/// first) and the variant's key, and must return encoded bytes of a known ``ImageFormat``.
///
/// ```swift
/// let thumbnail = ImageProcessor.resize { image, key in
///     let size = key.targetSize!
///     return try encodeJPEG(decode(image.data).scaled(to: size.width, size.height))
/// }
/// let sepia = ImageProcessor("sepia") { image, _ in try applySepia(to: image.data) }
/// cache.register(thumbnail)
/// cache.register(sepia)
/// let key = ImageKey(url, targetSize: .init(width: 120, height: 90), processors: ["sepia"])
/// ```
public struct ImageProcessor: Sendable {
    /// The identifier that keys name in ``ImageKey/processors`` (or ``resizeIdentifier``).
    public let identifier: String
    /// Produces the processed bytes from an image and the variant's key.
    public let process: @Sendable (_ image: CachedImage, _ key: ImageKey) async throws -> Data

    /// The identifier of the processor that makes a key's ``ImageKey/targetSize``: `"resize"`.
    public static let resizeIdentifier = "resize"

    /// Creates a processor.
    ///
    /// - Parameters:
    ///   - identifier: The name keys use for it; not empty.
    ///   - process: Returns the processed, encoded bytes. Throw to fail the request; the
    ///     variant is then not cached.
    public init(
        _ identifier: String,
        process: @escaping @Sendable (_ image: CachedImage, _ key: ImageKey) async throws -> Data
    ) {
        precondition(!identifier.isEmpty, "an image processor identifier is not empty")
        self.identifier = identifier
        self.process = process
    }

    /// A processor registered under ``resizeIdentifier``, which makes a key's target size.
    public static func resize(
        _ process: @escaping @Sendable (_ image: CachedImage, _ key: ImageKey) async throws -> Data
    ) -> ImageProcessor {
        ImageProcessor(resizeIdentifier, process: process)
    }
}
