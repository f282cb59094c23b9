public import Foundation
public import Larder

/// What the cache knows about stored image bytes: the format, pixel size, frame count, byte
/// count and the HTTP validators the bytes came with.
///
/// The cache reads everything but the validators from the bytes themselves when it stores them
/// (``ImageFormat/detect(_:)`` and ``ImageHeader/parse(_:)``), so a hit never needs a decoder to
/// answer "how big is this image?".
///
/// ```swift
/// let result = try await cache.image(for: key) { try await download($0) }
/// let metadata = result.metadata
/// print(metadata.format, metadata.pixelWidth ?? 0, metadata.pixelHeight ?? 0)  // "png 640 480"
/// if let etag = metadata.entityTag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
/// ```
public struct ImageMetadata: Sendable, Hashable {
    /// The format ``ImageFormat/detect(_:)`` found.
    public var format: ImageFormat
    /// The width in pixels, or `nil` when ``ImageHeader/parse(_:)`` does not read the format
    /// (SVG, PDF, ICO, JPEG XL, JPEG 2000).
    public var pixelWidth: Int?
    /// The height in pixels, or `nil` when the width is.
    public var pixelHeight: Int?
    /// The number of frames, or `nil` when it cannot be known cheaply (see
    /// ``ImageHeader/frameCount``).
    public var frameCount: Int?
    /// The number of encoded bytes.
    public var byteCount: Int
    /// The `ETag` the image was served with, for revalidation.
    public var entityTag: String?
    /// The `Last-Modified` date the image was served with, for revalidation.
    public var lastModified: String?
    /// When the image stops being fresh, from the response's `Cache-Control` or `Expires` (see
    /// ``ImageFreshness``); after it, ``ImageCache`` revalidates the image before using it.
    /// `nil` when the image has no HTTP lifetime (a fixed freshness, a stored or processed
    /// image): it is fresh for as long as it is cached.
    public var freshUntil: Date?
    /// How long after ``freshUntil`` the stale image may still be returned at once while one
    /// revalidation runs in the background (`Cache-Control: stale-while-revalidate`).
    public var staleWhileRevalidate: Duration
    /// How long after ``freshUntil`` the stale image may be returned when revalidating it fails
    /// with a transport error or a 5xx (`Cache-Control: stale-if-error`).
    public var staleIfError: Duration
    /// The fresh lifetime the last response gave, reused when a `304` says nothing about it.
    var freshLifetime: Duration?

    /// Creates metadata.
    ///
    /// - Precondition: Pixel sizes and the frame count, when given, are positive; `byteCount`
    ///   is not negative.
    public init(
        format: ImageFormat, pixelWidth: Int? = nil, pixelHeight: Int? = nil, frameCount: Int? = nil,
        byteCount: Int, entityTag: String? = nil, lastModified: String? = nil, freshUntil: Date? = nil,
        staleWhileRevalidate: Duration = .zero, staleIfError: Duration = .zero
    ) {
        precondition((pixelWidth.map { $0 > 0 } ?? true) && (pixelHeight.map { $0 > 0 } ?? true),
                     "an image has a positive pixel size")
        precondition(frameCount.map { $0 > 0 } ?? true, "an image has at least one frame")
        precondition(byteCount >= 0, "a byte count is not negative")
        self.format = format
        self.pixelWidth = pixelWidth
        self.pixelHeight = pixelHeight
        self.frameCount = frameCount
        self.byteCount = byteCount
        self.entityTag = entityTag
        self.lastModified = lastModified
        self.freshUntil = freshUntil
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
    }

    /// Whether the image is fresh at `date`: it has no HTTP lifetime, or ``freshUntil`` is later.
    public func isFresh(at date: Date) -> Bool {
        freshUntil.map { date < $0 } ?? true
    }

    /// Whether a stale image may be returned at `date` while it is revalidated in the background.
    func allowsStaleWhileRevalidate(at date: Date) -> Bool {
        freshUntil.map { date < $0.addingTimeInterval(staleWhileRevalidate.timeInterval) } ?? false
    }

