// The per-format header readers behind `ImageHeader.parse(_:)`. Each takes a bounds-checked
// `ByteReader` whose signature `ImageFormat.detect(_:)` has already matched, and returns
// `nil` on the first read that fails: there is no partial answer.

extension ImageHeader {
    typealias Dimensions = (width: Int, height: Int, frames: Int?)

    /// The most JPEG markers read before giving up on finding a SOFn segment.
    static let maximumJPEGMarkerCount = 1024
    /// The most GIF blocks and sub-blocks read while counting frames.
    static let maximumGIFBlockCount = 1 << 20
    /// The most RIFF chunks read while counting WebP animation frames.
    static let maximumWebPChunkCount = 1 << 16
    /// The most TIFF directory entries read from IFD0.
    static let maximumTIFFEntryCount = 1024

    // MARK: - PNG

    /// `IHDR` width and height; frames from `acTL` for APNG, 1 once `IDAT` is reached first.
    ///
    /// Related specification: <https://www.w3.org/TR/png-3/#11IHDR>, `acTL` in section 11.3.6.
    static func parsePNG(_ reader: ByteReader) -> Dimensions? {
        guard reader.uint32BE(at: 8) == 13, reader.fourCC(at: 12) == fourCC("IHDR"),
              let width = reader.uint32BE(at: 16), let height = reader.uint32BE(at: 20),
              width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF
        else { return nil }
        var frames: Int?
        if let control = ImageFormat.pngAnimationControl(reader) {
            guard let count = reader.uint32BE(at: control), count <= 0x7FFF_FFFF else { return nil }
            frames = Int(count)
        } else if pngReachesImageData(reader) {
            frames = 1
        }
        return (Int(width), Int(height), frames)
    }

    /// Whether the chunk walk reaches `IDAT` (so there is no `acTL` before it).
    private static func pngReachesImageData(_ reader: ByteReader) -> Bool {
        var offset = 8
        for _ in 0..<ImageFormat.maximumPNGChunkCount {
            guard let length = reader.uint32BE(at: offset), length <= 0x7FFF_FFFF,
                  let type = reader.fourCC(at: offset + 4)
            else { return false }
            if type == fourCC("IDAT") { return true }
            guard let next = ByteReader.offset(offset, plus: Int(length) + 12) else { return false }
            offset = next
        }
        return false
    }

    // MARK: - JPEG

    /// Walks the marker segments from SOI to the first SOFn and reads its height and width.
    ///
    /// Fill bytes (`FF FF …`) are skipped, standalone markers (RSTn, TEM) carry no length, and
    /// SOS or EOI before any SOFn means there is no frame header to find.
    /// Related specification: ITU-T T.81, section B.1.1.
    static func parseJPEG(_ reader: ByteReader) -> Dimensions? {
        var offset = 2
        for _ in 0..<maximumJPEGMarkerCount {
            guard reader.uint8(at: offset) == 0xFF else { return nil }
            // Any number of fill bytes; each step moves forward, so the walk ends with the bytes.
            while reader.uint8(at: offset + 1) == 0xFF { offset += 1 }
            guard let marker = reader.uint8(at: offset + 1) else { return nil }
            offset += 2
            switch marker {
            case 0x01, 0xD0...0xD7:
                continue // TEM, RSTn: no payload
            case 0x00, 0xD8, 0xD9, 0xDA:
                return nil // stuffed byte out of place, second SOI, EOI, SOS: no SOFn ahead
            case 0xC0...0xC3, 0xC5...0xC7, 0xC9...0xCB, 0xCD...0xCF:
                guard let length = reader.uint16BE(at: offset), length >= 8,
                      let height = reader.uint16BE(at: offset + 3),
                      let width = reader.uint16BE(at: offset + 5)
                else { return nil }
                return (Int(width), Int(height), 1) // height 0 (a DNL segment) is rejected by the caller
            default:
                guard let length = reader.uint16BE(at: offset), length >= 2 else { return nil }
                offset += Int(length)
            }
        }
        return nil
    }

    // MARK: - GIF

    /// The logical screen size; frames counted by walking extension and image blocks to the
    /// trailer. The count is `nil` when the bytes end first or the walk exceeds its bound.
    ///
    /// Related specification: <https://www.w3.org/Graphics/GIF/spec-gif89a.txt>, sections 18–27.
    static func parseGIF(_ reader: ByteReader) -> Dimensions? {
        guard let width = reader.uint16LE(at: 6), let height = reader.uint16LE(at: 8),
              let flags = reader.uint8(at: 10)
        else { return nil }
        var offset = 13
        if flags & 0x80 != 0 { offset += 3 << (Int(flags & 0x07) + 1) }
        return (Int(width), Int(height), countGIFFrames(reader, from: offset))
    }

