// Header readers for ICO/CUR, JPEG XL, JPEG 2000 and BigTIFF, and the Exif orientation of
// JPEG and WebP. Like the others, each reads through a bounds-checked `ByteReader` in bounded
// steps and returns `nil` on the first read that fails.

extension ImageHeader {
    /// The most ICO directory entries read.
    static let maximumICOEntryCount = 256

    // MARK: - ICO and CUR

    /// The largest entry of the icon directory, by area. A width or height byte of 0 means
    /// 256; an entry stored as PNG is sized from its own `IHDR`, which may be larger.
    ///
    /// Related specification: Microsoft's "Icons" (ICONDIR, ICONDIRENTRY).
    static func parseICO(_ reader: ByteReader) -> Dimensions? {
        guard let count = reader.uint16LE(at: 4), count > 0 else { return nil }
        var largest: (width: Int, height: Int)?
        for index in 0..<min(Int(count), maximumICOEntryCount) {
            let entry = 6 + 16 * index
            guard let widthByte = reader.uint8(at: entry), let heightByte = reader.uint8(at: entry + 1),
                  let offset = reader.uint32LE(at: entry + 12)
            else { return nil }
            var size = (width: widthByte == 0 ? 256 : Int(widthByte), height: heightByte == 0 ? 256 : Int(heightByte))
            let payload = Int(offset)
            if reader.matches([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], at: payload),
               reader.fourCC(at: payload + 12) == fourCC("IHDR"),
               let width = reader.uint32BE(at: payload + 16), let height = reader.uint32BE(at: payload + 20),
               width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF {
                size = (Int(width), Int(height))
            }
            if largest.map({ size.width * size.height > $0.width * $0.height }) ?? true { largest = size }
        }
        return largest.map { ($0.width, $0.height, 1) }
    }

    // MARK: - JPEG XL

    /// The `SizeHeader` of the codestream (bare, after `FF 0A`, or in the container's `jxlc`
    /// box or first `jxlp` box).
    ///
    /// Related specification: ISO/IEC 18181-1, section 9.2 (SizeHeader), ISO/IEC 18181-2 (boxes).
    static func parseJPEGXL(_ reader: ByteReader) -> Dimensions? {
        var start = 0
        if !reader.matches([0xFF, 0x0A]) {
            var found: Int?
            for box in ISOBoxSequence(reader, from: 0, to: reader.count) {
                if box.type == fourCC("jxlc") { found = box.payloadStart; break }
                // A jxlp box starts with a 4-byte sequence number.
                if box.type == fourCC("jxlp") { found = box.payloadStart + 4; break }
            }
            guard let found, reader.matches([0xFF, 0x0A], at: found) else { return nil }
            start = found
        }
        var bits = BitReader(reader, byteOffset: start + 2)
        func dimension() -> Int? {
            guard let selector = bits.read(2) else { return nil }
            let widths = [9, 13, 18, 30]
            return bits.read(widths[selector]).map { $0 + 1 }
        }
        guard let small = bits.read(1) else { return nil }
        let height: Int
        if small == 1 {
            guard let value = bits.read(5) else { return nil }
            height = (value + 1) * 8
        } else {
            guard let value = dimension() else { return nil }
            height = value
        }
        guard let ratio = bits.read(3) else { return nil }
        let width: Int
        switch ratio {
        case 0:
            if small == 1 {
                guard let value = bits.read(5) else { return nil }
                width = (value + 1) * 8
            } else {
                guard let value = dimension() else { return nil }
                width = value
            }
        default:
            let ratios = [(1, 1), (12, 10), (4, 3), (3, 2), (16, 9), (5, 4), (2, 1)]
            let (numerator, denominator) = ratios[ratio - 1]
            width = height * numerator / denominator
        }
        return (width, height, nil)
    }

    // MARK: - JPEG 2000

