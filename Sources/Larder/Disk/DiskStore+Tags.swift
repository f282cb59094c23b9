public import Foundation

// Tags: values written with tags, removed together (see DiskTagIndex for the table).
extension DiskStore: TaggingCacheTier {
    /// Stores `data` for `key` with `tags`, replacing any previous value and its tags.
    ///
    /// The tags are written in the entry's transaction: a crash leaves the old entry with its
    /// tags or the new one with its own. An untagged write of the key later drops them.
    ///
    /// ```swift
    /// try disk.setValue(page, forKey: "/users/42", tags: ["user:42"])
    /// try disk.removeValues(taggedWith: "user:42")   // every page about user 42
    /// ```
    ///
    /// - Throws: As ``setValue(_:forKey:expiry:metadata:isCompressible:)``.
    public func setValue(
        _ data: Data, forKey key: String, expiry: Expiry? = nil, metadata: Data? = nil, isCompressible: Bool = true,
        tags: Set<String>
    ) throws {
        _ = try write(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible,
                      onlyIfAbsent: false, tags: tags)
    }

    /// Removes every entry tagged `tag` in one transaction, then their blob files; counted in
    /// ``Statistics/removedByTag``.
    ///
    /// - Returns: The keys removed.
    /// - Complexity: O(*m* log *n*) for *m* tagged entries: the tag's rows are found through an
    ///   index, never by a scan.
    @discardableResult
    public func removeValues(taggedWith tag: String) throws -> [String] {
        let removed: (keys: [String], files: [String]) = try withLiveIndex { state, index in
            let removed = try withWriteTransaction(index, ranking: .asNeeded) { _ in
                try index.tags.deleteEntries(taggedWith: tag)
            }
            state.statistics.removedByTag += removed.keys.count
            return removed
        }
        for name in removed.files { files.remove(name: name) }
        return removed.keys
    }

    /// The tags of the entry for `key`, sorted; none when there is no entry.
    public func tags(forKey key: String) throws -> [String] {
        try withLiveIndex { _, index in try index.tags.tags(forKey: key) }
    }
}
