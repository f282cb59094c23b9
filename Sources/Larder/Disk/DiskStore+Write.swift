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

    /// Stores each of `writes` as ``setValue(_:forKey:expiry:metadata:isCompressible:)`` would,
    /// all in one write transaction: every value is stored, or none is.
    ///
    /// Every write is checked, compressed and written to its blob file before the lock is
    /// taken; then each row goes into the index as a single write's would (evicting as the
    /// limits require, so a batch larger than a limit leaves the store within it, its earlier
    /// values possibly evicted by its later ones), and the transaction commits once. A key
    /// written twice keeps its last write; an empty batch does nothing.
    ///
    /// ```swift
    /// try disk.setValues([
    ///     TierWrite(key: "/users/42", data: user, expiry: .seconds(300)),
    ///     TierWrite(key: "/users/42/avatar", data: avatar, isCompressible: false),
    /// ])
    /// ```
    ///
    /// - Parameter writes: The values, each with its key, expiry (`nil` takes
    ///   ``Configuration/defaultExpiry``), metadata and compression hint.
    /// - Throws: ``StorageError/invalidInput(_:)`` when any write is invalid as
    ///   ``setValue(_:forKey:expiry:metadata:isCompressible:)`` would find it; I/O or SQLite
    ///   errors. Either way nothing of the batch is stored and the previous values stay.
    /// - Complexity: One write transaction and one blob file per value of at least
    ///   ``Configuration/inlineThreshold`` stored bytes.
    public func setValues(_ writes: [TierWrite]) throws {
        guard !writes.isEmpty else { return }
        var expiries: [Expiry] = []
        expiries.reserveCapacity(writes.count)
        for write in writes { expiries.append(try checkedExpiry(write.expiry, metadata: write.metadata)) }
        if countLimit == 0 || sizeLimit == 0 {
            return try acceptAndEvict(keys: Self.lastWritePerKey(writes.map(\.key), key: { $0 }))
        }

        // Work that needs no lock: encode and check every value, then hash, checksum and write
        // the blobs of the last write of each key.
        var encoded: [EncodedValue] = []
        encoded.reserveCapacity(writes.count)
        for (write, expiry) in zip(writes, expiries) {
            encoded.append(try encode(write.data, forKey: write.key, expiry: expiry, metadata: write.metadata,
                                      isCompressible: write.isCompressible))
        }
        let now = configuration.now()
        var rows: [DiskIndex.Row] = []
        rows.reserveCapacity(encoded.count)
        do {
            for value in Self.lastWritePerKey(encoded, key: \.key) { rows.append(try writeRow(of: value, now: now)) }
        } catch {
            for case let file? in rows.map(\.file) { files.remove(name: file) }
            throw error
        }
        _ = try commit(rows, onlyIfAbsent: false, tags: [], now: now.milliseconds)
    }

    /// A write; with `onlyIfAbsent`, one that stores nothing (and returns `false`) when a live
    /// entry exists for `key`, decided inside the write transaction. `tags` are written with the
    /// row, in its transaction (see ``DiskTagIndex``).
    func write(
        _ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool, onlyIfAbsent: Bool,
        tags: Set<String> = []
    ) throws -> Bool {
        let expiry = try checkedExpiry(expiry, metadata: metadata)
        if countLimit == 0 || sizeLimit == 0 {
            if onlyIfAbsent, try containsValue(forKey: key) { return false }
            try acceptAndEvict(keys: [key])
            return true
        }
        // Work that needs no lock: encode, checksum, hash, write the blob.
        let value = try encode(data, forKey: key, expiry: expiry, metadata: metadata, isCompressible: isCompressible)
        let now = configuration.now()
        let row = try writeRow(of: value, now: now)
        return try commit([row], onlyIfAbsent: onlyIfAbsent, tags: tags, now: now.milliseconds) == 1
    }

    /// A value checked and encoded: the bytes its row stores, before any file is written.
    private struct EncodedValue {
        var key: String
        var stored: Data
        var encoding: Encoding
        var originalSize: Int
        var expiry: Expiry
        var metadata: Data?
    }

    /// `expiry` (`nil` takes the default), once it and `metadata` are found valid.
    private func checkedExpiry(_ expiry: Expiry?, metadata: Data?) throws -> Expiry {
        let expiry = expiry ?? configuration.defaultExpiry
        guard expiry.isValid else { throw StorageError.invalidInput("expiry \(expiry) is not a finite time") }
        if let metadata, metadata.count > Self.metadataLimit {
            throw StorageError.invalidInput("metadata of \(metadata.count) bytes exceeds \(Self.metadataLimit) bytes")
        }
        return expiry
    }

    /// Compresses `data` when that makes it smaller, and checks the size limit.
    private func encode(
        _ data: Data, forKey key: String, expiry: Expiry, metadata: Data?, isCompressible: Bool
    ) throws -> EncodedValue {
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
        return EncodedValue(
            key: key, stored: stored, encoding: encoding, originalSize: data.count, expiry: expiry, metadata: metadata)
    }

    /// The index row of `value` written at `now`; a value of at least the inline threshold
    /// goes to a fresh blob file, written here (`tmp/`, then renamed into place).
    private func writeRow(of value: EncodedValue, now: Date) throws -> DiskIndex.Row {
        let inline = value.stored.count < configuration.inlineThreshold
        // The digest names a blob file; an inline row needs none (its checksum covers the key).
        let hash = inline ? "" : configuration.keyHashing.hexDigest(value.key)
        let file = inline ? nil : BlobFiles.makeName(hash: hash)
        if let file { try writeBlob(value.stored, name: file) }
        return DiskIndex.Row(
            key: value.key, hash: hash, file: file, size: value.stored.count, originalSize: value.originalSize,
            encoding: value.encoding, crc: Self.checksum(key: value.key, stored: value.stored), created: now.milliseconds,
            expires: value.expiry.expirationDate(from: now)?.milliseconds, inlineData: inline ? value.stored : nil,
            metadata: value.metadata, sliding: value.expiry.slidingInterval?.milliseconds)
    }

    /// `items` without those a later item of the same key replaces, in order.
    private static func lastWritePerKey<Item>(_ items: [Item], key: (Item) -> String) -> [Item] {
        guard items.count > 1 else { return items }
        var seen = Set<String>(minimumCapacity: items.count)
        var kept: [Item] = []
        kept.reserveCapacity(items.count)
        for item in items.reversed() where seen.insert(key(item)).inserted { kept.append(item) }
        return kept.reversed()
    }

    /// Commits `rows` (their blob files written) in one write transaction, each placed by the
    /// policy as a single write's row is; then removes the files no row names any more. If the
    /// transaction does not commit, removes every file of `rows`. Returns the rows stored.
    private func commit(_ rows: [DiskIndex.Row], onlyIfAbsent: Bool, tags: Set<String>, now: Int64) throws -> Int {
        let outcome: (stored: Int, obsolete: [String])
        do {
            outcome = try withLiveIndex { state, index in
                // Lifetimes this process renewed decide whether an entry is live.
                let ranking: LoggedReads = onlyIfAbsent ? .renewalsFirst : .asNeeded
                let outcome: (stored: Int, obsolete: [String]) = try withWriteTransaction(index, ranking: ranking) { transaction in
                    var stored = 0
                    var obsolete: [String] = []
                    for row in rows {
                        if onlyIfAbsent, case let expires? = try index.reads.expiry(forKey: row.key),
                           expires.map({ $0 > now }) ?? true {
                            if let file = row.file { obsolete.append(file) }
                            continue
                        }
                        let replaced = try policy.write(row, in: self, state: &state, transaction: transaction, now: now)
                        if obsolete.isEmpty { obsolete = replaced } else { obsolete += replaced }
                        if !tags.isEmpty { try index.tags.tag(row.key, with: tags) }
                        stored += 1
                    }
                    return (stored, obsolete)
                }
                if outcome.stored > 0 {
                    state.statistics.writes += outcome.stored
                    checkpointIfDue(&state, index: index, writes: outcome.stored)
                }
                return outcome
            }
        } catch {
            for case let file? in rows.map(\.file) { files.remove(name: file) }
            throw error
        }
        for name in outcome.obsolete { files.remove(name: name) }
        return outcome.stored
    }

    /// Writes to a store whose ``Configuration/countLimit`` or ``Configuration/sizeLimit`` is 0:
    /// accepted (each counts as a write) and immediately evicted, in one transaction, so the
    /// previous values of `keys` go too and nothing is written to disk.
    private func acceptAndEvict(keys: [String]) throws {
        guard !keys.isEmpty else { return }
        let removed: [String] = try withLiveIndex { state, index in
            let removed: [String] = try withWriteTransaction(index, ranking: .asNeeded) { _ in
                try keys.compactMap { try index.delete(key: $0).file }
            }
            state.statistics.writes += keys.count
            state.statistics.evictions += keys.count
            for key in keys { state.recordRemoval(key, .evicted) }
            return removed
        }
        for name in removed { files.remove(name: name) }
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

    /// Counts `writes` committed rows toward the next checkpoint, and checkpoints when one is due.
    func checkpointIfDue(_ state: inout State, index: DiskIndex, writes: Int) {
        state.writesSinceCheckpoint += writes
        guard state.writesSinceCheckpoint >= Self.checkpointInterval else { return }
        state.writesSinceCheckpoint = 0
        // Only a log the passive checkpoints fail to start over (readers in other connections
        // keeping old snapshots alive) needs this one, which waits for them; otherwise it
        // would only cost the writing thread a copy and two `fdatasync`s.
        guard index.connection.logMonitor?.isOverBound ?? true else { return }
        readers.truncateLog(of: index.connection)
    }
}