    /// Whether a stale image may be returned at `date` because revalidating it failed.
    func allowsStaleIfError(at date: Date) -> Bool {
        freshUntil.map { date < $0.addingTimeInterval(staleIfError.timeInterval) } ?? false
    }

    /// The bytes a decoder needs for every frame as 32-bit RGBA (see
    /// ``ImageHeader/estimatedDecodedCost``), or `nil` when the pixel size is unknown.
    public var estimatedDecodedCost: Int? {
        guard let pixelWidth, let pixelHeight else { return nil }
        return ImageHeader(format: format, pixelWidth: pixelWidth, pixelHeight: pixelHeight, frameCount: frameCount)
            .estimatedDecodedCost
    }

    /// The entry's cost in the memory tier: ``estimatedDecodedCost`` when known, else
    /// ``byteCount``. Memory limits then bound what the decoded images would take, as Nuke's and
    /// Kingfisher's memory caches do.
    public var memoryCost: Int { estimatedDecodedCost ?? byteCount }
}

/// Encoded image bytes with their ``ImageMetadata``: what ``ImageCache`` stores and returns.
///
/// The throwing initializer is the only way to make one, and it accepts only bytes that a known
/// ``ImageFormat`` signature matches, so a `CachedImage` always holds a recognisable image.
///
/// ```swift
/// let image = try CachedImage(data: pngBytes, entityTag: "\"v1\"")
/// image.metadata.format       // .png
/// image.metadata.memoryCost   // width × height × 4
/// ```
public struct CachedImage: Sendable, Hashable {
    /// The encoded image bytes, exactly as fetched or produced by a processor.
    public let data: Data
    /// The format, size and validators of ``data``.
    public let metadata: ImageMetadata

    /// Checks `data` and reads its metadata.
    ///
    /// - Parameters:
    ///   - data: Encoded image bytes.
    ///   - entityTag: The `ETag` the bytes were served with.
    ///   - lastModified: The `Last-Modified` date the bytes were served with.
    /// - Throws: ``ImageCacheError/invalidImageData(reason:)`` when `data` is empty or no known
    ///   format signature matches it.
    public init(data: Data, entityTag: String? = nil, lastModified: String? = nil) throws {
        guard !data.isEmpty else { throw ImageCacheError.invalidImageData(reason: "the bytes are empty") }
        guard let format = ImageFormat.detect(data) else {
            throw ImageCacheError.invalidImageData(
                reason: "no known image format matches the first bytes of \(data.count) bytes")
        }
        let header = ImageHeader.parse(data)
        self.data = data
        self.metadata = ImageMetadata(
            format: format, pixelWidth: header?.pixelWidth, pixelHeight: header?.pixelHeight,
            frameCount: header?.frameCount, byteCount: data.count, entityTag: entityTag, lastModified: lastModified)
    }

    /// Pairs bytes with metadata already checked (read back from the cache's own frame).
    init(checkedData data: Data, metadata: ImageMetadata) {
        self.data = data
        self.metadata = metadata
    }
}

extension ImageFormat {
    /// Whether gzip can usefully shrink the format: `false` for formats whose bytes are already
    /// entropy-coded (JPEG, PNG, GIF, WebP, HEIF, AVIF, JPEG XL, JPEG 2000).
    var isCompressible: Bool {
        ![ImageFormat.jpeg, .png, .apng, .gif, .webp, .heic, .heif, .avif, .jpegXL, .jpeg2000].contains(self)
    }
}

extension Transformer where Value == CachedImage {
    /// The disk encoding of `CachedImage`: a small header, the metadata, then the image bytes.
    ///
    /// The frame is `"LIMG"`, a version byte (1), the metadata's length as a big-endian
    /// `UInt32`, the metadata as JSON, then the image bytes unchanged. Decoding checks every
    /// length, so a truncated or foreign frame is a decoding error, which `Storage` treats
    /// as a miss that removes the entry. Gzip is skipped for already-compressed formats.
    ///
    /// ```swift
    /// let storage = try Storage<ImageKey, CachedImage>(transformer: .cachedImage)
    /// ```
    public static var cachedImage: Transformer<CachedImage> {
        var transformer = Transformer(encode: ImageFrame.encode, decode: ImageFrame.decode)
        transformer.isValueCompressible = { $0.metadata.format.isCompressible }
        return transformer
    }
}

