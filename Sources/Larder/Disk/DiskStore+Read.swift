public import Foundation

// Reads: values, entries, attributes, keys and totals.
extension DiskStore {
    /// The value stored for `key`, or `nil` when there is none, it expired, or its bytes are
    /// damaged (the damaged entry is then removed).
    ///
    /// Runs on a pooled read connection: reads on other threads, and the writer, do not wait
    /// for it. The read is recorded in memory for least-recently-used order (under `.s3fifo`,
    /// for the entry's read counter, unless the counter is saturated and its last use recent);
    /// nothing is written to the entry's row.
    ///
    /// - Complexity: One lookup of the key index, plus one file read for a value stored in a
    ///   file, and a checksum of the bytes.
    public func value(forKey key: String) throws -> Data? {
        try foundValue(forKey: key)?.data
    }

    /// The value for `key` together with its expiration date.
    ///
    /// - Returns: `nil` on a miss, like ``value(forKey:)``.
    public func entry(forKey key: String) throws -> TierEntry? {
        guard let found = try foundValue(forKey: key) else { return nil }
        return TierEntry(
            data: found.data, expirationDate: found.expires.map(Date.init(milliseconds:)),
            metadata: found.metadata, slidingInterval: found.sliding.map { Double($0) / 1_000 })
    }

    /// What a hit returns: the checked bytes and the row's lifetime and metadata, without the
    /// rest of its location (whose copies, five references, showed in the read's profile).
    struct FoundValue {
        var data: Data
        var expires: Int64?
        var metadata: Data?
        var sliding: Int64?
    }

    /// Runs `body` on a pooled reader, outside the writer's lock: for an answer about the
    /// index's contents other than a value read.
    func withReader<T>(_ body: (DiskIndexReader) throws -> T) throws -> T {
        try withRecordingReader { reader in (try body(reader), .answer) }
    }

    /// ``withReader(_:)`` for a value read: `body` also returns what to record in the access
    /// log. A vanished directory, or a corrupt index, is repaired and the read runs again (see
    /// ``ReaderPool/withReader(_:reportsContents:recover:)``).
    func withRecordingReader<T>(_ body: (DiskIndexReader) throws -> (T, AccessLog.Record)) throws -> T {
        let (result, found) = try readers.withReader(body, reportsContents: { $0.1.reportsContents }) { recovery in
            try state.withLock { state in
                switch recovery {
                case .directoryChanged:
                    try reopenIfDirectoryChanged(&state)
                case .corruption(let error, let generation):
                    guard !readers.isRetired(since: generation) else { return }
                    try resetCorruptIndex(&state, error: error)
                }
            }
        }
        record(found)
        return result
    }

    func foundValue(forKey key: String) throws -> FoundValue? {
        // A concurrent overwrite can replace the file between the lookup and the read; the
        // row check in `drop` notices and the read is tried again with the new row.
        for _ in 0..<3 {
            // The lookup, the file read and the check run on one pooled reader; the hit or miss
            // is recorded as the reader goes back into the pool, under the same lock hold.
            let lookup: Lookup = try withRecordingReader { reader in
                let counted = reader.countsLookups && reader.countsNextLookup()
                // A counter this reader saw saturated in the same snapshot needs no second look.
                let known = counted ? reader.knownSaturation(forKey: key) : nil
                guard let location = try reader.location(forKey: key, counted: counted && known == nil) else {
                    return (.missing, .miss)
                }
                // Read after the lookup: a miss needs no clock.
                let now = configuration.now().milliseconds
                if let expires = location.expires, expires <= now { return (.expired(location), .miss) }
                guard let data = try decode(location, key: key) else { return (.damaged(location), .none) }
                let access = DiskIndex.Access(rowID: location.rowID, time: now)
                var found = FoundValue(
                    data: data, expires: location.expires, metadata: location.metadata, sliding: location.sliding)
                guard let renewed = location.renewedExpiry(at: now) else {
                    guard counted else { return (.found(found), .hit(access)) }
                    // Under S3-FIFO, a hot entry's read writes nothing (its counter stays at 3).
                    let saturated: Bool
                    if let known {
                        saturated = DiskIndex.Location.Counter(count: DiskIndex.maxReadCount, accessed: known)
                            .isSaturated(at: now, window: Self.accessFlushDelay)
                    } else {
                        saturated = location.isSaturated(at: now, window: Self.accessFlushDelay)
                        if let counter = location.counter, counter.count >= DiskIndex.maxReadCount {
                            reader.noteSaturation(forKey: key, accessed: counter.accessed)
                        }
                    }
                    reader.noteCounter(saturated: saturated)
                    return (.found(found), saturated ? .unloggedHit : .hit(access))
                }
                // A sliding lifetime: renewed now for this caller, written with the ranking.
                found.expires = renewed
                return (.found(found), .slidingHit(access, expires: renewed))
            }
            switch lookup {
            case .missing:
                return nil
            case .expired(let location):
                // A renewal this process logged may keep it alive: then it is not removed, and
                // read again.
                guard try removeExpiredEntry(key: key, location: location) else { continue }
                return nil
            case .found(let found):
                return found
            case .damaged(let location):
                if try drop(key: key, location: location) {
                    record(.miss)
                    return nil
                }
            }
        }
        // Each lookup lost the entry's file to an overwrite committed between the lookup and
        // the file read (another store or process replacing the key again and again). Without
        // this last read such a read returned a miss although the key had a value all along.
        return try foundValueUnderWriterLock(forKey: key)
    }

