public import Foundation

/// Whether encoded image bytes are a whole file, checked by walking the container structure
/// without decoding any pixels: PNG chunks to `IEND`, JPEG segments to `EOI`, GIF blocks to
/// the trailer, the RIFF size of WebP, the top-level boxes of HEIF/AVIF, the file size of BMP.
///
/// Formats without such a structure here (TIFF, ICO, SVG, PDF, JPEG XL, JPEG 2000) are
/// accepted as they are. Every walk is bounds-checked and bounded in steps, so hostile bytes
/// cost at most one linear pass.
enum ImageCompleteness {
    /// Most structural steps a walk takes before it gives up and calls the bytes incomplete.
    static let maximumSteps = 1 << 20

    /// Why `data` of `format` is not a complete file, or `nil` when it is (or cannot be told).
    static func problem(with data: Data, format: ImageFormat) -> String? {
        let reader = ByteReader(data)
        switch format {
        case .png, .apng: return png(reader)
        case .jpeg: return jpeg(reader)
        case .gif: return gif(reader)
        case .webp: return riff(reader, name: "WebP")
        case .heic, .heif, .avif: return isoBoxes(reader, name: format.identifier.uppercased())
        case .bmp: return bmp(reader)
        default: return nil
        }
    }

    /// Chunks (length, type, data, CRC) laid end to end from byte 8 up to and including `IEND`.
    ///
    /// Related specification: PNG (Third Edition), section 5.3 ("Chunk layout").
    private static func png(_ reader: ByteReader) -> String? {
        var offset = 8
        for _ in 0..<maximumSteps {
            guard let length = reader.uint32BE(at: offset), let type = reader.fourCC(at: offset + 4) else {
                return "the PNG ends before its IEND chunk"
            }
            guard let end = ByteReader.offset(offset, plus: 12 + Int(length)), end <= reader.count else {
                return "the PNG's last chunk is cut short"
            }
            if type == fourCC("IEND") { return nil }
            offset = end
        }
        return "the PNG has too many chunks"
    }

    /// Marker segments to the first scan, then the entropy-coded data (with byte stuffing and
    /// restart markers) and any further segments and scans, up to `EOI`.
    ///
    /// Related specification: ITU-T T.81, annex B.
    private static func jpeg(_ reader: ByteReader) -> String? {
        var offset = 2 // after SOI
        var inScan = false
        var sawScan = false
        for _ in 0..<maximumSteps {
            guard let byte = reader.uint8(at: offset) else { return "the JPEG ends before its EOI marker" }
            if inScan && byte != 0xFF {
                offset += 1
                continue
            }
            guard byte == 0xFF else { return "the JPEG has bytes where a marker belongs, at byte \(offset)" }
            guard let marker = reader.uint8(at: offset + 1) else { return "the JPEG ends before its EOI marker" }
            switch marker {
            case 0xD9:
                return sawScan ? nil : "the JPEG has no scan before its EOI marker"
            case 0x00 where inScan, 0xD0...0xD7, 0x01, 0xFF:
                // Stuffed zero, restart marker, TEM or fill byte: no length follows.
                offset += marker == 0xFF ? 1 : 2
            default:
                guard let length = reader.uint16BE(at: offset + 2), length >= 2,
                      let end = ByteReader.offset(offset, plus: 2 + Int(length)), end <= reader.count
                else { return "the JPEG's segment at byte \(offset) is cut short" }
                offset = end
                inScan = marker == 0xDA
                sawScan = sawScan || inScan
            }
        }
        return "the JPEG has too many segments"
    }

    /// Extension and image blocks, each with its sub-blocks, up to the trailer byte `0x3B`.
    ///
    /// Related specification: GIF89a, sections 18–27.
    private static func gif(_ reader: ByteReader) -> String? {
        guard let flags = reader.uint8(at: 10) else { return "the GIF ends inside its header" }
        var offset = 13
        if flags & 0x80 != 0 { offset += 3 << (Int(flags & 0x07) + 1) }
        var steps = maximumSteps
        func skipSubBlocks() -> Bool {
            while steps > 0, let size = reader.uint8(at: offset) {
                steps -= 1
                offset += 1 + Int(size)
                if size == 0 { return offset <= reader.count }
            }
            return false
        }
        while steps > 0 {
            steps -= 1
            guard let introducer = reader.uint8(at: offset) else { return "the GIF ends before its trailer" }
            switch introducer {
            case 0x3B:
                return nil
            case 0x21:
                offset += 2
                guard skipSubBlocks() else { return "the GIF ends inside an extension block" }
            case 0x2C:
                guard let packed = reader.uint8(at: offset + 9) else { return "the GIF ends inside an image descriptor" }
                offset += 10
                if packed & 0x80 != 0 { offset += 3 << (Int(packed & 0x07) + 1) }
                offset += 1
                guard skipSubBlocks() else { return "the GIF ends inside image data" }
            default:
                return "the GIF has an unknown block at byte \(offset)"
            }
        }
        return "the GIF has too many blocks"
    }

    /// The RIFF header's size covers the bytes (the final pad byte may be missing).
    private static func riff(_ reader: ByteReader, name: String) -> String? {
        guard let size = reader.uint32LE(at: 4) else { return "the \(name) ends inside its RIFF header" }
        guard 8 + Int(size) <= reader.count + 1 else {
            return "the \(name) holds \(reader.count) bytes of the \(8 + Int(size)) its RIFF header declares"
        }
        return nil
    }

    /// Top-level boxes laid end to end cover the bytes exactly, none cut short, and include
    /// `ftyp`, `meta` and `mdat` (a file whose pixels sit in `idat` with no `mdat` is refused).
    private static func isoBoxes(_ reader: ByteReader, name: String) -> String? {
        var end = 0
        var types = Set<UInt32>()
        for box in ISOBoxSequence(reader, from: 0, to: reader.count, maximumCount: 4_096) {
            if box.isTruncated { return "the \(name)'s box at byte \(end) is cut short" }
            types.insert(box.type)
            end = box.end
        }
        guard end == reader.count else { return "the \(name)'s boxes end at byte \(end) of \(reader.count)" }
        let required: [(code: UInt32, name: String)] = [(fourCC("ftyp"), "ftyp"), (fourCC("meta"), "meta"), (fourCC("mdat"), "mdat")]
        for box in required where !types.contains(box.code) {
            return "the \(name) has no \(box.name) box"
        }
        return nil
    }

    /// The file size in the BMP header is at most the bytes present.
    private static func bmp(_ reader: ByteReader) -> String? {
        guard let size = reader.uint32LE(at: 2) else { return "the BMP ends inside its header" }
        return Int(size) <= reader.count ? nil : "the BMP holds \(reader.count) bytes of the \(size) its header declares"
    }
}

extension ImageFormat {
    /// Whether `data` is a complete file of its detected format, checked by walking its
    /// structure without decoding: PNG to `IEND`, JPEG to `EOI`, GIF to its trailer, the RIFF
    /// size of WebP, the boxes of HEIF/AVIF, the size of BMP. A truncated download fails this.
    ///
    /// ```swift
    /// ImageFormat.isComplete(try Data(contentsOf: url))   // false for a cut-off PNG
    /// ```
    ///
    /// - Returns: `false` for bytes of no known format; `true` for formats whose end cannot be
    ///   told from their structure (TIFF, ICO, SVG, PDF, JPEG XL, JPEG 2000).
    public static func isComplete(_ data: Data) -> Bool {
        guard let format = detect(data) else { return false }
        return ImageCompleteness.problem(with: data, format: format) == nil
    }
}