/// The byte layout behind ``Transformer/cachedImage``.
enum ImageFrame {
    static let magic = Data("LIMG".utf8)
    static let version: UInt8 = 1
    static let headerSize = 4 + 1 + 4

    /// The metadata as stored: short keys, and the format by identifier and MIME type so a
    /// format the reader does not know still round-trips.
    private struct Stored: Codable {
        var f: String
        var m: String
        var w: Int?
        var h: Int?
        var n: Int?
        var b: Int
        var e: String?
        var l: String?
        /// Freshness: fresh until (milliseconds since 1970), stale-while-revalidate and
        /// stale-if-error windows and the fresh lifetime (seconds). Absent in older frames.
        var u: Int64?
        var r: Double?
        var x: Double?
        var t: Double?
    }

    static func encode(_ image: CachedImage) throws -> Data {
        let metadata = image.metadata
        let stored = Stored(
            f: metadata.format.identifier, m: metadata.format.mimeType, w: metadata.pixelWidth,
            h: metadata.pixelHeight, n: metadata.frameCount, b: metadata.byteCount,
            e: metadata.entityTag, l: metadata.lastModified, u: metadata.freshUntil.map(FreshnessRecord.milliseconds),
            r: metadata.staleWhileRevalidate.nonZeroSeconds, x: metadata.staleIfError.nonZeroSeconds,
            t: metadata.freshLifetime?.timeInterval)
        let json = try JSONEncoder().encode(stored)
        var frame = Data(capacity: headerSize + json.count + image.data.count)
        frame.append(magic)
        frame.append(version)
        withUnsafeBytes(of: UInt32(json.count).bigEndian) { frame.append(contentsOf: $0) }
        frame.append(json)
        frame.append(image.data)
        return frame
    }

    static func decode(_ frame: Data) throws -> CachedImage {
        let bytes = [UInt8](frame.prefix(headerSize))
        guard bytes.count == headerSize, Data(bytes[0..<4]) == magic else {
            throw StorageError.decoding("not an image cache frame")
        }
        guard bytes[4] == version else {
            throw StorageError.decoding("image frame version \(bytes[4]) is not \(version)")
        }
        let length = bytes[5..<9].reduce(0) { $0 << 8 | Int($1) }
        let start = frame.startIndex + headerSize
        guard length <= frame.count - headerSize else {
            throw StorageError.decoding("image frame metadata of \(length) bytes is truncated")
        }
        let stored: Stored
        do {
            stored = try JSONDecoder().decode(Stored.self, from: frame.subdata(in: start..<start + length))
        } catch {
            throw StorageError.decoding("image frame metadata: \(error)", cause: error)
        }
        let data = frame.subdata(in: start + length..<frame.endIndex)
        guard stored.b == data.count, !data.isEmpty,
              stored.w.map({ $0 > 0 }) ?? true, stored.h.map({ $0 > 0 }) ?? true,
              (stored.w == nil) == (stored.h == nil), stored.n.map({ $0 > 0 }) ?? true
        else {
            throw StorageError.decoding("image frame metadata does not match its \(data.count) bytes")
        }
        var metadata = ImageMetadata(
            format: ImageFormat(stored.f, mimeType: stored.m), pixelWidth: stored.w, pixelHeight: stored.h,
            frameCount: stored.n, byteCount: stored.b, entityTag: stored.e, lastModified: stored.l)
        metadata.freshUntil = stored.u.map(FreshnessRecord.date)
        metadata.staleWhileRevalidate = .storedSeconds(stored.r ?? 0)
        metadata.staleIfError = .storedSeconds(stored.x ?? 0)
        metadata.freshLifetime = stored.t.map(Duration.storedSeconds)
        return CachedImage(checkedData: data, metadata: metadata)
    }
}
