public import Foundation

// Reads: values, entries, attributes, keys and totals.
extension DiskStore {
    /// The value stored for `key`, or `nil` when there is none, it expired, or its bytes are
    /// damaged (the damaged entry is then removed).
    ///
    /// - Complexity: One indexed lookup, plus one file read for a value stored in a file.
    public func value(forKey key: String) throws -> Data? {
        try dataWithEntryLocation(forKey: key)?.data
    }

    /// The value for `key` together with its expiration date.
    ///
    /// - Returns: `nil` on a miss, like ``data(forKey:)``.
    public func entry(forKey key: String) throws -> TierEntry? {
        try dataWithEntryLocation(forKey: key).map {
            TierEntry(data: $0.data, expirationDate: $0.location.expires.map(Date.init(milliseconds:)), metadata: $0.location.metadata)
        }
    }

    func dataWithEntryLocation(forKey key: String) throws -> (data: Data, location: DiskIndex.Location)? {
        // A concurrent overwrite can replace the file between the lookup and the read; the
        // row check in `drop` notices and the read is tried again with the new row.
        for _ in 0..<3 {
            let now = configuration.now().milliseconds
            let lookup: DiskIndex.Location? = try withLiveIndex { state, index in
                guard let location = try index.location(forKey: key) else {
                    state.statistics.misses += 1
                    return nil
                }
                if let expires = location.expires, expires <= now {
                    let removed = try index.connection.transaction {
                        try index.deleteIfUnchanged(key: key, location: location)
                    }
                    if removed {
                        state.statistics.expirations += 1
                        if let file = location.file { files.remove(name: file) }
                    }
                    state.statistics.misses += 1
                    return nil
                }
                try Self.recordAccess(&state, index: index, key: key, now: now)
                return location
            }
            guard let location = lookup else { return nil }
            if Self.row(location, belongsTo: key), let data = try decode(location) {
                state.withLock { $0.statistics.hits += 1 }
                return (data, location)
            }
            if try drop(key: key, location: location) { return nil }
        }
        state.withLock { $0.statistics.misses += 1 }
        return nil
    }

    /// Whether the row found for `key` was written for that key: its `hash` column must be the
    /// key's digest. A damaged key column (or key index) would otherwise hand one key's value
    /// to another; the CRC covers only the value. The digest is recognised by its length, so
    /// rows written under another ``Configuration/keyHashing`` still match.
    static func row(_ location: DiskIndex.Location, belongsTo key: String) -> Bool {
        guard let hashing = KeyHashing.allCases.first(where: { $0.digestLength * 2 == location.hash.utf8.count }) else {
            return false
        }
        return hashing.hexDigest(key) == location.hash
    }

    /// The stored bytes behind `location`, checked and decoded; `nil` when they are damaged.
    func decode(_ location: DiskIndex.Location) throws -> Data? {
        guard case .intact(let data) = try inspect(location) else { return nil }
        return data
    }

    /// Removes a damaged entry if the row is still the one that was read. Returns `false` when
    /// the row changed meanwhile (the caller reads again).
    ///
    /// - Parameter isRead: `true` when a read found the damage: it counts as a miss and is
    ///   logged. `verify(repair:)` passes `false`; its report lists the entry instead.
    func drop(key: String, location: DiskIndex.Location, isRead: Bool = true) throws -> Bool {
        let removed = try withLiveIndex { state, index in
            let removed = try index.connection.transaction { try index.deleteIfUnchanged(key: key, location: location) }
            if removed {
                state.statistics.corruptEntriesDropped += 1
                if isRead { state.statistics.misses += 1 }
                state.pendingAccesses[key] = nil
            }
            return removed
        }
        if removed, let file = location.file { files.remove(name: file) }
        if removed && isRead {
            configuration.logHandler?("dropped damaged entry for key of \(key.utf8.count) bytes")
        }
        return removed
    }

    /// Whether a live (unexpired) entry exists for `key`. Does not read the value or count as
    /// an access.
    public func containsValue(forKey key: String) throws -> Bool {
        let now = configuration.now().milliseconds
        return try withLiveIndex { state, index in
            guard let location = try index.location(forKey: key) else { return false }
            return location.expires.map { $0 > now } ?? true
        }
    }

    /// The index's record of `key` — sizes, encoding, dates, metadata — without reading the
    /// value, or `nil` when there is no live entry. Not counted as an access.
    public func attributes(forKey key: String) throws -> Attributes? {
        let now = configuration.now().milliseconds
        return try withLiveIndex { state, index in
            guard let (attributes, expires) = try index.attributes(forKey: key) else { return nil }
            if let expires, expires <= now { return nil }
            return attributes
        }
    }

    /// Every live key, in ascending order.
    ///
    /// - Complexity: O(*n*) in the number of entries.
    public func keys() throws -> [String] {
        let now = configuration.now().milliseconds
        return try withLiveIndex { _, index in try index.keys(now: now) }
    }

    /// Every live key that starts with `prefix`, in ascending order (a range scan of the key
    /// index, not a full scan).
    public func keys(withPrefix prefix: String) throws -> [String] {
        let now = configuration.now().milliseconds
        return try withLiveIndex { _, index in try index.keys(withPrefix: prefix, now: now) }
    }

    /// Stored bytes of all entries (after compression), as recorded in the index.
    public var totalSize: Int {
        (try? withLiveIndex { _, index in try index.totals().size }) ?? 0
    }

    /// Number of entries, as recorded in the index (expired entries count until removed).
    public var totalCount: Int {
        (try? withLiveIndex { _, index in try index.totals().count }) ?? 0
    }

    /// Counters since this store was opened, with the current totals.
    public var statistics: Statistics {
        state.withLock { state in
            var statistics = state.statistics
            if let totals = try? state.index?.totals() {
                statistics.totalCount = totals.count
                statistics.totalSize = totals.size
            }
            return statistics
        }
    }
}
