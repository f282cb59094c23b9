public import Foundation

extension ImageFormat {
    /// The number of leading bytes ``detect(_:)`` scans for a text format (SVG).
    ///
    /// Binary signatures sit in the first few dozen bytes; the PNG chunk walk that tells APNG
    /// from PNG reads only chunk headers, at most ``maximumPNGChunkCount`` of them.
    public static let textSniffLimit = 4096

    /// The most PNG chunk headers ``detect(_:)`` reads while looking for `acTL` before `IDAT`.
    public static let maximumPNGChunkCount = 64

    /// Detects the format of image bytes from their signature.
    ///
    /// Detection is strict: each format needs a multi-byte signature and, where the format has
    /// one, a plausible header after it (a known BMP info-header size, a WebP image chunk, an
    /// ICO directory entry with its reserved byte clear, an `ftyp` box with a known brand). It reads
    /// at most a few KiB and never decodes.
    ///
    /// | Format | Signature |
    /// |---|---|
    /// | JPEG | `FF D8 FF` and a marker byte |
    /// | PNG, APNG | `89 50 4E 47 0D 0A 1A 0A`, then `IHDR`; APNG when `acTL` precedes `IDAT` |
    /// | GIF | `GIF87a`, `GIF89a` |
    /// | WebP | `RIFF`, size, `WEBP`, then `VP8 `, `VP8L` or `VP8X` |
    /// | HEIC, HEIF, AVIF | an `ftyp` box whose major or compatible brands name the format |
    /// | BMP | `BM` and a known DIB header size at offset 14 |
    /// | TIFF | `II*\0`, `MM\0*` (or BigTIFF `II+\0`, `MM\0+`) |
    /// | ICO | `00 00 01 00`, a non-zero image count and a sane first entry |
    /// | JPEG XL | codestream `FF 0A`, or the `JXL ` signature box |
    /// | JPEG 2000 | the `jP  ` signature box, or a J2K codestream `FF 4F FF 51` |
    /// | PDF | `%PDF-` |
    /// | SVG | an `<svg` root element after an optional BOM, XML declaration, comments, DOCTYPE |
    ///
    /// When the bytes end before the PNG chunk walk reaches `acTL` or `IDAT`, the answer is
    /// ``png``: a prefix of an APNG file can be reported as PNG, never as anything else.
    ///
    /// - Parameter data: The leading bytes of a file; the whole file is not needed.
    /// - Returns: The format, or `nil` when no known signature matches.
    /// - Complexity: O(1) for binary formats; at most ``textSniffLimit`` bytes for SVG.
    public static func detect(_ data: Data) -> ImageFormat? {
        let reader = ByteReader(data)
        guard reader.count >= 2 else { return nil }
        switch reader.uint8(at: 0) {
        case 0xFF: return detectJPEGFamily(reader)
        case 0x89: return detectPNG(reader)
        case UInt8(ascii: "G"):
            return reader.matches(ascii: "GIF87a") || reader.matches(ascii: "GIF89a") ? .gif : nil
        case UInt8(ascii: "R"): return detectWebP(reader)
        case UInt8(ascii: "B"): return detectBMP(reader)
        case UInt8(ascii: "I"), UInt8(ascii: "M"): return detectTIFF(reader)
        case UInt8(ascii: "%"): return reader.matches(ascii: "%PDF-") ? .pdf : nil
        case 0x00:
            if reader.matches([0x00, 0x00, 0x01, 0x00]) { return detectICO(reader) }
            if reader.matches([0x00, 0x00, 0x02, 0x00]) { return detectCUR(reader) }
            return detectISOBaseMedia(reader)
        default:
            return detectSVG(reader)
        }
    }

    // MARK: - Binary signatures

    private static func detectJPEGFamily(_ reader: ByteReader) -> ImageFormat? {
        if reader.matches([0xFF, 0x0A]) { return .jpegXL }
        if reader.matches([0xFF, 0x4F, 0xFF, 0x51]) { return .jpeg2000 }
        // SOI, then the first marker: anything from C0 to FE (APPn, DQT, DHT, SOFn, COM, ...).
        guard reader.matches([0xFF, 0xD8, 0xFF]), let marker = reader.uint8(at: 3),
              marker >= 0xC0, marker != 0xFF
        else { return nil }
        return .jpeg
    }