    /// ``foundValue(forKey:)``'s last try: the lookup and the file read under the writer's
    /// lock, where no commit can replace the row, so its file stays until it has been read.
    /// The hit is logged (and a sliding lifetime renewed) as any read's; damaged bytes remove
    /// the entry and expired ones read as a miss, as on the read's usual path.
    func foundValueUnderWriterLock(forKey key: String) throws -> FoundValue? {
        enum Outcome {
            case found(FoundValue, rowID: Int64, renewed: Int64?)
            case miss
            case damaged(DiskIndex.Location)
        }
        let now = configuration.now().milliseconds
        let outcome: Outcome = try withLiveIndex { _, index in
            // Lifetimes this process renewed decide whether the entry is live.
            try withWriteTransaction(index, ranking: .renewalsFirst) { _ in
                guard let location = try index.reads.location(forKey: key) else { return .miss }
                if let expires = location.expires, expires <= now { return .miss }
                guard let data = try decode(location, key: key) else { return .damaged(location) }
                let renewed = location.renewedExpiry(at: now)
                let found = FoundValue(
                    data: data, expires: renewed ?? location.expires, metadata: location.metadata,
                    sliding: location.sliding)
                return .found(found, rowID: location.rowID, renewed: renewed)
            }
        }
        switch outcome {
        case .found(let found, let rowID, let renewed):
            recordHit(rowID: rowID, now: now, renewing: renewed)
            return found
        case .miss:
            record(.miss)
            return nil
        case .damaged(let location):
            // The row was current under the lock, so its bytes are damaged, not replaced.
            _ = try drop(key: key, location: location)
            record(.miss)
            return nil
        }
    }

    /// What one lookup of ``foundValue(forKey:)`` found.
    private enum Lookup {
        case missing
        case expired(DiskIndex.Location)
        case damaged(DiskIndex.Location)
        case found(FoundValue)
    }

    /// The checksum a schema-2 row stores: CRC-32C of the key's UTF-8 bytes, continued over
    /// the stored bytes. Covering the key means a row whose key column was changed (by damage
    /// or by hand) fails its check, with no key digest computed on the read path.
    static func checksum(key: String, stored: Data) -> UInt32 {
        var key = key
        let keyChecksum = key.withUTF8 { CRC32C.checksum(UnsafeRawBufferPointer($0)) }
        return CRC32C.checksum(stored, continuing: keyChecksum)
    }

    /// Whether a schema-1 row found for `key` was written for that key: its `hash` column must
    /// be the key's digest (schema 1's CRC-32 covers only the value). The digest is recognised
    /// by its length, so rows written under another ``Configuration/keyHashing`` still match.
    static func row(_ location: DiskIndex.Location, belongsTo key: String) -> Bool {
        guard let hash = location.hash,
              let hashing = KeyHashing.allCases.first(where: { $0.digestLength * 2 == hash.utf8.count }) else {
            return false
        }
        return hashing.hexDigest(key) == hash
    }

    /// The stored bytes behind `location`, checked and decoded; `nil` when they are damaged.
    func decode(_ location: DiskIndex.Location, key: String) throws -> Data? {
        guard case .intact(let data) = try inspect(location, key: key) else { return nil }
        return data
    }

