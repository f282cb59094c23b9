public import Foundation

/// The pixel size and frame count of an image, read from its header without decoding it.
///
/// ``parse(_:)`` reads PNG (and APNG), JPEG, GIF, WebP, BMP, TIFF and HEIF/AVIF headers. It is
/// written for untrusted bytes: every read is bounds-checked, every offset sum is
/// overflow-checked and every walk (JPEG markers, GIF blocks, PNG and WebP chunks, ISO boxes,
/// TIFF entries) has a fixed bound, so malformed, truncated or hostile input gives `nil` in
/// bounded time.
///
/// ```swift
/// if let header = ImageHeader.parse(data) {
///     print(header.format, header.pixelWidth, "x", header.pixelHeight)   // "png 640 x 480"
///     let cost = header.estimatedDecodedCost                            // 640 * 480 * 4
/// }
/// ```
public struct ImageHeader: Sendable, Hashable {
    /// The image format, as ``ImageFormat/detect(_:)`` reports it.
    public var format: ImageFormat
    /// The width in pixels, always positive (before any Exif orientation is applied).
    public var pixelWidth: Int
    /// The height in pixels, always positive (before any Exif orientation is applied).
    public var pixelHeight: Int
    /// The number of frames, or `nil` when it cannot be known cheaply.
    ///
    /// `1` for a still PNG, JPEG, BMP, still WebP and HEIF/AVIF image; the `acTL` frame count
    /// for APNG; the counted `ANMF` chunks for animated WebP; the counted image descriptors for
    /// GIF. `nil` when the bytes end before the count is certain (a truncated GIF or APNG), for
    /// image sequences (`msf1`, `avis`) and for TIFF, whose extra directories are pages rather
    /// than frames.
    public var frameCount: Int?
    /// The Exif orientation (1–8) a viewer applies: 1 is as stored; 5–8 turn the image a
    /// quarter, so its displayed width is ``pixelHeight``. Read from JPEG and WebP; 1 for other
    /// formats. (HEIF and AVIF rotations are applied to their sizes already.)
    public var orientation: Int

    /// Creates a header.
    ///
    /// - Precondition: `pixelWidth` and `pixelHeight` are positive; `frameCount`, when given, too.
    public init(format: ImageFormat, pixelWidth: Int, pixelHeight: Int, frameCount: Int? = 1, orientation: Int = 1) {
        precondition(pixelWidth > 0 && pixelHeight > 0, "an image has a positive pixel size")
        precondition(frameCount.map { $0 > 0 } ?? true, "an image has at least one frame")
        self.format = format
        self.pixelWidth = pixelWidth
        self.pixelHeight = pixelHeight
        self.frameCount = frameCount
        self.orientation = (1...8).contains(orientation) ? orientation : 1
    }

    /// The width as displayed, after ``orientation``: ``pixelHeight`` for orientations 5–8.
    public var orientedPixelWidth: Int { orientation >= 5 ? pixelHeight : pixelWidth }
    /// The height as displayed, after ``orientation``: ``pixelWidth`` for orientations 5–8.
    public var orientedPixelHeight: Int { orientation >= 5 ? pixelWidth : pixelHeight }

    /// Whether the image has more than one frame.
    public var isAnimated: Bool { (frameCount ?? 1) > 1 }

    /// The bytes a decoder needs to hold every frame as 32-bit RGBA: width × height × 4 × frames.
    ///
    /// An unknown frame count counts as one frame. The product saturates at `Int.max` instead of
    /// overflowing, so a hostile header cannot trap the caller; use it as a memory cost.
    public var estimatedDecodedCost: Int {
        var cost = 4
        for factor in [pixelWidth, pixelHeight, frameCount ?? 1] {
            let (product, overflow) = cost.multipliedReportingOverflow(by: factor)
            if overflow { return .max }
            cost = product
        }
        return cost
    }

    /// Reads the format, pixel size and frame count from the leading bytes of an image.
    ///
    /// Supported: PNG and APNG (`IHDR`, `acTL`), JPEG (the first SOFn segment), GIF (logical
    /// screen, frames counted by walking blocks), WebP (`VP8 `, `VP8L`, `VP8X`, `ANMF` counted),
    /// BMP (including top-down bitmaps with a negative height), TIFF (IFD0 `ImageWidth` and
    /// `ImageLength`, SHORT or LONG, either byte order) and HEIF/HEIC/AVIF (the primary item's
    /// `ispe` property). Other formats return `nil`.
    ///
    /// - Parameter data: The image bytes; a prefix is enough when the header fits in it.
    /// - Returns: The header, or `nil` for an unsupported format or malformed, truncated input.
    /// - Complexity: Bounded: at most a few thousand reads whatever the input; GIF frame
    ///   counting reads one length byte per 255-byte data sub-block.
    public static func parse(_ data: Data) -> ImageHeader? {
        guard let format = ImageFormat.detect(data) else { return nil }
        let reader = ByteReader(data)
        let parsed: (width: Int, height: Int, frames: Int?)?
        switch format {
        case .png, .apng: parsed = parsePNG(reader)
        case .jpeg: parsed = parseJPEG(reader)
        case .gif: parsed = parseGIF(reader)
        case .webp: parsed = parseWebP(reader)
        case .bmp: parsed = parseBMP(reader)
        case .tiff: parsed = reader.uint16(at: 2, bigEndian: reader.matches(ascii: "MM")) == 43
            ? parseBigTIFF(reader) : parseTIFF(reader)
        case .heic, .heif, .avif: parsed = parseHEIF(reader)
        case .ico, .cur: parsed = parseICO(reader)
        case .jpegXL: parsed = parseJPEGXL(reader)
        case .jpeg2000: parsed = parseJPEG2000(reader)
        default: parsed = nil
        }
        guard let parsed, parsed.width > 0, parsed.height > 0, parsed.frames.map({ $0 > 0 }) ?? true
        else { return nil }
        return ImageHeader(format: format, pixelWidth: parsed.width, pixelHeight: parsed.height,
                           frameCount: parsed.frames, orientation: orientation(reader, format: format))
    }
}
