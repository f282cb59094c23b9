public import Foundation

// Operations that decide and change in one write transaction, so they are atomic across
// threads and across processes sharing the directory: insert-if-absent, remove-and-return, and
// changing only an entry's expiry ("touch").
extension DiskStore {
    /// Stores `data` for `key` only when no live entry exists for it. The check and the write
    /// are one transaction: of several threads or processes inserting one key at once, exactly
    /// one stores its value.
    ///
    /// An expired entry counts as absent and is replaced. Parameters and errors are those of
    /// ``setValue(_:forKey:expiry:metadata:isCompressible:)``.
    ///
    /// - Returns: `true` when the value was stored, `false` when a live entry was already there
    ///   (it is left as it is).
    @discardableResult
    public func insertValue(
        _ data: Data, forKey key: String, expiry: Expiry? = nil, metadata: Data? = nil, isCompressible: Bool = true
    ) throws -> Bool {
        try write(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible,
                  onlyIfAbsent: true)
    }

    /// Removes the entry for `key` and returns its value, in one transaction: of several
    /// threads or processes taking one key at once, exactly one gets the value.
    ///
    /// - Returns: The value with its expiration date and metadata, or `nil` when there was no
    ///   live entry, or its bytes were damaged (the entry is removed either way).
    public func takeEntry(forKey key: String) throws -> TierEntry? {
        let now = configuration.now().milliseconds
        let taken: (location: DiskIndex.Location, isExpired: Bool)? = try withLiveIndex { state, index in
            let taken: (location: DiskIndex.Location, isExpired: Bool)? = try withWriteTransaction(index) { _ in
                // Renewed lifetimes first.
                guard let location = try index.reads.location(forKey: key) else { return nil }
                _ = try index.delete(rowID: location.rowID)
                return (location, location.expires.map { $0 <= now } ?? false)
            }
            if taken?.isExpired == true {
                state.statistics.expirations += 1
                state.recordRemoval(key, .expired)
            }
            return taken
        }
        guard let taken else {
            record(.miss)
            return nil
        }
        // The row is gone, so no other store removes its file: read it, then remove it.
        defer { if let file = taken.location.file { files.remove(name: file) } }
        if taken.isExpired {
            record(.miss)
            return nil
        }
        guard let data = try decode(taken.location, key: key) else {
            state.withLock { $0.statistics.corruptEntriesDropped += 1 }
            configuration.logHandler?("dropped damaged entry for key of \(key.utf8.count) bytes")
            record(.miss)
            return nil
        }
        record(.unloggedHit)  // Counted, not logged: the entry is gone.
        return TierEntry(
            data: data, expirationDate: taken.location.expires.map(Date.init(milliseconds:)),
            metadata: taken.location.metadata, slidingInterval: taken.location.sliding.map { Double($0) / 1_000 })
    }

    /// Removes the entry for `key` and returns its value; see ``takeEntry(forKey:)``.
    public func takeValue(forKey key: String) throws -> Data? {
        try takeEntry(forKey: key)?.data
    }

    /// Changes when the live entry for `key` expires, without rewriting its value. An expiry
    /// that has already passed removes the entry.
    ///
    /// - Returns: Whether a live entry was there.
    /// - Throws: ``StorageError/Code/invalidInput`` for an expiry that is not finite.
    @discardableResult
    public func setExpiry(_ expiry: Expiry, forKey key: String) throws -> Bool {
        try updateLiveRow(forKey: key, expiry: expiry, metadata: .none)
    }

    /// The one row update behind ``setExpiry(_:forKey:)`` and ``refresh(forKey:expiry:metadata:)``:
    /// the expiry (with its sliding lifetime) and, unless `metadata` is `.none`, the metadata
    /// (`.some(nil)` clears it). An expiry that has already passed removes the entry.
    func updateLiveRow(forKey key: String, expiry: Expiry, metadata: Data??) throws -> Bool {
        guard expiry.isValid else { throw StorageError.invalidInput("expiry \(expiry) is not a finite time") }
        if case let metadata?? = metadata, metadata.count > Self.metadataLimit {
            throw StorageError.invalidInput("metadata of \(metadata.count) bytes exceeds \(Self.metadataLimit) bytes")
        }
        let now = configuration.now()
        let nowMilliseconds = now.milliseconds
        let expires = expiry.expirationDate(from: now)?.milliseconds
        if let expires, expires <= nowMilliseconds {
            // Already over: the entry goes, as an expired one would.
            guard try containsValue(forKey: key) else { return false }
            return try removeValue(forKey: key)
        }
        return try withLiveIndex { _, index in
            try withWriteTransaction(index) { _ in
                // Renewals logged before this call land first, so they cannot undo it.
                let sql = metadata == nil ? Self.updateExpirySQL : Self.updateExpiryAndMetadataSQL
                return try index.connection.statement(sql).withReset { statement in
                    try statement.bind(expires, at: 1)
                    try statement.bind(key, at: 2)
                    try statement.bind(nowMilliseconds, at: 3)
                    try statement.bind(expiry.slidingInterval?.milliseconds, at: 4)
                    if case let metadata? = metadata { try statement.bind(metadata, at: 5) }
                    guard try statement.step() else { return false }
                    while try statement.step() {}
                    return true
                }
            }
        }
    }

    static let updateExpirySQL =
        "UPDATE entries SET expires = ?1, sliding = ?4 WHERE key = ?2 AND (expires IS NULL OR expires > ?3) RETURNING rowid"
    static let updateExpiryAndMetadataSQL = """
        UPDATE entries SET expires = ?1, sliding = ?4, metadata = ?5 WHERE key = ?2 AND (expires IS NULL OR expires > ?3) \
        RETURNING rowid
        """
}