    /// Removes a damaged entry if the row is still the one that was read. Returns `false` when
    /// the row changed meanwhile (the caller reads again).
    ///
    /// - Parameter isRead: `true` when a read found the damage: it is logged. `verify(repair:)`
    ///   passes `false`; its report lists the entry instead.
    func drop(key: String, location: DiskIndex.Location, isRead: Bool = true) throws -> Bool {
        let removed = try withLiveIndex { state, index in
            let removed = try withWriteTransaction(index, ranking: .asNeeded) { _ in
                try index.deleteIfUnchanged(key: key, location: location)
            }
            if removed { state.statistics.corruptEntriesDropped += 1 }
            return removed
        }
        if removed, let file = location.file { files.remove(name: file) }
        if removed && isRead {
            configuration.logHandler?("dropped damaged entry for key of \(key.utf8.count) bytes")
        }
        return removed
    }

    /// Removes an entry a read found expired, if the row is still the one that was read.
    ///
    /// Returns `false`, removing nothing, when the entry turns out to be alive under the writer's
    /// lock: a sliding lifetime renewed by a ranking of reads that was being written when the
    /// caller read the row (the log no longer held the renewal, the index not yet), or one still
    /// in the log (written here first). The caller then reads again.
    func removeExpiredEntry(key: String, location: DiskIndex.Location) throws -> Bool {
        let now = configuration.now().milliseconds
        let (removed, renewed) = try withLiveIndex { state, index in
            // A sliding lifetime may have been renewed by this process.
            let ranking: LoggedReads = location.sliding != nil ? .renewalsFirst : .asNeeded
            let (removed, renewed) = try withWriteTransaction(index, ranking: ranking) { _ throws -> (Bool, Bool) in
                if location.sliding != nil {
                    if let current = try index.reads.expiry(forKey: key), let expires = current, expires > now {
                        return (false, true)
                    }
                }
                return (try index.deleteIfUnchanged(key: key, location: location), false)
            }
            if removed {
                state.statistics.expirations += 1
                state.recordRemoval(key, .expired)
            }
            return (removed, renewed)
        }
        if removed, let file = location.file { files.remove(name: file) }
        return !renewed
    }

    /// Whether a live (unexpired) entry exists for `key`. Does not read the value or count as
    /// an access.
    public func containsValue(forKey key: String) throws -> Bool {
        let now = configuration.now().milliseconds
        guard let expires = try withReader({ try $0.expiry(forKey: key) }) else { return false }
        if expires.map({ $0 > now }) ?? true { return true }
        // Expired in the index, unless a renewal this process logged says otherwise.
        guard case let expiresAgain?? = try withReaderIfRenewalsWaited({ try $0.expiry(forKey: key) }) else {
            return false
        }
        return expiresAgain.map { $0 > now } ?? true
    }

    /// The index's record of `key` — sizes, encoding, dates, metadata — without reading the
    /// value, or `nil` when there is no live entry. Not counted as an access.
    ///
    /// ``Attributes/accessDate`` is the time of the last read or write ranked so far: reads
    /// are ranked in batches (and under ``EvictionPolicy/s3fifo`` a read of an often-read
    /// entry within 2 s of its recorded use is not recorded; see ``trim(toDate:by:)``).
    public func attributes(forKey key: String) throws -> Attributes? {
        let now = configuration.now().milliseconds
        guard let (attributes, expires) = try withRenewedReader({ try $0.attributes(forKey: key) }) else { return nil }
        if let expires, expires <= now { return nil }
        return attributes
    }

    /// Every live key, in ascending order.
    ///
    /// - Complexity: O(*n*) in the number of entries.
    public func keys() throws -> [String] {
        let now = configuration.now().milliseconds
        return try withRenewedReader { try $0.keys(now: now) }
    }

    /// Every live key that starts with `prefix`, in ascending order (a range scan of the key
    /// index, not a full scan).
    public func keys(withPrefix prefix: String) throws -> [String] {
        let now = configuration.now().milliseconds
        return try withRenewedReader { try $0.keys(withPrefix: prefix, now: now) }
    }

    /// Stored bytes of all entries (after compression), as recorded in the index.
    public var totalSize: Int {
        (try? withReader { try $0.totals().size }) ?? 0
    }

    /// Number of entries, as recorded in the index (expired entries count until removed).
    public var totalCount: Int {
        (try? withReader { try $0.totals().count }) ?? 0
    }

    /// Counters since this store was opened, with the current totals.
    public var statistics: Statistics {
        var statistics = state.withLock { $0.statistics }
        let (hits, misses) = accessLog.counts
        statistics.hits = hits
        statistics.misses = misses
        if let totals = try? withReader({ try $0.totals() }) {
            statistics.totalCount = totals.count
            statistics.totalSize = totals.size
        }
        return statistics
    }
}
