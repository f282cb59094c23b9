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
        try updateLiveRow(forKey: key, expiry: expiry, metadata: .some(metadata))
    }
}
