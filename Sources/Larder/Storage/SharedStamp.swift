import Foundation

/// What a ``Storage`` writes beside each value it puts in a shared tier, as the entry's
/// metadata: when the value was written and its tags. A read of the shared tier compares it
/// with the tier's *invalidation times* (see `SharedInvalidations`), so a value written before
/// the last ``Storage/removeAll(tiers:)-(_)`` or before a removal of one of its tags is a miss
/// in every process, although the tier itself removed nothing.
///
/// Layout (big-endian): magic `"LST1"` (4), write time in microseconds since 1970 (8), tag
/// count (2), each tag as its UTF-8 length (2) and bytes, then the caller's own metadata, if
/// any (``Storage/refresh(forKey:expiry:metadata:value:tiers:)-(_,_,_,_,_)`` keeps it there).
/// Metadata that does not start with the magic is no stamp: such an entry counts as written
/// before any invalidation time.
struct SharedStamp: Equatable {
    static let magic: [UInt8] = Array("LST1".utf8)

    /// Microseconds since 1970.
    var written: Int64
    var tags: [String]
    /// The caller's metadata kept with the value, or `nil`.
    var userMetadata: Data?

    init(written: Int64, tags: [String], userMetadata: Data? = nil) {
        self.written = written
        self.tags = tags
        self.userMetadata = userMetadata
    }

    /// The stamp in `metadata`, or `nil` when it holds none (or a damaged one).
    init?(metadata: Data?) {
        guard let metadata, metadata.count >= 14, metadata.starts(with: Self.magic) else { return nil }
        let bytes = [UInt8](metadata)
        var offset = 4
        func integer(_ width: Int) -> UInt64? {
            guard offset + width <= bytes.count else { return nil }
            defer { offset += width }
            return bytes[offset..<offset + width].reduce(0) { $0 << 8 | UInt64($1) }
        }
        guard let written = integer(8), let count = integer(2) else { return nil }
        var tags: [String] = []
        for _ in 0..<count {
            guard let length = integer(2).map(Int.init), offset + length <= bytes.count,
                  let tag = String(bytes: bytes[offset..<offset + length], encoding: .utf8) else { return nil }
            offset += length
            tags.append(tag)
        }
        self.written = Int64(bitPattern: written)
        self.tags = tags
        userMetadata = offset < bytes.count ? Data(bytes[offset...]) : nil
    }

    /// The metadata bytes of the stamp.
    var metadata: Data {
        var bytes = Self.magic
        func append(_ value: UInt64, width: Int) {
            for shift in stride(from: (width - 1) * 8, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }
        append(UInt64(bitPattern: written), width: 8)
        append(UInt64(tags.count), width: 2)
        for tag in tags {
            let utf8 = Array(tag.utf8)
            append(UInt64(utf8.count), width: 2)
            bytes += utf8
        }
        if let userMetadata { bytes += userMetadata }
        return Data(bytes)
    }

    /// `date` in microseconds since 1970.
    static func microseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000_000).rounded(.down))
    }
}
