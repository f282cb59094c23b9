/// An image file format, identified by a short name and its MIME type.
///
/// The set of formats is open, as Nuke's `AssetType` is: ``ImageFormat`` is a struct with
/// static constants, not an enum, so you can declare a format Larder does not know without
/// waiting for a release, and adding a constant never breaks an exhaustive `switch`. Two
/// formats are equal when their ``identifier``s are equal.
///
/// Use ``detect(_:)`` to sniff the format of downloaded or cached bytes:
///
/// ```swift
/// let data = try Data(contentsOf: url)
/// switch ImageFormat.detect(data) {
/// case .png?, .apng?: print("PNG")
/// case let format?: print("other image:", format.mimeType)
/// case nil: print("not an image Larder recognises")
/// }
///
/// extension ImageFormat {
///     static let qoi = ImageFormat("qoi", mimeType: "image/qoi")
/// }
/// ```
public struct ImageFormat: Sendable, Hashable, CustomStringConvertible {
    /// A short, stable, lower-case name such as `"png"` or `"jpeg-xl"`.
    ///
    /// This is the format's identity: equality and hashing use it alone.
    public let identifier: String

    /// The format's MIME type, such as `"image/png"`.
    public let mimeType: String

    /// Creates a format from its identifier and MIME type.
    ///
    /// - Parameters:
    ///   - identifier: A short, stable, lower-case name; formats with the same identifier are equal.
    ///   - mimeType: The MIME type servers send for the format.
    public init(_ identifier: String, mimeType: String) {
        self.identifier = identifier
        self.mimeType = mimeType
    }

    public static func == (lhs: ImageFormat, rhs: ImageFormat) -> Bool {
        lhs.identifier == rhs.identifier
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(identifier)
    }

    /// The identifier, for logs.
    public var description: String { identifier }
}

extension ImageFormat {
    /// JPEG (JFIF, Exif, or a bare JPEG stream).
    public static let jpeg = ImageFormat("jpeg", mimeType: "image/jpeg")
    /// PNG without animation control (a plain, single-frame PNG).
    public static let png = ImageFormat("png", mimeType: "image/png")
    /// Animated PNG: a PNG whose `acTL` chunk comes before the first `IDAT`.
    ///
    /// APNG has its own constant because it has its own MIME type; animated GIF and WebP do not,
    /// so their animation shows in ``ImageHeader/frameCount`` instead.
    public static let apng = ImageFormat("apng", mimeType: "image/apng")
    /// GIF, version 87a or 89a, animated or not.
    public static let gif = ImageFormat("gif", mimeType: "image/gif")
    /// WebP: lossy (`VP8 `), lossless (`VP8L`) or extended (`VP8X`, which covers alpha and animation).
    public static let webp = ImageFormat("webp", mimeType: "image/webp")
    /// HEIC: HEIF holding HEVC-coded images (brands `heic`, `heix`, `heim`, `heis`, `hevc`, `hevx`).
    public static let heic = ImageFormat("heic", mimeType: "image/heic")
    /// HEIF with a generic brand (`mif1`, `msf1`) and no more specific HEIC or AVIF brand.
    public static let heif = ImageFormat("heif", mimeType: "image/heif")
    /// AVIF: AV1-coded images in HEIF (brands `avif`, `avis`).
    public static let avif = ImageFormat("avif", mimeType: "image/avif")
    /// Windows bitmap.
    public static let bmp = ImageFormat("bmp", mimeType: "image/bmp")
    /// TIFF, little-endian (`II*\0`) or big-endian (`MM\0*`), including BigTIFF.
    public static let tiff = ImageFormat("tiff", mimeType: "image/tiff")
    /// Windows icon (`.ico`).
    public static let ico = ImageFormat("ico", mimeType: "image/vnd.microsoft.icon")
    /// Windows cursor: the ICO layout with type 2 and a hotspot per entry.
    public static let cur = ImageFormat("cur", mimeType: "image/x-win-bitmap")
    /// JPEG XL, as a bare codestream or in its ISO BMFF container.
    public static let jpegXL = ImageFormat("jpeg-xl", mimeType: "image/jxl")
    /// JPEG 2000, as a JP2 file or a raw J2K codestream.
    public static let jpeg2000 = ImageFormat("jpeg-2000", mimeType: "image/jp2")
    /// PDF document.
    public static let pdf = ImageFormat("pdf", mimeType: "application/pdf")
    /// SVG document (XML with an `<svg>` root element).
    public static let svg = ImageFormat("svg", mimeType: "image/svg+xml")

    /// Every format ``detect(_:)`` can report.
    public static let knownFormats: [ImageFormat] = [
        .jpeg, .png, .apng, .gif, .webp, .heic, .heif, .avif, .bmp, .tiff, .ico, .jpegXL,
        .jpeg2000, .pdf, .svg,
    ]

    /// Whether the format is a vector or document format rather than a raster image.
    public var isVector: Bool { self == .svg || self == .pdf }
}
