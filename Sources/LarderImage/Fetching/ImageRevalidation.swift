public import Foundation

/// What a conditional request (``HTTPImageFetcher/revalidate(_:entityTag:lastModified:headers:priority:progress:)``)
/// got back: the cached bytes are still current, or new bytes.
///
/// ```swift
/// switch try await fetcher.revalidate(url, entityTag: cached.metadata.entityTag, lastModified: nil) {
/// case .notModified(let response): keep(cached, for: response.cacheControl)   // no body was sent
/// case .modified(let image): replace(cached, with: image.data)
/// }
/// ```
public enum ImageRevalidation: Sendable, Hashable {
    /// The server answered `304 Not Modified`: the cached bytes are current.
    case notModified(NotModifiedResponse)
    /// The server answered `200` with a new image, validated as ``HTTPImageFetcher/fetch(_:headers:priority:partialDownloadFile:progress:)``
    /// validates one.
    case modified(FetchedImage)
}

/// The header fields of a `304 Not Modified` answer that update a cached image.
///
/// ```swift
/// if case .notModified(let response) = outcome { print(response.entityTag ?? "", response.cacheControl ?? "") }
/// ```
public struct NotModifiedResponse: Sendable, Hashable {
    /// The URL that was requested.
    public var url: URL
    /// The `ETag` header, when the answer repeats or changes it.
    public var entityTag: String?
    /// The `Last-Modified` header.
    public var lastModified: String?
    /// The `Cache-Control` header.
    public var cacheControl: String?
    /// The `Expires` header.
    public var expires: String?
    /// The `Date` header.
    public var date: String?
    /// The `Age` header.
    public var age: String?

    /// Creates a response.
    public init(url: URL, entityTag: String? = nil, lastModified: String? = nil, cacheControl: String? = nil,
                expires: String? = nil, date: String? = nil, age: String? = nil) {
        self.url = url
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.cacheControl = cacheControl
        self.expires = expires
        self.date = date
        self.age = age
    }
}
