import Foundation
import Synchronization

extension DiskStore {
    /// A kind of damage ``DiskStore/verify(repair:progress:)`` can find in an entry.
    ///
    /// A struct with static constants rather than an enum, so a later release can report a new
    /// kind without breaking an exhaustive `switch`.
    public struct Damage: Sendable, Hashable, CustomStringConvertible {
        /// A short, stable name such as `"checksum-mismatch"`, for scripts and JSON output.
        public let identifier: String
        /// A short phrase for people, such as `"checksum mismatch"`.
        public let description: String

        init(_ identifier: String, _ description: String) {
            self.identifier = identifier
            self.description = description
        }

        public static func == (lhs: Damage, rhs: Damage) -> Bool { lhs.identifier == rhs.identifier }
        public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }

        /// The row names a blob file that does not exist.
        public static let missingFile = Damage("missing-file", "blob file missing")
        /// The blob file or the inline bytes are not the size the row records (or the blob is
        /// not a regular file).
        public static let sizeMismatch = Damage("size-mismatch", "stored size differs from the index")
        /// The stored bytes (and the key) do not match the row's checksum: CRC-32C of key and
        /// bytes, or for a row written by schema 1, CRC-32 of the bytes and the key's digest.
        public static let checksumMismatch = Damage("checksum-mismatch", "checksum mismatch")
        /// The bytes do not decompress, or not to the recorded original size.
        public static let undecodable = Damage("undecodable", "does not decompress to the recorded size")
        /// The row names an encoding this version does not know.
        public static let unknownEncoding = Damage("unknown-encoding", "unknown encoding")
    }

    /// One damaged entry found by ``DiskStore/verify(repair:progress:)``.
    public struct DamagedEntry: Sendable, Hashable {
        /// The entry's key.
        public var key: String
        /// What is wrong with it.
        public var damage: Damage
    }

    /// What ``DiskStore/verify(repair:progress:)`` found.
    public struct VerificationReport: Sendable, Hashable {
        /// Entries checked (rows removed by another store during the check are not counted).
        public var checkedCount = 0
        /// Entries whose bytes are intact.
        public var goodCount = 0
        /// The damaged entries, in key order.
        public var damagedEntries: [DamagedEntry] = []
        /// Damaged entries removed (only with `repair: true`).
        public var removedCount = 0

        /// Damaged entries still in the store.
        public var remainingDamageCount: Int { damagedEntries.count - removedCount }
        /// Whether no damaged entry remains: nothing was found, or every find was removed.
        public var isHealthy: Bool { remainingDamageCount == 0 }
    }

    /// Checks every entry — expired ones included — the way a read would: the blob file is
    /// present and of the recorded size (or the inline bytes are), the checksum matches, and the
    /// bytes decode to the recorded original size.
    ///
    /// Without `repair` the check changes nothing: no access time, no removal (a plain read
    /// would drop a damaged entry). With `repair`, each damaged entry is removed, as a read
    /// would remove it. An entry that another store overwrites during the check is checked
    /// again in its new form.
    ///
    /// ```swift
    /// let report = try store.verify { checked, total in print("\(checked)/\(total)") }
    /// if !report.isHealthy { try store.verify(repair: true) }
    /// ```
    ///
    /// - Parameters:
    ///   - repair: Whether to remove the damaged entries.
    ///   - progress: Called after each entry with the number checked so far and the total, on
    ///     the calling thread, outside the store's lock.
    /// - Returns: The counts and the list of damaged entries.
    /// - Throws: ``StorageError`` for SQLite or I/O failures other than damaged entries.
    /// - Complexity: O(*n*) index lookups and a full read of every value.
    /// - Important: Reads every stored byte on the calling thread.
    @discardableResult
    public func verify(repair: Bool = false, progress: ((_ checked: Int, _ total: Int) -> Void)? = nil) throws
        -> VerificationReport
    {
        let keys = try withReader { try $0.allKeys() }
        var report = VerificationReport()
        for (position, key) in keys.enumerated() {
            try verifyEntry(forKey: key, repair: repair, into: &report)
            progress?(position + 1, keys.count)
        }
        return report
    }

    private func verifyEntry(forKey key: String, repair: Bool, into report: inout VerificationReport) throws {
        // A concurrent overwrite can replace the row between the lookup and the file read;
        // damage is only reported for a row that is still the one that was read.
        for _ in 0..<3 {
            let location = try withReader { try $0.location(forKey: key) }
            guard let location else { return }
            guard case .damaged(let damage) = try inspect(location, key: key) else {
                report.checkedCount += 1
                report.goodCount += 1
                return
            }
            if repair {
                guard try drop(key: key, location: location, isRead: false) else { continue }
                report.removedCount += 1
            } else {
                let current = try withReader { try $0.location(forKey: key) }
                guard let current, current.isSameRow(as: location) else { continue }
            }
            report.checkedCount += 1
            report.damagedEntries.append(DamagedEntry(key: key, damage: damage))
            return
        }
    }

    /// What reading the stored bytes behind a row found.
    enum StoredBytes {
        case intact(Data)
        case damaged(Damage)
    }

    /// Reads, checks and decodes the stored bytes behind `location`, the row found for `key`,
    /// without changing anything.
    func inspect(_ location: DiskIndex.Location, key: String) throws -> StoredBytes {
        let stored: Data
        if let file = location.file {
            guard let bytes = try files.read(name: file, expectedSize: location.size) else {
                let exists = FileManager.default.fileExists(atPath: files.path(of: file))
                return .damaged(exists ? .sizeMismatch : .missingFile)
            }
            stored = bytes
        } else {
            guard let bytes = location.inlineData, bytes.count == location.size else { return .damaged(.sizeMismatch) }
            stored = bytes
        }
        switch location.crcKind {
        case 1:
            guard Self.checksum(key: key, stored: stored) == location.crc else { return .damaged(.checksumMismatch) }
        case 0:
            // A schema-1 row: CRC-32 of the bytes alone, and the key digest in `hash`.
            guard CRC32.checksum(stored) == location.crc, Self.row(location, belongsTo: key) else {
                return .damaged(.checksumMismatch)
            }
        default:
            return .damaged(.checksumMismatch)
        }
        switch Encoding(rawValue: Int(location.encodingCode)) {
        case .raw?:
            return stored.count == location.originalSize ? .intact(stored) : .damaged(.sizeMismatch)
        case .gzip?:
            guard let data = try? Gzip.decompress(stored, maxSize: location.originalSize),
                  data.count == location.originalSize else { return .damaged(.undecodable) }
            return .intact(data)
        case nil:
            return .damaged(.unknownEncoding)
        }
    }
}

extension DiskIndex.Location {
    /// Whether `other` describes the same write of the entry (an overwrite changes these).
    func isSameRow(as other: Self) -> Bool {
        file == other.file && created == other.created && crc == other.crc && size == other.size
    }
}
