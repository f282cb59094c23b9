public import Foundation

/// Image bytes downloaded by ``HTTPImageFetcher``, with what the response said about them.
///
/// ```swift
/// let image = try await fetcher.fetch(url)
/// print(image.format, image.data.count, image.entityTag ?? "no ETag")
/// ```
public struct FetchedImage: Sendable, Hashable {
    /// The body, exactly as received.
    public var data: Data
    /// The format the body's signature names.
    public var format: ImageFormat
    /// The final URL, after redirects.
    public var url: URL
    /// The HTTP status code (2xx); `200` for a download assembled from kept bytes and a `206`.
    public var statusCode: Int
    /// The `ETag` header, for revalidation.
    public var entityTag: String?
    /// The `Last-Modified` header, for revalidation.
    public var lastModified: String?
    /// The `Content-Type` header, when present.
    public var contentType: String?
    /// The `Cache-Control` header, if the server sent one.
    public var cacheControl: String?
    /// The `Expires` header, if the server sent one.
    public var expires: String?
    /// The `Date` header: when the server made the response.
    public var date: String?
    /// The `Age` header: seconds the response spent in caches on its way.
    public var age: String?

    /// Creates a fetched image.
    public init(data: Data, format: ImageFormat, url: URL, statusCode: Int = 200, entityTag: String? = nil,
                lastModified: String? = nil, contentType: String? = nil, cacheControl: String? = nil,
                expires: String? = nil, date: String? = nil, age: String? = nil) {
        self.cacheControl = cacheControl
        self.expires = expires
        self.date = date
        self.age = age
        self.data = data
        self.format = format
        self.url = url
        self.statusCode = statusCode
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.contentType = contentType
    }
}
