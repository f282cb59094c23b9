public import Foundation

// Changing an entry's expiry and metadata together without rewriting its value: what an HTTP
// cache needs when a server answers "304 Not Modified".
extension DiskStore {
    /// Changes when the live entry for `key` expires and replaces its metadata, in one
    /// statement, without rewriting its value: the index row is updated in place and a blob
    /// file is neither read nor written.
    ///
    /// An expiry that has already passed removes the entry.
    ///
    /// ```swift
    /// // The server confirmed the cached bytes: keep them another hour, with the new headers.
    /// try store.refresh(forKey: url, expiry: .seconds(3_600), metadata: newHeaders)
    /// ```
    ///
    /// - Parameters:
    ///   - expiry: The entry's new expiry.
    ///   - metadata: The entry's new metadata (`nil` clears it), at most ``metadataLimit`` bytes.
    /// - Returns: Whether a live entry was there.
    /// - Throws: ``StorageError/Code/invalidInput`` for an expiry that is not finite or
    ///   oversized metadata (nothing changes); SQLite errors.
    @discardableResult
    public func refresh(forKey key: String, expiry: Expiry, metadata: Data?) throws -> Bool {
        guard expiry.isValid else { throw StorageError.invalidInput("expiry \(expiry) is not a finite time") }
        if let metadata, metadata.count > Self.metadataLimit {
            throw StorageError.invalidInput("metadata of \(metadata.count) bytes exceeds \(Self.metadataLimit) bytes")
        }
        let now = configuration.now()
        let nowMilliseconds = now.milliseconds
        let expires = expiry.expirationDate(from: now)?.milliseconds
        if let expires, expires <= nowMilliseconds {
            guard try containsValue(forKey: key) else { return false }
            return try removeValue(forKey: key)
        }
        return try withLiveIndex { _, index in
            try index.connection.transaction {
                try index.connection.statement(Self.refreshSQL).withReset { statement in
                    try statement.bind(expires, at: 1)
                    try statement.bind(metadata, at: 2)
                    try statement.bind(key, at: 3)
                    try statement.bind(nowMilliseconds, at: 4)
                    guard try statement.step() else { return false }
                    while try statement.step() {}
                    return true
                }
            }
        }
    }

    static let refreshSQL = """
        UPDATE entries SET expires = ?1, metadata = ?2 WHERE key = ?3 AND (expires IS NULL OR expires > ?4) \
        RETURNING rowid
        """
}
