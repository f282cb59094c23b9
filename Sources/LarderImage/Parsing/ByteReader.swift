import Foundation

/// A bounds-checked, read-only view of bytes for the format parsers.
///
/// Every read takes an offset relative to the start of the bytes and returns `nil` when any byte
/// it needs lies outside them, so a parser written against it cannot trap on malformed input.
/// Offsets are `Int`s; callers build them with ``ByteReader/offset(_:plus:)`` (or other
/// overflow-checked arithmetic) so a hostile length can never wrap around.
struct ByteReader {
    /// The bytes; not copied, so a reader over a large image costs nothing until it reads.
    private let data: Data

    /// The index of the first byte in `data`, which need not be zero for a slice.
    private let base: Int

    /// The number of readable bytes.
    let count: Int

    /// Creates a reader over at most `limit` leading bytes of `data`.
    init(_ data: Data, limit: Int = .max) {
        self.data = data
        self.base = data.startIndex
        self.count = min(data.count, max(limit, 0))
    }

    /// The byte at `offset`; callers have checked the bounds.
    private subscript(offset: Int) -> UInt8 { data[base + offset] }

    /// Whether `length` bytes starting at `offset` are all readable.
    func contains(_ offset: Int, length: Int) -> Bool {
        offset >= 0 && length >= 0 && offset <= count && length <= count - offset
    }

    /// `base + delta`, or `nil` when the sum overflows or either operand is negative.
    static func offset(_ base: Int, plus delta: Int) -> Int? {
        guard base >= 0, delta >= 0 else { return nil }
        let (sum, overflow) = base.addingReportingOverflow(delta)
        return overflow ? nil : sum
    }

    func uint8(at offset: Int) -> UInt8? {
        guard contains(offset, length: 1) else { return nil }
        return self[offset]
    }

    func uint16BE(at offset: Int) -> UInt16? {
        guard contains(offset, length: 2) else { return nil }
        return UInt16(self[offset]) << 8 | UInt16(self[offset + 1])
    }

    func uint16LE(at offset: Int) -> UInt16? {
        guard contains(offset, length: 2) else { return nil }
        return UInt16(self[offset + 1]) << 8 | UInt16(self[offset])
    }

    func uint24LE(at offset: Int) -> UInt32? {
        guard contains(offset, length: 3) else { return nil }
        return UInt32(self[offset + 2]) << 16 | UInt32(self[offset + 1]) << 8 | UInt32(self[offset])
    }

    func uint32BE(at offset: Int) -> UInt32? {
        guard contains(offset, length: 4) else { return nil }
        var value: UInt32 = 0
        for index in offset..<offset + 4 { value = value << 8 | UInt32(self[index]) }
        return value
    }

    func uint32LE(at offset: Int) -> UInt32? {
        guard contains(offset, length: 4) else { return nil }
        var value: UInt32 = 0
        for index in (offset..<offset + 4).reversed() { value = value << 8 | UInt32(self[index]) }
        return value
    }

    func uint64BE(at offset: Int) -> UInt64? {
        guard contains(offset, length: 8) else { return nil }
        var value: UInt64 = 0
        for index in offset..<offset + 8 { value = value << 8 | UInt64(self[index]) }
        return value
    }

    func uint64LE(at offset: Int) -> UInt64? {
        guard contains(offset, length: 8) else { return nil }
        var value: UInt64 = 0
        for index in (offset..<offset + 8).reversed() { value = value << 8 | UInt64(self[index]) }
        return value
    }

    /// Reads a 64-bit value in the byte order `bigEndian` names.
    func uint64(at offset: Int, bigEndian: Bool) -> UInt64? {
        bigEndian ? uint64BE(at: offset) : uint64LE(at: offset)
    }

    /// Reads a 16-bit value in the byte order `bigEndian` names.
    func uint16(at offset: Int, bigEndian: Bool) -> UInt16? {
        bigEndian ? uint16BE(at: offset) : uint16LE(at: offset)
    }

    /// Reads a 32-bit value in the byte order `bigEndian` names.
    func uint32(at offset: Int, bigEndian: Bool) -> UInt32? {
        bigEndian ? uint32BE(at: offset) : uint32LE(at: offset)
    }

    /// Whether the bytes at `offset` equal `expected`.
    func matches(_ expected: [UInt8], at offset: Int = 0) -> Bool {
        guard contains(offset, length: expected.count) else { return false }
        for (index, byte) in expected.enumerated() where self[offset + index] != byte { return false }
        return true
    }

    /// Whether the bytes at `offset` equal the ASCII string `expected`.
    func matches(ascii expected: StaticString, at offset: Int = 0) -> Bool {
        expected.withUTF8Buffer { matches(Array($0), at: offset) }
    }

    /// The four-character code at `offset` (a PNG chunk type, RIFF chunk or ISO box type).
    func fourCC(at offset: Int) -> UInt32? { uint32BE(at: offset) }
}

/// The big-endian value of a four-character ASCII code, for comparing with ``ByteReader/fourCC(at:)``.
func fourCC(_ code: StaticString) -> UInt32 {
    precondition(code.utf8CodeUnitCount == 4, "a four-character code has four characters")
    return code.withUTF8Buffer { $0.reduce(0) { $0 << 8 | UInt32($1) } }
}
