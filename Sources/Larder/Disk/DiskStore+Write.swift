public import Foundation

// Writes and removals.
extension DiskStore {
    /// Stores `data` for `key`, replacing any previous value.
    ///
    /// Hashing, compression and the checksum run before the lock is taken; a value that goes to
    /// a file is written to `tmp/` and renamed into place before its row is committed, so a
    /// crash at any point leaves either the old entry or the new one.
    ///
    /// In a store whose ``Configuration/countLimit`` or ``Configuration/sizeLimit`` is 0 the
    /// write is accepted and immediately evicted: it returns normally, counts as a write and an
    /// eviction, removes any previous value of `key`, and stores nothing.
    ///
    /// - Parameters:
    ///   - data: The value; empty values are allowed.
    ///   - key: Any string, including empty, very long or path-like ones.
    ///   - expiry: When the entry expires; `nil` takes ``Configuration/defaultExpiry``.
    ///   - metadata: Small caller bytes kept in the index row (at most ``metadataLimit``).
    ///   - isCompressible: Pass `false` for already-compressed data (JPEG, PNG…) to skip gzip.
    /// - Throws: ``StorageError/invalidInput(_:)`` for a value larger than the size limit, an
    ///   invalid expiry or oversized metadata (the previous value stays); I/O or SQLite errors
    ///   (the store stays consistent and the previous value stays).
    public func setValue(
        _ data: Data, forKey key: String, expiry: Expiry? = nil, metadata: Data? = nil, isCompressible: Bool = true
    ) throws {
        _ = try write(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible,
                      onlyIfAbsent: false)
    }

    /// A write; with `onlyIfAbsent`, one that stores nothing (and returns `false`) when a live
    /// entry exists for `key`, decided inside the write transaction. `tags` are written with the
    /// row, in its transaction (see ``DiskTagIndex``).
    func write(
        _ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool, onlyIfAbsent: Bool,
        tags: Set<String> = []
    ) throws -> Bool {
        let expiry = expiry ?? configuration.defaultExpiry
        guard expiry.isValid else { throw StorageError.invalidInput("expiry \(expiry) is not a finite time") }
        if let metadata, metadata.count > Self.metadataLimit {
            throw StorageError.invalidInput("metadata of \(metadata.count) bytes exceeds \(Self.metadataLimit) bytes")
        }

        if countLimit == 0 || sizeLimit == 0 {
            if onlyIfAbsent, try containsValue(forKey: key) { return false }
            try acceptAndEvict(key: key)
            return true
        }

        // Work that needs no lock: encode, checksum, hash, write the blob.
        var stored = data
        var encoding = Encoding.raw
        if case .gzip(let level) = configuration.compression, isCompressible, !data.isEmpty {
            let packed = try Gzip.compress(data, level: level)
            if packed.count < data.count {
                stored = packed
                encoding = .gzip
            }
        }
        guard stored.count <= sizeLimit else {
            throw StorageError.invalidInput("value of \(stored.count) stored bytes exceeds sizeLimit \(sizeLimit)")
        }
        let now = configuration.now()
        let nowMilliseconds = now.milliseconds
        let inline = stored.count < configuration.inlineThreshold
        // The digest names a blob file; an inline row needs none (its checksum covers the key).
        let hash = inline ? "" : configuration.keyHashing.hexDigest(key)
        let file = inline ? nil : BlobFiles.makeName(hash: hash)
        if let file { try writeBlob(stored, name: file) }

        let row = DiskIndex.Row(
            key: key, hash: hash, file: file, size: stored.count, originalSize: data.count, encoding: encoding,
            crc: Self.checksum(key: key, stored: stored), created: nowMilliseconds,
            expires: expiry.expirationDate(from: now)?.milliseconds,
            inlineData: inline ? stored : nil, metadata: metadata, sliding: expiry.slidingInterval?.milliseconds)

        let obsolete: [String]?
        do {
            obsolete = try withLiveIndex { state, index in
                // Lifetimes this process renewed decide whether the entry is live.
                let ranking: LoggedReads = onlyIfAbsent ? .renewalsFirst : .asNeeded
                let obsolete: [String]? = try withWriteTransaction(index, ranking: ranking) { transaction in
                    if onlyIfAbsent, case let expires? = try index.reads.expiry(forKey: key),
                       expires.map({ $0 > nowMilliseconds }) ?? true {
                        return nil
                    }
                    let obsolete = try policy.write(row, in: self, state: &state, transaction: transaction, now: nowMilliseconds)
                    if !tags.isEmpty { try index.tags.tag(key, with: tags) }
                    return obsolete
                }
                guard obsolete != nil else { return nil }
                state.statistics.writes += 1
                checkpointIfDue(&state, index: index)
                return obsolete
            }
        } catch {
            if let file { files.remove(name: file) }
            throw error
        }
        guard let obsolete else {
            if let file { files.remove(name: file) }
            return false
        }
        for name in obsolete { files.remove(name: name) }
        return true
    }

    /// A write to a store whose ``Configuration/countLimit`` or ``Configuration/sizeLimit`` is 0:
    /// accepted (it counts as a write) and immediately evicted, so the previous value of `key`
    /// goes too and nothing is written to disk.
    private func acceptAndEvict(key: String) throws {
        let removed: (existed: Bool, file: String?) = try withLiveIndex { state, index in
            let removed = try withWriteTransaction(index, ranking: .asNeeded) { _ in try index.delete(key: key) }
            state.statistics.writes += 1
            state.statistics.evictions += 1
            state.recordRemoval(key, .evicted)
            return removed
        }
        if let file = removed.file { files.remove(name: file) }
    }

    /// Removes the entry for `key`.
    ///
    /// - Returns: Whether an entry was removed.
    @discardableResult
    public func removeValue(forKey key: String) throws -> Bool {
        let removed: (existed: Bool, file: String?) = try withLiveIndex { state, index in
            try withWriteTransaction(index, ranking: .asNeeded) { _ in try index.delete(key: key) }
        }
        if let file = removed.file { files.remove(name: file) }
        return removed.existed
    }

    /// Removes every entry.
    public func removeAll() throws {
        let removed: [String] = try withLiveIndex { state, index in
            try withWriteTransaction(index, ranking: .forgotten) { _ in try index.deleteAll().files }
        }
        for name in removed { files.remove(name: name) }
    }

    /// Writes a blob file; when the write fails because `tmp/` or `blobs/` (or the whole
    /// directory) was removed, creates them again and retries once.
    func writeBlob(_ data: Data, name: String) throws {
        do {
            try files.write(data, name: name)
        } catch {
            guard !FileManager.default.fileExists(atPath: files.tmpPath)
                    || !FileManager.default.fileExists(atPath: files.blobsPath) else { throw error }
            try state.withLock { try reopenIfDirectoryChanged(&$0) }
            try files.createDirectories()
            try files.write(data, name: name)
        }
    }

    func checkpointIfDue(_ state: inout State, index: DiskIndex) {
        state.writesSinceCheckpoint += 1
        guard state.writesSinceCheckpoint >= Self.checkpointInterval else { return }
        state.writesSinceCheckpoint = 0
        // Only a log the passive checkpoints fail to start over (readers in other connections
        // keeping old snapshots alive) needs this one, which waits for them; otherwise it
        // would only cost the writing thread a copy and two `fdatasync`s.
        guard index.connection.logMonitor?.isOverBound ?? true else { return }
        readers.truncateLog(of: index.connection)
    }
}