    private static func countGIFFrames(_ reader: ByteReader, from start: Int) -> Int? {
        var offset = start
        var frames = 0
        var budget = maximumGIFBlockCount
        /// Skips data sub-blocks up to and including the zero-length terminator.
        func skipSubBlocks() -> Bool {
            while budget > 0, let size = reader.uint8(at: offset) {
                budget -= 1
                offset += 1 + Int(size)
                if size == 0 { return true }
            }
            return false
        }
        while budget > 0, let introducer = reader.uint8(at: offset) {
            budget -= 1
            switch introducer {
            case 0x3B: // trailer
                return frames > 0 ? frames : nil
            case 0x21: // extension: label, then sub-blocks
                offset += 2
                guard skipSubBlocks() else { return nil }
            case 0x2C: // image descriptor, optional local colour table, LZW code size, data
                guard let packed = reader.uint8(at: offset + 9) else { return nil }
                offset += 10
                if packed & 0x80 != 0 { offset += 3 << (Int(packed & 0x07) + 1) }
                offset += 1
                guard skipSubBlocks() else { return nil }
                frames += 1
            default:
                return nil
            }
        }
        return nil
    }

    // MARK: - WebP

    /// The frame size from `VP8 ` (key frame header), `VP8L` (image header) or the `VP8X`
    /// canvas; for an animated `VP8X` image, the number of `ANMF` chunks.
    ///
    /// Related specification: RFC 9649, sections 2.5–2.7.
    static func parseWebP(_ reader: ByteReader) -> Dimensions? {
        guard let chunk = reader.fourCC(at: 12), let chunkSize = reader.uint32LE(at: 16) else { return nil }
        switch chunk {
        case fourCC("VP8 "):
            // Frame tag (3 bytes, key frame when bit 0 is clear), start code 9D 01 2A, then
            // 14-bit width and height with 2-bit scale fields.
            guard let tag = reader.uint8(at: 20), tag & 0x01 == 0,
                  reader.matches([0x9D, 0x01, 0x2A], at: 23),
                  let width = reader.uint16LE(at: 26), let height = reader.uint16LE(at: 28)
            else { return nil }
            return (Int(width & 0x3FFF), Int(height & 0x3FFF), 1)
        case fourCC("VP8L"):
            // Signature 0x2F, then 14 bits width − 1, 14 bits height − 1, alpha, 3-bit version 0.
            guard reader.uint8(at: 20) == 0x2F, let bits = reader.uint32LE(at: 21), bits >> 29 == 0 else {
                return nil
            }
            return (Int(bits & 0x3FFF) + 1, Int((bits >> 14) & 0x3FFF) + 1, 1)
        case fourCC("VP8X"):
            guard chunkSize >= 10, let flags = reader.uint8(at: 20),
                  let width = reader.uint24LE(at: 24), let height = reader.uint24LE(at: 27)
            else { return nil }
            let isAnimated = flags & 0x02 != 0
            let frames = isAnimated ? countWebPFrames(reader, from: 20 + Int(chunkSize) + Int(chunkSize & 1)) : 1
            return (Int(width) + 1, Int(height) + 1, frames)
        default:
            return nil
        }
    }

    /// Counts `ANMF` chunks after `VP8X`; `nil` unless the walk reaches the end of the RIFF data.
    private static func countWebPFrames(_ reader: ByteReader, from start: Int) -> Int? {
        guard let riffSize = reader.uint32LE(at: 4) else { return nil }
        let riffEnd = 8 + Int(riffSize)
        guard riffEnd <= reader.count else { return nil } // truncated: the count is not certain
        var offset = start
        var frames = 0
        for _ in 0..<maximumWebPChunkCount {
            if offset >= riffEnd { return frames > 0 ? frames : nil }
            guard let type = reader.fourCC(at: offset), let size = reader.uint32LE(at: offset + 4) else {
                return nil
            }
            if type == fourCC("ANMF") { frames += 1 }
            // A chunk that runs past the RIFF data leaves the count uncertain.
            guard let next = ByteReader.offset(offset, plus: 8 + Int(size) + Int(size & 1)),
                  next <= riffEnd + 1 // the final chunk's pad byte may be missing
            else { return nil }
            offset = next
        }
        return nil
    }

    // MARK: - BMP