    /// The `SIZ` marker segment of a J2K codestream (image size minus its offset), or the
    /// `ihdr` box inside `jp2h` of a JP2 file.
    ///
    /// Related specification: ITU-T T.800, sections A.5.1 (SIZ) and I.5.3.1 (ihdr).
    static func parseJPEG2000(_ reader: ByteReader) -> Dimensions? {
        if reader.matches([0xFF, 0x4F, 0xFF, 0x51]) {
            guard let xSize = reader.uint32BE(at: 8), let ySize = reader.uint32BE(at: 12),
                  let xOffset = reader.uint32BE(at: 16), let yOffset = reader.uint32BE(at: 20),
                  xSize > xOffset, ySize > yOffset
            else { return nil }
            return (Int(xSize - xOffset), Int(ySize - yOffset), nil)
        }
        for box in ISOBoxSequence(reader, from: 0, to: reader.count) where box.type == fourCC("jp2h") {
            for child in ISOBoxSequence(reader, from: box.payloadStart, to: box.end) where child.type == fourCC("ihdr") {
                guard let height = reader.uint32BE(at: child.payloadStart),
                      let width = reader.uint32BE(at: child.payloadStart + 4),
                      width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF
                else { return nil }
                return (Int(width), Int(height), nil)
            }
        }
        return nil
    }

    // MARK: - BigTIFF

    /// Width and height from the first IFD of a BigTIFF (version 43: 8-byte offsets and
    /// counts, 20-byte entries).
    ///
    /// Related specification: the BigTIFF proposal (AWare Systems), "BigTIFF file format".
    static func parseBigTIFF(_ reader: ByteReader) -> Dimensions? {
        let bigEndian = reader.matches(ascii: "MM")
        guard reader.uint16(at: 4, bigEndian: bigEndian) == 8, reader.uint16(at: 6, bigEndian: bigEndian) == 0,
              let ifd64 = reader.uint64(at: 8, bigEndian: bigEndian), ifd64 <= UInt64(Int.max),
              let count64 = reader.uint64(at: Int(ifd64), bigEndian: bigEndian)
        else { return nil }
        let ifd = Int(ifd64)
        var width: Int?
        var height: Int?
        for index in 0..<Int(min(count64, UInt64(maximumTIFFEntryCount))) {
            guard let entry = ByteReader.offset(ifd, plus: 8 + 20 * index),
                  let tag = reader.uint16(at: entry, bigEndian: bigEndian),
                  let type = reader.uint16(at: entry + 2, bigEndian: bigEndian),
                  let valueCount = reader.uint64(at: entry + 4, bigEndian: bigEndian)
            else { return nil }
            guard tag == 256 || tag == 257 else { continue }
            guard valueCount == 1 else { return nil }
            let value: UInt64?
            switch type {
            case 3: value = reader.uint16(at: entry + 12, bigEndian: bigEndian).map(UInt64.init)
            case 4: value = reader.uint32(at: entry + 12, bigEndian: bigEndian).map(UInt64.init)
            case 16: value = reader.uint64(at: entry + 12, bigEndian: bigEndian)
            default: return nil
            }
            guard let value, value > 0, value <= 0x7FFF_FFFF else { return nil }
            if tag == 256 { width = Int(value) } else { height = Int(value) }
            if let width, let height { return (width, height, nil) }
        }
        return nil
    }

    // MARK: - Exif orientation

    /// The Exif orientation (1–8) of a JPEG (`APP1` "Exif") or a WebP (`EXIF` chunk), 1 when
    /// there is none or it cannot be read.
    static func orientation(_ reader: ByteReader, format: ImageFormat) -> Int {
        let tiffStart: Int?
        switch format {
        case .jpeg: tiffStart = jpegExifStart(reader)
        case .webp: tiffStart = webPExifStart(reader)
        default: tiffStart = nil
        }
        guard let tiffStart, let value = exifOrientation(reader, tiffStart: tiffStart), (1...8).contains(value) else {
            return 1
        }
        return value
    }

