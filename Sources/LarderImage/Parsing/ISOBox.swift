/// One box of an ISO base media file (HEIF, AVIF, JPEG 2000, the JPEG XL container).
///
/// Related specification: ISO/IEC 14496-12, section 4.2 ("Object structure").
struct ISOBox {
    /// The box type, as a big-endian four-character code.
    let type: UInt32
    /// The offset of the first byte after the box header (size, type and any largesize).
    let payloadStart: Int
    /// The offset just past the box, clamped to the end of its container.
    let end: Int
    /// Whether the declared size runs past the end of the container (the input is truncated).
    let isTruncated: Bool
}

/// Iterates the boxes laid end to end in `range` of a reader, in bounded time.
///
/// Iteration stops at the first malformed header (a size below the header length, a 64-bit
/// largesize that does not fit in `Int`), after a truncated box, or after `maximumCount` boxes,
/// so hostile sizes of 0, 1 or 2⁶⁴−1 never loop or trap. A size of 0 means "to the end of the
/// container", as the specification says.
struct ISOBoxSequence: Sequence, IteratorProtocol {
    let reader: ByteReader
    private var offset: Int
    private let end: Int
    private var remaining: Int

    init(_ reader: ByteReader, from start: Int, to end: Int, maximumCount: Int = 256) {
        self.reader = reader
        self.offset = start
        self.end = Swift.min(end, reader.count)
        self.remaining = maximumCount
    }

    mutating func next() -> ISOBox? {
        guard remaining > 0, offset >= 0, offset < end,
              let size32 = reader.uint32BE(at: offset),
              let type = reader.fourCC(at: offset + 4)
        else { return nil }
        remaining -= 1
        var headerLength = 8
        var declaredEnd: Int?
        switch size32 {
        case 0:
            declaredEnd = end
        case 1:
            headerLength = 16
            guard let large = reader.uint64BE(at: offset + 8), large >= 16, large <= UInt64(Int.max)
            else { return stop() }
            declaredEnd = ByteReader.offset(offset, plus: Int(large))
        case 2..<8:
            return stop()
        default:
            declaredEnd = ByteReader.offset(offset, plus: Int(size32))
        }
        let payloadStart = offset + headerLength
        guard payloadStart <= end else { return stop() }
        let isTruncated = declaredEnd.map { $0 > end } ?? true
        let boxEnd = isTruncated ? end : declaredEnd!
        offset = isTruncated ? end : boxEnd
        if isTruncated { remaining = 0 }
        return ISOBox(type: type, payloadStart: payloadStart, end: boxEnd, isTruncated: isTruncated)
    }

    private mutating func stop() -> ISOBox? {
        remaining = 0
        return nil
    }
}