    /// Width and height from the DIB header: 16-bit in BITMAPCOREHEADER, signed 32-bit after it,
    /// where a negative height marks a top-down bitmap.
    static func parseBMP(_ reader: ByteReader) -> Dimensions? {
        guard let headerSize = reader.uint32LE(at: 14) else { return nil }
        if headerSize == 12 {
            guard let width = reader.uint16LE(at: 18), let height = reader.uint16LE(at: 20) else { return nil }
            return (Int(width), Int(height), 1)
        }
        guard let width = reader.uint32LE(at: 18), let height = reader.uint32LE(at: 22) else { return nil }
        let signedWidth = Int(Int32(bitPattern: width))
        let signedHeight = Int(Int32(bitPattern: height)) // widened first: |Int32.min| fits in Int
        guard signedWidth > 0, signedHeight != 0 else { return nil }
        return (signedWidth, abs(signedHeight), 1)
    }

    // MARK: - TIFF

    /// `ImageWidth` (256) and `ImageLength` (257) from IFD0, as SHORT or LONG, in the byte order
    /// the header names. BigTIFF is detected but not parsed.
    ///
    /// Related specification: TIFF 6.0, section 2 ("TIFF Structure").
    static func parseTIFF(_ reader: ByteReader) -> Dimensions? {
        let bigEndian = reader.matches(ascii: "MM")
        guard reader.uint16(at: 2, bigEndian: bigEndian) == 42,
              let ifd = reader.uint32(at: 4, bigEndian: bigEndian),
              let count = reader.uint16(at: Int(ifd), bigEndian: bigEndian)
        else { return nil }
        var width: Int?
        var height: Int?
        for index in 0..<min(Int(count), maximumTIFFEntryCount) {
            let entry = Int(ifd) + 2 + 12 * index
            guard let tag = reader.uint16(at: entry, bigEndian: bigEndian),
                  let type = reader.uint16(at: entry + 2, bigEndian: bigEndian),
                  let valueCount = reader.uint32(at: entry + 4, bigEndian: bigEndian)
            else { return nil }
            guard tag == 256 || tag == 257 else { continue }
            guard valueCount == 1 else { return nil }
            let value: Int
            switch type {
            case 3: guard let short = reader.uint16(at: entry + 8, bigEndian: bigEndian) else { return nil }
                value = Int(short)
            case 4: guard let long = reader.uint32(at: entry + 8, bigEndian: bigEndian) else { return nil }
                value = Int(long)
            default: return nil
            }
            if tag == 256 { width = value } else { height = value }
            if let width, let height { return (width, height, nil) }
        }
        return nil
    }

    // MARK: - HEIF and AVIF

    /// The `ispe` (image spatial extents) property of the primary item, found through
    /// `meta/pitm` and `meta/iprp/ipma`, cropped by its `clap` and turned by its `irot`; when there is no `ipma` or it does not list the primary
    /// item, the largest `ispe` in `meta/iprp/ipco` (the full image rather than a thumbnail or
    /// a grid tile). A truncated `iprp` gives `nil`.
    ///
    /// Related specification: ISO/IEC 23008-12, section 6.5.3; ISO/IEC 14496-12, 8.11.
    static func parseHEIF(_ reader: ByteReader) -> Dimensions? {
        let topLevel = ISOBoxSequence(reader, from: 0, to: reader.count)
        var isSequence = false
        var meta: ISOBox?
        for box in topLevel {
            if box.type == fourCC("ftyp") {
                isSequence = reader.fourCC(at: box.payloadStart) == fourCC("msf1")
                    || reader.fourCC(at: box.payloadStart) == fourCC("avis")
            }
            if box.type == fourCC("meta") { meta = box; break }
        }
        // `meta` is a full box: version and flags come before its children.
        guard let meta, let metaChildren = ByteReader.offset(meta.payloadStart, plus: 4) else { return nil }
        var primaryItem: UInt32?
        var iprp: ISOBox?
        for box in ISOBoxSequence(reader, from: metaChildren, to: meta.end) {
            if box.type == fourCC("pitm"), let version = reader.uint8(at: box.payloadStart) {
                primaryItem = version == 0
                    ? reader.uint16BE(at: box.payloadStart + 4).map(UInt32.init)
                    : reader.uint32BE(at: box.payloadStart + 4)
            }
            if box.type == fourCC("iprp") { iprp = box }
        }
        // A truncated `iprp` may have lost the associations that would pick another `ispe`:
        // answer only from a complete one, so a prefix never reports a tile or thumbnail size.
        guard let iprp, !iprp.isTruncated else { return nil }
        var properties: [ISOBox] = []
        var ipma: ISOBox?
        for box in ISOBoxSequence(reader, from: iprp.payloadStart, to: iprp.end) {
            if box.type == fourCC("ipco") {
                properties = Array(ISOBoxSequence(reader, from: box.payloadStart, to: box.end))
            }
            if box.type == fourCC("ipma") { ipma = box }
        }
        let extents = properties.map { $0.type == fourCC("ispe") ? spatialExtents(reader, $0) : nil }
        var chosen: (width: Int, height: Int)?
        var isResolved = false // the primary item's properties were found: no fallback
        if let primaryItem, let ipma,
           let indices = propertyIndices(reader, ipma, item: primaryItem)?.filter({ properties.indices.contains($0 - 1) }) {
            isResolved = indices.contains { properties[$0 - 1].type == fourCC("ispe") }
            chosen = indices.lazy.compactMap { extents[$0 - 1] }.first
            // Transformative properties apply in order: a clean aperture crops, a rotation by
            // 90° or 270° swaps the axes. The displayed size is what a decoder hands back.
            for index in indices where chosen != nil {
                let property = properties[index - 1]
                if property.type == fourCC("clap") {
                    chosen = cleanAperture(reader, property, within: chosen!)
                } else if property.type == fourCC("irot"), let angle = reader.uint8(at: property.payloadStart),
                          angle & 0x01 != 0 {
                    chosen = (chosen!.height, chosen!.width)
                }
            }
        }
        if !isResolved {
            chosen = extents.compactMap { $0 }.max { $0.width * $0.height < $1.width * $1.height }
        }
        guard let chosen else { return nil }
        return (chosen.width, chosen.height, isSequence ? nil : 1)
    }

