public import Foundation

// Trims by age: every entry written, or last used, before a date.
extension DiskStore {
    /// Removes every entry written, or last used (written or read), before `date`.
    ///
    /// Reads waiting to be ranked are ranked first, so an entry read just before the call
    /// counts as used then. Under ``EvictionPolicy/s3fifo``, a read of an entry read three
    /// times or more is not recorded while its recorded use is under 2 s old: such an entry
    /// counts as used up to 2 s before its last read. The entries are found in one pass and
    /// removed in batches of short transactions, each checking the entry's age again: a write
    /// or read landing meanwhile (from this or another process) keeps its entry.
    ///
    /// - Parameters:
    ///   - date: Entries older than this go (the store's times have millisecond resolution).
    ///   - age: Which moment counts: ``EntryAge/lastUsed`` (the default) or ``EntryAge/written``.
    /// - Returns: The number of entries removed.
    @discardableResult
    public func trim(toDate date: Date, by age: EntryAge = .lastUsed) throws -> Int {
        try trim(toDate: date, by: age, sparing: []).count
    }

    /// ``trim(toDate:by:)``, keeping the entries of `spared` keys whatever their age (for a
    /// ``Storage``: the keys its memory tier has used since `date`).
    ///
    /// - Returns: The keys removed.
    public func trim(toDate date: Date, by age: EntryAge, sparing spared: Set<String>) throws -> [String] {
        let cutoff = date.milliseconds
        let candidates: [(rowID: Int64, key: String)] = try withLiveIndex { _, index in
            try withWriteTransaction(index) { _ in
                return try index.rows(olderThan: cutoff, by: age).filter { !spared.contains($0.key) }
            }
        }
        var removed: [String] = []
        var start = candidates.startIndex
        while start < candidates.endIndex {
            let batch = candidates[start..<min(start + Self.batchSize, candidates.endIndex)]
            start = batch.endIndex
            let obsolete: [String] = try withLiveIndex { state, index in
                try withWriteTransaction(index) { _ in
                    var obsolete: [String] = []
                    for row in batch {
                        guard let deleted = try index.delete(rowID: row.rowID, key: row.key, ifOlderThan: cutoff, by: age)
                        else { continue }
                        removed.append(row.key)
                        if let file = deleted { obsolete.append(file) }
                        state.recordRemoval(row.key, .removed)
                    }
                    return obsolete
                }
            }
            for name in obsolete { files.remove(name: name) }
        }
        return removed
    }
}

extension DiskIndex {
    /// Every row written (or last used) before `cutoff` milliseconds, with its key.
    func rows(olderThan cutoff: Int64, by age: EntryAge) throws -> [(rowID: Int64, key: String)] {
        let sql = switch age {
        case .written: "SELECT rowid, key FROM entries WHERE created < ?"
        case .lastUsed: """
            SELECT e.rowid, e.key FROM entries AS e LEFT JOIN access AS a ON a.entry = e.rowid
            WHERE coalesce(a.accessed, e.accessed) < ?
            """
        }
        return try connection.statement(sql).withReset { statement in
            try statement.bind(cutoff, at: 1)
            var rows: [(rowID: Int64, key: String)] = []
            while try statement.step() { rows.append((statement.int64(0), statement.string(1))) }
            return rows
        }
    }

    /// Deletes the row `rowID` if it still holds `key` and is still older than `cutoff`;
    /// returns `nil` when it was not, else its blob file (`.some(nil)` for an inline row).
    func delete(rowID: Int64, key: String, ifOlderThan cutoff: Int64, by age: EntryAge) throws -> String?? {
        let sql = switch age {
        case .written: "DELETE FROM entries WHERE rowid = ?1 AND key = ?2 AND created < ?3 RETURNING file"
        case .lastUsed: """
            DELETE FROM entries WHERE rowid = ?1 AND key = ?2
                AND coalesce((SELECT accessed FROM access WHERE entry = ?1), accessed) < ?3
            RETURNING file
            """
        }
        return try connection.statement(sql).withReset { statement in
            try statement.bind(rowID, at: 1)
            try statement.bind(key, at: 2)
            try statement.bind(cutoff, at: 3)
            guard try statement.step() else { return nil }
            let file = statement.optionalString(0)
            while try statement.step() {}
            return .some(file)
        }
    }
}