    /// The start of the TIFF structure inside the first `APP1` "Exif\0\0" segment before SOS.
    private static func jpegExifStart(_ reader: ByteReader) -> Int? {
        var offset = 2
        for _ in 0..<maximumJPEGMarkerCount {
            guard reader.uint8(at: offset) == 0xFF, let marker = reader.uint8(at: offset + 1) else { return nil }
            if marker == 0xFF { offset += 1; continue }
            if marker == 0xDA || marker == 0xD9 { return nil }
            guard let length = reader.uint16BE(at: offset + 2), length >= 2 else { return nil }
            if marker == 0xE1, reader.matches(ascii: "Exif", at: offset + 4),
               reader.matches([0, 0], at: offset + 8) {
                return offset + 10
            }
            guard let next = ByteReader.offset(offset, plus: 2 + Int(length)) else { return nil }
            offset = next
        }
        return nil
    }

    /// The start of the TIFF structure in the `EXIF` chunk of a `VP8X` WebP (an "Exif\0\0"
    /// prefix, which some writers add, is skipped).
    private static func webPExifStart(_ reader: ByteReader) -> Int? {
        guard reader.fourCC(at: 12) == fourCC("VP8X"), let riffSize = reader.uint32LE(at: 4) else { return nil }
        let end = min(8 + Int(riffSize), reader.count)
        var offset = 12
        for _ in 0..<maximumWebPChunkCount {
            guard offset < end, let type = reader.fourCC(at: offset), let size = reader.uint32LE(at: offset + 4) else {
                return nil
            }
            if type == fourCC("EXIF") {
                return reader.matches(ascii: "Exif", at: offset + 8) ? offset + 14 : offset + 8
            }
            guard let next = ByteReader.offset(offset, plus: 8 + Int(size) + Int(size & 1)) else { return nil }
            offset = next
        }
        return nil
    }

    /// Tag 0x0112 (Orientation, SHORT) of IFD0 in the TIFF structure at `tiffStart`.
    private static func exifOrientation(_ reader: ByteReader, tiffStart: Int) -> Int? {
        let bigEndian: Bool
        if reader.matches(ascii: "MM", at: tiffStart) { bigEndian = true }
        else if reader.matches(ascii: "II", at: tiffStart) { bigEndian = false }
        else { return nil }
        guard reader.uint16(at: tiffStart + 2, bigEndian: bigEndian) == 42,
              let ifdOffset = reader.uint32(at: tiffStart + 4, bigEndian: bigEndian),
              let ifd = ByteReader.offset(tiffStart, plus: Int(ifdOffset)),
              let count = reader.uint16(at: ifd, bigEndian: bigEndian)
        else { return nil }
        for index in 0..<min(Int(count), maximumTIFFEntryCount) {
            let entry = ifd + 2 + 12 * index
            guard let tag = reader.uint16(at: entry, bigEndian: bigEndian) else { return nil }
            guard tag == 0x0112 else { continue }
            guard reader.uint16(at: entry + 2, bigEndian: bigEndian) == 3,
                  let value = reader.uint16(at: entry + 8, bigEndian: bigEndian)
            else { return nil }
            return Int(value)
        }
        return nil
    }
}

/// Reads bits least-significant first, as JPEG XL packs them, through a bounds-checked reader.
struct BitReader {
    private let reader: ByteReader
    private var bitOffset: Int

    init(_ reader: ByteReader, byteOffset: Int) {
        self.reader = reader
        self.bitOffset = byteOffset * 8
    }

    /// The next `count` bits (at most 32) as an integer, or `nil` past the end.
    mutating func read(_ count: Int) -> Int? {
        var value = 0
        for index in 0..<count {
            guard let byte = reader.uint8(at: bitOffset / 8) else { return nil }
            value |= Int((byte >> UInt8(bitOffset % 8)) & 1) << index
            bitOffset += 1
        }
        return value
    }
}