    /// `ispe` payload: version and flags, then 32-bit width and height.
    private static func spatialExtents(_ reader: ByteReader, _ box: ISOBox) -> (width: Int, height: Int)? {
        guard !box.isTruncated, box.end - box.payloadStart >= 12,
              let width = reader.uint32BE(at: box.payloadStart + 4),
              let height = reader.uint32BE(at: box.payloadStart + 8),
              width > 0, height > 0, width <= 0x7FFF_FFFF, height <= 0x7FFF_FFFF
        else { return nil }
        return (Int(width), Int(height))
    }

    /// The size a `clap` (clean aperture) box crops `size` to: its width and height fractions,
    /// rounded to the nearest pixel. `nil` for a malformed box or a crop outside the image.
    private static func cleanAperture(_ reader: ByteReader, _ box: ISOBox, within size: (width: Int, height: Int))
        -> (width: Int, height: Int)? {
        guard !box.isTruncated, box.end - box.payloadStart >= 32,
              let widthN = reader.uint32BE(at: box.payloadStart), let widthD = reader.uint32BE(at: box.payloadStart + 4),
              let heightN = reader.uint32BE(at: box.payloadStart + 8), let heightD = reader.uint32BE(at: box.payloadStart + 12),
              widthD > 0, heightD > 0
        else { return nil }
        let width = (Int(widthN) + Int(widthD) / 2) / Int(widthD)
        let height = (Int(heightN) + Int(heightD) / 2) / Int(heightD)
        guard width > 0, height > 0, width <= size.width, height <= size.height else { return nil }
        return (width, height)
    }

    /// The 1-based `ipco` indices that `ipma` associates with `item`.
    private static func propertyIndices(_ reader: ByteReader, _ box: ISOBox, item: UInt32) -> [Int]? {
        guard let version = reader.uint8(at: box.payloadStart),
              let flags = reader.uint8(at: box.payloadStart + 3), // low byte of the 24-bit flags
              let entryCount = reader.uint32BE(at: box.payloadStart + 4)
        else { return nil }
        let wideIndices = flags & 0x01 != 0
        var offset = box.payloadStart + 8
        for _ in 0..<min(Int(entryCount), 4096) {
            let itemID: UInt32?
            if version < 1 {
                itemID = reader.uint16BE(at: offset).map(UInt32.init)
                offset += 2
            } else {
                itemID = reader.uint32BE(at: offset)
                offset += 4
            }
            guard let itemID, let associationCount = reader.uint8(at: offset), offset < box.end else { return nil }
            offset += 1
            var indices: [Int] = []
            for _ in 0..<Int(associationCount) {
                if wideIndices {
                    guard let value = reader.uint16BE(at: offset) else { return nil }
                    indices.append(Int(value & 0x7FFF))
                    offset += 2
                } else {
                    guard let value = reader.uint8(at: offset) else { return nil }
                    indices.append(Int(value & 0x7F))
                    offset += 1
                }
            }
            if itemID == item { return indices }
        }
        return nil
    }
}
