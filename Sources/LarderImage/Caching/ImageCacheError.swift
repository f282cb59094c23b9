/// Every error ``ImageCache`` throws itself.
///
/// Errors from elsewhere pass through unchanged: a fetch closure's own errors,
/// ``ImageFetchError`` from ``HTTPImageFetcher``, a processor's errors, `CancellationError`, and
/// `StorageError` from the disk tier.
///
/// ```swift
/// do {
///     let result = try await cache.image(for: key) { try await download($0) }
/// } catch ImageCacheError.invalidImageData(let reason) {
///     log("server sent something that is not an image: \(reason)")
/// }
/// ```
public enum ImageCacheError: Error, Equatable, CustomStringConvertible {
    /// Bytes from a fetch or a processor are not a cacheable image: they are empty, or no known
    /// ``ImageFormat`` signature matches them. Nothing was cached.
    case invalidImageData(reason: String)
    /// A variant had to be made from its original, but a processor it needs is not registered.
    /// The identifier is ``ImageProcessor/resizeIdentifier`` for a key with a target size.
    case processorNotRegistered(identifier: String)
    /// ``ImageCache/image(for:)`` was called on a cache created without an ``HTTPImageFetcher``.
    case noFetcher
    /// The key's source is not an absolute `http` or `https` URL, so the fetcher cannot load it.
    case unsupportedSource(String)

    public var description: String {
        switch self {
        case let .invalidImageData(reason): return "The bytes are not a cacheable image: \(reason)"
        case let .processorNotRegistered(identifier):
            return "No image processor is registered for \"\(identifier)\""
        case .noFetcher: return "The image cache has no HTTP fetcher; pass a fetch closure"
        case let .unsupportedSource(source): return "\"\(source)\" is not an http(s) URL the fetcher can load"
        }
    }
}