    private static func detectPNG(_ reader: ByteReader) -> ImageFormat? {
        guard reader.matches([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { return nil }
        // The first chunk must be a 13-byte IHDR, when the bytes go that far.
        if reader.count >= 16 {
            guard reader.uint32BE(at: 8) == 13, reader.fourCC(at: 12) == fourCC("IHDR") else { return nil }
        }
        return pngAnimationControl(reader) != nil ? .apng : .png
    }

    /// The offset of the `acTL` chunk's data when it precedes the first `IDAT`, walking at most
    /// ``maximumPNGChunkCount`` chunk headers.
    static func pngAnimationControl(_ reader: ByteReader) -> Int? {
        var offset = 8
        for _ in 0..<maximumPNGChunkCount {
            guard let length = reader.uint32BE(at: offset), length <= 0x7FFF_FFFF,
                  let type = reader.fourCC(at: offset + 4)
            else { return nil }
            if type == fourCC("acTL") { return offset + 8 }
            if type == fourCC("IDAT") || type == fourCC("IEND") { return nil }
            // length + type + data + CRC; at most 2^31 + 12, so no overflow on 64-bit Int.
            guard let next = ByteReader.offset(offset, plus: Int(length) + 12) else { return nil }
            offset = next
        }
        return nil
    }

    private static func detectWebP(_ reader: ByteReader) -> ImageFormat? {
        guard reader.matches(ascii: "RIFF"), reader.matches(ascii: "WEBP", at: 8),
              let chunk = reader.fourCC(at: 12)
        else { return nil }
        switch chunk {
        case fourCC("VP8 "), fourCC("VP8L"), fourCC("VP8X"): return .webp
        default: return nil
        }
    }

    private static func detectBMP(_ reader: ByteReader) -> ImageFormat? {
        // BITMAPCOREHEADER (12), OS/2 2.x (16, 64), BITMAPINFOHEADER (40), V2 (52), V3 (56),
        // V4 (108), V5 (124).
        guard reader.matches(ascii: "BM"), let headerSize = reader.uint32LE(at: 14),
              [12, 16, 40, 52, 56, 64, 108, 124].contains(headerSize)
        else { return nil }
        return .bmp
    }

    private static func detectTIFF(_ reader: ByteReader) -> ImageFormat? {
        let signatures: [[UInt8]] = [
            [0x49, 0x49, 0x2A, 0x00], [0x4D, 0x4D, 0x00, 0x2A], // classic TIFF
            [0x49, 0x49, 0x2B, 0x00], [0x4D, 0x4D, 0x00, 0x2B], // BigTIFF
        ]
        return signatures.contains { reader.matches($0) } ? .tiff : nil
    }

    private static func detectICO(_ reader: ByteReader) -> ImageFormat? {
        // ICONDIR (6 bytes) and the first ICONDIRENTRY (16 bytes): reserved byte 0, 0 or 1
        // colour planes, a non-empty image whose data starts after the directory.
        guard let count = reader.uint16LE(at: 4), count > 0,
              reader.uint8(at: 9) == 0,
              let planes = reader.uint16LE(at: 10), planes <= 1,
              let size = reader.uint32LE(at: 14), size > 0,
              let offset = reader.uint32LE(at: 18), Int(offset) >= 6 + 16 * Int(count)
        else { return nil }
        return .ico
    }

    private static func detectCUR(_ reader: ByteReader) -> ImageFormat? {
        // The ICO directory with type 2: bytes 10–13 of an entry hold the hotspot instead of
        // planes and bit count, so only the count, reserved byte, size and offset are checked.
        guard let count = reader.uint16LE(at: 4), count > 0,
              reader.uint8(at: 9) == 0,
              let size = reader.uint32LE(at: 14), size > 0,
              let offset = reader.uint32LE(at: 18), Int(offset) >= 6 + 16 * Int(count)
        else { return nil }
        return .cur
    }

    private static func detectISOBaseMedia(_ reader: ByteReader) -> ImageFormat? {
        if reader.matches([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) {
            return .jpegXL
        }
        if reader.matches([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) {
            return .jpeg2000
        }
        return detectHEIFFamily(reader)
    }

    /// Reads the `ftyp` box: the major brand decides when it is specific; otherwise the
    /// compatible brands do, AVIF before HEIC before generic HEIF.
    private static func detectHEIFFamily(_ reader: ByteReader) -> ImageFormat? {
        guard reader.fourCC(at: 4) == fourCC("ftyp"), let size = reader.uint32BE(at: 0),
              size >= 16, size % 4 == 0, size <= 4096,
              let major = reader.fourCC(at: 8)
        else { return nil }
        if let format = heifFormat(forBrand: major), format != .heif { return format }
        var compatible: [ImageFormat] = []
        var offset = 16
        while offset + 4 <= Int(size), let brand = reader.fourCC(at: offset) {
            if let format = heifFormat(forBrand: brand) { compatible.append(format) }
            offset += 4
        }
        for format in [ImageFormat.avif, .heic, .heif] where compatible.contains(format) { return format }
        return heifFormat(forBrand: major)
    }

    private static func heifFormat(forBrand brand: UInt32) -> ImageFormat? {
        switch brand {
        case fourCC("avif"), fourCC("avis"): return .avif
        case fourCC("heic"), fourCC("heix"), fourCC("heim"), fourCC("heis"), fourCC("hevc"), fourCC("hevx"):
            return .heic
        case fourCC("mif1"), fourCC("msf1"), fourCC("mif2"): return .heif
        default: return nil
        }
    }

    // MARK: - SVG

    /// Skips an optional UTF-8 BOM, whitespace, the XML declaration and other processing
    /// instructions, comments and one DOCTYPE (with an internal subset), then wants `<svg`
    /// (or a prefixed `<svg:svg`) followed by whitespace, `>` or `/`.
    private static func detectSVG(_ reader: ByteReader) -> ImageFormat? {
        let limit = min(reader.count, textSniffLimit)
        var offset = reader.matches([0xEF, 0xBB, 0xBF]) ? 3 : 0
        func find(_ terminator: StaticString, from start: Int) -> Int? {
            var index = start
            while index < limit {
                if reader.matches(ascii: terminator, at: index) { return index + terminator.utf8CodeUnitCount }
                index += 1
            }
            return nil
        }
        while offset < limit {
            guard let byte = reader.uint8(at: offset) else { return nil }
            switch byte {
            case 0x20, 0x09, 0x0D, 0x0A:
                offset += 1
            case UInt8(ascii: "<"):
                if reader.matches(ascii: "<?", at: offset) {
                    guard let end = find("?>", from: offset + 2) else { return nil }
                    offset = end
                } else if reader.matches(ascii: "<!--", at: offset) {
                    guard let end = find("-->", from: offset + 4) else { return nil }
                    offset = end
                } else if reader.matches(ascii: "<!DOCTYPE", at: offset) {
                    guard let end = doctypeEnd(reader, from: offset + 9, limit: limit) else { return nil }
                    offset = end
                } else {
                    let name = reader.matches(ascii: "<svg:svg", at: offset) ? 8 : 4
                    guard name == 8 || reader.matches(ascii: "<svg", at: offset),
                          let next = reader.uint8(at: offset + name), offset + name < limit
                    else { return nil }
                    switch next {
                    case 0x20, 0x09, 0x0D, 0x0A, UInt8(ascii: ">"), UInt8(ascii: "/"): return .svg
                    default: return nil
                    }
                }
            default:
                return nil
            }
        }
        return nil
    }

    /// The offset after the `>` closing a DOCTYPE, skipping a bracketed internal subset and
    /// quoted literals.
    private static func doctypeEnd(_ reader: ByteReader, from start: Int, limit: Int) -> Int? {
        var offset = start
        var quote: UInt8?
        var inSubset = false
        while offset < limit, let byte = reader.uint8(at: offset) {
            offset += 1
            if let open = quote {
                if byte == open { quote = nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "'"): quote = byte
            case UInt8(ascii: "["): inSubset = true
            case UInt8(ascii: "]"): inSubset = false
            case UInt8(ascii: ">") where !inSubset: return offset
            default: break
            }
        }
        return nil
    }
}
